"""How many steps one `tf.function` call of the training loop runs: chosen from the measured step time within
the cadence (`choose_steps_per_execution`, the tuning callback), and capped so a run stops at exactly its
steps (`ExactSteps`)."""

import time

import tensorflow as tf

from rank4class_engine import distribute
from rank4class_engine.loop.engine_config import EngineConfig, cadence, optimizer_step

# Chosen steps_per_execution stays at or below this: Python runs between executions only (callbacks, the
# progress line), so larger values buy little once an execution takes ~0.1 s.
MAX_STEPS_PER_EXECUTION = 1000


def choose_steps_per_execution(seconds_per_step: float, config: EngineConfig) -> int:
  """Steps per execution so that one takes about `target_execution_seconds`, within the run's cadence.

  The value divides the epoch length (validations and checkpoints end epochs), so no epoch ends with a short
  execution: e.g. 2 ms steps, target 0.2 s, eval_every 100 -> 100; 50 ms steps -> 4.
  """
  wanted = max(1, min(MAX_STEPS_PER_EXECUTION,
                      int(config.target_execution_seconds / max(seconds_per_step, 1e-9))))
  steps = cadence(config)
  return max(d for d in range(1, min(wanted, steps) + 1) if steps % d == 0)


def probe_steps_per_execution(config: EngineConfig) -> int:
  """The smallest execution length above 1 that fits the cadence (1 if none does).

  Keras builds a one-step train function when `steps_per_execution` is 1 at the first `fit` step, and a
  looping one otherwise; only the looping one follows later changes of the value, so probing starts above 1.
  """
  steps = cadence(config)
  return next((d for d in range(2, steps + 1) if steps % d == 0), 1)


class StepsPerExecutionTuner(tf.keras.callbacks.Callback):
  """Times a few short executions after the first (tracing) one, then sets `steps_per_execution`.

  `model.steps_per_execution` is a variable read inside the traced (looping) train function: changing it
  never retraces.
  """

  def __init__(self, config: EngineConfig, probe_length: int, probe_executions: int = 5,
               strategy: tf.distribute.Strategy | None = None):
    super().__init__()
    self._config = config
    self._strategy = strategy or tf.distribute.get_strategy()
    self._probe_length = probe_length
    self._probe_executions = probe_executions
    self._times: list[float] = []
    self._epoch_start = 0
    self._applied = False
    self.chosen: int | None = None

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch_start = optimizer_step(self.model)  # An epoch of a resumed run may start inside the cadence.

  def on_train_batch_end(self, batch, logs=None):
    if self._applied:
      return
    if self.chosen is None:
      self._times.append(time.perf_counter())
      if len(self._times) > self._probe_executions:  # The first interval starts after the traced execution.
        seconds_per_step = (self._times[-1] - self._times[0]) / ((len(self._times) - 1) * self._probe_length)
        # Workers of a multi-worker run take the mean of their measures: all run executions of one length, so
        # they reach their execution boundaries (where they agree on stopping) at the same steps.
        total, workers = distribute.sum_over_workers(self._strategy, [seconds_per_step, 1.0])
        seconds_per_step = total / workers
        self.chosen = choose_steps_per_execution(seconds_per_step, self._config)
    # Switched on a step that the new length divides, so no execution is cut short at the next epoch end.
    if self.chosen is not None and (self._epoch_start + batch + 1) % self.chosen == 0:
      self.model.steps_per_execution = self.chosen
      self._applied = True


class ExactSteps(tf.keras.callbacks.Callback):
  """Stops training at exactly `train_steps`: in the last, shorter epoch, no execution runs past that step.

  Keras runs whole epochs of `epoch_steps`; when `train_steps` is not a multiple of it, executions of the last
  epoch are capped at the steps left (Keras reads `steps_per_execution` before every execution) and training
  stops at the step. The value it replaced is put back at the end.
  """

  def __init__(self, train_steps: int, epoch_steps: int):
    super().__init__()
    self._train_steps = train_steps
    self._epoch_steps = epoch_steps
    self._epoch_start = 0
    self._epoch_end = epoch_steps
    self._wanted: int | None = None  # steps_per_execution before capping.
    self._capped_to: int | None = None

  def _cap(self, step: int) -> None:
    variable = self.model.steps_per_execution
    value = int(variable.numpy())
    if value != self._capped_to:
      self._wanted = value  # Set by the caller or the tuner since the last cap.
    self._capped_to = min(self._wanted, self._train_steps - step)
    if self._capped_to != value:
      variable.assign(self._capped_to)

  def on_epoch_begin(self, epoch, logs=None):
    # The epoch ends at the next multiple of `epoch_steps` (a resumed run's first epoch may start inside one).
    self._epoch_start = optimizer_step(self.model)
    self._epoch_end = (self._epoch_start // self._epoch_steps + 1) * self._epoch_steps
    if self._epoch_end > self._train_steps:
      self._cap(self._epoch_start)

  def on_train_batch_end(self, batch, logs=None):
    step = self._epoch_start + batch + 1
    if self._epoch_end <= self._train_steps:
      return  # Not the last epoch: it runs whole.
    if step >= self._train_steps:
      self.model.stop_training = True
    else:
      self._cap(step)

  def on_train_end(self, logs=None):
    if self._wanted is not None:
      self.model.steps_per_execution.assign(self._wanted)
