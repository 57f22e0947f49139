"""Tests for rank4class_cli.terminal: results on stdout, lines on stderr, where a binary's stderr writes the
config fields a library line names as the binary's flags."""

import contextlib
import io

import tensorflow as tf
from absl import flags

from rank4class_cli import cli, terminal
from rank4class_data import messages


class TerminalTest(tf.test.TestCase):

  def test_out_is_stdout_and_err_is_stderr(self):
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
      terminal.out("top-1 error 0.25")
      terminal.out("| a |\n", end="")
      terminal.err("Rows: 3 read")
    self.assertEqual(out.getvalue(), "top-1 error 0.25\n| a |\n")
    self.assertEqual(err.getvalue(), "Rows: 3 read\n")

  def test_binary_and_library_lines_meet_on_the_binarys_stderr_in_order(self):
    flag_values = flags.FlagValues()
    flags.DEFINE_integer("seed", 0, "Seed.", flag_values=flag_values)
    with contextlib.redirect_stderr(io.StringIO()) as err, cli.flag_words_on_stderr(flag_values):
      terminal.err("`seed` read")
      messages.say("`run.seed`=3 chosen")
    self.assertEqual(err.getvalue(), "--seed read\n--seed=3 chosen\n")


if __name__ == "__main__":
  tf.test.main()
