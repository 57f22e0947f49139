"""Drugs.com reviews as grouped ranking items: reviews grouped by a contextual pivot, ranked by a label."""

import numpy as np

from rank4class_data.datasets import classification
from rank4class_data.ranking.grouped_items import GroupedItems, dense_group_ids
from rank4class_data.validation import check_choice

PIVOTS = ("condition", "drug_name", "none")
LABELS = ("rating", "useful_count")


def drug_review_items(pivot: str = "condition", label: str = "rating",
                      splits: tuple[str, ...] = ("train", "test"),
                      max_items_per_group: int = 0, seed: int = 0) -> GroupedItems:
  """Drugs.com reviews as `GroupedItems`: pooled `splits`, grouped by `pivot`, ranked by `label`.

  Args:
    pivot: One of `PIVOTS`: the condition, the drug name, or "none" (one group "all" of every review).
    label: One of `LABELS`: the ordinal rating (0 negative, 1 neutral, 2 positive) or usefulCount.
    splits: Splits of `rank4class_data.datasets.load_drug_reviews` pooled in this order.
    max_items_per_group: > 0: a larger group keeps a random subset of this many reviews (in row order).
    seed: Seed of that subset.

  Returns:
    The reviews; class labels are always the ordinal rating.

  Raises:
    ValueError: for an unknown pivot or label.
  """
  check_choice("pivot", pivot, PIVOTS)
  check_choice("label", label, LABELS)
  texts, ratings, useful, keys = [], [], [], []
  for split in splits:
    data = classification.load_drug_reviews(split)
    texts += data.reviews
    ratings.append(data.ratings)
    useful.append(data.useful_counts)
    keys += {"condition": data.conditions, "drug_name": data.drug_names,
             "none": ["all"] * len(data.reviews)}[pivot]
  ratings = np.concatenate(ratings)
  useful = np.concatenate(useful)
  group_ids, names = dense_group_ids(keys)
  items = GroupedItems(features=texts, labels=(ratings if label == "rating" else useful).astype(np.float64),
                       group_ids=group_ids, class_labels=ratings, group_names=names)
  if max_items_per_group > 0:
    rng = np.random.default_rng(seed)
    keep = np.concatenate([
        np.sort(rng.permutation(np.flatnonzero(group_ids == g))[:max_items_per_group])
        for g in np.unique(group_ids)])
    items = items.subset(np.sort(keep))
  return items
