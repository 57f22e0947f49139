"""The training engine's checkpoint and resume: the resumable checkpoint of `backup/` with its validation
record, the best weights of `best/`, the callback that writes both at the cadence and on a stop, and restoring
them when a run resumes or ends."""

import contextlib
import glob
import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from rank4class_data.validation import atomic_directory, write_json
from rank4class_engine.loop import preemption, progress, stop_agreement
from rank4class_engine.loop.engine_config import EngineConfig, optimizer_step
from rank4class_engine.runs.run_directory import BEST_DIR

BEST_STATE_FILE = "best.json"
BEST_WEIGHTS = "weights"
_STATE_FILE = "state-{step}.json"
_STATE_PATTERN = re.compile(r"^state-(\d+)\.json$")


def build_optimizer(model: tf.keras.Model, strategy: tf.distribute.Strategy) -> None:
  """Creates the optimizer's variables (step counter, slots) for the model's trainable variables, as its first
  step would. Done before `fit`: when the first trace of Keras' train function creates them instead,
  `tf.function` traces the function a second time on its next call (a run's train function is then traced
  twice: ~0.2-0.5 s more per run on 2 CPU cores, docs/BENCHMARKS.md). Nothing to do for an optimizer built
  already or one without `build` (the legacy optimizers)."""
  optimizer = model.optimizer
  if hasattr(optimizer, "build") and not getattr(optimizer, "_built", False):
    with strategy.scope():
      optimizer.build(model.trainable_variables)


class BestWeights:
  """Keeps the weights of the best validation `best_metric`, remembered in `best.json` beside them, so a
  resumed run never replaces a better model with a worse one.

  `best/` is replaced whole (weights and `best.json` together, `atomic_directory`): a kill while writing
  leaves the previous best. An improvement is written at once when the last write is `min_seconds` old;
  otherwise the weights are kept in memory and written by `persist()`, which runs before every checkpoint and
  at the end.
  """

  def __init__(self, model: tf.keras.Model, best_dir: str, metric: str, mode: str, min_seconds: float = 0.0):
    self._model = model
    self._dir = best_dir
    self._metric = metric
    self._better = (lambda a, b: a < b) if mode == "min" else (lambda a, b: a > b)
    self._min_seconds = min_seconds
    self._last_write = -math.inf
    self._pending: list[Any] | None = None  # Best weights not yet written.
    self.state: dict[str, Any] | None = None
    state_path = os.path.join(best_dir, BEST_STATE_FILE)
    if os.path.exists(state_path):
      with open(state_path, encoding="utf-8") as f:
        self.state = json.load(f)

  def best(self) -> tuple[str, float, int] | None:
    return None if self.state is None else (self._metric, self.state["value"], self.state["step"])

  def update(self, step: int, logs: Mapping[str, float]) -> None:
    value = logs.get(f"val_{self._metric}")
    if value is None or not math.isfinite(value):
      return
    if self.state is not None and not self._better(value, self.state["value"]):
      return
    self.state = {"metric": self._metric, "value": float(value), "step": step,
                  "metrics": {k: float(v) for k, v in logs.items()}}
    if time.perf_counter() - self._last_write >= self._min_seconds:
      self._write(None)
    else:
      self._pending = self._model.get_weights()

  def persist(self) -> None:
    """Writes best weights kept in memory (no-op when none are pending)."""
    if self._pending is not None:
      self._write(self._pending)

  def _write(self, weights: list[Any] | None) -> None:
    """Writes `weights` (None: the model's current ones) and the state. Collective under multi-worker."""
    if weights is not None:
      current = self._model.get_weights()
      self._model.set_weights(weights)
    with atomic_directory(self._dir) as staging:
      self._model.save_weights(os.path.join(staging, BEST_WEIGHTS))
      write_json(os.path.join(staging, BEST_STATE_FILE), self.state)
    if weights is not None:
      self._model.set_weights(current)
    self._pending = None
    self._last_write = time.perf_counter()


class Checkpoints:
  """The resumable checkpoint of `backup/`: model and optimizer variables (`tf.train.Checkpoint`) plus
  `state-<step>.json` (the validation history to that step and the progress log's length then).

  The JSON is written first and the checkpoint's index last (TensorFlow replaces it atomically): the index
  names a step only once everything of that step is on disk, and a resume reads the state of the step it
  names.
  """

  def __init__(self, model: tf.keras.Model, backup_dir: str):
    self._dir = backup_dir
    self._checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    self._manager = tf.train.CheckpointManager(self._checkpoint, backup_dir, max_to_keep=1)

  def latest_step(self) -> int | None:
    path = self._manager.latest_checkpoint
    return None if path is None else int(path.rsplit("-", 1)[1])

  def restore(self, strategy: tf.distribute.Strategy) -> tuple[int, dict[str, Any]]:
    """Restores the latest checkpoint; returns (step, state). Raises ValueError naming a broken backup."""
    step = self.latest_step()
    state_path = os.path.join(self._dir, _STATE_FILE.format(step=step))
    if not os.path.exists(state_path):
      raise ValueError(f"{self._dir}: checkpoint of step {step} has no {os.path.basename(state_path)}; the "
                       "backup is not one this version wrote. Remove the folder to start the run afresh.")
    with open(state_path, encoding="utf-8") as f:
      state = json.load(f)
    model = self._checkpoint.model
    build_optimizer(model, strategy)  # Slot variables exist before restoring, so they are restored now.
    status = self._checkpoint.restore(self._manager.latest_checkpoint)
    try:
      status.assert_existing_objects_matched()
    except AssertionError as e:
      raise ValueError(f"{self._dir}: the checkpoint of step {step} does not fit this model ({e}). Remove "
                       "the folder to start the run afresh.") from None
    restored = optimizer_step(model)
    if restored != step:
      raise ValueError(f"{self._dir}: checkpoint ckpt-{step} holds optimizer step {restored}.")
    return step, state

  def save(self, step: int, state: Mapping[str, Any]) -> None:
    os.makedirs(self._dir, exist_ok=True)
    write_json(os.path.join(self._dir, _STATE_FILE.format(step=step)), {"step": step, **state})
    self._manager.save(checkpoint_number=step)  # The commit point: the index now names this step.
    for path in glob.glob(os.path.join(self._dir, "state-*.json")):
      match = _STATE_PATTERN.match(os.path.basename(path))
      if match and int(match[1]) != step:
        os.remove(path)


class CheckpointCallback(tf.keras.callbacks.Callback):
  """At the end of every checkpoint step's Keras epoch, and of the epoch a signal stopped (after the engine's
  validation and the caller's callbacks): the pending best weights, then the checkpoint with the validation
  history and the progress log's length. A second signal waits for both to be written."""

  def __init__(self, config: EngineConfig, checkpoints: Checkpoints, best: BestWeights | None,
               state: Callable[[], dict[str, Any]], multi_worker: bool,
               watch: preemption.PreemptionWatch | None = None,
               stop: stop_agreement.StopAgreement | None = None,
               stopped_early: Callable[[], bool] = lambda: False):
    super().__init__()
    self._stopped_early = stopped_early
    self._config = config
    self._checkpoints = checkpoints
    self._best = best
    self._state = state
    self._multi_worker = multi_worker
    self._watch = watch
    self._stop = stop
    self._last = time.perf_counter()

  def on_epoch_end(self, epoch, logs=None):
    step = optimizer_step(self.model)
    # Polled at every epoch's end, due or not: under multi-worker it is a collective every worker meets.
    stopping = self._stop is not None and self._stop.poll()
    if not (stopping or self._due(step)):
      return
    with self._watch.deferred() if self._watch is not None else contextlib.nullcontext():
      if self._best is not None:
        self._best.persist()
      self._checkpoints.save(step, self._state())
    self._last = time.perf_counter()

  def _due(self, step: int) -> bool:
    config = self._config
    if step >= config.train_steps or self._stopped_early():
      return True
    if step % config.checkpoint_steps:
      return False
    if config.checkpoint_every is None and not self._multi_worker:
      return time.perf_counter() - self._last >= config.checkpoint_seconds
    return True


def restore(checkpoints: Checkpoints | None, strategy, log_path: str | None) -> tuple[int, dict]:
  """The step and engine state of the latest checkpoint, restored into the model (0 and {} without one)."""
  initial_step, state = 0, {}
  if checkpoints is not None and checkpoints.latest_step() is not None:
    initial_step, state = checkpoints.restore(strategy)
    if log_path is not None:
      progress.truncate_log(log_path, state["progress_bytes"])  # Events after the checkpoint happen again.
  return initial_step, state


def load_best(model, config: EngineConfig, best: BestWeights | None, best_dir: str) -> dict | None:
  """Persists the best step's record and loads its weights into `model`; returns that record."""
  best_state = best.state if best else None
  if best is not None:
    best.persist()
  if best_state is not None:
    # Multi-worker non-chiefs keep no weights of their own; they read the chief's when the folder is shared.
    for folder in (best_dir, os.path.join(config.run_dir, BEST_DIR)):
      weights = os.path.join(folder, BEST_WEIGHTS)
      if os.path.exists(weights + ".index"):
        model.load_weights(weights).expect_partial()
        break
  return best_state
