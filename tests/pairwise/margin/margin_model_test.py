"""Tests for pairwise.margin.margin_model: encoder stand-in, MLP head, ranker, margin loss and pair
accuracy."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import pairwise  # noqa: F401  (registers the Keras objects for loading)
from pairwise.margin import margin_model


def _texts(*values):
  return tf.constant(list(values))


class HashedBagOfWordsEncoderTest(tf.test.TestCase):

  def test_same_tokens_same_embedding_and_empty_is_zero(self):
    encoder = margin_model.HashedBagOfWordsEncoder(num_buckets=50, output_dim=4)
    out = encoder(_texts("Good pill", "pill good", ""))
    self.assertEqual(out.shape, (3, 4))
    self.assertAllClose(out[0], out[1])
    self.assertAllClose(out[2], np.zeros(4))

  def test_zero_buckets_raises(self):
    with self.assertRaisesRegex(ValueError, "num_buckets"):
      margin_model.HashedBagOfWordsEncoder(num_buckets=0)

  def test_config_round_trip(self):
    encoder = margin_model.HashedBagOfWordsEncoder(num_buckets=7, output_dim=3)
    clone = margin_model.HashedBagOfWordsEncoder.from_config(encoder.get_config())
    self.assertEqual(clone.get_config(), encoder.get_config())


class DenseBlockTest(tf.test.TestCase):

  def test_linear_batchnorm_prelu_order_in_inference(self):
    block = margin_model.DenseBlock(1, dropout=0.5)
    block(tf.zeros([1, 2]))
    block._linear.set_weights([np.ones([2, 1]), np.zeros([1])])
    # x·W = 1 - 2 = -1; fresh BatchNorm (mean 0, var 1, eps 1e-5) -> -1/sqrt(1 + 1e-5); PReLU slope 0.25.
    out = block(tf.constant([[1.0, -2.0]]), training=False)
    self.assertAllClose(out, [[-0.25 / np.sqrt(1.0 + 1e-5)]])

  def test_bad_dropout_raises(self):
    with self.assertRaisesRegex(ValueError, "dropout"):
      margin_model.DenseBlock(4, dropout=1.0)

  def test_config_round_trip(self):
    block = margin_model.DenseBlock(5, dropout=0.1, batch_norm=False)
    self.assertEqual(margin_model.DenseBlock.from_config(block.get_config()).get_config(), block.get_config())


class PaperTowerTest(tf.test.TestCase):
  def test_widths_d_d_half_d_named_blocks(self):
    tower = margin_model.paper_tower(6, dropout=0.0, batch_norm=False)
    x = tf.ones([2, 6])
    widths = []
    for block in tower:
      x = block(x)
      widths.append(int(x.shape[-1]))
    self.assertEqual(widths, [6, 6, 3])
    self.assertEqual([b.name for b in tower], ["block_1", "block_2", "block_3"])

  def test_half_width_is_at_least_one(self):
    self.assertEqual(margin_model.paper_tower(1, 0.0, True)[-1].get_config()["units"], 1)


class ContextAggregatingMLPTest(tf.test.TestCase):

  def test_widths_follow_the_paper(self):
    head = margin_model.ContextAggregatingMLP()
    out = head((tf.ones([3, 8]), tf.zeros([3, 8])), training=False)
    self.assertEqual(out.shape, (3, 2))
    kernels = [w.shape.as_list() for w in head.weights if "kernel" in w.name]
    # 2d -> d -> d -> d/2 -> (1, 1) with d = 8.
    self.assertEqual(kernels, [[16, 8], [8, 8], [8, 4], [4, 1], [4, 1]])

  def test_scores_depend_on_order(self):
    tf.keras.utils.set_random_seed(0)
    head = margin_model.ContextAggregatingMLP()
    a, b = tf.random.normal([2, 6]), tf.random.normal([2, 6])
    forward = head((a, b), training=False)
    backward = head((b, a), training=False)
    self.assertNotAllClose(forward, backward[:, ::-1])

  def test_inference_is_deterministic_despite_dropout(self):
    head = margin_model.ContextAggregatingMLP(dropout=0.5)
    z = tf.random.normal([4, 6])
    self.assertAllClose(head((z, z), training=False), head((z, z), training=False))

  def test_config_round_trip(self):
    head = margin_model.ContextAggregatingMLP(dropout=0.3, batch_norm=False)
    clone = margin_model.ContextAggregatingMLP.from_config(head.get_config())
    self.assertEqual(clone.get_config(), head.get_config())


class LinearPairHeadTest(tf.test.TestCase):

  def test_scores_each_passage_alone(self):
    head = margin_model.LinearPairHead()
    head((tf.zeros([1, 2]), tf.zeros([1, 2])))
    head._linear.set_weights([np.array([[1.0], [2.0]]), np.array([0.5])])
    # [1, 1]·[1, 2] + 0.5 = 3.5 and [0, 1]·[1, 2] + 0.5 = 2.5.
    out = head((tf.constant([[1.0, 1.0]]), tf.constant([[0.0, 1.0]])))
    self.assertAllClose(out, [[3.5, 2.5]])


class PairwiseRankerTest(tf.test.TestCase, parameterized.TestCase):

  def test_unknown_head_raises_listing_allowed(self):
    with self.assertRaisesRegex(ValueError, r"`head` must be one of \['mlp', 'linear'\], got 'deep'"):
      margin_model.PairwiseRanker(head="deep")

  def test_separate_encoders_need_an_encoder(self):
    with self.assertRaisesRegex(ValueError, "separate_encoders"):
      margin_model.PairwiseRanker(None, separate_encoders=True)

  def test_one_class_raises(self):
    with self.assertRaisesRegex(ValueError, "num_classes"):
      margin_model.PairwiseRanker(None, num_classes=1)

  def test_precomputed_embeddings(self):
    model = margin_model.PairwiseRanker(None)
    self.assertEqual(model((tf.ones([5, 6]), tf.zeros([5, 6]))).shape, (5, 2))

  def test_separate_encoders_have_their_own_weights(self):
    shared = margin_model.PairwiseRanker(margin_model.HashedBagOfWordsEncoder(20, 4))
    separate = margin_model.PairwiseRanker(margin_model.HashedBagOfWordsEncoder(20, 4),
                                           separate_encoders=True)
    for model in (shared, separate):
      model((_texts("a b"), _texts("c")))
    def count(m):
      return sum(1 for w in m.trainable_weights if "embeddings" in w.name)
    self.assertEqual(count(shared), 1)
    self.assertEqual(count(separate), 2)
    left = separate.encode(_texts("a b"), "left")
    right = separate.encode(_texts("a b"), "right")
    self.assertNotAllClose(left, right)

  def test_encode_lists_encodes_real_items_only(self):
    model = margin_model.PairwiseRanker(margin_model.HashedBagOfWordsEncoder(20, 4))
    items = tf.constant([["a", "b"], ["c", "zzz"]])
    out = model.encode_lists(items, tf.constant([[True, True], [True, False]]))
    self.assertAllClose(out[0, 1], model.encode(_texts("b"))[0])
    self.assertAllClose(out[1, 1], np.zeros(4))

  def test_class_head_outputs(self):
    model = margin_model.PairwiseRanker(margin_model.HashedBagOfWordsEncoder(20, 4), num_classes=3)
    out = model((_texts("a", "b"), _texts("c", "d")))
    self.assertEqual(out["scores"].shape, (2, 2))
    self.assertEqual(out["left_class_logits"].shape, (2, 3))

  def test_classify_without_class_head_raises(self):
    with self.assertRaisesRegex(ValueError, "no class head"):
      margin_model.PairwiseRanker(None).classify(tf.ones([1, 4]))

  def test_config_round_trip(self):
    model = margin_model.PairwiseRanker(margin_model.HashedBagOfWordsEncoder(20, 4),
                                        head="linear", dropout=0.1)
    clone = margin_model.PairwiseRanker.from_config(model.get_config())
    self.assertEqual(clone.get_config(), model.get_config())

  @parameterized.named_parameters(("plain", 0, False), ("double_headed_separate", 3, True))
  def test_save_load_round_trip(self, num_classes, separate):
    model = margin_model.PairwiseRanker(margin_model.HashedBagOfWordsEncoder(30, 4),
                                        separate_encoders=separate,
                                       num_classes=num_classes)
    inputs = (_texts("good pill", "bad"), _texts("bad", ""))
    expected = model(inputs, training=False)
    path = self.create_tempdir().full_path
    # Traced SavedModel exports are tested once in pairwise_train_test; here the config + weights path.
    model.save(path, save_traces=False)
    loaded = tf.keras.models.load_model(path)
    self.assertIsInstance(loaded, margin_model.PairwiseRanker)
    self.assertAllClose(tf.nest.flatten(loaded(inputs, training=False)), tf.nest.flatten(expected))


if __name__ == "__main__":
  tf.test.main()
