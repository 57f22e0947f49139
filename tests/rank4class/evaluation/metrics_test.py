"""Tests of rank4class.evaluation.metrics: TF-Ranking metrics on one-hot class relevance against NumPy
references."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class.evaluation import metrics
from rank4class_data.tf_ranking import tfr

_NUM_CLASSES = 6


def _list_with_true_class_at_rank(rank: int, true_class: int = 2) -> tuple[np.ndarray, np.ndarray]:
  """One-hot relevance and distinct scores that put `true_class` at 1-based position `rank`."""
  others = [c for c in range(_NUM_CLASSES) if c != true_class]
  order = others[: rank - 1] + [true_class] + others[rank - 1 :]  # classes from best to worst
  scores = np.zeros(_NUM_CLASSES, np.float32)
  scores[order] = np.arange(_NUM_CLASSES, 0, -1, dtype=np.float32)
  relevance = np.zeros(_NUM_CLASSES, np.float32)
  relevance[true_class] = 1.0
  return relevance[None], scores[None]


def _np_ndcg_single_relevant(rank: int, k: int | None) -> float:
  return 1.0 / np.log2(1.0 + rank) if k is None or rank <= k else 0.0


class SingleListMetricsTest(tf.test.TestCase, parameterized.TestCase):
  @parameterized.product(rank=[1, 2, 3, 5, 6], k=[1, 3, 5, None])
  def test_ndcg_at_k_is_inverse_log_rank(self, rank, k):
    relevance, scores = _list_with_true_class_at_rank(rank)
    value = metrics.get("ndcg", topn=k)(relevance, scores)
    self.assertAllClose(value, _np_ndcg_single_relevant(rank, k), atol=1e-6)

  @parameterized.product(rank=[1, 2, 5, 6], k=[1, 5])
  def test_top_k_error_is_one_minus_hit(self, rank, k):
    relevance, scores = _list_with_true_class_at_rank(rank)
    self.assertAllClose(metrics.get("top_k_error", topn=k)(relevance, scores), 0.0 if rank <= k else 1.0)
    self.assertAllClose(metrics.get("top_k_accuracy", topn=k)(relevance, scores), 1.0 if rank <= k else 0.0)

  @parameterized.parameters(1, 2, 4, 6)
  def test_mrr_is_inverse_rank(self, rank):
    relevance, scores = _list_with_true_class_at_rank(rank)
    self.assertAllClose(metrics.get("mrr")(relevance, scores), 1.0 / rank, atol=1e-6)

  @parameterized.parameters(1, 3)
  def test_accuracy_is_top_one_hit(self, rank):
    relevance, scores = _list_with_true_class_at_rank(rank)
    self.assertAllClose(metrics.get("accuracy")(relevance, scores), 1.0 if rank == 1 else 0.0)

  def test_top_one_error_is_one_minus_ndcg_at_one(self):
    # The paper's §5: Top-1 error = 1 - NDCG@1 for one relevant class.
    relevance, scores = _list_with_true_class_at_rank(2)
    self.assertAllClose(
      metrics.get("top_k_error", topn=1)(relevance, scores),
      1.0 - metrics.get("ndcg", topn=1)(relevance, scores),
    )


class BatchAveragingTest(tf.test.TestCase):
  def test_default_metrics_average_over_instances(self):
    ranks = [1, 2, 4, 6]
    lists = [_list_with_true_class_at_rank(r, true_class=i) for i, r in enumerate(ranks)]
    relevance = np.concatenate([rel for rel, _ in lists])
    scores = np.concatenate([s for _, s in lists])
    expected = {
      "top_1_error": np.mean([r > 1 for r in ranks]),
      "top_5_error": np.mean([r > 5 for r in ranks]),
      "ndcg_1": np.mean([_np_ndcg_single_relevant(r, 1) for r in ranks]),
      "ndcg_5": np.mean([_np_ndcg_single_relevant(r, 5) for r in ranks]),
      "mrr": np.mean([1.0 / r for r in ranks]),
      "accuracy": np.mean([r == 1 for r in ranks]),
    }
    results = {}
    for metric in metrics.get_default_metrics(ks=(1, 5)):
      metric.update_state(relevance[:2], scores[:2])  # Two batches accumulate like one.
      metric.update_state(relevance[2:], scores[2:])
      results[metric.name] = metric.result().numpy()
    self.assertEqual(sorted(results), sorted(expected))
    for name, value in expected.items():
      self.assertAllClose(results[name], value, atol=1e-6, msg=name)


class FactoryAndSerializationTest(tf.test.TestCase, parameterized.TestCase):
  def test_unknown_name_lists_allowed(self):
    with self.assertRaisesRegex(ValueError, "top_k_error.*accuracy"):
      metrics.get("f1")

  def test_top_k_without_topn_raises(self):
    with self.assertRaisesRegex(ValueError, "topn"):
      metrics.get("top_k_error")

  @parameterized.parameters(0, -1, 1.5, True)
  def test_bad_topn_raises(self, topn):
    with self.assertRaisesRegex(ValueError, "topn"):
      metrics.TopKError(topn=topn)

  def test_repeated_ks_raise(self):
    with self.assertRaisesRegex(ValueError, "ks"):
      metrics.get_default_metrics(ks=(1, 1))

  def test_metric_kinds_are_tf_ranking(self):
    by_name = {m.name: m for m in metrics.get_default_metrics(ks=(3,))}
    self.assertIsInstance(by_name["top_3_error"], tfr.keras.metrics.HitsMetric)
    self.assertIsInstance(by_name["ndcg_3"], tfr.keras.metrics.NDCGMetric)
    self.assertIsInstance(by_name["mrr"], tfr.keras.metrics.MRRMetric)

  def test_ndcg_serialization_round_trip(self):
    metric = metrics.NDCGMetric(topn=2)
    clone = tf.keras.metrics.deserialize(tf.keras.metrics.serialize(metric))
    self.assertIsInstance(clone, metrics.NDCGMetric)
    self.assertEqual(clone.get_config(), metric.get_config())
    relevance, scores = _list_with_true_class_at_rank(2)
    self.assertAllClose(clone(relevance, scores), 1.0 / np.log2(3.0))

  def test_top_k_error_serialization_round_trip(self):
    metric = metrics.TopKError(topn=2)
    clone = tf.keras.metrics.deserialize(tf.keras.metrics.serialize(metric))
    self.assertIsInstance(clone, metrics.TopKError)
    self.assertEqual(clone.get_config(), metric.get_config())
    relevance, scores = _list_with_true_class_at_rank(3)
    self.assertAllClose(clone(relevance, scores), metric(relevance, scores))
    self.assertAllClose(clone.result(), 1.0)


if __name__ == "__main__":
  tf.test.main()
