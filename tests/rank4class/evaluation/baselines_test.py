"""Tests for rank4class.evaluation.baselines: each baseline's ranks against hand counts, scikit-learn's
defaults, non-convergence stated, the kinds of input, and the report lines."""

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

  def test_separable_features_are_classified_by_the_default_logistic_regression(self):
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
    self.assertEqual((fit["inverse_regularization"], fit["max_iter"], fit["solver"]), (1.0, 100, "lbfgs"))
    self.assertEqual(baselines.best_row(report)["name"], baselines.FEATURES_LR)

  def test_the_scores_are_scikit_learns_default_fit_on_standardised_features(self):
    from sklearn import linear_model, preprocessing
    x, y = _blobs(20, 0, spread=2.0)
    test_x, test_y = _blobs(10, 1, spread=2.0)
    data = _prepared(data_lib.DENSE_INPUT, (x, y), (x[:3], y[:3]), (test_x, test_y))
    features = baselines.baseline_features(data, {"train": (x, y), "evaluated": (test_x, test_y)})[0][0]
    model, _ = baselines._fit(features.name, features.train, y)
    scaler = preprocessing.StandardScaler().fit(x)
    reference = linear_model.LogisticRegression().fit(scaler.transform(x), y)
    self.assertAllClose(baselines._all_class_scores(model, features.evaluated, 3),
                        reference.predict_log_proba(scaler.transform(test_x)), atol=1e-5)

  def test_a_fit_that_stops_short_is_reported_as_not_converged(self):
    data = _prepared(data_lib.DENSE_INPUT, _blobs(20, 0, spread=2.0), _blobs(10, 1))
    real = baselines.linear_model.LogisticRegression
    with mock.patch.object(baselines.linear_model, "LogisticRegression", lambda: real(max_iter=1)):
      report = baselines.compute(baselines.BaselineConfig(), data)
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
    self.assertCountEqual(rows, [baselines.MAJORITY, baselines.TFIDF_LR, baselines.TFIDF_SVM,
                                 baselines.EMBEDDING_LR])
    self.assertEqual(rows[baselines.TFIDF_LR], 0.0)
    self.assertEqual(rows[baselines.TFIDF_SVM], 0.0)
    self.assertGreater(rows[baselines.EMBEDDING_LR], 0.2)

  def test_raw_text_models_get_tfidf_and_a_note(self):
    texts = np.asarray(["red red", "blue blue", "red", "blue"] * 5, dtype=object)
    labels = np.tile([0, 1], 10)
    data = _prepared(data_lib.TEXT_INPUT, (texts, labels), (texts, labels), classes=2)
    report = baselines.compute(baselines.BaselineConfig(), data)
    self.assertEqual([row["name"] for row in report["rows"]],
                     [baselines.MAJORITY, baselines.TFIDF_LR, baselines.TFIDF_SVM])
    self.assertEqual(report["rows"][1]["metrics"]["top_1_error"], 0.0)
    # Word 1-2-grams in at least two texts, sublinear: "red red" weighs 1 + log 2 per "red", so LinearSVC
    # separates the two words as well.
    self.assertEqual(report["rows"][2]["metrics"]["top_1_error"], 0.0)
    self.assertEqual(report["rows"][2]["fit"]["solver"], "liblinear")
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
    self.assertIn("nearest class centroids instead of logistic regression and the SVM", report["notes"][0])

  def test_centroid_ranks_by_cosine_to_class_means(self):
    # Class means (0, 2) and (1, 0); cosine: (1, 1) is nearer class 1 only just: 1/sqrt(2) each -> a tie at
    # rank 0.
    features = baselines._Features(baselines.FEATURES_LR, np.array([[0, 1], [0, 3], [1, 0]], np.float32),
                                   np.array([[1, 0.1], [0.1, 1], [1, 1]], np.float32))
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
    self.assertRegex(lines[4], r"^LR on the features\s+0\.00\s+0\.00\s+100\.00\s+\d+\.\d s$")
    self.assertEqual(lines[-1], "Model top-1 error 50.00 vs best baseline (LR on the features) 0.00: worse "
                     "by 50.00 points.")

  def test_bad_config_raises(self):
    with self.assertRaisesRegex(ValueError, "`max_classes` must be an integer >= 1, got 0."):
      baselines.BaselineConfig(max_classes=0)
    with self.assertRaisesRegex(ValueError, "`max_train_rows` must be an integer >= 1, got 10.5."):
      baselines.BaselineConfig(max_train_rows=10.5)


if __name__ == "__main__":
  tf.test.main()
