"""Tests for rank4class_data.ranking.grouped_items: validation, subsets and dense group ids."""

import numpy as np
import tensorflow as tf

from rank4class_data.ranking.grouped_items import GroupedItems, dense_group_ids


class GroupedItemsTest(tf.test.TestCase):

  def test_negative_label_raises(self):
    with self.assertRaisesRegex(ValueError, "row 1 has -1"):
      GroupedItems(["a", "b"], np.array([0.0, -1.0]), np.array([0, 0]))

  def test_mismatched_group_ids_raises(self):
    with self.assertRaisesRegex(ValueError, "group_ids"):
      GroupedItems(["a", "b"], np.array([0.0, 1.0]), np.array([0]))

  def test_negative_class_label_raises(self):
    with self.assertRaisesRegex(ValueError, "class_labels"):
      GroupedItems(["a", "b"], np.array([0.0, 1.0]), np.array([0, 0]), class_labels=np.array([0, -2]))

  def test_subset_keeps_rows_of_texts_and_embeddings(self):
    texts = GroupedItems(["a", "b", "c"], np.array([0.0, 1.0, 2.0]), np.array([5, 5, 6]),
                               class_labels=np.array([0, 1, 2]))
    sub = texts.subset(np.array([2, 0]))
    self.assertEqual(sub.features, ["c", "a"])
    self.assertAllEqual(sub.labels, [2.0, 0.0])
    self.assertAllEqual(sub.group_ids, [6, 5])
    self.assertAllEqual(sub.class_labels, [2, 0])
    vectors = GroupedItems(np.eye(3, dtype=np.float32), np.zeros(3), np.zeros(3))
    self.assertAllEqual(vectors.subset(np.array([1])).features, [[0.0, 1.0, 0.0]])

  def test_dense_group_ids_sorts_names(self):
    ids, names = dense_group_ids(["pain", "acne", "pain"])
    self.assertAllEqual(ids, [1, 0, 1])
    self.assertEqual(names, ["acne", "pain"])


if __name__ == "__main__":
  tf.test.main()
