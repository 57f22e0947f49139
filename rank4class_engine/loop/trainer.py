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

Run directory layout (chief; `rank4class_engine.runs.run_directory` owns the directory's lifecycle around
this): `backup/` (the resumable checkpoint: weights, optimizer, and `state-<step>.json` with the validation
history and the training-log sums up to that step), `best/weights*` + `best/best.json` (the weights of the
best validation, replaced whole), `logs/{train,validation}` (TensorBoard scalars at optimizer steps),
`progress.jsonl`, `.run.lock`.

A checkpoint is written only at the end of a Keras epoch, after that epoch's validation, best-weights update
and progress record: a run killed at any point resumes from a step whose validation is recorded, and re-runs
exactly the steps after it with the same data (the input is re-created at the resumed step), so its final
weights and metrics are those of an uninterrupted run.

Preemption: while Keras' loop runs, SIGTERM (batch schedulers, Kubernetes, preemptible clouds) and SIGINT
(Ctrl-C) are recorded instead of ending the process (`rank4class_engine.loop.preemption`). The loop stops
after the current execution, Keras ends that epoch early, the checkpoint of that step is written, and `fit`
raises `TrainingInterrupted`; the same command then resumes from that step. A run resumed inside an epoch
first trains the rest of that epoch (a Keras `fit` of its own), then the whole epochs after it, with the same
batches, the same validations and the same progress events as an uninterrupted run. A second signal, or
`preemption_grace_seconds` after the first, interrupts at once (the checkpoint being written completes first);
the run then resumes from its last checkpoint.

Under MultiWorkerMirroredStrategy every worker watches its own signals, and the workers agree at each
execution's end (and each epoch's) whether any of them recorded one: a sum of the recorded signals over the
workers (`StopAgreement`, one small all-reduce). All then stop after the same execution, write that step's
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

import math
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from rank4class_engine import distribute
from rank4class_engine.loop import preemption, progress
from rank4class_engine.loop.checkpoints import (  # noqa: F401  Re-exported: the engine's public names.
  BEST_STATE_FILE,
  BEST_WEIGHTS,
  BestWeights,
  CheckpointCallback,
  Checkpoints,
  build_optimizer,
  load_best,
  restore,
)
from rank4class_engine.loop.engine_config import (  # noqa: F401
  MODES,
  EngineConfig,
  FitResult,
  TrainData,
  TrainingInterrupted,
  ValidateFn,
  optimizer_step,
  trained_line,
)
from rank4class_engine.loop.execution_length import (  # noqa: F401
  MAX_STEPS_PER_EXECUTION,
  ExactSteps,
  StepsPerExecutionTuner,
  choose_steps_per_execution,
  probe_steps_per_execution,
)
from rank4class_engine.loop.stop_agreement import StopAgreement, StopOnSignal, signal_of
from rank4class_engine.runs import run_lock
from rank4class_engine.runs.run_directory import BACKUP_DIR, BEST_DIR, LOG_DIR, PROGRESS_FILE  # noqa: F401


class _Validation(tf.keras.callbacks.Callback):
  """At the end of every validation step's Keras epoch, in this order: the training logs averaged since the
  last validation, the validation metrics, the best weights, the history record, the progress line and log,
  and TensorBoard (scalars at the optimizer step)."""

  def __init__(self, config: EngineConfig, validate: ValidateFn | None, best: BestWeights | None,
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
    self._epoch_start = optimizer_step(self.model)

  def on_epoch_end(self, epoch, logs=None):
    config = self._config
    step = optimizer_step(self.model)
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
  the same: `rank4class_engine.runs.run_directory`), keeps the weights of the best validation and loads them
  into `model` at the end (when `best_metric` is set), and locks `run_dir` against a second concurrent run.
  The checkpoint stays in `backup/` after training: the run directory's `finish` removes it once the run's
  outputs are in place.

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


def _engine_callbacks(model, config: EngineConfig, strategy, validation: _Validation,
                      best: BestWeights | None, checkpoints: Checkpoints | None,
                      reporter: progress.ProgressReporter, callbacks, multi_worker: bool):
  """Sets the model's steps per execution; returns the engine's callbacks for `model.fit` in their order, the
  preemption watch and the stop agreement they share."""
  engine_callbacks: list[tf.keras.callbacks.Callback] = []
  if config.steps_per_execution:
    model.steps_per_execution = config.steps_per_execution
  else:
    probe = probe_steps_per_execution(config)
    model.steps_per_execution = probe
    if probe > 1:
      engine_callbacks.append(StepsPerExecutionTuner(config, probe, strategy=strategy))
  engine_callbacks.append(ExactSteps(config.train_steps, config.epoch_steps))
  engine_callbacks += [validation, *callbacks]
  watch = preemption.PreemptionWatch(config.preemption_grace_seconds)
  stop = StopAgreement(watch, strategy)
  if checkpoints is not None:
    engine_callbacks.append(CheckpointCallback(config, checkpoints, best, validation.state, multi_worker,
                                               watch, stop, lambda: validation.stopped_early))
  engine_callbacks.append(reporter)
  engine_callbacks.append(StopOnSignal(stop))
  return engine_callbacks, watch, stop


def _fit_loop(model, train_dataset, config: EngineConfig, initial_step: int, engine_callbacks,
              validation: _Validation, reporter: progress.ProgressReporter, checkpoints: Checkpoints | None,
              watch: preemption.PreemptionWatch, stop: StopAgreement) -> float:
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
    raise TrainingInterrupted(config.run_dir, optimizer_step(model),
                              checkpoints.latest_step() if checkpoints else None,
                              signal_of(watch)) from None
  finally:
    validation.close()
  if stop.signal_number is not None:
    reporter.close_line()
    raise TrainingInterrupted(config.run_dir, optimizer_step(model),
                              checkpoints.latest_step() if checkpoints else None, stop.signal_number)
  return time.perf_counter() - loop_start


def _fit(model, train_dataset, config: EngineConfig, strategy, validate, callbacks, chief: bool,
         start: float) -> FitResult:
  best_dir = distribute.output_dir(config.run_dir, strategy, BEST_DIR)
  # Under multi-worker every worker must save at the same steps (saving is collective): no clock-based
  # choices.
  multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
  min_seconds = 0.0 if multi_worker else config.checkpoint_seconds
  best = BestWeights(model, best_dir, config.best_metric, config.best_mode, min_seconds) \
      if config.best_metric else None
  checkpoints = Checkpoints(model, distribute.output_dir(config.run_dir, strategy, BACKUP_DIR)) \
      if config.checkpoint_steps else None
  log_path = os.path.join(config.run_dir, PROGRESS_FILE) if chief else None
  build_optimizer(model, strategy)
  initial_step, state = restore(checkpoints, strategy, log_path)

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
  steps = optimizer_step(model)  # Before loading the best weights, which do not hold the counter.
  best_state = load_best(model, config, best, best_dir)
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
