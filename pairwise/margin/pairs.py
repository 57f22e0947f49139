"""Pair construction inside contextual groups, group-wise splits, and the margin hinge (pure NumPy/TF
math)."""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from rank4class_data.validation import check_range

# Padded lists, the one convention of the pairwise package: a list of n slots comes with a bool `mask`
# [num_lists, n], True for real items, and the mask alone says which slots are real (ranking metrics,
# aggregation, pair validity, encoding only real items). What padded slots hold besides: row indices
# `PADDING_INDEX` (an item table's rows; mask = rows >= 0), labels `PADDING_LABEL` (TF-Ranking reads labels <
# 0 as padding, so its losses need no mask), scores `aggregate.PADDING_SCORE` (below any real score). Ragged
# lists (`list_offsets`) become padded ones through `ranking_metrics.ragged_to_padded`.
PADDING_INDEX = -1
PADDING_LABEL = -1.0


@dataclasses.dataclass
class PairSet:
  """Training pairs as row indices into a `rank4class_data.ranking.grouped_items.GroupedItems`.

  Attributes:
    left: int64 [num_pairs] row of the left passage p_i.
    right: int64 [num_pairs] row of the right passage p_j.
    pair_labels: float32 [num_pairs] E(p_i, p_j) of Eqn. 1: +1 when the left item is ranked higher, else -1.
  """

  left: np.ndarray
  right: np.ndarray
  pair_labels: np.ndarray

  def __len__(self) -> int:
    return len(self.left)


def pairs_within_groups(labels: np.ndarray, group_ids: np.ndarray, min_label_gap: float = 0.0,
                        seed: int | None = 0, randomize_order: bool = True) -> PairSet:
  """All combinations of two items inside each group whose labels differ (Rank over Class §3.1).

  A pair {a, b} is kept when |label_a - label_b| > 0 and |label_a - label_b| >= `min_label_gap`. Its
  left/right order is drawn uniformly at random (the reference keeps the lower row first, so E correlates with
  row order). Pairs are returned grouped by group id, then by (a, b) with a < b in row order.

  Args:
    labels: float [n] ranking labels.
    group_ids: int [n] group of each item; pairs never cross groups.
    min_label_gap: Minimum absolute label difference of a kept pair (0 keeps every pair with distinct labels).
    seed: Seed of the order randomization.
    randomize_order: False keeps the lower row index on the left.

  Returns:
    A `PairSet`.

  Raises:
    ValueError: for mismatched shapes or a negative `min_label_gap`.
  """
  labels = np.asarray(labels, dtype=np.float64)
  group_ids = np.asarray(group_ids)
  if labels.ndim != 1 or labels.shape != group_ids.shape:
    raise ValueError(f"`labels` {labels.shape} and `group_ids` {group_ids.shape} must be equal 1-D shapes.")
  check_range("min_label_gap", min_label_gap, 0.0)
  order = np.argsort(group_ids, kind="stable")
  _, starts = np.unique(group_ids[order], return_index=True)
  bounds = list(starts) + [len(order)]
  lefts, rights = [], []
  for start, end in zip(bounds[:-1], bounds[1:], strict=True):
    rows = np.sort(order[start:end])
    i, j = np.triu_indices(len(rows), k=1)
    gap = np.abs(labels[rows[i]] - labels[rows[j]])
    keep = (gap > 0) & (gap >= min_label_gap)
    lefts.append(rows[i[keep]])
    rights.append(rows[j[keep]])
  left = np.concatenate(lefts).astype(np.int64) if lefts else np.zeros([0], np.int64)
  right = np.concatenate(rights).astype(np.int64) if rights else np.zeros([0], np.int64)
  if randomize_order:
    swap = np.random.default_rng(seed).random(len(left)) < 0.5
    left, right = np.where(swap, right, left), np.where(swap, left, right)
  pair_labels = np.where(labels[left] > labels[right], 1.0, -1.0).astype(np.float32)
  return PairSet(left=left, right=right, pair_labels=pair_labels)


@dataclasses.dataclass
class GroupSplit:
  """Row indices of a split by group: every group lies wholly in one of the three parts.

  Attributes:
    train: int64 [n_train] rows.
    validation: int64 [n_validation] rows.
    test: int64 [n_test] rows.
  """

  train: np.ndarray
  validation: np.ndarray
  test: np.ndarray


def split_by_group(group_ids: np.ndarray, validation_fraction: float, test_fraction: float,
                   seed: int) -> GroupSplit:
  """Splits rows into train/validation/test by whole groups, never by pair (the reference leaks by pair).

  Groups are shuffled with `seed`; walking them in that order, a group goes to the part in which the midpoint
  of its rows falls on the cumulative row axis [0, n): train for [0, f_train·n), validation for the next
  `validation_fraction`·n rows, test for the rest. Fractions are thus met in rows up to one group's size.

  Args:
    group_ids: [n] group of each row.
    validation_fraction: In [0, 1).
    test_fraction: In [0, 1); the two sum below 1.
    seed: Shuffling seed.

  Returns:
    A `GroupSplit` with sorted row indices.

  Raises:
    ValueError: for fractions outside [0, 1) or summing to >= 1.
  """
  check_range("validation_fraction", validation_fraction, 0.0, 1.0, high_inclusive=False)
  check_range("test_fraction", test_fraction, 0.0, 1.0, high_inclusive=False)
  if validation_fraction + test_fraction >= 1.0:
    raise ValueError(
        f"`validation_fraction` + `test_fraction` must be < 1, got {validation_fraction} + {test_fraction}.")
  group_ids = np.asarray(group_ids)
  groups, inverse, counts = np.unique(group_ids, return_inverse=True, return_counts=True)
  permutation = np.random.default_rng(seed).permutation(len(groups))
  ends = np.cumsum(counts[permutation])
  midpoints = (ends - counts[permutation] / 2.0) / len(group_ids)
  train_end = 1.0 - validation_fraction - test_fraction
  part = np.where(midpoints < train_end, 0, np.where(midpoints < train_end + validation_fraction, 1, 2))
  part_of_group = np.empty(len(groups), np.int64)
  part_of_group[permutation] = part
  row_part = part_of_group[inverse]
  return GroupSplit(*(np.flatnonzero(row_part == k).astype(np.int64) for k in range(3)))


def group_lists(group_ids: np.ndarray, list_size: int | None = None, seed: int | None = None,
                min_items: int = 1) -> np.ndarray:
  """Packs each group's rows into padded lists of at most `list_size` items.

  A group larger than `list_size` is cut into ceil(size / list_size) nearly equal chunks after a seeded
  shuffle (pairs across chunks are then unseen for that epoch; a fresh seed per epoch re-draws the chunks).

  Args:
    group_ids: [n] group of each row.
    list_size: Maximum items per list; None uses the largest group size (no chunking).
    seed: None keeps rows in order and lists in group order; an int shuffles rows within groups and the lists.
    min_items: Lists with fewer items are dropped (2 for pairwise training).

  Returns:
    int64 [num_lists, list_size] row indices, `PADDING_INDEX` where a list is shorter.

  Raises:
    ValueError: for `list_size` < 1.
  """
  group_ids = np.asarray(group_ids)
  if list_size is not None:
    check_range("list_size", list_size, 1)
  rng = np.random.default_rng(seed) if seed is not None else None
  order = np.argsort(group_ids, kind="stable")
  _, starts = np.unique(group_ids[order], return_index=True)
  bounds = list(starts) + [len(order)]
  groups = [order[s:e] for s, e in zip(bounds[:-1], bounds[1:], strict=True)]
  width = list_size or max((len(g) for g in groups), default=1)
  lists = []
  for rows in groups:
    if rng is not None:
      rows = rng.permutation(rows)
    for chunk in np.array_split(rows, -(-len(rows) // width)):
      if len(chunk) >= min_items:
        lists.append(np.pad(chunk, (0, width - len(chunk)), constant_values=PADDING_INDEX))
  if not lists:
    return np.zeros([0, width], np.int64)
  lists = np.stack(lists).astype(np.int64)
  if rng is not None:
    lists = lists[rng.permutation(len(lists))]
  return lists


def list_pair_positions(list_size: int) -> tuple[np.ndarray, np.ndarray]:
  """Positions (a, b), a < b, of all unordered pairs in a list: two int32 arrays
  [list_size·(list_size-1)/2]."""
  check_range("list_size", list_size, 1)
  a, b = np.triu_indices(list_size, k=1)
  return a.astype(np.int32), b.astype(np.int32)


def oriented_list_pairs(labels: tf.Tensor, mask: tf.Tensor, min_label_gap: float = 0.0,
                        flips: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
  """All pairs of each padded list with their orientation and ranking label E, in-graph.

  For the P = n(n-1)/2 position pairs (a, b), a < b, of a list (fixed order of `list_pair_positions`), the
  pair is valid when both items are real, their labels differ and |Δlabel| >= `min_label_gap` — the same rule
  as `pairs_within_groups`. Where `flips` is true the pair is presented as (b, a).

  Args:
    labels: float [num_lists, list_size] labels.
    mask: bool [num_lists, list_size], true for real items.
    min_label_gap: Minimum absolute label difference.
    flips: Optional bool [num_lists, P]; None keeps a on the left.

  Returns:
    Dict of "left", "right" (int32 [num_lists, P] positions), "pair_labels" (float32 [num_lists, P], ±1 for
    valid pairs, 0 otherwise) and "valid" (bool [num_lists, P]).
  """
  labels = tf.convert_to_tensor(labels, tf.float32)
  mask = tf.cast(mask, tf.bool)
  list_size = labels.shape[-1]
  a, b = list_pair_positions(list_size)
  num_lists = tf.shape(labels)[0]
  left = tf.tile(a[tf.newaxis, :], [num_lists, 1])
  right = tf.tile(b[tf.newaxis, :], [num_lists, 1])
  if flips is not None:
    flips = tf.cast(flips, tf.bool)
    left, right = tf.where(flips, right, left), tf.where(flips, left, right)
  left_labels = tf.gather(labels, left, batch_dims=1)
  right_labels = tf.gather(labels, right, batch_dims=1)
  gap = tf.abs(left_labels - right_labels)
  valid = (tf.gather(mask, left, batch_dims=1) & tf.gather(mask, right, batch_dims=1) & (gap > 0.0)
           & (gap >= min_label_gap))
  pair_labels = tf.where(valid, tf.sign(left_labels - right_labels), 0.0)
  return {"left": left, "right": right, "pair_labels": pair_labels, "valid": valid}


def margin_ranking_loss(left_scores: tf.Tensor, right_scores: tf.Tensor, pair_labels: tf.Tensor,
                        margin: float = 2.0) -> tf.Tensor:
  """Per-pair margin ranking loss max(0, -E·(f(p_i) - f(p_j)) + γ) (Rank over Class Eqn. 2, unreduced).

  Equals PyTorch's `nn.MarginRankingLoss(margin, reduction="none")(x1, x2, y)`.

  Args:
    left_scores: float [batch_size] f(p_i).
    right_scores: float [batch_size] f(p_j).
    pair_labels: float [batch_size] E(p_i, p_j) in {-1, +1}.
    margin: γ >= 0.

  Returns:
    float32 [batch_size] losses.
  """
  left_scores = tf.convert_to_tensor(left_scores, tf.float32)
  right_scores = tf.convert_to_tensor(right_scores, tf.float32)
  pair_labels = tf.cast(pair_labels, tf.float32)
  return tf.nn.relu(-pair_labels * (left_scores - right_scores) + margin)
