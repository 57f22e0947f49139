"""Preemption: SIGTERM and SIGINT recorded while training runs, so the loop stops at a step of its choosing.

Batch schedulers, Kubernetes and preemptible clouds send SIGTERM, then SIGKILL after a grace period; a user
presses Ctrl-C (SIGINT). While a `PreemptionWatch` is open, neither kills nor raises at once: the first one is
recorded (`signal_number`), the training loop sees it between executions, stops, checkpoints that step and
raises. A second signal, or the grace period running out after the first, raises KeyboardInterrupt at once, as
Ctrl-C does without the watch (a checkpoint being written finishes first: see `PreemptionWatch.deferred`);
checkpoints are committed by their index file, written last, so an interrupted one is never taken as valid.

  with PreemptionWatch(grace_seconds=20) as watch:
    for step in steps:
      train(step)
      if watch.signal_number is not None:
        save(step)
        break

Python runs signal handlers in the main thread between bytecodes: one long native call (a `tf.function`
execution) delays the record until it returns, and with it the start of the grace period. Under
MultiWorkerMirroredStrategy each worker has its own watch; the training engine makes the workers agree on one
stop step (`rank4class_engine.loop.trainer`).
"""

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from rank4class_data.validation import check_range

SIGNALS = (signal.SIGTERM, signal.SIGINT)


def exit_code(signal_number: int) -> int:
  """The status shells report for a process ended by the signal: 128 + its number (130 SIGINT, 143
  SIGTERM)."""
  return 128 + signal_number


def signal_name(signal_number: int) -> str:
  return signal.Signals(signal_number).name


class PreemptionWatch:
  """Records the first SIGTERM or SIGINT while open; the previous handlers are back when it closes.

  Open it in the main thread (where Python runs signal handlers); elsewhere it records nothing and leaves the
  handlers alone (`installed` is False).

  Args:
    grace_seconds: Seconds after the first signal before the watch raises KeyboardInterrupt in the main
      thread, for a loop that has not stopped by then (0: at once, as without the watch).
    signals: The signals recorded.

  Attributes:
    signal_number: The first signal received, or None.
    installed: Whether the handlers are installed.
  """

  def __init__(self, grace_seconds: float = 20.0, signals: tuple[int, ...] = SIGNALS):
    check_range("grace_seconds", grace_seconds, 0)
    self._grace_seconds = grace_seconds
    self._signals = signals
    self._previous: dict[int, Any] = {}
    self._timer: threading.Timer | None = None
    self._deferring = 0
    self._forced: int | None = None  # A forcing signal held back by `deferred`.
    self.signal_number: int | None = None
    self.installed = False

  def __enter__(self) -> "PreemptionWatch":
    if threading.current_thread() is threading.main_thread():
      for number in self._signals:
        self._previous[number] = signal.signal(number, self._handle)
      self.installed = True
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()

  def close(self) -> None:
    """Stops the grace timer and puts the previous handlers back (idempotent)."""
    if self._timer is not None:
      self._timer.cancel()
      self._timer.join()  # A signal it was sending reaches this handler, not the restored one.
      self._timer = None
    for number, handler in self._previous.items():
      signal.signal(number, handler)
    self._previous = {}
    self.installed = False

  def _handle(self, signal_number: int, frame: FrameType | None) -> None:
    del frame
    if self.signal_number is None:
      self.signal_number = signal_number
      # The timer sends the signal again, to the main thread (so a sleep or a wait there ends): the
      # second-signal path below.
      self._timer = threading.Timer(self._grace_seconds, signal.pthread_kill,
                                    args=(threading.main_thread().ident, signal_number))
      self._timer.daemon = True
      self._timer.start()
      return
    self._force(signal_number)

  def _force(self, signal_number: int) -> None:
    if self._deferring:
      self._forced = signal_number
      return
    raise KeyboardInterrupt(f"{signal_name(signal_number)} received again while stopping")

  @contextlib.contextmanager
  def deferred(self) -> Iterator[None]:
    """A block (a checkpoint being written) that a second signal or the grace's end does not cut short: the
    KeyboardInterrupt comes when it ends."""
    self._deferring += 1
    try:
      yield
    finally:
      self._deferring -= 1
      if not self._deferring and self._forced is not None:
        forced, self._forced = self._forced, None
        self._force(forced)
