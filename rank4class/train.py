"""Trains a Rank4Class model with Keras `fit` under tf.distribute: checkpoints, resumption, best-model export."""

import dataclasses
import json
import logging
import math
import os
import shutil
import sys
import time
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class import baselines as baselines_lib
from rank4class import calibration as calibration_lib
from rank4class import class_encoders, full_class_evaluation, interactions, ranking_math, served, serving
from rank4class import encoders as encoders_lib
from rank4class import evaluate as evaluate_lib
from rank4class import metrics as metrics_lib
from rank4class import model as model_lib
from rank4class import training_data as data_lib
from rank4class_data import bad_rows, row_tables
from rank4class_data import class_texts as class_texts_lib
from rank4class_encoders import embedding_cache
from rank4class_encoders import text_encoder as text_encoder_lib
from rank4class_engine import cli, distribute, lazy_adam, model_reuse, precision, run_directory, trainer
from rank4class_engine import configs as engine_configs
from rank4class_engine import learning_rates as learning_rates_lib
from rank4class_engine import losses as losses_lib

OPTIMIZERS = ("adam", "adagrad", "adamw", "lazy_adam")  # lazy_adam: sparse rows only (many classes).
# Whether validation computes the loss over all classes: "auto" when TensorBoard or best_metric="loss" reads it and
# it is affordable (`validation_loss_note`), "on", "off".
VALIDATION_LOSS = ("auto", "on", "off")
# Losses whose value over C classes costs O(C^2) per instance (pairs, approximate ranks over all pairs): "auto"
# computes them on validation up to this many classes only (at 1,100 classes and batch 256, one pairwise tensor is
# 1.2 GB).
QUADRATIC_LOSSES = (losses_lib.PAIRWISE_LOGISTIC, losses_lib.APPROX_NDCG, losses_lib.GUMBEL_APPROX_NDCG)
QUADRATIC_LOSS_CLASSES = 256
AUTO_ENCODER = "auto"
INSTANCE_ENCODERS = (AUTO_ENCODER, *encoders_lib.ENCODER_NAMES)

# The run directory's files (rank4class_engine.run_directory and trainer own them; named here for readers).
CONFIG_FILE = run_directory.CONFIG_FILE
RESULT_FILE = "train_result.json"
PROGRESS_FILE = run_directory.PROGRESS_FILE
BEST_STATE_FILE = trainer.BEST_STATE_FILE
BEST_DIR = run_directory.BEST_DIR
BACKUP_DIR = run_directory.BACKUP_DIR
EXPORT_DIR = run_directory.EXPORT_DIR
LOG_DIR = run_directory.LOG_DIR
# In-memory validation splits up to this size are batched once and kept as tensors.
_MATERIALIZED_VALIDATION_BYTES = 256 * 2**20
TEST_REPORT_FILE = "test_report.json"
TEST_PER_CLASS_FILE = "test_report.per_class.csv"  # `evaluate.per_class_csv_path(TEST_REPORT_FILE)`.

# Fields of TrainConfig that change no traced graph: runs that differ only in these share a model through a
# `model_reuse.ModelPool` (the study's runs of one cell).
_REUSE_FREE_FIELDS = ("model_dir", "seed", "verbose", "export", "serving_top_k", "evaluate_test", "baselines",
                      "calibrate")
# Fields of TrainConfig that may change when a run is restarted on the same model_dir.
# (steps_per_execution changes speed only; before the engine it defaulted to 1, now to 0: automatic. validation_loss
# changes what validation logs, never the steps or the chosen model: best_metric="loss" computes it whatever it says.)
_RESTART_FREE_FIELDS = ("strategy", "devices", "verbose", "model_dir", "steps_per_execution", "validation_loss",
                        "baselines", "calibrate")

_logger = logging.getLogger("rank4class.train")


@dataclasses.dataclass
class OptimizerConfig:
  """The optimizer (the paper uses Adam and Adagrad, App. C).

  Attributes:
    type: One of `OPTIMIZERS`.
    learning_rate: Initial learning rate.
    weight_decay: Decoupled weight decay of "adamw".
    clipnorm: Optional gradient-norm clipping.
    schedule: One of `rank4class_engine.learning_rates.SCHEDULES`: "constant", or "linear" (decay to 0 over the run's steps).
    warmup_fraction: Share of the run's steps over which the rate rises linearly from 0 to `learning_rate`.
  """

  type: str = "adam"
  learning_rate: float = 1e-3
  weight_decay: float = 1e-4
  clipnorm: float | None = None
  schedule: str = learning_rates_lib.CONSTANT
  warmup_fraction: float = 0.0

  def __post_init__(self):
    if self.type not in OPTIMIZERS:
      raise ValueError(f"Unknown optimizer {self.type!r}; allowed: {', '.join(OPTIMIZERS)}.")
    if self.learning_rate <= 0:
      raise ValueError(f"`learning_rate` must be positive, got {self.learning_rate}.")
    if self.schedule not in learning_rates_lib.SCHEDULES:
      raise ValueError(f"Unknown schedule {self.schedule!r}; allowed: {', '.join(learning_rates_lib.SCHEDULES)}.")
    if not 0.0 <= self.warmup_fraction < 1.0:
      raise ValueError(f"`warmup_fraction` must be in [0, 1), got {self.warmup_fraction}.")


# Fine-tuning a pre-trained text encoder: the recipe of BERT's paper and of Hugging Face's Trainer (AdamW, a rate
# in 2e-5..5e-5, 10% warmup then linear decay, weight decay 0.01). rank4class-train's default for
# --text_mode=finetune; the 1e-3 of a head on frozen embeddings wrecks the pre-trained weights (issue 26: below
# the majority class on a 6-class set).
FINETUNE_OPTIMIZER = OptimizerConfig(type="adamw", learning_rate=3e-5, weight_decay=0.01,
                                     schedule=learning_rates_lib.LINEAR, warmup_fraction=0.1)
# A projection of sparse TF-IDF vectors (`--text_mode=tfidf`): a linear model wants a larger rate than an MLP on
# dense embeddings; 1e-2 was best of 3e-3, 1e-2 and 3e-2 on R8 and 20 Newsgroups (docs/RESULTS.md).
TFIDF_OPTIMIZER = OptimizerConfig(learning_rate=1e-2)
# TF-IDF beside an MLP on frozen embeddings (`--text_mode=hybrid`): the TF-IDF projection's rate. Softmax + dot,
# width 128, seeds 0-2, test top-1 error, 1e-2 against 1e-3: Reuters R8 2.77 +- 0.13 against 2.86 +- 0.21,
# Drugs.com sentiment 25.86 +- 0.46 against 28.23 +- 0.26 (validation NDCG@5 favoured 1e-2 on Drugs.com, 1e-3 on
# R8 by 0.001).
HYBRID_OPTIMIZER = OptimizerConfig(learning_rate=1e-2)
# Above this rate fine-tuning gets a warning line.
FINETUNE_MAX_LEARNING_RATE = 1e-4


@dataclasses.dataclass
class TrainConfig:
  """Everything one training run needs; written to `<model_dir>/config.json`.

  Attributes:
    model_dir: Output folder: config.json, checkpoints (backup/, best/), logs/, progress.jsonl, export/.
    data: Training data.
    model: Instance encoder (type "auto" picks one for the data), class encoder, interaction, loss, metric
      cutoffs.
    optimizer: Optimizer and learning rate.
    batch_size: Global batch size (split across replicas).
    train_steps: Optimizer steps, exactly; None derives them from `epochs`.
    epochs: Passes over the training data, used when `train_steps` is None. Both None: `DEFAULT_EPOCHS` passes,
      at least `DEFAULT_MIN_STEPS` and at most `DEFAULT_MAX_STEPS` steps (`_total_steps`).
    eval_every: Steps between validation runs; the last step is validated too.
    checkpoint_every: Steps between backup checkpoints for resumption; 0 disables; None (default) checkpoints at
      validations, at most every 30 s (`rank4class_engine.trainer.EngineConfig`).
    steps_per_execution: Steps run per `tf.function` call; 0 (default) lets the engine choose from the measured
      step time (see `rank4class_engine.trainer.choose_steps_per_execution`); a fixed value must divide
      `eval_every` and `checkpoint_every`.
    best_metric: Validation metric choosing the exported model ("loss" or a metric name such as "ndcg_5");
      errors and the loss are minimised, other metrics maximised.
    strategy: One of `distribute.STRATEGIES`.
    devices: Explicit devices for the "mirrored" strategy, e.g. ["/cpu:0", "/cpu:1"].
    seed: Seed of the weights, the data order and the Gumbel sampler.
    export: Export the best model as a SavedModel with the serving signature into `<model_dir>/export`.
    serving_top_k: Classes per instance returned by the serving signature.
    evaluate_test: Evaluate the best model on the test split (when there is one) and write test_report.json.
    tensorboard: Write TensorBoard logs into `<model_dir>/logs`.
    verbose: 0 silent; 1 or 2 a progress line on the terminal (step, loss, examples/s, ETA, last validation).
    precision: "float32", "mixed_bfloat16" or "mixed_float16" (`rank4class_engine.precision`): the compute dtype
      of the model's layers; variables, scores, losses and metrics stay float32.
    validation_loss: One of `VALIDATION_LOSS`: whether validation also computes the loss over all classes (for
      TensorBoard and best_metric="loss"); "auto" skips it where it is not read or too costly
      (`validation_loss_note`).
    baselines: Fit the baselines (`rank4class.baselines`: majority class, TF-IDF + logistic regression on raw
      texts, logistic regression on the model's inputs) and report them beside the model on the same split, with
      a "model vs best baseline" line.
    calibrate: After training, fit a temperature (softmax of scores / T) and split-conformal class sets on the
      validation split (`rank4class.calibration`; skipped for graded ELWC labels and from
      `CHUNKED_VALIDATION_CLASSES` classes on), evaluate them on the test split, and export them
      (`served.CALIBRATION_FILE`): `rank4class-predict` then writes probabilities. Changes no training.
  """

  model_dir: str
  data: data_lib.DataConfig
  model: model_lib.Rank4ClassConfig = dataclasses.field(default_factory=model_lib.Rank4ClassConfig)
  optimizer: OptimizerConfig = dataclasses.field(default_factory=OptimizerConfig)
  batch_size: int = 32
  train_steps: int | None = 1000
  epochs: float | None = None
  eval_every: int = 100
  checkpoint_every: int | None = None
  steps_per_execution: int = 0
  best_metric: str = "ndcg_5"
  strategy: str = "auto"
  devices: list[str] | None = None
  seed: int = 0
  export: bool = True
  serving_top_k: int = 5
  evaluate_test: bool = True
  tensorboard: bool = True
  verbose: int = 2
  precision: str = precision.FLOAT32
  validation_loss: str = "auto"
  baselines: bool = True
  calibrate: bool = True

  def __post_init__(self):
    if not self.model_dir:
      raise ValueError("`model_dir` is required.")
    if self.batch_size < 1:
      raise ValueError(f"`batch_size` must be positive, got {self.batch_size}.")
    if self.train_steps is not None and self.train_steps < 1:
      raise ValueError(f"`train_steps` must be positive, got {self.train_steps}.")
    if self.epochs is not None and self.epochs <= 0:
      raise ValueError(f"`epochs` must be positive, got {self.epochs}.")
    if self.eval_every < 1:
      raise ValueError(f"`eval_every` must be positive, got {self.eval_every}.")
    if self.steps_per_execution < 0 or (self.steps_per_execution and self.eval_every % self.steps_per_execution):
      raise ValueError(f"`steps_per_execution` ({self.steps_per_execution}) must be 0 (automatic) or divide "
                       f"`eval_every` ({self.eval_every}).")
    checkpoint_every = self.checkpoint_steps
    if checkpoint_every < 0 or (checkpoint_every and self.steps_per_execution
                                and checkpoint_every % self.steps_per_execution):
      raise ValueError(f"`checkpoint_every` ({checkpoint_every}) must be >= 0 and a multiple of "
                       f"`steps_per_execution` ({self.steps_per_execution}).")
    precision.check_policy(self.precision)
    if self.strategy not in distribute.STRATEGIES:
      raise ValueError(f"Unknown strategy {self.strategy!r}; allowed: {', '.join(distribute.STRATEGIES)}.")
    if self.data.class_texts and self.model.class_encoder.type != class_encoders.METADATA:
      raise ValueError(f"data.class_texts ({self.data.class_texts}) is read by the metadata class encoder only; the "
                       f"class encoder is {self.model.class_encoder.type!r}.")
    if self.model.instance_encoder.type not in INSTANCE_ENCODERS:
      raise ValueError(f"Unknown instance encoder {self.model.instance_encoder.type!r}; allowed: "
                       f"{', '.join(INSTANCE_ENCODERS)}.")
    if self.validation_loss not in VALIDATION_LOSS:
      raise ValueError(f"Unknown validation_loss {self.validation_loss!r}; allowed: {', '.join(VALIDATION_LOSS)}.")
    if self.validation_loss == "off" and self.best_metric == "loss":
      raise ValueError("best_metric='loss' needs the validation loss, which validation_loss='off' turns off.")
    best_metric_names = ("loss", *metric_names(self.model.metric_ks))
    if self.best_metric not in best_metric_names:
      raise ValueError(f"Unknown best_metric {self.best_metric!r}; allowed: {', '.join(best_metric_names)}.")

  @property
  def checkpoint_steps(self) -> int:
    return self.eval_every if self.checkpoint_every is None else self.checkpoint_every


@dataclasses.dataclass
class TrainResult:
  """What a finished run produced (also written to `<model_dir>/train_result.json`).

  Attributes:
    model_dir: The run's folder.
    export_dir: The SavedModel of the best model, or None when not exported.
    steps: Optimizer steps taken in total (across restarts).
    resumed_from_step: The step this process resumed from (0 for a fresh start).
    best_metric: The validation metric that chose the best model.
    best_step: Step of the best validation result.
    best_value: Its value.
    validation_metrics: All validation metrics at the best step.
    test_report: Evaluation report of the best model on the test split (`evaluate.evaluate_dataset`), or None.
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
    baselines: The baselines' reports on the split the model is reported on (`rank4class.baselines`), or None
      when they are off.
    calibration: Probability calibration fitted on the validation split (`rank4class.calibration`), or None.
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

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


# --- config.json ---------------------------------------------------------------------------------------------


def load_config(model_dir: str) -> TrainConfig:
  """The TrainConfig a run wrote to `<model_dir>/config.json`."""
  path = os.path.join(model_dir, CONFIG_FILE)
  with open(path, encoding="utf-8") as f:
    return engine_configs.from_dict(TrainConfig, json.load(f))


def _with_resolved_input_format(config_dict: dict[str, Any]) -> dict[str, Any]:
  data = config_dict["data"]
  if data["train_files"] is None:
    data["input_format"] = data_lib.AUTO  # Named data sets: the format plays no part.
  elif data["input_format"] == data_lib.AUTO:
    data["input_format"] = data_lib.resolved_input_format(data_lib.DataConfig(**data))
  return config_dict


# --- Model ---------------------------------------------------------------------------------------------------


def resolve_model_config(config: TrainConfig, data: data_lib.PreparedData) -> model_lib.Rank4ClassConfig:
  """The model config with the instance encoder chosen for the data ("auto"), text handles filled in, the TF-IDF
  vocabulary learned from the training texts (`tfidf_with_vocabulary`), and the metadata class encoder's settings
  when none are given (`metadata_class_encoder`).

  Raises:
    ValueError: If the chosen instance encoder cannot read the data's inputs, or text_mode "hybrid" is asked of
      data without texts.
  """
  model_config = dataclasses.replace(config.model, instance_encoder=dataclasses.replace(
      config.model.instance_encoder))
  encoder = model_config.instance_encoder
  kind = data.input_kind
  if config.data.text_mode == data_lib.HYBRID and kind != data_lib.TEXT_AND_EMBEDDING_INPUT:
    raise ValueError(f"text_mode 'hybrid' reads texts (TF-IDF of each text beside its frozen MiniLM embedding), but "
                     f"the data's inputs are {kind}; use it on text data (a named text data set, rows with a text "
                     "column, or text records).")
  raw_text_encoder = encoders_lib.TFIDF if config.data.text_mode == data_lib.TFIDF else encoders_lib.TEXT
  if encoder.type == AUTO_ENCODER:
    encoder.type = {data_lib.TEXT_INPUT: raw_text_encoder, data_lib.TEXT_AND_EMBEDDING_INPUT: encoders_lib.HYBRID,
                    data_lib.IMAGE_INPUT: encoders_lib.IMAGE}.get(kind, encoders_lib.MLP)
  if kind == data_lib.TEXT_INPUT and encoder.type != raw_text_encoder:
    raise ValueError(f"Raw text input with text_mode {config.data.text_mode!r} needs the {raw_text_encoder!r} "
                     f"instance encoder, got {encoder.type!r}.")
  if kind == data_lib.TEXT_AND_EMBEDDING_INPUT and encoder.type != encoders_lib.HYBRID:
    raise ValueError(f"Texts with their frozen embeddings (text_mode 'hybrid') need the {encoders_lib.HYBRID!r} "
                     f"instance encoder, got {encoder.type!r}.")
  if kind != data_lib.TEXT_INPUT and encoder.type in (encoders_lib.TEXT, encoders_lib.TFIDF):
    raise ValueError(f"The {encoder.type!r} instance encoder reads raw strings, but the input is {kind}.")
  if kind != data_lib.TEXT_AND_EMBEDDING_INPUT and encoder.type == encoders_lib.HYBRID:
    raise ValueError(f"The {encoders_lib.HYBRID!r} instance encoder reads texts with their frozen embeddings "
                     f"(text_mode 'hybrid' on text data), but the input is {kind}.")
  if encoder.type in (encoders_lib.TFIDF, encoders_lib.HYBRID) and encoder.tfidf.vocabulary is None:
    encoder.tfidf = tfidf_with_vocabulary(encoder.tfidf, data)
  if encoder.type == encoders_lib.HYBRID:
    # The frozen encoder the training embeddings came from: the export embeds raw texts with it, so they must agree.
    frozen = data_lib.frozen_text_encoder(config.data, data.text_handles)
    if encoder.hybrid.text is not None and encoder.hybrid.text != frozen:
      raise ValueError(f"The hybrid encoder's text encoder ({encoder.hybrid.text}) differs from the one the data's "
                       f"embeddings were made with ({frozen}); leave `hybrid.text` unset.")
    encoder.hybrid = dataclasses.replace(encoder.hybrid, text=frozen)
  if encoder.type == encoders_lib.TEXT and data.text_handles is not None:
    text = encoder.text.text if encoder.text is not None else None
    if text is None or not text.preprocess_handle or not text.encoder_handle:
      text = text_encoder_lib.TextEncoderConfig(
          preprocess_handle=data.text_handles[0], encoder_handle=data.text_handles[1], trainable=True,
          pooling="mean", max_seq_length=config.data.max_seq_length)
      encoder.text = encoders_lib.TextInstanceEncoderConfig(
          text=text, output_dim=encoder.text.output_dim if encoder.text else None,
          dropout=encoder.text.dropout if encoder.text else 0.0)
  class_encoder = model_config.class_encoder
  if class_encoder.type == class_encoders.METADATA and class_encoder.metadata is None:
    if cosine_towers_apply(model_config, data):
      model_config = with_cosine_towers(model_config, data_lib.frozen_text_encoder(config.data, data.text_handles),
                                        data.class_texts)
    else:
      model_config.class_encoder = dataclasses.replace(
          class_encoder, metadata=metadata_class_encoder(config, data, encoder, model_config.interaction.type))
  elif (class_encoder.type == class_encoders.METADATA and data.class_texts is not None
        and class_encoder.metadata.class_texts != data.class_texts):
    raise ValueError(f"The class texts of {config.data.class_texts} differ from those the model config gives "
                     "(`class_encoder.metadata.class_texts`); give the texts in one place.")
  if class_centroids_apply(model_config, data):
    model_config = with_class_centroids(model_config, data)
  if model_config.logit_adjustment and model_config.class_priors is None:
    model_config = dataclasses.replace(model_config, class_priors=training_class_priors(data))
  return model_config


def tfidf_with_vocabulary(tfidf: encoders_lib.TfidfEncoderConfig,
                          data: data_lib.PreparedData) -> encoders_lib.TfidfEncoderConfig:
  """`tfidf` with the vocabulary and idf weights `encoders.tfidf_vocabulary` learns from the training split's
  texts: never the validation or test texts. A function of the training texts and the settings, so a resumed run
  rebuilds the vocabulary its checkpoint's first layer was trained on (config.json keeps None, not ~10^4
  n-grams; the exported model holds them)."""
  start = time.perf_counter()
  texts = data_lib.split_texts(data.train, data.input_kind)
  vocabulary, idf_weights = encoders_lib.tfidf_vocabulary(texts, tfidf.max_tokens, tfidf.ngrams)
  _logger.info("TF-IDF vocabulary: %d n-grams from %d training texts in %.1f s.", len(vocabulary), len(texts),
               time.perf_counter() - start)
  return dataclasses.replace(tfidf, vocabulary=vocabulary, idf_weights=idf_weights)


# The cosine towers' score: a dot product of unit vectors divided by this (docs/RESULTS.md, zero-shot).
COSINE_TOWERS_TEMPERATURE = 0.05


def cosine_towers_apply(model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData) -> bool:
  """Whether a run whose classes are texts gets `with_cosine_towers` (`ClassEncoderConfig.towers`).

  Raises:
    ValueError: for "cosine" where it cannot apply (naming what it needs).
  """
  towers = model_config.class_encoder.towers
  if towers == class_encoders.PROJECTION_TOWERS:
    return False
  missing = [need for need, ok in (
      ("frozen text embeddings as inputs (--text_mode=frozen on text)", data.input_kind == data_lib.EMBEDDING_INPUT
       and data.text_handles is not None),
      ("the mlp instance encoder", model_config.instance_encoder.type == encoders_lib.MLP),
      ("the dot interaction", model_config.interaction.type == interactions.DOT)) if not ok]
  if missing and towers == class_encoders.COSINE_TOWERS:
    raise ValueError("Cosine class-text towers need " + ", ".join(missing) + "; use the projection towers "
                     "(--class_text_towers=projection) otherwise.")
  return not missing


def with_cosine_towers(model_config: model_lib.Rank4ClassConfig, text: text_encoder_lib.TextEncoderConfig,
                       class_texts: list[str] | None) -> model_lib.Rank4ClassConfig:
  """`model_config` with both towers starting at the frozen `text` encoder's cosine similarity: the class texts'
  embeddings l2-normalised, then `x + W x` (W initialised at zeros), unit length, no class bias; the instances'
  frozen embeddings l2-normalised, then `x + MLP(x)` (the MLP's hidden width kept, its output layer initialised at
  zeros), unit length; their dot product divided by `COSINE_TOWERS_TEMPERATURE`. At step 0 the model ranks
  classes as the untrained nearest-class-text baseline does; training moves it from there (docs/RESULTS.md: on
  WordNet's held-out classes 30.7 +- 0.3 % top-1 error against the baseline's 37.3 %)."""
  mlp = model_config.instance_encoder.mlp
  return dataclasses.replace(
      model_config,
      instance_encoder=dataclasses.replace(model_config.instance_encoder, mlp=dataclasses.replace(
          mlp, residual=True, l2_normalize=True)),
      class_encoder=dataclasses.replace(model_config.class_encoder, metadata=class_encoders.MetadataClassEncoderConfig(
          text=dataclasses.replace(text, l2_normalize=True), class_texts=class_texts, use_bias=False,
          residual_projection=True, normalize_output=True)),
      interaction=dataclasses.replace(model_config.interaction, temperature=COSINE_TOWERS_TEMPERATURE))


# The length of the class embeddings started at the class centroids: the scores at step 0 are cosines x 20, as the
# cosine towers' dot / COSINE_TOWERS_TEMPERATURE. The factor sits in the embeddings, not in the interaction's
# temperature: Adam's steps are about the learning rate per coordinate whatever the scale, so classes of length 20
# drift 20 times less (relative to their length) than unit ones divided by 0.05. On WordNet (seed 0, lr 1e-3):
# 46.1 % test top-1 error against 49.7 % (length 40 with temperature 2: 46.0).
CLASS_CENTROID_LENGTH = 1 / COSINE_TOWERS_TEMPERATURE
# `ClassEncoderConfig.init="auto"` starts the one-hot class embeddings at the class centroids from this many
# classes on (where they apply). Frozen MiniLM, softmax + dot, the study's protocol (seeds 0-2, lr tuned on
# validation), test top-1 error random -> centroids: WordNet hypernyms (3,498 classes, ~9 training rows each)
# 72.15 +- 0.55 -> 46.05 +- 0.16 (nearest centroid baseline 50.91); all 14,823 hypernyms 89.05 +- 0.52 ->
# 55.58 +- 0.13 (baseline 61.64); Reuters R52 (52) 6.84 +- 0.49 -> 6.50 +- 0.32;
# 20 Newsgroups (20) 22.86 +- 0.23 -> 23.37 +- 0.53: within seed noise at tens of classes, so the default model
# stays as it was there. 500 is where the baselines switch from logistic regression to nearest centroids
# (`baselines.BaselineConfig.max_classes`): from there on the centroid classifier is the bar, and the model starts
# at it. No set between 52 and 3,498 classes was measured, nor dense features (which the model reads as they are,
# where the baselines standardise them): "auto" picks centroids for frozen text embeddings only.
AUTO_CENTROID_CLASSES = 500


def class_centroids_apply(model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData) -> bool:
  """Whether a run starts its one-hot class embeddings at the class centroids (`ClassEncoderConfig.init`).

  Raises:
    ValueError: for "centroids" where they cannot apply (naming what they need).
  """
  class_encoder = model_config.class_encoder
  if class_encoder.init == class_encoders.RANDOM_INIT:
    return False
  missing = [need for need, ok in (
      ("the one_hot class encoder", class_encoder.type == class_encoders.ONE_HOT),
      ("fixed vectors as inputs (frozen text embeddings, --text_mode=frozen, or dense features)",
       data.input_kind in (data_lib.EMBEDDING_INPUT, data_lib.DENSE_INPUT)),
      ("the mlp instance encoder", model_config.instance_encoder.type == encoders_lib.MLP),
      ("the dot interaction", model_config.interaction.type == interactions.DOT),
      ("class ids as labels (not graded ELWC class lists)", _has_class_ids(data.train)),
      ("class embeddings of the input's size (no one-hot embedding_dim)",
       class_encoder.one_hot.embedding_dim is None)) if not ok]
  if missing and class_encoder.init == class_encoders.CENTROID_INIT:
    raise ValueError("Class embeddings started at the class centroids need " + ", ".join(missing) + "; use "
                     "--class_init=random otherwise.")
  if class_encoder.init == class_encoders.AUTO_INIT:
    return (not missing and data.input_kind == data_lib.EMBEDDING_INPUT
            and len(data.class_names) >= AUTO_CENTROID_CLASSES)
  return not missing


def _split_batches(split: data_lib.Split, batch_size: int = 4096):
  """(features, class ids) NumPy batches of a split in order, one batch in memory at a time for record splits."""
  if isinstance(split, data_lib.ArraySplit):
    for begin in range(0, len(split), batch_size):
      yield split.features[begin:begin + batch_size], split.labels[begin:begin + batch_size]
    return
  for x, y in split.make_dataset(batch_size, shuffle=False, repeat=False, seed=0):
    yield x.numpy(), y.numpy().reshape([-1])


def with_class_centroids(model_config: model_lib.Rank4ClassConfig,
                         data: data_lib.PreparedData) -> model_lib.Rank4ClassConfig:
  """`model_config` that starts as the nearest class centroid classifier, as `with_cosine_towers` starts at the
  nearest class text: the one-hot class embeddings start at the centroids of the training split's inputs
  (`class_encoders.class_centroids`; never the validation or test rows) scaled to length `CLASS_CENTROID_LENGTH`
  (20), and the instance tower is `x + MLP(x)` of unit length (the MLP's hidden width kept, its output layer
  initialised at zeros). At step 0 the model's scores are the cosines of the inputs to the centroids x 20 (with the
  dot interaction's temperature 1), class biases 0, and it ranks as the nearest class centroid classifier on the
  model's inputs does (`rank4class.baselines` standardises the features first; on WordNet's test split the two
  give 50.79 % and 50.91 % top-1 error): a class without training rows starts at the zero vector with bias -2 x 20,
  below every cosine score, as that classifier ranks it last (without a class bias, `use_bias=False`, it scores 0).

  The centroids are a function of the training split, so a resumed run rebuilds the same model; config.json
  keeps `initial_embeddings` None (not C x d floats) and the checkpoint holds the trained values."""
  start = time.perf_counter()
  centroids, counts = class_encoders.class_centroids(_split_batches(data.train), len(data.class_names))
  _logger.info("Class centroids of %d classes (%d without training rows) from %d training rows in %.1f s.",
               len(counts), int(np.sum(counts == 0)), int(np.sum(counts)), time.perf_counter() - start)
  encoder, class_encoder = model_config.instance_encoder, model_config.class_encoder
  bias = None
  if class_encoder.one_hot.use_bias and np.any(counts == 0):
    bias = np.where(counts == 0, -2 * CLASS_CENTROID_LENGTH, 0).astype(np.float32)
  return dataclasses.replace(
      model_config,
      instance_encoder=dataclasses.replace(encoder, mlp=dataclasses.replace(encoder.mlp, residual=True,
                                                                            l2_normalize=True)),
      class_encoder=dataclasses.replace(class_encoder, one_hot=dataclasses.replace(
          class_encoder.one_hot, initial_embeddings=centroids * CLASS_CENTROID_LENGTH, initial_bias=bias)))


def training_class_priors(data: data_lib.PreparedData) -> np.ndarray:
  """Each class's share of the training split's rows (the logit adjustment's priors; never the validation or test
  rows), read batch by batch; a class without training rows counts as one row (log 0 would be -inf).

  Raises:
    ValueError: for graded class lists (ELWC), which have no one class per row.
  """
  counts = np.zeros(len(data.class_names), np.int64)
  for _, labels in _split_batches(data.train):
    if np.ndim(labels) != 1:
      raise ValueError("The logit adjustment needs one class id per training row; graded class lists (ELWC) have "
                       "none.")
    counts += np.bincount(labels, minlength=len(counts))
  counts = np.maximum(counts, 1)
  return counts / counts.sum()


def metadata_class_encoder(config: TrainConfig, data: data_lib.PreparedData,
                           instance_encoder: encoders_lib.InstanceEncoderConfig,
                           interaction: str) -> class_encoders.MetadataClassEncoderConfig:
  """The metadata class encoder of a run that gives none: the class texts (`data.class_texts`, else the class
  names) embedded once by the frozen text encoder of the data (MiniLM, also for image and dense inputs), projected
  to `class_embedding_dim`."""
  handles = data.text_handles if data.text_handles is not None else data_lib.text_handles(config.data)
  return class_encoders.MetadataClassEncoderConfig(
      text=data_lib.frozen_text_encoder(config.data, handles), class_texts=data.class_texts,
      output_dim=class_embedding_dim(instance_encoder, interaction))


def class_embedding_dim(instance_encoder: encoders_lib.InstanceEncoderConfig, interaction: str) -> int | None:
  """The size the metadata class encoder projects the frozen class-text embeddings to.

  Dot and latent cross score `h . c` and `h * c`, so the classes are projected (a learned Dense) to the instance
  embedding's size: the last of the MLP's `hidden_units`; the image encoder's `output_dim`, else the small CNN's
  last filters; the text encoder's `output_dim` (None: its hidden size, that of the class texts' own encoder,
  MiniLM's 384, so no projection); the TF-IDF encoder's `output_dim`; the hybrid encoder's TF-IDF `output_dim` plus
  the MLP's last width (combine "concat") or that `output_dim` alone ("sum"). Concat needs no match and its first layer
  already maps the class embedding linearly: None. None also where the config does not say the instance size (a residual MLP, whose size is its
  input's: frozen text embeddings match the class texts' as they are; an application backbone without
  `output_dim`); the interaction then projects the instance to the class size where they differ.
  """
  if interaction == interactions.CONCAT:
    return None
  if instance_encoder.type == encoders_lib.MLP:
    return None if instance_encoder.mlp.residual else instance_encoder.mlp.hidden_units[-1]
  if instance_encoder.type == encoders_lib.IMAGE:
    image = instance_encoder.image
    if image.output_dim is not None or image.backbone != encoders_lib.SMALL_CNN:
      return image.output_dim
    return image.filters[-1]
  if instance_encoder.type == encoders_lib.TEXT and instance_encoder.text is not None:
    return instance_encoder.text.output_dim
  if instance_encoder.type == encoders_lib.TFIDF:
    return instance_encoder.tfidf.output_dim
  if instance_encoder.type == encoders_lib.HYBRID:
    if instance_encoder.hybrid.combine == encoders_lib.SUM:
      return instance_encoder.tfidf.output_dim
    mlp = instance_encoder.mlp
    return None if mlp.residual else instance_encoder.tfidf.output_dim + mlp.hidden_units[-1]
  return None


def make_optimizer(config: OptimizerConfig, total_steps: int | None = None) -> tf.keras.optimizers.Optimizer:
  """Adam, Adagrad, AdamW or lazy Adam (`rank4class_engine.lazy_adam`) with the configured learning rate and its
  schedule over the run's `total_steps` (`rank4class_engine.learning_rates`)."""
  kwargs: dict[str, Any] = {"learning_rate": learning_rates_lib.make_learning_rate(
      config.learning_rate, config.schedule, config.warmup_fraction, total_steps)}
  if config.clipnorm is not None:
    kwargs["clipnorm"] = config.clipnorm
  if config.type == "adam":
    return tf.keras.optimizers.Adam(**kwargs)
  if config.type == "adagrad":
    return tf.keras.optimizers.Adagrad(**kwargs)
  if config.type == "lazy_adam":
    return lazy_adam.LazyAdam(**kwargs)
  return tf.keras.optimizers.AdamW(weight_decay=config.weight_decay, **kwargs)


def metric_names(ks: tuple[int, ...]) -> list[str]:
  """Names of `metrics.get_default_metrics(ks)`, without creating them: building Keras metrics starts the
  TensorFlow runtime, after which MultiWorkerMirroredStrategy can no longer be created."""
  return ([f"top_{k}_error" for k in ks] + [f"{metrics_lib.NDCG}_{k}" for k in ks]
          + [metrics_lib.MRR, metrics_lib.ACCURACY])


def metric_mode(name: str) -> str:
  """"min" for the loss and errors, "max" for accuracy-like metrics."""
  return "min" if name.endswith("loss") or "error" in name else "max"


def _serving_dtype(input_kind: str) -> tf.DType | None:
  return tf.uint8 if input_kind == data_lib.IMAGE_INPUT else None


def _class_counts(data: data_lib.PreparedData, model_config: model_lib.Rank4ClassConfig) -> np.ndarray | None:
  """Training rows per class, for class samplers that use them (in-memory class ids only)."""
  if model_config.sampling.sampler is None or not isinstance(data.train, data_lib.ArraySplit):
    return None
  labels = data.train.labels
  if labels.ndim != 1:
    raise ValueError("Sampled class lists train on class ids; ELWC relevance lists need full lists (no "
                     "class sampler).")
  return np.bincount(labels, minlength=len(data.class_names))


def build_compiled_model(config: TrainConfig, model_config: model_lib.Rank4ClassConfig,
                         data: data_lib.PreparedData, strategy: tf.distribute.Strategy
                         ) -> model_lib.Rank4ClassModel:
  """Builds, builds the weights of, and compiles the model inside `strategy.scope()`."""
  loss_config = model_config.loss
  if loss_config.type == losses_lib.GUMBEL_APPROX_NDCG and loss_config.seed is None:
    loss_config = dataclasses.replace(loss_config, seed=config.seed)
  sample = next(iter(data.validation.make_dataset(2, shuffle=False, repeat=False, seed=0)))[0]
  with strategy.scope():
    model = model_lib.build_model(model_config, data.class_names, _class_counts(data, model_config))
    # In a replica context, as in `fit`: TF Hub text encoders loaded under a MirroredStrategy refuse calls from
    # the cross-replica context.
    if isinstance(sample, dict):
      # Hybrid text trains on {text, embedding} but serves raw texts: the first call, on the texts, builds the
      # model and records what it saves and reloads with (the served input).
      strategy.run(lambda x: model(x, training=False), args=(sample[encoders_lib.TEXT_KEY],))
    strategy.run(lambda x: model(x, training=False), args=(sample,))
    # The ranking metrics are computed by `ValidationMetrics` on the validation split only: compiling them
    # into the train step would trace TF-Ranking's sorting graphs twice more per run for no use.
    total_steps = _total_steps(config, len(data.train) if config.train_steps is None else None)
    model.compile(optimizer=make_optimizer(config.optimizer, total_steps), loss=losses_lib.make_loss(loss_config),
                  steps_per_execution=config.steps_per_execution)
  return model


# --- Training ------------------------------------------------------------------------------------------------


# A run that gives neither `train_steps` nor `epochs` trains this many passes over its training split, within
# these bounds: a fixed 1,000 steps was 0.6 of an epoch on Fashion-MNIST's 54,000 images (17.3 % top-1 error with
# the old 2-block CNN; 3 epochs of the 3-block CNN: docs/RESULTS.md), and 3 epochs of a few hundred rows are too
# few steps for a head to converge.
DEFAULT_EPOCHS = 3
DEFAULT_MIN_STEPS = 1000
DEFAULT_MAX_STEPS = 20000


def _total_steps(config: TrainConfig, num_train: int | None) -> int:
  """The run's optimizer steps: `train_steps` exactly, `epochs` passes over `num_train` examples, or neither
  given: `DEFAULT_EPOCHS` passes, clipped to [`DEFAULT_MIN_STEPS`, `DEFAULT_MAX_STEPS`]."""
  steps = config.train_steps
  if steps is None and config.epochs is None:
    return int(np.clip(math.ceil(DEFAULT_EPOCHS * num_train / config.batch_size), DEFAULT_MIN_STEPS,
                       DEFAULT_MAX_STEPS))
  if steps is None:
    steps = math.ceil(config.epochs * num_train / config.batch_size)
  return max(1, steps)


def comparable_config(config_dict: dict[str, Any]) -> dict[str, Any]:
  """A config.json dict in the form runs are compared in: through the dataclasses (fields added since the run
  was written take their defaults) and with an "auto" input format resolved to the format it stands for."""
  return _with_resolved_input_format(engine_configs.to_dict(engine_configs.from_dict(TrainConfig, config_dict)))


# From this many classes on, validation and the test report rank all classes chunk by chunk.
CHUNKED_VALIDATION_CLASSES = full_class_evaluation.CHUNKED_CLASSES


def validation_loss_note(config: TrainConfig, num_classes: int) -> tuple[bool, str]:
  """(whether validation computes the loss, a line for the terminal saying what validation computes)."""
  chunked = num_classes >= CHUNKED_VALIDATION_CLASSES
  metrics = (f"Validation: top-K error, NDCG@K and MRR over all {num_classes:,} classes"
             + (" (exact ranks, chunk by chunk)" if chunked else ""))
  loss = config.model.loss.type
  read = config.tensorboard or config.best_metric == "loss"
  if config.validation_loss == "off":
    return False, f"{metrics}; no loss (--validation_loss=off)."
  if chunked:  # `_train` refuses "on" and best_metric="loss" here.
    return False, f"{metrics}; no loss (not computed from {CHUNKED_VALIDATION_CLASSES:,} classes on)."
  if config.validation_loss == "on" or config.best_metric == "loss":
    return True, f"{metrics}, and the {loss} loss."
  if not read:
    return False, f"{metrics}; no loss (nothing reads it: no TensorBoard; --validation_loss=on computes it)."
  if loss in QUADRATIC_LOSSES and num_classes > QUADRATIC_LOSS_CLASSES:
    return False, (f"{metrics}; no loss: {loss} over {num_classes:,} classes costs O(C^2) memory per instance "
                   f"(--validation_loss=on computes it anyway).")
  return True, f"{metrics}, and the {loss} loss (for TensorBoard)."


def _has_class_ids(split: data_lib.Split) -> bool:
  return not isinstance(split, data_lib.ArraySplit) or split.labels.ndim == 1


def make_validate_fn(score_fn: served.ScoreFn, model: model_lib.Rank4ClassModel,
                     data: data_lib.PreparedData, ks: tuple[int, ...], batch_size: int,
                     with_loss: bool) -> trainer.ValidateFn:
  """The engine's validation: the validation split's ranking metrics (top-K error, NDCG@K, MRR) and, when
  `with_loss`, its loss.

  One pass over the split per validation; the score function is traced once per run, the loss and the
  evaluator once per process (for each configuration). The loss is optional because tracing a ranking loss once more costs a short run
  (a study's) a noticeable share of its time; `train` asks for it when something reads it (TensorBoard or
  `best_metric="loss"`).
  """
  options = tf.data.Options()
  options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
  dataset = data.validation.make_dataset(batch_size, False, False, 0).with_options(options)
  if isinstance(data.validation, data_lib.ArraySplit) and data.validation.nbytes <= _MATERIALIZED_VALIDATION_BYTES:
    # Held as tensors once: starting the input pipeline again costs every validation ~10 ms, as much as the
    # validation's scoring itself on a small split (docs/BENCHMARKS.md).
    dataset = list(dataset)
  evaluator = evaluate_lib.get_evaluator(data.class_names, ks)  # Outside fit's strategy scope (the test reuses it).
  if model.num_classes >= CHUNKED_VALIDATION_CLASSES and _has_class_ids(data.validation):
    # Many classes: exact ranks over all classes, chunk by chunk, instead of `[batch, C]` score matrices. No
    # validation loss: over all C classes a ranking loss costs O(C^2) per instance (pairs, approximate ranks).
    ranks = full_class_evaluation.rank_function(model, ks)
    return lambda model: full_class_evaluation.rank_metrics(
        np.concatenate([ranks(x, y).numpy() for x, y in dataset]), ks)
  batch_loss = None
  if with_loss:
    loss = losses_lib.traced_loss(model.loss, model.num_classes)  # Traced once per process and loss config.

    relevance = ranking_math.traced_relevance(model.num_classes)

    def batch_loss(scores: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
      if labels.shape.rank == 2 and labels.shape[-1] == model.num_classes:  # Graded relevance (ELWC lists).
        return loss(model.relevance(labels), scores)
      return loss(relevance(tf.reshape(tf.cast(labels, tf.int64), [-1])), scores)

  def validate(model: tf.keras.Model) -> dict[str, float]:
    del model  # `score_fn` holds it.
    return evaluate_lib.evaluate_dataset(score_fn, dataset, data.class_names, ks, evaluator,
                                         loss_fn=batch_loss)["metrics"]

  return validate


def train(config: TrainConfig, data: data_lib.PreparedData | None = None, *, overwrite: bool = False,
          models: model_reuse.ModelPool | None = None) -> TrainResult:
  """Trains (or resumes, or returns the finished result of) the run in `config.model_dir`.

  The run directory's lifecycle is `rank4class_engine.run_directory`: the directory is locked first (a second
  run on it stops at once and changes nothing), then its config compared (the same config resumes from the last
  checkpoint or returns the finished result; another config is refused with the changed keys named, unless
  `overwrite`), then written. Training goes through the engine (`rank4class_engine.trainer.fit`): exactly the
  asked steps, validation every `eval_every` steps and at the last, resumable checkpoints every
  `checkpoint_every` steps (each with its validation record), the weights with the best validation `best_metric`
  kept in `best/` and exported (every file of the export in a temporary folder renamed into place) as a SavedModel
  with the serving signature, a progress line and `progress.jsonl`. The test split is only evaluated, with the
  best weights, at the end; the checkpoint is removed once the result is written.

  Args:
    config: The run.
    data: Already prepared splits (the study reuses them across runs); None loads them from `config.data`.
    overwrite: A `model_dir` holding a run of another config starts afresh (its run files removed) instead of
      being refused.
    models: Models of earlier runs in this process (the study's): a run that differs from one of them only in
      its seed, learning rate and outputs trains that model, reset to this run's initial weights and optimizer
      state, instead of tracing a new one (`rank4class_engine.model_reuse`: the same numbers as without it).

  Returns:
    The run's result.

  Raises:
    ValueError: For an invalid config; `run_directory.ConfigMismatchError` for a `model_dir` that holds a run
      with another config.
    RunDirectoryBusyError: When another live run writes `model_dir`.
  """
  start = time.time()
  if config.data.class_texts:  # The texts are part of the model: a resumed run must read the same file.
    config = dataclasses.replace(config, data=dataclasses.replace(
        config.data, class_texts_sha256=class_texts_lib.file_sha256(config.data.class_texts)))
  strategy = distribute.make_strategy(config.strategy, config.devices)
  chief = distribute.is_chief(strategy)
  run = run_directory.RunDirectory(
      config.model_dir, engine_configs.to_dict(config), RESULT_FILE, restart_free=_RESTART_FREE_FIELDS,
      normalize=comparable_config, overwrite=overwrite, overwrite_hint="--overwrite_model_dir",
      run_files=(TEST_REPORT_FILE, TEST_PER_CLASS_FILE), chief=chief, worker_dir=distribute.output_dir(config.model_dir, strategy))
  with run:
    if run.finished is not None:
      _logger.info("%s already holds a finished run; returning its result.", config.model_dir)
      return engine_configs.from_dict(TrainResult, run.finished)
    return _train(config, data, strategy, chief, start, run, models)


def _pool_key(config: TrainConfig, data: data_lib.PreparedData, strategy: tf.distribute.Strategy) -> str:
  """What two runs must share to train one model: the config but its reuse-free fields, the data object and the
  strategy object (both held by the pooled entry, so their ids stay theirs)."""
  config_dict = engine_configs.to_dict(config)
  for name in _REUSE_FREE_FIELDS:
    config_dict.pop(name)
  config_dict["optimizer"].pop("learning_rate")
  return json.dumps({"config": config_dict, "data": id(data), "strategy": id(strategy)}, sort_keys=True)


# Fine-tuning MiniLM on 2 CPU cores, batch 32, 64 tokens, TF 2.15 (../shared/DATA.md): examples per second.
FINETUNE_EXAMPLES_PER_SECOND_2_CORES = 34


def _data_notes(data: data_lib.PreparedData, train_examples: int, learning_rate: float | None = None) -> str:
  """Lines for the terminal: converted row files, where validation comes from, classes of the class texts the
  data lacks, what fine-tuning text costs, and a fine-tuning `learning_rate` that would wreck the encoder."""
  lines = [f"Rows ({split}): {converted.describe()}" for split, converted in data.conversions.items()]
  if data.validation_note:
    lines.append(f"Validation split: {data.validation_note}.")
  if data.class_texts_note:
    lines.append(f"Class texts: {data.class_texts_note}.")
  if data.input_kind == data_lib.TEXT_INPUT and data.text_handles is not None:  # Fine-tuned MiniLM (not TF-IDF).
    minutes = train_examples / FINETUNE_EXAMPLES_PER_SECOND_2_CORES / 60
    lines.append(f"Text mode finetune: the whole text encoder runs forward and backward on every example; on 2 "
                 f"CPU cores about {FINETUNE_EXAMPLES_PER_SECOND_2_CORES} examples/s, so ~{minutes:.0f} min for "
                 f"{train_examples:,} examples (a GPU is far faster). --text_mode=frozen embeds each text once.")
    if learning_rate is not None and learning_rate > FINETUNE_MAX_LEARNING_RATE:
      lines.append(f"WARNING: learning rate {learning_rate:g} fine-tunes a pre-trained encoder; above "
                   f"{FINETUNE_MAX_LEARNING_RATE:g} its weights are usually wrecked (2e-5..5e-5 is the usual range; "
                   f"rank4class-train's default for --text_mode=finetune is {FINETUNE_OPTIMIZER.learning_rate:g} "
                   "with AdamW, 10% warmup and linear decay).")
  return "".join(line + "\n" for line in lines)


def _train(config: TrainConfig, data: data_lib.PreparedData | None, strategy: tf.distribute.Strategy,
           chief: bool, start: float, run: run_directory.RunDirectory,
           models: model_reuse.ModelPool | None) -> TrainResult:
  tf.keras.utils.set_random_seed(config.seed)
  phases: dict[str, float] = {}
  if data is None:
    data_start = time.perf_counter()
    data = data_lib.prepare_data(config.data)
    phases["embedding"] = data.embedding_seconds
    phases["data"] = time.perf_counter() - data_start - data.embedding_seconds
  model_config = resolve_model_config(config, data)
  num_train = len(data.train) if config.train_steps is None else None
  total_steps = _total_steps(config, num_train)
  if chief and config.verbose:
    sys.stderr.write(_data_notes(data, total_steps * config.batch_size, config.optimizer.learning_rate))
  with precision.policy_scope(config.precision):
    model = build_compiled_model(config, model_config, data, strategy)
  pooled = None
  if models is not None and strategy.num_replicas_in_sync == 1:
    pooled = models.take(_pool_key(config, data, strategy), model)
    pooled.extras.update(data=data, strategy=strategy)
    model = pooled.model

  def train_dataset(start_step: int):
    # The seeded stream from its top, `start_step` batches on: a resumed run trains on the uninterrupted run's
    # batches.
    if strategy.num_replicas_in_sync == 1:
      # One replica: Keras distributes the plain dataset itself, and its iterator starts ~0.2 s sooner than a
      # dataset distributed from a function (docs/BENCHMARKS.md, the binary against a bare fit).
      return data.train.make_dataset(config.batch_size, True, True, config.seed).skip(start_step)
    return strategy.distribute_datasets_from_function(
        lambda ctx: data.train.make_dataset(config.batch_size, True, True, config.seed, ctx).skip(start_step))

  ks = tuple(model_config.metric_ks)
  engine_config = trainer.EngineConfig(
      run_dir=config.model_dir, train_steps=total_steps, eval_every=config.eval_every,
      checkpoint_every=config.checkpoint_every, best_metric=config.best_metric,
      best_mode=metric_mode(config.best_metric), steps_per_execution=config.steps_per_execution,
      global_batch_size=config.batch_size, tensorboard=config.tensorboard, verbose=min(config.verbose, 1))
  # One traced score function serves the validations and the test evaluation.
  if (config.best_metric == "loss" or config.validation_loss == "on") and \
      model.num_classes >= CHUNKED_VALIDATION_CLASSES:
    what = "best_metric='loss' needs" if config.best_metric == "loss" else "validation_loss='on' asks for"
    raise ValueError(f"{what} the validation loss over all {model.num_classes:,} classes, which is not computed "
                     f"from {CHUNKED_VALIDATION_CLASSES:,} classes on; choose a ranking metric (top_1_error, "
                     "ndcg_5, mrr) and validation_loss='auto' or 'off'.")
  with_loss, validation_line = validation_loss_note(config, model.num_classes)
  if chief and config.verbose:
    sys.stderr.write(validation_line + "\n")
  score_fn = pooled.extras.get("score_fn") if pooled is not None else None
  if score_fn is None:
    score_fn = served.make_score_fn(model, data_lib.input_spec(data.validation), strategy)
  validate = make_validate_fn(score_fn, model, data, ks, max(config.batch_size, 256),
                              with_loss=with_loss)
  fitted = trainer.fit(model, train_dataset, engine_config, strategy, validate=validate)
  phases["loop"] = fitted.loop_seconds
  # The model holds the best weights: a temperature and conformal scores fitted on the validation split's scores
  # (n x C float32 kept in memory), evaluated on the test split batch by batch, exported beside the model.
  calibration, calibration_summary = None, None
  skip = ("graded relevance lists (ELWC), not one class per row" if not _has_class_ids(data.validation) else
          f"{model.num_classes:,} classes (from {CHUNKED_VALIDATION_CLASSES:,} on, scores are ranked chunk by chunk, "
          "never held whole)" if model.num_classes >= CHUNKED_VALIDATION_CLASSES else None)
  if config.calibrate and skip is not None:
    if chief and config.verbose:
      sys.stderr.write(f"Calibration: skipped, the validation split has {skip}.\n")
  elif config.calibrate:
    calibration_start = time.perf_counter()
    calibration_batch = max(config.batch_size, 256)
    with strategy.scope():  # As the validations called `score_fn`: no new trace.
      scored = [(score_fn(x).numpy(), y.numpy().reshape([-1]))
                for x, y in data.validation.make_dataset(calibration_batch, False, False, 0)]
    calibration = calibration_lib.Calibration.fit(np.concatenate([s for s, _ in scored]),
                                                  np.concatenate([y for _, y in scored]), seed=config.seed)
    del scored
    calibration_summary = calibration.summary()
    if config.evaluate_test and data.test is not None and _has_class_ids(data.test):
      calibration_metrics = calibration_lib.CalibrationMetrics(calibration)
      with strategy.scope():
        for x, y in data.test.make_dataset(calibration_batch, False, False, 0):
          calibration_metrics.update(score_fn(x).numpy(), y.numpy().reshape([-1]))
      calibration_summary["test"] = calibration_metrics.result()
    phases["calibration"] = time.perf_counter() - calibration_start
  if pooled is not None:
    pooled.extras["score_fn"] = score_fn
    models.release(pooled)

  export_dir = None
  export_start = time.perf_counter()
  if config.export:
    target = distribute.output_dir(config.model_dir, strategy, EXPORT_DIR)
    text_inputs = None
    if data.input_kind == data_lib.EMBEDDING_INPUT and data.text_handles is not None:
      # The export takes embeddings; `rank4class-predict` embeds raw texts the same way from this record.
      text_inputs = data_lib.frozen_text_encoder(config.data, data.text_handles)
    export_dir = serving.export_saved_model(
        model, target, top_k=config.serving_top_k, input_dtype=_serving_dtype(data.input_kind), overwrite=True,
        frozen_text_encoder=text_inputs, calibration=calibration)
    if not chief:
      shutil.rmtree(export_dir, ignore_errors=True)
      export_dir = os.path.join(config.model_dir, EXPORT_DIR)
    phases["export"] = time.perf_counter() - export_start

  test_report = None
  test_start = time.perf_counter()
  if config.evaluate_test and data.test is not None:
    test = data.test.make_dataset(max(config.batch_size, 256), False, False, 0)
    if model.num_classes >= CHUNKED_VALIDATION_CLASSES and _has_class_ids(data.test):
      test_report = full_class_evaluation.evaluate_full_classes(model, test, ks)
    else:
      with strategy.scope():  # The validation traced the shared evaluator under this scope: reuse it.
        test_report = evaluate_lib.evaluate_dataset(score_fn, test, data.class_names, ks)
    if chief:
      evaluate_lib.write_report(os.path.join(config.model_dir, TEST_REPORT_FILE), test_report)
    phases["test"] = time.perf_counter() - test_start

  baseline_reports = None
  if config.baselines and chief:
    baselines_start = time.perf_counter()
    say = (lambda line: sys.stderr.write(line + "\n")) if config.verbose else None
    baseline_reports = baselines_lib.compute_or_note(baselines_lib.BaselineConfig(), data_lib.embedding_view(data),
                                                     ks, progress=say)
    model_metrics = test_report["metrics"] if test_report is not None else fitted.best_metrics
    best = baselines_lib.best_row(baseline_reports)
    if best is not None and baselines_lib.HEADLINE_METRIC in model_metrics:
      baseline_reports["versus"] = baselines_lib.versus_line(model_metrics[baselines_lib.HEADLINE_METRIC], best)
    phases["baselines"] = time.perf_counter() - baselines_start

  result = TrainResult(
      model_dir=config.model_dir, export_dir=export_dir, steps=fitted.steps,
      resumed_from_step=fitted.resumed_from_step, best_metric=config.best_metric, best_step=fitted.best_step,
      best_value=fitted.best_value, validation_metrics=fitted.best_metrics, test_report=test_report,
      history=fitted.history, seconds=time.time() - start, examples_per_second=fitted.examples_per_second,
      input_kind=data.input_kind, embedded_texts=data.embedded_texts, computed_texts=data.computed_texts,
      phase_seconds=phases, baselines=baseline_reports, calibration=calibration_summary)
  run.finish(result.to_dict())
  if not chief:  # Multi-worker non-chiefs wrote their (collective) checkpoints and exports to scratch: drop it.
    shutil.rmtree(distribute.output_dir(config.model_dir, strategy), ignore_errors=True)
  return result


def print_result(result: TrainResult, config: TrainConfig | None = None, stream=None) -> None:
  """Prints each phase's time on its own line (data, embedding, the training loop, export, test), the best
  validation result, the test report's table when present, and (with `config`) the `rank4class-predict` command
  to run next."""
  stream = stream or sys.stdout
  phases = result.phase_seconds
  if "data" in phases:
    stream.write(f"Read the data in {phases['data']:.1f} s.\n")
  if result.embedded_texts:
    stream.write(f"Embedded {result.embedded_texts:,} texts in {phases.get('embedding', 0.0):.1f} s "
                 f"({embedding_cache.source_note(result.embedded_texts, result.computed_texts)}).\n")
  loop = phases.get("loop", result.seconds)  # Runs finished before the phases were timed: the whole run.
  stream.write(f"{trainer.trained_line(result.steps, loop)}; best val {result.best_metric}={result.best_value} "
               f"at step {result.best_step}.\n")
  if result.export_dir:
    exported = f" in {phases['export']:.1f} s" if "export" in phases else ""
    stream.write(f"Exported the best model to {result.export_dir}{exported}.\n")
    if config is not None:
      stream.write(predict_hint(result, config) + "\n")
  if result.test_report is not None:
    evaluated = f" (evaluated in {phases['test']:.1f} s)" if "test" in phases else ""
    stream.write(f"Test split{evaluated}:\n" + evaluate_lib.format_table(result.test_report) + "\n")
  if result.calibration is not None:
    calibrated = f" (in {phases['calibration']:.1f} s)" if "calibration" in phases else ""
    stream.write(calibration_lib.summary_line(result.calibration) + f"{calibrated}.\n")
  if result.baselines is not None:
    model_metrics = result.test_report["metrics"] if result.test_report is not None else result.validation_metrics
    stream.write(baselines_lib.format_lines(result.baselines, model_metrics))


def predict_hint(result: TrainResult, config: TrainConfig) -> str:
  """The `rank4class-predict` command for the trained model: runs as printed once its one placeholder, the input
  path, is given. It carries the training flags that reading rows of the same layout needs (format, columns,
  bad-row policy); the placeholder names the input the model reads (an image folder, rows, text lines)."""
  data = config.data
  rows = data.rows
  trained_on_rows = data_lib.resolved_input_format(data) == data_lib.ROWS and not os.path.isdir(
      data.train_files or "")
  options: list[tuple[str, object]] = []
  if result.input_kind == data_lib.IMAGE_INPUT:
    placeholder = "<image folder>"
  elif result.input_kind == data_lib.DENSE_INPUT:
    if trained_on_rows and rows.feature_columns:
      placeholder = "<rows>"
      options.append(("feature_columns", ",".join(rows.feature_columns)))
    else:  # Dense features without named columns (LibSVM, TFRecords): the converter's records carry them.
      placeholder = "<rank4class-convert .tfrecord>"
  elif trained_on_rows:
    placeholder = "<rows>"
    if rows.text_column not in (row_tables.AUTO, None, ""):
      options.append(("text_column", rows.text_column))
  else:
    placeholder = "<texts or rows>"
  if trained_on_rows and placeholder == "<rows>":
    if rows.input_format != row_tables.AUTO:
      options.append(("input_format", rows.input_format))
    if rows.label_column != row_tables.AUTO:
      options.append(("label_column", rows.label_column))
  if trained_on_rows and rows.bad_rows != bad_rows.FAIL:
    options.append(("bad_rows", rows.bad_rows))
    if rows.max_bad_rows is not None:
      options.append(("max_bad_rows", rows.max_bad_rows))
  return cli.next_command("rank4class-predict", [("model_dir", result.model_dir), ("input", placeholder),
                                                 *options, ("output", "predictions.csv")])
