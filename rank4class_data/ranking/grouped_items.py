"""Items to rank in contextual groups (texts or embeddings with labels and group ids): the pairwise models'
input."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

# Separates query and passage in one concatenated item (the paper's MS MARCO input, §4.4). Plain text, since a
# literal "[SEP]" is split into "[", "sep", "]" by BERT's basic tokenizer.
QUERY_PASSAGE_SEPARATOR = " | "


@dataclasses.dataclass
class GroupedItems:
  """Items to rank, each in one contextual group ("contextual pivot", Rank over Class §3.1).

  Attributes:
    features: The items: a list of `num_items` strings, or a float32 array [num_items, dim] of precomputed
      (frozen-encoder) embeddings.
    labels: float64 [num_items] ranking labels; a higher label is ranked higher (E = +1 for the left item of a
      pair when its label is larger, Eqn. 1). Must be finite and >= 0 (negative labels are TF-Ranking
      padding).
    group_ids: int64 [num_items] id of each item's group (user, product, query, condition, ...).
    class_labels: Optional int64 [num_items] absolute class of each item (double-headed option, class
      conversion); None when the data set has none.
    group_names: Optional names of the groups, indexed by group id.
  """

  features: list[str] | np.ndarray
  labels: np.ndarray
  group_ids: np.ndarray
  class_labels: np.ndarray | None = None
  group_names: list[str] | None = None

  def __post_init__(self):
    num_items = len(self.features)
    self.labels = np.asarray(self.labels, dtype=np.float64)
    self.group_ids = np.asarray(self.group_ids, dtype=np.int64)
    if self.labels.shape != (num_items,):
      raise ValueError(f"`labels` must have shape [{num_items}] like `features`, got {self.labels.shape}.")
    if self.group_ids.shape != (num_items,):
      raise ValueError(f"`group_ids` must have shape [{num_items}] like `features`, got "
                       f"{self.group_ids.shape}.")
    bad = np.flatnonzero(~np.isfinite(self.labels) | (self.labels < 0))
    if bad.size:
      raise ValueError(f"`labels` must be finite and >= 0; row {bad[0]} has {self.labels[bad[0]]}.")
    if self.class_labels is not None:
      self.class_labels = np.asarray(self.class_labels, dtype=np.int64)
      if self.class_labels.shape != (num_items,):
        raise ValueError(
            f"`class_labels` must have shape [{num_items}] like `features`, got {self.class_labels.shape}.")
      if num_items and self.class_labels.min() < 0:
        row = int(np.argmin(self.class_labels))
        raise ValueError(f"`class_labels` must be >= 0; row {row} has {self.class_labels[row]}.")
    if isinstance(self.features, np.ndarray) and self.features.ndim != 2:
      raise ValueError(f"Embedding `features` must be [num_items, dim], got shape {self.features.shape}.")

  def __len__(self) -> int:
    return len(self.features)

  def subset(self, rows: np.ndarray) -> GroupedItems:
    """Returns the items at `rows` (int array), keeping group ids and names."""
    rows = np.asarray(rows, dtype=np.int64)
    if isinstance(self.features, np.ndarray):
      features = self.features[rows]
    else:
      features = [self.features[i] for i in rows]
    return GroupedItems(
        features=features,
        labels=self.labels[rows],
        group_ids=self.group_ids[rows],
        class_labels=None if self.class_labels is None else self.class_labels[rows],
        group_names=self.group_names)


def dense_group_ids(keys: Sequence[object]) -> tuple[np.ndarray, list[str]]:
  """Maps arbitrary group keys (e.g. condition names) to ids 0..G-1 in sorted key order.

  Returns:
    (group_ids int64 [n], group_names list of G strings).
  """
  names, ids = np.unique(np.asarray([str(k) for k in keys], dtype=object).astype(str), return_inverse=True)
  return ids.astype(np.int64), [str(n) for n in names]
