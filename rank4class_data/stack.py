"""Which TensorFlow stack runs (reference or current), with a fast, clear failure on anything else.

Two stacks run the same code:
  reference: Python 3.11, TensorFlow 2.15 with its bundled Keras 2, TF-Ranking 0.5.5 as released.
  current:   Python 3.11-3.13, TensorFlow 2.21 with `tf-keras` 2.21 (Keras 2) as `tf.keras`, TF-Ranking
             0.5.5's Keras modules loaded without its estimator-importing package `__init__`
             (`rank4class_data.tf_ranking`).

Importing this module on the current stack sets `TF_USE_LEGACY_KERAS=1` (when unset) before anything resolves
`tf.keras`, so `tf.keras` is tf-keras (Keras 2) and never Keras 3: users do not have to. It is not set on the
reference stack, where it would swap TensorFlow 2.15's own Keras for the tf-keras package that tensorflow-hub
pulls in, and the two Keras copies would mix.
"""

import contextlib
import dataclasses
import importlib.metadata
import importlib.util
import os
import platform
import re
import sys
import tempfile
import warnings

from google.protobuf.internal import api_implementation

REFERENCE = "reference"
CURRENT = "current"

# TensorFlow (major, minor) of each stack. Other versions are refused: TF 2.16-2.20 are untested and
# TF-Ranking 0.5.5's own files are only known to run on these two.
TENSORFLOW_VERSIONS = {REFERENCE: (2, 15), CURRENT: (2, 21)}
_LEGACY_KERAS_ENV = "TF_USE_LEGACY_KERAS"
_TRUE_VALUES = ("1", "true", "yes")
_INSTALL_HINT = ("Install one supported stack with `bash scripts/install.sh --stack=reference` (Python 3.11, "
                 "tensorflow 2.15.1) or `bash scripts/install.sh --stack=current` (Python 3.11-3.13, "
                 "tensorflow 2.21.0 + tf-keras 2.21.0).")


def _major_minor(version: str) -> tuple[int, int]:
  parts = version.split(".")
  return int(parts[0]), int(parts[1])


def _installed_version(*names: str) -> str | None:
  for name in names:
    try:
      return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      continue
  return None


def _stack_of(tensorflow_version: str, where: str) -> str:
  """Maps a TensorFlow version to its stack; raises ImportError for a version outside both."""
  major_minor = _major_minor(tensorflow_version)
  for name, supported in TENSORFLOW_VERSIONS.items():
    if major_minor == supported:
      return name
  raise ImportError(
      f"tensorflow {tensorflow_version} is {where}, but this toolkit runs on tensorflow 2.15 (reference "
      f"stack) or 2.21 (current stack) only. {_INSTALL_HINT}")


def installed_stack() -> str | None:
  """The stack named by the installed TensorFlow's package metadata (no TensorFlow import); None if absent."""
  version = _installed_version("tensorflow", "tensorflow-cpu")
  return None if version is None else _stack_of(version, "installed")


def _prepare_keras_environment() -> None:
  """On the current stack, makes `tf.keras` resolve to tf-keras (Keras 2) unless the user chose otherwise."""
  try:
    stack = installed_stack()
  except ImportError:
    return  # check_tensorflow_stack() reports it.
  if stack == CURRENT:
    os.environ.setdefault(_LEGACY_KERAS_ENV, "1")
    _route_submodule_imports_to_tf_keras()


def _route_submodule_imports_to_tf_keras() -> None:
  """When TensorFlow was imported before the variable was set, makes `import tensorflow.keras.<x>` find
  tf-keras.

  `tf.keras` itself is resolved lazily (at first use) and follows the variable. But TensorFlow puts Keras 3's
  `keras/_tf_keras` on `tensorflow.__path__` at import and puts tf-keras's API folder in front of it only when
  the variable was already set then; otherwise a later `from tensorflow.keras.<x> import ...`
  (tensorflow-hub's `hub.KerasLayer` does one) binds `tensorflow.keras` to Keras 3, and every layer built
  afterwards is a Keras 3 layer that tf-keras models do not track. This puts tf-keras's folder first, as
  TensorFlow does itself.
  """
  tensorflow = sys.modules.get("tensorflow")
  if tensorflow is None or not hasattr(tensorflow, "__path__") or \
      os.environ.get(_LEGACY_KERAS_ENV, "").lower() not in _TRUE_VALUES:
    return
  try:
    imported = _major_minor(getattr(tensorflow, "__version__", ""))
  except (IndexError, ValueError):
    return
  if imported != TENSORFLOW_VERSIONS[CURRENT]:
    # TensorFlow 2.15 has no Keras 3 to route around; putting the tf-keras that tensorflow-hub installs there
    # in front would make later `tensorflow.keras.<x>` imports load a second Keras next to TF 2.15's own.
    return
  spec = importlib.util.find_spec("tf_keras")
  if spec is None or not spec.submodule_search_locations:
    return
  api_dir = os.path.join(list(spec.submodule_search_locations)[0], "api", "_v2")
  if os.path.isdir(api_dir) and tensorflow.__path__[:1] != [api_dir]:
    tensorflow.__path__[:] = [api_dir] + [p for p in tensorflow.__path__ if p != api_dir]


# TensorFlow's C++ log level: 3 keeps its INFO, WARNING and ERROR lines off stderr.
_NATIVE_LOG_ENV = "TF_CPP_MIN_LOG_LEVEL"
_QUIET_NATIVE_LOGS = "3"
# The toolkit's command-line programs: console scripts (setup.py) and `python -m
# rank4class_cli.binaries.<name>_main`.
_CONSOLE_SCRIPT = re.compile(r"(rank4class|pairwise)-[a-z-]+")
_BINARY_MODULE = re.compile(r"rank4class_cli\.binaries\.\w+_main")
# Flags asking a binary for more than its one-line errors: absl's log verbosity (-v), and the traceback.
_VERBOSE_FLAG = re.compile(r"--?(v|verbosity|debug)(=.*)?")


def _command_line(argv: list[str] | None) -> list[str]:
  """`argv`, or the interpreter's own command line (sys.orig_argv) when None."""
  return list(getattr(sys, "orig_argv", sys.argv) if argv is None else argv)


def _running_binary(argv: list[str]) -> bool:
  """Whether `argv` (sys.orig_argv: the interpreter's own command line) runs one of the toolkit's binaries."""
  if len(argv) > 2 and argv[1] == "-m":
    return bool(_BINARY_MODULE.fullmatch(argv[2]))
  return any(_CONSOLE_SCRIPT.fullmatch(os.path.basename(arg)) for arg in argv[:2])


def _quiet_binary(argv: list[str] | None = None) -> bool:
  """Whether a toolkit binary runs (`argv`, default the interpreter's command line) without --verbosity / -v
  or --debug."""
  argv = _command_line(argv)
  return _running_binary(argv) and not any(_VERBOSE_FLAG.fullmatch(arg) for arg in argv[1:])


# What TensorFlow 2.21's libraries write to stderr while they load, before TF_CPP_MIN_LOG_LEVEL is read:
# absl's notice, then INFO lines such as "I0000 00:00:1795625006.341856   26092 port.cc:153] oneDNN custom
# operations are on. ..." and "... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will
# not be used."
_LOAD_TIME_NATIVE_LINE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|I\d{4} \d\d:\d\d:\d[\d.]* +\d+ [\w.]+:\d+\] .*")


@contextlib.contextmanager
def _load_time_native_lines_dropped(drop: bool):
  """With `drop`, holds back what is written to file descriptor 2 inside the block and then writes it out
  without TensorFlow's load-time INFO lines (`_LOAD_TIME_NATIVE_LINE`); everything else (a warning, an error)
  passes."""
  if not drop:
    yield
    return
  sys.stderr.flush()
  try:
    saved = os.dup(2)
  except OSError:  # No file descriptor 2.
    yield
    return
  with tempfile.TemporaryFile() as held:
    os.dup2(held.fileno(), 2)
    try:
      yield
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      held.seek(0)
      kept = b"".join(line for line in held.read().splitlines(keepends=True)
                      if not _LOAD_TIME_NATIVE_LINE.fullmatch(line.decode("utf-8", "replace").rstrip("\r\n")))
      if kept:
        os.write(2, kept)


def quiet_native_logs_of_binaries(argv: list[str] | None = None,
                                  environ: dict[str, str] | None = None) -> bool:
  """For a toolkit binary, keeps TensorFlow's C++ log lines off stderr, so that bad input is the binary's one
  line.

  TensorFlow reads TF_CPP_MIN_LOG_LEVEL once, when it loads, and its runtime logs warnings of its own before a
  binary can report an error: "Local rendezvous is aborting ..." when an input pipeline fails, "failed call to
  cuInit" on a machine without a GPU driver. Importing the toolkit (the first thing each console script does)
  therefore sets the variable to 3, before TensorFlow loads, when the program is one of the toolkit's
  binaries, the variable is unset, and neither --verbosity / -v nor --debug asks for more; it also hides
  tensorflow_hub's warning that pkg_resources is deprecated (a note for its maintainers). A Python program
  importing the toolkit as a library keeps both. (TensorFlow 2.21 still writes a few INFO lines while its
  libraries load, before any setting is read; `check_tensorflow_stack` holds them back for the same binaries.)

  Returns:
    Whether the variable was set.
  """
  environ = os.environ if environ is None else environ
  if not _quiet_binary(argv):
    return False
  warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
  if _NATIVE_LOG_ENV in environ:
    return False
  environ[_NATIVE_LOG_ENV] = _QUIET_NATIVE_LOGS
  return True


# TensorFlow's CPU allocator: "true" pools the memory of freed tensors (its BFC allocator) for the next ones.
_CPU_POOL_ENV = "TF_CPU_ALLOCATOR_USE_BFC"


def pooled_cpu_memory_of_binaries(argv: list[str] | None = None,
                                  environ: dict[str, str] | None = None) -> bool:
  """For a toolkit binary, has TensorFlow keep the CPU memory of freed tensors for its next ones
  (`TF_CPU_ALLOCATOR_USE_BFC=true`, set before TensorFlow loads), instead of handing each large buffer back to
  the system and faulting fresh pages in at the next step.

  A step's buffers of many logits (a linear path's heads x classes for every row of its batch) are tens of
  megabytes, above the size the C library returns to the system as soon as it is freed: on the many-class
  guide's files (135 classes, 810 rows, 2026-12-07, 2 cores, two pairs of runs) the default run's CPU time
  was a third system time (page faults): 246 and 290 CPU-s against 187 and 190 pooled (wall 156 and 165 s
  against 106 and 158 s), the same result, its peak memory 1.52 -> 1.65 GiB. Set when the program is one of
  the toolkit's binaries (with or without --verbosity) and the variable is unset; a Python program importing
  the toolkit keeps TensorFlow's default.

  Returns:
    Whether the variable was set.
  """
  environ = os.environ if environ is None else environ
  argv = _command_line(argv)
  if not _running_binary(argv) or _CPU_POOL_ENV in environ:
    return False
  environ[_CPU_POOL_ENV] = "true"
  return True


# Run at import, before any module of the toolkit imports TensorFlow.
_prepare_keras_environment()
quiet_native_logs_of_binaries()
pooled_cpu_memory_of_binaries()


@dataclasses.dataclass(frozen=True)
class StackInfo:
  """What runs: the stack's name and the versions that matter for reproducing a result.

  Attributes:
    name: "reference" or "current".
    python: Python version.
    tensorflow: TensorFlow version.
    keras: Version of the Keras 2 that `tf.keras` is.
    keras_package: The package `tf.keras` comes from: "keras" (TF 2.15's bundled) or "tf_keras".
    tensorflow_ranking: TF-Ranking version.
    protobuf: protobuf version and backend ("upb", "cpp" or "python").
    numpy: NumPy version.
  """

  name: str
  python: str
  tensorflow: str
  keras: str
  keras_package: str
  tensorflow_ranking: str | None
  protobuf: str
  numpy: str

  def summary(self) -> str:
    return (f"{self.name} stack: Python {self.python}, tensorflow {self.tensorflow}, {self.keras_package} "
            f"{self.keras} as tf.keras, tensorflow-ranking {self.tensorflow_ranking}, protobuf "
            f"{self.protobuf}, numpy {self.numpy}")


def _keras_version(keras_module) -> str:
  version_fn = getattr(keras_module, "version", None)
  if callable(version_fn):
    return str(version_fn())
  return str(getattr(keras_module, "__version__", "2"))


def check_tensorflow_stack() -> StackInfo:
  """Checks that one supported stack is installed and imported consistently, and says which.

  Package metadata is read first, so an unsupported TensorFlow is reported before anything imports
  `tensorflow_ranking`; then the imported TensorFlow and `tf.keras` are checked against it.

  Returns:
    The running stack.

  Raises:
    ImportError: naming what is installed or imported and what each stack needs: a TensorFlow outside both
      stacks; Keras 3 as `tf.keras` (e.g. `TF_USE_LEGACY_KERAS=0` on the current stack); a tf-keras whose
      version does not match TensorFlow's; a TensorFlow imported that differs from the one installed.
  """
  tf_installed = _installed_version("tensorflow", "tensorflow-cpu")
  if tf_installed is not None:
    _stack_of(tf_installed, "installed")
  with _load_time_native_lines_dropped(_quiet_binary() and "tensorflow" not in sys.modules):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

  name = _stack_of(tf.__version__, "imported")
  if tf_installed is not None and tf_installed != tf.__version__:
    raise ImportError(f"tensorflow {tf.__version__} is imported but {tf_installed} is installed: two "
                      f"TensorFlow installations are mixed on sys.path. {_INSTALL_HINT}")
  keras_version = _keras_version(tf.keras)
  keras_package = tf.keras.__name__.split(".")[0]
  if keras_version.startswith("3"):
    if os.environ.get(_LEGACY_KERAS_ENV, "").lower() in _TRUE_VALUES:
      cause = (f"{_LEGACY_KERAS_ENV}=1 came too late: something (e.g. `import tensorflow_hub`) used tf.keras "
               "before the toolkit was imported. Import rank4class / pairwise / rank4class_data first, or "
               f"export {_LEGACY_KERAS_ENV}=1 before starting Python.")
    else:
      cause = (f"{_LEGACY_KERAS_ENV}={os.environ.get(_LEGACY_KERAS_ENV)!r} here; the toolkit sets it to 1 "
               "when it is unset.")
    raise ImportError(
        f"tf.keras is Keras {keras_version}; this toolkit needs Keras 2 as tf.keras (tensorflow 2.15's own, "
        f"or tf-keras on tensorflow 2.21). {cause}")
  if name == CURRENT:
    tf_keras_version = _installed_version("tf-keras")
    if tf_keras_version is None or _major_minor(tf_keras_version) != _major_minor(tf.__version__):
      raise ImportError(
          f"tensorflow {tf.__version__} needs tf-keras of the same version as tf.keras; found tf-keras "
          f"{tf_keras_version}. {_INSTALL_HINT}")
    if keras_package != "tf_keras":
      raise ImportError(
          f"tf.keras comes from {keras_package!r}, not tf-keras, under tensorflow {tf.__version__}: set "
          f"{_LEGACY_KERAS_ENV}=1 before TensorFlow resolves tf.keras (importing the toolkit first does it).")
  import numpy as np  # pylint: disable=g-import-not-at-top

  return StackInfo(
      name=name, python=platform.python_version(), tensorflow=tf.__version__,
      keras=_installed_version("tf-keras" if keras_package == "tf_keras" else "keras") or keras_version,
      keras_package=keras_package, tensorflow_ranking=_installed_version("tensorflow-ranking"),
      protobuf=f"{_installed_version('protobuf')} ({api_implementation.Type()})", numpy=np.__version__)
