"""Tests for rank4class.evaluation.evaluators: streaming metrics, per-class recall, confusion counts, ELWC
candidate lists."""

import contextlib
import io
from unittest import mock

import numpy as np
import tensorflow as tf

from rank4class.evaluation import evaluators
from rank4class_data import progress_line


class ClassificationEvaluatorTest(tf.test.TestCase):

  def test_hand_computed_metrics_recall_and_confusion(self):
    evaluator = evaluators.ClassificationEvaluator(["a", "b", "c"], ks=(1, 5))
    # Instance 0: true b scored 1, ranked third of three; predicted a. Instance 1: true b ranked first.
    evaluator.update(tf.constant([[3.0, 1.0, 2.0], [0.0, 5.0, 1.0]]), tf.constant([1, 1]))
    report = evaluator.result()
    self.assertEqual(report["n"], 2)
    self.assertAllClose(report["metrics"]["top_1_error"], 0.5)
    self.assertAllClose(report["metrics"]["top_5_error"], 0.0)
    self.assertAllClose(report["metrics"]["ndcg_5"], (1 / np.log2(4) + 1.0) / 2)  # (0.5 + 1) / 2
    self.assertAllClose(report["metrics"]["mrr"], (1 / 3 + 1.0) / 2)
    self.assertAllClose(report["metrics"]["accuracy"], 0.5)
    self.assertEqual(report["confusion"]["counts"], [[0, 0, 0], [1, 1, 0], [0, 0, 0]])
    self.assertEqual(report["per_class_recall"], {"a": None, "b": 0.5, "c": None})
    self.assertEqual(report["class_counts"], {"a": 0, "b": 2, "c": 0})

  def test_graph_optimizer_setting_is_restored_around_every_call(self):
    # The evaluator's functions run with Grappler off (their first call is 0.15-0.3 s cheaper), and leave the
    # process's setting as they found it: the training step keeps its optimized graph.
    for before in (False, True):
      tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": before})
      try:
        evaluator = evaluators.ClassificationEvaluator(["a", "b"], ks=(1,))
        evaluator.update(tf.constant([[1.0, 0.0]]), tf.constant([1]))
        self.assertEqual(tf.config.optimizer.get_experimental_options()["disable_meta_optimizer"], before)
        self.assertAllClose(evaluator.result()["metrics"]["top_1_error"], 1.0)
        self.assertEqual(tf.config.optimizer.get_experimental_options()["disable_meta_optimizer"], before)
      finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})

  def test_graded_relevance_rows(self):
    evaluator = evaluators.ClassificationEvaluator(["a", "b", "c"], ks=(1, 5))
    # Instance 0: b (relevance 2) ranked second behind a (relevance 1), c unjudged (-1): among the judged a, b
    # the ranking is [a, b], DCG = 1/log2(2) + 3/log2(3), ideal [b, a] = 3 + 1/log2(3). Instance 1: one-hot c,
    # ranked first.
    evaluator.update(tf.constant([[3.0, 1.0, 2.0], [0.0, 1.0, 5.0]]),
                     tf.constant([[1.0, 2.0, -1.0], [0.0, 0.0, 1.0]]))
    report = evaluator.result()
    ndcg_0 = (1.0 + 3.0 / np.log2(3)) / (3.0 + 1.0 / np.log2(3))
    self.assertAllClose(report["metrics"]["ndcg_5"], (ndcg_0 + 1.0) / 2)
    # Top-K error is TF-Ranking's 1 - Hits@K: a hit is any class with relevance > 0 (a, first, in instance 0).
    self.assertAllClose(report["metrics"]["top_1_error"], 0.0)
    # The confusion matrix counts the most relevant class as the true one.
    self.assertEqual(report["confusion"]["counts"], [[0, 0, 0], [1, 0, 0], [0, 0, 1]])

  def test_reset_forgets_earlier_batches(self):
    evaluator = evaluators.get_evaluator(["a", "b"])
    evaluator.update(tf.constant([[0.0, 1.0]]), tf.constant([0]))
    evaluator = evaluators.get_evaluator(["a", "b"])
    evaluator.update(tf.constant([[0.0, 1.0]]), tf.constant([1]))
    self.assertEqual(evaluator.result()["n"], 1)
    self.assertAllClose(evaluator.result()["metrics"]["top_1_error"], 0.0)

  def test_evaluate_dataset_adds_the_instance_weighted_mean_loss(self):
    # Batches of 2 and 1 instances with batch-mean losses 1 and 4: (2 * 1 + 1 * 4) / 3 = 2, as Keras'
    # evaluators.
    dataset = tf.data.Dataset.from_tensor_slices((np.zeros([3, 2], np.float32), np.array([0, 1, 1]))).batch(2)
    batch_means = iter([1.0, 4.0])
    report = evaluators.evaluate_dataset(lambda x: tf.zeros([tf.shape(x)[0], 2]), dataset, ["a", "b"],
                                       loss_fn=lambda scores, labels: tf.constant(next(batch_means)))
    self.assertAllClose(report["metrics"]["loss"], 2.0)
    self.assertEqual(report["n"], 3)

  def test_progress_line_counts_the_instances(self):
    dataset = tf.data.Dataset.from_tensor_slices((np.zeros([3, 2], np.float32), np.array([0, 1, 1]))).batch(2)
    stderr = io.StringIO()
    with mock.patch.object(progress_line, "DEFAULT_EVERY_SECONDS", 0.0), contextlib.redirect_stderr(stderr):
      evaluators.evaluate_dataset(lambda x: tf.zeros([tf.shape(x)[0], 2]), dataset, ["a", "b"], progress=True)
      silent = evaluators.evaluate_dataset(lambda x: tf.zeros([tf.shape(x)[0], 2]), dataset, ["a", "b"])
    self.assertEqual(silent["n"], 3)
    # Not a terminal: lines.
    self.assertRegex(stderr.getvalue(), r"^evaluated 2 instances \([\d,]+ instances/s\)\n"
                                        r"evaluated 3 instances \([\d,]+ instances/s\)\n$")

  def test_label_out_of_range_is_an_error(self):
    evaluator = evaluators.ClassificationEvaluator(["a", "b"])
    with self.assertRaises(tf.errors.InvalidArgumentError):
      evaluator.update(tf.constant([[0.0, 1.0]]), tf.constant([2]))


class ListEvaluatorTest(tf.test.TestCase):

  def test_ranks_only_the_given_candidates_and_ignores_padding(self):
    evaluator = evaluators.ListEvaluator(ks=(1, 5))
    scores = tf.constant([[0.1, 0.9, 0.5, 0.3]])
    # Candidates: class 2 (relevant, 1) and class 0; class 1, scored highest, is not a candidate.
    evaluator.update(scores, tf.constant([[2, 0, 0]]), tf.constant([[1.0, 0.0, -1.0]]),
                     tf.constant([[True, True, False]]))
    report = evaluator.result()
    self.assertEqual((report["n"], report["num_items"]), (1, 2))
    self.assertAllClose(report["metrics"]["top_1_error"], 0.0)
    self.assertAllClose(report["metrics"]["mrr"], 1.0)


if __name__ == "__main__":
  tf.test.main()
