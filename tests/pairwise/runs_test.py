"""Tests for pairwise.runs: one training per seed in its own folder, and the mean ± std summary over seeds."""

import json
import os
from unittest import mock

import numpy as np
import tensorflow as tf

from pairwise import class_conversion, configs, runs
from pairwise import pairwise_train as train_lib


class RunConfigTest(tf.test.TestCase):

  def test_each_seed_trains_in_its_folder_and_the_summary_averages_them(self):
    model_dir = self.create_tempdir().full_path
    pairwise = configs.PairwiseConfig(encoder=configs.EncoderConfig(kind="hashed_bow"),
                                      train=configs.TrainConfig(model_dir=model_dir))
    run = runs.RunConfig(mode="train", seeds=(3, 5), strategy="one_device", split="test", pairwise=pairwise,
                         conversion=class_conversion.ClassConversionConfig())
    seen = []

    def fake_experiment(config, unused_strategy, **unused_kwargs):
      seen.append((config.train.seed, config.data.split_seed, config.train.model_dir))
      return {"test": {"ndcg@5": 0.5 + 0.1 * (config.train.seed == 5), "per_group": [1.0]}}

    with mock.patch.object(train_lib, "run_experiment", side_effect=fake_experiment):
      summary = runs.run_config(run)
    self.assertEqual(seen, [(3, 3, os.path.join(model_dir, "seed_3")), (5, 5, os.path.join(model_dir, "seed_5"))])
    self.assertEqual(summary["per_seed"], {"3": {"ndcg@5": 0.5}, "5": {"ndcg@5": 0.6}})
    self.assertAllClose([summary["summary"]["ndcg@5"][k] for k in ("mean", "std", "n")], [0.55, 0.0707107, 2])
    with open(os.path.join(model_dir, "summary.json")) as f:
      self.assertEqual(json.load(f)["per_seed"], summary["per_seed"])


  def test_summarize_seeds(self):
    summary = runs.summarize_seeds([{"a": 1.0, "b": "x"}, {"a": 3.0}])
    self.assertEqual(summary["a"], {"mean": 2.0, "std": np.sqrt(2.0), "n": 2})
    self.assertNotIn("b", summary)


if __name__ == "__main__":
  tf.test.main()
