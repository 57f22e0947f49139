"""The one ranking-loss registry of both model families: TF-Ranking's losses by name, plus rescaled MSE.

Rank4Class (§4.1, App. D) gives every loss one-hot relevance labels `[batch_size, num_classes]` and scores of
the same shape; the pairwise listwise objectives give graded labels `[num_lists, list_size]` (-1 = padding).
Names are the keys of `get`; the Keras classes are TF-Ranking's own, except `RescaledMeanSquaredLoss`, which
only feeds TF-Ranking's `MeanSquaredLoss` the targets and weights of `rescaled_mse_targets`.
"""

import dataclasses
import functools
import json
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from rank4class_data.tf_ranking import tfr
from rank4class_data.validation import check_choice, check_range

SOFTMAX = "softmax"
PAIRWISE_LOGISTIC = "pairwise_logistic"
APPROX_NDCG = "approx_ndcg"
GUMBEL_APPROX_NDCG = "gumbel_approx_ndcg"
MSE = "mse"
RESCALED_MSE = "rescaled_mse"
LOSS_NAMES = (SOFTMAX, PAIRWISE_LOGISTIC, APPROX_NDCG, GUMBEL_APPROX_NDCG, MSE, RESCALED_MSE)


def rescaled_mse_targets(
  relevance: tf.Tensor, weight_k: float, scale_m: float
) -> tuple[tf.Tensor, tf.Tensor]:
  """Targets and per-item weights that turn plain squared error into Hui & Belkin's (2021) rescaled MSE.

  Their loss for one instance with true class t over C classes is
  `(1/C) * [k * (s_t - M)^2 + sum_{i != t} s_i^2]`, i.e. squared error against labels `M * y` with weight
  `k` on the true class and 1 elsewhere, averaged over the classes.

  Args:
    relevance: One-hot (binary) relevance `[batch_size, num_classes]`.
    weight_k: Weight `k` > 0 of the true class's term.
    scale_m: Target `M` > 0 for the true class's score.

  Returns:
    `(labels, weights)`, both `[batch_size, num_classes]`: `M * y` and `1 + (k - 1) * y`.
  """
  relevance = tf.convert_to_tensor(relevance)
  binary = tf.cast(relevance > 0, relevance.dtype)
  labels = scale_m * binary
  weights = 1.0 + (weight_k - 1.0) * binary
  return labels, weights


@tf.keras.utils.register_keras_serializable(package="rank4class")
class RescaledMeanSquaredLoss(tfr.keras.losses.MeanSquaredLoss):
  """Rescaled squared loss of Hui & Belkin (2021) for many classes, built on TF-Ranking's MeanSquaredLoss.

  For one instance with true class t over C classes:
  `loss = (1/C) * [k * (s_t - M)^2 + sum_{i != t} s_i^2]`,
  averaged over the batch. TF-Ranking's `MeanSquaredLoss` computes `mean_i w_i (y_i - s_i)^2` over the items
  of the batch, so this class only feeds it labels `M * y` and item weights `1 + (k - 1) * y`
  (`rescaled_mse_targets`). With `k = M = 1` it is plain MSE. Hui & Belkin used k=1, M=1 for
  few classes and e.g. k=15, M=30 for ImageNet's 1,000 (the paper's "MSE (rescaled)", App. D).

  Example:
    loss = RescaledMeanSquaredLoss(weight_k=2.0, scale_m=3.0)
    loss([[0., 1.]], [[1., 2.]])  # (1/2) * [1^2 + 2 * (2 - 3)^2] = 1.5

  Args:
    weight_k: Weight k > 0 of the true class's term.
    scale_m: Target M > 0 of the true class's score.
    reduction: A `tf.keras.losses.Reduction`.
    name: Loss name.
  """

  def __init__(
    self,
    weight_k: float = 1.0,
    scale_m: float = 1.0,
    reduction: str = tf.keras.losses.Reduction.AUTO,
    name: str | None = None,
    ragged: bool = False,
  ):
    check_range("weight_k", weight_k, 0.0, low_inclusive=False)
    check_range("scale_m", scale_m, 0.0, low_inclusive=False)
    if ragged:
      raise ValueError(
        "RescaledMeanSquaredLoss takes dense [batch_size, num_classes] labels; got ragged=True."
      )
    super().__init__(reduction=reduction, name=name, ragged=False)
    self._weight_k = float(weight_k)
    self._scale_m = float(scale_m)

  def __call__(self, y_true, y_pred, sample_weight=None):
    """`y_true`: one-hot relevance `[batch_size, num_classes]`; `y_pred`: scores of the same shape;
    `sample_weight`: None, `[batch_size]`, `[batch_size, 1]` or `[batch_size, num_classes]`."""
    y_true = tf.cast(y_true, tf.float32)
    labels, weights = rescaled_mse_targets(y_true, self._weight_k, self._scale_m)
    if sample_weight is not None:
      sample_weight = tf.cast(sample_weight, tf.float32)
      if sample_weight.shape.rank == 1:
        sample_weight = sample_weight[:, tf.newaxis]
      weights *= sample_weight
    return super().__call__(labels, y_pred, weights)

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "weight_k": self._weight_k, "scale_m": self._scale_m}


_LOSS_CLASSES = {
  SOFTMAX: tfr.keras.losses.SoftmaxLoss,
  PAIRWISE_LOGISTIC: tfr.keras.losses.PairwiseLogisticLoss,
  APPROX_NDCG: tfr.keras.losses.ApproxNDCGLoss,
  GUMBEL_APPROX_NDCG: tfr.keras.losses.GumbelApproxNDCGLoss,
  MSE: tfr.keras.losses.MeanSquaredLoss,
  RESCALED_MSE: RescaledMeanSquaredLoss,
}


def get(name: str, **kwargs) -> tf.keras.losses.Loss:
  """Builds a ranking loss by name.

  Args:
    name: One of `LOSS_NAMES`: "softmax" (`tfr.keras.losses.SoftmaxLoss`, SoftmaxCE), "pairwise_logistic"
      (`PairwiseLogisticLoss`, PairLogLoss), "approx_ndcg" (`ApproxNDCGLoss`), "gumbel_approx_ndcg"
      (`GumbelApproxNDCGLoss`), "mse" (`MeanSquaredLoss`), "rescaled_mse" (`RescaledMeanSquaredLoss`).
    **kwargs: Constructor arguments of that class (e.g. `temperature`, `sample_size`, `seed`, `weight_k`).

  Returns:
    The loss; it takes one-hot relevance `[batch_size, num_classes]` and scores of the same shape.

  Raises:
    ValueError: If `name` is unknown (the message lists the allowed names) or an argument is not accepted.
  """
  check_choice("loss", name, LOSS_NAMES)
  try:
    return _LOSS_CLASSES[name](**kwargs)
  except TypeError as e:
    raise ValueError(f"Bad arguments {sorted(kwargs)} for loss {name!r}: {e}") from e


@dataclasses.dataclass
class LossConfig:
  """Which ranking loss to train with, and its settings (None leaves TF-Ranking's default).

  Attributes:
    type: One of `LOSS_NAMES`.
    temperature: Score temperature of softmax/pairwise/ApproxNDCG losses (ApproxNDCG's default is 0.1).
    sample_size: Gumbel samples per list for "gumbel_approx_ndcg".
    gumbel_temperature: Gumbel noise temperature for "gumbel_approx_ndcg".
    seed: Op seed of the Gumbel sampler.
    weight_k: True-class weight k of "rescaled_mse".
    scale_m: True-class target M of "rescaled_mse".
  """

  type: str = SOFTMAX
  temperature: float | None = None
  sample_size: int = 8
  gumbel_temperature: float = 1.0
  seed: int | None = None
  weight_k: float = 1.0
  scale_m: float = 1.0

  def __post_init__(self):
    check_choice("loss", self.type, LOSS_NAMES)


def make_loss(config: LossConfig) -> tf.keras.losses.Loss:
  """Builds the loss that `config` describes.

  Raises:
    ValueError: If `config.type` is unknown or a setting is invalid.
  """
  kwargs: dict[str, Any] = {}
  if config.temperature is not None:
    if config.type in (MSE, RESCALED_MSE):
      raise ValueError(f"Loss {config.type!r} takes no `temperature`, got {config.temperature}.")
    kwargs["temperature"] = config.temperature
  if config.type == GUMBEL_APPROX_NDCG:
    kwargs.update(
      sample_size=config.sample_size, gumbel_temperature=config.gumbel_temperature, seed=config.seed
    )
  if config.type == RESCALED_MSE:
    kwargs.update(weight_k=config.weight_k, scale_m=config.scale_m)
  return get(config.type, **kwargs)


def traced_loss(loss: tf.keras.losses.Loss, num_classes: int) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
  """`(relevance, scores) -> mean loss`, both float32 `[batch_size, num_classes]`, traced once per process for
  each loss configuration (a ranking loss's graph costs ~0.5 s to trace: a short run's validation would pay it
  every run). The function computes a copy of `loss` rebuilt from its config, so `loss` itself is not kept."""
  key = json.dumps(tf.keras.losses.serialize(loss), sort_keys=True, default=repr)
  return _traced_loss(key, num_classes)


@functools.lru_cache(maxsize=32)
def _traced_loss(serialized: str, num_classes: int) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
  loss = tf.keras.losses.deserialize(json.loads(serialized))
  # As `Model.compile` marks its losses: the batch mean (AUTO reduction) is then allowed under a strategy,
  # where validation runs (the mean of the whole batch, scored on one replica).
  loss._allow_sum_over_batch_size = True  # pylint: disable=protected-access
  spec = tf.TensorSpec([None, num_classes], tf.float32)
  return tf.function(lambda relevance, scores: loss(relevance, scores), input_signature=[spec, spec],
                     autograph=False)
