"""Ranking whole lists from pair scores, and converting a ranked list into class labels (Rank over Class
§4.3).

Ranking a list (one encoding per item):
  1. Each real item of a list is encoded once (left encoder, and right encoder with separate encoders).
  2. The pair head scores every ordered pair (i as left, j as right) of the list, giving the preference
     P[i, j] = f_left(i, j) - f_right(i, j); P[i, j] > 0 means "i above j".
  3. Orientation: with `symmetrize`, P ← (P - Pᵀ) / 2, averaging f(a, b) with -f(b, a); without it only the
     orientation a < b (list order) is used and P[b, a] := -P[a, b].
  4. Aggregation over the other real items j ≠ i of the list:
       "win_count":       s_i = Σ_j [P_ij > 0] + ½·[P_ij = 0]   (Copeland/Borda count of pairwise wins)
       "mean_preference": s_i = Σ_j P_ij / (m - 1), m = number of real items (soft Borda; breaks count ties)
  5. Items are ordered by descending s_i; ties keep list order (stable sort). Padding gets `PADDING_SCORE`.
With the linear ("w/o MLP") head the model is pointwise and s_i = f(i) directly.

Converting a ranked list into classes (Table 4): classes are ordinal ids 0..K-1, K-1 the highest. The ranked
list is cut from the top into K contiguous segments, the top segment getting class K-1 and the bottom class 0.
  "equal segments": sizes as in `numpy.array_split` read from the top: the first n mod K segments from the top
    (highest classes) hold ⌈n/K⌉ items, the others ⌊n/K⌋.
  "proportions" p_0..p_{K-1} (per class id, summing to 1): size_k = ⌊n·p_k⌋, then the n - Σ size_k remaining
    items go one each to the classes with the largest remainders n·p_k - ⌊n·p_k⌋ (ties to the higher class).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from pairwise.margin import margin_model
from rank4class_data.validation import check_choice, check_range

AGGREGATIONS = ("win_count", "mean_preference")
# Score of a padded position, below any real item's score.
PADDING_SCORE = -1e9


def orient_preferences(preferences: tf.Tensor, symmetrize: bool = True) -> tf.Tensor:
  """Makes a preference matrix antisymmetric [..., n, n] (step 3 of the module docstring)."""
  preferences = tf.convert_to_tensor(preferences, tf.float32)
  transposed = tf.linalg.matrix_transpose(preferences)
  if symmetrize:
    return (preferences - transposed) / 2.0
  n = preferences.shape[-1]
  upper = tf.constant(np.triu(np.ones([n, n], np.float32), k=1))
  return preferences * upper - transposed * tf.transpose(upper)


def aggregate_preferences(preferences: tf.Tensor, mask: tf.Tensor, method: str = "win_count") -> tf.Tensor:
  """Per-item list scores from an antisymmetric preference matrix (step 4 of the module docstring).

  Args:
    preferences: float [num_lists, n, n] antisymmetric preferences.
    mask: bool [num_lists, n], true for real items.
    method: One of `AGGREGATIONS`.

  Returns:
    float32 [num_lists, n] scores; `PADDING_SCORE` at padding.

  Raises:
    ValueError: for an unknown method.
  """
  check_choice("aggregation", method, AGGREGATIONS)
  preferences = tf.convert_to_tensor(preferences, tf.float32)
  mask = tf.cast(mask, tf.bool)
  n = preferences.shape[-1] if preferences.shape[-1] is not None else tf.shape(preferences)[-1]
  others = (mask[..., tf.newaxis, :] & mask[..., :, tf.newaxis]) & ~tf.cast(tf.eye(n), tf.bool)
  others = tf.cast(others, tf.float32)
  if method == "win_count":
    wins = tf.cast(preferences > 0, tf.float32) + 0.5 * tf.cast(tf.equal(preferences, 0.0), tf.float32)
    scores = tf.reduce_sum(wins * others, axis=-1)
  else:
    count = tf.maximum(tf.reduce_sum(others, axis=-1), 1.0)
    scores = tf.reduce_sum(preferences * others, axis=-1) / count
  return tf.where(mask, scores, PADDING_SCORE)


def pair_preference_matrix(ranker: margin_model.PairwiseRanker, left_embeddings: tf.Tensor,
                           right_embeddings: tf.Tensor, training=None) -> tf.Tensor:
  """Scores every ordered pair of each list: embeddings [num_lists, n, d] -> preferences P [num_lists, n,
  n]."""
  n = tf.shape(left_embeddings)[1]
  dim = left_embeddings.shape[-1]
  # [num_lists, n (left i), n (right j), d]
  lefts = tf.repeat(left_embeddings[:, :, tf.newaxis, :], n, axis=2)
  rights = tf.repeat(right_embeddings[:, tf.newaxis, :, :], n, axis=1)
  scores = ranker.score_embeddings(tf.reshape(lefts, [-1, dim]), tf.reshape(rights, [-1, dim]),
                                   training=training)
  return tf.reshape(scores[:, 0] - scores[:, 1], tf.shape(lefts)[:3])


def score_lists(ranker: margin_model.PairwiseRanker, items: tf.Tensor, mask: tf.Tensor,
                aggregation: str = "win_count", symmetrize: bool = True, training=None) -> tf.Tensor:
  """List scores of padded lists with one encoding per item (steps 1-5 of the module docstring).

  Args:
    ranker: A `PairwiseRanker`.
    items: Strings [num_lists, n] or embeddings [num_lists, n, d].
    mask: bool [num_lists, n].
    aggregation: One of `AGGREGATIONS` (ignored by a pointwise ranker).
    symmetrize: Average both orientations of every pair.
    training: Keras training flag (False for evaluation).

  Returns:
    float32 [num_lists, n] scores; higher ranks first; `PADDING_SCORE` at padding.
  """
  check_choice("aggregation", aggregation, AGGREGATIONS)
  mask = tf.cast(mask, tf.bool)
  left = ranker.encode_lists(items, mask, "left", training=training)
  if ranker.is_pointwise:
    dim = left.shape[-1]
    flat = tf.reshape(left, [-1, dim])
    scores = tf.reshape(ranker.score_embeddings(flat, flat, training=training)[:, 0], tf.shape(mask))
    return tf.where(mask, scores, PADDING_SCORE)
  right = ranker.encode_lists(items, mask, "right", training=training) if ranker.separate_encoders else left
  preferences = orient_preferences(pair_preference_matrix(ranker, left, right, training), symmetrize)
  return aggregate_preferences(preferences, mask, aggregation)


@tf.keras.utils.register_keras_serializable(package="pairwise")
class PairwiseListScorer(tf.keras.Model):
  """Serving model that ranks whole lists with a `PairwiseRanker` (see the module docstring).

  Example:
    scorer = PairwiseListScorer(ranker)
    scorer(tf.constant([["a", "b", ""]]))  # [1, 3]; "" marks padding -> PADDING_SCORE

  Args:
    ranker: The trained `PairwiseRanker`.
    aggregation: One of `AGGREGATIONS`.
    symmetrize: Average both orientations of each pair.
  """

  def __init__(self, ranker: margin_model.PairwiseRanker, aggregation: str = "win_count",
               symmetrize: bool = True, **kwargs):
    super().__init__(**kwargs)
    check_choice("aggregation", aggregation, AGGREGATIONS)
    self._ranker = ranker
    self._aggregation = aggregation
    self._symmetrize = symmetrize

  def call(self, inputs, training=None):
    """`inputs`: strings [num_lists, n] ("" = padding), or (items [num_lists, n(, d)], mask bool [num_lists,
    n]).

    Returns:
      float32 [num_lists, n] list scores.
    """
    if isinstance(inputs, (tuple, list)):
      items, mask = inputs
    else:
      items = inputs
      if items.dtype != tf.string:
        raise ValueError("Embedding inputs need an explicit mask: pass (items, mask).")
      mask = tf.not_equal(items, "")
    return score_lists(self._ranker, items, mask, self._aggregation, self._symmetrize, training=training)

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "ranker": tf.keras.layers.serialize(self._ranker),
            "aggregation": self._aggregation, "symmetrize": self._symmetrize}

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    config["ranker"] = tf.keras.layers.deserialize(config["ranker"])
    return cls(**config)


def segment_sizes(num_items: int, num_classes: int, proportions: Sequence[float] | None = None) -> np.ndarray:
  """Number of items per class id for the ranked-list → classes conversion (module docstring).

  Args:
    num_items: n >= 0.
    num_classes: K >= 2.
    proportions: None for equal segments, else K non-negative numbers per class id summing to 1.

  Returns:
    int64 [K] sizes indexed by class id, summing to n.

  Raises:
    ValueError: for K < 2, proportions of the wrong length, negative or not summing to 1.
  """
  check_range("num_classes", num_classes, 2)
  check_range("num_items", num_items, 0)
  if proportions is None:
    # array_split sizes read from the top (class K-1 first): larger segments at the top.
    from_top = np.array([len(part) for part in np.array_split(np.arange(num_items), num_classes)], np.int64)
    return from_top[::-1].copy()
  proportions = np.asarray(proportions, np.float64)
  if proportions.shape != (num_classes,):
    raise ValueError(f"`proportions` must have {num_classes} entries, got {proportions.shape}.")
  if np.any(proportions < 0) or not np.isclose(proportions.sum(), 1.0, atol=1e-6):
    raise ValueError(f"`proportions` must be >= 0 and sum to 1, got {proportions.tolist()}.")
  exact = num_items * proportions
  sizes = np.floor(exact).astype(np.int64)
  remainders = exact - sizes
  # Largest remainder first; among equal remainders the higher class id first.
  order = np.lexsort((-np.arange(num_classes), -remainders))
  sizes[order[: num_items - sizes.sum()]] += 1
  return sizes


def ranking_to_classes(scores: np.ndarray, num_classes: int,
                       proportions: Sequence[float] | None = None) -> np.ndarray:
  """Converts one ranked list into ordinal class ids (Rank over Class §4.3, Table 4; module docstring).

  Args:
    scores: float [n] list scores, higher ranked first; ties keep input order.
    num_classes: K >= 2.
    proportions: None for equal segments, else the class proportions per class id.

  Returns:
    int64 [n] class ids, aligned with `scores` (not sorted).
  """
  scores = np.asarray(scores, np.float64)
  if scores.ndim != 1:
    raise ValueError(f"`scores` must be 1-D, got shape {scores.shape}.")
  sizes = segment_sizes(len(scores), num_classes, proportions)
  order = np.argsort(-scores, kind="stable")
  classes_from_top = np.repeat(np.arange(num_classes - 1, -1, -1), sizes[::-1])
  classes = np.empty(len(scores), np.int64)
  classes[order] = classes_from_top
  return classes
