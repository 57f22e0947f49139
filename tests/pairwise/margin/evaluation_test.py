"""Tests for pairwise.margin.evaluation: list metrics of an oracle and of random scores, raw pair accuracy."""

import numpy as np
import tensorflow as tf

from pairwise.margin import configs, evaluation, margin_model
from tests.pairwise import toy_items


class EvaluateTest(tf.test.TestCase):

  def test_oracle_scores_perfectly_and_random_is_chance(self):
    items = toy_items.embedding_items(6, 10, seed=1, noise=0.0)
    metrics = evaluation.evaluate(toy_items.oracle(items), items,
                                  configs.PairwiseEvaluationConfig(topn=5, relevance_threshold=2.0))
    for name in ("ndcg@5", "map@5", "mrr@5", "pair_accuracy", "pair_accuracy_raw"):
      self.assertAllClose(metrics[name], 1.0, msg=name)
    self.assertLen(metrics["per_group"]["ndcg@5"], 6)
    baseline = evaluation.random_baseline(items, configs.PairwiseEvaluationConfig(topn=5), draws=50)
    self.assertBetween(baseline["pair_accuracy"], 0.4, 0.6)

  def test_raw_pair_accuracy_matches_pair_by_pair(self):
    tf.keras.utils.set_random_seed(0)
    items = toy_items.embedding_items(2, 5, seed=2)
    model = margin_model.PairwiseRanker(None)
    model((tf.constant(items.features[:2]),) * 2, training=False)
    metrics = evaluation.evaluate(model, items, configs.PairwiseEvaluationConfig())
    correct = total = 0
    for g in range(2):
      rows = np.flatnonzero(items.group_ids == g)
      for i in rows:
        for j in rows:
          if items.labels[i] == items.labels[j]:
            continue
          s = model((items.features[i:i + 1], items.features[j:j + 1]), training=False).numpy()[0]
          correct += np.sign(s[0] - s[1]) == np.sign(items.labels[i] - items.labels[j])
          total += 1
    self.assertAllClose(metrics["pair_accuracy_raw"], correct / total)

  def test_scalars_drop_lists_and_strings(self):
    self.assertEqual(evaluation.scalars({"a": np.float32(0.5), "b": 2, "c": [1.0], "d": "x"}),
                     {"a": 0.5, "b": 2.0})


if __name__ == "__main__":
  tf.test.main()
