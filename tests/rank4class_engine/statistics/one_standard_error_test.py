"""Tests for rank4class_engine.statistics.one_standard_error: the rule's choice against hand-computed standard
errors, ties, NaN columns and the per-row metric losses."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_engine.statistics import one_standard_error


class ChooseTest(tf.test.TestCase):

  def test_a_simpler_model_within_one_standard_error_is_kept(self):
    losses = np.array([[1.0, 0.9], [0.0, 0.1], [1.0, 0.8]])
    choice = one_standard_error.choose(losses)
    # Differences to the best (column 1): [0.1, -0.1, 0.2], mean 1/15, sample std 0.1528, SE 0.0882 > 1/15.
    self.assertEqual((choice.index, choice.best, choice.rows), (0, 1, 3))
    self.assertAllClose(choice.means, [2 / 3, 0.6])
    self.assertAllClose(choice.standard_errors, [np.std([0.1, -0.1, 0.2], ddof=1) / np.sqrt(3), 0.0])
    self.assertTrue(choice.within_noise)

  def test_a_better_model_beyond_the_noise_is_chosen(self):
    # Column 1 is lower by 0.1 on every row: the differences have no spread, so the SE is 0.
    losses = np.array([[0.5, 0.4], [0.7, 0.6], [0.2, 0.1], [0.9, 0.8]])
    choice = one_standard_error.choose(losses)
    self.assertEqual(choice.index, 1)
    self.assertFalse(choice.within_noise)

  def test_a_tie_keeps_the_simplest(self):
    losses = np.array([[0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    self.assertEqual(one_standard_error.choose(losses).index, 0)

  def test_one_row_keeps_the_best_or_a_simpler_tie(self):
    self.assertEqual(one_standard_error.choose(np.array([[0.3, 0.2]])).index, 1)
    self.assertEqual(one_standard_error.choose(np.array([[0.2, 0.2]])).index, 0)

  def test_a_nan_column_is_never_chosen(self):
    losses = np.array([[np.nan, 0.5], [0.0, 0.5]])
    self.assertEqual(one_standard_error.choose(losses).index, 1)

  def test_bad_inputs_raise(self):
    with self.assertRaisesRegex(ValueError, "rows, models"):
      one_standard_error.choose(np.zeros([0, 2]))
    with self.assertRaisesRegex(ValueError, "NaN"):
      one_standard_error.choose(np.full([2, 2], np.nan))


class PerRowMetricLossesTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("top_1_error", "top_1_error", [0.0, 1.0, 1.0, 1.0]),
      ("top_5_error", "top_5_error", [0.0, 0.0, 0.0, 1.0]),
      # 1 / log2(rank + 2) within the top 5: ranks 0, 1, 4 -> 1, 1/log2(3), 1/log2(6); rank 9 -> 0.
      ("ndcg_5", "ndcg_5", [-1.0, -1 / np.log2(3), -1 / np.log2(6), 0.0]),
      ("mrr", "mrr", [-1.0, -0.5, -0.2, -0.1]))
  def test_values_from_ranks(self, metric, expected):
    self.assertAllClose(one_standard_error.per_row_metric_losses(np.array([0, 1, 4, 9]), metric), expected)

  def test_a_metric_without_a_per_row_form_raises(self):
    with self.assertRaisesRegex(ValueError, "per-row form"):
      one_standard_error.per_row_metric_losses(np.array([0]), "loss")


if __name__ == "__main__":
  tf.test.main()
