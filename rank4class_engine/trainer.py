"""The one training engine: Keras `fit` with validation at a cadence, best-on-validation weights, resumable
checkpoints, TensorBoard, a progress line and JSON log, one writer per run directory, any tf.distribute
strategy.

The caller builds and compiles the model (under the strategy's scope; a model may keep its own `train_step`, as
the pairwise margin model does) and gives a validation function; the engine owns the loop's cadence:

  with strategy.scope():
    model = build(...)
    model.compile(optimizer, loss)
  result = trainer.fit(model, train_dataset, EngineConfig(run_dir, train_steps=600, eval_every=100,
                       best_metric="ndcg_5"), strategy, validate=lambda m: {"ndcg_5": ...})

Run directory layout (chief): `backup/` (resumable checkpoint), `best/weights*` + `best/best.json` (weights of
the best validation), `logs/` (TensorBoard: train and validation scalars), `progress.jsonl`, `.run.lock`.
"""

import dataclasses
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from rank4class_data.validation import write_json
from rank4class_engine import distribute, progress, run_lock

BACKUP_DIR = "backup"
BEST_DIR = "best"
BEST_STATE_FILE = "best.json"
LOG_DIR = "logs"
PROGRESS_FILE = "progress.jsonl"
MODES = ("max", "min")
# Chosen steps_per_execution stays at or below this: Python runs between executions only (callbacks, the
# progress line), so larger values buy little once an execution takes ~0.1 s.
MAX_STEPS_PER_EXECUTION = 1000

ValidateFn = Callable[[tf.keras.Model], Mapping[str, float]]


@dataclasses.dataclass
class EngineConfig:
  """How the engine runs a training job.

  Attributes:
    run_dir: Folder for checkpoints, best weights, TensorBoard logs and the progress log.
    train_steps: Optimizer steps in all (rounded up to a multiple of `eval_every`).
    eval_every: Steps between validations (a Keras "epoch").
    checkpoint_every: Steps between resumable checkpoints; 0 disables them; None (default) checkpoints at
      validation steps, at most once every `checkpoint_seconds` (under MultiWorkerMirroredStrategy, where saving
      is collective and clocks differ between workers, at every validation).
    checkpoint_seconds: With `checkpoint_every=None`, the least time between two checkpoints; also the least
      time between two writes of improved best weights (kept in memory meanwhile, written at checkpoints and at
      the end), so a quick run does not spend its time writing files.
    best_metric: Validation metric whose best value selects the kept weights; "" keeps the last weights.
    best_mode: "max" or "min" for `best_metric`.
    steps_per_execution: Steps per `tf.function` call; 0 lets the engine choose (see `choose_steps_per_execution`).
    global_batch_size: Examples per step over all replicas (for examples/s).
    tensorboard: Write TensorBoard scalars into `run_dir/logs`.
    verbose: 0 silent (log file only), 1 a progress line on the terminal.
    target_execution_seconds: With `steps_per_execution=0`, the duration one execution should take.
  """

  run_dir: str
  train_steps: int
  eval_every: int = 100
  checkpoint_every: int | None = None
  checkpoint_seconds: float = 30.0
  best_metric: str = ""
  best_mode: str = "max"
  steps_per_execution: int = 0
  global_batch_size: int = 32
  tensorboard: bool = True
  verbose: int = 1
  target_execution_seconds: float = 0.2

  def __post_init__(self):
    if not self.run_dir:
      raise ValueError("`run_dir` is required.")
    if self.train_steps < 1 or self.eval_every < 1:
      raise ValueError(f"`train_steps` ({self.train_steps}) and `eval_every` ({self.eval_every}) must be positive.")
    if self.checkpoint_steps < 0:
      raise ValueError(f"`checkpoint_every` must be >= 0, got {self.checkpoint_every}.")
    if self.best_mode not in MODES:
      raise ValueError(f"`best_mode` must be one of {MODES}, got {self.best_mode!r}.")
    if self.steps_per_execution < 0:
      raise ValueError(f"`steps_per_execution` must be >= 0 (0: automatic), got {self.steps_per_execution}.")
    if self.global_batch_size < 1:
      raise ValueError(f"`global_batch_size` must be positive, got {self.global_batch_size}.")

  @property
  def checkpoint_steps(self) -> int:
    return self.eval_every if self.checkpoint_every is None else self.checkpoint_every

  @property
  def total_steps(self) -> int:
    return math.ceil(self.train_steps / self.eval_every) * self.eval_every


@dataclasses.dataclass
class FitResult:
  """What `fit` did.

  Attributes:
    steps: Optimizer steps at the end.
    resumed_from_step: Step the run started from (0 unless resumed).
    best_step: Step of the best validation, or None.
    best_value: Its `best_metric` value, or None.
    best_metrics: All validation metrics at the best step ("val_" prefix removed).
    history: One record per validation: step, training loss and the validation metrics (with "val_" prefix).
    examples_per_second: Training throughput measured after the first execution, validations included.
    steps_per_execution: The value used at the end of the run.
    seconds: Wall time of `fit`.
  """

  steps: int
  resumed_from_step: int
  best_step: int | None
  best_value: float | None
  best_metrics: dict[str, float]
  history: list[dict[str, float]]
  examples_per_second: float | None
  steps_per_execution: int
  seconds: float


def choose_steps_per_execution(seconds_per_step: float, config: EngineConfig) -> int:
  """Steps per execution so that one takes about `target_execution_seconds`, within the run's cadence.

  The value divides `eval_every` and (when checkpointing) `checkpoint_every`, so executions end exactly at
  validations and checkpoints: e.g. 2 ms steps, target 0.2 s, eval_every 100 -> 100; 50 ms steps -> 4.
  """
  wanted = max(1, min(MAX_STEPS_PER_EXECUTION, int(config.target_execution_seconds / max(seconds_per_step, 1e-9))))
  cadence = _cadence(config)
  return max(d for d in range(1, min(wanted, cadence) + 1) if cadence % d == 0)


def _cadence(config: EngineConfig) -> int:
  """Steps that every execution length must divide: validations and checkpoints end executions."""
  return math.gcd(config.eval_every, config.checkpoint_steps) if config.checkpoint_steps else config.eval_every


def _probe_steps_per_execution(config: EngineConfig) -> int:
  """The smallest execution length above 1 that fits the cadence (1 if none does).

  Keras builds a one-step train function when `steps_per_execution` is 1 at the first `fit` step, and a
  looping one otherwise; only the looping one follows later changes of the value, so probing starts above 1.
  """
  cadence = _cadence(config)
  return next((d for d in range(2, cadence + 1) if cadence % d == 0), 1)


def _optimizer_step(model: tf.keras.Model) -> int:
  return int(tf.keras.backend.get_value(model.optimizer.iterations))


class _Validation(tf.keras.callbacks.Callback):
  """Runs `validate(model)` after every Keras epoch and adds its metrics to the logs as `val_<name>`."""

  def __init__(self, validate: ValidateFn):
    super().__init__()
    self._validate = validate

  def on_epoch_end(self, epoch, logs=None):
    metrics = self._validate(self.model)
    if logs is not None:
      logs.update({f"val_{name}": float(value) for name, value in metrics.items()})


class _StepsPerExecutionTuner(tf.keras.callbacks.Callback):
  """Times a few short executions after the first (tracing) one, then sets `steps_per_execution`.

  `model.steps_per_execution` is a variable read inside the traced (looping) train function: changing it
  never retraces.
  """

  def __init__(self, config: EngineConfig, probe_length: int, probe_executions: int = 5):
    super().__init__()
    self._config = config
    self._probe_length = probe_length
    self._probe_executions = probe_executions
    self._times: list[float] = []
    self._epoch = 0
    self._applied = False
    self.chosen: int | None = None

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch = epoch

  def on_train_batch_end(self, batch, logs=None):
    if self._applied:
      return
    if self.chosen is None:
      self._times.append(time.perf_counter())
      if len(self._times) > self._probe_executions:  # The first interval starts after the traced execution.
        seconds_per_step = (self._times[-1] - self._times[0]) / ((len(self._times) - 1) * self._probe_length)
        self.chosen = choose_steps_per_execution(seconds_per_step, self._config)
    # Switched on a step that the new length divides, so later executions end on validations and checkpoints
    # (both lengths divide the cadence, so such a step comes by the next validation at the latest).
    if self.chosen is not None and (self._epoch * self._config.eval_every + batch + 1) % self.chosen == 0:
      self.model.steps_per_execution = self.chosen
      self._applied = True


class _Backup(tf.keras.callbacks.BackupAndRestore):
  """`BackupAndRestore` that checkpoints every `every_steps` optimizer steps, whatever `steps_per_execution` is.

  Keras counts `save_freq` in executions; the engine changes `steps_per_execution` during the run, so the
  cadence is kept in steps here. Executions end on checkpoint steps (`choose_steps_per_execution`). The step is
  computed from the epoch and batch index Keras passes, so no variable is read per execution.
  """

  def __init__(self, backup_dir: str, every_steps: int, eval_every: int, min_seconds: float = 0.0,
               before_backup: Callable[[], None] | None = None):
    super().__init__(backup_dir, save_freq=1)
    # Keras lists the strategies it has tested; a one-device strategy checkpoints like the default one.
    self._supported_strategies = (*self._supported_strategies, tf.distribute.OneDeviceStrategy)
    self._every_steps = every_steps
    self._eval_every = eval_every
    self._min_seconds = min_seconds
    self._before_backup = before_backup or (lambda: None)
    self._last_backup = time.perf_counter()
    self._epoch = 0

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch = epoch
    super().on_epoch_begin(epoch, logs)

  def on_train_batch_begin(self, batch, logs=None):
    # Keras records the execution's first step here and resumes after it: with several steps per execution
    # that would repeat steps. The step is recorded when the backup is written instead (below).
    pass

  def on_train_batch_end(self, batch, logs=None):
    if (self._epoch * self._eval_every + batch + 1) % self._every_steps:
      return
    if time.perf_counter() - self._last_backup < self._min_seconds:
      return
    self._before_backup()
    # `batch` is the execution's last step in this epoch; Keras resumes at the step after the recorded one.
    self._training_state._ckpt_saved_batch.assign(batch)  # pylint: disable=protected-access
    super().on_train_batch_end(batch, logs)
    self._last_backup = time.perf_counter()


class _BestWeights(tf.keras.callbacks.Callback):
  """Keeps the weights of the best validation `best_metric`, remembered in `best.json` with the weights, so a
  resumed run never replaces a better model with a worse one.

  An improvement is written at once when the last write is `min_seconds` old; otherwise the weights are kept
  in memory and written by `persist()`, which runs before every checkpoint and at the end of training, so the
  files on disk always pair a `best.json` with its weights.
  """

  def __init__(self, weights_path: str, state_path: str, metric: str, mode: str, write_state: bool,
               min_seconds: float = 0.0):
    super().__init__()
    self._weights_path = weights_path
    self._state_path = state_path
    self._metric = metric
    self._better = (lambda a, b: a < b) if mode == "min" else (lambda a, b: a > b)
    self._write_state = write_state
    self._min_seconds = min_seconds
    self._last_write = -math.inf
    self._pending: list[Any] | None = None  # Best weights not yet written.
    self.state: dict[str, Any] | None = None
    if os.path.exists(state_path):
      with open(state_path, encoding="utf-8") as f:
        self.state = json.load(f)

  def best(self) -> tuple[str, float, int] | None:
    return None if self.state is None else (self._metric, self.state["value"], self.state["step"])

  def on_epoch_end(self, epoch, logs=None):
    value = (logs or {}).get(f"val_{self._metric}")
    if value is None or not math.isfinite(value):
      return
    if self.state is not None and not self._better(value, self.state["value"]):
      return
    self.state = {"metric": self._metric, "value": float(value), "step": _optimizer_step(self.model),
                  "metrics": {k: float(v) for k, v in (logs or {}).items()}}
    if time.perf_counter() - self._last_write >= self._min_seconds:
      self._write(None)
    else:
      self._pending = self.model.get_weights()

  def persist(self) -> None:
    """Writes best weights kept in memory (no-op when none are pending)."""
    if self._pending is not None:
      self._write(self._pending)

  def _write(self, weights: list[Any] | None) -> None:
    """Writes `weights` (None: the model's current ones) and the state. Collective under multi-worker."""
    if weights is not None:
      current = self.model.get_weights()
      self.model.set_weights(weights)
    self.model.save_weights(self._weights_path)
    if weights is not None:
      self.model.set_weights(current)
    if self._write_state:
      write_json(self._state_path, self.state)
    self._pending = None
    self._last_write = time.perf_counter()

  def on_train_end(self, logs=None):
    self.persist()


def fit(model: tf.keras.Model, train_dataset: tf.data.Dataset | Any, config: EngineConfig,
        strategy: tf.distribute.Strategy | None = None, validate: ValidateFn | None = None,
        callbacks: Sequence[tf.keras.callbacks.Callback] = ()) -> FitResult:
  """Trains a compiled model for `config.total_steps` steps, validating every `eval_every` steps.

  Resumes from `run_dir/backup` when a killed run left it (same config), keeps the weights of the best
  validation and loads them into `model` at the end (when `best_metric` is set), and locks `run_dir` against a
  second concurrent run.

  Args:
    model: A compiled Keras model (compiled under `strategy.scope()`); its `steps_per_execution` is set here.
    train_dataset: Infinite (repeated) training batches, or a distributed dataset of them.
    config: Cadence, selection and outputs.
    strategy: The strategy the model was built under (default: the current one).
    validate: Returns validation metrics for the model; None skips validation (no best selection).
    callbacks: Extra Keras callbacks, run after the engine's validation and before its checkpointing.

  Returns:
    What happened; the best weights are in `model` when a best was recorded.

  Raises:
    RunDirectoryBusyError: when another live run holds `run_dir`.
    ValueError: when `best_metric` is set without `validate`.
  """
  if config.best_metric and validate is None:
    raise ValueError(f"`best_metric` {config.best_metric!r} needs a `validate` function.")
  strategy = strategy or tf.distribute.get_strategy()
  chief = distribute.is_chief(strategy)
  start = time.perf_counter()
  lock = run_lock.RunDirectoryLock(config.run_dir)
  if chief:
    lock.acquire()
  try:
    return _fit(model, train_dataset, config, strategy, validate, callbacks, chief, start)
  finally:
    lock.release()


def _fit(model, train_dataset, config: EngineConfig, strategy, validate, callbacks, chief: bool,
         start: float) -> FitResult:
  best_dir = distribute.output_dir(config.run_dir, strategy, BEST_DIR)
  os.makedirs(best_dir, exist_ok=True)
  engine_callbacks: list[tf.keras.callbacks.Callback] = []
  if config.steps_per_execution:
    model.steps_per_execution = config.steps_per_execution
  else:
    probe = _probe_steps_per_execution(config)
    model.steps_per_execution = probe
    if probe > 1:
      engine_callbacks.append(_StepsPerExecutionTuner(config, probe))
  # Under multi-worker every worker must save at the same steps (saving is collective): no clock-based choices.
  multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
  min_seconds = 0.0 if multi_worker else config.checkpoint_seconds
  best = None
  if config.best_metric:
    best = _BestWeights(os.path.join(best_dir, "weights"), os.path.join(best_dir, BEST_STATE_FILE),
                        config.best_metric, config.best_mode, write_state=chief, min_seconds=min_seconds)
  if config.checkpoint_steps:
    engine_callbacks.append(_Backup(
        distribute.output_dir(config.run_dir, strategy, BACKUP_DIR), config.checkpoint_steps, config.eval_every,
        min_seconds=min_seconds if config.checkpoint_every is None else 0.0,
        before_backup=best.persist if best else None))
  if validate is not None:
    engine_callbacks.append(_Validation(validate))
  engine_callbacks += list(callbacks)
  if best is not None:
    engine_callbacks.append(best)
  reporter = progress.ProgressReporter(
      config.total_steps, config.global_batch_size,
      log_path=os.path.join(config.run_dir, PROGRESS_FILE) if chief else None,
      shown_metrics=(config.best_metric,) if config.best_metric else (), best=best.best if best else None,
      verbose=config.verbose if chief else 0)
  engine_callbacks.append(reporter)
  if config.tensorboard and chief:
    engine_callbacks.append(tf.keras.callbacks.TensorBoard(os.path.join(config.run_dir, LOG_DIR),
                                                           write_graph=False, profile_batch=0))
  history = model.fit(train_dataset, epochs=config.total_steps // config.eval_every,
                      steps_per_epoch=config.eval_every, callbacks=engine_callbacks, verbose=0)
  steps = _optimizer_step(model)  # Before loading the best weights, which do not hold the counter.
  records = [{"step": min(config.total_steps, (epoch + 1) * config.eval_every),
              **{k: float(v[i]) for k, v in history.history.items()}}
             for i, epoch in enumerate(history.epoch)]
  best_state = best.state if best else None
  if best_state is not None:
    # Multi-worker non-chiefs keep no weights of their own; they read the chief's when the folder is shared.
    for weights in (os.path.join(best_dir, "weights"), os.path.join(config.run_dir, BEST_DIR, "weights")):
      if os.path.exists(weights + ".index"):
        model.load_weights(weights).expect_partial()
        break
  if not chief:
    shutil.rmtree(os.path.dirname(best_dir), ignore_errors=True)
  return FitResult(
      steps=steps, resumed_from_step=reporter.initial_step,
      best_step=best_state["step"] if best_state else None, best_value=best_state["value"] if best_state else None,
      best_metrics={k[4:]: v for k, v in (best_state or {}).get("metrics", {}).items() if k.startswith("val_")},
      history=records, examples_per_second=reporter.examples_per_second,
      steps_per_execution=int(tf.keras.backend.get_value(model.steps_per_execution)),
      seconds=time.perf_counter() - start)
