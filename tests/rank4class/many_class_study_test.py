"""Tests for rank4class.many_class_study: the runs' configs and the results table."""

import tensorflow as tf

from rank4class import many_class_study


class ManyClassStudyTest(tf.test.TestCase):

  def test_run_configs_differ_only_in_loss_and_lists(self):
    full = many_class_study.run_config("/o", "softmax", None, None, 0, 100, 64, 1e-3)
    sampled = many_class_study.run_config("/o", "approx_ndcg", "log_uniform", 64, 1, 100, 64, 1e-3)
    self.assertEqual((full.model_dir, sampled.model_dir),
                     ("/o/runs/softmax-full-seed0", "/o/runs/approx_ndcg-log_uniformK64-seed1"))
    self.assertIsNone(full.model.sampling.sampler)
    self.assertEqual((sampled.model.sampling.sampler, sampled.model.sampling.num_sampled), ("log_uniform", 63))
    self.assertEqual(full.data, sampled.data)
    self.assertEqual(full.data.dataset, "wordnet_hypernyms")
    self.assertEqual(many_class_study.run_config("/o", "softmax", "in_batch", None, 0, 100, 32, 1e-3).model_dir,
                     "/o/runs/softmax-in_batchK32-seed0")

  def test_runs_on_other_tasks_and_interactions_and_with_hard_negatives_are_named_apart(self):
    config = many_class_study.run_config("/o", "softmax", "uniform", 64, 0, 100, 64, 1e-3, "latent_cross",
                                         dataset="wordnet_hypernyms_all", hard_negatives=16)
    self.assertEqual(config.model_dir, "/o/runs/wordnet_hypernyms_all-latent_cross-softmax-uniformK64-hard16-seed0")
    self.assertEqual((config.model.sampling.hard_negatives, config.data.dataset), (16, "wordnet_hypernyms_all"))

  def test_markdown_table_means_and_spreads_over_seeds(self):
    records = [{"loss": "softmax", "lists": "full", "seed": s, "seconds": 10.0 + s, "num_classes": 3498,
                "top_1_error": e, "top_5_error": 0.5, "ndcg_5": 0.25, "mrr": 0.4} for s, e in ((0, 0.6), (1, 0.8))]
    table = many_class_study.markdown_table(records)
    self.assertIn("3,498 classes", table)
    self.assertIn("| softmax | full | 70.00 ± 10.00 | 50.00 ± 0.00 | 25.00 ± 0.00 | 40.00 ± 0.00 | 10.5 |", table)
    by_interaction = many_class_study.markdown_table([{**r, "interaction": "dot"} for r in records],
                                                     by=("interaction", "loss"))
    self.assertIn("| interaction | loss | top-1 error |", by_interaction)
    self.assertIn("| dot | softmax | 70.00 ± 10.00 |", by_interaction)


if __name__ == "__main__":
  tf.test.main()
