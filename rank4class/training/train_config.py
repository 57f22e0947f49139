"""The configuration of a Rank4Class training run and what it produces: `Rank4ClassTrainConfig` (with its
`config.json` reading and comparison), the run's length, the run-directory files, the optimizer defaults of
each text mode, and `Rank4ClassTrainResult`."""

import dataclasses
import json
import math
import os
import warnings
from typing import Any

import numpy as np

from rank4class.evaluation import metrics as metrics_lib
from rank4class.modeling import class_encoders
from rank4class.modeling import encoders as encoders_lib
from rank4class.modeling import model as model_lib
from rank4class.training import training_data as data_lib
from rank4class_data.validation import check_choice, check_range
from rank4class_engine import distribute
from rank4class_engine.loop import trainer
from rank4class_engine.optimization import learning_rates as learning_rates_lib
from rank4class_engine.optimization import precision
from rank4class_engine.optimization.optimizers import OptimizerConfig
from rank4class_engine.runs import configs as engine_configs
from rank4class_engine.runs import run_directory

# Whether validation computes the loss over all classes: "auto" when TensorBoard or best_metric="loss" reads
# it and it is affordable (`train.validation_loss_note`), "on", "off".
VALIDATION_LOSS = ("auto", "on", "off")
# `RunConfig.few_shot`: a run with few labelled rows per class trains on all of them, chosen by
# cross-validation (`rank4class.training.few_shot`): "auto" where it applies, "on", "off".
FEW_SHOT_MODES = ("auto", "on", "off")
AUTO_ENCODER = "auto"
INSTANCE_ENCODERS = (AUTO_ENCODER, *encoders_lib.ENCODER_NAMES)

# The run directory's files (rank4class_engine.runs.run_directory and trainer own them; named here for
# readers).
CONFIG_FILE = run_directory.CONFIG_FILE
RESULT_FILE = "train_result.json"
PROGRESS_FILE = run_directory.PROGRESS_FILE
BEST_STATE_FILE = trainer.BEST_STATE_FILE
BEST_DIR = run_directory.BEST_DIR
BACKUP_DIR = run_directory.BACKUP_DIR
EXPORT_DIR = run_directory.EXPORT_DIR
LOG_DIR = run_directory.LOG_DIR
TEST_REPORT_FILE = "test_report.json"
TEST_PER_CLASS_FILE = "test_report.per_class.csv"  # `evaluation_report.per_class_csv_path(TEST_REPORT_FILE)`.

# Fields of Rank4ClassTrainConfig (dotted in its parts) that change no traced graph: runs that differ only in
# these share a model through a `model_reuse.ModelPool` (the study's runs of one cell).
REUSE_FREE_FIELDS = ("model_dir", "run.seed", "run.verbose", "run.preemption_grace_seconds", "outputs")
# Fields of Rank4ClassTrainConfig that may change when a run is restarted on the same model_dir.
# (steps_per_execution changes speed only; before the engine it defaulted to 1, now to 0: automatic.
# validation_loss changes what validation logs, never the steps or the chosen model: best_metric="loss"
# computes it whatever it says.)
RESTART_FREE_FIELDS = ("run.strategy", "run.devices", "run.verbose", "model_dir", "run.steps_per_execution",
                       "run.validation_loss", "outputs.baselines", "outputs.calibrate",
                       "run.preemption_grace_seconds")


# `Rank4ClassTrainResult.choice["chosen"]`: the trained model, a logistic regression of its inputs, or the
# same run without its class texts.
TRAINED_CHOICE = "trained"
LINEAR_CHOICE = "logistic_regression"
TFIDF_LINEAR_CHOICE = "tfidf_logistic_regression"
WITHOUT_CLASS_TEXTS_CHOICE = "without_class_texts"

# Fine-tuning a pre-trained text encoder: the recipe of BERT's paper and of Hugging Face's Trainer (AdamW, a
# rate in 2e-5..5e-5, 10% warmup then linear decay, weight decay 0.01). rank4class-train's default for
# --text_mode=finetune; the 1e-3 of a head on frozen embeddings wrecks the pre-trained weights (2026-11-27:
# below the majority class on a 6-class set).
FINETUNE_OPTIMIZER = OptimizerConfig(type="adamw", learning_rate=3e-5, weight_decay=0.01,
                                     schedule=learning_rates_lib.LINEAR, warmup_fraction=0.1)
# A projection of sparse TF-IDF vectors (`--text_mode=tfidf`): a linear model wants a larger rate than an MLP
# on dense embeddings; 1e-2 was best of 3e-3, 1e-2 and 3e-2 on R8 and 20 Newsgroups (docs/RESULTS.md).
TFIDF_OPTIMIZER = OptimizerConfig(learning_rate=1e-2)
# TF-IDF beside an MLP on frozen embeddings (`--text_mode=hybrid`): the TF-IDF projection's rate. Softmax +
# dot, width 128, seeds 0-2, test top-1 error, 1e-2 against 1e-3: Reuters R8 2.77 +- 0.13 against 2.86 +-
# 0.21, Drugs.com sentiment 25.86 +- 0.46 against 28.23 +- 0.26 (validation NDCG@5 favoured 1e-2 on Drugs.com,
# 1e-3 on R8 by 0.001).
HYBRID_OPTIMIZER = OptimizerConfig(learning_rate=1e-2)
# Above this rate fine-tuning gets a warning line.
FINETUNE_MAX_LEARNING_RATE = 1e-4

# A run that gives neither `train_steps` nor `epochs` trains this many passes over its training split, within
# these bounds: a fixed 1,000 steps was 0.6 of an epoch on Fashion-MNIST's 54,000 images (17.3 % top-1 error
# with the old 2-block CNN; 3 epochs of the 3-block CNN: docs/RESULTS.md), and 3 epochs of a few hundred rows
# are too few steps for a head to converge.
DEFAULT_EPOCHS = 3
DEFAULT_MIN_STEPS = 1000
DEFAULT_MAX_STEPS = 20000
# The default length chosen on validation (`Rank4ClassTrainConfig.patience`): from the steps above on,
# training stops at the first validation whose best is `patience` validations old, and runs at most this many
# times those steps.
DEFAULT_PATIENCE = 3
PATIENCE_LENGTH_FACTOR = 3


@dataclasses.dataclass
class RunConfig:
  """How a run trains: its length, validation, checkpoints, devices, seed and what it prints (the part of
  `Rank4ClassTrainConfig` that the training loop reads; `rank4class.training.train` makes the engine's
  `EngineConfig` from it, in one place).

  Attributes:
    batch_size: Global batch size (split across replicas).
    train_steps: Optimizer steps, exactly; None derives them from `epochs`.
    epochs: Passes over the training data, used when `train_steps` is None. Both None: `DEFAULT_EPOCHS`
      passes, at least `DEFAULT_MIN_STEPS` and at most `DEFAULT_MAX_STEPS` steps
      (`Rank4ClassTrainConfig.total_steps`).
    eval_every: Steps between validation runs; the last step is validated too.
    checkpoint_every: Steps between backup checkpoints for resumption; 0 disables; None (default) checkpoints
      at validations, at most every 30 s (`rank4class_engine.loop.trainer.EngineConfig`).
    steps_per_execution: Steps run per `tf.function` call; 0 (default) lets the engine choose from the
      measured step time (see `rank4class_engine.loop.trainer.choose_steps_per_execution`); a fixed value must
      divide `eval_every` and `checkpoint_every`.
    best_metric: Validation metric choosing the exported model ("loss" or a metric name such as "ndcg_5");
      errors and the loss are minimised, other metrics maximised.
    validation_loss: One of `VALIDATION_LOSS`: whether validation also computes the loss over all classes (for
      TensorBoard and best_metric="loss"); "auto" skips it where it is not read or too costly
      (`train.validation_loss_note`).
    strategy: One of `distribute.STRATEGIES`.
    devices: Explicit devices for the "mirrored" strategy, e.g. ["/cpu:0", "/cpu:1"].
    seed: Seed of the weights, the data order and the Gumbel sampler.
    precision: "float32", "mixed_bfloat16" or "mixed_float16" (`rank4class_engine.optimization.precision`):
      the compute dtype of the model's layers; variables, scores, losses and metrics stay float32.
    tensorboard: Write TensorBoard logs into `<model_dir>/logs`.
    verbose: 0 silent; 1 or 2 a progress line on the terminal (step, loss, examples/s, ETA, last validation).
    preemption_grace_seconds: After SIGTERM or SIGINT, the seconds the loop has to finish its current
      execution and checkpoint that step before it is interrupted at once
      (`rank4class_engine.loop.trainer.EngineConfig`); changes no result.
    patience: With the default length (neither `train_steps` nor `epochs`) and a constant learning rate: the
      validation chooses how long the run trains. It trains at least the default length, then stops at the
      first validation whose best is `patience` validations old, at most `PATIENCE_LENGTH_FACTOR` times the
      default length (`rank4class_engine.loop.trainer.EngineConfig.patience`); the best step is kept. 0: the
      default length exactly.
    few_shot: One of `FEW_SHOT_MODES`: "auto" trains a run with few labelled rows per class (frozen text, the
      default model and length, no validation files; `rank4class.training.few_shot.few_shot_rule`) on every
      row, its classes' texts as the prior and every choice made by cross-validation; "on" asks for it
      (an error where it cannot apply); "off" never.
  """

  batch_size: int = 32
  train_steps: int | None = 1000
  epochs: float | None = None
  eval_every: int = 100
  checkpoint_every: int | None = None
  steps_per_execution: int = 0
  best_metric: str = "ndcg_5"
  validation_loss: str = "auto"
  strategy: str = "auto"
  devices: list[str] | None = None
  seed: int = 0
  precision: str = precision.FLOAT32
  tensorboard: bool = True
  verbose: int = 2
  preemption_grace_seconds: float = 20.0
  patience: int = DEFAULT_PATIENCE
  few_shot: str = "auto"

  def __post_init__(self):
    check_range("batch_size", self.batch_size, 1, integer=True)
    check_choice("few_shot", self.few_shot, FEW_SHOT_MODES)
    if self.train_steps is not None:
      check_range("train_steps", self.train_steps, 1, integer=True)
    if self.epochs is not None:
      check_range("epochs", self.epochs, 0, low_inclusive=False)
    check_range("eval_every", self.eval_every, 1, integer=True)
    check_range("preemption_grace_seconds", self.preemption_grace_seconds, 0)
    check_range("patience", self.patience, 0, integer=True)
    if self.steps_per_execution < 0 or (
      self.steps_per_execution and self.eval_every % self.steps_per_execution
    ):
      raise ValueError(f"`steps_per_execution` ({self.steps_per_execution}) must be 0 (automatic) or divide "
                       f"`eval_every` ({self.eval_every}).")
    checkpoint_every = self.checkpoint_steps
    if checkpoint_every < 0 or (checkpoint_every and self.steps_per_execution
                                and checkpoint_every % self.steps_per_execution):
      raise ValueError(f"`checkpoint_every` ({checkpoint_every}) must be >= 0 and a multiple of "
                       f"`steps_per_execution` ({self.steps_per_execution}).")
    precision.check_policy(self.precision)
    check_choice("strategy", self.strategy, distribute.STRATEGIES)
    check_choice("validation_loss", self.validation_loss, VALIDATION_LOSS)
    if self.validation_loss == "off" and self.best_metric == "loss":
      raise ValueError("best_metric='loss' needs the validation loss, which validation_loss='off' turns off.")

  @property
  def checkpoint_steps(self) -> int:
    return self.eval_every if self.checkpoint_every is None else self.checkpoint_every


@dataclasses.dataclass
class OutputsConfig:
  """What a run produces after its training loop (the part of `Rank4ClassTrainConfig` that
  `rank4class.training.train` alone reads; below it, values are handed on, never the part).

  Attributes:
    export: Export the best model as a SavedModel with the serving signature into `<model_dir>/export`.
    serving_top_k: Classes per instance returned by the serving signature.
    evaluate_test: Evaluate the best model on the test split (when there is one) and write test_report.json.
    baselines: Fit the baselines (`rank4class.evaluation.baselines`: majority class, TF-IDF + logistic
      regression on raw texts, logistic regression on the model's inputs) and report them beside the model on
      the same split, with a "model vs best baseline" line.
    calibrate: After training, fit a temperature (softmax of scores / T) and split-conformal class sets on the
      validation split (`rank4class.inference.calibration`; skipped for graded ELWC labels and from
      `CHUNKED_VALIDATION_CLASSES` classes on), evaluate them on the test split, and export them
      (`served.CALIBRATION_FILE`): `rank4class-predict` then writes probabilities. Changes no training.
    linear_candidate: After training, validate the multinomial logistic regression of the model's own inputs
      too (`rank4class.training.linear_candidates`: frozen embeddings or dense features standardised, trained
      by the engine along a path of L2 strengths, the head chosen by validation log-loss), and with text mode
      "auto" the one of TF-IDF beside the frozen embeddings, and keep the simplest of them and the trained
      model whose validation `best_metric` is within one standard error of the best
      (`rank4class.training.model_choice`). Applies to runs on fixed vectors or hybrid text with class ids
      and fewer than `model_setup.AUTO_CENTROID_CLASSES` classes, whatever their class encoder and
      interaction (the candidate is packed with one-hot class embeddings and the dot interaction). Without
      one, a run of class texts is compared with the run without them (`model_choice.choose_class_texts`).
    zero_shot_holdout: For a model whose classes are texts in cosine towers: the share of the training classes
      held out of a second training, the zero-shot model's, whose validation on them chooses its step and the
      share of the untrained cosine it keeps (`rank4class.training.zero_shot_choice`; saved in
      `<model_dir>/zero_shot`, what `rank4class-export --kind=zero_shot` exports). None (auto): a tenth of the
      classes where that is at least 5; 0: no zero-shot model.
  """

  export: bool = True
  serving_top_k: int = 5
  evaluate_test: bool = True
  baselines: bool = True
  calibrate: bool = True
  linear_candidate: bool = True
  zero_shot_holdout: float | None = None

  def __post_init__(self):
    check_range("serving_top_k", self.serving_top_k, 1, integer=True)
    if self.zero_shot_holdout is not None:
      check_range("zero_shot_holdout", self.zero_shot_holdout, 0.0, 0.5)


# The parts' field names: `Rank4ClassTrainConfig` takes them as keywords too, and the flat config.json of
# 0.8 and earlier is read into the parts by them.
RUN_FIELDS = tuple(field.name for field in dataclasses.fields(RunConfig))
OUTPUTS_FIELDS = tuple(field.name for field in dataclasses.fields(OutputsConfig))
_PART_OF_FIELD = {**dict.fromkeys(RUN_FIELDS, "run"), **dict.fromkeys(OUTPUTS_FIELDS, "outputs"),
                  "checkpoint_steps": "run"}
_warned_flat_names: set[str] = set()


def _warn_flat(name: str) -> None:
  if name not in _warned_flat_names:
    _warned_flat_names.add(name)
    warnings.warn(f"Rank4ClassTrainConfig.{name} is deprecated since 0.9.0 (removed in 0.10.0): read "
                  f"Rank4ClassTrainConfig.{_PART_OF_FIELD[name]}.{name}.", DeprecationWarning, stacklevel=3)


@dataclasses.dataclass(init=False)
class Rank4ClassTrainConfig:
  """Everything one training run needs, in parts; written to `<model_dir>/config.json`.

  Each part goes to the code that reads it, never the whole: `data` to the input layer and the training data,
  `model` to the model's construction, `optimizer` to `rank4class_engine.optimization.optimizers`, `run` to
  the training loop (through `rank4class_engine.loop.trainer.EngineConfig`), `outputs` to the steps after the
  loop. The fields of `run` and `outputs` are also accepted as keywords (`Rank4ClassTrainConfig(model_dir,
  data, train_steps=500)` sets `run.train_steps`), as `dataclasses.replace` passes them; reading or setting
  them on the whole config (`config.train_steps`, as in 0.8) still works until 0.10.0, with a
  DeprecationWarning.

  Attributes:
    model_dir: Output folder: config.json, checkpoints (backup/, best/), logs/, progress.jsonl, export/.
    data: Training data.
    model: Instance encoder (type "auto" picks one for the data), class encoder, interaction, loss, metric
      cutoffs.
    optimizer: Optimizer and learning rate.
    run: Length, validation, checkpoints, devices, seed, output on the terminal (`RunConfig`).
    outputs: Export, test report, baselines, calibration, the logistic-regression candidate and the zero-shot
      model (`OutputsConfig`).
  """

  model_dir: str
  data: data_lib.DataConfig
  model: model_lib.Rank4ClassConfig = dataclasses.field(default_factory=model_lib.Rank4ClassConfig)
  optimizer: OptimizerConfig = dataclasses.field(default_factory=OptimizerConfig)
  run: RunConfig = dataclasses.field(default_factory=RunConfig)
  outputs: OutputsConfig = dataclasses.field(default_factory=OutputsConfig)

  def __init__(self, model_dir: str, data: data_lib.DataConfig,
               model: model_lib.Rank4ClassConfig | None = None,
               optimizer: OptimizerConfig | None = None, run: RunConfig | None = None,
               outputs: OutputsConfig | None = None, **part_fields: Any):
    unknown = sorted(set(part_fields) - set(RUN_FIELDS) - set(OUTPUTS_FIELDS))
    if unknown:
      raise TypeError(f"Rank4ClassTrainConfig has no field(s) {unknown}; its parts are data, model, "
                      f"optimizer, run ({', '.join(RUN_FIELDS)}) and outputs ({', '.join(OUTPUTS_FIELDS)}).")
    run = run if run is not None else RunConfig()
    outputs = outputs if outputs is not None else OutputsConfig()
    run_changes = {name: value for name, value in part_fields.items() if name in RUN_FIELDS}
    outputs_changes = {name: value for name, value in part_fields.items() if name in OUTPUTS_FIELDS}
    object.__setattr__(self, "model_dir", model_dir)
    object.__setattr__(self, "data", data)
    object.__setattr__(self, "model", model if model is not None else model_lib.Rank4ClassConfig())
    object.__setattr__(self, "optimizer", optimizer if optimizer is not None else OptimizerConfig())
    object.__setattr__(self, "run", dataclasses.replace(run, **run_changes) if run_changes else run)
    object.__setattr__(self, "outputs",
                       dataclasses.replace(outputs, **outputs_changes) if outputs_changes else outputs)
    self._check()

  def __getattr__(self, name: str) -> Any:
    # Only for names that are not attributes: the flat names of 0.8 (`config.train_steps`).
    part = _PART_OF_FIELD.get(name)
    if part is None or name in ("run", "outputs"):
      raise AttributeError(f"'Rank4ClassTrainConfig' object has no attribute {name!r}")
    _warn_flat(name)
    return getattr(object.__getattribute__(self, part), name)

  def __setattr__(self, name: str, value: Any) -> None:
    part = _PART_OF_FIELD.get(name)
    if part is not None and name != "checkpoint_steps":
      _warn_flat(name)  # Set on its part: a flat attribute beside the part's would be read by nothing.
      setattr(getattr(self, part), name, value)
    else:
      object.__setattr__(self, name, value)

  def _check(self) -> None:
    if not self.model_dir:
      raise ValueError("`model_dir` is required.")
    if self.data.class_texts and self.model.class_encoder.type != class_encoders.METADATA:
      raise ValueError(f"data.class_texts ({self.data.class_texts}) is read by the metadata class encoder "
                       f"only; the class encoder is {self.model.class_encoder.type!r}.")
    check_choice("instance_encoder", self.model.instance_encoder.type, INSTANCE_ENCODERS)
    check_choice("best_metric", self.run.best_metric, ("loss", *metric_names(self.model.metric_ks)))

  @property
  def chooses_length(self) -> bool:
    """Whether the validation chooses how long the run trains (`patience` on the default length; the
    optimizer's schedule constant)."""
    run = self.run
    return (run.train_steps is None and run.epochs is None and run.patience > 0
            and self.optimizer.schedule == learning_rates_lib.CONSTANT)

  def min_steps(self, num_train: int | None) -> int:
    """The steps `patience` cannot cut: `total_steps` of a run whose length is not chosen; with the default
    length, `DEFAULT_EPOCHS` passes clipped to [`DEFAULT_MIN_STEPS`, `DEFAULT_MAX_STEPS`]."""
    if not self.chooses_length:
      return self.total_steps(num_train)
    return int(np.clip(math.ceil(DEFAULT_EPOCHS * num_train / self.run.batch_size), DEFAULT_MIN_STEPS,
                       DEFAULT_MAX_STEPS))

  def total_steps(self, num_train: int | None) -> int:
    """The run's optimizer steps at most: `run.train_steps` exactly, `run.epochs` passes over `num_train`
    examples, or neither given: `DEFAULT_EPOCHS` passes, clipped to [`DEFAULT_MIN_STEPS`,
    `DEFAULT_MAX_STEPS`], and where the validation chooses the length (`chooses_length`)
    `PATIENCE_LENGTH_FACTOR` times that (at most `DEFAULT_MAX_STEPS`), cut by `run.patience`."""
    run = self.run
    steps = run.train_steps
    if steps is None and run.epochs is None:
      least = int(np.clip(math.ceil(DEFAULT_EPOCHS * num_train / run.batch_size), DEFAULT_MIN_STEPS,
                          DEFAULT_MAX_STEPS))
      return min(PATIENCE_LENGTH_FACTOR * least, DEFAULT_MAX_STEPS) if self.chooses_length else least
    if steps is None:
      steps = math.ceil(run.epochs * num_train / run.batch_size)
    return max(1, steps)


TrainConfig = Rank4ClassTrainConfig  # Deprecated name (before 0.9.0); removed in 0.10.0.


@dataclasses.dataclass
class Rank4ClassTrainResult:
  """What a finished run produced (also written to `<model_dir>/train_result.json`).

  Attributes:
    model_dir: The run's folder.
    export_dir: The SavedModel of the best model, or None when not exported.
    steps: Optimizer steps taken in total (across restarts).
    resumed_from_step: The step this process resumed from (0 for a fresh start).
    best_metric: The validation metric that chose the best model.
    best_step: Step of the best validation result.
    best_value: Its value.
    validation_metrics: All validation metrics of the exported model: the trained model's at the best step, or
      the logistic regression's when `choice` kept it.
    test_report: Evaluation report of the best model on the test split (`evaluators.evaluate_dataset`), or
      None.
    history: One dict per validation run: step, training and validation metrics.
    seconds: Wall time of this process's `train`, everything included.
    examples_per_second: Training throughput after the first execution, validations included.
    input_kind: What the model reads (`training_data.TEXT_INPUT`, EMBEDDING_INPUT, TEXT_AND_EMBEDDING_INPUT,
      IMAGE_INPUT, DENSE_INPUT).
    embedded_texts: Texts embedded by the frozen encoder for this run (0 when none).
    computed_texts: Of those, the ones run through the encoder (the rest were read from the embedding cache).
    phase_seconds: Wall time of each phase of this process: "data" (reading and converting the data, the
      embedding left out), "embedding", "loop" (the training loop alone: tracing, steps, validations and
      checkpoints), "export", "test", "baselines", "calibration".
    baselines: The baselines' reports on the split the model is reported on
      (`rank4class.evaluation.baselines`), or None when they are off.
    calibration: Probability calibration fitted on the validation split (`rank4class.inference.calibration`),
      or None.
    choice: The choice between the trained model and the logistic regressions
      (`Rank4ClassTrainConfig.linear_candidate`): the metric and its mode, "chosen" (`TRAINED_CHOICE`,
      `LINEAR_CHOICE` or `TFIDF_LINEAR_CHOICE`), the trained model's best step, each one's validation value
      ("values"), the regressions' fits and validation metrics, or the choice of `model_choice.
      choose_class_texts` (`WITHOUT_CLASS_TEXTS_CHOICE`); None when nothing was compared.
    zero_shot: The zero-shot model's choice (`zero_shot_choice.summary`: the held-out classes, the chosen step
      and untrained share, its held-out validation value against the untrained cosine's), or None when there
      is none (`Rank4ClassTrainConfig.zero_shot_holdout`).
    stopped_early: `Rank4ClassTrainConfig.patience` ended training before its longest length.
  """

  model_dir: str
  export_dir: str | None
  steps: int
  resumed_from_step: int
  best_metric: str
  best_step: int | None
  best_value: float | None
  validation_metrics: dict[str, float]
  test_report: dict[str, Any] | None
  history: list[dict[str, float]]
  seconds: float
  examples_per_second: float | None = None
  input_kind: str | None = None
  embedded_texts: int = 0
  computed_texts: int = 0
  phase_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
  baselines: dict[str, Any] | None = None
  calibration: dict[str, Any] | None = None
  choice: dict[str, Any] | None = None
  zero_shot: dict[str, Any] | None = None
  stopped_early: bool = False

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


TrainResult = Rank4ClassTrainResult  # Deprecated name (before 0.9.0); removed in 0.10.0.


# --- config.json --------------------------------------------------------------------------------------------


def load_config(model_dir: str) -> Rank4ClassTrainConfig:
  """The Rank4ClassTrainConfig a run wrote to `<model_dir>/config.json` (in parts, or flat as 0.8 wrote
  it)."""
  path = os.path.join(model_dir, CONFIG_FILE)
  with open(path, encoding="utf-8") as f:
    return config_from_dict(json.load(f))


# Fields whose default changed since they were added, with the value a config.json written without them ran
# with: 0.8 and earlier embedded texts in float32 (`DataConfig.text_precision`, default "auto" since 0.9).
_EARLIER_DATA_VALUES = {"text_precision": "float32"}


def config_from_dict(config_dict: dict[str, Any]) -> Rank4ClassTrainConfig:
  """A Rank4ClassTrainConfig from a config.json dict: in parts, or flat as 0.8 and earlier wrote it (the run's
  and outputs' fields beside `data`, `model` and `optimizer`). A field it lacks takes its default, or the
  value the run ran with where the default has changed since (`_EARLIER_DATA_VALUES`)."""
  config_dict = in_parts(config_dict)
  if isinstance(config_dict.get("data"), dict):
    config_dict = {**config_dict, "data": {**_EARLIER_DATA_VALUES, **config_dict["data"]}}
  return engine_configs.from_dict(Rank4ClassTrainConfig, config_dict)


def in_parts(config_dict: dict[str, Any]) -> dict[str, Any]:
  """A config.json dict with the flat fields of 0.8 and earlier moved into their parts (`run`, `outputs`); a
  dict in parts is returned as it is."""
  flat = [name for name in config_dict if name in _PART_OF_FIELD]
  if not flat:
    return config_dict
  parts = {name: value for name, value in config_dict.items() if name not in _PART_OF_FIELD}
  for name in flat:
    parts.setdefault(_PART_OF_FIELD[name], {})[name] = config_dict[name]
  return parts


def _with_resolved_input_format(config_dict: dict[str, Any]) -> dict[str, Any]:
  data = config_dict["data"]
  if data["train_files"] is None:
    data["input_format"] = data_lib.AUTO  # Named data sets: the format plays no part.
  elif data["input_format"] == data_lib.AUTO:
    data["input_format"] = data_lib.resolved_input_format(data_lib.DataConfig(**data))
  return config_dict


def comparable_config(config_dict: dict[str, Any]) -> dict[str, Any]:
  """A config.json dict in the form runs are compared in: in parts (a flat one of 0.8 moved into them),
  through the dataclasses (fields added since the run was written take their defaults) and with an "auto"
  input format resolved to the format it stands for."""
  return _with_resolved_input_format(engine_configs.to_dict(config_from_dict(config_dict)))


def metric_names(ks: tuple[int, ...]) -> list[str]:
  """Names of `metrics.get_default_metrics(ks)`, without creating them: building Keras metrics starts the
  TensorFlow runtime, after which MultiWorkerMirroredStrategy can no longer be created."""
  return ([f"top_{k}_error" for k in ks] + [f"{metrics_lib.NDCG}_{k}" for k in ks]
          + [metrics_lib.MRR, metrics_lib.ACCURACY])


def metric_mode(name: str) -> str:
  """"min" for the loss and errors, "max" for accuracy-like metrics."""
  return "min" if name.endswith("loss") or "error" in name else "max"
