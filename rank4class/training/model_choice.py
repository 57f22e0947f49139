"""The model a run keeps, chosen on the validation split: its trained model or one of the linear candidates
(`linear_candidates`), by the one-standard-error rule over the validation rows, so that a tie or a difference
within noise keeps the simpler model."""

import dataclasses
import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from rank4class.inference import served
from rank4class.modeling import class_encoders, class_sampling, interactions
from rank4class.modeling import encoders as encoders_lib
from rank4class.modeling import model as model_lib
from rank4class.training import linear_candidates, linear_path
from rank4class.training import training_data as data_lib
from rank4class.training.model_setup import (
  ModelSetup,
  has_class_ids,
  logistic_regression_applies,
  resolve_model_config,
  resolve_model_setup,
)
from rank4class.training.train_config import (
  AUTO_ENCODER,
  LINEAR_CHOICE,
  TFIDF_LINEAR_CHOICE,
  TRAINED_CHOICE,
  WITHOUT_CLASS_TEXTS_CHOICE,
  RunConfig,
  metric_mode,
)
from rank4class_engine.loop import trainer
from rank4class_engine.statistics import one_standard_error

# A linear candidate: (`LINEAR_CHOICE` or `TFIDF_LINEAR_CHOICE`, the data it reads, the model config its fit
# is packed into).
Candidate = tuple[str, data_lib.PreparedData, model_lib.Rank4ClassConfig]
# The trained model (or a candidate): (the model, its score function, the data it reads).
Chosen = tuple[model_lib.Rank4ClassModel, served.ScoreFn, data_lib.PreparedData]
# Builds and compiles a model of a config on data (`train.build_compiled_model` with the run's settings).
BuildFn = Callable[[model_lib.Rank4ClassConfig, data_lib.PreparedData], model_lib.Rank4ClassModel]
# (score function, model, data) -> the validation's metrics (`train.make_validate_fn`, the run's settings).
ValidateFn = Callable[[served.ScoreFn, model_lib.Rank4ClassModel, data_lib.PreparedData], dict]
# The simplest first: the regressions, then the trained model, which the one-standard-error rule keeps only
# when it is better beyond the noise; between the regressions (one family) the better one, a tie the earlier.
SIMPLICITY = (LINEAR_CHOICE, TFIDF_LINEAR_CHOICE, TRAINED_CHOICE)
_LABELS = {TRAINED_CHOICE: "the trained model",
           LINEAR_CHOICE: "the logistic regression of the model's inputs",
           TFIDF_LINEAR_CHOICE: "the logistic regression of TF-IDF beside the frozen embeddings",
           WITHOUT_CLASS_TEXTS_CHOICE: "the same run without the class texts (one-hot classes)"}


def linear_candidates_of(configured: model_lib.Rank4ClassConfig, data_config: data_lib.DataConfig,
                         model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData,
                         texts: data_lib.PreparedData | None) -> list[Candidate]:
  """The logistic regressions validated beside the trained model (`model_config`, resolved from the
  `configured` one), each packed `as_linear`: of the model's own inputs (`LINEAR_CHOICE`) where it applies,
  and with text mode "auto" of TF-IDF beside the frozen embeddings (`TFIDF_LINEAR_CHOICE`, on `texts`, the
  texts with their embeddings)."""
  linear = as_linear(model_config)
  candidates = [] if logistic_regression_applies(linear, data) else [(LINEAR_CHOICE, data, linear)]
  if texts is not None:
    hybrid = _hybrid_model_config(as_linear(configured), data_config, texts)
    if not logistic_regression_applies(hybrid, texts):
      candidates.append((TFIDF_LINEAR_CHOICE, texts, hybrid))
  return candidates


def as_linear(model_config: model_lib.Rank4ClassConfig) -> model_lib.Rank4ClassConfig:
  """The config a linear candidate is packed into: the run's instance encoder and loss, with one-hot class
  embeddings and biases, the dot interaction, full class lists and no logit adjustment, whatever the run
  trains (class texts, latent cross, concat, sampled lists): every such run gets the logistic regression of
  its inputs as a candidate."""
  return dataclasses.replace(
      model_config, class_encoder=class_encoders.ClassEncoderConfig(init=class_encoders.RANDOM_INIT),
      interaction=interactions.InteractionConfig(type=interactions.DOT),
      sampling=class_sampling.SamplingConfig(), logit_adjustment=0.0, class_priors=None)


def _hybrid_model_config(configured: model_lib.Rank4ClassConfig, data_config: data_lib.DataConfig,
                         texts: data_lib.PreparedData) -> model_lib.Rank4ClassConfig:
  """The model config of the hybrid encoder on `texts` (TF-IDF vocabulary learned from the training texts),
  its TF-IDF weighed as TF-IDF + LR usually is (sublinear term frequency, the n-grams of one text left out
  from 50 texts on: `encoders.min_document_frequency`)."""
  encoder = configured.instance_encoder
  tfidf = dataclasses.replace(encoder.tfidf, sublinear_tf=True,
                              min_df=encoders_lib.min_document_frequency(len(texts.train)))
  auto = dataclasses.replace(configured, instance_encoder=dataclasses.replace(
      encoder, type=AUTO_ENCODER, tfidf=tfidf))
  return resolve_model_config(auto, data_config, texts)


def without_class_texts(configured: model_lib.Rank4ClassConfig, data_config: data_lib.DataConfig,
                        model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData,
                        candidates: list[Candidate]) -> ModelSetup | None:
  """The setup of the run as it would be without its class texts (`configured` with the default one-hot class
  encoder, resolved for `data`: from `model_setup.AUTO_CENTROID_CLASSES` classes on it starts at the class
  centroids), for a run whose classes are texts (`model_config`, resolved) on fixed vectors (frozen text
  embeddings or features: a second training costs what the first did, not a second fine-tuning) with class
  ids and no linear `candidates` to stand for the run without them; else None."""
  if (model_config.class_encoder.type != class_encoders.METADATA or candidates
      or data.input_kind not in (data_lib.EMBEDDING_INPUT, data_lib.DENSE_INPUT)
      or not has_class_ids(data.train)):
    return None
  plain = dataclasses.replace(configured, class_encoder=class_encoders.ClassEncoderConfig())
  return resolve_model_setup(plain, data_config, data)


def choose_class_texts(run: RunConfig, trained: Chosen, fitted: trainer.FitResult, alternative: Chosen,
                       alternative_fit: trainer.FitResult,
                       strategy: tf.distribute.Strategy) -> tuple[Chosen, dict]:
  """The trained model of a run whose classes are texts, or the same run trained without them
  (`without_class_texts`), chosen on the validation rows by `run.best_metric` row by row: the model of the
  class texts is kept unless the other is better beyond one paired standard error
  (`one_standard_error.choose`), so that a run's class texts never cost it more than the noise. For a metric
  without a per-row form (the loss), the class texts are kept unless the other's value is better.

  Returns:
    ((the chosen model, its score function, the data it reads), the choice's record for
    `Rank4ClassTrainResult.choice`).
  """
  names, models, fits = (TRAINED_CHOICE, WITHOUT_CLASS_TEXTS_CHOICE), (trained, alternative), (fitted,
                                                                                               alternative_fit)
  record = {"metric": run.best_metric, "mode": metric_mode(run.best_metric), "chosen": TRAINED_CHOICE,
            "class_texts": True, "trained_step": fitted.best_step,
            "without_class_texts_step": alternative_fit.best_step,
            "values": {name: fit.best_value for name, fit in zip(names, fits, strict=True)}, "fits": {},
            "metrics": {name: dict(fit.best_metrics) for name, fit in zip(names, fits, strict=True)}}
  try:
    losses = _validation_losses(run, list(models), strategy)
  except ValueError:  # No per-row form: the class texts unless the other's value is better.
    sign = 1.0 if record["mode"] == "min" else -1.0
    values = [sign * record["values"][name] for name in names]
    record.update(chosen=names[1] if values[1] < values[0] else names[0], rule="best value")
  else:
    choice = one_standard_error.choose(losses)
    record.update(chosen=names[choice.index], rule="one standard error", rows=choice.rows,
                  best=names[choice.best], per_row_means=dict(zip(names, choice.means, strict=True)),
                  standard_errors=dict(zip(names, choice.standard_errors, strict=True)))
  return models[names.index(record["chosen"])], record


def _validation_losses(run: RunConfig, models: list[Chosen], strategy: tf.distribute.Strategy) -> np.ndarray:
  """Each model's per-row loss of `run.best_metric` on its validation rows, `[rows, models]`.

  Raises:
    ValueError: for a metric without a per-row form (the loss).
  """
  batch = max(run.batch_size, 256)
  with strategy.scope():  # As the validations called the score functions: no new trace.
    return np.stack([one_standard_error.per_row_metric_losses(
        validation_ranks(score_fn, data, batch), run.best_metric) for _, score_fn, data in models], axis=1)


def validation_ranks(score_fn: served.ScoreFn, data: data_lib.PreparedData, batch_size: int) -> np.ndarray:
  """The 0-based rank of each validation row's class under `score_fn` (classes scoring strictly higher)."""
  ranks = []
  for x, y in data.validation.make_dataset(batch_size, shuffle=False, repeat=False, seed=0):
    ranks.append(served.strictly_higher_ranks(score_fn(x).numpy(), np.reshape(y.numpy(), [-1])))
  return np.concatenate(ranks)


def _fit_record(fit: dict) -> dict:
  return {k: (float(v) if isinstance(v, (np.floating, float)) else v) for k, v in fit.items()}


def choose_on_validation(run: RunConfig, build: BuildFn, validate: ValidateFn, candidates: list[Candidate],
                         strategy: tf.distribute.Strategy, trained: Chosen, fitted: trainer.FitResult,
                         scratch: str, phases: dict[str, float]) -> tuple[Chosen, dict | None]:
  """The trained model (its best step) or one of the logistic regressions of `candidates`
  (`linear_candidates.logistic_regression_model`, trained by the engine on the training split), chosen on the
  validation split by `run.best_metric` row by row: the best regression, unless the trained model is better
  beyond one paired standard error (`one_standard_error.choose`; a tie or a difference within noise keeps the
  simpler model). For a metric without a per-row form (the loss), the best value, the trained model on a tie.
  Only the validation split chooses.

  Returns:
    ((the chosen model, its score function, the data it reads), the choice's record for
    `Rank4ClassTrainResult.choice`, None without candidates); its time is `phases["choice"]`.
  """
  if not candidates:
    return trained, None
  choice_start = time.perf_counter()
  record = {"metric": run.best_metric, "mode": metric_mode(run.best_metric), "chosen": TRAINED_CHOICE,
            "trained_step": fitted.best_step, "values": {TRAINED_CHOICE: fitted.best_value}, "fits": {},
            "metrics": {}}
  models = {TRAINED_CHOICE: trained}
  for name, data, base in candidates:
    linear_config, fit = linear_candidates.logistic_regression_model(
        base, data, linear_path.scratch_dir(scratch, strategy, f"linear_{name}"), strategy,
        linear_path.PathConfig(seed=run.seed))
    linear = build(linear_config, data)
    score_fn = served.make_score_fn(linear, data_lib.input_spec(data.validation), strategy)
    metrics = validate(score_fn, linear, data)
    record["values"][name] = metrics.get(run.best_metric)
    record["metrics"][name] = metrics
    record["fits"][name] = _fit_record(fit)
    models[name] = (linear, score_fn, data)
  names = [name for name in SIMPLICITY if name in models]
  try:
    losses = _validation_losses(run, [models[name] for name in names], strategy)
  except ValueError:  # No per-row form: the best value, the trained model on a tie.
    sign = 1.0 if record["mode"] == "min" else -1.0
    finite = [n for n in names if record["values"][n] is not None and np.isfinite(record["values"][n])]
    best = min(finite, key=lambda n: (sign * record["values"][n], n != TRAINED_CHOICE))
    record.update(chosen=best, rule="best value")
  else:
    record.update(_one_standard_error_record(names, losses, _cross_validated_order(names, record["fits"])))
  phases["choice"] = time.perf_counter() - choice_start
  return models[record["chosen"]], record


def _cross_validated_order(names: list[str], fits: dict[str, dict]) -> dict[str, float] | None:
  """Each regression's cross-validated log-loss (its chosen head's, out of fold on the training rows) when
  every regression of `names` was chosen by the same cross-validation over the same rows; else None."""
  linear = {name: fits[name] for name in names if name != TRAINED_CHOICE}
  if not linear or any(not fit["chosen_by"].endswith("cross-validation") or "choice_log_loss" not in fit
                       for fit in linear.values()):
    return None
  if len({(fit["chosen_by"], fit["choice_rows"]) for fit in linear.values()}) > 1:
    return None
  return {name: fit["choice_log_loss"] for name, fit in linear.items()}


def _one_standard_error_record(names: list[str], losses: np.ndarray,
                               cross_validated: dict[str, float] | None = None) -> dict:
  """The choice between the regressions and the trained model: the regressions are one family, and the best
  of them stands for it (a tie keeps the earlier in `SIMPLICITY`): by `cross_validated` log-loss where given
  (below 300 validation rows each regression's C was chosen by cross-validation on the training rows, many
  more rows than the validation's), else by its per-row mean on the validation rows. The family is kept unless
  the trained model is better beyond one paired standard error (`one_standard_error.choose`)."""
  means = losses.mean(axis=0)
  linear = [i for i, name in enumerate(names) if name != TRAINED_CHOICE]
  order = (lambda i: (cross_validated[names[i]], i)) if cross_validated else (lambda i: (means[i], i))
  columns = [min(linear, key=order), names.index(TRAINED_CHOICE)]
  choice = one_standard_error.choose(losses[:, columns])
  overall = one_standard_error.choose(losses)  # Each model's mean and paired standard error to the best.
  record = {"chosen": names[columns[choice.index]], "rule": "one standard error", "rows": choice.rows,
            "best": names[columns[choice.best]],
            "per_row_means": dict(zip(names, overall.means, strict=True)),
            "standard_errors": dict(zip(names, overall.standard_errors, strict=True))}
  if cross_validated and len(linear) > 1:
    record["regressions_by"] = "cross-validated log-loss"
  return record


def choice_line(choice: dict) -> str:
  """"Chosen on validation (ndcg_5, higher is better; 490 rows, the trained model kept only when better beyond
  one standard error (it is better here, within the noise)): the logistic regression of the model's inputs
  (C=0.1 by validation log-loss) 0.9664, against the trained model (step 700) 0.9671."."""
  def described(name: str) -> str:
    value = choice["values"][name]
    shown = "-" if value is None else f"{value:.4f}"
    if name == TRAINED_CHOICE and choice.get("class_texts"):
      return f"the trained model of the class texts (step {choice['trained_step']}) {shown}"
    if name in (TRAINED_CHOICE, WITHOUT_CLASS_TEXTS_CHOICE):
      step = choice["trained_step" if name == TRAINED_CHOICE else "without_class_texts_step"]
      return f"{_LABELS[name]} (step {step}) {shown}"
    fit = choice["fits"][name]
    weight = f", embedding weight {fit['embedding_weight']:g}" if "embedding_weight" in fit else ""
    converged = linear_path.convergence_note(fit)
    how = f" by {fit['chosen_by']}" if "chosen_by" in fit else ""
    if choice.get("regressions_by"):
      how += f", its log-loss {fit['choice_log_loss']:.4f}"
    return f"{_LABELS[name]} (C={fit['inverse_regularization']:g}{how}{weight}{converged}) {shown}"

  better = "lower" if choice["mode"] == "min" else "higher"
  how = f"{choice['metric']}, {better} is better"
  kept = ("the class texts' model kept unless the other is better beyond one standard error" if
          choice.get("class_texts") else "the trained model kept only when better beyond one standard error")
  if choice.get("rule") == "one standard error":
    how += f"; {choice['rows']:,} rows, {kept}"
    if choice["chosen"] != choice["best"]:
      how += " (it is better here, within the noise)"
    if choice.get("regressions_by"):
      how += f"; between the regressions, the lower {choice['regressions_by']}"
  others = [described(name) for name in choice["values"] if name != choice["chosen"]]
  return f"Chosen on validation ({how}): {described(choice['chosen'])}, against " + " and ".join(others) + "."
