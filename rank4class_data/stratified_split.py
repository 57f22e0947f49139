"""Stratified splits of labelled rows: each class gives its share of the held-out rows, chosen by a seeded
permutation, so a split is reproducible."""

import numpy as np

from rank4class_data.validation import check_range


def validation_counts(class_sizes: np.ndarray, validation_fraction: float, seed: int) -> np.ndarray:
  """Rows each class gives to validation: `round(n * validation_fraction)` in all (n = the rows), stratified.

  Each class gets the whole part of its share `n_c * validation_fraction`; the rows left go one each to the
  classes with the largest remaining fractions (ties in a seeded order), then again while rows are left. No
  class gives all its rows: a class of one row stays in training. So the total is exact whenever the classes
  can give it: at least one row when the fraction is positive and some class has two rows; at most all rows
  but one per class. With many small classes, some classes then have no validation row (their share rounds to
  0).

  Args:
    class_sizes: int [num_classes] rows per class.
    validation_fraction: In [0, 1).
    seed: Seed of the tie order.

  Returns:
    int64 [num_classes] validation rows per class.
  """
  sizes = np.asarray(class_sizes, np.int64)
  capacity = np.maximum(sizes - 1, 0)
  target = int(round(float(sizes.sum()) * validation_fraction))
  if validation_fraction > 0 and capacity.sum() > 0:
    target = max(target, 1)
  target = min(target, int(capacity.sum()))
  share = sizes * validation_fraction
  counts = np.minimum(np.floor(share).astype(np.int64), capacity)
  tie_order = np.random.default_rng([seed, 1]).random(len(sizes))
  while counts.sum() < target:
    open_classes = np.flatnonzero(counts < capacity)
    # Largest remaining share first, ties in the seeded order.
    order = open_classes[np.lexsort((tie_order[open_classes], -(share[open_classes] - counts[open_classes])))]
    counts[order[:target - int(counts.sum())]] += 1
  return counts


def train_validation_split(labels: np.ndarray, validation_fraction: float,
                           seed: int) -> tuple[np.ndarray, np.ndarray]:
  """Splits row indices so that validation holds `round(n * validation_fraction)` rows, stratified by class
  (`validation_counts`), each class's rows chosen by a seeded permutation, so the split is reproducible.

  Args:
    labels: int [n] class ids.
    validation_fraction: In [0, 1).
    seed: Seed of the permutation.

  Returns:
    (train_idx, val_idx): sorted int64 index arrays that partition range(n).
  """
  labels = np.asarray(labels)
  if labels.ndim != 1:
    raise ValueError(f"`labels` must be 1-D, got shape {labels.shape}.")
  check_range("validation_fraction", validation_fraction, 0.0, 1.0, high_inclusive=False)
  _, sizes = np.unique(labels, return_counts=True)
  return split_by_class_counts(labels, validation_counts(sizes, validation_fraction, seed), seed)


def split_by_class_counts(labels: np.ndarray, counts: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """(rest, chosen): sorted int64 indices; `counts[i]` rows of the i-th class of `np.unique(labels)` chosen by
  a seeded permutation of that class's rows."""
  rng = np.random.default_rng(seed)
  chosen = [rng.permutation(np.flatnonzero(labels == label))[:count]
            for label, count in zip(np.unique(labels), counts, strict=True)]
  chosen_idx = np.sort(np.concatenate(chosen)).astype(np.int64) if chosen else np.zeros([0], np.int64)
  return np.setdiff1d(np.arange(len(labels)), chosen_idx).astype(np.int64), chosen_idx
