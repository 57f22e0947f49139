"""Tests for pairwise.margin.runs: one run per seed in its own folder (training, or the per-seed run the
binary passes), and the mean ± std summary over seeds."""

import json
import os
from unittest import mock

import numpy as np
import tensorflow as tf

from pairwise.margin import configs, runs
from pairwise.margin import pairwise_train as train_lib


class RunConfigTest(tf.test.TestCase):

  def test_each_seed_trains_in_its_folder_and_the_summary_averages_them(self):
    model_dir = self.create_tempdir().full_path
    pairwise = configs.PairwiseConfig(encoder=configs.EncoderConfig(kind="hashed_bow"),
                                      train=configs.PairwiseTrainConfig(model_dir=model_dir))
    run = runs.RunConfig(mode="train", seeds=(3, 5), strategy="one_device", split="test", pairwise=pairwise)
    seen = []

    def fake_experiment(config, unused_strategy, **unused_kwargs):
      seen.append((config.train.seed, config.data.split_seed, config.train.model_dir))
      return {"test": {"ndcg@5": 0.5 + 0.1 * (config.train.seed == 5), "per_group": [1.0]}}

    with mock.patch.object(train_lib, "run_experiment", side_effect=fake_experiment):
      summary = runs.run_config(run)
    self.assertEqual(seen,
                     [(3, 3, os.path.join(model_dir, "seed_3")), (5, 5, os.path.join(model_dir, "seed_5"))])
    self.assertEqual(summary["per_seed"], {"3": {"ndcg@5": 0.5}, "5": {"ndcg@5": 0.6}})
    self.assertAllClose([summary["summary"]["ndcg@5"][k] for k in ("mean", "std", "n")], [0.55, 0.0707107, 2])
    with open(os.path.join(model_dir, "summary.json")) as f:
      self.assertEqual(json.load(f)["per_seed"], summary["per_seed"])

  def test_a_seed_run_given_by_the_caller_runs_each_seed(self):
    model_dir = self.create_tempdir().full_path
    pairwise = configs.PairwiseConfig(encoder=configs.EncoderConfig(kind="hashed_bow"),
                                      train=configs.PairwiseTrainConfig(model_dir=model_dir))
    run = runs.RunConfig(mode="class_conversion", seeds=(1, 2), strategy="one_device", split="test",
                         pairwise=pairwise, overwrite=True)
    seen = []

    def seed_run(config, unused_strategy, *, overwrite):
      seen.append((config.train.seed, config.train.model_dir, overwrite))
      return {"accuracy": 0.25 * config.train.seed, "counts": [1, 2]}

    summary = runs.run_config(run, seed_run=seed_run)
    self.assertEqual(seen, [(1, os.path.join(model_dir, "seed_1"), True),
                            (2, os.path.join(model_dir, "seed_2"), True)])
    self.assertEqual(summary["mode"], "class_conversion")
    # mean (0.25 + 0.5) / 2 = 0.375; sample std |0.5 - 0.25| / sqrt(2).
    self.assertAllClose([summary["summary"]["accuracy"][k] for k in ("mean", "std", "n")],
                        [0.375, 0.25 / np.sqrt(2.0), 2])

  def test_class_conversion_without_its_seed_run_is_refused(self):
    pairwise = configs.PairwiseConfig(
      train=configs.PairwiseTrainConfig(model_dir=self.create_tempdir().full_path)
    )
    run = runs.RunConfig(mode="class_conversion", seeds=(1,), strategy="one_device", split="test",
                         pairwise=pairwise)
    with self.assertRaisesRegex(ValueError, "pairwise.studies.class_conversion"):
      runs.run_config(run)

  def test_summarize_seeds(self):
    summary = runs.summarize_seeds([{"a": 1.0, "b": "x"}, {"a": 3.0}])
    self.assertEqual(summary["a"], {"mean": 2.0, "std": np.sqrt(2.0), "n": 2})
    self.assertNotIn("b", summary)

  def test_summarize_seeds_leaves_out_a_seed_without_the_metric_value(self):
    summary = runs.summarize_seeds([{"a": 1.0}, {"a": float("nan")}, {"a": 4.0}])
    # The mean and std are over the two values, 2.5 and sqrt(4.5), and n says so: 2 of the 3 seeds.
    self.assertEqual(summary["a"], {"mean": 2.5, "std": np.sqrt(4.5), "n": 2})


if __name__ == "__main__":
  tf.test.main()
