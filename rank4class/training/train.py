"""Trains a Rank4Class model through the engine (`rank4class_engine.trainer.fit`) under tf.distribute: the
model built and compiled, validation, checkpoints and resumption, calibration, the best model's export and
test report, the baselines beside it, and the lines printed for the run.

The run's configuration and result live in `rank4class.training.train_config`, the model config fitted to the
data in `rank4class.training.model_setup`, the optimizer in `rank4class_engine.optimizers`; their names are
importable from here too (`train.Rank4ClassTrainConfig`, `train.resolve_model_config`,
`train.OptimizerConfig`).
"""

import dataclasses
import json
import logging
import os
import shutil
import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from rank4class.evaluation import baselines as baselines_lib
from rank4class.evaluation import evaluation_report, evaluators, full_class_evaluation
from rank4class.inference import calibration as calibration_lib
from rank4class.inference import full_class_scoring, served, serving
from rank4class.modeling import encoders as encoders_lib
from rank4class.modeling import model as model_lib
from rank4class.modeling import ranking_math
from rank4class.training import training_data as data_lib
from rank4class.training import zero_shot_choice
from rank4class.training.model_setup import (  # noqa: F401  Re-exported: callers use `train.<name>`.
  AUTO_CENTROID_CLASSES,
  CLASS_CENTROID_LENGTH,
  COSINE_START,
  COSINE_TOWERS_TEMPERATURE,
  ModelSetup,
  class_centroids_apply,
  class_embedding_dim,
  class_start,
  cosine_towers_apply,
  has_class_ids,
  logistic_regression_applies,
  logistic_regression_model,
  metadata_class_encoder,
  resolve_model_config,
  resolve_model_setup,
  tfidf_with_vocabulary,
  training_class_priors,
  with_class_centroids,
  with_cosine_towers,
)
from rank4class.training.train_config import (  # noqa: F401  Re-exported: callers use `train.<name>`.
  AUTO_ENCODER,
  BACKUP_DIR,
  BEST_DIR,
  BEST_STATE_FILE,
  CONFIG_FILE,
  DEFAULT_EPOCHS,
  DEFAULT_MAX_STEPS,
  DEFAULT_MIN_STEPS,
  DEFAULT_PATIENCE,
  EXPORT_DIR,
  FINETUNE_MAX_LEARNING_RATE,
  FINETUNE_OPTIMIZER,
  HYBRID_OPTIMIZER,
  INSTANCE_ENCODERS,
  LINEAR_CHOICE,
  LOG_DIR,
  OUTPUTS_FIELDS,
  PATIENCE_LENGTH_FACTOR,
  PROGRESS_FILE,
  RESTART_FREE_FIELDS,
  RESULT_FILE,
  REUSE_FREE_FIELDS,
  RUN_FIELDS,
  TEST_PER_CLASS_FILE,
  TEST_REPORT_FILE,
  TFIDF_LINEAR_CHOICE,
  TFIDF_OPTIMIZER,
  TRAINED_CHOICE,
  VALIDATION_LOSS,
  OutputsConfig,
  Rank4ClassTrainConfig,
  Rank4ClassTrainResult,
  RunConfig,
  TrainConfig,  # noqa: F401  Deprecated names, re-exported until 0.10.0.
  TrainResult,  # noqa: F401
  comparable_config,
  config_from_dict,
  in_parts,
  load_config,
  metric_mode,
  metric_names,
)
from rank4class_data import class_texts as class_texts_lib
from rank4class_data.messages import say
from rank4class_encoders import text_embeddings, text_encoder
from rank4class_engine import configs as engine_configs
from rank4class_engine import distribute, model_reuse, precision, run_directory, trainer
from rank4class_engine import losses as losses_lib
from rank4class_engine.optimizers import OPTIMIZERS, OptimizerConfig, make_optimizer  # noqa: F401  Re-exported.

# Losses whose value over C classes costs O(C^2) per instance (pairs, approximate ranks over all pairs):
# "auto" computes them on validation up to this many classes only (at 1,100 classes and batch 256, one
# pairwise tensor is 1.2 GB).
QUADRATIC_LOSSES = (losses_lib.PAIRWISE_LOGISTIC, losses_lib.APPROX_NDCG, losses_lib.GUMBEL_APPROX_NDCG)
QUADRATIC_LOSS_CLASSES = 256
# In-memory validation splits up to this size are batched once and kept as tensors.
_MATERIALIZED_VALIDATION_BYTES = 256 * 2**20

_logger = logging.getLogger(__name__)


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


def build_compiled_model(model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData,
                         strategy: tf.distribute.Strategy, run: RunConfig, optimizer: OptimizerConfig,
                         total_steps: int) -> model_lib.Rank4ClassModel:
  """Builds, builds the weights of, and compiles the model inside `strategy.scope()`, in `run.precision`, for
  `total_steps` of `optimizer` (its schedule's length)."""
  loss_config = model_config.loss
  if loss_config.type == losses_lib.GUMBEL_APPROX_NDCG and loss_config.seed is None:
    loss_config = dataclasses.replace(loss_config, seed=run.seed)
  sample = next(iter(data.validation.make_dataset(2, shuffle=False, repeat=False, seed=0)))[0]
  with precision.policy_scope(run.precision), strategy.scope():
    model = model_lib.build_model(model_config, data.class_names, _class_counts(data, model_config))
    # In a replica context, as in `fit`: TF Hub text encoders loaded under a MirroredStrategy refuse calls
    # from the cross-replica context.
    if isinstance(sample, dict):
      # Hybrid text trains on {text, embedding} but serves raw texts: the first call, on the texts, builds the
      # model and records what it saves and reloads with (the served input).
      strategy.run(lambda x: model(x, training=False), args=(sample[encoders_lib.TEXT_KEY],))
    strategy.run(lambda x: model(x, training=False), args=(sample,))
    # The ranking metrics are computed by `ValidationMetrics` on the validation split only: compiling them
    # into the train step would trace TF-Ranking's sorting graphs twice more per run for no use.
    model.compile(optimizer=make_optimizer(optimizer, total_steps),
                  loss=losses_lib.make_loss(loss_config), steps_per_execution=run.steps_per_execution)
  return model


# `build_compiled_model` with the run's strategy, run part, optimizer and length given: model config, data ->
# the compiled model.
BuildFn = Callable[[model_lib.Rank4ClassConfig, data_lib.PreparedData], model_lib.Rank4ClassModel]


# --- Training -----------------------------------------------------------------------------------------------


# From this many classes on, validation and the test report rank all classes chunk by chunk.
CHUNKED_VALIDATION_CLASSES = full_class_scoring.CHUNKED_CLASSES


def validation_loss_note(run: RunConfig, loss: str, num_classes: int) -> tuple[bool, str]:
  """(whether validation computes the `loss` (its name), a line for the terminal saying what validation
  computes)."""
  chunked = num_classes >= CHUNKED_VALIDATION_CLASSES
  metrics = (f"Validation: top-K error, NDCG@K and MRR over all {num_classes:,} classes"
             + (" (exact ranks, chunk by chunk)" if chunked else ""))
  read = run.tensorboard or run.best_metric == "loss"
  if run.validation_loss == "off":
    return False, f"{metrics}; no loss (`run.validation_loss`=off)."
  if chunked:  # `_train` refuses "on" and best_metric="loss" here.
    return False, f"{metrics}; no loss (not computed from {CHUNKED_VALIDATION_CLASSES:,} classes on)."
  if run.validation_loss == "on" or run.best_metric == "loss":
    return True, f"{metrics}, and the {loss} loss."
  if not read:
    return False, (f"{metrics}; no loss (nothing reads it: no TensorBoard; "
                   "`run.validation_loss`=on computes it).")
  if loss in QUADRATIC_LOSSES and num_classes > QUADRATIC_LOSS_CLASSES:
    return False, (f"{metrics}; no loss: {loss} over {num_classes:,} classes costs O(C^2) memory per "
                   "instance (`run.validation_loss`=on computes it anyway).")
  return True, f"{metrics}, and the {loss} loss (for TensorBoard)."


def make_validate_fn(score_fn: served.ScoreFn, model: model_lib.Rank4ClassModel,
                     data: data_lib.PreparedData, ks: tuple[int, ...], batch_size: int,
                     with_loss: bool) -> trainer.ValidateFn:
  """The engine's validation: the validation split's ranking metrics (top-K error, NDCG@K, MRR) and, when
  `with_loss`, its loss.

  One pass over the split per validation; the score function is traced once per run, the loss and the
  evaluator once per process (for each configuration). The loss is optional because tracing a ranking loss
  once more costs a short run (a study's) a noticeable share of its time; `train` asks for it when something
  reads it (TensorBoard or `best_metric="loss"`).
  """
  options = tf.data.Options()
  options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
  dataset = data.validation.make_dataset(batch_size, False, False, 0).with_options(options)
  if (
    isinstance(data.validation, data_lib.ArraySplit)
    and data.validation.nbytes <= _MATERIALIZED_VALIDATION_BYTES
  ):
    # Held as tensors once: starting the input pipeline again costs every validation ~10 ms, as much as the
    # validation's scoring itself on a small split (docs/BENCHMARKS.md).
    dataset = list(dataset)
  # Outside fit's strategy scope (the test reuses it).
  evaluator = evaluators.get_evaluator(data.class_names, ks)
  if model.num_classes >= CHUNKED_VALIDATION_CLASSES and has_class_ids(data.validation):
    # Many classes: exact ranks over all classes, chunk by chunk, instead of `[batch, C]` score matrices. No
    # validation loss: over all C classes a ranking loss costs O(C^2) per instance (pairs, approximate ranks).
    ranks = full_class_scoring.rank_function(model, ks)
    return lambda model: full_class_scoring.rank_metrics(
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
    return evaluators.evaluate_dataset(score_fn, dataset, data.class_names, ks, evaluator,
                                         loss_fn=batch_loss)["metrics"]

  return validate


def _with_recorded_inputs(config: Rank4ClassTrainConfig) -> Rank4ClassTrainConfig:
  """`config` with what decides its inputs recorded for config.json: the class-texts file's sha256 (the texts
  are part of the model: a resumed run must read the same file) and an "auto" text precision as this machine's
  choice (a resume on a machine that would choose otherwise, and so embed other vectors, is refused naming the
  field), except on a named image set."""
  data = config.data
  if data.class_texts:
    data = dataclasses.replace(data, class_texts_sha256=class_texts_lib.file_sha256(data.class_texts))
  # A named image set embeds no text: its "auto" stays as given, so the run resumes on any machine.
  if data.text_precision == text_encoder.AUTO_PRECISION and data.dataset not in data_lib.IMAGE_DATASETS:
    handle = data.text_encoder_handles[1] if data.text_encoder_handles else None  # None: MiniLM's conversion.
    data = dataclasses.replace(data, text_precision=text_encoder.resolve_precision(
        text_encoder.AUTO_PRECISION, trainable=False, encoder_handle=handle))
  return config if data is config.data else dataclasses.replace(config, data=data)


def train(config: Rank4ClassTrainConfig, data: data_lib.PreparedData | None = None, *,
          overwrite: bool = False, models: model_reuse.ModelPool | None = None) -> Rank4ClassTrainResult:
  """Trains (or resumes, or returns the finished result of) the run in `config.model_dir`.

  The run directory's lifecycle is `rank4class_engine.run_directory`: the directory is locked first (a second
  run on it stops at once and changes nothing), then its config compared (the same config resumes from the
  last checkpoint or returns the finished result; another config is refused with the changed keys named,
  unless `overwrite`), then written. Training goes through the engine (`rank4class_engine.trainer.fit`):
  exactly the asked steps, validation every `eval_every` steps and at the last, resumable checkpoints every
  `checkpoint_every` steps (each with its validation record), the weights with the best validation
  `best_metric` kept in `best/` and exported (every file of the export in a temporary folder renamed into
  place) as a SavedModel with the serving signature, a progress line and `progress.jsonl`. The test split is
  only evaluated, with the best weights, at the end; the checkpoint is removed once the result is written.

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
  config = _with_recorded_inputs(config)
  strategy = distribute.make_strategy(config.run.strategy, config.run.devices)
  chief = distribute.is_chief(strategy)
  directory = run_directory.RunDirectory(
      config.model_dir, engine_configs.to_dict(config), RESULT_FILE, restart_free=RESTART_FREE_FIELDS,
      normalize=comparable_config, overwrite=overwrite, overwrite_hint="`overwrite`",
      run_files=(TEST_REPORT_FILE, TEST_PER_CLASS_FILE), chief=chief,
      worker_dir=distribute.output_dir(config.model_dir, strategy))
  with directory:
    if directory.finished is not None:
      _logger.info("%s already holds a finished run; returning its result.", config.model_dir)
      return engine_configs.from_dict(Rank4ClassTrainResult, directory.finished)
    return _train(config, data, strategy, chief, start, directory, models)


# A logistic regression validated beside the trained model: (`LINEAR_CHOICE` or `TFIDF_LINEAR_CHOICE`, the
# data it reads, the model config its fit is packed into).
Candidate = tuple[str, data_lib.PreparedData, model_lib.Rank4ClassConfig]


def _linear_candidates(configured: model_lib.Rank4ClassConfig, data_config: data_lib.DataConfig,
                       model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData,
                       texts: data_lib.PreparedData | None) -> list[Candidate]:
  """The logistic regressions validated beside the trained model (`model_config`, resolved from the
  `configured` one): of the model's own inputs (`LINEAR_CHOICE`) where it applies, and with text mode "auto"
  of TF-IDF beside the frozen embeddings (`TFIDF_LINEAR_CHOICE`, on `texts`, the texts with their
  embeddings)."""
  candidates = [] if logistic_regression_applies(model_config, data) else [(LINEAR_CHOICE,
                                                                            data, model_config)]
  if texts is not None:
    hybrid = _hybrid_model_config(configured, data_config, texts)
    if not logistic_regression_applies(hybrid, texts):
      candidates.append((TFIDF_LINEAR_CHOICE, texts, hybrid))
  return candidates


def _hybrid_model_config(configured: model_lib.Rank4ClassConfig, data_config: data_lib.DataConfig,
                         texts: data_lib.PreparedData) -> model_lib.Rank4ClassConfig:
  """The model config of the hybrid encoder on `texts` (TF-IDF vocabulary learned from the training texts),
  its TF-IDF weighed as the TF-IDF + LR baseline weighs it (sublinear term frequency, the n-grams of one text
  left out from 50 texts on: `encoders.min_document_frequency`)."""
  encoder = configured.instance_encoder
  tfidf = dataclasses.replace(encoder.tfidf, sublinear_tf=True,
                              min_df=encoders_lib.min_document_frequency(len(texts.train)))
  auto = dataclasses.replace(configured, instance_encoder=dataclasses.replace(
      encoder, type=AUTO_ENCODER, tfidf=tfidf))
  return resolve_model_config(auto, data_config, texts)


def _choose_on_validation(run: RunConfig, build: BuildFn, candidates: list[Candidate],
                          strategy: tf.distribute.Strategy,
                          trained: tuple[model_lib.Rank4ClassModel, served.ScoreFn, data_lib.PreparedData],
                          fitted: trainer.FitResult, ks: tuple[int, ...], with_loss: bool,
                          phases: dict[str, float]
                          ) -> tuple[tuple[model_lib.Rank4ClassModel, served.ScoreFn, data_lib.PreparedData],
                                     dict | None]:
  """The trained model (its best step) or one of the logistic regressions of `candidates`
  (`model_setup.logistic_regression_model`: C by validation log-loss, fitted on the training split), whichever
  has the best validation `best_metric`; the trained model unless a candidate is strictly better. Only the
  validation split chooses.

  Returns:
    ((the chosen model, its score function, the data it reads), the choice's record for
    `Rank4ClassTrainResult.choice`, None without candidates); its time is `phases["choice"]`.
  """
  if not candidates:
    return trained, None
  choice_start = time.perf_counter()
  sign = 1.0 if metric_mode(run.best_metric) == "min" else -1.0
  record = {"metric": run.best_metric, "mode": metric_mode(run.best_metric), "chosen": TRAINED_CHOICE,
            "trained_step": fitted.best_step, "values": {TRAINED_CHOICE: fitted.best_value}, "fits": {},
            "metrics": {}}
  chosen, best = trained, fitted.best_value
  for name, data, base in candidates:
    linear_config, fit = logistic_regression_model(base, data)
    linear = build(linear_config, data)
    score_fn = served.make_score_fn(linear, data_lib.input_spec(data.validation), strategy)
    with strategy.scope():
      metrics = make_validate_fn(score_fn, linear, data, ks, max(run.batch_size, 256),
                                 with_loss=with_loss)(linear)
    value = metrics.get(run.best_metric)
    record["values"][name] = value
    record["metrics"][name] = metrics
    record["fits"][name] = {k: (float(v) if isinstance(v, (np.floating, float)) else v)
                            for k, v in fit.items()}
    if value is not None and np.isfinite(value) and sign * value < sign * best:
      chosen, best, record["chosen"] = (linear, score_fn, data), value, name
  phases["choice"] = time.perf_counter() - choice_start
  return chosen, record


def _pool_key(config: Rank4ClassTrainConfig, data: data_lib.PreparedData,
              strategy: tf.distribute.Strategy) -> str:
  """What two runs must share to train one model: the config but its reuse-free fields, the data object and
  the strategy object (both held by the pooled entry, so their ids stay theirs)."""
  config_dict = engine_configs.to_dict(config)
  for name in (*REUSE_FREE_FIELDS, "optimizer.learning_rate"):
    *parts, last = name.split(".")
    part = config_dict
    for key in parts:
      part = part[key]
    part.pop(last)
  return json.dumps({"config": config_dict, "data": id(data), "strategy": id(strategy)}, sort_keys=True)


# Fine-tuning MiniLM on 2 CPU cores, batch 32, 64 tokens, TF 2.15 (../shared/DATA.md): examples per second.
FINETUNE_EXAMPLES_PER_SECOND_2_CORES = 34


def _data_notes(data: data_lib.PreparedData, train_examples: int, learning_rate: float | None = None,
                start_line: str | None = None) -> str:
  """Lines for the terminal: converted row files, where validation comes from, classes of the class texts the
  data lacks, what fine-tuning text costs, a fine-tuning `learning_rate` that would wreck the encoder, and
  `start_line` (where training starts) when given."""
  lines = [f"Rows ({split}): {converted.describe()}" for split, converted in data.conversions.items()]
  if data.validation_note:
    lines.append(f"Validation split: {data.validation_note}.")
  if data.class_texts_note:
    lines.append(f"Class texts: {data.class_texts_note}.")
  # Fine-tuned MiniLM (not TF-IDF).
  if data.input_kind == data_lib.TEXT_INPUT and data.text_handles is not None:
    minutes = train_examples / FINETUNE_EXAMPLES_PER_SECOND_2_CORES / 60
    lines.append("Text mode finetune: the whole text encoder runs forward and backward on every example; on "
                 f"2 CPU cores about {FINETUNE_EXAMPLES_PER_SECOND_2_CORES} examples/s, so ~{minutes:.0f} "
                 f"min for {train_examples:,} examples (a GPU is far faster). `data.text_mode`=frozen embeds "
                 "each text once.")
    if learning_rate is not None and learning_rate > FINETUNE_MAX_LEARNING_RATE:
      lines.append(f"WARNING: learning rate {learning_rate:g} fine-tunes a pre-trained encoder; above "
                   f"{FINETUNE_MAX_LEARNING_RATE:g} its weights are usually wrecked (2e-5..5e-5 is the usual "
                   "range; rank4class-train's default for `data.text_mode`=finetune is "
                   f"{FINETUNE_OPTIMIZER.learning_rate:g} with AdamW, 10% warmup and linear decay).")
  if start_line:
    lines.append(start_line)
  return "".join(line + "\n" for line in lines)


def _prepare_data(data_config: data_lib.DataConfig, data: data_lib.PreparedData | None,
                  phases: dict[str, float]) -> tuple[data_lib.PreparedData, data_lib.PreparedData | None]:
  """The run's data (read and embedded here when not given) and, for text mode "auto", the texts beside it."""
  if data is None:
    data_start = time.perf_counter()
    data = data_lib.prepare_data(data_config)
    phases["embedding"] = data.embedding_seconds
    phases["data"] = time.perf_counter() - data_start - data.embedding_seconds
  texts = None
  if data_config.text_mode == data_lib.AUTO_TEXT and data.input_kind == data_lib.TEXT_AND_EMBEDDING_INPUT:
    # Text mode "auto": the trained model reads the frozen embeddings; the texts serve the TF-IDF candidate.
    texts, data = data, data_lib.embedding_view(data)
  return data, texts


def _build_model(build: BuildFn, model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData,
                 strategy: tf.distribute.Strategy, models: model_reuse.ModelPool | None,
                 pool_key: str) -> tuple[model_lib.Rank4ClassModel, object]:
  """The compiled model, taken from the pool `models` (with its pooled entry, under `pool_key`) when one
  replica trains."""
  model = build(model_config, data)
  pooled = None
  if models is not None and strategy.num_replicas_in_sync == 1:
    pooled = models.take(pool_key, model)
    pooled.extras.update(data=data, strategy=strategy)
    model = pooled.model
  return model, pooled


def engine_config(model_dir: str, run: RunConfig, total_steps: int, min_steps: int, chooses_length: bool,
                  validate_start: bool) -> trainer.EngineConfig:
  """The engine's settings of a run: the one place `RunConfig` becomes
  `rank4class_engine.trainer.EngineConfig` (`total_steps`, `min_steps` and `chooses_length` from
  `Rank4ClassTrainConfig`, which reads the optimizer's schedule too)."""
  return trainer.EngineConfig(
      run_dir=model_dir, train_steps=total_steps, eval_every=run.eval_every,
      checkpoint_every=run.checkpoint_every, best_metric=run.best_metric,
      best_mode=metric_mode(run.best_metric), steps_per_execution=run.steps_per_execution,
      global_batch_size=run.batch_size, tensorboard=run.tensorboard, verbose=min(run.verbose, 1),
      validate_start=validate_start, preemption_grace_seconds=run.preemption_grace_seconds,
      patience=run.patience if chooses_length and run.best_metric else None, min_steps=min_steps)


def _fit_trained_model(run: RunConfig, loss: str, data: data_lib.PreparedData,
                       strategy: tf.distribute.Strategy,
                       chief: bool, model: model_lib.Rank4ClassModel, pooled, engine: trainer.EngineConfig,
                       ks: tuple[int, ...]):
  """Fits `model` through the engine; returns the fit, its score function and whether validation has a
  loss."""

  def train_dataset(start_step: int):
    # The seeded stream from its top, `start_step` batches on: a resumed run trains on the uninterrupted run's
    # batches.
    if strategy.num_replicas_in_sync == 1:
      # One replica: Keras distributes the plain dataset itself, and its iterator starts ~0.2 s sooner than a
      # dataset distributed from a function (docs/BENCHMARKS.md, the binary against a bare fit).
      return data.train.make_dataset(run.batch_size, True, True, run.seed).skip(start_step)
    return strategy.distribute_datasets_from_function(
        lambda ctx: data.train.make_dataset(run.batch_size, True, True, run.seed, ctx).skip(start_step))

  # One traced score function serves the validations and the test evaluation.
  if (run.best_metric == "loss" or run.validation_loss == "on") and \
      model.num_classes >= CHUNKED_VALIDATION_CLASSES:
    what = "best_metric='loss' needs" if run.best_metric == "loss" else "validation_loss='on' asks for"
    raise ValueError(f"{what} the validation loss over all {model.num_classes:,} classes, which is not "
                     f"computed from {CHUNKED_VALIDATION_CLASSES:,} classes on; choose a ranking metric "
                     "(top_1_error, ndcg_5, mrr) and validation_loss='auto' or 'off'.")
  with_loss, validation_line = validation_loss_note(run, loss, model.num_classes)
  if chief and run.verbose:
    say(validation_line)
  score_fn = pooled.extras.get("score_fn") if pooled is not None else None
  if score_fn is None:
    score_fn = served.make_score_fn(model, data_lib.input_spec(data.validation), strategy)
  validate = make_validate_fn(score_fn, model, data, ks, max(run.batch_size, 256), with_loss=with_loss)
  fitted = trainer.fit(model, train_dataset, engine, strategy, validate=validate)
  return fitted, score_fn, with_loss


def _calibrate(run: RunConfig, outputs: OutputsConfig, data: data_lib.PreparedData,
               strategy: tf.distribute.Strategy, chief: bool, model: model_lib.Rank4ClassModel,
               score_fn: served.ScoreFn, phases: dict[str, float]
               ) -> tuple[calibration_lib.Calibration | None, dict | None]:
  """The calibration fitted on the validation split's scores and its summary (test metrics included)."""
  # The model holds the best weights: a temperature and conformal scores fitted on the validation split's
  # scores (n x C float32 kept in memory), evaluated on the test split batch by batch, exported beside the
  # model.
  calibration, calibration_summary = None, None
  skip = (
    "graded relevance lists (ELWC), not one class per row"
    if not has_class_ids(data.validation)
    else f"{model.num_classes:,} classes (from {CHUNKED_VALIDATION_CLASSES:,} on, scores are ranked chunk by "
    "chunk, never held whole)"
    if model.num_classes >= CHUNKED_VALIDATION_CLASSES
    else None
  )
  if outputs.calibrate and skip is not None:
    if chief and run.verbose:
      say(f"Calibration: skipped, the validation split has {skip}.")
  elif outputs.calibrate:
    calibration_start = time.perf_counter()
    calibration_batch = max(run.batch_size, 256)
    with strategy.scope():  # As the validations called `score_fn`: no new trace.
      scored = [(score_fn(x).numpy(), y.numpy().reshape([-1]))
                for x, y in data.validation.make_dataset(calibration_batch, False, False, 0)]
    calibration = calibration_lib.Calibration.fit(np.concatenate([s for s, _ in scored]),
                                                  np.concatenate([y for _, y in scored]), seed=run.seed)
    del scored
    calibration_summary = calibration.summary()
    if outputs.evaluate_test and data.test is not None and has_class_ids(data.test):
      calibration_metrics = calibration_lib.CalibrationMetrics(calibration)
      with strategy.scope():
        for x, y in data.test.make_dataset(calibration_batch, False, False, 0):
          calibration_metrics.update(score_fn(x).numpy(), y.numpy().reshape([-1]))
      calibration_summary["test"] = calibration_metrics.result()
    phases["calibration"] = time.perf_counter() - calibration_start
  return calibration, calibration_summary


def _export(model_dir: str, outputs: OutputsConfig, data_config: data_lib.DataConfig,
            data: data_lib.PreparedData,
            strategy: tf.distribute.Strategy, chief: bool, model: model_lib.Rank4ClassModel,
            calibration: calibration_lib.Calibration | None, phases: dict[str, float]) -> str | None:
  """Exports the chosen model to `<model_dir>/export`; returns its directory (None without
  `outputs.export`)."""
  export_dir = None
  export_start = time.perf_counter()
  if outputs.export:
    target = distribute.output_dir(model_dir, strategy, EXPORT_DIR)
    text_inputs = None
    if data.input_kind == data_lib.EMBEDDING_INPUT and data.text_handles is not None:
      # The export takes embeddings; `rank4class-predict` embeds raw texts the same way from this record.
      text_inputs = data_lib.frozen_text_encoder(data_config, data.text_handles)
    export_dir = serving.export_saved_model(
        model, target, top_k=outputs.serving_top_k, input_dtype=_serving_dtype(data.input_kind),
        overwrite=True, frozen_text_encoder=text_inputs, calibration=calibration)
    if not chief:
      shutil.rmtree(export_dir, ignore_errors=True)
      export_dir = os.path.join(model_dir, EXPORT_DIR)
    phases["export"] = time.perf_counter() - export_start
  return export_dir


def _test_report(model_dir: str, batch_size: int, data: data_lib.PreparedData,
                 strategy: tf.distribute.Strategy,
                 chief: bool, model: model_lib.Rank4ClassModel, score_fn: served.ScoreFn, ks: tuple[int, ...],
                 phases: dict[str, float]) -> dict | None:
  """The chosen model's report on the test split (when there is one), written to the run directory by the
  chief."""
  test_report = None
  test_start = time.perf_counter()
  if data.test is not None:
    test = data.test.make_dataset(max(batch_size, 256), False, False, 0)
    if model.num_classes >= CHUNKED_VALIDATION_CLASSES and has_class_ids(data.test):
      test_report = full_class_evaluation.evaluate_full_classes(model, test, ks)
    else:
      with strategy.scope():  # The validation traced the shared evaluator under this scope: reuse it.
        test_report = evaluators.evaluate_dataset(score_fn, test, data.class_names, ks)
    if chief:
      evaluation_report.write_report(os.path.join(model_dir, TEST_REPORT_FILE), test_report)
    phases["test"] = time.perf_counter() - test_start
  return test_report


def _baseline_reports(verbose: int, data: data_lib.PreparedData, ks: tuple[int, ...],
                      test_report: dict | None, fitted: trainer.FitResult, phases: dict[str, float]) -> dict:
  """The baselines on the run's data, with the line comparing the model's test metrics (its validation
  metrics without a test split)."""
  baselines_start = time.perf_counter()
  baseline_reports = baselines_lib.compute_or_note(baselines_lib.BaselineConfig(),
                                                   data_lib.embedding_view(data), ks,
                                                   progress=say if verbose else None)
  model_metrics = test_report["metrics"] if test_report is not None else fitted.best_metrics
  best = baselines_lib.best_row(baseline_reports)
  if best is not None and baselines_lib.HEADLINE_METRIC in model_metrics:
    baseline_reports["versus"] = baselines_lib.versus_line(model_metrics[baselines_lib.HEADLINE_METRIC], best)
  phases["baselines"] = time.perf_counter() - baselines_start
  return baseline_reports


def _train(config: Rank4ClassTrainConfig, data: data_lib.PreparedData | None,
           strategy: tf.distribute.Strategy, chief: bool, start: float, directory: run_directory.RunDirectory,
           models: model_reuse.ModelPool | None) -> Rank4ClassTrainResult:
  """The run in `directory`, locked and compared: each part of `config` goes where it is read."""
  run, outputs = config.run, config.outputs
  tf.keras.utils.set_random_seed(run.seed)
  phases: dict[str, float] = {}
  data, texts = _prepare_data(config.data, data, phases)
  setup = resolve_model_setup(config.model, config.data, data)
  model_config, num_train = setup.model_config, (len(data.train) if run.train_steps is None else None)
  total_steps = config.total_steps(num_train)
  notes = _data_notes(data, total_steps * run.batch_size, config.optimizer.learning_rate, setup.start_line())
  if chief and run.verbose and notes:
    say(notes)

  def build(model_config: model_lib.Rank4ClassConfig,
            data: data_lib.PreparedData) -> model_lib.Rank4ClassModel:
    return build_compiled_model(model_config, data, strategy, run, config.optimizer, total_steps)

  model, pooled = _build_model(build, model_config, data, strategy, models, _pool_key(config, data, strategy))
  ks = tuple(model_config.metric_ks)
  engine = engine_config(config.model_dir, run, total_steps, config.min_steps(num_train),
                         config.chooses_length, setup.starts_fitted)
  fitted, score_fn, with_loss = _fit_trained_model(run, model_config.loss.type, data, strategy, chief, model,
                                                   pooled, engine, ks)
  phases["loop"] = fitted.loop_seconds
  trained_score_fn = score_fn  # The pooled model's: kept for the next run on it whichever model is chosen.
  candidates = (_linear_candidates(config.model, config.data, model_config, data, texts)
                if outputs.linear_candidate and fitted.best_value is not None else [])
  (model, score_fn, data), choice = _choose_on_validation(run, build, candidates, strategy,
                                                          (model, score_fn, data), fitted, ks,
                                                          with_loss, phases)
  calibration, calibration_summary = _calibrate(run, outputs, data, strategy, chief, model, score_fn, phases)
  if pooled is not None:
    pooled.extras["score_fn"] = trained_score_fn
    models.release(pooled)
  export_dir = _export(config.model_dir, outputs, config.data, data, strategy, chief, model,
                       calibration, phases)
  test_report = (_test_report(config.model_dir, run.batch_size, data, strategy, chief, model, score_fn, ks,
                              phases) if outputs.evaluate_test else None)
  held_out = _zero_shot_held_out(outputs.zero_shot_holdout, run.seed, setup, data, strategy)
  zero_shot = (_train_zero_shot(config.model_dir, run, outputs, config.data, build, model_config, data,
                                held_out, engine, strategy, chief, phases) if len(held_out) else None)
  baseline_reports = (_baseline_reports(run.verbose, data, ks, test_report, fitted, phases)
                      if outputs.baselines and chief else None)
  result = Rank4ClassTrainResult(
      model_dir=config.model_dir, export_dir=export_dir, steps=fitted.steps,
      resumed_from_step=fitted.resumed_from_step, best_metric=run.best_metric, best_step=fitted.best_step,
      best_value=fitted.best_value,
      validation_metrics=_chosen_metrics(choice, fitted),
      test_report=test_report,
      history=fitted.history, seconds=time.time() - start, examples_per_second=fitted.examples_per_second,
      input_kind=data.input_kind, embedded_texts=data.embedded_texts, computed_texts=data.computed_texts,
      phase_seconds=phases, baselines=baseline_reports, calibration=calibration_summary, choice=choice,
      zero_shot=zero_shot, stopped_early=fitted.stopped_early)
  directory.finish(result.to_dict())
  # Multi-worker non-chiefs wrote their (collective) checkpoints and exports to scratch: drop it.
  if not chief:
    shutil.rmtree(distribute.output_dir(config.model_dir, strategy), ignore_errors=True)
  return result


def _chosen_metrics(choice: dict | None, fitted: trainer.FitResult) -> dict[str, float]:
  """The validation metrics of the exported model: a chosen regression's, else the trained model's best."""
  if choice is not None and choice["chosen"] != TRAINED_CHOICE:
    return choice["metrics"][choice["chosen"]]
  return fitted.best_metrics


def _zero_shot_held_out(holdout: float | None, seed: int, setup: ModelSetup, data: data_lib.PreparedData,
                        strategy: tf.distribute.Strategy) -> np.ndarray:
  """The classes the zero-shot model is trained without (`OutputsConfig.zero_shot_holdout`, drawn by `seed`):
  for cosine towers over in-memory class ids, not under MultiWorkerMirroredStrategy; none otherwise."""
  if (setup.start != COSINE_START or isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
      or not isinstance(data.train, data_lib.ArraySplit) or data.train.labels.ndim != 1):
    return np.zeros([0], np.int64)
  return zero_shot_choice.auto_held_out(len(data.class_names), holdout, seed)


def _with_untrained_share(model_config: model_lib.Rank4ClassConfig,
                          share: float) -> model_lib.Rank4ClassConfig:
  """`model_config` with the untrained `share` mixed into both towers (`zero_shot_choice`)."""
  return dataclasses.replace(model_config, instance_encoder=dataclasses.replace(
      model_config.instance_encoder,
      mlp=dataclasses.replace(model_config.instance_encoder.mlp, untrained_share=share)),
      class_encoder=dataclasses.replace(model_config.class_encoder, metadata=dataclasses.replace(
          model_config.class_encoder.metadata, untrained_share=share)))


def _train_zero_shot(model_dir: str, run: RunConfig, outputs: OutputsConfig, data_config: data_lib.DataConfig,
                     build: BuildFn, model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData,
                     held_out: np.ndarray, engine: trainer.EngineConfig, strategy: tf.distribute.Strategy,
                     chief: bool, phases: dict[str, float]) -> dict:
  """Trains the zero-shot model (`zero_shot_choice`) in `<model_dir>/zero_shot` without the `held_out`
  classes, for the run's steps, validating it on them; exports the chosen step with the chosen untrained share
  into `<model_dir>/zero_shot/export`. Resumes from its own checkpoints like the run. Returns its record."""
  start = time.perf_counter()
  split = zero_shot_choice.split_held_out(data, held_out)
  metadata = model_config.class_encoder.metadata
  seen_config = dataclasses.replace(model_config, class_encoder=dataclasses.replace(
      model_config.class_encoder, metadata=dataclasses.replace(metadata, class_texts=split.seen.class_texts)))
  ks = tuple(model_config.metric_ks)
  metric = run.best_metric if run.best_metric != "loss" else f"ndcg_{max(ks)}"
  run_dir = os.path.join(model_dir, zero_shot_choice.ZERO_SHOT_DIR)
  if chief and run.verbose:
    say(f"Zero-shot model: trained without {len(held_out)} of the {len(data.class_names)} classes, "
        f"validated on their {len(split.labels):,} rows ({run_dir}).")
  model = build(seen_config, split.seen)
  score_fn = served.make_score_fn(model, data_lib.input_spec(split.seen.validation), strategy)
  seen_validate = make_validate_fn(score_fn, model, split.seen, ks, max(run.batch_size, 256), with_loss=False)
  class_vectors = text_embeddings.embed_texts(split.class_texts, metadata.text,
                                              data_config.embedding_cache_dir)
  held_out_validate = zero_shot_choice.ZeroShotValidation(split, class_vectors, metric, ks)

  def validate(m):
    with strategy.scope():
      return {**seen_validate(m), **held_out_validate(m)}

  def train_dataset(start_step: int):
    if strategy.num_replicas_in_sync == 1:
      return split.seen.train.make_dataset(run.batch_size, True, True, run.seed).skip(start_step)
    return strategy.distribute_datasets_from_function(
        lambda ctx: split.seen.train.make_dataset(run.batch_size, True, True, run.seed, ctx).skip(start_step))

  fitted = trainer.fit(model, train_dataset, dataclasses.replace(
      engine, run_dir=run_dir, best_metric=zero_shot_choice.METRIC_PREFIX + metric,
      best_mode=metric_mode(metric), validate_start=True), strategy, validate=validate)
  record = zero_shot_choice.summary(split, metric, fitted.best_step, fitted.best_metrics)
  mixed_config = _with_untrained_share(seen_config, record["untrained_share"])
  mixed = build(mixed_config, split.seen)
  mixed.set_weights(model.get_weights())
  if outputs.export:
    target = distribute.output_dir(run_dir, strategy, EXPORT_DIR)
    serving.export_saved_model(mixed, target, top_k=outputs.serving_top_k, overwrite=True,
                               frozen_text_encoder=data_lib.frozen_text_encoder(data_config,
                                                                                data.text_handles))
    record["export_dir"] = target if chief else None
    if not chief:
      shutil.rmtree(target, ignore_errors=True)
  if chief:
    with open(os.path.join(run_dir, zero_shot_choice.CHOICE_FILE), "w", encoding="utf-8") as f:
      json.dump(record, f, indent=2)
  phases["zero_shot"] = time.perf_counter() - start
  return record
