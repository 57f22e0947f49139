"""The one training engine: Keras `fit` for exactly the asked steps, with validation at a cadence,
best-on-validation weights, resumable checkpoints that hold their validation record, TensorBoard, a progress
line and JSON log, any tf.distribute strategy.

The caller builds and compiles the model (under the strategy's scope; a model may keep its own `train_step`,
as the pairwise training model does) and gives a validation function; the engine owns the loop's cadence:

  with strategy.scope():
    model = build(...)
    model.compile(optimizer, loss)
  result = trainer.fit(model, lambda start_step: make_dataset().skip(start_step),
                       EngineConfig(run_dir, train_steps=600, eval_every=100, best_metric="ndcg_5"), strategy,
                       validate=lambda m: {"ndcg_5": ...})

Run directory layout (chief; `rank4class_engine.run_directory` owns the directory's lifecycle around this):
`backup/` (the resumable checkpoint: weights, optimizer, and `state-<step>.json` with the validation history
and the training-log sums up to that step), `best/weights*` + `best/best.json` (the weights of the best
validation, replaced whole), `logs/{train,validation}` (TensorBoard scalars at optimizer steps),
`progress.jsonl`, `.run.lock`.

A checkpoint is written only at the end of a Keras epoch, after that epoch's validation, best-weights update
and progress record: a run killed at any point resumes from a step whose validation is recorded, and re-runs
exactly the steps after it with the same data (the input is re-created at the resumed step), so its final
weights and metrics are those of an uninterrupted run.

Preemption: while Keras' loop runs, SIGTERM (batch schedulers, Kubernetes, preemptible clouds) and SIGINT
(Ctrl-C) are recorded instead of ending the process (`rank4class_engine.preemption`). The loop stops after the
current execution, Keras ends that epoch early, the checkpoint of that step is written, and `fit` raises
`TrainingInterrupted`; the same command then resumes from that step. A run resumed inside an epoch first
trains the rest of that epoch (a Keras `fit` of its own), then the whole epochs after it, with the same
batches, the same validations and the same progress events as an uninterrupted run. A second signal, or
`preemption_grace_seconds` after the first, interrupts at once (the checkpoint being written completes first);
the run then resumes from its last checkpoint.

Under MultiWorkerMirroredStrategy every worker watches its own signals, and the workers agree at each
execution's end (and each epoch's) whether any of them recorded one: a sum of the recorded signals over the
workers (`_StopAgreement`, one small all-reduce). All then stop after the same execution, write that step's
checkpoint together (saving is collective), and raise the same `TrainingInterrupted` (SIGTERM's when any
worker got SIGTERM); an automatic execution length is the mean of the workers' measures, so execution ends
meet. TensorFlow's `tf.distribute.experimental.PreemptionCheckpointHandler` is not used: it saves its own
checkpoint from a custom training loop (`run(train_fn)`) and leaves the process through its `exit_fn`, while
the engine's stop must end a Keras `fit` at an execution boundary and write its own checkpoint with the
validation state; an agreement at the boundaries the engine already has does this with one collective and the
same code on TF 2.15 and 2.21. A worker interrupted at once (a second signal or the end of its grace) leaves
the others to fail at their next collective (TensorFlow's heartbeat timeout); the run then resumes from its
last checkpoint.
"""

import contextlib
import dataclasses
import glob
import json
import math
import os
import re
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from rank4class_data.validation import atomic_directory, check_choice, check_range, write_json
from rank4class_engine import distribute, preemption, progress, run_lock
from rank4class_engine.run_directory import BACKUP_DIR, BEST_DIR, LOG_DIR, PROGRESS_FILE

BEST_STATE_FILE = "best.json"
BEST_WEIGHTS = "weights"
_STATE_FILE = "state-{step}.json"
_STATE_PATTERN = re.compile(r"^state-(\d+)\.json$")
MODES = ("max", "min")
# Chosen steps_per_execution stays at or below this: Python runs between executions only (callbacks, the
# progress line), so larger values buy little once an execution takes ~0.1 s.
MAX_STEPS_PER_EXECUTION = 1000

ValidateFn = Callable[[tf.keras.Model], Mapping[str, float]]
# A dataset, or a function start_step -> the dataset that continues the stream at that step (a resumed run
# then trains on the same batches as an uninterrupted one).
TrainData = tf.data.Dataset | Any | Callable[[int], Any]


class TrainingInterrupted(KeyboardInterrupt):
  """Training stopped by SIGINT (Ctrl-C) or SIGTERM; the message says where the run resumes.

  Attributes:
    step: The optimizer step reached.
    checkpoint_step: The step of the checkpoint a rerun resumes from, or None when there is none.
    signal_number: The signal that stopped it (binaries exit with 128 + it: 130 for SIGINT, 143 for SIGTERM).
  """

  def __init__(self, run_dir: str, step: int, checkpoint_step: int | None,
               signal_number: int = signal.SIGINT):
    self.step = step
    self.checkpoint_step = checkpoint_step
    self.signal_number = int(signal_number)
    where = (f"rerun the same command to resume from the checkpoint of step {checkpoint_step}"
             if checkpoint_step else "no checkpoint yet: rerun the same command to start it again")
    super().__init__(f"stopped at step {step} of the run in {run_dir}; {where}")


@dataclasses.dataclass
class EngineConfig:
  """How the engine runs a training job.

  Attributes:
    run_dir: Folder for checkpoints, best weights, TensorBoard logs and the progress log.
    train_steps: Optimizer steps in all, exactly.
    eval_every: Steps between validations; the last step is always validated.
    checkpoint_every: Steps between resumable checkpoints; 0 disables them; None (default) checkpoints at
      validation steps, at most once every `checkpoint_seconds` (under MultiWorkerMirroredStrategy, where
      saving is collective and clocks differ between workers, at every validation). The last step is always
      checkpointed (unless 0), so a run killed after training (exporting, testing) does not train again.
    checkpoint_seconds: With `checkpoint_every=None`, the least time between two checkpoints; also the least
      time between two writes of improved best weights (kept in memory meanwhile, written before checkpoints
      and at the end), so a quick run does not spend its time writing files.
    best_metric: Validation metric whose best value selects the kept weights; "" keeps the last weights.
    best_mode: "max" or "min" for `best_metric`.
    steps_per_execution: Steps per `tf.function` call; 0 lets the engine choose (see
      `choose_steps_per_execution`).
    global_batch_size: Examples per step over all replicas (for examples/s).
    tensorboard: Write TensorBoard scalars into `run_dir/logs`.
    verbose: 0 silent (log file only), 1 a progress line on the terminal.
    target_execution_seconds: With `steps_per_execution=0`, the duration one execution should take.
    validate_start: Validate the model before its first step too (a fresh run only), as step 0 of the history
      and a candidate for the best weights: for a model that starts at a fitted classifier (a logistic
      regression, class centroids, cosine towers), which training must then improve on to replace.
    preemption_grace_seconds: After SIGTERM or SIGINT, the seconds the loop has to reach the end of its
      execution, validation and checkpoint before it is interrupted at once (0: at once).
    patience: With `best_metric`: training stops at the first validation from `min_steps` on at which the best
      validation is `patience` validations (`patience * eval_every` steps) old or older; that step is
      checkpointed, and a rerun finds the run done. None: every one of `train_steps`.
    min_steps: The least steps before `patience` may stop training.
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
  validate_start: bool = False
  preemption_grace_seconds: float = 20.0
  patience: int | None = None
  min_steps: int = 0

  def __post_init__(self):
    if not self.run_dir:
      raise ValueError("`run_dir` is required.")
    check_range("train_steps", self.train_steps, 1, integer=True)
    check_range("eval_every", self.eval_every, 1, integer=True)
    if self.checkpoint_every is not None:
      check_range("checkpoint_every", self.checkpoint_every, 0, integer=True)
    check_choice("best_mode", self.best_mode, MODES)
    check_range("steps_per_execution", self.steps_per_execution, 0, integer=True)  # 0: automatic.
    check_range("global_batch_size", self.global_batch_size, 1, integer=True)
    check_range("preemption_grace_seconds", self.preemption_grace_seconds, 0)
    if self.patience is not None:
      check_range("patience", self.patience, 1, integer=True)
      if not self.best_metric:
        raise ValueError("`patience` counts validations without a better `best_metric`; set `best_metric`.")
    check_range("min_steps", self.min_steps, 0, integer=True)

  def patience_spent(self, step: int, best_step: int | None) -> bool:
    """Whether `patience` stops training at validation `step` with the best at `best_step`."""
    return (self.patience is not None and best_step is not None and step >= self.min_steps
            and step - best_step >= self.patience * self.eval_every)

  @property
  def checkpoint_steps(self) -> int:
    return self.eval_every if self.checkpoint_every is None else self.checkpoint_every

  @property
  def total_steps(self) -> int:
    """The steps the run takes: `train_steps`, exactly."""
    return self.train_steps

  @property
  def epoch_steps(self) -> int:
    """Steps of one Keras epoch: every validation and checkpoint step ends one (the last epoch may be
    shorter)."""
    return _cadence(self)


@dataclasses.dataclass
class FitResult:
  """What `fit` did.

  Attributes:
    steps: Optimizer steps at the end.
    resumed_from_step: Step the run started from (0 unless resumed).
    best_step: Step of the best validation, or None.
    best_value: Its `best_metric` value, or None.
    best_metrics: All validation metrics at the best step ("val_" prefix removed).
    history: One record per validation of the whole run (resumed runs included): step, the training logs
      averaged since the previous validation, and the validation metrics (with "val_" prefix).
    examples_per_second: Training throughput measured after the first execution, validations included.
    steps_per_execution: The value used at the end of the run.
    seconds: Wall time of `fit`.
    loop_seconds: Wall time of the training loop alone (Keras `fit`: tracing, the steps, validations and
      checkpoints), without locking, restoring and loading the best weights; 0 when no step was left.
    stopped_early: `EngineConfig.patience` ended training before `train_steps` (in this process or before).
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
  loop_seconds: float = 0.0
  stopped_early: bool = False


def trained_line(steps: int, loop_seconds: float) -> str:
  """The binaries' "Trained" phase line: the loop alone (`FitResult.loop_seconds`; bench/ parses the line)."""
  return (f"Trained {steps} steps in {loop_seconds:.1f} s (the training loop: tracing, validations and "
          "checkpoints included)")


def choose_steps_per_execution(seconds_per_step: float, config: EngineConfig) -> int:
  """Steps per execution so that one takes about `target_execution_seconds`, within the run's cadence.

  The value divides the epoch length (validations and checkpoints end epochs), so no epoch ends with a short
  execution: e.g. 2 ms steps, target 0.2 s, eval_every 100 -> 100; 50 ms steps -> 4.
  """
  wanted = max(1, min(MAX_STEPS_PER_EXECUTION,
                      int(config.target_execution_seconds / max(seconds_per_step, 1e-9))))
  cadence = _cadence(config)
  return max(d for d in range(1, min(wanted, cadence) + 1) if cadence % d == 0)


def _cadence(config: EngineConfig) -> int:
  """Steps between two points where the loop may validate or checkpoint."""
  return (
    math.gcd(config.eval_every, config.checkpoint_steps) if config.checkpoint_steps else config.eval_every
  )


def _probe_steps_per_execution(config: EngineConfig) -> int:
  """The smallest execution length above 1 that fits the cadence (1 if none does).

  Keras builds a one-step train function when `steps_per_execution` is 1 at the first `fit` step, and a
  looping one otherwise; only the looping one follows later changes of the value, so probing starts above 1.
  """
  cadence = _cadence(config)
  return next((d for d in range(2, cadence + 1) if cadence % d == 0), 1)


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


def _optimizer_step(model: tf.keras.Model) -> int:
  return int(tf.keras.backend.get_value(model.optimizer.iterations))


class _StepsPerExecutionTuner(tf.keras.callbacks.Callback):
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
    self._epoch_start = _optimizer_step(self.model)  # An epoch of a resumed run may start inside the cadence.

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


class _ExactSteps(tf.keras.callbacks.Callback):
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
    self._epoch_start = _optimizer_step(self.model)
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


class _BestWeights:
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


class _Checkpoints:
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
    restored = _optimizer_step(model)
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


class _Validation(tf.keras.callbacks.Callback):
  """At the end of every validation step's Keras epoch, in this order: the training logs averaged since the
  last validation, the validation metrics, the best weights, the history record, the progress line and log,
  and TensorBoard (scalars at the optimizer step)."""

  def __init__(self, config: EngineConfig, validate: ValidateFn | None, best: _BestWeights | None,
               reporter: progress.ProgressReporter, tensorboard_dir: str | None, state: Mapping[str, Any],
               strategy: tf.distribute.Strategy | None = None):
    super().__init__()
    self._config = config
    self._strategy = strategy or tf.distribute.get_strategy()
    self.stopped_early = False  # `EngineConfig.patience` ended training at the last validation.
    self._validate = validate
    self._best = best
    self._reporter = reporter
    self.history: list[dict[str, float]] = list(state.get("history", []))
    # Training logs weighted by their steps since the last validation (a checkpoint between validations keeps
    # them, so the resumed run's averages are the uninterrupted run's).
    self._sums: dict[str, float] = dict(state.get("log_sums", {}))
    self._steps_since_validation = int(state.get("log_steps", 0))
    self._epoch_start = 0
    self._writers = None
    if tensorboard_dir is not None:
      self._writers = {split: tf.summary.create_file_writer(os.path.join(tensorboard_dir, split))
                       for split in ("train", "validation")}

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch_start = _optimizer_step(self.model)

  def on_epoch_end(self, epoch, logs=None):
    config = self._config
    step = _optimizer_step(self.model)
    logs = logs if logs is not None else {}
    # Keras' epoch logs average the epoch's steps, which a stop or a resume inside the cadence makes fewer.
    epoch_steps = step - self._epoch_start
    for name, value in logs.items():
      self._sums[name] = self._sums.get(name, 0.0) + float(value) * epoch_steps
    self._steps_since_validation += epoch_steps
    if step % config.eval_every and step < config.train_steps:
      return
    logs.update({name: total / self._steps_since_validation for name, total in self._sums.items()})
    self._sums, self._steps_since_validation = {}, 0
    if self._validate is not None:
      logs.update({f"val_{name}": float(value) for name, value in self._validate(self.model).items()})
    if self._best is not None:
      self._best.update(step, logs)
    self.history.append({"step": step, **{k: float(v) for k, v in logs.items()}})
    self._reporter.record_validation(step, logs)
    self._write_summaries(step, logs)
    if config.patience is not None and step < config.train_steps:
      spent = config.patience_spent(step,
                                    self._best.state["step"] if self._best and self._best.state else None)
      # Under multi-worker the workers decide together (a collective at each validation step).
      if distribute.sum_over_workers(self._strategy, [float(spent)])[0] > 0:
        self.stopped_early = True
        self.model.stop_training = True

  def validate_start(self, model: tf.keras.Model) -> None:
    """Validates the untrained model as step 0 (a fresh run: no history yet), before the first step."""
    if self.history or self._validate is None:
      return
    logs = {f"val_{name}": float(value) for name, value in self._validate(model).items()}
    if self._best is not None:
      self._best.update(0, logs)
    self.history.append({"step": 0, **logs})
    self._reporter.log({"event": "eval", "step": 0, "examples_per_second": None, **logs})
    self._write_summaries(0, logs)

  def state(self) -> dict[str, Any]:
    """What a checkpoint keeps of the validation loop: the history and the partial training-log sums."""
    return {"history": self.history, "log_sums": self._sums, "log_steps": self._steps_since_validation,
            "progress_bytes": self._reporter.log_bytes()}

  def close(self) -> None:
    """Closes the TensorBoard writers (after the last Keras `fit` of the run)."""
    for writer in (self._writers or {}).values():
      writer.close()

  def _write_summaries(self, step: int, logs: Mapping[str, float]) -> None:
    if self._writers is None:
      return
    for split, names in (("train", [k for k in logs if not k.startswith("val_")]),
                         ("validation", [k for k in logs if k.startswith("val_")])):
      with self._writers[split].as_default():
        for name in names:
          tf.summary.scalar("epoch_" + name.removeprefix("val_"), logs[name], step=step)
      self._writers[split].flush()


class _StopAgreement:
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


class _Checkpoint(tf.keras.callbacks.Callback):
  """At the end of every checkpoint step's Keras epoch, and of the epoch a signal stopped (after `_Validation`
  and the caller's callbacks): the pending best weights, then the checkpoint with the validation history and
  the progress log's length. A second signal waits for both to be written."""

  def __init__(self, config: EngineConfig, checkpoints: _Checkpoints, best: _BestWeights | None,
               state: Callable[[], dict[str, Any]], multi_worker: bool,
               watch: preemption.PreemptionWatch | None = None, stop: _StopAgreement | None = None,
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
    step = _optimizer_step(self.model)
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


class _StopOnSignal(tf.keras.callbacks.Callback):
  """Ends Keras' loop after the execution in which a signal was recorded (the last callback, so a signal sent
  by any callback of that execution counts; under multi-worker, a signal any worker recorded): Keras then ends
  the epoch early and calls `on_epoch_end`, where `_Checkpoint` writes the step."""

  def __init__(self, stop: _StopAgreement):
    super().__init__()
    self._stop = stop

  def _stop_if_signalled(self) -> None:
    if self._stop.poll():
      self.model.stop_training = True

  def on_train_batch_end(self, batch, logs=None):
    self._stop_if_signalled()

  def on_epoch_end(self, epoch, logs=None):
    self._stop_if_signalled()  # A signal during the epoch's validation or checkpoint.


def _fit_parts(start_step: int, config: EngineConfig) -> list[tuple[int, int, int, int]]:
  """The Keras `fit` calls from `start_step`: (start step, initial epoch, epochs, steps per epoch).

  One call of whole epochs, preceded, when the run resumes inside an epoch (a checkpoint of a stop), by one of
  a single epoch holding that epoch's remaining steps: e.g. 37 of 70 by 20 -> (37, 0, 1, 3), (40, 2, 4, 20).
  """
  epoch_steps, parts = config.epoch_steps, []
  if start_step % epoch_steps:
    end = min((start_step // epoch_steps + 1) * epoch_steps, config.train_steps)
    parts.append((start_step, 0, 1, end - start_step))
    start_step = end
  if start_step < config.train_steps:
    parts.append((start_step, start_step // epoch_steps,
                  math.ceil(config.train_steps / epoch_steps), epoch_steps))
  return parts


def fit(model: tf.keras.Model, train_dataset: TrainData, config: EngineConfig,
        strategy: tf.distribute.Strategy | None = None, validate: ValidateFn | None = None,
        callbacks: Sequence[tf.keras.callbacks.Callback] = ()) -> FitResult:
  """Trains a compiled model for exactly `config.train_steps` steps, validating every `eval_every` steps and
  at the last.

  Resumes from `run_dir/backup` when an interrupted or stopped run left it (the caller checks the config is
  the same: `rank4class_engine.run_directory`), keeps the weights of the best validation and loads them into
  `model` at the end (when `best_metric` is set), and locks `run_dir` against a second concurrent run. The
  checkpoint stays in `backup/` after training: the run directory's `finish` removes it once the run's outputs
  are in place.

  Args:
    model: A compiled Keras model (compiled under `strategy.scope()`) with all its variables built; its
      `steps_per_execution` is set here.
    train_dataset: Endless (repeated) training batches: a function start_step -> the dataset (or distributed
      dataset) continuing the batch stream at that step, so a resumed run trains on the batches an
      uninterrupted one would; or the dataset itself (a resumed run then starts it from the top).
    config: Cadence, selection and outputs.
    strategy: The strategy the model was built under (default: the current one).
    validate: Returns validation metrics for the model; None skips validation (no best selection).
    callbacks: Extra Keras callbacks, run after the engine's validation (their epoch-end logs hold it at
      validation steps) and before its checkpoint. Epochs are the cadence's; a run resumed inside one runs
      Keras `fit` twice (its rest, then the epochs after it), so they may see two `on_train_begin`.

  Returns:
    What happened; the best weights are in `model` when a best was recorded.

  Raises:
    RunDirectoryBusyError: when another live run holds `run_dir`.
    ValueError: when `best_metric` is set without `validate`, or the checkpoint does not fit the model.
    TrainingInterrupted: when SIGTERM or SIGINT stopped training (watched in the main thread; under
      multi-worker on any worker, and all stop at one step: the checkpoint of the step reached is written
      first), or a KeyboardInterrupt ended it (the last checkpoint stands).
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


def _signal_of(watch: preemption.PreemptionWatch | None) -> int:
  """The signal that stopped training: the first one the watch recorded, else Ctrl-C's."""
  return watch.signal_number if watch is not None and watch.signal_number is not None else signal.SIGINT


def _engine_callbacks(model, config: EngineConfig, strategy, validation: _Validation,
                      best: _BestWeights | None, checkpoints: _Checkpoints | None,
                      reporter: progress.ProgressReporter, callbacks, multi_worker: bool):
  """Sets the model's steps per execution; returns the engine's callbacks for `model.fit` in their order, the
  preemption watch and the stop agreement they share."""
  engine_callbacks: list[tf.keras.callbacks.Callback] = []
  if config.steps_per_execution:
    model.steps_per_execution = config.steps_per_execution
  else:
    probe = _probe_steps_per_execution(config)
    model.steps_per_execution = probe
    if probe > 1:
      engine_callbacks.append(_StepsPerExecutionTuner(config, probe, strategy=strategy))
  engine_callbacks.append(_ExactSteps(config.train_steps, config.epoch_steps))
  engine_callbacks += [validation, *callbacks]
  watch = preemption.PreemptionWatch(config.preemption_grace_seconds)
  stop = _StopAgreement(watch, strategy)
  if checkpoints is not None:
    engine_callbacks.append(_Checkpoint(config, checkpoints, best, validation.state, multi_worker, watch,
                                        stop, lambda: validation.stopped_early))
  engine_callbacks.append(reporter)
  engine_callbacks.append(_StopOnSignal(stop))
  return engine_callbacks, watch, stop


def _fit_loop(model, train_dataset, config: EngineConfig, initial_step: int, engine_callbacks,
              validation: _Validation, reporter: progress.ProgressReporter, checkpoints: _Checkpoints | None,
              watch: preemption.PreemptionWatch, stop: _StopAgreement) -> float:
  """Runs `model.fit` over the parts from `initial_step` on; returns the loop's seconds. Raises
  `TrainingInterrupted` when a signal (or Ctrl-C) stopped it."""
  loop_start = time.perf_counter()
  parts = _fit_parts(initial_step, config)
  try:
    with watch:
      for i, (part_start, initial_epoch, epochs, steps_per_epoch) in enumerate(parts):
        dataset = train_dataset(part_start) if callable(train_dataset) else train_dataset
        reporter.training_continues = i + 1 < len(parts)
        model.fit(dataset, initial_epoch=initial_epoch, epochs=epochs, steps_per_epoch=steps_per_epoch,
                  callbacks=engine_callbacks, verbose=0)
        if stop.signal_number is not None or validation.stopped_early:
          break
      stop.poll()  # A signal after the last execution's poll: the run is complete, and says it was stopped.
  except KeyboardInterrupt as e:
    if isinstance(e, TrainingInterrupted):
      raise
    reporter.close_line()
    raise TrainingInterrupted(config.run_dir, _optimizer_step(model),
                              checkpoints.latest_step() if checkpoints else None,
                              _signal_of(watch)) from None
  finally:
    validation.close()
  if stop.signal_number is not None:
    reporter.close_line()
    raise TrainingInterrupted(config.run_dir, _optimizer_step(model),
                              checkpoints.latest_step() if checkpoints else None, stop.signal_number)
  return time.perf_counter() - loop_start


def _restore(checkpoints: _Checkpoints | None, strategy, log_path: str | None) -> tuple[int, dict]:
  """The step and engine state of the latest checkpoint, restored into the model (0 and {} without one)."""
  initial_step, state = 0, {}
  if checkpoints is not None and checkpoints.latest_step() is not None:
    initial_step, state = checkpoints.restore(strategy)
    if log_path is not None:
      progress.truncate_log(log_path, state["progress_bytes"])  # Events after the checkpoint happen again.
  return initial_step, state


def _load_best(model, config: EngineConfig, best: _BestWeights | None, best_dir: str) -> dict | None:
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


def _fit(model, train_dataset, config: EngineConfig, strategy, validate, callbacks, chief: bool,
         start: float) -> FitResult:
  best_dir = distribute.output_dir(config.run_dir, strategy, BEST_DIR)
  # Under multi-worker every worker must save at the same steps (saving is collective): no clock-based
  # choices.
  multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
  min_seconds = 0.0 if multi_worker else config.checkpoint_seconds
  best = _BestWeights(model, best_dir, config.best_metric, config.best_mode, min_seconds) \
      if config.best_metric else None
  checkpoints = _Checkpoints(model, distribute.output_dir(config.run_dir, strategy, BACKUP_DIR)) \
      if config.checkpoint_steps else None
  log_path = os.path.join(config.run_dir, PROGRESS_FILE) if chief else None
  build_optimizer(model, strategy)
  initial_step, state = _restore(checkpoints, strategy, log_path)

  reporter = progress.ProgressReporter(
      config.total_steps, config.global_batch_size, log_path=log_path,
      shown_metrics=(config.best_metric,) if config.best_metric else (), best=best.best if best else None,
      verbose=config.verbose if chief else 0, eval_every=config.eval_every,
      at_most=config.patience is not None)
  validation = _Validation(config, validate, best, reporter,
                           os.path.join(config.run_dir, LOG_DIR) if config.tensorboard and chief else None,
                           state, strategy)
  # A run that patience stopped before (its last checkpoint is that step) is done.
  done_early = initial_step > 0 and config.patience_spent(initial_step,
                                                          best.state["step"] if best and best.state else None)
  if config.validate_start and initial_step == 0 and initial_step < config.train_steps:
    with strategy.scope():  # As Keras' fit calls the validation callbacks.
      validation.validate_start(model)
    # A Keras predict/evaluate function traced by that validation is kept by the model; the execution length
    # set below would not reach it (it then returns the first execution's batches only): traced again when
    # used.
    model.predict_function = model.test_function = None
  engine_callbacks, watch, stop = _engine_callbacks(model, config, strategy, validation, best, checkpoints,
                                                    reporter, callbacks, multi_worker)
  loop_seconds = 0.0
  if initial_step < config.train_steps and not done_early:
    loop_seconds = _fit_loop(model, train_dataset, config, initial_step, engine_callbacks, validation,
                             reporter, checkpoints, watch, stop)
  else:
    validation.close()
    reporter.set_model(model)
    reporter.on_train_begin()
    reporter.on_train_end()
  steps = _optimizer_step(model)  # Before loading the best weights, which do not hold the counter.
  best_state = _load_best(model, config, best, best_dir)
  if not chief:
    shutil.rmtree(best_dir, ignore_errors=True)
  return FitResult(
      steps=steps, resumed_from_step=initial_step,
      best_step=best_state["step"] if best_state else None,
      best_value=best_state["value"] if best_state else None,
      best_metrics={k[4:]: v for k, v in (best_state or {}).get("metrics", {}).items()
                    if k.startswith("val_")},
      history=validation.history, examples_per_second=reporter.examples_per_second,
      steps_per_execution=int(tf.keras.backend.get_value(model.steps_per_execution)),
      seconds=time.perf_counter() - start, loop_seconds=loop_seconds,
      stopped_early=validation.stopped_early or done_early)
