"""Tests for rank4class_data.progress_line: throttled, rewritten in place, silent for short work."""

import io

import tensorflow as tf

from rank4class_data import progress_line


class ProgressLineTest(tf.test.TestCase):

  def test_short_work_stays_silent(self):
    stream = io.StringIO()
    line = progress_line.ProgressLine(every=3600.0, stream=stream)
    self.assertFalse(line.due())
    line.close()
    self.assertEqual(stream.getvalue(), "")

  def test_lines_are_rewritten_in_place_and_closed_with_a_newline(self):
    stream = io.StringIO()
    line = progress_line.ProgressLine(every=0.0, stream=stream)
    self.assertTrue(line.due())
    line.show("1 row")
    line.show("2 rows")
    self.assertTrue(line.visible)
    line.close()
    line.close()  # Once only.
    self.assertEqual(stream.getvalue(), "\r1 row\r2 rows\n")
    self.assertGreaterEqual(line.elapsed, 0.0)


if __name__ == "__main__":
  tf.test.main()
