"""Sampled class lists: training Rank4Class on K classes per instance instead of all C.

Each instance's list holds its true class (position 0, relevance 1) and K-1 negatives drawn from a sampling
distribution q over the classes:
- "uniform": q(c) = 1/C.
- "log_uniform": Zipf over the classes' frequency ranks r (0 = most frequent in the training labels; without
  counts, the class id): q = log((r + 2) / (r + 1)) / log(C + 1), TensorFlow's log-uniform candidate sampler.
- "empirical": q ∝ (count + 1)^power (word2vec's unigram^0.75 by default).
- "in_batch": the other instances' true classes in the batch (list size = batch size); q is the classes'
  training frequency, the chance a batch item brings it (TF Recommenders' in-batch softmax).
A negative that is the instance's own class (an accidental hit) gets relevance -1, TF-Ranking's padding label:
every loss and metric skips it. With the log-Q correction the listed scores become s - log q(c) (Jean et al.
2015; TF Recommenders' `candidate_sampling_probability`), which removes the sampler's popularity bias from the
softmax; a constant for "uniform".

The pure math is `sampling_probabilities` and `sample_class_lists`; `ClassSampler` is the serializable Keras
layer a `Rank4ClassModel` carries to train on sampled lists.
"""

import dataclasses
from typing import Any

import numpy as np
import tensorflow as tf

UNIFORM = "uniform"
LOG_UNIFORM = "log_uniform"
EMPIRICAL = "empirical"
IN_BATCH = "in_batch"
SAMPLERS = (UNIFORM, LOG_UNIFORM, EMPIRICAL, IN_BATCH)
_NEEDS_COUNTS = (EMPIRICAL, IN_BATCH)
# Relevance of an accidental hit: TF-Ranking's padding label, left out of every loss and metric.
ACCIDENTAL_HIT = -1.0


def sampling_probabilities(sampler: str, num_classes: int, class_counts=None, power: float = 0.75) -> np.ndarray:
  """q(c) of each class, float64 `[num_classes]` summing to 1.

  Args:
    sampler: One of `SAMPLERS`.
    num_classes: C.
    class_counts: Training rows per class `[num_classes]`; needed by "empirical" and "in_batch", and orders the
      classes of "log_uniform" (most frequent first; ties by id; without counts, by id).
    power: "empirical": the exponent of (count + 1).

  Raises:
    ValueError: for an unknown sampler, missing or misshaped counts.
  """
  if sampler not in SAMPLERS:
    raise ValueError(f"Unknown class sampler {sampler!r}; allowed: {', '.join(SAMPLERS)}.")
  if class_counts is None and sampler in _NEEDS_COUNTS:
    raise ValueError(f"The {sampler!r} sampler needs the training class counts.")
  counts = None
  if class_counts is not None:
    counts = np.asarray(class_counts, np.float64)
    if counts.shape != (num_classes,) or (counts < 0).any():
      raise ValueError(f"`class_counts` must be {num_classes} counts >= 0, got shape {counts.shape}.")
  if sampler == UNIFORM:
    return np.full([num_classes], 1.0 / num_classes)
  if sampler == LOG_UNIFORM:
    order = np.arange(num_classes) if counts is None else np.argsort(-counts, kind="stable")
    ranks = np.empty(num_classes)
    ranks[order] = np.arange(num_classes)
    return np.log((ranks + 2.0) / (ranks + 1.0)) / np.log(num_classes + 1.0)
  weights = (counts + 1.0) ** (power if sampler == EMPIRICAL else 1.0)
  return weights / weights.sum()


def sample_class_lists(labels: tf.Tensor, num_sampled: int, probabilities: tf.Tensor,
                       sampler: str) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """Per instance its true class and sampled negatives.

  Args:
    labels: True class ids int32 `[batch_size]`.
    num_sampled: Negatives per instance, K-1 (ignored by "in_batch": the batch's other classes).
    probabilities: q float32 `[num_classes]` (`sampling_probabilities`).
    sampler: One of `SAMPLERS`.

  Returns:
    (class ids int32 `[batch_size, K]`, relevance float32 `[batch_size, K]`: 1 for the true class at position
    0, 0 for a negative, -1 for an accidental hit; log q float32 `[batch_size, K]`).
  """
  labels = tf.cast(labels, tf.int32)
  batch_size = tf.shape(labels)[0]
  num_classes = tf.shape(probabilities)[0]
  if sampler == IN_BATCH:
    # Row b: labels[b], labels[b + 1], ... (mod batch_size): its own class first, then every other instance's.
    positions = (tf.range(batch_size)[:, tf.newaxis] + tf.range(batch_size)[tf.newaxis, :]) % batch_size
    negatives = tf.gather(labels, positions)[:, 1:]
  elif sampler == UNIFORM:
    negatives = tf.random.uniform([batch_size, num_sampled], maxval=num_classes, dtype=tf.int32)
  else:  # Inverse CDF: O(log C) per draw, no [batch_size, num_classes] tensor.
    cdf = tf.cumsum(probabilities)
    draws = tf.random.uniform([batch_size * num_sampled], maxval=cdf[-1])
    negatives = tf.minimum(tf.searchsorted(cdf, draws, side="right", out_type=tf.int32), num_classes - 1)
    negatives = tf.reshape(negatives, [batch_size, num_sampled])
  ids = tf.concat([labels[:, tf.newaxis], negatives], axis=1)
  hits = tf.equal(negatives, labels[:, tf.newaxis])
  relevance = tf.concat([tf.ones([batch_size, 1]), tf.where(hits, ACCIDENTAL_HIT, 0.0)], axis=1)
  return ids, relevance, tf.math.log(tf.gather(probabilities, ids))


@tf.keras.utils.register_keras_serializable(package="rank4class")
class ClassSampler(tf.keras.layers.Layer):
  """Draws each training instance's class list (see the module doc); no weights.

  Example:
    sampler = ClassSampler(num_classes=10_000, sampler="log_uniform", num_sampled=63, class_counts=counts)
    class_ids, relevance, log_q = sampler(labels)  # [batch_size, 64] each

  Args:
    num_classes: C.
    sampler: One of `SAMPLERS`.
    num_sampled: Negatives per instance (K - 1); "in_batch" uses the batch's other classes instead.
    class_counts: Training rows per class (see `sampling_probabilities`).
    log_q_correction: Subtract log q(c) from the listed scores (`correct`).
    power: "empirical": the exponent of (count + 1).
  """

  def __init__(self, num_classes: int, sampler: str = UNIFORM, num_sampled: int = 63, class_counts=None,
               log_q_correction: bool = True, power: float = 0.75, **kwargs):
    super().__init__(**kwargs)
    if num_sampled < 1:
      raise ValueError(f"`num_sampled` must be >= 1, got {num_sampled}.")
    self._num_classes = int(num_classes)
    self._sampler = sampler
    self._num_sampled = int(num_sampled)
    self._class_counts = None if class_counts is None else [int(c) for c in class_counts]
    self._log_q_correction = bool(log_q_correction)
    self._power = float(power)
    self._probabilities = tf.constant(
        sampling_probabilities(sampler, self._num_classes, self._class_counts, self._power), tf.float32)

  @property
  def sampler(self) -> str:
    return self._sampler

  def call(self, labels, training=None):
    """True class ids `[batch_size]` -> (class ids `[batch_size, K]`, relevance, log q)."""
    return sample_class_lists(labels, self._num_sampled, self._probabilities, self._sampler)

  def correct(self, scores: tf.Tensor, log_q: tf.Tensor) -> tf.Tensor:
    """The listed scores with the log-Q correction (when enabled)."""
    return scores - tf.cast(log_q, scores.dtype) if self._log_q_correction else scores

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "num_classes": self._num_classes, "sampler": self._sampler,
            "num_sampled": self._num_sampled, "class_counts": self._class_counts,
            "log_q_correction": self._log_q_correction, "power": self._power}


@dataclasses.dataclass
class SamplingConfig:
  """Whether training scores all classes or sampled lists.

  Attributes:
    sampler: None (every class in every list: exact, costs O(C) per instance) or one of `SAMPLERS`.
    num_sampled: Negatives per instance (list size K = num_sampled + 1); not used by "in_batch".
    log_q_correction: Subtract log q(c) from the sampled lists' scores.
    power: "empirical": the exponent of (count + 1).
  """

  sampler: str | None = None
  num_sampled: int = 63
  log_q_correction: bool = True
  power: float = 0.75

  def __post_init__(self):
    if self.sampler is not None and self.sampler not in SAMPLERS:
      raise ValueError(f"Unknown class sampler {self.sampler!r}; allowed: {', '.join(SAMPLERS)}.")
    if self.num_sampled < 1:
      raise ValueError(f"`num_sampled` must be >= 1, got {self.num_sampled}.")


def make_class_sampler(config: SamplingConfig, num_classes: int, class_counts=None) -> ClassSampler | None:
  """The sampler `config` asks for, or None for full lists."""
  if config.sampler is None:
    return None
  return ClassSampler(num_classes, config.sampler, config.num_sampled, class_counts, config.log_q_correction,
                      config.power)
