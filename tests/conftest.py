"""Test-wide TensorFlow set-up: two logical CPU devices, so multi-replica code runs on a CPU-only machine."""

import os

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


# The longest single test (~90 s on 2 cores) is collected last; under pytest-xdist it then runs alone after
# every other test has finished, adding its whole length to the suite's time. Run it first instead (its order
# does not matter to any other test). scripts/run_tests.py, docs/BENCHMARKS.md.
_FIRST = ("tests/readme_walkthrough_test.py::",)


def pytest_collection_modifyitems(items):
  items.sort(key=lambda item: not item.nodeid.startswith(_FIRST))  # Stable: the rest keep their order.
