"""Tests for rank4class_data.tf_ranking: TF-Ranking's own files, the same values, on either stack."""

import importlib.util
import os
import sys

import numpy as np
import tensorflow as tf

from rank4class_data import stack
from rank4class_data.tf_ranking import CURRENT_STACK_MODULES, tfr

# Labels and scores of one list, with a padded item (label -1) that TF-Ranking drops.
LABELS = np.array([[1.0, 0.0, 2.0, -1.0]], np.float32)
SCORES = np.array([[1.0, 3.0, 2.0, 9.0]], np.float32)


def _installed_tfr_folder() -> str:
  return os.path.realpath(list(importlib.util.find_spec("tensorflow_ranking").submodule_search_locations)[0])


class TfRankingTest(tf.test.TestCase):

  def test_modules_are_the_installed_tf_ranking_files(self):
    root = _installed_tfr_folder()
    for module in (tfr.keras.losses, tfr.keras.metrics, tfr.losses_impl, tfr.metrics_impl, tfr.data):
      self.assertStartsWith(os.path.realpath(module.__file__), root + os.sep)
    for name in CURRENT_STACK_MODULES:
      self.assertIn(name, sys.modules)

  def test_softmax_loss_matches_numpy(self):
    # Valid items [1, 3, 2] with labels [1, 0, 2]: TF-Ranking weighs the cross entropy of the normalized
    # labels by the list's label sum (3).
    valid = slice(0, 3)
    log_softmax = SCORES[0, valid] - np.log(np.sum(np.exp(SCORES[0, valid])))
    expected = -np.sum(LABELS[0, valid] * log_softmax)
    self.assertAllClose(tfr.keras.losses.SoftmaxLoss()(LABELS, SCORES), expected, rtol=1e-6)
    self.assertAllClose(expected, 5.222818, rtol=1e-6)

  def test_pairwise_logistic_loss_matches_numpy(self):
    # Pairs (i ranked above j by label): (0, 1), (2, 0), (2, 1), each log(1 + exp(-(s_i - s_j))). TF-Ranking's
    # default reduction (SUM_OVER_BATCH_SIZE) divides the sum by batch size x list size, the padded slot
    # included.
    pairs = [(0, 1), (2, 0), (2, 1)]
    losses = [np.log1p(np.exp(-(SCORES[0, i] - SCORES[0, j]))) for i, j in pairs]
    self.assertAllClose(tfr.keras.losses.PairwiseLogisticLoss()(LABELS, SCORES),
                        np.sum(losses) / 4, rtol=1e-6)

  def test_ndcg_metric_matches_numpy(self):
    # Ranking by score: item 1 (label 0), item 2 (label 2), item 0 (label 1); gain 2^l - 1, discount
    # log2(1+r).
    dcg = 0 / np.log2(2) + 3 / np.log2(3) + 1 / np.log2(4)
    ideal = 3 / np.log2(2) + 1 / np.log2(3)
    self.assertAllClose(tfr.keras.metrics.NDCGMetric()(LABELS, SCORES), dcg / ideal, rtol=1e-6)

  def test_losses_are_keras_2_objects_of_tf_keras(self):
    loss = tfr.keras.losses.SoftmaxLoss()
    self.assertIsInstance(loss, tf.keras.losses.Loss)
    self.assertIsInstance(tfr.keras.metrics.MRRMetric(), tf.keras.metrics.Metric)
    restored = tf.keras.losses.deserialize(tf.keras.losses.serialize(loss))
    self.assertIsInstance(restored, tfr.keras.losses.SoftmaxLoss)

  def test_keras_model_trains_with_a_tf_ranking_loss(self):
    tf.keras.utils.set_random_seed(0)
    features = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    # 3 items per list; the relevant one has the largest feature. One relevant item lets the softmax loss
    # approach 0 (with several, its floor is log(#relevant), close to the untrained loss); over 5 seeds the
    # last epoch's loss is 0.13-0.15 of the first's.
    labels = np.eye(3, dtype=np.float32)[np.argmax(features[:, :3], axis=1)]
    model = tf.keras.Sequential([tf.keras.layers.Dense(3)])
    model.compile(tf.keras.optimizers.Adam(0.05), loss=tfr.keras.losses.SoftmaxLoss())
    history = model.fit(features, labels, epochs=20, batch_size=16, verbose=0).history["loss"]
    self.assertLess(history[-1], 0.5 * history[0])

  def test_elwc_parsing_function_is_tf_ranking_data(self):
    self.assertTrue(callable(tfr.data.make_parsing_fn))
    self.assertEqual(tfr.data.ELWC, "example_list_with_context")


class CurrentStackLoadingTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    if stack.check_tensorflow_stack().name != stack.CURRENT:
      self.skipTest("the reference stack imports tensorflow_ranking as released")

  def test_estimator_placeholder_is_removed_and_explains_itself(self):
    self.assertNotIn("tensorflow.estimator", sys.modules)
    receiver_fn = tfr.data.build_ranking_serving_input_receiver_fn(
        tfr.data.ELWC, context_feature_spec={},
        example_feature_spec={"f": tf.io.FixedLenFeature([1], tf.float32)})
    with tf.Graph().as_default():
      with self.assertRaisesRegex(AttributeError,
                                  r"tf\.estimator\.export is not available: TensorFlow >= 2\.16"):
        receiver_fn()

  def test_estimator_modules_are_not_loaded(self):
    self.assertNotIn("tensorflow_ranking.python.estimator", sys.modules)
    self.assertNotIn("tensorflow_ranking.python.keras.estimator", sys.modules)


if __name__ == "__main__":
  tf.test.main()
