"""Joachims' RankSVM: a linear SVM on pairwise feature differences, solved to a certified optimum, exported to
Keras.

The primal (Joachims 2002; RankingSVM paper §2.1, §3.4) over the pairwise-transformed set {(x_k, y_k)},
x_k = Φ(q, d_i) - Φ(q, d_j), y_k = ±1, with no intercept:

    minimize_w  J(w) = 1/2 ||w||^2 + C sum_k loss(y_k w·x_k),   loss = hinge max(0, 1 - m) or its square.

This is scikit-learn's `LinearSVC(loss="hinge" | "squared_hinge", fit_intercept=False, C=C)` objective, so the
weights agree with it. By default it is solved by Newton's method in the primal
(`pairwise.ranksvm.ranksvm_solver`, NumPy/SciPy) until the duality gap certifies the weights to `tolerance`;
the pairs stay indices into the standardized rows (`pair_transform.PairDifferences`), so memory is the rows
plus a few numbers per pair. A mini-batch Adam path (`batch_size` set; `tf.data`, C mean_batch(loss) + ||w||^2
/ (2 num_pairs) an unbiased estimate of J / num_pairs) remains as an option; its result gets the same
duality-gap check. Either way the objective and the gap are logged, reported in `RankSVMResult.solver`, and a
run that stops short of the tolerance says so on stderr. Documents are then ranked by rsv(q, d) =
w·standardize(Φ(q, d)) (paper Eq. 2), which `RankSVMScorer` computes.
"""

import dataclasses
import logging
import math
import time

import numpy as np
import tensorflow as tf

from pairwise.ranksvm import pair_transform, ranksvm_solver
from rank4class_data.messages import say
from rank4class_data.ranking.feature_lists import FeatureLists
from rank4class_data.validation import check_choice, check_range

_logger = logging.getLogger(__name__)

LOSS_NAMES = ranksvm_solver.LOSS_NAMES
_LOSS_FNS = {"hinge": tf.keras.losses.hinge, "squared_hinge": tf.keras.losses.squared_hinge}


@dataclasses.dataclass
class RankSVMConfig:
  """Objective and solver of RankSVM.

  Attributes:
    c: SVM regularization trade-off C > 0 (larger C, weaker regularization).
    loss: "hinge" (the SVM, Joachims' loss) or "squared_hinge" (L2-SVM), see `LOSS_NAMES`.
    tolerance: Relative duality gap at which training has converged: gap <= tolerance · 1/2 ||w||^2, which
      bounds the distance to the optimal weights, ||w - w*|| <= sqrt(tolerance) ||w||.
    max_iterations: Newton steps at most; a run that stops there unconverged says so.
    batch_size: None (default) solves by Newton's method; a number trains by mini-batch Adam with this many
      pairs per step instead (then `num_epochs` and the learning rates apply).
    num_epochs: Passes over the pairs in mini-batch training.
    learning_rate: Initial Adam learning rate (mini-batch).
    final_learning_rate: Learning rate at the last mini-batch step (exponential decay in between).
    max_pairs_per_query: If set, each query keeps a uniform random sample of at most this many pairs.
    skip_unpairable_queries: If False, a query with fewer than two documents is an error; else it is skipped.
    seed: Seed of pair sampling, sign flips and shuffling.
  """

  c: float = 1.0
  loss: str = "hinge"
  tolerance: float = 1e-6
  max_iterations: int = 200
  batch_size: int | None = None
  num_epochs: int = 20
  learning_rate: float = 0.05
  final_learning_rate: float = 1e-4
  max_pairs_per_query: int | None = None
  skip_unpairable_queries: bool = False
  seed: int = 0

  def __post_init__(self):
    check_range("c", self.c, 0.0, low_inclusive=False)
    check_choice("loss", self.loss, LOSS_NAMES)
    check_range("tolerance", self.tolerance, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    if self.batch_size is not None:
      check_range("batch_size", self.batch_size, 1)
    for name in ("max_iterations", "num_epochs"):
      check_range(name, getattr(self, name), 1)
    if not 0 < self.final_learning_rate <= self.learning_rate:
      raise ValueError(f"Need 0 < final_learning_rate <= learning_rate, got {self.final_learning_rate} and "
                       f"{self.learning_rate}.")


def _learning_rate(
  config: RankSVMConfig, total_steps: int
) -> tf.keras.optimizers.schedules.LearningRateSchedule:
  return tf.keras.optimizers.schedules.ExponentialDecay(
      config.learning_rate, decay_steps=max(total_steps, 1),
      decay_rate=config.final_learning_rate / config.learning_rate)


def fit_primal_dataset(dataset: tf.data.Dataset, num_pairs: int, num_features: int,
                       config: RankSVMConfig) -> np.ndarray:
  """Minimizes the primal by mini-batch Adam over a dataset of (x [batch, num_features], y [batch]) batches.

  The per-batch loss C mean_batch(loss) + ||w||^2 / (2 num_pairs) is an unbiased estimate of J / num_pairs, so
  the minimizer is the SVM's whatever the batch size; how close the result gets is for
  `ranksvm_solver.certificate` to say.

  Args:
    dataset: Re-iterable batches, e.g. `pair_transform.pair_dataset`.
    num_pairs: Total pairs per epoch.
    num_features: Feature count.
    config: C, loss, epochs and learning rates.

  Returns:
    weights float64 [num_features] after the last step.
  """
  if num_pairs < 1:
    raise ValueError("No pairs to train on.")
  steps_per_epoch = math.ceil(num_pairs / (config.batch_size or num_pairs))
  weights = tf.Variable(tf.zeros([num_features]), name="ranksvm_weights")
  optimizer = tf.keras.optimizers.Adam(_learning_rate(config, config.num_epochs * steps_per_epoch))
  loss_fn = _LOSS_FNS[config.loss]

  @tf.function
  def step(x, y):
    with tf.GradientTape() as tape:
      margins = tf.linalg.matvec(x, weights)
      batch_loss = config.c * tf.reduce_mean(loss_fn(y[:, None], margins[:, None]))
      batch_loss += 0.5 * tf.reduce_sum(tf.square(weights)) / num_pairs
    optimizer.apply_gradients([(tape.gradient(batch_loss, weights), weights)])

  for _ in range(config.num_epochs):
    for x, y in dataset:
      step(x, y)
  return weights.numpy().astype(np.float64)


def solve_pairs(operator: pair_transform.PairDifferences, features: np.ndarray,
                pairs: pair_transform.PairIndices, config: RankSVMConfig) -> tuple[np.ndarray, dict]:
  """Fits w on the pairwise-transformed set by Newton (default) or mini-batch Adam, with a convergence report.

  Args:
    operator: The pairs as a linear operator over `features`.
    features: [num_rows, num_features] the standardized rows (mini-batch batches are gathered from them).
    pairs: The pair indices behind `operator`.
    config: C, loss, tolerance and solver.

  Returns:
    (weights float64 [num_features], report): `ranksvm_solver.SolverResult.summary()` for Newton; for
    mini-batch the same keys, method "minibatch_adam", iterations = Adam steps, and the duality gap of the
    final weights from `ranksvm_solver.certificate`.
  """
  if config.batch_size is None:
    result = ranksvm_solver.solve(operator, config.c, config.loss, config.tolerance, config.max_iterations)
    return result.weights, result.summary()
  start = time.perf_counter()
  dataset = pair_transform.pair_dataset(features.astype(np.float32), pairs, config.batch_size,
                                        shuffle_seed=config.seed)
  weights = fit_primal_dataset(dataset, pairs.num_pairs, operator.num_features, config)
  check = ranksvm_solver.certificate(operator, weights, config.c, config.loss)
  report = {"method": "minibatch_adam", "converged": check.relative_gap <= config.tolerance,
            "iterations": config.num_epochs * math.ceil(pairs.num_pairs / config.batch_size),
            "primal_objective": check.primal_objective, "dual_objective": check.dual_objective,
            "duality_gap": check.duality_gap, "relative_gap": check.relative_gap,
            "tolerance": config.tolerance, "smoothing": None, "seconds": time.perf_counter() - start}
  _logger.info("RankSVM mini-batch Adam (%s, C=%g): %d steps, primal objective %.10g, duality gap %.3g "
               "(relative %.3g).", config.loss, config.c, report["iterations"], check.primal_objective,
               check.duality_gap, check.relative_gap)
  return weights, report


def unconverged_warning(report: dict) -> str | None:
  """The one terminal line of a solver report that missed its tolerance (None when it converged)."""
  if report["converged"]:
    return None
  if report["method"] == "newton":
    how = f"after {report['iterations']} Newton iteration(s) (raise `max_iterations`, or `tolerance`)"
  else:
    how = (f"after {report['iterations']} mini-batch Adam steps (leave `batch_size` unset for the Newton "
           "solver, or raise `num_epochs`)")
  return (f"RankSVM warning: not converged {how}: relative duality gap {report['relative_gap']:.3g} > "
          f"tolerance {report['tolerance']:.3g}; primal objective {report['primal_objective']:.10g}, duality "
          f"gap {report['duality_gap']:.3g}; all that is certified is ||w - w*|| <= "
          f"{math.sqrt(report['relative_gap']):.3g} ||w||.")


@tf.keras.utils.register_keras_serializable(package="pairwise")
class RankSVMScorer(tf.keras.layers.Layer):
  """Scores feature vectors: rsv = w · (Φ - mean) / scale (RankingSVM paper Eq. 2).

  A Dense(1, use_bias=False) over standardized features: the standardization is part of the model so it
  scores raw Φ(q, d) rows. Subtracting the mean shifts every score by the same constant and leaves rankings
  unchanged; it only keeps the scores centred.

  Example:
    scorer = RankSVMScorer(["bm25(text)", "embedding(text)"], [0.0, 0.0], [1.0, 2.0])
    scorer(tf.constant([[1.0, 2.0]]))  # with kernel [[1], [1]]: 1 / 1 + 2 / 2 = [2.0]

  Args:
    feature_names: Names of the num_features inputs, in order.
    feature_mean: [num_features] means subtracted (default zeros).
    feature_scale: [num_features] positive scales divided by (default ones).

  Call args:
    inputs: float [..., num_features], e.g. [batch_size, num_features] or [batch_size, list_size,
    num_features].

  Returns:
    float32 [...] scores, e.g. [batch_size] or [batch_size, list_size].
  """

  def __init__(self, feature_names: list[str], feature_mean: list[float] | None = None,
               feature_scale: list[float] | None = None, **kwargs):
    super().__init__(**kwargs)
    feature_names = [str(name) for name in feature_names]
    if not feature_names:
      raise ValueError("`feature_names` must name at least one feature.")
    if len(set(feature_names)) != len(feature_names):
      raise ValueError(f"`feature_names` must be unique, got {feature_names}.")
    num = len(feature_names)
    feature_mean = [0.0] * num if feature_mean is None else [float(v) for v in feature_mean]
    feature_scale = [1.0] * num if feature_scale is None else [float(v) for v in feature_scale]
    if len(feature_mean) != num or len(feature_scale) != num:
      raise ValueError(f"`feature_mean` ({len(feature_mean)}) and `feature_scale` ({len(feature_scale)}) "
                       f"need one value per feature ({num}).")
    if not all(math.isfinite(v) for v in feature_mean):
      raise ValueError(f"`feature_mean` must be finite, got {feature_mean}.")
    if not all(math.isfinite(v) and v > 0 for v in feature_scale):
      raise ValueError(f"`feature_scale` must be positive and finite, got {feature_scale}.")
    self._feature_names = feature_names
    self._feature_mean = feature_mean
    self._feature_scale = feature_scale
    self._dense = tf.keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros", name="rank_weights")

  @property
  def feature_names(self) -> list[str]:
    return list(self._feature_names)

  @property
  def kernel(self) -> tf.Variable:
    """The weight vector w as [num_features, 1]."""
    return self._dense.kernel

  def build(self, input_shape):
    if input_shape[-1] is not None and input_shape[-1] != len(self._feature_names):
      raise ValueError(f"RankSVMScorer expects {len(self._feature_names)} features, got input "
                       f"shape {input_shape}.")
    self._dense.build(tf.TensorShape(input_shape)[:-1].concatenate([len(self._feature_names)]))
    super().build(input_shape)

  def call(self, inputs, training=None):
    mean = tf.constant(self._feature_mean, dtype=self.compute_dtype)
    scale = tf.constant(self._feature_scale, dtype=self.compute_dtype)
    standardized = (tf.cast(inputs, self.compute_dtype) - mean) / scale
    return tf.squeeze(self._dense(standardized), axis=-1)

  def get_config(self):
    return {**super().get_config(), "feature_names": self.feature_names,
            "feature_mean": list(self._feature_mean), "feature_scale": list(self._feature_scale)}


def make_scorer_model(feature_names: list[str], feature_mean=None, feature_scale=None,
                      weights=None) -> tf.keras.Model:
  """A Keras model: features float32 [batch_size, num_features] -> scores [batch_size].

  Args:
    feature_names: [num_features] names.
    feature_mean: Optional [num_features] means.
    feature_scale: Optional [num_features] scales.
    weights: Optional [num_features] w in the standardized space (zeros if None).
  """
  scorer = RankSVMScorer(list(feature_names),
                         None if feature_mean is None else np.asarray(feature_mean, np.float64).tolist(),
                         None if feature_scale is None else np.asarray(feature_scale, np.float64).tolist(),
                         name="ranksvm_scorer")
  inputs = tf.keras.Input(shape=(len(feature_names),), dtype=tf.float32, name="features")
  model = tf.keras.Model(inputs, scorer(inputs), name="ranksvm")
  if weights is not None:
    weights = np.asarray(weights, dtype=np.float32).reshape(-1, 1)
    if weights.shape[0] != len(feature_names):
      raise ValueError(f"{weights.shape[0]} weights for {len(feature_names)} features.")
    scorer.kernel.assign(weights)
  return model


def scorer_of(model: tf.keras.Model) -> RankSVMScorer:
  """The `RankSVMScorer` inside a model made by `make_scorer_model` (also after reloading)."""
  for layer in model.layers:
    if isinstance(layer, RankSVMScorer):
      return layer
  raise ValueError(f"Model {model.name!r} holds no RankSVMScorer layer.")


def standardization(features) -> tuple[np.ndarray, np.ndarray, list[int]]:
  """Column means and standard deviations of training rows; constant columns get scale 1.

  Returns:
    (mean [num_features], scale [num_features], indices of constant columns).
  """
  mean, scale, constant, _ = _standardized(features, keep=False)
  return mean, scale, constant


def _standardized(features, keep: bool) -> tuple[np.ndarray, np.ndarray, list[int], np.ndarray | None]:
  """`standardization`, plus (when `keep`) the standardized float64 rows, computed in one float64 copy of the
  rows and no other row-sized temporary: peak memory is the input plus that copy."""
  rows = np.array(features, dtype=np.float64, copy=True)
  mean = rows.mean(axis=0)
  rows -= mean
  std = np.sqrt(np.einsum("ij,ij->j", rows, rows) / max(len(rows), 1))
  constant = np.nonzero(std <= 1e-12 * np.maximum(1.0, np.abs(mean)))[0]
  scale = std.copy()
  scale[constant] = 1.0
  if not keep:
    return mean, scale, constant.tolist(), None
  rows /= scale
  return mean, scale, constant.tolist(), rows


@dataclasses.dataclass
class RankSVMResult:
  """A trained RankSVM.

  Attributes:
    model: Keras model scoring raw Φ rows [batch_size, num_features] -> [batch_size].
    weights: float64 [num_features], w in the standardized space.
    num_pairs: Training pairs used.
    num_skipped_queries: Training queries that gave no pair.
    constant_features: Names of features constant over the training rows (their weight is 0).
    solver: How training ended (`solve_pairs`' report): method, converged, iterations, primal_objective,
      dual_objective, duality_gap, relative_gap, tolerance, smoothing, seconds.
  """

  model: tf.keras.Model
  weights: np.ndarray
  num_pairs: int
  num_skipped_queries: int
  constant_features: list[str]
  solver: dict = dataclasses.field(default_factory=dict)

  @property
  def feature_names(self) -> list[str]:
    """The features the model scores, in its input order."""
    return scorer_of(self.model).feature_names

  def weights_by_name(self) -> dict[str, float]:
    return dict(zip(self.feature_names, self.weights.tolist(), strict=True))


def train_ranksvm(lists: FeatureLists, config: RankSVMConfig | None = None) -> RankSVMResult:
  """Standardizes Φ on the training rows, forms within-query pairs and fits the SVM primal (`solve_pairs`).

  Constant features (including ones constant over the training rows but not elsewhere) carry no pairwise
  information: their differences are 0, so their weight stays exactly 0 (logged). A solver that stops before
  reaching `config.tolerance` writes one warning line to stderr (`unconverged_warning`); the result's `solver`
  report says so too.

  Args:
    lists: Training queries with Φ rows and relevance.
    config: Objective and solver; defaults to `RankSVMConfig()`.

  Raises:
    ValueError: for an unpairable query (unless skipped) or no pairs at all.
  """
  config = config or RankSVMConfig()
  mean, scale, constant, standardized = _standardized(lists.features, keep=True)
  if constant:
    say(f"Constant feature(s) {[lists.feature_names[j] for j in constant]} over the training rows get "
        "weight 0.")
  pairs = pair_transform.pairs_within_queries(
      lists.relevance, lists.list_offsets, lists.query_ids, config.max_pairs_per_query,
      "skip" if config.skip_unpairable_queries else "raise", config.seed)
  operator = pair_transform.PairDifferences(standardized, pairs)
  weights, report = solve_pairs(operator, standardized, pairs, config)
  _logger.info("RankSVM: %d pairs, %s: primal objective %.10g, duality gap %.3g (relative %.3g), %s.",
               pairs.num_pairs, report["method"], report["primal_objective"], report["duality_gap"],
               report["relative_gap"], "converged" if report["converged"] else "NOT converged")
  warning = unconverged_warning(report)
  if warning is not None:
    say(warning)
  weights[constant] = 0.0
  model = make_scorer_model(lists.feature_names, mean, scale, weights)
  return RankSVMResult(model=model, weights=weights, num_pairs=pairs.num_pairs,
                       num_skipped_queries=pairs.num_skipped_queries,
                       constant_features=[lists.feature_names[j] for j in constant], solver=report)


def score_rows(model: tf.keras.Model, features, batch_size: int = 4096) -> np.ndarray:
  """Scores Φ rows [num_rows, num_features] with a scorer model; float64 [num_rows]."""
  features = np.asarray(features, dtype=np.float32)
  if features.shape[0] == 0:
    return np.zeros(0)
  return np.asarray(model.predict(features, batch_size=batch_size, verbose=0), dtype=np.float64).reshape(-1)
