"""Tests for rank4class.study: significance rule, tables, plots, cell selection and a tiny real study."""

import io
import json
import os

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class import study


def _record(loss: str, interaction: str, seed: int, top1: float, val_ndcg: float = 0.5,
            dataset: str = "digits") -> study.RunRecord:
  return study.RunRecord(dataset=dataset, mode="image", loss=loss, interaction=interaction, hidden_width=8,
                         learning_rate=1e-3, seed=seed, validation={"ndcg_5": val_ndcg},
                         test={"top_1_error": top1, "top_5_error": top1 / 4, "ndcg_5": 1 - top1 / 2},
                         model_dir="/x", seconds=1.0)


class StatisticsTest(tf.test.TestCase, parameterized.TestCase):

  def test_cell_summary_is_x100_mean_and_sample_std(self):
    summary = study.CellSummary.of([0.01, 0.02, 0.03])
    self.assertAllClose(summary.values, [1.0, 2.0, 3.0])
    self.assertAllClose((summary.mean, summary.std), (2.0, 1.0))

  def test_a_diverged_seed_makes_the_cell_nan(self):
    summary = study.CellSummary.of([0.01, float("nan"), 0.03])
    self.assertTrue(np.isnan(summary.mean) and np.isnan(summary.std))

  @parameterized.named_parameters(
      # Means 2 vs 6, stds 1 and 1, n=3 each: 2 * sqrt(1/3 + 1/3) = 1.63 < 4.
      ("clear_difference", [0.01, 0.02, 0.03], [0.05, 0.06, 0.07], True),
      # Means 2 vs 3: 1 < 1.63.
      ("within_noise", [0.01, 0.02, 0.03], [0.02, 0.03, 0.04], False),
      ("one_seed", [0.01], [0.05, 0.06], None),
  )
  def test_welch_two_standard_errors_rule(self, a, b, expected):
    self.assertEqual(study.welch_significant(study.CellSummary.of(a), study.CellSummary.of(b)), expected)

  def test_best_cell_is_chosen_on_validation_never_on_test(self):
    records = [_record("softmax", "dot", s, top1=0.10, val_ndcg=0.70) for s in (0, 1)]
    # Better on test, worse on validation: must not be chosen.
    records += [_record("approx_ndcg", "dot", s, top1=0.01, val_ndcg=0.60) for s in (0, 1)]
    self.assertEqual(study.select_best_cell(records, "ndcg_5"), ("softmax", "dot"))


class ReportTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.records = []
    for seed, noise in enumerate((0.0, 0.004, -0.004)):
      self.records += [_record("softmax", "dot", seed, 0.30 + noise),
                       _record("softmax", "latent_cross", seed, 0.20 + noise),  # Clearly better.
                       _record("approx_ndcg", "dot", seed, 0.40 + noise),  # Clearly worse.
                       _record("approx_ndcg", "latent_cross", seed, 0.301 + noise)]  # Within noise.

  def test_markdown_table_marks_significant_differences_and_the_best_cell(self):
    table = study.markdown_tables(self.records, ("softmax", "approx_ndcg"), ("dot", "latent_cross"))
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
    table = study.markdown_tables(self.records, ("softmax", "approx_ndcg"), ("dot", "latent_cross"),
                                  {"digits": report, "other": {"skipped": "x"}})
    self.assertIn("| majority class | 50.00 | 10.00 | 60.00 | – |", table)
    self.assertIn("| TF-IDF + LR | 25.00 | 1.00 | 80.00 | C=10, NOT CONVERGED after 1000 iterations |", table)
    # The best cell is SoftmaxCE + LC+MLP at 20.00 (mean over seeds) against TF-IDF + LR's 25.00.
    self.assertIn("Best Rank4Class cell (SoftmaxCE + LC+MLP) top-1 error 20.00 vs best baseline (TF-IDF + LR) "
                  "25.00: better by 5.00 points.", table)
    self.assertLess(table.index("#### digits"), table.index("| majority class"))

  def test_plot_writes_one_png_per_data_set(self):
    paths = study.plot(self.records, ("softmax", "approx_ndcg"), ("dot", "latent_cross"),
                       self.create_tempdir().full_path)
    self.assertLen(paths, 1)
    with open(paths[0], "rb") as f:
      self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


class ConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_quick_preset_is_the_15_cell_grid_on_r8_with_two_seeds(self):
    config = study.preset("quick", "/out")
    self.assertEqual([d.name for d in config.datasets], ["reuters_r8"])
    self.assertEqual(len(config.losses) * len(config.interactions), 15)
    self.assertLen(config.seeds, 2)
    self.assertEqual(config.datasets[0].text_mode, "frozen")

  def test_full_preset_covers_the_three_data_sets_and_fine_tuning(self):
    config = study.preset("full", "/out")
    self.assertEqual([d.name for d in config.datasets], ["reuters_r8", "fashion_mnist", "20newsgroups"])
    self.assertEqual([(ft.dataset, ft.cells) for ft in config.finetune],
                     [("reuters_r8", ("baseline", "best")), ("20newsgroups", ("baseline", "best"))])

  @parameterized.named_parameters(
      ("preset", lambda: study.preset("huge", "/o"), "Unknown preset 'huge'.*quick, full"),
      ("loss", lambda: study.StudyConfig("/o", losses=("hinge",)), r"`losses` must be one of \[.*\], got 'hinge'"),
      ("interaction", lambda: study.StudyConfig("/o", interactions=("bilinear",)), "`interactions` must be one of"),
      ("dataset", lambda: study.StudyDataset("mnist"), "Unknown dataset 'mnist'"),
      ("finetune_image", lambda: study.StudyConfig("/o", finetune=[study.FinetuneConfig("digits")]),
       "Fine-tuning needs a text data set.*got 'digits'"),
      ("finetune_twice", lambda: study.StudyConfig("/o", finetune=[study.FinetuneConfig(), study.FinetuneConfig()]),
       "At most one fine-tuning entry per data set"),
  )
  def test_bad_config_raises(self, make, message):
    with self.assertRaisesRegex(ValueError, message):
      make()

  def test_run_config_puts_each_run_in_its_own_folder(self):
    config = study.preset("quick", "/out")
    run = study.run_config(config, config.datasets[0], "approx_ndcg", "concat", 128, 0.003, 1)
    self.assertEqual(run.model_dir, "/out/runs/reuters_r8/frozen/approx_ndcg-concat/w128-lr0.003-seed1")
    self.assertEqual(run.model.interaction.hidden_units, (128, 128))
    self.assertEqual(run.best_metric, "ndcg_5")
    self.assertEqual(run.eval_every % run.steps_per_execution, 0)


class TinyStudyTest(tf.test.TestCase):
  """One cell x two seeds on real digits, end to end."""

  def test_runs_writes_outputs_and_skips_finished_runs_on_rerun(self):
    output_dir = self.create_tempdir().full_path
    config = study.StudyConfig(
        output_dir=output_dir,
        datasets=[study.StudyDataset("digits", batch_size=64, train_steps=40, eval_every=20, cnn_filters=(16, 32))],
        losses=("softmax",), interactions=("dot",), seeds=(0, 1), hidden_widths=(8,),
        learning_rates=(1e-2,), steps_per_execution=20)
    stream = io.StringIO()
    chosen = study.run_study(config, stream)
    self.assertLen(chosen, 2)
    self.assertIn("#### digits (image), 2 seed(s)", stream.getvalue())
    with open(os.path.join(output_dir, study.RESULTS_JSON)) as f:
      results = json.load(f)
    self.assertLen(results["runs"], 2)
    # The baselines are fitted once for the data set (not once per run), on the same test split.
    self.assertEqual([row["name"] for row in results["baselines"]["digits"]["rows"]], ["majority", "pixels_lr"])
    self.assertIn("Best Rank4Class cell (SoftmaxCE + dot product) top-1 error", stream.getvalue())
    self.assertLess(np.mean([r.test["top_1_error"] for r in chosen]), 0.5)  # Chance: 0.9.
    self.assertTrue(os.path.exists(os.path.join(output_dir, "study_digits_image.png")))
    again = study.run_study(config, io.StringIO())
    self.assertEqual([r.seconds for r in again], [r.seconds for r in chosen])  # Read back, not retrained.


if __name__ == "__main__":
  tf.test.main()
