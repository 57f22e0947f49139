"""Tests for rank4class_engine.statistics.seed_statistics: mean and sample std against NumPy, NaNs, one seed,
the format."""

import math

import numpy as np
import tensorflow as tf

from rank4class_engine.statistics.seed_statistics import SeedStatistics


class SeedStatisticsTest(tf.test.TestCase):

  def test_mean_and_sample_std_match_numpy(self):
    values = [0.81, 0.78, 0.9, 0.85, 0.8]
    statistics = SeedStatistics.of(values)
    self.assertAllClose([statistics.mean, statistics.std], [np.mean(values), np.std(values, ddof=1)])
    self.assertEqual(statistics.count, 5)

  def test_two_seeds_by_hand(self):
    # mean (1 + 3) / 2 = 2; sample variance ((1 - 2)^2 + (3 - 2)^2) / (2 - 1) = 2.
    self.assertEqual(SeedStatistics.of([1.0, 3.0]), SeedStatistics(2.0, math.sqrt(2.0), 2))

  def test_one_seed_has_zero_std(self):
    self.assertEqual(SeedStatistics.of(np.array([0.42])), SeedStatistics(0.42, 0.0, 1))

  def test_a_nan_seed_shows_as_nan_by_default(self):
    # A diverged seed must not vanish from a study's mean.
    statistics = SeedStatistics.of([1.0, float("nan"), 4.0])
    self.assertTrue(math.isnan(statistics.mean) and math.isnan(statistics.std))
    self.assertEqual(statistics.count, 3)
    self.assertTrue(math.isnan(SeedStatistics.of([float("nan")]).std))

  def test_nans_are_left_out_when_asked(self):
    values = [1.0, float("nan"), 4.0, 7.0]
    statistics = SeedStatistics.of(values, skip_nan=True)
    self.assertAllClose([statistics.mean, statistics.std], [np.nanmean(values), np.nanstd(values, ddof=1)])
    self.assertEqual(statistics.count, 3)
    self.assertEqual(SeedStatistics.of([float("nan"), 2.5], skip_nan=True), SeedStatistics(2.5, 0.0, 1))

  def test_all_nan_is_nan_and_no_values_raise(self):
    statistics = SeedStatistics.of([float("nan")] * 2, skip_nan=True)
    self.assertTrue(math.isnan(statistics.mean) and math.isnan(statistics.std))
    self.assertEqual(statistics.count, 0)
    with self.assertRaisesRegex(ValueError, "No values"):
      SeedStatistics.of([])

  def test_format(self):
    self.assertEqual(SeedStatistics(12.3449, 0.5551, 3).format(), "12.34 ± 0.56")
    self.assertEqual(SeedStatistics.of([12.3, 13.1]).format(), "12.70 ± 0.57")
    self.assertEqual(SeedStatistics(0.5, 0.0, 1).format(digits=3), "0.500")  # One seed: no spread to show.


if __name__ == "__main__":
  tf.test.main()
