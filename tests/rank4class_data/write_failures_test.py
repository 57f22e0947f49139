"""`rank4class_data.write_failures`: each kind of refused write (ENOSPC, EFBIG, EDQUOT, EROFS, EACCES),
raised by Python, TensorFlow or SQLite, found and named at its target; `cli.guard`'s one line, exit 74."""

import contextlib
import errno
import io
import os
import sqlite3
from unittest import mock

import tensorflow as tf
from absl import flags
from absl.testing import parameterized

from rank4class_cli import cli
from rank4class_data import write_failures

KINDS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EACCES)
# TensorFlow's error class for each kind, as its file systems raise them.
TF_ERRORS = {errno.ENOSPC: tf.errors.ResourceExhaustedError, errno.EFBIG: tf.errors.OutOfRangeError,
             errno.EDQUOT: tf.errors.ResourceExhaustedError, errno.EROFS: tf.errors.PermissionDeniedError,
             errno.EACCES: tf.errors.PermissionDeniedError}
NODE = "{{function_node __wrapped__SaveV2_dtypes_2_device_/job:localhost/replica:0/task:0/device:CPU:0}} "


class FindTest(tf.test.TestCase, parameterized.TestCase):
  """`write_failures.find`: each kind, raised by Python, TensorFlow or SQLite, named at its target."""

  @parameterized.parameters(*KINDS)
  def test_python_error_names_the_target_of_a_temporary(self, number):
    failure = write_failures.find(OSError(number, os.strerror(number), "/d/.out.csv.ab12cd34.tmp"))
    self.assertEqual(failure, write_failures.WriteFailure(number, "/d/out.csv"))

  @parameterized.parameters(*KINDS)
  def test_tensorflow_error_names_the_path_of_its_message(self, number):
    message = (f"{NODE}/r/.export.ab12cd34.tmp/variables/variables_temp/part-00000-of-00001.data-00000-of-"
               f"00001.tempstate123; {os.strerror(number)} [Op:SaveV2]")
    for error_class in (TF_ERRORS[number], tf.errors.UnknownError, tf.errors.FailedPreconditionError):
      self.assertEqual(write_failures.find(error_class(None, None, message)),
                       write_failures.WriteFailure(number, "/r/export"))

  def test_checkpoint_and_summary_writers_name_their_file(self):
    checkpoint = tf.errors.OutOfRangeError(None, None, f"{NODE}/r/backup/ckpt-2_temp/part-0.tempstate9; "
                                                       "File too large [Op:SaveV2]")
    self.assertEqual(write_failures.find(checkpoint).path, "/r/backup/ckpt-2")
    summary = tf.errors.ResourceExhaustedError(None, None, "/r/logs/events.v2; No space left on device\n\t"
                                               "Failed to flush 11 events to /r/logs/events.v2")
    self.assertEqual(write_failures.find(summary),
                     write_failures.WriteFailure(errno.ENOSPC, "/r/logs/events.v2"))

  def test_sqlite_errors_of_a_store_that_cannot_be_written(self):
    for code, number in ((13, errno.ENOSPC), (8, errno.EROFS), (14, errno.EACCES), (10, errno.EIO)):
      error = sqlite3.OperationalError("database or disk is full")
      error.sqlite_errorcode = code
      self.assertEqual(write_failures.find(error, "/c/e.sqlite3"), write_failures.WriteFailure(number,
                                                                                               "/c/e.sqlite3"))

  def test_an_error_raised_from_a_refused_write(self):
    try:
      try:
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), "/q/a.json")
      except OSError as e:
        raise ValueError("could not save") from e
    except ValueError as e:
      self.assertEqual(write_failures.find(e), write_failures.WriteFailure(errno.EDQUOT, "/q/a.json"))

  def test_other_errors_are_not_write_failures(self):
    self.assertIsNone(write_failures.find(FileNotFoundError(errno.ENOENT, "No such file", "/x")))
    self.assertIsNone(write_failures.find(tf.errors.ResourceExhaustedError(
        None, None, "OOM when allocating tensor with shape[2,3] and type float")))
    self.assertIsNone(write_failures.find(ValueError("No space left on device")))


class GuardTest(tf.test.TestCase, parameterized.TestCase):
  """`cli.guard`: one line naming path, reason and what to do; exit 74; `--debug` shows the traceback."""

  def _run(self, error: BaseException, program: str = "prog", argv: tuple[str, ...] = ()):
    values = flags.FlagValues()
    parse = cli.make_flags_parser(values, program, f"{program}: does things.")

    def main(unused_argv):
      raise error

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
      with self.assertRaises(SystemExit) as caught:
        cli.guard(main, program, values)(parse([program, *argv]))
    return caught.exception.code, err.getvalue()

  @parameterized.parameters(
      (errno.ENOSPC, "no space left on device; free space there"),
      (errno.EFBIG, "file too large for the file-size limit; raise the file-size limit \\(ulimit -f\\)"),
      (errno.EDQUOT, "disk quota exceeded; free space within the quota \\(or have it raised\\)"),
      (errno.EROFS, "read-only file system; make it writable, or give a path on a writable file system,"),
      (errno.EACCES, "permission denied; give this user access to it, or give another path,"))
  def test_each_kind_is_one_line_and_exit_74(self, number, words):
    for error in (OSError(number, os.strerror(number), "/out/.p.csv.ab12cd34.tmp"),
                  TF_ERRORS[number](None, None, f"{NODE}/out/p.csv; {os.strerror(number)} [Op:WriteFile]")):
      code, err = self._run(error)
      self.assertEqual(code, write_failures.WRITE_FAILED_EXIT_CODE)
      self.assertRegex(err, f"^prog: error: /out/p\\.csv: {words} and rerun the same command\\.\n$")

  def test_a_training_run_says_it_resumes(self):
    error = tf.errors.OutOfRangeError(None, None, f"{NODE}/run/.export.ab12cd34.tmp/saved_model.pb; File too "
                                                  "large [Op:WriteFile]")
    for program in ("rank4class-train", "pairwise-train"):
      self.assertEqual(self._run(error, program),
                       (74, f"{program}: error: /run/export: file too large for the file-size limit; "
                            "raise the file-size limit (ulimit -f) and rerun the same command: training "
                            "resumes from its last checkpoint.\n"))

  def test_a_full_disk_is_not_out_of_memory_and_debug_shows_the_traceback(self):
    error = tf.errors.ResourceExhaustedError(None, None, "/r/x.data; No space left on device")
    self.assertEqual(self._run(error)[0], 74)
    with self.assertRaises(tf.errors.ResourceExhaustedError):
      self._run(error, argv=("--debug",))

  def test_run_ignores_the_file_size_signal(self):
    with mock.patch.object(cli.app, "run"), mock.patch.object(cli.signal, "signal") as set_handler:
      cli.run(lambda argv: None, cli.make_flags_parser(flags.FlagValues(), "prog", "prog."))
    set_handler.assert_any_call(cli.signal.SIGXFSZ, cli.signal.SIG_IGN)


if __name__ == "__main__":
  tf.test.main()
