"""Tests for rank4class.inference.two_stage: retrieve with a dot model, re-rank with the interaction model,
one signature."""

import os

import numpy as np
import tensorflow as tf

from rank4class.inference import two_stage
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib

_C = 29


def _model(interaction: str, seed: int) -> model_lib.Rank4ClassModel:
  tf.keras.utils.set_random_seed(seed)
  hidden = {} if interaction == "dot" else {"hidden_units": (8, 8)}
  model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)),
                                    class_encoders.get("one_hot", num_classes=_C),
                                    interactions.get(interaction, **hidden))
  model(tf.zeros([1, 4]))
  return model


class TwoStageTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.retriever, self.ranker = _model("dot", 0), _model("latent_cross", 1)
    self.x = np.random.default_rng(0).normal(size=[9, 4]).astype(np.float32)

  def test_reranks_the_retrievers_top_m_with_the_ranker(self):
    ids, scores, candidates = two_stage.two_stage_top_k(self.retriever, self.ranker, self.x, 6,
                                                        3, chunk_size=7)
    self.assertAllEqual(candidates, tf.math.top_k(self.retriever(self.x), k=6).indices)
    full = self.ranker(self.x).numpy()
    restricted = np.take_along_axis(full, candidates.numpy(), axis=1)
    order = np.argsort(-restricted, axis=1)[:, :3]
    self.assertAllEqual(ids, np.take_along_axis(candidates.numpy(), order, axis=1))
    self.assertAllClose(scores, np.take_along_axis(restricted, order, axis=1), atol=1e-5)
    # With every class a candidate, two stages are the ranker's own top K.
    all_ids, _, _ = two_stage.two_stage_top_k(self.retriever, self.ranker, self.x, _C, 3)
    self.assertAllEqual(all_ids, tf.math.top_k(full, k=3).indices)

  def test_exported_signature_serves_both_stages(self):
    path = two_stage.export_two_stage(self.retriever, self.ranker, os.path.join(self.create_tempdir(), "ts"),
                                      num_candidates=6, top_k=3)
    served = tf.saved_model.load(path).signatures["serving_default"](inputs=tf.constant(self.x))
    ids, scores, candidates = two_stage.two_stage_top_k(self.retriever, self.ranker, self.x, 6, 3)
    self.assertAllEqual(served["class_ids"], ids)
    self.assertAllClose(served["scores"], scores, atol=1e-5)
    self.assertAllEqual(served["candidate_ids"], candidates)
    self.assertAllEqual(served["class_names"],
                        np.array([str(i) for i in range(_C)], object)[ids.numpy()].astype(bytes))

  def test_recall_curve_is_the_share_of_true_classes_in_the_retrievers_top_m(self):
    labels = np.arange(9) * 3 % _C
    dataset = tf.data.Dataset.from_tensor_slices((self.x, labels)).batch(4)
    curve = two_stage.recall_curve(self.retriever, dataset, (1, 3, 10, _C), chunk_size=5)
    scores = self.retriever(self.x).numpy()
    ranks = (scores > scores[np.arange(9), labels][:, None]).sum(axis=1)
    self.assertEqual(curve, {m: float(np.mean(ranks < m)) for m in (1, 3, 10, _C)})
    self.assertEqual(curve[_C], 1.0)
    self.assertLess(curve[1], curve[10])  # Not a constant: the curve rises with M on these labels.

  def test_report_recall_and_metrics_against_exhaustive(self):
    labels = np.arange(9) * 2 % _C
    dataset = tf.data.Dataset.from_tensor_slices((self.x, labels)).batch(4)
    report = two_stage.two_stage_report(self.retriever, self.ranker, dataset, 6, ks=(1, 5), chunk_size=5)
    candidates = tf.math.top_k(self.retriever(self.x), k=6).indices.numpy()
    found = (candidates == labels[:, None]).any(axis=1)
    self.assertAllClose(report["recall_at_m"], found.mean())
    full = self.ranker(self.x).numpy()
    true = full[np.arange(9), labels]
    self.assertAllClose(report["exhaustive"]["mrr"], np.mean(1 / (1 + (full > true[:, None] + 1e-6).sum(1))))
    restricted = np.take_along_axis(full, candidates, axis=1)
    ranks = np.where(found, (restricted > true[:, None] + 1e-6).sum(1), np.inf)
    self.assertAllClose(report["two_stage"]["mrr"], np.mean(1 / (1 + ranks)))
    full_report = two_stage.two_stage_report(self.retriever, self.ranker, dataset, _C)
    self.assertEqual(full_report["recall_at_m"], 1.0)
    self.assertAllClose(full_report["two_stage"], full_report["exhaustive"])

  def test_mismatched_models_and_sizes_raise(self):
    other = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)),
                                      class_encoders.get("one_hot", num_classes=3), interactions.get("dot"))
    with self.assertRaisesRegex(ValueError, "same classes"):
      two_stage.two_stage_top_k(other, self.ranker, self.x, 2, 1)
    with self.assertRaisesRegex(ValueError, "`num_candidates` must be in"):
      two_stage.two_stage_top_k(self.retriever, self.ranker, self.x, 30, 1)
    with self.assertRaisesRegex(ValueError, "`k` must be in"):
      two_stage.two_stage_top_k(self.retriever, self.ranker, self.x, 3, 4)


if __name__ == "__main__":
  tf.test.main()
