"""Tests for rank4class.evaluation.baselines: each baseline's ranks against hand counts, the choice of C,
non-convergence stated, the kinds of input, and the report lines."""

import os
from unittest import mock

import numpy as np
import tensorflow as tf

from rank4class.evaluation import baselines
from rank4class.inference import full_class_scoring
from rank4class.training import training_data as data_lib


def _prepared(kind: str, train, validation, test=None, raw_texts=None,
              classes: int = 3) -> data_lib.PreparedData:
  split = lambda pair: data_lib.ArraySplit(np.asarray(pair[0]), np.asarray(pair[1], np.int64))  # noqa: E731
  return data_lib.PreparedData([f"c{i}" for i in range(classes)], kind, split(train), split(validation),
                               split(test) if test is not None else None, raw_texts=raw_texts)


def _blobs(rows_per_class: int, seed: int, classes: int = 3, spread: float = 0.3) -> tuple[np.ndarray,
                                                                                           np.ndarray]:
  """Gaussian blobs around the corners of a simplex: linearly separable up to `spread`."""
  rng = np.random.default_rng(seed)
  labels = np.repeat(np.arange(classes), rows_per_class)
  return (np.eye(classes)[labels] * 3 + rng.normal(0, spread,
                                                   (len(labels), classes))).astype(np.float32), labels


class MajorityTest(tf.test.TestCase):

  def test_ties_are_broken_by_class_id(self):
    ranks = baselines._majority_ranks(np.array([0, 1, 2]), np.array([2, 1, 0]), 3)
    self.assertAllEqual(ranks, [2, 1, 0])

  def test_ranks_classes_by_training_frequency(self):
    # Training counts: class 0 x3, class 1 x1, class 2 x2 -> order 0, 2, 1.
    ranks = baselines._majority_ranks(np.array([0, 0, 0, 1, 2, 2]), np.array([0, 1, 2, 2]), 3)
    self.assertAllEqual(ranks, [0, 2, 1, 1])
    metrics = full_class_scoring.rank_metrics(ranks, (1,))
    self.assertAllClose(metrics["top_1_error"], 0.75)
    self.assertAllClose(metrics["mrr"], (1 + 1 / 3 + 1 / 2 + 1 / 2) / 4)


class LogisticRegressionTest(tf.test.TestCase):

  def test_separable_features_are_classified_and_c_is_chosen_on_validation(self):
    data = _prepared(data_lib.DENSE_INPUT, _blobs(20, 0), _blobs(10, 1), _blobs(10, 2))
    report = baselines.compute(baselines.BaselineConfig(), data, ks=(1, 2))
    self.assertEqual(report["split"], "test")
    self.assertEqual((report["n"], report["train_rows"]), (30, 60))
    rows = {row["name"]: row for row in report["rows"]}
    self.assertCountEqual(rows, [baselines.MAJORITY, baselines.FEATURES_LR])
    # Balanced: the tie is broken by class id, so class 0 is predicted for every row (never all three at
    # once).
    self.assertAllClose(rows[baselines.MAJORITY]["metrics"]["top_1_error"], 2 / 3)
    self.assertAllClose(rows[baselines.MAJORITY]["metrics"]["mrr"], (1 + 1 / 2 + 1 / 3) / 3)
    fit = rows[baselines.FEATURES_LR]["fit"]
    self.assertEqual(rows[baselines.FEATURES_LR]["metrics"]["top_1_error"], 0.0)
    self.assertTrue(fit["converged"])
    self.assertIn(fit["inverse_regularization"], (1.0, 10.0, 100.0))
    self.assertEqual(fit["validation_top_1_error"], 0.0)
    self.assertEqual(baselines.best_row(report)["name"], baselines.FEATURES_LR)

  def test_lowest_validation_error_picks_c(self):
    # Validation labels that only the strongest regularisation (all rows predicted as the majority class 0)
    # gets right: C = 1e-6 must be kept, whatever it does on the test rows.
    x, y = _blobs(10, 0)
    train = (np.concatenate([x, x[:5]]), np.concatenate([y, y[:5]]))  # Class 0 is the majority.
    data = _prepared(data_lib.DENSE_INPUT, train, (x[10:], np.zeros(20, np.int64)), (x, y))
    report = baselines.compute(baselines.BaselineConfig(inverse_regularization=(1e-6, 100.0)), data)
    fit = report["rows"][1]["fit"]
    self.assertEqual(fit["inverse_regularization"], 1e-6)
    self.assertAllClose(fit["validation_top_1_error"], 0.0)

  def test_beyond_the_selection_rows_c_is_chosen_on_a_subset_then_fitted_on_all(self):
    data = _prepared(data_lib.DENSE_INPUT, _blobs(20, 0), _blobs(10, 1))
    report = baselines.compute(baselines.BaselineConfig(select_rows=30), data)
    fit = report["rows"][1]["fit"]
    self.assertEqual((fit["selection_rows"], fit["train_rows"]), (30, 60))
    self.assertIn("(chosen on fits of 30 rows)", baselines.format_lines(report, None))
    self.assertEqual(report["rows"][1]["metrics"]["top_1_error"], 0.0)

  def test_every_c_is_fitted_from_scratch(self):
    # A warm start from C=1's optimum stops at once on many rows (its gradient is under lbfgs' tolerance): the
    # C=1e-6 fit must still reach its own optimum, so the validation error differs between the two C values.
    x, y = _blobs(10, 0)
    train = (np.concatenate([x, x[:5]]), np.concatenate([y, y[:5]]))
    data = _prepared(data_lib.DENSE_INPUT, train, (x[10:], np.zeros(20, np.int64)), (x, y))
    report = baselines.compute(baselines.BaselineConfig(inverse_regularization=(100.0, 1e-6)), data)
    self.assertEqual(report["rows"][1]["fit"]["inverse_regularization"], 1e-6)

  def test_a_fit_that_stops_short_is_reported_as_not_converged(self):
    data = _prepared(data_lib.DENSE_INPUT, _blobs(20, 0, spread=2.0), _blobs(10, 1))
    report = baselines.compute(baselines.BaselineConfig(max_iter=1, inverse_regularization=(100.0,)), data)
    self.assertFalse(report["rows"][1]["fit"]["converged"])
    self.assertIn("NOT CONVERGED after 1 iterations", baselines.format_lines(report, None))

  def test_a_class_absent_from_training_ranks_last(self):
    x, y = _blobs(10, 0, classes=3)
    keep = y < 2  # Class 2 has no training row.
    data = _prepared(data_lib.DENSE_INPUT, (x[keep], y[keep]), (x[keep], y[keep]), (x, y))
    report = baselines.compute(baselines.BaselineConfig(), data, ks=(1, 3))
    lr = report["rows"][1]["metrics"]
    # The 10 rows of class 2 rank it behind the two classes that have scores: rank 2, reciprocal rank 1/3.
    self.assertAllClose(lr["top_1_error"], 10 / 30)
    self.assertAllClose(lr["mrr"], (20 + 10 / 3) / 30)


class FitCacheTest(tf.test.TestCase):

  def _choose(self, folder: str):
    x, y = _blobs(20, 0)
    validation_x, validation_y = _blobs(10, 1)
    baselines._FITS.clear()  # The process's own memory of fits: only the folder may answer.
    with mock.patch.dict(os.environ, {baselines._FIT_CACHE_ENV: folder}):
      model, fit = baselines.choose_logistic_regression(x, y, validation_x, validation_y,
                                                        baselines.BaselineConfig())
    return model, fit, validation_x

  def test_a_stored_fit_is_read_back_with_the_same_probabilities_and_summary(self):
    folder = self.create_tempdir().full_path
    model, fit, validation_x = self._choose(folder)
    self.assertLen(os.listdir(folder), 1)
    with mock.patch.object(baselines, "_fit_lr", side_effect=AssertionError("refitted")):
      stored, stored_fit = self._choose(folder)[:2]
    self.assertEqual(stored_fit, fit)
    self.assertAllEqual(stored.predict_proba(validation_x), model.predict_proba(validation_x))
    self.assertAllEqual(stored.classes_, model.classes_)

  def test_other_libraries_or_fitting_code_refit(self):
    folder = self.create_tempdir().full_path
    self._choose(folder)
    # The fitting code's source.
    self.assertIn("def _choose_logistic_regression", baselines._solver_versions())
    with mock.patch.object(baselines, "_solver_versions", return_value="sklearn 0.0"), \
        mock.patch.object(baselines, "_fit_lr", wraps=baselines._fit_lr) as fit_lr:
      self._choose(folder)
    self.assertGreater(fit_lr.call_count, 0)
    self.assertLen(os.listdir(folder), 2)

  def test_a_file_that_does_not_read_is_refitted(self):
    folder = self.create_tempdir().full_path
    model, fit, validation_x = self._choose(folder)
    path = os.path.join(folder, os.listdir(folder)[0])
    with open(path, "wb") as f:
      f.write(b"not a zip file")
    refitted, refitted_fit = self._choose(folder)[:2]
    self.assertEqual(refitted_fit, fit)
    self.assertAllClose(refitted.predict_proba(validation_x), model.predict_proba(validation_x))
    self.assertTrue(np.load(path)["coef"].size)  # Rewritten whole.

  def test_an_empty_folder_setting_stores_nothing(self):
    with mock.patch.object(baselines, "atomic_output", side_effect=AssertionError("written")):
      self._choose("")

  def test_the_folder_is_trimmed_to_its_byte_cap_oldest_first(self):
    folder = self.create_tempdir().full_path
    old = os.path.join(folder, "0" * 32 + ".npz")
    with open(old, "wb") as f:
      f.write(b"x" * 100)
    os.utime(old, (1, 1))
    with mock.patch.object(baselines, "FIT_CACHE_BYTES", 1):  # Room for the newest file only.
      self._choose(folder)
    self.assertFalse(os.path.exists(old))
    self.assertLen(os.listdir(folder), 1)


class InputKindsTest(tf.test.TestCase):

  def test_frozen_text_gets_tfidf_on_the_raw_texts_and_lr_on_the_embeddings(self):
    words = ["apple banana fruit", "engine wheel car", "river lake water"]
    rng = np.random.default_rng(0)
    labels = np.tile(np.arange(3), 20)
    texts = np.asarray([f"{words[c]} note{rng.integers(100)}" for c in labels], dtype=object)
    embeddings = rng.normal(size=(60, 4)).astype(np.float32)  # Noise: only the texts carry the class.
    data = _prepared(data_lib.EMBEDDING_INPUT, (embeddings[:40], labels[:40]), (embeddings[40:], labels[40:]),
                     raw_texts=(texts[:40], texts[40:], None))
    report = baselines.compute(baselines.BaselineConfig(), data)
    self.assertEqual(report["split"], "validation")
    rows = {row["name"]: row["metrics"]["top_1_error"] for row in report["rows"]}
    self.assertCountEqual(rows, [baselines.MAJORITY, baselines.TFIDF_LR, baselines.EMBEDDING_LR])
    self.assertEqual(rows[baselines.TFIDF_LR], 0.0)
    self.assertGreater(rows[baselines.EMBEDDING_LR], 0.2)

  def test_raw_text_models_get_tfidf_and_a_note(self):
    texts = np.asarray(["red red", "blue blue", "red", "blue"] * 5, dtype=object)
    labels = np.tile([0, 1], 10)
    data = _prepared(data_lib.TEXT_INPUT, (texts, labels), (texts, labels), classes=2)
    report = baselines.compute(baselines.BaselineConfig(), data)
    self.assertEqual([row["name"] for row in report["rows"]], [baselines.MAJORITY, baselines.TFIDF_LR])
    self.assertEqual(report["rows"][1]["metrics"]["top_1_error"], 0.0)
    self.assertIn("`text_mode`=frozen", report["notes"][0])

  def test_images_get_lr_on_pixels(self):
    images = np.zeros((30, 4, 4, 1), np.uint8)
    labels = np.tile(np.arange(3), 10)
    for row, label in enumerate(labels):
      images[row, label, :, 0] = 255  # Class = which row of pixels is lit.
    data = _prepared(data_lib.IMAGE_INPUT, (images, labels), (images, labels))
    rows = baselines.compute(baselines.BaselineConfig(), data)["rows"]
    self.assertEqual(rows[1]["name"], baselines.PIXELS_LR)
    self.assertEqual(rows[1]["metrics"]["top_1_error"], 0.0)

  def test_many_classes_use_nearest_centroids(self):
    x, y = _blobs(5, 0, classes=6, spread=0.1)
    data = _prepared(data_lib.DENSE_INPUT, (x, y), (x, y), classes=6)
    report = baselines.compute(baselines.BaselineConfig(max_classes=4), data)
    self.assertEqual(report["rows"][1]["name"], baselines.FEATURES_CENTROID)
    self.assertNotIn("fit", report["rows"][1])
    self.assertEqual(report["rows"][1]["metrics"]["top_1_error"], 0.0)
    self.assertIn("nearest class centroids instead of logistic regression", report["notes"][0])

  def test_centroid_ranks_by_cosine_to_class_means(self):
    # Class means (0, 2) and (1, 0); cosine: (1, 1) is nearer class 1 only just: 1/sqrt(2) each -> a tie at
    # rank 0.
    features = baselines._Features(baselines.FEATURES_LR, np.array([[0, 1], [0, 3], [1, 0]], np.float32),
                                   None, np.array([[1, 0.1], [0.1, 1], [1, 1]], np.float32))
    ranks = baselines._centroid_ranks(features, np.array([0, 0, 1]), np.array([0, 0, 1]), 2)
    self.assertAllEqual(ranks, [1, 0, 0])

  def test_one_training_class_gets_the_majority_only(self):
    x, _ = _blobs(5, 0)
    data = _prepared(data_lib.DENSE_INPUT, (x, np.zeros(15, np.int64)), (x, np.zeros(15, np.int64)))
    report = baselines.compute(baselines.BaselineConfig(), data)
    self.assertEqual([row["name"] for row in report["rows"]], [baselines.MAJORITY])
    self.assertIn("one class in the training rows", report["notes"][0])

  def test_a_failing_baseline_is_said_and_never_raises_into_the_run(self):
    texts = np.asarray(["!!", "??", "..", "--"] * 5, dtype=object)  # Not one term, even of one character.
    data = _prepared(data_lib.TEXT_INPUT, (texts, np.tile([0, 1], 10)),
                     (texts, np.tile([0, 1], 10)), classes=2)
    report = baselines.compute_or_note(baselines.BaselineConfig(), data)
    self.assertRegex(report["skipped"], r"^failed: ValueError: .*vocabulary")
    self.assertEqual(baselines.format_lines(report, None), f"Baselines: skipped ({report['skipped']}).\n")

  def test_graded_class_lists_are_skipped_with_a_reason(self):
    relevance = np.eye(3, dtype=np.float32)[[0, 1, 2, 0]]
    data = data_lib.PreparedData(["a", "b", "c"], data_lib.DENSE_INPUT,
                                 data_lib.ArraySplit(np.ones((4, 2), np.float32), relevance),
                                 data_lib.ArraySplit(np.ones((4, 2), np.float32), relevance), None)
    report = baselines.compute(baselines.BaselineConfig(), data)
    self.assertIn("graded class lists", report["skipped"])
    self.assertEqual(baselines.format_lines(report, None), f"Baselines: skipped ({report['skipped']}).\n")

  def test_training_rows_beyond_the_cap_are_subsampled_and_said(self):
    data = _prepared(data_lib.DENSE_INPUT, _blobs(20, 0), _blobs(5, 1))
    report = baselines.compute(baselines.BaselineConfig(max_train_rows=30), data)
    self.assertEqual(report["train_rows"], 30)
    self.assertIn("fitted on 30 random rows of the 60 training rows", report["notes"])


class ReportLinesTest(tf.test.TestCase):

  def test_versus_line_says_better_or_worse_by_how_many_points(self):
    best = {"label": "TF-IDF + LR", "metrics": {"top_1_error": 0.0297}}
    self.assertEqual(baselines.versus_line(0.0356, best),
                     "Model top-1 error 3.56 vs best baseline (TF-IDF + LR) 2.97: worse by 0.59 points.")
    self.assertEqual(baselines.versus_line(0.02, best),
                     "Model top-1 error 2.00 vs best baseline (TF-IDF + LR) 2.97: better by 0.97 points.")

  def test_table_has_the_model_row_and_every_baseline(self):
    data = _prepared(data_lib.DENSE_INPUT, _blobs(20, 0), _blobs(10, 1))
    report = baselines.compute(baselines.BaselineConfig(), data)
    text = baselines.format_lines(report, {"top_1_error": 0.5, "top_5_error": 0.0, "mrr": 0.7})
    lines = text.splitlines()
    self.assertIn("Baselines on the validation split (30 rows; fitted on the 60 training rows", lines[0])
    self.assertRegex(lines[2], r"^model\s+50\.00\s+0\.00\s+70\.00$")
    self.assertRegex(lines[3], r"^majority class\s+66\.67")
    self.assertRegex(lines[4], r"^LR on the features\s+0\.00\s+0\.00\s+100\.00\s+C=")
    self.assertEqual(lines[-1], "Model top-1 error 50.00 vs best baseline (LR on the features) 0.00: worse "
                     "by 50.00 points.")

  def test_bad_config_raises(self):
    with self.assertRaisesRegex(ValueError, "`inverse_regularization` must be > 0, got 0.0."):
      baselines.BaselineConfig(inverse_regularization=(1.0, 0.0))
    with self.assertRaisesRegex(ValueError,
                                r"`inverse_regularization` must list at least one C value, got \(\)."):
      baselines.BaselineConfig(inverse_regularization=())
    with self.assertRaisesRegex(ValueError, "`max_classes` must be an integer >= 1, got 0."):
      baselines.BaselineConfig(max_classes=0)
    with self.assertRaisesRegex(ValueError, "`max_iter` must be an integer >= 1, got 10.5."):
      baselines.BaselineConfig(max_iter=10.5)


if __name__ == "__main__":
  tf.test.main()
