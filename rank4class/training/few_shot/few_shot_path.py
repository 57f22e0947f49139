"""The few-shot model: the logistic regression of the frozen text embeddings centred at the classes' texts,
chosen by cross-validation on the labelled rows and packed as a Rank4Class model.

Each instance is its unit-length MiniLM embedding u(x) scaled by sqrt(d) (coordinates of about unit size, as
the standardised inputs of the toolkit's other regressions), and each class has the unit embedding t_c of its
text. The prior classifier is the nearest class text: logits `cos(u(x), t_c) / COSINE_TOWERS_TEMPERATURE`,
the cosine towers' start (`model_setup.with_cosine_towers`). Each head of the path
(`linear_path.fit_path`) is `x . (p P_c + W_c) + b_c` with the L2 penalty `||W||^2 / (2 C n)` on W alone: a
MAP estimate centred at p times the prior. p = 0 is plain logistic regression, C -> 0 with p = 1 the nearest
class text (its bias aside); p between keeps a share of the untrained cosine, as the zero-shot model's
untrained share does. The heads are trained by the engine in one model, every fold of the stratified
cross-validation as a group of extra heads (`linear_path.HeadsSoftmaxLoss` with folds), and the head of the
lowest out-of-fold log-loss is kept (a tie: the simplest, smallest C, then the largest prior weight: the
nearest class text first). Not the one-standard-error rule of the toolkit's other choices: at 8 rows per class
one standard error spans the whole path (2016 tweets, 16 rows: 0.26 nats), so the rule kept the most
regularised head, the nearest class text, even where its log-loss (0.78) was worse than the uniform guess's
(0.69) and its test accuracy 52 % against plain logistic regression's 65 %.

  features = instance_features(embeddings)          # sqrt(d) u(x), [n, d]
  prior = class_text_prior(class_vectors)           # [d, C]: features @ prior = cos / 0.05
  path = fit(features, labels, prior, folds=5, ...)  # linear_path.PathResult
"""

import dataclasses
import math

import numpy as np
import tensorflow as tf

from rank4class.modeling import model as model_lib
from rank4class.training import linear_path
from rank4class.training.model_choice import as_linear
from rank4class.training.model_setup import COSINE_TOWERS_TEMPERATURE

# Above `linear_path.PathConfig.full_batch_rows`, the 100 epochs of 128 rows the few-shot table was measured
# with (docs/RESULTS.md): the usual path's 1,024-row batches would cost 8 times the row passes for 135
# classes at 64 rows a class, and are untried there.
FEW_SHOT_EPOCHS, FEW_SHOT_BATCH_SIZE = 100, 128
# The path: C (the penalty `||W||^2 / (2 C n)` on the departure from the prior; 1e-4: the prior kept) and the
# prior weight p (0: plain logistic regression; 2: the cosines at half the towers' temperature).
INVERSE_REGULARIZATION = (1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0)
PRIOR_WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0)
# What the chosen head is, in words (`candidate_of`).
NEAREST_CLASS_TEXT = "nearest_class_text"
PRIOR_REGRESSION = "class_text_prior_regression"
PLAIN_REGRESSION = "logistic_regression"
LABELS = {NEAREST_CLASS_TEXT: "the nearest class text",
          PRIOR_REGRESSION: "the logistic regression centred at the class texts",
          PLAIN_REGRESSION: "the logistic regression of the frozen embeddings"}


def _unit(x: np.ndarray) -> np.ndarray:
  x = np.asarray(x, np.float64).reshape(len(x), -1)
  return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def instance_features(embeddings: np.ndarray) -> np.ndarray:
  """`sqrt(d) u(x)`: each embedding at unit length times sqrt(d), float32 `[n, d]`."""
  unit = _unit(embeddings)
  return (unit * math.sqrt(unit.shape[1])).astype(np.float32)


def class_text_prior(class_vectors: np.ndarray, temperature: float = COSINE_TOWERS_TEMPERATURE) -> np.ndarray:
  """The prior `P` `[d, num_classes]`: `instance_features(x) @ P` is `cos(x, t_c) / temperature`."""
  unit = _unit(class_vectors)
  return (unit.T / (temperature * math.sqrt(unit.shape[1]))).astype(np.float32)


def prior_heads(inverse_regularization: tuple[float, ...] = INVERSE_REGULARIZATION,
                prior_weights: tuple[float, ...] = PRIOR_WEIGHTS) -> list[linear_path.Head]:
  """A head per (C, p), the simplest first: smallest C, then the largest prior weight (at C -> 0 the head
  with the prior is the nearest class text, the one without it the class frequencies)."""
  return [linear_path.Head(c, 1.0, p) for c in sorted(inverse_regularization)
          for p in sorted(prior_weights, reverse=True)]


def fit(features: np.ndarray, labels: np.ndarray, prior: np.ndarray, folds: int, seed: int, run_dir: str,
        strategy: tf.distribute.Strategy | None = None,
        heads: list[linear_path.Head] | None = None) -> linear_path.PathResult:
  """The path on every labelled row, the head of the lowest mean log-loss in `folds`-fold stratified
  cross-validation (`linear_path.stratified_folds` with `seed`; the first on a tie), with its out-of-fold
  scores (`PathResult.out_of_fold_scores`)."""
  labels = np.asarray(labels, np.int64)
  heads = heads or prior_heads()
  x = {linear_path.DENSE_KEY: features}
  inputs = linear_path.PathInputs(x, labels, x, labels, prior.shape[1], prior=prior)
  config = linear_path.PathConfig(folds=folds, cross_validate_below=len(labels) + 1, seed=seed,
                                  choose_lowest=True, epochs=FEW_SHOT_EPOCHS, batch_size=FEW_SHOT_BATCH_SIZE)
  path = linear_path.fit_path(inputs, heads, config, run_dir, strategy)
  if path.out_of_fold_scores is None:  # `fit_path` cross-validates only with 2 rows a fold or more.
    raise ValueError(f"few-shot path: {len(labels)} labelled rows are too few for {folds}-fold "
                     "cross-validation; without it the head would be chosen on the rows it trained on")
  path.fit["chosen_by"] = f"{folds}-fold cross-validation, lowest log-loss"
  return path


def candidate_of(head: linear_path.Head, heads: list[linear_path.Head]) -> str:
  """The chosen head in words: the nearest class text (the prior at the smallest C), the regression centred
  at the class texts, or the plain regression (p = 0)."""
  if head.prior_weight == 0:
    return PLAIN_REGRESSION
  smallest = min(h.inverse_regularization for h in heads)
  return NEAREST_CLASS_TEXT if head.inverse_regularization == smallest else PRIOR_REGRESSION


def packed_config(model_config: model_lib.Rank4ClassConfig, path: linear_path.PathResult,
                  dim: int) -> model_lib.Rank4ClassConfig:
  """The Rank4Class model that scores as the chosen head: the instance tower `x + MLP(x)` of unit length with
  its output layer at zeros (u(x), as the cosine towers start), one-hot class embeddings `sqrt(d) (p P_c +
  W_c)` and biases `b_c`, the dot interaction (`model_choice.as_linear`): it exports and serves as any
  one-hot model."""
  linear = as_linear(model_config)
  encoder = linear.instance_encoder
  mlp = dataclasses.replace(encoder.mlp, residual=True, l2_normalize=True, untrained_share=0.0)
  one_hot = dataclasses.replace(linear.class_encoder.one_hot,
                                initial_embeddings=(path.weights * math.sqrt(dim)).astype(np.float32),
                                initial_bias=path.bias.astype(np.float32))
  return dataclasses.replace(linear, instance_encoder=dataclasses.replace(encoder, mlp=mlp),
                             class_encoder=dataclasses.replace(linear.class_encoder, one_hot=one_hot))


def choice_record(path: linear_path.PathResult, heads: list[linear_path.Head], folds: int,
                  rows: int, class_texts_from: str) -> dict:
  """The choice's record (`Rank4ClassTrainResult.choice`): the chosen candidate and head, and the
  out-of-fold log-loss of the chosen head, of the nearest class text's head and of the best plain
  regression, each with its standard error."""
  entries = path.fit["path"]
  chosen = heads.index(path.head)

  def entry(i: int) -> dict:
    return {"inverse_regularization": entries[i]["inverse_regularization"],
            "prior_weight": entries[i]["prior_weight"], "log_loss": entries[i]["log_loss"],
            "standard_error": entries[i]["standard_error"]}

  smallest = min(h.inverse_regularization for h in heads)
  nearest = [i for i, h in enumerate(heads) if h.inverse_regularization == smallest and h.prior_weight == 1.0]
  plain = [i for i, h in enumerate(heads) if h.prior_weight == 0]
  compared = {PLAIN_REGRESSION: entry(min(plain, key=lambda i: entries[i]["log_loss"])) if plain else None,
              NEAREST_CLASS_TEXT: entry(nearest[0]) if nearest else None}
  return {"few_shot": True, "metric": "log_loss", "mode": "min", "rule": "lowest",
          "chosen": candidate_of(path.head, heads), "head": entry(chosen), "folds": folds, "rows": rows,
          "class_texts": class_texts_from, "compared": compared, "steps": path.fit["steps"],
          "converged": path.fit["converged"], "gradient_ratio": path.fit["gradient_ratio"],
          "duality_gap": path.fit["duality_gap"], "certified": path.fit["certified"],
          "values": {"chosen": entries[chosen]["log_loss"]}}


def choice_line(record: dict) -> str:
  """"Chosen by cross-validation (few-shot: 64 labelled rows, the 8 class names as their texts; 5-fold,
  the lowest log-loss; +- its paired standard error to the lowest): the logistic regression centred at the
  class texts (C=1, prior weight 1) 0.373, against the logistic regression of the frozen embeddings
  (C=1) 0.529 +- 0.045 and the nearest class text (C=0.0001, prior weight 1) 1.045 +- 0.102."."""
  def described(name: str, values: dict, error: bool = True) -> str:
    weight = f", prior weight {values['prior_weight']:g}" if values["prior_weight"] else ""
    return (f"{LABELS[name]} (C={values['inverse_regularization']:g}{weight}) {values['log_loss']:.3f}"
            + (f" +- {values['standard_error']:.3f}" if error else ""))

  others = [described(name, values) for name, values in record["compared"].items()
            if values is not None and values != record["head"]]
  converged = linear_path.convergence_note(record)
  return (f"Chosen by cross-validation (few-shot: {record['rows']:,} labelled rows, {record['class_texts']}; "
          f"{record['folds']}-fold, the lowest log-loss; +- its paired standard error to the lowest): "
          f"{described(record['chosen'], record['head'], error=False)}{converged}"
          + (", against " + " and ".join(others) if others else "") + ".")
