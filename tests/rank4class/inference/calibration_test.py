"""Tests of rank4class.inference.calibration against hand computations and NumPy references."""

import json
import math

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.inference import calibration


def _sample_labels(rng: np.random.Generator, probabilities: np.ndarray) -> np.ndarray:
  """One class per row drawn from its probabilities (inverse CDF)."""
  cumulative = np.cumsum(probabilities, axis=1)
  return np.minimum((rng.random([len(probabilities), 1]) > cumulative).sum(axis=1),
                    probabilities.shape[1] - 1)


def _synthetic(seed: int, n: int, num_classes: int = 5, temperature: float = 2.0, scale: float = 3.0):
  """Scores z ~ N(0, scale^2) and labels drawn from softmax(z / temperature)."""
  rng = np.random.default_rng(seed)
  scores = rng.normal(size=[n, num_classes]) * scale
  return scores, _sample_labels(rng, calibration.softmax(scores, temperature))


class SoftmaxTest(tf.test.TestCase):

  def test_softmax_of_hand_computed_scores(self):
    # softmax([0, ln 3]) = [1, 3] / 4; at T = 2: [1, sqrt 3] / (1 + sqrt 3).
    self.assertAllClose(calibration.softmax([[0.0, math.log(3.0)]]), [[0.25, 0.75]])
    self.assertAllClose(calibration.softmax([[0.0, math.log(3.0)]], 2.0),
                        [[1 / (1 + math.sqrt(3)), math.sqrt(3) / (1 + math.sqrt(3))]])

  def test_log_softmax_is_stable_for_huge_scores(self):
    log_p = calibration.log_softmax([[1e300, 0.0], [-1e300, -1e300]])
    self.assertAllClose(log_p, [[0.0, -1e300], [math.log(0.5), math.log(0.5)]])

  def test_negative_log_likelihood_by_hand(self):
    # Row 1: -ln 0.75; row 2: -ln 0.25.
    nll = calibration.negative_log_likelihood([[0.0, math.log(3.0)], [0.0, math.log(3.0)]], [1, 0])
    self.assertAllClose(nll, (-math.log(0.75) - math.log(0.25)) / 2)

  def test_non_positive_temperature_raises(self):
    with self.assertRaisesRegex(ValueError, "`temperature` must be > 0, got 0."):
      calibration.softmax([[1.0]], 0)
    with self.assertRaisesRegex(ValueError, "`bins` must be an integer >= 1, got 0."):
      calibration.expected_calibration_error([[1.0]], [0], bins=0)


class FitTemperatureTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(0, 1, 2)
  def test_recovers_the_temperature_the_labels_were_drawn_with(self, seed):
    scores, labels = _synthetic(seed, 4000, temperature=2.0)
    self.assertAllClose(calibration.fit_temperature(scores, labels), 2.0, rtol=0.1)

  def test_matches_a_dense_numpy_grid_search(self):
    scores, labels = _synthetic(7, 500, num_classes=4, temperature=0.5, scale=1.0)
    grid = np.exp(np.linspace(math.log(0.05), math.log(5.0), 4001))
    # Cross-entropy against the labels smoothed by one uniform pseudo-row (weight 1 / 501).
    target = (500 * np.eye(4)[labels] + 0.25) / 501
    nll = [-np.mean((target * np.log(np.exp(scores / t) / np.exp(scores / t).sum(1, keepdims=True))).sum(1))
           for t in grid]
    self.assertAllClose(calibration.fit_temperature(scores, labels), grid[int(np.argmin(nll))], rtol=2e-3)

  def test_scale_of_the_scores_does_not_matter(self):
    scores, labels = _synthetic(3, 1000)
    self.assertAllClose(calibration.fit_temperature(scores * 1e6, labels),
                        1e6 * calibration.fit_temperature(scores, labels), rtol=1e-4)

  def test_equal_scores_and_one_class_give_one(self):
    self.assertEqual(calibration.fit_temperature(np.full([4, 3], 7.0), [0, 1, 2, 0]), 1.0)
    self.assertEqual(calibration.fit_temperature(np.zeros([3, 1]), [0, 0, 0]), 1.0)

  def test_rows_all_ranked_right_keep_a_finite_temperature(self):
    # Without smoothing T would fall to 0. With one uniform pseudo-row of 3 (smoothing 1/3) the optimum puts
    # p(true) = 1 - (1/3) / 2 = 5/6 (the smoothed target).
    fitted = calibration.Calibration.fit([[1e8, 0.0], [0.0, 1e8]], [0, 1])
    self.assertFalse(fitted.temperature_at_bound)
    self.assertAllClose(fitted.probabilities([[1e8, 0.0]]), [[5 / 6, 1 / 6]], atol=1e-5)

  def test_scores_against_the_labels_end_at_uniform_and_say_so(self):
    fitted = calibration.Calibration.fit([[0.0, 5.0], [5.0, 0.0]], [0, 1])
    self.assertTrue(fitted.temperature_at_bound)
    self.assertAllClose(fitted.probabilities([[0.0, 5.0]]), [[0.5, 0.5]], atol=1e-3)

  def test_bad_inputs_raise(self):
    with self.assertRaisesRegex(ValueError, "finite; row 1, class 0 is nan"):
      calibration.fit_temperature([[0.0, 1.0], [np.nan, 1.0]], [0, 1])
    with self.assertRaisesRegex(ValueError, r"class ids in \[0, 2\), got 0\.\.2"):
      calibration.fit_temperature([[0.0, 1.0], [0.0, 1.0]], [0, 2])
    with self.assertRaisesRegex(ValueError, "at least one labelled row"):
      calibration.fit_temperature(np.zeros([0, 3]), np.zeros([0], np.int64))


class ExpectedCalibrationErrorTest(tf.test.TestCase):

  def test_by_hand(self):
    # 5 bins. Rows 1-2: confidence 0.85 (bin (0.8, 1]), one right: |0.5 - 0.85| x 2/4 = 0.175. Rows 3-4: 0.65
    # and 0.62 (bin (0.6, 0.8]), both right: |1 - 0.635| x 2/4 = 0.1825.
    probabilities = [[0.85, 0.15], [0.85, 0.15], [0.35, 0.65], [0.38, 0.62]]
    self.assertAllClose(calibration.expected_calibration_error(probabilities, [0, 1, 1, 1], bins=5), 0.3575)

  def test_perfectly_calibrated_probabilities_have_about_zero_error(self):
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.ones(4), size=20000)
    labels = _sample_labels(rng, probabilities)
    self.assertLess(calibration.expected_calibration_error(probabilities, labels), 0.015)

  def test_temperature_removes_the_error_of_overconfident_scores(self):
    scores, labels = _synthetic(1, 4000, temperature=3.0)  # softmax(scores) is far too sharp.
    fitted = calibration.Calibration.fit(scores, labels)
    self.assertGreater(fitted.ece_before, 0.1)
    self.assertLess(fitted.ece_after, 0.03)
    self.assertLess(fitted.nll_after, fitted.nll_before)


class ConformalTest(tf.test.TestCase, parameterized.TestCase):

  def _calibration(self, scores: list[float]) -> calibration.Calibration:
    return calibration.Calibration(temperature=1.0, n=len(scores), nonconformity=scores, ece_before=0.0,
                                   ece_after=0.0, nll_before=0.0, nll_after=0.0)

  def test_threshold_is_the_finite_sample_quantile(self):
    fitted = self._calibration([0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6])  # Sorted: 0.1 ... 0.9, n = 9.
    self.assertAllClose(fitted.threshold(0.8), 0.8)  # ceil(10 x 0.8) = 8th smallest.
    self.assertAllClose(fitted.threshold(), 0.9)  # Default 0.9: ceil(10 x 0.9) = 9th.
    self.assertAllClose(fitted.threshold(0.5), 0.5)  # ceil(5) = 5th.
    # (99 + 1) x 0.9 is 90.00000000000001 in floats.
    self.assertEqual(calibration.conformal_rank(0.9, 99), 90)

  def test_unreachable_and_invalid_coverage_raise_naming_the_value(self):
    fitted = self._calibration([0.1 * i for i in range(1, 10)])
    with self.assertRaisesRegex(ValueError, "coverage 0.95 is out of reach with 9 calibration rows: it needs "
                                "at least 19"):
      fitted.threshold(0.95)
    self.assertFalse(fitted.reachable(0.95))
    for bad in (0.0, 1.0, 1.5, -0.1, "high"):
      with self.assertRaisesRegex(ValueError, rf"`coverage` must be in \(0, 1\), got {bad!r}\."):
        fitted.prediction_sets([[0.5, 0.5]], bad)

  def test_sets_hold_the_classes_under_the_threshold_and_never_are_empty(self):
    fitted = self._calibration([0.1 * i for i in range(1, 10)])
    probabilities = np.array([[0.6, 0.3, 0.1], [0.34, 0.33, 0.33]])
    # Threshold 0.5 (coverage 0.5): classes with p >= 0.5. Row 2 has none: its top class alone.
    self.assertAllEqual(fitted.prediction_sets(probabilities, 0.5),
                        [[True, False, False], [True, False, False]])
    # Threshold 0.8: p >= 0.2.
    self.assertAllEqual(fitted.prediction_sets(probabilities, 0.8), [[True, True, False], [True, True, True]])

  @parameterized.parameters(0, 1, 2, 3, 4)
  def test_held_out_coverage_is_near_the_target(self, seed):
    scores, labels = _synthetic(seed, 5000, num_classes=6, temperature=1.5)
    fitted = calibration.Calibration.fit(scores[:1000], labels[:1000])
    for coverage in (0.8, 0.9):
      held_out = fitted.evaluate(scores[1000:], labels[1000:], coverage)
      # Expected coverage in [c, c + 1/1001]; seeded spread ~0.015 (calibration draw) + 0.006 (held-out rows).
      self.assertAllClose(held_out["set_coverage"], coverage, atol=0.05)
      self.assertLess(held_out["mean_set_size"], 6)
      self.assertIsNone(held_out["coverage_warning"])  # Rows like the calibration rows: no false alarm.

  def test_rows_unlike_the_calibration_rows_are_reported(self):
    scores, labels = _synthetic(7, 1000, num_classes=6, temperature=1.5)
    fitted = calibration.Calibration.fit(scores, labels)
    # Labels far noisier.
    shifted_scores, shifted_labels = _synthetic(8, 4000, num_classes=6, temperature=4.0)
    shifted = fitted.evaluate(shifted_scores, shifted_labels)
    self.assertLess(shifted["set_coverage"], 0.8)
    self.assertRegex(shifted["coverage_warning"], r"^the 90% class sets hold the true class for [\d.]+% of "
                     r"these 4,000 rows, below the 86\.8% chance allows: these rows differ from the 1,000 "
                     r"validation rows")
    self.assertIn("\nWarning: the 90% class sets hold", calibration.metrics_line(shifted))
    summary = {**fitted.summary(), "test": shifted}
    self.assertTrue(calibration.warning_line(summary).startswith("Warning: the test split: the "
                                                                 "90% class sets"))
    self.assertIsNone(calibration.warning_line(fitted.summary()))

  @parameterized.parameters(
    (0.9, 0.843, 7528, 1129, True),    # 20 Newsgroups' test split (later posts): chance allows 87.1% and up.
    (0.9, 0.885, 7528, 1129, False),   # Within three deviations.
    (0.9, 0.97, 7528, 1129, False),    # More than asked: the guarantee is a lower bound.
    (0.9, 0.85, 379, 60, False),       # 60 calibration rows: chance allows 77.7% and up.
    (0.9, None, 379, 60, False),       # No sets (too few calibration rows for them).
  )
  def test_shortfall_beyond_chance(self, coverage, measured, n, calibration_rows, warned):
    note = calibration.coverage_shortfall(coverage, measured, n, calibration_rows)
    self.assertEqual(note is not None, warned, note)

  def test_streamed_batches_give_the_one_batch_result(self):
    scores, labels = _synthetic(5, 600)
    fitted = calibration.Calibration.fit(scores[:300], labels[:300])
    metrics = calibration.CalibrationMetrics(fitted)
    for start in range(300, 600, 64):
      metrics.update(scores[start:start + 64], labels[start:start + 64])
    streamed, whole = metrics.result(), fitted.evaluate(scores[300:], labels[300:])
    self.assertEqual(streamed.keys(), whole.keys())
    self.assertEqual(streamed.pop("coverage_warning"), whole.pop("coverage_warning"))
    for key, value in whole.items():
      self.assertAllClose(streamed[key], value)
    self.assertAllClose(whole["ece_before"],
                        calibration.expected_calibration_error(calibration.softmax(scores[300:]),
                                                               labels[300:]))


class CalibrationTest(tf.test.TestCase):

  def test_round_trips_through_json_and_keeps_the_sorted_scores(self):
    scores, labels = _synthetic(2, 200)
    fitted = calibration.Calibration.fit(scores, labels, coverage=0.8)
    again = calibration.Calibration.from_dict(json.loads(json.dumps(fitted.to_dict())))
    self.assertEqual(again, fitted)
    self.assertEqual(again.nonconformity, sorted(again.nonconformity))
    self.assertAllClose(again.probabilities(scores), calibration.softmax(scores, fitted.temperature))
    summary = fitted.summary()
    self.assertNotIn("nonconformity", summary)
    self.assertEqual((summary["n"], summary["coverage"]), (200, 0.8))
    self.assertAllClose(summary["threshold"], fitted.threshold(0.8))

  def test_too_few_rows_for_the_default_coverage_fit_without_a_threshold(self):
    fitted = calibration.Calibration.fit([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], [0, 1, 1])
    self.assertIsNone(fitted.summary()["threshold"])
    self.assertIn("too few validation rows for 90% class sets", calibration.summary_line(fitted.summary()))

  def test_many_scores_fit_on_a_seeded_subset_of_rows(self):
    scores, labels = _synthetic(4, 1000)
    fitted = calibration.Calibration.fit(scores, labels, max_scores=1000)  # 5 classes: 200 rows.
    self.assertEqual(fitted.n, 200)
    self.assertEqual(fitted, calibration.Calibration.fit(scores, labels, max_scores=1000))

  def test_summary_line_names_the_split_and_the_sets(self):
    scores, labels = _synthetic(6, 400)
    fitted = calibration.Calibration.fit(scores[:200], labels[:200])
    summary = {**fitted.summary(), "test": fitted.evaluate(scores[200:], labels[200:])}
    line = calibration.summary_line(summary)
    self.assertRegex(line, r"^Calibration \(validation, 200 rows\): temperature [\d.]+; ECE [\d.]+% -> "
                     r"[\d.]+% on test; 90% class sets: coverage [\d.]+%, mean size [\d.]+$")


if __name__ == "__main__":
  tf.test.main()
