"""Group-batched training data and graph: one encoder pass per item of a list, all its pairs formed in-graph.

Per-pair training (the reference) encodes both passages of every pair: 2·P encoder passes for P pairs, i.e.
O(n²) per group of n items. Here each step takes whole lists (chunks of at most `list_size` items of one
group), encodes each real item once and gathers the embeddings of all valid pairs
(`pairs.oriented_list_pairs`) before the pair head: O(n) encoder passes for the same O(n²) pairs. The head and
loss see exactly the pairs (and orientations), in the same order, that per-pair training on those pairs would
see (tests/pairwise/margin/group_batching_test.py compares losses and gradients with it).

Both input pipelines are here so benchmarks and tests compare like with like:
  `list_dataset` yields {"rows": int64 [lists_per_batch, list_size], "flips": bool [lists_per_batch, P]};
  `pair_dataset` yields {"left": int64 [batch_size], "right": int64 [batch_size], "pair_labels": float32}.
Rows index an item table (`ItemTable`); `pairs.PADDING_INDEX` marks padding.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from pairwise.margin import margin_model, pairs
from rank4class_data.ranking.grouped_items import GroupedItems
from rank4class_data.validation import check_range


@dataclasses.dataclass
class ItemTable:
  """All items of a split as tensors, gathered by row inside the training step.

  Attributes:
    features: string [num_items] or float32 [num_items, d] tensor.
    labels: float32 [num_items] ranking labels.
    class_labels: int64 [num_items] absolute classes, or None.
  """

  features: tf.Tensor
  labels: tf.Tensor
  class_labels: tf.Tensor | None = None

  @classmethod
  def from_items(cls, items: GroupedItems) -> ItemTable:
    features = (tf.constant(items.features, tf.float32) if isinstance(items.features, np.ndarray)
                else tf.constant(list(items.features), tf.string))
    return cls(features=features, labels=tf.constant(items.labels, tf.float32),
               class_labels=None if items.class_labels is None else tf.constant(items.class_labels, tf.int64))

  def gather_lists(self, rows: tf.Tensor) -> dict[str, tf.Tensor]:
    """Items of padded lists: rows int [num_lists, n] -> {"items", "labels" (-1 at padding), "mask",
    "classes"}."""
    rows = tf.cast(rows, tf.int64)
    mask = rows >= 0
    safe = tf.where(mask, rows, tf.zeros_like(rows))
    out = {"items": tf.gather(self.features, safe), "mask": mask,
           "labels": tf.where(mask, tf.gather(self.labels, safe), pairs.PADDING_LABEL)}
    if self.class_labels is not None:
      out["classes"] = tf.where(mask, tf.gather(self.class_labels, safe), tf.zeros_like(safe))
    return out


def list_dataset(items: GroupedItems, list_size: int, lists_per_batch: int, num_batches: int,
                 seed: int, min_label_gap: float = 0.0) -> tf.data.Dataset:
  """Batches of training lists for `num_batches` steps (`list_size` ≥ 2, `lists_per_batch` ≥ 1).

  Epoch e chunks every group afresh (`pairs.group_lists` with seed + e) and draws each unordered pair's
  left/right order uniformly (the flips). Lists without a valid pair (labels differing by > 0 and
  >= `min_label_gap`) are dropped, so every list, hence every replica's batch, trains on at least one pair
  (an empty batch would feed NaN batch statistics to BatchNorm).

  Raises:
    ValueError: for bad sizes or when no group has two items.
  """
  check_range("list_size", list_size, 2)  # A pair needs two items.
  check_range("lists_per_batch", lists_per_batch, 1)
  check_range("num_batches", num_batches, 1)
  needed = lists_per_batch * num_batches
  num_pairs = list_size * (list_size - 1) // 2
  chunks, flips, total, epoch = [], [], 0, 0
  while total < needed:
    lists = pairs.group_lists(items.group_ids, list_size, seed=seed + epoch, min_items=2)
    lists = lists[np.array([_has_valid_pair(items.labels[r[r >= 0]], min_label_gap) for r in lists], bool)]
    if len(lists) == 0:
      raise ValueError("No list holds two items with different labels (and the minimum label gap) inside a "
                       "group; pairwise training needs such pairs.")
    chunks.append(lists)
    flips.append(np.random.default_rng([seed, epoch]).random([len(lists), num_pairs]) < 0.5)
    total += len(lists)
    epoch += 1
  rows = np.concatenate(chunks)[:needed]
  flips = np.concatenate(flips)[:needed]
  return tf.data.Dataset.from_tensor_slices({"rows": rows, "flips": flips}).batch(
      lists_per_batch, drop_remainder=True)


def _has_valid_pair(labels: np.ndarray, min_label_gap: float) -> bool:
  spread = labels.max() - labels.min()
  return bool(spread > 0 and spread >= min_label_gap)


def pair_dataset(items: GroupedItems, batch_size: int, num_batches: int, seed: int,
                 min_label_gap: float = 0.0) -> tf.data.Dataset:
  """Batches of single pairs (per-pair training, as the reference) for `num_batches` steps.

  Epoch e takes all pairs inside groups (`pairs.pairs_within_groups`, order drawn with seed + e) in a shuffled
  order.

  Raises:
    ValueError: for bad sizes or when the data hold no valid pair.
  """
  check_range("batch_size", batch_size, 1)
  check_range("num_batches", num_batches, 1)
  needed = batch_size * num_batches
  parts, total, epoch = [], 0, 0
  while total < needed:
    pair_set = pairs.pairs_within_groups(items.labels, items.group_ids, min_label_gap, seed=seed + epoch)
    if len(pair_set) == 0:
      raise ValueError("The data hold no pair of items with different labels inside a group.")
    order = np.random.default_rng([seed, epoch]).permutation(len(pair_set))
    parts.append((pair_set.left[order], pair_set.right[order], pair_set.pair_labels[order]))
    total += len(pair_set)
    epoch += 1
  left, right, pair_labels = (np.concatenate(p)[:needed] for p in zip(*parts, strict=True))
  return tf.data.Dataset.from_tensor_slices(
      {"left": left, "right": right, "pair_labels": pair_labels}).batch(batch_size, drop_remainder=True)


def group_pair_scores(ranker: margin_model.PairwiseRanker, items: tf.Tensor, mask: tf.Tensor,
                      labels: tf.Tensor, flips: tf.Tensor | None = None, min_label_gap: float = 0.0,
                      training=None) -> dict[str, tf.Tensor]:
  """Scores all valid pairs of padded lists from one encoding per item.

  Args:
    ranker: A `PairwiseRanker`.
    items: Strings [num_lists, n] or embeddings [num_lists, n, d].
    mask: bool [num_lists, n].
    labels: float [num_lists, n].
    flips: Optional bool [num_lists, P] pair orientations.
    min_label_gap: Minimum label difference of a pair.
    training: Keras training flag.

  Returns:
    {"scores": [num_valid, 2] (f(p_i), f(p_j)), "pair_labels": [num_valid] E, "embeddings": [num_lists, n, d]
    (left-encoder embeddings, for a class head)}; valid pairs in (list, pair position) order.
  """
  oriented = pairs.oriented_list_pairs(labels, mask, min_label_gap, flips)
  left_embeddings = ranker.encode_lists(items, mask, "left", training=training)
  right_embeddings = (ranker.encode_lists(items, mask, "right", training=training)
                      if ranker.separate_encoders else left_embeddings)
  # Compacting to the valid pairs keeps padding out of BatchNorm's batch statistics.
  where = tf.where(oriented["valid"])
  list_index = where[:, 0]
  left_pos = tf.cast(tf.gather_nd(oriented["left"], where), tf.int64)
  right_pos = tf.cast(tf.gather_nd(oriented["right"], where), tf.int64)
  left = tf.gather_nd(left_embeddings, tf.stack([list_index, left_pos], axis=1))
  right = tf.gather_nd(right_embeddings, tf.stack([list_index, right_pos], axis=1))
  return {"scores": ranker.score_embeddings(left, right, training=training),
          "pair_labels": tf.gather_nd(oriented["pair_labels"], where), "embeddings": left_embeddings}
