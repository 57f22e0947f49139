"""Tests for rank4class_cli.cli: per-binary flags, validators naming allowed values, one-line flag errors."""

import contextlib
import io
import os
import signal

import tensorflow as tf
from absl import flags

from rank4class_cli import cli
from rank4class_data import tfrecords
from rank4class_data.validation import DataError
from rank4class_engine import trainer


def _flag_values() -> flags.FlagValues:
  values = flags.FlagValues()
  flags.DEFINE_string("loss", "softmax", "The loss.", flag_values=values)
  flags.DEFINE_integer("steps", 10, "Steps.", flag_values=values)
  cli.register_choices(values, {"loss": ("softmax", "mse")})
  return values


def _parse(argv: list[str], check=None) -> tuple[int | None, str, str, flags.FlagValues]:
  values = _flag_values()
  parse = cli.make_flags_parser(values, "prog", "prog: does things.", check)
  out, err = io.StringIO(), io.StringIO()
  code = None
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
      parse(["prog", *argv])
    except SystemExit as e:
      code = e.code
  return code, out.getvalue(), err.getvalue(), values


class CliTest(tf.test.TestCase):

  def test_good_flags_parse_into_their_own_registry(self):
    code, _, err, values = _parse(["--loss=mse", "--steps=3"])
    self.assertEqual((code, err, values.loss, values.steps), (None, "", "mse", 3))

  def test_value_outside_the_choices_is_one_line_naming_them(self):
    code, _, err, _ = _parse(["--loss=hinge"])
    self.assertEqual(code, 2)
    self.assertEqual(err.splitlines(), [err.strip()])
    self.assertRegex(err, r"^prog: error: .*--loss must be one of softmax, mse")

  def test_unknown_flag_is_one_line(self):
    code, _, err, _ = _parse(["--colour=red"])
    self.assertEqual(code, 2)
    self.assertRegex(err, r"^prog: error: .*colour")

  def test_check_errors_are_one_line(self):
    def check(values):
      raise ValueError(f"--steps={values.steps} is too small")

    code, _, err, _ = _parse(["--steps=1"], check)
    self.assertEqual((code, err), (2, "prog: error: --steps=1 is too small\n"))

  def test_help_lists_the_binary_flags_with_defaults(self):
    code, out, _, _ = _parse(["--help"])
    self.assertEqual(code, 0)
    self.assertStartsWith(out, "prog: does things.\nflags:\n")
    self.assertIn("--steps: Steps.", out)
    self.assertIn("(default: '10')", out)



class GuardTest(tf.test.TestCase):

  def _run(self, error: BaseException, argv: list[str]) -> tuple[int | None, str]:
    values = _flag_values()
    parse = cli.make_flags_parser(values, "prog", "prog: does things.")

    def main(unused_argv):
      raise error

    err = io.StringIO()
    code = None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
      try:
        cli.guard(main, "prog", values)(parse(["prog", *argv]))
      except SystemExit as e:
        code = e.code
    return code, err.getvalue()

  def test_input_errors_are_one_line_and_exit_1(self):
    bad_row = DataError("rows.csv", "empty text", row=3, field="text", expected="a non-empty text")
    self.assertEqual(self._run(bad_row, []),
                     (1, "prog: error: rows.csv, row 3, field 'text': empty text; expected a non-empty text.\n"))
    self.assertEqual(self._run(FileNotFoundError(2, "No such file or directory", "/x/y.csv"), []),
                     (1, "prog: error: [Errno 2] No such file or directory: '/x/y.csv'\n"))
    self.assertEqual(self._run(ValueError("two\nlines"), []), (1, "prog: error: two lines\n"))

  def test_a_stopped_training_exits_with_its_signal(self):
    interrupted = trainer.TrainingInterrupted("/runs/a", 37, 37, signal.SIGINT)
    terminated = trainer.TrainingInterrupted("/runs/a", 37, 37, signal.SIGTERM)
    where = "stopped at step 37 of the run in /runs/a; rerun the same command to resume from the checkpoint of step 37"
    self.assertEqual(self._run(interrupted, []), (130, f"prog: interrupted; {where}.\n"))
    self.assertEqual(self._run(terminated, []), (143, f"prog: terminated; {where}.\n"))
    self.assertEqual(self._run(KeyboardInterrupt(), []), (130, "prog: interrupted; nothing was left half-written.\n"))

  def test_a_bad_record_inside_tf_data_is_its_located_message(self):
    error = tf.errors.InvalidArgumentError(None, None, "{{function_node x}} Error in user-defined function passed "
                                           "to ParallelMapDatasetV2: assertion failed: [a.tfrecord, row 3, field "
                                           "label: label out of range; expected a class id in [0, 10).]\n [[{{node "
                                           "Assert}}]]")
    self.assertEqual(self._run(error, []), (1, "prog: error: a.tfrecord, row 3, field label: label out of range; "
                                               "expected a class id in [0, 10).\n"))
    with self.assertRaises(tf.errors.InvalidArgumentError):  # Not ours: a defect, with its traceback.
      self._run(tf.errors.InvalidArgumentError(None, None, "Incompatible shapes: [2] vs. [3]"), [])

  def test_debug_shows_the_traceback(self):
    with self.assertRaisesRegex(ValueError, "bad"):
      self._run(ValueError("bad"), ["--debug"])

  def test_a_corrupted_tfrecord_read_by_a_pipeline_is_one_line_naming_it(self):
    path = os.path.join(self.create_tempdir().full_path, "train.tfrecord")
    schema = tfrecords.ExampleSchema()
    tfrecords.write_instances(path, [tfrecords.ClassificationInstance(0, "doc")] * 3, schema)
    with open(path, "r+b") as f:  # The last byte of the third record's data: framed whole, its checksum fails.
      f.seek(os.path.getsize(path) - 5)
      f.write(b"?")
    with self.assertRaises(tf.errors.DataLossError) as caught:
      list(tfrecords.make_dataset(tfrecords.InputConfig(path, batch_size=2, shuffle=False), schema))
    # 3 records of 51 bytes (12 header + 35 tf.Example + 4 checksum): the third's data starts at byte 102 + 12.
    self.assertEqual(self._run(caught.exception, []),
                     (1, f"prog: error: {path}, row 3: corrupted record at byte 114 (checksum mismatch); "
                         "expected a complete TFRecord file (write or copy it again).\n"))
    with self.assertRaises(tf.errors.DataLossError):
      self._run(caught.exception, ["--debug"])
    with self.assertRaises(tf.errors.DataLossError):  # No pipeline read a broken file: not ours to explain.
      self._run(tf.errors.DataLossError(None, None, "corrupted record at 999999999"), [])

  def test_out_of_memory_is_one_line_naming_the_tensor_and_op(self):
    error = tf.errors.ResourceExhaustedError(
        None, None, "{{function_node __inference_<lambda>_4003}} OOM when allocating tensor with shape[2048,1098,"
        "1098] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator mklcpu\n\t [[{{node "
        "GumbelApproxNDCGLoss/Tile_1}}]]\nHint: If you want to see a list of allocated tensors when OOM happens")
    self.assertEqual(self._run(error, []), (1, "prog: error: out of memory allocating a float tensor of "
                                               "shape[2048,1098,1098] (op GumbelApproxNDCGLoss/Tile_1); expected a "
                                               "smaller batch (--batch_size) or fewer classes per list; --debug "
                                               "shows the traceback.\n"))
    with self.assertRaises(tf.errors.ResourceExhaustedError):
      self._run(error, ["--debug"])

  def test_defects_are_not_hidden(self):
    with self.assertRaisesRegex(KeyError, "oops"):
      self._run(KeyError("oops"), [])

if __name__ == "__main__":
  tf.test.main()
