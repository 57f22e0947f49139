"""Tests for pairwise.margin.listwise: TF-Ranking listwise losses, the item scorer and the double-headed
option."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import pairwise  # noqa: F401  (registers the Keras objects for loading)
from pairwise.margin import aggregate, listwise, margin_model
from rank4class_data.tf_ranking import tfr


class ListwiseLossTest(tf.test.TestCase, parameterized.TestCase):

  def test_unknown_loss_raises_listing_allowed(self):
    with self.assertRaisesRegex(ValueError,
                                r"`objective` must be one of \['softmax', 'approx_ndcg'\], got 'lambda'"):
      listwise.get_listwise_loss("lambda")

  def test_softmax_matches_numpy(self):
    # TF-Ranking softmax loss: -Σ_i y_i · log softmax(s)_i over real items (labels 2, 1, 0; one padding).
    labels = np.array([[2.0, 1.0, 0.0, -1.0]])
    scores = np.array([[1.0, 2.0, 3.0, 99.0]])
    log_softmax = scores[0, :3] - np.log(np.sum(np.exp(scores[0, :3])))
    expected = -np.sum(labels[0, :3] * log_softmax)
    values = listwise.listwise_loss_values(listwise.get_listwise_loss("softmax"), labels, scores)
    self.assertAllClose(values, [expected], atol=1e-5)

  @parameterized.parameters("softmax", "approx_ndcg")
  def test_matches_tf_ranking_and_ignores_padding_scores(self, name):
    labels = tf.constant([[2.0, 0.0, 1.0, -1.0], [1.0, 0.0, -1.0, -1.0]])
    scores = tf.constant([[0.3, 0.1, 0.2, 1e9], [0.5, 0.4, -1e9, 7.0]])
    clean = tf.where(labels >= 0, scores, 0.0)
    expected = {"softmax": tfr.keras.losses.SoftmaxLoss,
                "approx_ndcg": tfr.keras.losses.ApproxNDCGLoss}[name](
        reduction=tf.keras.losses.Reduction.NONE)(labels, clean)
    got = listwise.listwise_loss_values(listwise.get_listwise_loss(name), labels, scores)
    self.assertEqual(got.shape, (2,))
    self.assertAllClose(got, tf.reshape(expected, [-1]))
    self.assertTrue(np.all(np.isfinite(got)))

  def test_class_loss_matches_numpy(self):
    logits = np.array([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]], np.float32)
    expected = [-np.log(np.exp(2) / (np.exp(2) + 1 + np.exp(-1))), np.log(3.0)]
    self.assertAllClose(listwise.class_loss_values(logits, [0, 2], 3), expected, atol=1e-6)

  def test_class_label_out_of_range_is_an_error(self):
    with self.assertRaises(tf.errors.InvalidArgumentError):
      listwise.class_loss_values(tf.zeros([1, 3]), [3], 3)


class ItemScoringHeadTest(tf.test.TestCase):

  def test_shapes_and_config(self):
    head = listwise.ItemScoringHead(dropout=0.1)
    self.assertEqual(head(tf.ones([3, 8])).shape, (3,))
    kernels = [w.shape.as_list() for w in head.weights if "kernel" in w.name]
    self.assertEqual(kernels, [[8, 8], [8, 8], [8, 4], [4, 1]])
    self.assertEqual(listwise.ItemScoringHead.from_config(head.get_config()).get_config(), head.get_config())

  def test_bad_dropout_raises(self):
    with self.assertRaisesRegex(ValueError, "dropout"):
      listwise.ItemScoringHead(dropout=-0.1)


class ListwiseRankerTest(tf.test.TestCase):

  def test_scores_and_class_logits(self):
    model = listwise.ListwiseRanker(margin_model.HashedBagOfWordsEncoder(40, 6), num_classes=3)
    out = model(tf.constant(["good", "bad"]))
    self.assertEqual(out["scores"].shape, (2,))
    self.assertEqual(out["class_logits"].shape, (2, 3))

  def test_score_lists_matches_item_scores_and_pads(self):
    model = listwise.ListwiseRanker(margin_model.HashedBagOfWordsEncoder(40, 6))
    items = tf.constant([["good", "bad", "x"]])
    out = model.score_lists(items, tf.constant([[True, True, False]]), training=False)
    self.assertAllClose(out[0, :2], model(tf.constant(["good", "bad"]), training=False))
    self.assertEqual(out[0, 2], aggregate.PADDING_SCORE)

  def test_one_class_raises(self):
    with self.assertRaisesRegex(ValueError, "num_classes"):
      listwise.ListwiseRanker(None, num_classes=1)

  def test_config_and_save_load_round_trip(self):
    model = listwise.ListwiseRanker(margin_model.HashedBagOfWordsEncoder(40, 6), num_classes=2, dropout=0.1)
    self.assertEqual(listwise.ListwiseRanker.from_config(model.get_config()).get_config(), model.get_config())
    inputs = tf.constant(["good pill", "bad night", ""])
    expected = model(inputs, training=False)
    path = self.create_tempdir().full_path
    model.save(path, save_traces=False)
    loaded = tf.keras.models.load_model(path)
    self.assertAllClose(tf.nest.flatten(loaded(inputs, training=False)), tf.nest.flatten(expected))

  def test_softmax_training_beats_untrained_ndcg(self):
    # Lists of 6 embeddings whose first coordinate is the grade; a listwise softmax loss learns to sort them.
    tf.keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=(64, 6)).astype(np.float32)
    embeddings = np.concatenate([labels[..., None] + rng.normal(0, 0.3, size=(64, 6, 1)),
                                 rng.normal(size=(64, 6, 3))], axis=-1).astype(np.float32)
    model = listwise.ListwiseRanker(None, dropout=0.0)
    loss = listwise.get_listwise_loss("softmax")
    optimizer = tf.keras.optimizers.Adam(0.01)

    def ndcg():
      scores = model.score_embeddings(tf.constant(embeddings), training=False)
      return float(tfr.keras.metrics.NDCGMetric(topn=3)(labels, scores))

    before = ndcg()
    for _ in range(60):
      with tf.GradientTape() as tape:
        scores = model.score_embeddings(tf.constant(embeddings), training=True)
        value = tf.reduce_mean(listwise.listwise_loss_values(loss, labels, scores))
      optimizer.apply_gradients(zip(tape.gradient(value, model.trainable_variables),
                                    model.trainable_variables, strict=True))
    self.assertGreater(ndcg(), max(before, 0.9))


if __name__ == "__main__":
  tf.test.main()
