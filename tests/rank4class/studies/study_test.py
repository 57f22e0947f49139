"""Tests for rank4class.studies.study: cell selection, each run's config and a tiny real study end to end."""

import errno
import io
import json
import os
import types
from unittest import mock

import numpy as np
import tensorflow as tf

from rank4class.studies import study
from tests.rank4class import study_records


class SelectBestCellTest(tf.test.TestCase):

  def test_best_cell_is_chosen_on_validation_never_on_test(self):
    records = [study_records.run_record("softmax", "dot", s, top1=0.10, val_ndcg=0.70) for s in (0, 1)]
    # Better on test, worse on validation: must not be chosen.
    records += [study_records.run_record("approx_ndcg", "dot", s, top1=0.01, val_ndcg=0.60) for s in (0, 1)]
    self.assertEqual(study.select_best_cell(records, "ndcg_5"), ("softmax", "dot"))


class RunConfigTest(tf.test.TestCase):

  def test_run_config_puts_each_run_in_its_own_folder(self):
    config = study.preset("quick", "/out")
    run = study.run_config(config, config.datasets[0], "approx_ndcg", "concat", 128, 0.003, 1)
    self.assertEqual(run.model_dir, "/out/runs/reuters_r8/frozen/approx_ndcg-concat/w128-lr0.003-seed1")
    self.assertEqual(run.model.interaction.hidden_units, (128, 128))
    self.assertEqual(run.run.best_metric, "ndcg_5")
    self.assertEqual(run.run.eval_every % run.run.steps_per_execution, 0)


class TinyStudyTest(tf.test.TestCase):
  """One cell x two seeds on real digits, end to end."""

  def test_runs_writes_outputs_and_skips_finished_runs_on_rerun(self):
    output_dir = self.create_tempdir().full_path
    config = study.StudyConfig(
        output_dir=output_dir,
        datasets=[study.StudyDataset("digits", batch_size=64, train_steps=40, eval_every=20,
                                     cnn_filters=(16, 32))],
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
    self.assertEqual([row["name"] for row in results["baselines"]["digits"]["rows"]],
                     ["majority", "pixels_lr"])
    self.assertIn("Best Rank4Class cell (SoftmaxCE + dot product) top-1 error", stream.getvalue())
    self.assertLess(np.mean([r.test["top_1_error"] for r in chosen]), 0.5)  # Chance: 0.9.
    self.assertTrue(os.path.exists(os.path.join(output_dir, "study_digits_image.png")))
    again = study.run_study(config, io.StringIO())
    self.assertEqual([r.seconds for r in again], [r.seconds for r in chosen])  # Read back, not retrained.


class FailedRunTest(tf.test.TestCase):
  """A failing run is recorded and the study goes on, unless the file system refused a write."""

  def _runner(self) -> study.StudyRunner:
    runner = study.StudyRunner(study.StudyConfig(output_dir=self.create_tempdir().full_path,
                                                 datasets=[study.StudyDataset("digits")]))
    runner._prepared = lambda config: None  # pylint: disable=protected-access
    return runner

  def test_an_error_of_one_run_is_recorded(self):
    runner = self._runner()
    with mock.patch.object(study.train_lib, "train", side_effect=ValueError("bad run")):
      self.assertIsNone(runner.run(types.SimpleNamespace(model_dir="/runs/a"), "digits", "image"))
    self.assertEqual(runner.failures, [{"model_dir": "/runs/a", "error": "ValueError: bad run"}])

  def test_a_full_disk_stops_the_study(self):
    runner = self._runner()
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/runs/a/export")
    with mock.patch.object(study.train_lib, "train", side_effect=full), self.assertRaises(OSError):
      runner.run(types.SimpleNamespace(model_dir="/runs/a"), "digits", "image")
    self.assertEmpty(runner.failures)


if __name__ == "__main__":
  tf.test.main()

