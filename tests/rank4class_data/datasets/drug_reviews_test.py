"""Tests for rank4class_data.datasets.drug_reviews: reviews grouped by a pivot, ranked by rating or
usefulCount."""

import numpy as np
import tensorflow as tf

from rank4class_data.datasets import drug_reviews


class DrugReviewItemsTest(tf.test.TestCase):

  def test_by_condition(self):
    items = drug_reviews.drug_review_items("condition", "rating")
    self.assertLen(items, 979)
    self.assertEqual(set(np.unique(items.labels)), {0.0, 1.0, 2.0})
    self.assertIn("Birth Control", items.group_names)
    self.assertAllEqual(items.class_labels, items.labels.astype(np.int64))

  def test_useful_count_capped_per_group(self):
    capped = drug_reviews.drug_review_items("condition", "useful_count", max_items_per_group=5)
    self.assertLessEqual(np.bincount(capped.group_ids).max(), 5)
    self.assertGreater(capped.labels.max(), 2)
    self.assertLessEqual(capped.class_labels.max(), 2)

  def test_no_pivot_is_one_group_per_split_selection(self):
    items = drug_reviews.drug_review_items("none", "rating", splits=("test",))
    self.assertLen(items, 379)
    self.assertEqual(items.group_names, ["all"])

  def test_unknown_pivot_raises(self):
    with self.assertRaisesRegex(ValueError, "pivot"):
      drug_reviews.drug_review_items("user")


if __name__ == "__main__":
  tf.test.main()
