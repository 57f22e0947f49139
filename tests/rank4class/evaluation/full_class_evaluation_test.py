"""Tests for rank4class.evaluation.full_class_evaluation: chunked exact top-K and ranks equal full scoring and
TF-Ranking."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.evaluation import evaluate, full_class_evaluation
from rank4class.inference import full_class_scoring
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib

_NUM_CLASSES = 37


def _model(interaction: str) -> model_lib.Rank4ClassModel:
  tf.keras.utils.set_random_seed(0)
  hidden = {} if interaction == "dot" else {"hidden_units": (8, 8)}
  model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)),
                                    class_encoders.get("one_hot", num_classes=_NUM_CLASSES),
                                    interactions.get(interaction, **hidden))
  model(tf.zeros([1, 5]))
  for weight in model.class_encoder.weights:  # Random biases, so that they are part of what is checked.
    weight.assign(tf.random.normal(weight.shape))
  return model


class ChunkedTopKTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(interaction=interactions.INTERACTION_NAMES, chunk_size=[1, 5, 37, 100])
  def test_equals_top_k_and_ranks_of_the_full_scores(self, interaction, chunk_size):
    model = _model(interaction)
    x = np.random.default_rng(1).normal(size=[11, 5]).astype(np.float32)
    labels = np.arange(11) * 3 % _NUM_CLASSES
    ids, scores, ranks = full_class_scoring.chunked_top_k(model, x, 5, chunk_size, labels)
    full = model(x).numpy()
    expected_scores, expected_ids = tf.math.top_k(full, k=5)
    self.assertAllEqual(ids, expected_ids)
    self.assertAllClose(scores, expected_scores, atol=1e-5)
    true = full[np.arange(11), labels]
    self.assertAllEqual(ranks, (full > true[:, None] + 1e-5).sum(axis=1))

  def test_metrics_equal_tf_rankings_on_the_full_score_matrix(self):
    model = _model("latent_cross")
    x = np.random.default_rng(2).normal(size=[64, 5]).astype(np.float32)
    labels = np.random.default_rng(3).integers(0, _NUM_CLASSES, size=64)
    dataset = tf.data.Dataset.from_tensor_slices((x, labels)).batch(16)
    report = full_class_evaluation.evaluate_full_classes(model, dataset, ks=(1, 5), chunk_size=6)
    reference = evaluate.get_evaluator([str(i) for i in range(_NUM_CLASSES)], (1, 5))
    for inputs, y in dataset:
      reference.update(model(inputs), y)
    expected = reference.result()["metrics"]
    self.assertEqual(report["n"], 64)
    for name in ("top_1_error", "top_5_error", "ndcg_1", "ndcg_5", "mrr", "accuracy"):
      self.assertAllClose(report["metrics"][name], expected[name], atol=1e-5, msg=name)
    full = reference.result()
    self.assertEqual(report["class_counts"], full["class_counts"])
    for name, recall in full["per_class_recall"].items():
      self.assertAllClose(-1.0 if recall is None else recall,
                          -1.0 if report["per_class_recall"][name] is None
                          else report["per_class_recall"][name])
    self.assertNotIn("confusion", report)

  def test_out_of_range_label_raises(self):
    ranks = full_class_scoring.rank_function(_model("dot"))
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "class ids must be in"):
      ranks(np.zeros([2, 5], np.float32), np.array([0, _NUM_CLASSES]))

  def test_rank_metrics_hand_computed(self):
    metrics = full_class_scoring.rank_metrics(np.array([0, 1, 6]), ks=(1, 5))
    self.assertAllClose(metrics["top_1_error"], 2 / 3)
    self.assertAllClose(metrics["top_5_error"], 1 / 3)
    self.assertAllClose(metrics["ndcg_5"], (1 + 1 / np.log2(3)) / 3)
    self.assertAllClose(metrics["mrr"], (1 + 1 / 2 + 1 / 7) / 3)
    self.assertAllClose(metrics["accuracy"], 1 / 3)

  def test_bad_arguments_raise(self):
    model = _model("dot")
    with self.assertRaisesRegex(ValueError, "`k` must be in"):
      full_class_scoring.chunked_top_k(model, tf.zeros([1, 5]), 38)
    with self.assertRaisesRegex(ValueError, "`chunk_size` must be an integer >= 1, got 0"):
      full_class_scoring.chunked_top_k(model, tf.zeros([1, 5]), 3, 0)


if __name__ == "__main__":
  tf.test.main()
