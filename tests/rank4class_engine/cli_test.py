"""Tests for rank4class_engine.cli: per-binary flags, validators naming allowed values, one-line flag errors."""

import contextlib
import io

import tensorflow as tf
from absl import flags

from rank4class_engine import cli


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


if __name__ == "__main__":
  tf.test.main()
