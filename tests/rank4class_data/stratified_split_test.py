"""Tests for rank4class_data.stratified_split: exact held-out totals, stratified and seeded."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_data import datasets, stratified_split


class StratifiedSplitTest(tf.test.TestCase, parameterized.TestCase):

  def test_partition_keeps_class_shares(self):
    labels = np.array([0] * 10 + [1] * 20 + [2] * 2)
    train_idx, val_idx = stratified_split.train_validation_split(labels, 0.2, seed=1)
    self.assertAllEqual(np.sort(np.concatenate([train_idx, val_idx])), np.arange(32))
    # round(32 * 0.2) = 6 rows: 10*0.2 and 20*0.2; the two-row class's share (0.4) rounds to none.
    self.assertAllEqual(np.bincount(labels[val_idx], minlength=3), [2, 4, 0])
    same = stratified_split.train_validation_split(labels, 0.2, seed=1)
    self.assertAllEqual(same[1], val_idx)
    self.assertNotAllEqual(stratified_split.train_validation_split(labels, 0.2, seed=2)[1], val_idx)

  @parameterized.parameters(0.1, 0.01, 0.5)
  def test_many_small_classes_give_exactly_the_fraction_and_never_a_whole_class(self, fraction):
    labels = np.random.default_rng(0).integers(0, 1100, size=6000)  # ~5.5 rows per class, some with 1.
    train_idx, val_idx = stratified_split.train_validation_split(labels, fraction, seed=0)
    self.assertLen(val_idx, round(6000 * fraction))
    self.assertAllEqual(np.unique(labels[train_idx]), np.unique(labels))  # Every class keeps a training row.

  def test_largest_remainders_get_the_rows_left(self):
    # Shares 1.5, 0.9, 0.6 (total 3): whole parts 1, 0, 0, then the two largest remainders (0.9, 0.6).
    self.assertAllEqual(stratified_split.validation_counts(np.array([5, 3, 2]), 0.3, seed=0), [1, 1, 1])
    # Shares 0.1 x 10 -> 1 row in all, to one class; at least one row for a positive fraction.
    self.assertEqual(int(stratified_split.validation_counts(np.full(10, 2), 0.05, seed=0).sum()), 1)
    # One row each.
    self.assertEqual(int(stratified_split.validation_counts(np.array([1, 1, 1]), 0.5, seed=0).sum()), 0)

  @parameterized.named_parameters(("negative", -0.1), ("one", 1.0))
  def test_bad_fraction_raises(self, fraction):
    with self.assertRaisesRegex(ValueError, "validation_fraction"):
      stratified_split.train_validation_split(np.zeros(4), fraction, seed=0)

  def test_datasets_names_the_same_functions(self):
    self.assertIs(datasets.train_validation_split, stratified_split.train_validation_split)
    self.assertIs(datasets.validation_counts, stratified_split.validation_counts)


if __name__ == "__main__":
  tf.test.main()
