"""Tests for rank4class_engine.loop.preemption: signals recorded, a second one or the grace's end
interrupting, the previous handlers put back."""

import os
import signal
import time

import tensorflow as tf
from absl.testing import parameterized

from rank4class_engine.loop import preemption


def _custom_handler(signal_number, frame):
  del signal_number, frame


class PreemptionWatchTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(signal.SIGTERM, signal.SIGINT)
  def test_first_signal_is_recorded_not_raised(self, signal_number):
    with preemption.PreemptionWatch(grace_seconds=60) as watch:
      self.assertTrue(watch.installed)
      os.kill(os.getpid(), signal_number)
      time.sleep(0.01)  # The handler runs in the main thread at the next bytecode.
      self.assertEqual(watch.signal_number, signal_number)

  def test_first_signal_wins_and_a_second_one_interrupts(self):
    with preemption.PreemptionWatch(grace_seconds=60) as watch:
      os.kill(os.getpid(), signal.SIGTERM)
      time.sleep(0.01)
      with self.assertRaisesRegex(KeyboardInterrupt, "SIGINT received again while stopping"):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
      self.assertEqual(watch.signal_number, signal.SIGTERM)

  def test_a_second_signal_waits_for_a_deferred_block(self):
    finished = []
    with preemption.PreemptionWatch(grace_seconds=60) as watch:
      os.kill(os.getpid(), signal.SIGTERM)
      time.sleep(0.01)
      with self.assertRaises(KeyboardInterrupt):
        with watch.deferred():
          os.kill(os.getpid(), signal.SIGTERM)
          time.sleep(0.01)
          finished.append(True)  # A checkpoint being written completes.
    self.assertEqual(finished, [True])

  def test_the_end_of_the_grace_interrupts(self):
    with preemption.PreemptionWatch(grace_seconds=0.1):
      os.kill(os.getpid(), signal.SIGTERM)
      start = time.monotonic()
      with self.assertRaises(KeyboardInterrupt):
        time.sleep(30)  # A loop that does not stop: interrupted after the grace.
      self.assertLess(time.monotonic() - start, 10)

  def test_previous_handlers_are_restored(self):
    previous = signal.signal(signal.SIGTERM, _custom_handler)
    try:
      sigint = signal.getsignal(signal.SIGINT)
      with preemption.PreemptionWatch():
        self.assertNotEqual(signal.getsignal(signal.SIGTERM), _custom_handler)
      self.assertEqual(signal.getsignal(signal.SIGTERM), _custom_handler)
      self.assertEqual(signal.getsignal(signal.SIGINT), sigint)
    finally:
      signal.signal(signal.SIGTERM, previous)

  def test_exit_codes_follow_the_signal(self):
    self.assertEqual((preemption.exit_code(signal.SIGINT), preemption.exit_code(signal.SIGTERM)), (130, 143))
    self.assertEqual(preemption.signal_name(signal.SIGTERM), "SIGTERM")

  def test_negative_grace_raises(self):
    with self.assertRaisesRegex(ValueError, "`grace_seconds` must be >= 0, got -1"):
      preemption.PreemptionWatch(grace_seconds=-1)


if __name__ == "__main__":
  tf.test.main()
