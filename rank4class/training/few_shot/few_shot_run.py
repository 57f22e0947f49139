"""A few-shot run (`few_shot_rule`): every labelled row trains the regression centred at the classes' texts
(`few_shot_path`), cross-validation chooses, and the chosen model is exported, tested and set beside the
baselines as any run's model is."""

import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from rank4class.inference import served
from rank4class.modeling import model as model_lib
from rank4class.training import linear_path, run_outputs
from rank4class.training import training_data as data_lib
from rank4class.training.few_shot import few_shot_path, few_shot_rule
from rank4class.training.model_setup import resolve_model_config
from rank4class.training.train_config import OutputsConfig, Rank4ClassTrainResult, RunConfig
from rank4class_data.messages import say
from rank4class_encoders import text_embeddings
from rank4class_engine.loop import trainer

# Builds and compiles a model of a config on data (`train.build_compiled_model` with the run's settings).
BuildFn = Callable[[model_lib.Rank4ClassConfig, data_lib.PreparedData], model_lib.Rank4ClassModel]
# `Rank4ClassTrainResult.best_metric` of a few-shot run: the chosen head's out-of-fold log-loss.
CV_METRIC = "cross_validation_log_loss"


def class_texts_of(data: data_lib.PreparedData) -> tuple[list[str], str]:
  """The classes' texts (`data.class_texts`, else the class names, as the metadata class encoder embeds them)
  and where they come from, in words."""
  if data.class_texts is not None:
    return list(data.class_texts), f"{len(data.class_names)} class texts"
  return list(data.class_names), f"the {len(data.class_names)} class names as their texts"


def _start_line(counts: np.ndarray, folds: int, texts_from: str) -> str:
  return (f"Few-shot: {int(np.sum(counts)):,} labelled rows in {len(counts)} classes ({int(np.min(counts))}-"
          f"{int(np.max(counts))} a class, median {float(np.median(counts)):g}); every row trains, no "
          f"validation split; {folds}-fold cross-validation chooses between the nearest class text and the "
          f"logistic regressions centred at it ({texts_from}).")


def train_few_shot(model_dir: str, data_config: data_lib.DataConfig, configured: model_lib.Rank4ClassConfig,
                   run: RunConfig, outputs: OutputsConfig, data: data_lib.PreparedData, build: BuildFn,
                   strategy: tf.distribute.Strategy, chief: bool, start: float,
                   phases: dict[str, float]) -> Rank4ClassTrainResult:
  """The few-shot run in `model_dir` on `data` (its splits as `train` prepared them; `configured` the model
  config as given): the chosen model exported to `<model_dir>/export`, its test report and the baselines
  (fitted on every labelled row). Its calibration is fitted on the chosen head's out-of-fold scores (each row
  scored by the head of the folds that did not hold it), as scikit-learn's `CalibratedClassifierCV(
  ensemble=False)` does: no labelled row is left out of training.

  Returns:
    The run's result (not yet written: `train` finishes the run directory with it).
  """
  data = few_shot_rule.all_rows(data)
  baselines = (run_outputs.BackgroundBaselines(data, tuple(configured.metric_ks))
               if outputs.baselines and chief else None)
  labels = data.train.labels
  counts = few_shot_rule.rows_per_class(labels, len(data.class_names))
  folds = few_shot_rule.fold_count(counts)
  texts, texts_from = class_texts_of(data)
  if chief and run.verbose:
    say(_start_line(counts, folds, texts_from))
  fit_start = time.perf_counter()
  encoder = data_lib.frozen_text_encoder(data_config, data.text_handles)
  prior = few_shot_path.class_text_prior(text_embeddings.embed_texts(texts, encoder,
                                                                     data_config.embedding_cache_dir))
  features = few_shot_path.instance_features(data.train.features)
  heads = few_shot_path.prior_heads()
  scratch = linear_path.scratch_dir(model_dir, strategy, "few_shot_path")
  path = few_shot_path.fit(features, labels, prior, folds, run.seed, scratch, strategy, heads)
  choice = few_shot_path.choice_record(path, heads, folds, len(labels), texts_from)
  model_config = few_shot_path.packed_config(resolve_model_config(configured, data_config, data), path,
                                             features.shape[1])
  model = build(model_config, data)
  score_fn = served.make_score_fn(model, data_lib.input_spec(data.validation), strategy)
  phases["loop"] = time.perf_counter() - fit_start
  calibration, calibration_summary = None, None
  if outputs.calibrate:  # On the chosen head's out-of-fold scores: each row scored by its fold's head.
    calibration_start = time.perf_counter()
    calibration, calibration_summary = run_outputs.calibrate_on(
        path.out_of_fold_scores, labels, "out of fold", run, outputs, data, strategy, score_fn)
    phases["calibration"] = time.perf_counter() - calibration_start
  ks = tuple(model_config.metric_ks)
  export_dir = run_outputs.export(model_dir, outputs, data_config, data, strategy, chief, model, calibration,
                                  phases)
  test_report = (run_outputs.test_report(model_dir, run.batch_size, data, strategy, chief, model,
                                         score_fn, ks, phases) if outputs.evaluate_test else None)
  value = choice["head"]["log_loss"]
  fitted = trainer.FitResult(steps=path.fit["steps"], resumed_from_step=0, best_step=path.fit["steps"],
                             best_value=value, best_metrics={CV_METRIC: value}, history=[],
                             examples_per_second=None, steps_per_execution=1, seconds=phases["loop"])
  baseline_reports = (run_outputs.baseline_reports(run.verbose, baselines, test_report, fitted, phases)
                      if baselines is not None else None)
  return Rank4ClassTrainResult(
      model_dir=model_dir, export_dir=export_dir, steps=fitted.steps, test_report=test_report,
      resumed_from_step=0, best_metric=CV_METRIC, best_step=fitted.best_step, best_value=value,
      validation_metrics={CV_METRIC: value}, history=[], seconds=time.time() - start,
      input_kind=data.input_kind, embedded_texts=data.embedded_texts, computed_texts=data.computed_texts,
      phase_seconds=phases, baselines=baseline_reports, calibration=calibration_summary, choice=choice)
