"""What the training engine is asked and what it answers: `EngineConfig` (cadence, selection, outputs),
`FitResult`, `TrainingInterrupted`, the loop's cadence and the optimizer step a model has reached."""

import dataclasses
import math
import signal
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from rank4class_data.validation import check_choice, check_range

MODES = ("max", "min")

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
    return cadence(self)


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


def cadence(config: EngineConfig) -> int:
  """Steps between two points where the loop may validate or checkpoint."""
  return (
    math.gcd(config.eval_every, config.checkpoint_steps) if config.checkpoint_steps else config.eval_every
  )


def optimizer_step(model: tf.keras.Model) -> int:
  """The optimizer steps `model` has taken (its optimizer's `iterations`)."""
  return int(tf.keras.backend.get_value(model.optimizer.iterations))
