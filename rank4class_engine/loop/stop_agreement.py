"""When the training loop stops for a signal: the workers' agreement on a recorded SIGTERM or SIGINT
(`StopAgreement`), the callback that ends Keras' loop after that execution (`StopOnSignal`), and the signal a
stop reports (`signal_of`)."""

import signal

import tensorflow as tf

from rank4class_engine import distribute
from rank4class_engine.loop import preemption


class StopAgreement:
  """Whether training stops for a signal: one this process recorded or, under MultiWorkerMirroredStrategy, one
  that any worker recorded.

  Workers agree at the points where every worker calls `poll` (the end of each execution and of each epoch):
  the signals recorded are summed over the workers (one small all-reduce), so all of them see the same answer
  at the same step, stop there and write that step's checkpoint together (saving is collective). Once a stop
  is agreed, `poll` answers without communicating, as every worker knows it.

  Attributes:
    signal_number: The signal that stops training (SIGTERM before SIGINT when workers recorded both), or None.
  """

  def __init__(self, watch: preemption.PreemptionWatch, strategy: tf.distribute.Strategy):
    self._watch = watch
    self._strategy = strategy
    self.signal_number: int | None = None

  def poll(self) -> bool:
    """Whether to stop (a collective under multi-worker: every worker calls it at the same points)."""
    if self.signal_number is None:
      local = self._watch.signal_number
      terminated, interrupted = distribute.sum_over_workers(
          self._strategy, [float(local == signal.SIGTERM), float(local == signal.SIGINT)])
      if terminated or interrupted:
        self.signal_number = signal.SIGTERM if terminated else signal.SIGINT
    return self.signal_number is not None


class StopOnSignal(tf.keras.callbacks.Callback):
  """Ends Keras' loop after the execution in which a signal was recorded (the last callback, so a signal sent
  by any callback of that execution counts; under multi-worker, a signal any worker recorded): Keras then ends
  the epoch early and calls `on_epoch_end`, where `CheckpointCallback` writes the step."""

  def __init__(self, stop: StopAgreement):
    super().__init__()
    self._stop = stop

  def _stop_if_signalled(self) -> None:
    if self._stop.poll():
      self.model.stop_training = True

  def on_train_batch_end(self, batch, logs=None):
    self._stop_if_signalled()

  def on_epoch_end(self, epoch, logs=None):
    self._stop_if_signalled()  # A signal during the epoch's validation or checkpoint.


def signal_of(watch: preemption.PreemptionWatch | None) -> int:
  """The signal that stopped training: the first one the watch recorded, else Ctrl-C's."""
  return watch.signal_number if watch is not None and watch.signal_number is not None else signal.SIGINT
