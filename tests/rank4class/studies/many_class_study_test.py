"""Tests for rank4class.studies.many_class_study: the runs' configs and the results table."""

import os

import numpy as np
import tensorflow as tf

from rank4class.inference import zero_shot
from rank4class.modeling import model as model_lib
from rank4class.studies import many_class_study
from rank4class_encoders import text_embeddings
from tests.rank4class import tiny_text_encoder


class ManyClassStudyTest(tf.test.TestCase):

  def test_run_configs_differ_only_in_loss_and_lists(self):
    full = many_class_study.run_config("/o", "softmax", None, None, 0, 100, 64, 1e-3)
    sampled = many_class_study.run_config("/o", "approx_ndcg", "log_uniform", 64, 1, 100, 64, 1e-3)
    self.assertEqual((full.model_dir, sampled.model_dir),
                     ("/o/runs/softmax-full-seed0", "/o/runs/approx_ndcg-log_uniformK64-seed1"))
    self.assertIsNone(full.model.sampling.sampler)
    self.assertEqual((sampled.model.sampling.sampler, sampled.model.sampling.num_sampled),
                     ("log_uniform", 63))
    self.assertEqual(full.data, sampled.data)
    self.assertEqual(full.data.dataset, "wordnet_hypernyms")
    self.assertEqual(many_class_study.run_config("/o", "softmax", "in_batch", None, 0, 100, 32,
                                                 1e-3).model_dir,
                     "/o/runs/softmax-in_batchK32-seed0")

  def test_runs_on_other_tasks_and_interactions_and_with_hard_negatives_are_named_apart(self):
    config = many_class_study.run_config("/o", "softmax", "uniform", 64, 0, 100, 64, 1e-3, "latent_cross",
                                         dataset="wordnet_hypernyms_all", hard_negatives=16)
    self.assertEqual(config.model_dir,
                     "/o/runs/wordnet_hypernyms_all-latent_cross-softmax-uniformK64-hard16-seed0")
    self.assertEqual((config.model.sampling.hard_negatives, config.data.dataset),
                     (16, "wordnet_hypernyms_all"))

  def test_markdown_table_means_and_spreads_over_seeds(self):
    records = [{"loss": "softmax", "lists": "full", "seed": s, "seconds": 10.0 + s, "num_classes": 3498,
                "top_1_error": e, "top_5_error": 0.5, "ndcg_5": 0.25, "mrr": 0.4} for s, e in ((0, 0.6),
                                                                                               (1, 0.8))]
    table = many_class_study.markdown_table(records)
    self.assertIn("3,498 classes", table)
    # The sample standard deviation (ddof=1), as every other report: sqrt(((60-70)^2 + (80-70)^2) / 1) =
    # 14.14.
    self.assertIn("| softmax | full | 70.00 ± 14.14 | 50.00 ± 0.00 | 25.00 ± 0.00 | 40.00 ± 0.00 | 10.5 |",
                  table)
    by_interaction = many_class_study.markdown_table([{**r, "interaction": "dot"} for r in records],
                                                     by=("interaction", "loss"))
    self.assertIn("| interaction | loss | top-1 error |", by_interaction)
    self.assertIn("| dot | softmax | 70.00 ± 14.14 |", by_interaction)


  def test_the_grid_table_is_followed_by_its_baselines_and_runs_fit_none(self):
    output_dir = self.create_tempdir().full_path
    records = [{"loss": "softmax", "lists": "full", "seed": 0, "seconds": 1.0, "num_classes": 3498,
                "top_1_error": 0.6, "top_5_error": 0.5, "ndcg_5": 0.25, "mrr": 0.4}]
    report = {"split": "test", "n": 9035, "train_rows": 36878, "notes": ["3,498 classes: nearest centroids"],
              "rows": [{"name": "majority", "label": "majority class", "seconds": 0.0,
                        "metrics": {"top_1_error": 0.991, "top_5_error": 0.97, "ndcg_5": 0.02, "mrr": 0.03}}]}
    many_class_study._write(output_dir, "results", records, ("loss", "lists"), report)
    with open(os.path.join(output_dir, "results.md"), encoding="utf-8") as f:
      text = f.read()
    self.assertLess(text.index("| softmax | full |"),
                    text.index("| majority class | 99.10 | 97.00 | 2.00 | 3.00 | – |"))
    self.assertIn("Note: 3,498 classes: nearest centroids.", text)
    self.assertTrue(os.path.exists(os.path.join(output_dir, "results.baselines.json")))
    config = many_class_study.run_config(output_dir, "softmax", None, None, 0, 10, 8, 1e-3)
    self.assertFalse(config.outputs.baselines)  # Once per grid, not once per run.

  def test_zero_shot_table_rows_per_seed_and_mean(self):
    metrics = {"top_1_error": 0.3, "top_5_error": 0.1, "ndcg_5": 0.8, "mrr": 0.75}
    rows = [{"seed": s, "trained": {**metrics, "top_1_error": e}, "nearest_class_text": metrics}
            for s, e in ((0, 0.3), (1, 0.5))]
    table = many_class_study.zero_shot_table(rows)
    self.assertIn("| trained model | 1 | 50.00 | 10.00 | 80.00 | 75.00 |", table)
    self.assertIn("| trained model | mean ± std | 40.00 ± 14.14 | 10.00 ± 0.00 |", table)
    self.assertIn("| nearest class text (untrained) | mean ± std | 30.00 ± 0.00 |", table)


class ZeroShotConfigTest(tiny_text_encoder.TinyTextEncoderTestCase):

  def test_config_turns_on_the_residual_cosine_towers(self):
    config = many_class_study.zero_shot_config("/o", 2, 100, 64, 1e-3, self.text, ["a dog", "a cat"])
    meta, mlp = config.model.class_encoder.metadata, config.model.instance_encoder.mlp
    self.assertEqual((meta.residual_projection, meta.normalize_output, meta.use_bias, meta.text.l2_normalize),
                     (True, True, False, True))
    self.assertEqual((mlp.residual, mlp.l2_normalize), (True, True))
    self.assertEqual(config.model.interaction.temperature, many_class_study.ZERO_SHOT_TEMPERATURE)
    self.assertEqual((config.model.sampling.sampler, config.run.seed, config.outputs.export),
                     ("uniform", 2, True))
    self.assertEqual(config.model_dir, "/o/runs/zero_shot-residual_cosine-uniformK64-seed2")

  def test_untrained_model_is_the_nearest_class_text_baseline(self):
    seen, unseen = ["a big dog", "a small cat", "a tree"], ["a bird", "a fish", "a big tree", "a small dog"]
    config = many_class_study.zero_shot_config("/o", 0, 100, 64, 1e-3, self.text, seen, width=8)
    tf.keras.utils.set_random_seed(0)
    model = model_lib.build_model(config.model, seen)
    glosses = ["a small bird", "a big fish", "a tree", "a dog", "a big cat", "small fish"]
    x = text_embeddings.embed_texts(glosses, self.text, self.create_tempdir().full_path)  # Not unit length.
    model(x)
    classes = text_embeddings.embed_texts(unseen, self.text, self.create_tempdir().full_path)

    def unit(v):
      return v / np.linalg.norm(v, axis=1, keepdims=True)

    # Both towers start as the identity on unit vectors: scores are cosines over the temperature, 0.05.
    self.assertAllClose(model.text_class_scores(x, unseen), unit(x) @ unit(classes).T / 0.05, atol=1e-4)
    labels = np.array([0, 1, 2, 3, 0, 1])
    self.assertAllClose(zero_shot.zero_shot_report(model, x, labels, unseen, ks=(1, 2))["metrics"],
                        zero_shot.nearest_text_baseline(x, classes, labels, ks=(1, 2))["metrics"])


if __name__ == "__main__":
  tf.test.main()
