"""Test-wide TensorFlow set-up: two logical CPU devices, so multi-replica code runs on a CPU-only machine."""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

# Before any test module: on the current stack it sets TF_USE_LEGACY_KERAS=1 before a test module's imports
# (e.g. tensorflow_hub) resolve tf.keras. Importing tensorflow itself does not resolve it.
import rank4class_data  # noqa: E402,F401

# Must run before TensorFlow initializes its devices, hence at import time of the first conftest.
_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])

# absltest helpers (create_tempdir, flagsaver) read absl flags; pytest never parses them, so take the
# defaults.
from absl import flags  # noqa: E402

if not flags.FLAGS.is_parsed():
  flags.FLAGS.mark_as_parsed()


# The longest single test (the guide's many-class walk-through: ten binaries, one after another) would
# otherwise start wherever it is collected; started late, it runs on after every other test has finished,
# adding its whole length to the suite's time. Run it first instead (its order does not matter to any other
# test). scripts/run_tests.py, docs/BENCHMARKS.md.
_FIRST = ("tests/guide_walkthrough_test.py::ManyClassWalkthroughTest::",)
_ROOT = pathlib.Path(__file__).resolve().parents[1]
if not all((_ROOT / first.split("::")[0]).is_file() for first in _FIRST):
  raise FileNotFoundError(f"tests/conftest.py: _FIRST names a test file that does not exist: {_FIRST}")


def pytest_collection_modifyitems(items):
  items.sort(key=lambda item: not item.nodeid.startswith(_FIRST))  # Stable: the rest keep their order.
