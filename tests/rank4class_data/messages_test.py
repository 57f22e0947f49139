"""Tests for rank4class_data.messages: `say` ends a line on stderr, `out` writes a result on stdout; both find
the stream when called."""

import contextlib
import io

import tensorflow as tf

from rank4class_data import messages


class Flushed(io.StringIO):
  """A captured stream that counts its flushes."""

  flushes = 0

  def flush(self) -> None:
    self.flushes += 1
    super().flush()


class SayTest(tf.test.TestCase):

  def test_a_line_gets_one_newline(self):
    with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(io.StringIO()) as out:
      messages.say("Rows: 3 read")
      messages.say("Two lines\nin one call\n")
    self.assertEqual(err.getvalue(), "Rows: 3 read\nTwo lines\nin one call\n")
    self.assertEqual(out.getvalue(), "")

  def test_the_stream_is_looked_up_at_each_call_and_flushed(self):
    first, second = Flushed(), Flushed()
    with contextlib.redirect_stderr(first):
      messages.say("one")
    with contextlib.redirect_stderr(second):
      messages.say("two")
    self.assertEqual((first.getvalue(), second.getvalue()), ("one\n", "two\n"))
    self.assertEqual((first.flushes, second.flushes), (1, 1))


class OutTest(tf.test.TestCase):

  def test_writes_the_text_and_end_to_stdout_as_print_does(self):
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
      messages.out("| a | b |")
      messages.out("table\n", end="")
      messages.out("")
    self.assertEqual(out.getvalue(), "| a | b |\ntable\n\n")
    self.assertEqual(err.getvalue(), "")


if __name__ == "__main__":
  tf.test.main()
