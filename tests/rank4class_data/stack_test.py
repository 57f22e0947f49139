"""Tests for rank4class_data.stack: one of the two supported stacks runs, and anything else fails fast."""

import importlib.metadata
import os
import subprocess
import sys
import tempfile
import warnings
from unittest import mock

import tensorflow as tf

from rank4class_data import stack

_real_version = importlib.metadata.version


def _metadata_versions(**versions: str):
  """importlib.metadata.version that reports the given versions (keys with '_' for '-') and the real
  others."""
  by_name = {name.replace("_", "-"): version for name, version in versions.items()}
  return lambda name: by_name[name] if name in by_name else _real_version(name)


class CheckTensorflowStackTest(tf.test.TestCase):

  def test_installed_stack_is_reported(self):
    info = stack.check_tensorflow_stack()
    expected = {"2.15": (stack.REFERENCE, "keras"), "2.21": (stack.CURRENT, "tf_keras")}
    name, keras_package = expected[".".join(tf.__version__.split(".")[:2])]
    self.assertEqual((info.name, info.keras_package, info.tensorflow), (name, keras_package, tf.__version__))
    self.assertTrue(info.keras.startswith("2."), info.keras)
    self.assertStartsWith(info.summary(), f"{name} stack: Python ")

  def test_protobuf_backend_is_reported(self):
    self.assertRegex(stack.check_tensorflow_stack().protobuf, r"^\d+\.\d+\.\d+ \((upb|cpp|python)\)$")

  def test_tensorflow_outside_both_stacks_in_metadata_raises(self):
    for version in ("2.16.0", "2.14.1", "2.20.0"):
      with mock.patch.object(importlib.metadata, "version",
                             side_effect=_metadata_versions(tensorflow=version)):
        with self.assertRaisesRegex(
            ImportError, rf"tensorflow {version.replace('.', '[.]')} is installed, but this toolkit runs on "
            r"tensorflow 2\.15 \(reference stack\) or 2\.21 \(current stack\) only\. Install one "
            r"supported stack"):
          stack.check_tensorflow_stack()

  def test_installed_and_imported_tensorflow_differ_raises(self):
    other = "2.21.0" if tf.__version__.startswith("2.15") else "2.15.1"
    with mock.patch.object(importlib.metadata, "version", side_effect=_metadata_versions(tensorflow=other)):
      with self.assertRaisesRegex(ImportError,
                                  rf"tensorflow {tf.__version__} is imported but {other} is installed"):
        stack.check_tensorflow_stack()

  def test_keras_3_as_tf_keras_raises(self):
    with mock.patch.object(tf.keras, "version", return_value="3.1.0", create=True), \
        mock.patch.dict(os.environ, {"TF_USE_LEGACY_KERAS": "0"}):
      with self.assertRaisesRegex(ImportError, r"tf\.keras is Keras 3\.1\.0; this toolkit needs Keras 2 .*"
                                  r"TF_USE_LEGACY_KERAS='0' here"):
        stack.check_tensorflow_stack()

  def test_keras_3_resolved_before_the_toolkit_raises_with_the_cause(self):
    with mock.patch.object(tf.keras, "version", return_value="3.1.0", create=True), \
        mock.patch.dict(os.environ, {"TF_USE_LEGACY_KERAS": "1"}):
      with self.assertRaisesRegex(ImportError, r"TF_USE_LEGACY_KERAS=1 came too late: something \(e\.g\. "
                                  r"`import tensorflow_hub`\) used tf\.keras before the "
                                  r"toolkit was imported"):
        stack.check_tensorflow_stack()

  def test_installed_stack_reads_metadata_only(self):
    with mock.patch.object(importlib.metadata, "version",
                           side_effect=_metadata_versions(tensorflow="2.21.0")):
      self.assertEqual(stack.installed_stack(), stack.CURRENT)
    with mock.patch.object(importlib.metadata, "version",
                           side_effect=_metadata_versions(tensorflow="2.15.1")):
      self.assertEqual(stack.installed_stack(), stack.REFERENCE)


class CurrentStackTest(tf.test.TestCase):
  """The current stack's own checks: tf-keras as tf.keras, of TensorFlow's version."""

  def setUp(self):
    super().setUp()
    if stack.check_tensorflow_stack().name != stack.CURRENT:
      self.skipTest("runs on the current stack (the reference stack's suite runs the reference checks)")

  def test_legacy_keras_is_set_by_the_package(self):
    self.assertEqual(os.environ.get("TF_USE_LEGACY_KERAS"), "1")
    self.assertStartsWith(tf.keras.__name__, "tf_keras")

  def test_mismatched_tf_keras_raises(self):
    with mock.patch.object(importlib.metadata, "version", side_effect=_metadata_versions(tf_keras="2.15.1")):
      with self.assertRaisesRegex(ImportError, r"needs tf-keras of the same version as tf\.keras; found "
                                  r"tf-keras 2\.15\.1"):
        stack.check_tensorflow_stack()

  def test_missing_tf_keras_raises(self):
    def version(name):
      if name == "tf-keras":
        raise importlib.metadata.PackageNotFoundError(name)
      return _real_version(name)

    with mock.patch.object(importlib.metadata, "version", side_effect=version):
      with self.assertRaisesRegex(ImportError, r"found tf-keras None"):
        stack.check_tensorflow_stack()


class PrepareKerasEnvironmentTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    # The routing below edits tensorflow.__path__ for the rest of the process: each test gets it back.
    self.enter_context(mock.patch.object(tf, "__path__", list(tf.__path__)))

  def test_current_stack_sets_legacy_keras_when_unset(self):
    with mock.patch.dict(os.environ, clear=False) as env, \
        mock.patch.object(stack, "installed_stack", return_value=stack.CURRENT):
      env.pop("TF_USE_LEGACY_KERAS", None)
      stack._prepare_keras_environment()
      self.assertEqual(os.environ["TF_USE_LEGACY_KERAS"], "1")

  def test_routing_leaves_tensorflow_2_15_alone(self):
    # Found in CI: with the routing run on TF 2.15 (stack mocked as current), a later `tensorflow.keras.<x>`
    # import loaded the tf-keras that tensorflow-hub installs next to TF 2.15's own Keras, and Keras objects
    # of the two copies stopped serializing and dispatching for the rest of the test process.
    before = list(tf.__path__)
    with mock.patch.dict(os.environ, {"TF_USE_LEGACY_KERAS": "1"}), \
        mock.patch.object(tf, "__version__", "2.15.1"):
      stack._route_submodule_imports_to_tf_keras()
    self.assertEqual(list(tf.__path__), before)

  def test_current_stack_keeps_a_user_choice(self):
    with mock.patch.dict(os.environ, {"TF_USE_LEGACY_KERAS": "0"}), \
        mock.patch.object(stack, "installed_stack", return_value=stack.CURRENT):
      stack._prepare_keras_environment()
      self.assertEqual(os.environ["TF_USE_LEGACY_KERAS"], "0")

  def test_reference_stack_leaves_it_unset(self):
    # On TF 2.15 the variable would swap its own Keras for the tf-keras package tensorflow-hub installs.
    with mock.patch.dict(os.environ, clear=False) as env, \
        mock.patch.object(stack, "installed_stack", return_value=stack.REFERENCE):
      env.pop("TF_USE_LEGACY_KERAS", None)
      stack._prepare_keras_environment()
      self.assertNotIn("TF_USE_LEGACY_KERAS", os.environ)

  def test_tensorflow_imported_first_still_gives_tf_keras_to_submodule_imports(self):
    # tensorflow-hub's KerasLayer runs `from tensorflow.keras.<x> import ...`; with TensorFlow imported before
    # the toolkit, that import used to bind tf.keras to Keras 3 for the rest of the process.
    if stack.installed_stack() != stack.CURRENT:
      self.skipTest("TensorFlow 2.15 has no Keras 3 on its path.")
    script = ("import importlib, os, tensorflow as tf\n"
              "import rank4class_data\n"
              "importlib.import_module('tensorflow.keras.layers')\n"
              "print(tf.keras.layers.Dense.__module__)\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                            timeout=300, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertEqual(result.stdout.split(), ["tf_keras.src.layers.core.dense"])


class QuietNativeLogsTest(tf.test.TestCase):
  """The binaries keep TensorFlow's C++ log lines off stderr (one line per error); library users keep them.
  (A real console-script run: tests/bad_input_test.py.)"""

  def setUp(self):
    super().setUp()
    self.enter_context(warnings.catch_warnings())  # The function adds a warnings filter for binaries.

  def test_binaries_set_the_log_level_before_tensorflow_loads(self):
    for argv in (["/v/bin/python", "/v/bin/rank4class-evaluate", "--model_dir=m"],
                 ["/v/bin/python", "/v/bin/pairwise-train"],
                 ["python3", "-m", "rank4class_cli.binaries.predict_main", "--input=x"],
                 ["python3", "-m", "rank4class_cli.binaries.convert_main"]):
      environ = {}
      self.assertTrue(stack.quiet_native_logs_of_binaries(argv, environ), argv)
      self.assertEqual(environ, {"TF_CPP_MIN_LOG_LEVEL": "3"})

  def test_library_users_verbose_runs_and_the_users_setting_are_left_alone(self):
    for argv in (["python3", "train.py"], ["python3", "-m", "pytest", "tests"], ["python3", "-c", "import x"],
                 ["python3", "-m", "rank4class.studies.study"],
                 ["/v/bin/python", "/v/bin/rank4class-train", "--verbosity=1"],
                 ["/v/bin/python", "/v/bin/rank4class-train", "-v", "1"],
                 ["python3", "-m", "rank4class_cli.binaries.train_main", "--debug"]):
      environ = {}
      self.assertFalse(stack.quiet_native_logs_of_binaries(argv, environ), argv)
      self.assertEqual(environ, {})
    environ = {"TF_CPP_MIN_LOG_LEVEL": "0"}
    self.assertFalse(stack.quiet_native_logs_of_binaries(["/v/bin/python", "/v/bin/rank4class-train"],
                                                         environ))
    self.assertEqual(environ, {"TF_CPP_MIN_LOG_LEVEL": "0"})


  def test_tensorflows_load_time_info_lines_are_held_back_and_the_rest_passes(self):
    written = (b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
               b"I0000 00:00:1795625006.341856   26092 port.cc:153] oneDNN custom operations are on. You may "
               b"see\nI0000 00:00:1795625006.342187   26092 cudart_stub.cc:31] Could not find cuda drivers "
               b"on your machine, GPU will not be used.\n"
               b"E0000 00:00:1795625006.342187   26092 loader.cc:1] a real error\nTraceback: kept\n")
    for drop, expected in ((True, b"E0000 00:00:1795625006.342187   26092 loader.cc:1] a real error\n"
                                  b"Traceback: kept\n"), (False, written)):
      with tempfile.TemporaryFile() as fd_2:
        saved = os.dup(2)
        os.dup2(fd_2.fileno(), 2)
        try:
          with stack._load_time_native_lines_dropped(drop):
            os.write(2, written)
        finally:
          os.dup2(saved, 2)
          os.close(saved)
        fd_2.seek(0)
        self.assertEqual(fd_2.read(), expected)

  def test_a_binarys_help_shows_no_native_log_line_or_third_party_warning(self):
    result = subprocess.run([sys.executable, "-m", "rank4class_cli.binaries.convert_main", "--help"],
                            capture_output=True,
                            text=True, timeout=300, env={k: v for k, v in os.environ.items()
                                                         if k != "TF_CPP_MIN_LOG_LEVEL"})
    self.assertEqual(result.returncode, 0, msg=result.stderr[-2000:])
    self.assertIn("rank4class-convert", result.stdout + result.stderr)
    for noise in ("I0000", "absl::InitializeLog", "cuda", "oneDNN", "pkg_resources", "Warning"):
      self.assertNotIn(noise, result.stdout + result.stderr)


class PooledCpuMemoryTest(tf.test.TestCase):
  """The binaries pool TensorFlow's CPU memory (its BFC allocator); library users keep TensorFlow's
  default."""

  def test_binaries_with_or_without_verbosity_ask_for_the_pool(self):
    for argv in (["/v/bin/python", "/v/bin/rank4class-train", "--model_dir=m"],
                 ["/v/bin/python", "/v/bin/pairwise-train", "-v", "1"],
                 ["python3", "-m", "rank4class_cli.binaries.predict_main", "--debug"]):
      environ = {}
      self.assertTrue(stack.pooled_cpu_memory_of_binaries(argv, environ), argv)
      self.assertEqual(environ, {"TF_CPU_ALLOCATOR_USE_BFC": "true"})

  def test_library_users_and_the_users_setting_are_left_alone(self):
    for argv in (["python3", "train.py"], ["python3", "-m", "pytest", "tests"],
                 ["python3", "-m", "rank4class.studies.study"]):
      environ = {}
      self.assertFalse(stack.pooled_cpu_memory_of_binaries(argv, environ), argv)
      self.assertEqual(environ, {})
    environ = {"TF_CPU_ALLOCATOR_USE_BFC": "false"}
    self.assertFalse(stack.pooled_cpu_memory_of_binaries(["/v/bin/python", "/v/bin/rank4class-train"],
                                                         environ))
    self.assertEqual(environ, {"TF_CPU_ALLOCATOR_USE_BFC": "false"})


if __name__ == "__main__":
  tf.test.main()
