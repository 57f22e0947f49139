"""Tests for rank4class_cli.cli: per-binary flags, validators naming allowed values, one-line flag errors."""

import contextlib
import io
import os
import pathlib
import re
import signal
import sys

import tensorflow as tf
from absl import flags
from absl.testing import parameterized

from rank4class_cli import cli
from rank4class_cli.binaries import evaluate_main, pairwise_main, ranksvm_main
from rank4class_data.records import tfrecords
from rank4class_data.validation import DataError
from rank4class_engine.loop import trainer


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



def _aliased_flag_values() -> flags.FlagValues:
  values = _flag_values()
  flags.DEFINE_bool("export", True, "Export.", flag_values=values)
  define = cli.FlagDefiner(values)
  define.alias("num_steps", "steps")
  define.alias("max_steps", "steps")
  define.alias("save", "export")
  return values


class AliasTest(tf.test.TestCase):
  """`FlagDefiner.alias`: a renamed flag's old name sets the new flag, with one warning line."""

  def _parse(self, argv: list[str]) -> tuple[int | None, str, str, flags.FlagValues]:
    values = _aliased_flag_values()
    parse = cli.make_flags_parser(values, "prog", "prog: does things.")
    out, err = io.StringIO(), io.StringIO()
    code = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
      try:
        parse(["prog", *argv])
      except SystemExit as e:
        code = e.code
    return code, out.getvalue(), err.getvalue(), values

  def test_old_name_sets_the_new_flag_with_one_warning_line(self):
    for argv in (["--num_steps=3"], ["--num_steps", "3"], ["-num_steps=3"],
                 ["--num_steps=3", "--num_steps=3"]):
      code, _, err, values = self._parse(argv)
      self.assertEqual((code, values.steps), (None, 3), argv)
      self.assertEqual(err, "--num_steps is deprecated; use --steps (same meaning).\n", argv)

  def test_a_bool_old_name_and_its_negation(self):
    code, _, err, values = self._parse(["--nosave"])
    self.assertEqual((code, values.export, err),
                     (None, False, "--save is deprecated; use --export (same meaning).\n"))
    self.assertTrue(self._parse(["--save"])[3].export)

  def test_old_and_new_name_together_is_one_line(self):
    code, _, err, _ = self._parse(["--num_steps=3", "--steps=4"])
    self.assertEqual((code, err), (2, "prog: error: --num_steps is the deprecated name of --steps: give "
                                      "--steps only, not both\n"))

  def test_two_old_names_of_one_flag_is_one_line(self):
    code, _, err, _ = self._parse(["--max_steps=3", "--num_steps=4"])
    self.assertEqual((code, err), (2, "prog: error: --max_steps and --num_steps are deprecated names of one "
                                      "flag, --steps: give --steps once\n"))

  def test_words_after_the_end_of_flags_are_left_alone(self):
    self.assertEqual(cli.resolve_aliases(["prog", "--", "--num_steps=3"], _aliased_flag_values(),
                                         warn=self.fail),
                     ["prog", "--", "--num_steps=3"])

  def test_help_lists_the_old_names(self):
    code, out, _, _ = self._parse(["--help"])
    self.assertEqual(code, 0)
    self.assertEndsWith(out, "deprecated flag names (removed in 0.10.0):\n"
                             "  --max_steps: use --steps (same meaning)\n"
                             "  --num_steps: use --steps (same meaning)\n"
                             "  --save: use --export (same meaning)\n")

  def test_an_alias_of_an_undefined_flag_or_of_a_defined_name_raises(self):
    define = cli.FlagDefiner(_flag_values())
    with self.assertRaisesRegex(ValueError, "--colour, which is not defined"):
      define.alias("color", "colour")
    with self.assertRaisesRegex(ValueError, "--loss is a flag of its own"):
      define.alias("loss", "steps")


# Every deprecated flag name of the binaries: (binary, old name, new name, a value, the flags the binary
# requires besides, the new flag's value parsed).
DEPRECATED_FLAGS = (
    (evaluate_main, "data_files", "input", "test.csv", ["--model_dir=/m"], "test.csv"),
    (pairwise_main, "data_files", "train_files", "rows.csv", ["--model_dir=/m"], "rows.csv"),
    (ranksvm_main, "data_format", "input_format", "libsvm", [], "libsvm"),
    (ranksvm_main, "data_dir", "input", "/data", [], "/data"),
    (ranksvm_main, "data_path", "input", "lists.svm", [], "lists.svm"),
    (ranksvm_main, "ng_num_queries", "num_queries", "7", [], 7),
)
_NAMED = [(f"{row[0].__name__.rsplit('.', 1)[-1]}_{row[1]}", *row) for row in DEPRECATED_FLAGS]


class DeprecatedFlagNamesTest(tf.test.TestCase, parameterized.TestCase):
  """Each binary's old flag names (deprecated in 0.9.0, removed in 0.10.0) still work, each with one warning
  line naming the new flag; an old name beside its new one is refused in one line."""

  def _parse(self, binary, argv: list[str]) -> tuple[int | None, str]:
    parse = cli.make_flags_parser(binary.FLAGS, "prog", "")  # The binary's flags without its config check.
    err = io.StringIO()
    try:
      with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        parse(["prog", *argv])
      return None, err.getvalue()
    except SystemExit as e:
      return e.code, err.getvalue()

  def tearDown(self):
    for binary in {row[0] for row in DEPRECATED_FLAGS}:
      binary.FLAGS.unparse_flags()
    super().tearDown()

  def test_the_table_holds_every_alias_of_every_binary(self):
    for binary in {row[0] for row in DEPRECATED_FLAGS}:
      self.assertEqual(cli.aliases(binary.FLAGS),
                       {old: new for b, old, new, *_ in DEPRECATED_FLAGS if b is binary}, binary.__name__)

  def test_docs_and_scripts_show_only_the_new_names(self):
    # The changelog tells the history, and the CLI reference lists the old names as deprecated.
    root = pathlib.Path(__file__).resolve().parents[2]
    files = [root / "README.md", root / "data" / "README.md", *sorted((root / "docs").glob("*.md")),
             *sorted((root / "docs" / "guide").glob("*.md")), *sorted((root / "scripts").glob("*.py")),
             *sorted((root / "bench").glob("*.py")), *sorted((root / ".ci").glob("*"))]
    old = re.compile("--(" + "|".join(sorted({row[1] for row in DEPRECATED_FLAGS})) + r")\b")
    shown = [f"{path.relative_to(root)}:{number}" for path in files if path.is_file()
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(),
                                           1) if old.search(line)]
    self.assertEqual(shown, [])

  @parameterized.named_parameters(_NAMED)
  def test_old_name_works_with_one_warning_line(self, binary, old, new, value, required, parsed):
    code, err = self._parse(binary, [*required, f"--{old}={value}"])
    self.assertEqual((code, err), (None, f"--{old} is deprecated; use --{new} (same meaning).\n"))
    self.assertEqual(binary.FLAGS[new].value, parsed)
    self.assertIn(f"  --{old}: use --{new} (same meaning)\n", binary.parse_flags.help_text())

  @parameterized.named_parameters(_NAMED)
  def test_old_and_new_name_together_is_refused_in_one_line(self, binary, old, new, value, required, parsed):
    del parsed
    code, err = self._parse(binary, [*required, f"--{new}={value}", f"--{old}={value}"])
    self.assertEqual((code, err), (2, f"prog: error: --{old} is the deprecated name of --{new}: give --{new} "
                                      "only, not both\n"))


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
                     (1, "prog: error: rows.csv, row 3, field 'text': empty text; expected a "
                      "non-empty text.\n"))
    self.assertEqual(self._run(FileNotFoundError(2, "No such file or directory", "/x/y.csv"), []),
                     (1, "prog: error: [Errno 2] No such file or directory: '/x/y.csv'\n"))
    self.assertEqual(self._run(ValueError("two\nlines"), []), (1, "prog: error: two lines\n"))

  def test_a_stopped_training_exits_with_its_signal(self):
    interrupted = trainer.TrainingInterrupted("/runs/a", 37, 37, signal.SIGINT)
    terminated = trainer.TrainingInterrupted("/runs/a", 37, 37, signal.SIGTERM)
    where = ("stopped at step 37 of the run in /runs/a; rerun the same command to resume from the "
             "checkpoint of step 37")
    self.assertEqual(self._run(interrupted, []), (130, f"prog: interrupted; {where}.\n"))
    self.assertEqual(self._run(terminated, []), (143, f"prog: terminated; {where}.\n"))
    self.assertEqual(self._run(KeyboardInterrupt(), []),
                     (130, "prog: interrupted; nothing was left half-written.\n"))

  def test_a_bad_record_inside_tf_data_is_its_located_message(self):
    error = tf.errors.InvalidArgumentError(None, None, "{{function_node x}} Error in user-defined function "
                                           "passed to ParallelMapDatasetV2: assertion failed: [a.tfrecord, "
                                           "row 3, field label: label out of range; expected a class id in "
                                           "[0, 10).]\n [[{{node Assert}}]]")
    self.assertEqual(self._run(error, []), (1, "prog: error: a.tfrecord, row 3, field label: label out of "
                                               "range; expected a class id in [0, 10).\n"))
    with self.assertRaises(tf.errors.InvalidArgumentError):  # Not ours: a defect, with its traceback.
      self._run(tf.errors.InvalidArgumentError(None, None, "Incompatible shapes: [2] vs. [3]"), [])

  def test_debug_shows_the_traceback(self):
    with self.assertRaisesRegex(ValueError, "bad"):
      self._run(ValueError("bad"), ["--debug"])

  def test_a_corrupted_tfrecord_read_by_a_pipeline_is_one_line_naming_it(self):
    path = os.path.join(self.create_tempdir().full_path, "train.tfrecord")
    schema = tfrecords.ExampleSchema()
    tfrecords.write_instances(path, [tfrecords.ClassificationInstance(0, "doc")] * 3, schema)
    # The last byte of the third record's data: framed whole, its checksum fails.
    with open(path, "r+b") as f:
      f.seek(os.path.getsize(path) - 5)
      f.write(b"?")
    with self.assertRaises(tf.errors.DataLossError) as caught:
      list(tfrecords.make_dataset(tfrecords.InputConfig(path, batch_size=2, shuffle=False), schema))
    # 3 records of 51 bytes (12 header + 35 tf.Example + 4 checksum): the third's data starts at byte 102 +
    # 12.
    self.assertEqual(self._run(caught.exception, []),
                     (1, f"prog: error: {path}, row 3: corrupted record at byte 114 (checksum mismatch); "
                         "expected a complete TFRecord file (write or copy it again).\n"))
    with self.assertRaises(tf.errors.DataLossError):
      self._run(caught.exception, ["--debug"])
    with self.assertRaises(tf.errors.DataLossError):  # No pipeline read a broken file: not ours to explain.
      self._run(tf.errors.DataLossError(None, None, "corrupted record at 999999999"), [])

  def test_out_of_memory_is_one_line_naming_the_tensor_and_op(self):
    error = tf.errors.ResourceExhaustedError(
        None, None, "{{function_node __inference_<lambda>_4003}} OOM when allocating tensor with "
        "shape[2048,1098,1098] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator "
        "mklcpu\n\t [[{{node GumbelApproxNDCGLoss/Tile_1}}]]\n"
        "Hint: If you want to see a list of allocated tensors when OOM happens")
    self.assertEqual(self._run(error, []), (1, "prog: error: out of memory allocating a float tensor of "
                                               "shape[2048,1098,1098] (op GumbelApproxNDCGLoss/Tile_1); "
                                               "expected a smaller batch (--batch_size) or fewer classes per "
                                               "list; --debug shows the traceback.\n"))
    with self.assertRaises(tf.errors.ResourceExhaustedError):
      self._run(error, ["--debug"])

  def test_defects_are_not_hidden(self):
    with self.assertRaisesRegex(KeyError, "oops"):
      self._run(KeyError("oops"), [])

class FlagWordsTest(tf.test.TestCase):
  """Library messages name config fields in backticks; a binary shows its flags instead (`cli.flag_words`)."""

  def _values(self) -> flags.FlagValues:
    values = _flag_values()
    flags.DEFINE_string("input", None, "Input.", flag_values=values)
    flags.DEFINE_bool("overwrite_model_dir", False, "Overwrite.", flag_values=values)
    cli.FlagDefiner(values).field_flags({"data.data_path": "input", "data_path": "input",
                                         "overwrite": "overwrite_model_dir", "train.steps": None})
    return values

  def test_a_field_in_the_table_is_its_flag(self):
    self.assertEqual(cli.flag_words("`data.data_path` is empty; rerun with `overwrite` to start afresh.",
                                    self._values()),
                     "--input is empty; rerun with --overwrite_model_dir to start afresh.")

  def test_a_field_spelled_as_a_flag_is_that_flag(self):
    self.assertEqual(cli.flag_words("`loss`=mse needs `model.steps` >= 1, got 0.", self._values()),
                     "--loss=mse needs --steps >= 1, got 0.")

  def test_a_field_without_a_flag_stays_as_written(self):
    values = self._values()
    self.assertEqual(cli.flag_words("`train.steps` must be >= 1; `width` too; 'loss' and `a b` are not "
                                    "fields; `debug` is no setting.", values),
                     "`train.steps` must be >= 1; `width` too; 'loss' and `a b` are not fields; `debug` is "
                     "no setting.")

  def test_a_table_naming_an_undefined_flag_raises(self):
    with self.assertRaisesRegex(ValueError, "field 'data.path' names --nothing, which is not defined"):
      cli.FlagDefiner(_flag_values()).field_flags({"data.path": "nothing"})

  def test_errors_and_stderr_lines_show_the_flags(self):
    values = self._values()
    parse = cli.make_flags_parser(values, "prog", "prog: does things.",
                                  lambda f: (_ for _ in ()).throw(ValueError("`loss` and `data_path`")))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), self.assertRaises(SystemExit):
      parse(["prog"])
    self.assertEqual(err.getvalue(), "prog: error: --loss and --input\n")

    def main(unused_argv):
      sys.stderr.write("Labels read as relevance; `loss`=rank reads ranks.\n")
      raise ValueError("`data.data_path` is a folder")

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
      with self.assertRaises(SystemExit) as stopped:
        cli.guard(main, "prog", values)(["prog"])
      self.assertIs(sys.stderr, err)  # Restored after the run.
    self.assertEqual((stopped.exception.code, err.getvalue()),
                     (1, "Labels read as relevance; --loss=rank reads ranks.\n"
                         "prog: error: --input is a folder\n"))


if __name__ == "__main__":
  tf.test.main()
