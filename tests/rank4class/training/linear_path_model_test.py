"""Tests for rank4class.training.linear_path_model: the heads' scores, loss and penalties against NumPy and by
hand, the touch weights by hand."""

import numpy as np
import tensorflow as tf

from rank4class.training import linear_path_model


def _softmax_ce(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
  shifted = scores - scores.max(axis=-1, keepdims=True)
  log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
  return -np.take_along_axis(log_p, labels[:, None], axis=-1)[:, 0]


class HeadsSoftmaxLossTest(tf.test.TestCase):

  def test_is_the_sum_over_heads_of_each_heads_softmax_cross_entropy(self):
    scores = np.random.default_rng(0).normal(size=(4, 2, 3)).astype(np.float32)
    labels = np.array([0, 2, 1, 1])
    expected = np.mean(_softmax_ce(scores[:, 0], labels) + _softmax_ce(scores[:, 1], labels))
    loss = linear_path_model.HeadsSoftmaxLoss(3)
    self.assertAllClose(loss(labels, scores), expected, atol=1e-5)


  def test_with_folds_each_group_leaves_out_the_rows_of_its_fold(self):
    scores = np.random.default_rng(1).normal(size=(3, 6, 2)).astype(np.float32)  # 3 groups of 2 heads.
    labels, folds = np.array([0, 1, 1]), np.array([0, 1, 0])
    ce = np.stack([_softmax_ce(scores[:, h], labels) for h in range(6)], axis=1)  # [3 rows, 6 heads]
    # Group 0 (heads 0-1) leaves out the rows of fold 0, group 1 (heads 2-3) those of fold 1, group 2 none.
    kept = np.array([[0, 0, 1, 1, 1, 1], [1, 1, 0, 0, 1, 1], [0, 0, 1, 1, 1, 1]])
    loss = linear_path_model.HeadsSoftmaxLoss(2, folds=2)
    self.assertAllClose(loss(labels + 2 * folds, scores), np.mean(np.sum(ce * kept, axis=1)), atol=1e-5)


class LinearPathModelTest(tf.test.TestCase):

  def _model(self) -> linear_path_model.LinearPathModel:
    model = linear_path_model.LinearPathModel(2, tfidf_width=3, dense_width=1, dense_weights=[1.0, 0.5],
                                        penalties=[0.1, 1.0], touch_weights=[1.0, 2.0, 0.0])
    # Kernels [width, heads x classes]: head 0 -> columns 0-1, head 1 -> columns 2-3.
    model.tfidf_kernel.assign([[1, 0, 0, 1], [0, 2, 1, 0], [3, 0, 0, 0]])
    model.dense_kernel.assign([[1, 1, 2, 2]])
    model.bias.assign([0, 1, 0, 0])
    return model

  def test_scores_are_each_heads_logits(self):
    model = self._model()
    tfidf = tf.sparse.from_dense(tf.constant([[0.5, 0.0, 0.0], [0.0, 1.0, 1.0]]))
    scores = model({linear_path_model.TFIDF_KEY: tfidf,
                    linear_path_model.DENSE_KEY: tf.constant([[1.0], [2.0]])})
    # Row 0: t . W = [0.5, 0, 0, 0.5]; dense 1 x [1, 1 | 2, 2] x [1 | 0.5] = [1, 1, 1, 1]; bias [0, 1, 0, 0].
    # Row 1: t . W = [3, 2, 1, 0]; dense 2 x ... = [2, 2, 2, 2].
    self.assertAllClose(scores, [[[1.5, 2.0], [1.0, 1.5]], [[5.0, 5.0], [3.0, 2.0]]])

  def test_the_penalty_and_its_batch_estimate(self):
    model = self._model()
    # Head 0: tfidf 1 + 4 + 9, dense 2 -> 16 x 0.1; head 1: tfidf 1 + 1, dense 8 -> 10 x 1.
    self.assertAllClose(model.penalty(), 1.6 + 10.0)
    # A batch holding n-grams 1 and 2: their rows weighed 2 and 0, the dense kernel whole.
    tfidf = tf.sparse.from_dense(tf.constant([[0.0, 1.0, 1.0]]))
    # Head 0: 2 x 4 + 0 x 9 + 2 = 10 -> 1.0; head 1: 2 x 1 + 0 + 8 = 10 -> 10.
    self.assertAllClose(model.batch_penalty(tfidf), 11.0)

  def test_a_batch_reads_and_updates_each_distinct_ngram_row_once(self):
    model = self._model()
    tfidf = tf.sparse.from_dense(tf.constant([[0.5, 1.0, 0.0], [0.0, 1.0, 1.0]]))  # n-gram 1 in both rows.
    with tf.GradientTape() as tape:
      scores = model({linear_path_model.TFIDF_KEY: tfidf,
                      linear_path_model.DENSE_KEY: tf.constant([[1.0], [2.0]])}, training=True)
      loss = tf.reduce_sum(scores) + tf.add_n(model.losses)
    gradient = tape.gradient(loss, model.tfidf_kernel)
    self.assertIsInstance(gradient, tf.IndexedSlices)
    self.assertCountEqual(gradient.indices.numpy(), [0, 1, 2])  # Each row once.
    # Row j: the batch's sum of t_ij in every column, plus 2 x penalty x touch weight x W_j (per head).
    self.assertAllClose(tf.convert_to_tensor(gradient), [[0.7, 0.5, 0.5, 2.5], [2.0, 2.8, 6.0, 2.0],
                                                          [1.0, 1.0, 1.0, 1.0]])

  def test_touch_weights_are_the_inverse_chance_a_batch_holds_the_ngram(self):
    tfidf = tf.sparse.from_dense(tf.constant([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0],
                                              [0.0, 0.0, 0.0]]))
    # Column 0 in 2 of 4 rows: 1 - 0.5^2 = 0.75; column 1 in 1 row: 1 - 0.75^2 = 0.4375; column 2 never.
    self.assertAllClose(linear_path_model.touch_weights(tfidf, 2), [1 / 0.75, 1 / 0.4375, 0.0])

  def test_bad_arguments_raise(self):
    with self.assertRaisesRegex(ValueError, "TF-IDF or a dense input"):
      linear_path_model.LinearPathModel(2, 0, 0, [1.0], [0.1])
    with self.assertRaisesRegex(ValueError, "One dense weight and one penalty per head"):
      linear_path_model.LinearPathModel(2, 0, 3, [1.0, 1.0], [0.1])
    with self.assertRaisesRegex(ValueError, "`touch_weights` must give one weight per TF-IDF column"):
      linear_path_model.LinearPathModel(2, 3, 0, [1.0], [0.1], touch_weights=[1.0])


class PriorTest(tf.test.TestCase):
  """A prior classifier P beside the heads: each head adds p x (x . P), never penalised."""

  def test_each_head_adds_its_share_of_the_prior_and_only_its_weights_are_penalised(self):
    # Two heads (p = 0 and p = 2), two classes, dense width 2; the kernels at 1, P = [[1, 0], [0, 3]].
    model = linear_path_model.LinearPathModel(2, 0, 2, [1.0, 1.0], [0.5, 0.5], prior=[[1.0, 0.0], [0.0, 3.0]],
                                        prior_weights=[0.0, 2.0])
    model.dense_kernel.assign(tf.ones([2, 4]))
    scores = model({linear_path_model.DENSE_KEY: tf.constant([[1.0, 1.0]])})
    # x . W = [2, 2] for each head; x . P = [1, 3]: head 0 adds 0, head 1 adds [2, 6].
    self.assertAllClose(scores, [[[2.0, 2.0], [4.0, 8.0]]])
    self.assertAllClose(model.penalty(), 0.5 * 4 + 0.5 * 4)  # P is not a weight.
    self.assertEqual(linear_path_model.LinearPathModel.from_config(model.get_config()).get_config(),
                     model.get_config())

  def test_a_prior_of_another_shape_raises(self):
    with self.assertRaises(ValueError):
      linear_path_model.LinearPathModel(2, 0, 3, [1.0], [0.1], prior=[[1.0, 0.0]], prior_weights=[1.0])


if __name__ == "__main__":
  tf.test.main()
