"""Tests for rank4class_engine.runs.run_lock: one writer per run directory, never stuck after a killed
holder."""

import os
import signal
import subprocess
import sys

import tensorflow as tf

from rank4class_engine.runs import run_lock

# Holds the lock of argv[1], says so, then sleeps until killed.
_HOLDER = """
import sys, time
from rank4class_engine.runs import run_lock
lock = run_lock.RunDirectoryLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(600)
"""


def _start_holder(run_dir: str) -> subprocess.Popen:
  holder = subprocess.Popen([sys.executable, "-c", _HOLDER, run_dir], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  if holder.stdout.readline().strip() != "held":
    holder.kill()
    raise AssertionError("the holder process did not take the lock")
  return holder


class RunDirectoryLockTest(tf.test.TestCase):

  def test_second_process_is_refused_with_the_holder_named(self):
    run_dir = self.create_tempdir().full_path
    holder = _start_holder(run_dir)
    try:
      with self.assertRaisesRegex(run_lock.RunDirectoryBusyError,
                                  rf"{run_dir} is being written by another run \(pid "
                                  rf"{holder.pid} on .*, since "):
        run_lock.RunDirectoryLock(run_dir).acquire()
    finally:
      holder.kill()
      holder.wait()

  def test_killed_holder_leaves_no_stuck_lock(self):
    run_dir = self.create_tempdir().full_path
    holder = _start_holder(run_dir)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    self.assertTrue(os.path.exists(os.path.join(run_dir, run_lock.LOCK_FILE)))  # The stale file stays...
    with run_lock.RunDirectoryLock(run_dir) as lock:  # ...but its lock died with the process.
      self.assertTrue(lock.held)

  def test_reentrant_inside_one_process_until_the_last_release(self):
    run_dir = self.create_tempdir().full_path
    outer, inner = run_lock.RunDirectoryLock(run_dir), run_lock.RunDirectoryLock(run_dir)
    outer.acquire()
    inner.acquire()
    inner.release()
    self.assertIn(os.path.realpath(outer.path), run_lock._HELD)  # Still held by `outer`.
    outer.release()
    self.assertNotIn(os.path.realpath(outer.path), run_lock._HELD)

  def test_released_lock_can_be_taken_by_another_process(self):
    run_dir = self.create_tempdir().full_path
    with run_lock.RunDirectoryLock(run_dir):
      pass
    holder = _start_holder(run_dir)  # Would fail to report "held" if the lock were still ours.
    holder.kill()
    holder.wait()

  def test_creates_the_directory_and_records_the_holder(self):
    run_dir = os.path.join(self.create_tempdir().full_path, "new", "run")
    with run_lock.RunDirectoryLock(run_dir) as lock:
      with open(lock.path) as f:
        self.assertIn(f'"pid": {os.getpid()}', f.read())

  def test_empty_directory_raises(self):
    with self.assertRaisesRegex(ValueError, "`run_dir` must be a directory path"):
      run_lock.RunDirectoryLock("")


if __name__ == "__main__":
  tf.test.main()
