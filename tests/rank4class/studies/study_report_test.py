"""Tests for rank4class.studies.study_report: the mean ± std of a cell, Welch's rule, the markdown tables and
the plots."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.studies import study_report
from tests.rank4class import study_records


class StatisticsTest(tf.test.TestCase, parameterized.TestCase):

  def test_cell_summary_is_x100_mean_and_sample_std(self):
    summary = study_report.CellSummary.of([0.01, 0.02, 0.03])
    self.assertAllClose(summary.values, [1.0, 2.0, 3.0])
    self.assertAllClose((summary.mean, summary.std), (2.0, 1.0))

  def test_a_diverged_seed_makes_the_cell_nan(self):
    summary = study_report.CellSummary.of([0.01, float("nan"), 0.03])
    self.assertTrue(np.isnan(summary.mean) and np.isnan(summary.std))

  @parameterized.named_parameters(
      # Means 2 vs 6, stds 1 and 1, n=3 each: 2 * sqrt(1/3 + 1/3) = 1.63 < 4.
      ("clear_difference", [0.01, 0.02, 0.03], [0.05, 0.06, 0.07], True),
      # Means 2 vs 3: 1 < 1.63.
      ("within_noise", [0.01, 0.02, 0.03], [0.02, 0.03, 0.04], False),
      ("one_seed", [0.01], [0.05, 0.06], None),
  )
  def test_welch_two_standard_errors_rule(self, a, b, expected):
    significant = study_report.welch_significant(study_report.CellSummary.of(a),
                                                 study_report.CellSummary.of(b))
    self.assertEqual(significant, expected)


class ReportTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.records = []
    for seed, noise in enumerate((0.0, 0.004, -0.004)):
      self.records += [study_records.run_record("softmax", "dot", seed, 0.30 + noise),
                       # Clearly better.
                       study_records.run_record("softmax", "latent_cross", seed, 0.20 + noise),
                       study_records.run_record("approx_ndcg", "dot", seed, 0.40 + noise),  # Clearly worse.
                       # Within noise.
                       study_records.run_record("approx_ndcg", "latent_cross", seed, 0.301 + noise)]

  def test_markdown_table_marks_significant_differences_and_the_best_cell(self):
    table = study_report.markdown_tables(self.records, ("softmax", "approx_ndcg"), ("dot", "latent_cross"))
    self.assertIn("| Metric | Interaction | SoftmaxCE | ApproxNDCG |", table)
    lines = table.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("| Top-1 Error"))
    top1_dot, top1_lc = lines[row], lines[row + 1]
    self.assertIn("LC+MLP", top1_lc)
    self.assertIn("30.00 ± 0.40", top1_dot)
    self.assertIn("40.00 ± 0.40 ▼", top1_dot)
    self.assertIn("**20.00 ± 0.40** ▲", top1_lc)
    self.assertNotIn("▲", top1_lc.split("|")[4])  # 30.10 vs 30.00: within noise, no mark.
    self.assertIn("3 seed(s)", table)

  def test_baselines_follow_their_data_set_table_with_the_best_cell_against_the_best_baseline(self):
    report = {"split": "test", "train_rows": 900, "notes": [], "rows": [
        {"name": "majority", "label": "majority class", "seconds": 0.0,
         "metrics": {"top_1_error": 0.5, "top_5_error": 0.1, "ndcg_5": 0.6}},
        {"name": "tfidf_lr", "label": "TF-IDF + LR", "seconds": 1.0,
         "fit": {"inverse_regularization": 10.0, "converged": False, "max_iter": 1000},
         "metrics": {"top_1_error": 0.25, "top_5_error": 0.01, "ndcg_5": 0.8}}]}
    table = study_report.markdown_tables(self.records, ("softmax", "approx_ndcg"), ("dot", "latent_cross"),
                                  {"digits": report, "other": {"skipped": "x"}})
    self.assertIn("| majority class | 50.00 | 10.00 | 60.00 | – |", table)
    self.assertIn("| TF-IDF + LR | 25.00 | 1.00 | 80.00 | NOT CONVERGED after 1000 iterations |", table)
    # The best cell is SoftmaxCE + LC+MLP at 20.00 (mean over seeds) against TF-IDF + LR's 25.00.
    self.assertIn("Best Rank4Class cell (SoftmaxCE + LC+MLP) top-1 error 20.00 vs best baseline (TF-IDF + "
                  "LR) 25.00: better by 5.00 points.", table)
    self.assertLess(table.index("#### digits"), table.index("| majority class"))

  def test_plot_writes_one_png_per_data_set(self):
    paths = study_report.plot(self.records, ("softmax", "approx_ndcg"), ("dot", "latent_cross"),
                       self.create_tempdir().full_path)
    self.assertLen(paths, 1)
    with open(paths[0], "rb") as f:
      self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")



if __name__ == "__main__":
  tf.test.main()
