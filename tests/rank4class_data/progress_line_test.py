"""Tests for rank4class_data.progress_line: throttled; rewritten in place on a terminal, whole lines
elsewhere; silent for short work."""

import io
from unittest import mock

import tensorflow as tf

from rank4class_data import progress_line


class Terminal(io.StringIO):
  """A captured stream that says it is a terminal."""

  def isatty(self) -> bool:
    return True


class ProgressLineTest(tf.test.TestCase):

  def test_short_work_stays_silent(self):
    for stream in (io.StringIO(), Terminal()):
      line = progress_line.ProgressLine(every=3600.0, stream=stream)
      self.assertFalse(line.due())
      line.close()
      self.assertEqual(stream.getvalue(), "")

  def test_on_a_terminal_one_line_is_rewritten_in_place_and_ended_once(self):
    stream = Terminal()
    line = progress_line.ProgressLine(every=0.0, stream=stream)
    self.assertTrue(line.due())
    line.show("1 row")
    line.show("2 rows")
    self.assertTrue(line.visible)
    line.close()
    line.close()  # Once only.
    self.assertEqual(stream.getvalue(), "\r\x1b[2K1 row\r\x1b[2K2 rows\n")
    self.assertGreaterEqual(line.elapsed, 0.0)

  def test_off_a_terminal_each_line_is_whole_and_nothing_is_rewritten(self):
    stream = io.StringIO()  # A log file, CI, a pipe.
    line = progress_line.ProgressLine(every=0.0, stream=stream)
    line.show("1 row")
    line.show("2 rows")
    line.close()  # Nothing left open.
    self.assertEqual(stream.getvalue(), "1 row\n2 rows\n")

  def test_off_a_terminal_lines_come_at_most_every_few_seconds(self):
    clock = mock.Mock(return_value=100.0)
    with mock.patch.object(progress_line.time, "perf_counter", clock):
      log = progress_line.ProgressLine(every=1.0, stream=io.StringIO())
      terminal = progress_line.ProgressLine(every=1.0, stream=Terminal())
      clock.return_value = 102.0
      self.assertTrue(terminal.due())
      self.assertFalse(log.due())  # Under LOG_EVERY_SECONDS.
      clock.return_value = 100.0 + progress_line.LOG_EVERY_SECONDS
      self.assertTrue(log.due())
      log.show("a line")
      self.assertFalse(log.due())

  def test_stream_none_writes_to_the_stderr_of_the_moment(self):
    line = progress_line.ProgressLine(every=0.0)
    with mock.patch("sys.stderr", new_callable=io.StringIO) as stderr:
      line.show("now")
    self.assertEqual(stderr.getvalue(), "now\n")


if __name__ == "__main__":
  tf.test.main()
