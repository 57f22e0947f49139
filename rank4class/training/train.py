"""Trains a Rank4Class model through the engine (`rank4class_engine.loop.trainer.fit`) under tf.distribute:
the model built and compiled, validation, checkpoints and resumption, calibration, the best model's export and
test report, the baselines beside it, and the lines printed for the run.

The run's configuration and result live in `rank4class.training.train_config`, the model config fitted to the
data in `rank4class.training.model_setup`, the optimizer in `rank4class_engine.optimization.optimizers`; their
names are importable from here too (`train.Rank4ClassTrainConfig`, `train.resolve_model_config`,
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

from rank4class.inference import served
from rank4class.inference import zero_shot as zero_shot_lib
from rank4class.modeling import encoders as encoders_lib
from rank4class.modeling import model as model_lib
from rank4class.training import model_choice, run_outputs, zero_shot_choice
from rank4class.training import training_data as data_lib
from rank4class.training.few_shot import few_shot_rule, few_shot_run
from rank4class.training.linear_candidates import logistic_regression_model  # noqa: F401  Re-exported.
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
  metadata_class_encoder,
  resolve_model_config,
  resolve_model_setup,
  tfidf_with_vocabulary,
  training_class_priors,
  with_class_centroids,
  with_class_text_embeddings,
  with_cosine_towers,
)
from rank4class.training.run_validation import (  # noqa: F401  Re-exported: callers use `train.<name>`.
  CHUNKED_VALIDATION_CLASSES,
  QUADRATIC_LOSS_CLASSES,
  QUADRATIC_LOSSES,
  make_validate_fn,
  validation_loss_note,
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
  FEW_SHOT_MODES,
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
  WITHOUT_CLASS_TEXTS_CHOICE,
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
from rank4class_data.messages import say
from rank4class_data.rows import class_texts as class_texts_lib
from rank4class_encoders import text_encoder
from rank4class_engine import distribute
from rank4class_engine.loop import model_reuse, trainer
from rank4class_engine.optimization import losses as losses_lib
from rank4class_engine.optimization import precision
from rank4class_engine.optimization.optimizers import OPTIMIZERS, OptimizerConfig, make_optimizer  # noqa: F401  Re-exported.
from rank4class_engine.runs import configs as engine_configs
from rank4class_engine.runs import run_directory

_logger = logging.getLogger(__name__)


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

  The run directory's lifecycle is `rank4class_engine.runs.run_directory`: the directory is locked first (a
  second run on it stops at once and changes nothing), then its config compared (the same config resumes from
  the last checkpoint or returns the finished result; another config is refused with the changed keys named,
  unless `overwrite`), then written. Training goes through the engine (`rank4class_engine.loop.trainer.fit`):
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
      its seed, learning rate and outputs trains that model, reset to this run's initial weights and
      optimizer state, instead of tracing a new one (`rank4class_engine.loop.model_reuse`: the same numbers
      as without it).

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
      run_files=(TEST_REPORT_FILE, TEST_PER_CLASS_FILE, zero_shot_lib.RUN_ZERO_SHOT_DIR,
                 zero_shot_lib.RUN_WITHOUT_CLASS_TEXTS_DIR), chief=chief,
      worker_dir=distribute.output_dir(config.model_dir, strategy))
  with directory:
    if directory.finished is not None:
      _logger.info("%s already holds a finished run; returning its result.", config.model_dir)
      return engine_configs.from_dict(Rank4ClassTrainResult, directory.finished)
    return _train(config, data, strategy, chief, start, directory, models)


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
  `rank4class_engine.loop.trainer.EngineConfig` (`total_steps`, `min_steps` and `chooses_length` from
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
                       ks: tuple[int, ...], announce: bool = True):
  """Fits `model` through the engine; returns the fit, its score function and whether validation has a
  loss (said in a line with `announce`)."""

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
  if chief and run.verbose and announce:
    say(validation_line)
  score_fn = pooled.extras.get("score_fn") if pooled is not None else None
  if score_fn is None:
    score_fn = served.make_score_fn(model, data_lib.input_spec(data.validation), strategy)
  validate = make_validate_fn(score_fn, model, data, ks, max(run.batch_size, 256), with_loss=with_loss)
  fitted = trainer.fit(model, train_dataset, engine, strategy, validate=validate)
  return fitted, score_fn, with_loss


def _train(config: Rank4ClassTrainConfig, data: data_lib.PreparedData | None,
           strategy: tf.distribute.Strategy, chief: bool, start: float, directory: run_directory.RunDirectory,
           models: model_reuse.ModelPool | None) -> Rank4ClassTrainResult:
  """The run in `directory`, locked and compared: each part of `config` goes where it is read."""
  run, outputs = config.run, config.outputs
  tf.keras.utils.set_random_seed(run.seed)
  phases: dict[str, float] = {}
  data, texts = _prepare_data(config.data, data, phases)
  if few_shot_rule.applies(run, config.data, config.model, data):
    return _finish(config.model_dir, directory, chief, strategy,
                   _few_shot(config.model_dir, config.data, config.model, run, config.outputs,
                             config.optimizer, data, strategy, chief, start, phases))
  setup = resolve_model_setup(config.model, config.data, data)
  model_config, num_train = setup.model_config, (len(data.train) if run.train_steps is None else None)
  ks = tuple(model_config.metric_ks)
  baselines = run_outputs.BackgroundBaselines(data, ks) if outputs.baselines and chief else None
  total_steps = config.total_steps(num_train)
  notes = _data_notes(data, total_steps * run.batch_size, config.optimizer.learning_rate, setup.start_line())
  if chief and run.verbose and notes:
    say(notes)

  def build(part: model_lib.Rank4ClassConfig, data: data_lib.PreparedData) -> model_lib.Rank4ClassModel:
    part = with_class_text_embeddings(part, config.data.embedding_cache_dir, data.class_names)
    return build_compiled_model(part, data, strategy, run, config.optimizer, total_steps)

  model, pooled = _build_model(build, model_config, data, strategy, models, _pool_key(config, data, strategy))
  engine = engine_config(config.model_dir, run, total_steps, config.min_steps(num_train),
                         config.chooses_length, setup.starts_fitted)
  fitted, score_fn, with_loss = _fit_trained_model(run, model_config.loss.type, data, strategy, chief, model,
                                                   pooled, engine, ks)
  phases["loop"] = fitted.loop_seconds
  trained_score_fn = score_fn  # The pooled model's: kept for the next run on it whichever model is chosen.
  trained_data = data  # The zero-shot model trains on the run's data whichever model is kept.
  candidates, plain = _candidates(config.model, config.data, model_config, data, texts,
                                  outputs.linear_candidate and fitted.best_value is not None)
  (model, score_fn, data), choice = _choose_model(run, config.model_dir, candidates, plain, build,
                                                  (model, score_fn, data), fitted, engine, strategy, chief,
                                                  ks, with_loss, phases)
  calibration, calibration_summary = run_outputs.calibrate(run, outputs, data, strategy, chief, model,
                                                           score_fn, phases)
  if pooled is not None:
    pooled.extras["score_fn"] = trained_score_fn
    models.release(pooled)
  export_dir = run_outputs.export(config.model_dir, outputs, config.data, data, strategy, chief, model,
                                  calibration, phases)
  test_report = (run_outputs.test_report(config.model_dir, run.batch_size, data, strategy, chief, model,
                                         score_fn, ks, phases) if outputs.evaluate_test else None)
  zero_shot = _zero_shot(config.model_dir, run, outputs, config.data, build, setup, trained_data, engine,
                         strategy, chief, phases)
  baseline_reports = (run_outputs.baseline_reports(run.verbose, baselines, test_report, fitted, phases)
                      if baselines is not None else None)
  result = Rank4ClassTrainResult(
      model_dir=config.model_dir, export_dir=export_dir, steps=fitted.steps, test_report=test_report,
      resumed_from_step=fitted.resumed_from_step, best_metric=run.best_metric, best_step=fitted.best_step,
      best_value=fitted.best_value, validation_metrics=_chosen_metrics(choice, fitted),
      history=fitted.history, seconds=time.time() - start, examples_per_second=fitted.examples_per_second,
      input_kind=data.input_kind, embedded_texts=data.embedded_texts, computed_texts=data.computed_texts,
      phase_seconds=phases, baselines=baseline_reports, calibration=calibration_summary, choice=choice,
      zero_shot=zero_shot, stopped_early=fitted.stopped_early)
  return _finish(config.model_dir, directory, chief, strategy, result)


def _few_shot(model_dir: str, data_config: data_lib.DataConfig, model: model_lib.Rank4ClassConfig,
              run: RunConfig, outputs: OutputsConfig, optimizer: OptimizerConfig, data: data_lib.PreparedData,
              strategy: tf.distribute.Strategy, chief: bool, start: float,
              phases: dict[str, float]) -> Rank4ClassTrainResult:
  """The run of a few labelled rows per class (`few_shot_run.train_few_shot`)."""
  def build(m: model_lib.Rank4ClassConfig, d: data_lib.PreparedData) -> model_lib.Rank4ClassModel:
    m = with_class_text_embeddings(m, data_config.embedding_cache_dir, d.class_names)
    return build_compiled_model(m, d, strategy, run, optimizer, 1)

  return few_shot_run.train_few_shot(model_dir, data_config, model, run, outputs, data, build, strategy,
                                     chief, start, phases)


def _finish(model_dir: str, directory: run_directory.RunDirectory, chief: bool,
            strategy: tf.distribute.Strategy, result: Rank4ClassTrainResult) -> Rank4ClassTrainResult:
  """Writes the finished run's result into its directory and returns it."""
  directory.finish(result.to_dict())
  # Multi-worker non-chiefs wrote their (collective) checkpoints and exports to scratch: drop it.
  if not chief:
    shutil.rmtree(distribute.output_dir(model_dir, strategy), ignore_errors=True)
  return result


def _zero_shot(model_dir: str, run: RunConfig, outputs: OutputsConfig, data_config: data_lib.DataConfig,
               build: BuildFn, setup: ModelSetup, data: data_lib.PreparedData, engine: trainer.EngineConfig,
               strategy: tf.distribute.Strategy, chief: bool, phases: dict[str, float]) -> dict | None:
  """The zero-shot model's record (`zero_shot_choice.train_zero_shot`) on the run's own data, None when it
  has none (`zero_shot_choice.held_out_of_run`)."""
  held_out = zero_shot_choice.held_out_of_run(outputs.zero_shot_holdout, run.seed, setup, data, strategy)
  if not len(held_out):
    return None
  return zero_shot_choice.train_zero_shot(model_dir, run, outputs, data_config, build, setup.model_config,
                                          data, held_out, engine, strategy, chief, phases)


def _candidates(configured: model_lib.Rank4ClassConfig, data_config: data_lib.DataConfig,
                model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData,
                texts: data_lib.PreparedData | None,
                compares: bool) -> tuple[list[model_choice.Candidate], ModelSetup | None]:
  """The linear candidates, and `model_choice.without_class_texts`; nothing without `compares`."""
  if not compares:
    return [], None
  candidates = model_choice.linear_candidates_of(configured, data_config, model_config, data, texts)
  return candidates, model_choice.without_class_texts(configured, data_config, model_config, data, candidates)


def _choose_model(run: RunConfig, model_dir: str, candidates: list[model_choice.Candidate],
                  plain: ModelSetup | None, build: BuildFn, trained: model_choice.Chosen,
                  fitted: trainer.FitResult, engine: trainer.EngineConfig, strategy: tf.distribute.Strategy,
                  chief: bool, ks: tuple[int, ...], with_loss: bool,
                  phases: dict[str, float]) -> tuple[model_choice.Chosen, dict | None]:
  """The trained model or a linear candidate, chosen on validation (`model_choice.choose_on_validation`), or
  with `plain` the same run without its class texts (`_with_or_without_class_texts`)."""
  if plain is not None:
    return _with_or_without_class_texts(model_dir, run, plain, build, trained, fitted, engine, strategy,
                                        chief, ks, phases)

  def validate(score_fn: served.ScoreFn, model: model_lib.Rank4ClassModel,
               data: data_lib.PreparedData) -> dict[str, float]:
    with strategy.scope():
      return make_validate_fn(score_fn, model, data, ks, max(run.batch_size, 256), with_loss=with_loss)(model)

  return model_choice.choose_on_validation(run, build, validate, candidates, strategy, trained, fitted,
                                           model_dir, phases)


def _with_or_without_class_texts(model_dir: str, run: RunConfig, plain: ModelSetup, build: BuildFn,
                                 trained: model_choice.Chosen, fitted: trainer.FitResult,
                                 engine: trainer.EngineConfig, strategy: tf.distribute.Strategy, chief: bool,
                                 ks: tuple[int, ...],
                                 phases: dict[str, float]) -> tuple[model_choice.Chosen, dict]:
  """The run's model of class texts, or the same run without them (`plain`) trained in `<model_dir>/
  without_class_texts` (resumed like the run), chosen on validation (`model_choice.choose_class_texts`); that
  training and the choice are `phases["choice"]`."""
  start, data = time.perf_counter(), trained[2]
  run_dir = os.path.join(model_dir, zero_shot_lib.RUN_WITHOUT_CLASS_TEXTS_DIR)
  if chief and run.verbose:
    say(f"The same run without class texts (one-hot classes), trained to compare on validation ({run_dir}).")
  model = build(plain.model_config, data)
  alternative_engine = dataclasses.replace(engine, run_dir=run_dir, validate_start=plain.starts_fitted)
  fitted_plain, score_fn, _ = _fit_trained_model(run, plain.model_config.loss.type, data, strategy, chief,
                                                 model, None, alternative_engine, ks, announce=False)
  chosen, record = model_choice.choose_class_texts(run, trained, fitted, (model, score_fn, data),
                                                   fitted_plain, strategy)
  phases["choice"] = time.perf_counter() - start
  return chosen, record


def _chosen_metrics(choice: dict | None, fitted: trainer.FitResult) -> dict[str, float]:
  """The validation metrics of the exported model: a chosen regression's, else the trained model's best."""
  if choice is not None and choice["chosen"] != TRAINED_CHOICE:
    return choice["metrics"][choice["chosen"]]
  return fitted.best_metrics
