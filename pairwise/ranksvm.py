"""Joachims' RankSVM: a linear SVM on pairwise feature differences, trained in TensorFlow, exported to Keras.

The primal (Joachims 2002; RankingSVM paper §2.1, §3.4) over the pairwise-transformed set {(x_k, y_k)},
x_k = Φ(q, d_i) - Φ(q, d_j), y_k = ±1, with no intercept:

    minimize_w  J(w) = 1/2 ||w||^2 + C sum_k loss(y_k w·x_k),   loss = hinge max(0, 1 - m) or its square.

This is scikit-learn's `LinearSVC(loss="hinge" | "squared_hinge", fit_intercept=False, C=C)` objective, so the
weights agree with it. Training minimizes J / num_pairs with Adam: full batch for small pair sets (keeping the
iterate with the lowest J, since the hinge is not smooth), or mini-batches from `tf.data` for large ones, where
C mean_batch(loss) + ||w||^2 / (2 num_pairs) is an unbiased estimate of J / num_pairs. Documents are then
ranked by rsv(q, d) = w·standardize(Φ(q, d)) (paper Eq. 2), which `RankSVMScorer` computes.
"""

import dataclasses
import math

import numpy as np
import tensorflow as tf
from absl import logging

from pairwise import pair_transform
from rank4class_data.feature_lists import FeatureLists

LOSS_NAMES = ("hinge", "squared_hinge")
_LOSS_FNS = {"hinge": tf.keras.losses.hinge, "squared_hinge": tf.keras.losses.squared_hinge}


@dataclasses.dataclass
class RankSVMConfig:
  """Objective and optimizer of RankSVM.

  Attributes:
    c: SVM regularization trade-off C > 0 (larger C, weaker regularization).
    loss: "hinge" (the SVM) or "squared_hinge" (L2-SVM), see `LOSS_NAMES`.
    batch_size: Pairs per step; None trains full batch (exact objective, for pair sets that fit in memory).
    num_steps: Adam steps in full-batch training.
    num_epochs: Passes over the pairs in mini-batch training.
    learning_rate: Initial Adam learning rate.
    final_learning_rate: Learning rate at the last step (exponential decay in between).
    max_pairs_per_query: If set, each query keeps a uniform random sample of at most this many pairs.
    skip_unpairable_queries: If False, a query with fewer than two documents is an error; else it is skipped.
    seed: Seed of pair sampling, sign flips and shuffling.
  """

  c: float = 1.0
  loss: str = "hinge"
  batch_size: int | None = None
  num_steps: int = 3000
  num_epochs: int = 20
  learning_rate: float = 0.05
  final_learning_rate: float = 1e-4
  max_pairs_per_query: int | None = None
  skip_unpairable_queries: bool = False
  seed: int = 0

  def __post_init__(self):
    if not self.c > 0:
      raise ValueError(f"`c` must be positive, got {self.c}.")
    if self.loss not in LOSS_NAMES:
      raise ValueError(f"`loss` must be one of {list(LOSS_NAMES)}, got {self.loss!r}.")
    if self.batch_size is not None and self.batch_size < 1:
      raise ValueError(f"`batch_size` must be positive or None, got {self.batch_size}.")
    for name in ("num_steps", "num_epochs"):
      if getattr(self, name) < 1:
        raise ValueError(f"`{name}` must be positive, got {getattr(self, name)}.")
    if not 0 < self.final_learning_rate <= self.learning_rate:
      raise ValueError(f"Need 0 < final_learning_rate <= learning_rate, got {self.final_learning_rate} and "
                       f"{self.learning_rate}.")


def svm_primal_objective(weights, x, y, c: float, loss: str = "hinge") -> tf.Tensor:
  """J(w) = 1/2 ||w||^2 + C sum_k loss(y_k w·x_k).

  Args:
    weights: [num_features].
    x: [num_pairs, num_features] pair differences.
    y: [num_pairs] signs ±1.
    c: C > 0.
    loss: One of `LOSS_NAMES`.

  Returns:
    Scalar float32.
  """
  if loss not in LOSS_NAMES:
    raise ValueError(f"`loss` must be one of {list(LOSS_NAMES)}, got {loss!r}.")
  weights = tf.cast(weights, tf.float32)
  margins = tf.linalg.matvec(tf.cast(x, tf.float32), weights)
  per_pair = _LOSS_FNS[loss](tf.cast(y, tf.float32)[:, None], margins[:, None])
  return 0.5 * tf.reduce_sum(tf.square(weights)) + c * tf.reduce_sum(per_pair)


def _learning_rate(config: RankSVMConfig, total_steps: int) -> tf.keras.optimizers.schedules.LearningRateSchedule:
  return tf.keras.optimizers.schedules.ExponentialDecay(
      config.learning_rate, decay_steps=max(total_steps, 1),
      decay_rate=config.final_learning_rate / config.learning_rate)


def fit_primal(x, y, config: RankSVMConfig) -> tuple[np.ndarray, float]:
  """Minimizes the primal on a materialized pair set by full-batch Adam.

  Args:
    x: [num_pairs, num_features] pair differences.
    y: [num_pairs] signs ±1.
    config: C, loss and optimizer settings (`batch_size` is ignored).

  Returns:
    (weights float64 [num_features], J(weights)) for the step with the lowest objective.
  """
  x = tf.constant(np.asarray(x, dtype=np.float32))
  y = tf.constant(np.asarray(y, dtype=np.float32))
  if x.shape[0] == 0:
    raise ValueError("No pairs to train on.")
  num_pairs = float(x.shape[0])
  weights = tf.Variable(tf.zeros([x.shape[1]]), name="ranksvm_weights")
  best = tf.Variable(tf.zeros([x.shape[1]]))
  best_objective = tf.Variable(svm_primal_objective(weights, x, y, config.c, config.loss))
  optimizer = tf.keras.optimizers.Adam(_learning_rate(config, config.num_steps))

  @tf.function
  def train():
    for _ in tf.range(config.num_steps):
      with tf.GradientTape() as tape:
        objective = svm_primal_objective(weights, x, y, config.c, config.loss)
        scaled = objective / num_pairs
      if objective < best_objective:
        best_objective.assign(objective)
        best.assign(weights)
      optimizer.apply_gradients([(tape.gradient(scaled, weights), weights)])
    final = svm_primal_objective(weights, x, y, config.c, config.loss)
    if final < best_objective:
      best_objective.assign(final)
      best.assign(weights)

  train()
  return best.numpy().astype(np.float64), float(best_objective.numpy())


def fit_primal_dataset(dataset: tf.data.Dataset, num_pairs: int, num_features: int,
                       config: RankSVMConfig) -> np.ndarray:
  """Minimizes the primal by mini-batch Adam over a dataset of (x [batch, num_features], y [batch]) batches.

  The per-batch loss C mean_batch(loss) + ||w||^2 / (2 num_pairs) is an unbiased estimate of J / num_pairs, so
  the minimizer is the SVM's whatever the batch size.

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
    inputs: float [..., num_features], e.g. [batch_size, num_features] or [batch_size, list_size, num_features].

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
      raise ValueError(f"`feature_mean` ({len(feature_mean)}) and `feature_scale` ({len(feature_scale)}) need one "
                       f"value per feature ({num}).")
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
      raise ValueError(f"RankSVMScorer expects {len(self._feature_names)} features, got input shape {input_shape}.")
    self._dense.build(tf.TensorShape(input_shape)[:-1].concatenate([len(self._feature_names)]))
    super().build(input_shape)

  def call(self, inputs, training=None):
    mean = tf.constant(self._feature_mean, dtype=self.compute_dtype)
    scale = tf.constant(self._feature_scale, dtype=self.compute_dtype)
    standardized = (tf.cast(inputs, self.compute_dtype) - mean) / scale
    return tf.squeeze(self._dense(standardized), axis=-1)

  def get_config(self):
    return {**super().get_config(), "feature_names": self.feature_names, "feature_mean": list(self._feature_mean),
            "feature_scale": list(self._feature_scale)}


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
  features = np.asarray(features, dtype=np.float64)
  mean = features.mean(axis=0)
  std = features.std(axis=0)
  constant = np.nonzero(std <= 1e-12 * np.maximum(1.0, np.abs(mean)))[0]
  scale = std.copy()
  scale[constant] = 1.0
  return mean, scale, constant.tolist()


@dataclasses.dataclass
class RankSVMResult:
  """A trained RankSVM.

  Attributes:
    model: Keras model scoring raw Φ rows [batch_size, num_features] -> [batch_size].
    weights: float64 [num_features], w in the standardized space.
    num_pairs: Training pairs used.
    num_skipped_queries: Training queries that gave no pair.
    constant_features: Names of features constant over the training rows (their weight is 0).
  """

  model: tf.keras.Model
  weights: np.ndarray
  num_pairs: int
  num_skipped_queries: int
  constant_features: list[str]

  def weights_by_name(self) -> dict[str, float]:
    return dict(zip(scorer_of(self.model).feature_names, self.weights.tolist(), strict=True))


def train_ranksvm(lists: FeatureLists, config: RankSVMConfig | None = None) -> RankSVMResult:
  """Standardizes Φ on the training rows, forms within-query pairs and fits the SVM primal.

  Constant features (including ones constant over the training rows but not elsewhere) carry no pairwise
  information: their differences are 0, so their weight stays exactly 0 (logged).

  Args:
    lists: Training queries with Φ rows and relevance.
    config: Objective and optimizer; defaults to `RankSVMConfig()`.

  Raises:
    ValueError: for an unpairable query (unless skipped) or no pairs at all.
  """
  config = config or RankSVMConfig()
  mean, scale, constant = standardization(lists.features)
  if constant:
    logging.warning("Constant feature(s) %s over the training rows get weight 0.",
                    [lists.feature_names[j] for j in constant])
  standardized = ((lists.features - mean) / scale).astype(np.float32)
  pairs = pair_transform.pairs_within_queries(
      lists.relevance, lists.list_offsets, lists.query_ids, config.max_pairs_per_query,
      "skip" if config.skip_unpairable_queries else "raise", config.seed)
  if config.batch_size is None:
    x, y = pair_transform.pairwise_differences(standardized, pairs)
    weights, objective = fit_primal(x, y, config)
    logging.info("RankSVM: %d pairs, primal objective %.6g.", pairs.num_pairs, objective)
  else:
    dataset = pair_transform.pair_dataset(standardized, pairs, config.batch_size, shuffle_seed=config.seed)
    weights = fit_primal_dataset(dataset, pairs.num_pairs, lists.num_features, config)
  weights[constant] = 0.0
  model = make_scorer_model(lists.feature_names, mean, scale, weights)
  return RankSVMResult(model=model, weights=weights, num_pairs=pairs.num_pairs,
                       num_skipped_queries=pairs.num_skipped_queries,
                       constant_features=[lists.feature_names[j] for j in constant])


def score_rows(model: tf.keras.Model, features, batch_size: int = 4096) -> np.ndarray:
  """Scores Φ rows [num_rows, num_features] with a scorer model; float64 [num_rows]."""
  features = np.asarray(features, dtype=np.float32)
  if features.shape[0] == 0:
    return np.zeros(0)
  return np.asarray(model.predict(features, batch_size=batch_size, verbose=0), dtype=np.float64).reshape(-1)
