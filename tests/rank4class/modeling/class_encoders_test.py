"""Tests of rank4class.modeling.class_encoders: one-hot (learned W, b) and text-metadata class encoders."""

import dataclasses
import os
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class.modeling import class_encoders
from rank4class_encoders import bert_conversion, text_encoder
from tests.rank4class import keras_round_trip

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "sports", "politics", "science", "news", "space", "hockey"]
_CLASS_TEXTS = ["sports news", "politics", "space science"]


def _subset_model(encoder: class_encoders.ClassEncoder) -> tf.keras.Model:
  """A functional model over the class-subset input, so the layer can be saved and reloaded on its own."""
  class_ids = tf.keras.Input(shape=(), dtype=tf.int32, name="class_ids")
  embeddings, bias = encoder(class_ids)
  return tf.keras.Model(class_ids, {"embeddings": embeddings, "bias": bias})


class OneHotClassEncoderTest(tf.test.TestCase, parameterized.TestCase):
  def test_all_classes_are_w_rows_and_bias(self):
    encoder = class_encoders.OneHotClassEncoder(num_classes=3, embedding_dim=2)
    encoder.build()
    encoder.embeddings.assign([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    encoder.bias.assign([0.1, 0.2, 0.3])
    embeddings, bias = encoder(None)
    self.assertAllClose(embeddings, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])  # c_i = W^T e_i
    self.assertAllClose(bias, [0.1, 0.2, 0.3])

  def test_class_subset_by_ids(self):
    encoder = class_encoders.OneHotClassEncoder(num_classes=3, embedding_dim=2)
    embeddings, bias = encoder(None)
    sub_embeddings, sub_bias = encoder(tf.constant([2, 0]))
    self.assertAllClose(sub_embeddings, tf.gather(embeddings, [2, 0]))
    self.assertAllClose(sub_bias, tf.gather(bias, [2, 0]))

  def test_looked_up_classes_read_and_train_sparsely(self):
    encoder = class_encoders.OneHotClassEncoder(num_classes=5, embedding_dim=2)
    encoder(None)
    with tf.GradientTape() as tape:
      embeddings, bias = encoder(tf.constant([3, 1, 3]))
      loss = tf.reduce_sum(embeddings) + tf.reduce_sum(bias)
    for gradient in tape.gradient(loss, encoder.trainable_weights):
      # Gathered from the variables themselves: a sparse gradient over the looked-up rows, not all 5.
      self.assertIsInstance(gradient, tf.IndexedSlices)
      self.assertAllEqual(gradient.indices, [3, 1, 3])
    no_bias = class_encoders.OneHotClassEncoder(num_classes=5, embedding_dim=2, use_bias=False)
    no_bias(None)
    self.assertAllEqual(no_bias(tf.constant([4, 0]))[1], [0.0, 0.0])

  def test_without_bias_gives_zeros_and_no_weight(self):
    encoder = class_encoders.OneHotClassEncoder(num_classes=4, embedding_dim=3, use_bias=False)
    _, bias = encoder(None)
    self.assertAllClose(bias, np.zeros(4))
    self.assertLen(encoder.trainable_weights, 1)

  def test_unresolved_embedding_dim_raises_on_build(self):
    with self.assertRaisesRegex(ValueError, "embedding_dim"):
      class_encoders.OneHotClassEncoder(num_classes=3)(None)

  def test_resolve_embedding_dim_keeps_explicit_value(self):
    implicit = class_encoders.OneHotClassEncoder(num_classes=3)
    implicit.resolve_embedding_dim(7)
    explicit = class_encoders.OneHotClassEncoder(num_classes=3, embedding_dim=5)
    explicit.resolve_embedding_dim(7)
    self.assertEqual((implicit.embedding_dim, explicit.embedding_dim), (7, 5))
    self.assertIsNone(implicit.get_config()["embedding_dim"])  # Re-resolved after loading.

  @parameterized.parameters(
    ({"num_classes": 1}, "`num_classes` must be an integer >= 2, got 1."),
    ({"num_classes": 2.5}, "`num_classes` must be an integer >= 2, got 2.5."),
    ({"num_classes": 3, "embedding_dim": 0}, "`embedding_dim` must be an integer >= 1, got 0."),
    ({"num_classes": 3, "embedding_dim": True}, "`embedding_dim` must be an integer >= 1, got True."),
  )
  def test_bad_arguments_raise(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      class_encoders.OneHotClassEncoder(**kwargs)

  def test_numpy_integer_sizes_are_plain_ints(self):
    encoder = class_encoders.OneHotClassEncoder(num_classes=np.int64(3), embedding_dim=np.int32(4))
    self.assertEqual((type(encoder.num_classes), type(encoder.embedding_dim)), (int, int))

  def test_config_and_save_load_round_trip(self):
    encoder = class_encoders.OneHotClassEncoder(num_classes=5, embedding_dim=3, embeddings_regularizer="l2")
    clone = class_encoders.OneHotClassEncoder.from_config(encoder.get_config())
    self.assertEqual(clone.get_config(), encoder.get_config())
    model = _subset_model(encoder)
    ids = tf.constant([4, 1, 1])
    loaded = keras_round_trip.save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(ids), model(ids))


class MetadataClassEncoderTest(tf.test.TestCase):
  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls._tmp = tempfile.TemporaryDirectory()
    cls._handles = bert_conversion.export_random_bert(
      cls._tmp.name, _VOCAB, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32
    )

  @classmethod
  def tearDownClass(cls):
    cls._tmp.cleanup()
    super().tearDownClass()

  def _text(self, **kwargs) -> text_encoder.TextEncoderConfig:
    return text_encoder.TextEncoderConfig(self._handles.preprocess, self._handles.encoder, max_seq_length=8,
                                          **kwargs)

  def _reference(self) -> tf.Tensor:
    encoder = text_encoder.TextEncoder(self._handles.preprocess, self._handles.encoder, max_seq_length=8)
    return encoder(tf.constant(_CLASS_TEXTS))

  def test_frozen_precomputed_embeddings_are_text_encodings(self):
    encoder = class_encoders.get(
      "metadata",
      class_texts=_CLASS_TEXTS,
      text=self._text(),
    )
    embeddings, bias = encoder(None)
    self.assertAllClose(embeddings, self._reference(), atol=1e-5)
    self.assertAllClose(bias, np.zeros(3))
    self.assertEqual(encoder.num_classes, 3)
    self.assertEqual(encoder.embedding_dim, 16)
    self.assertLen(encoder.trainable_weights, 1)  # only the bias: the text encoder is frozen

  def test_given_text_embeddings_stand_for_the_encoders_and_are_not_saved_in_the_config(self):
    given = np.arange(48, dtype=np.float32).reshape([3, 16]) / 48  # Not what the encoder gives.
    encoder = class_encoders.MetadataClassEncoder(_CLASS_TEXTS, self._text(), use_bias=False,
                                                  text_embeddings=given)
    embeddings, _ = encoder(None)
    self.assertAllEqual(embeddings, given)
    self.assertNotIn("text_embeddings", encoder.get_config())
    rebuilt = class_encoders.MetadataClassEncoder.from_config(encoder.get_config())
    self.assertAllClose(rebuilt(None)[0], self._reference(), atol=1e-5)  # Encoded again: no values given.

  def test_text_embeddings_of_another_shape_or_of_a_fine_tuned_encoder_raise(self):
    with self.assertRaisesRegex(ValueError, r"shape \[num_classes=3, hidden=16\], got shape \[2, 16\]"):
      class_encoders.MetadataClassEncoder(_CLASS_TEXTS, self._text(), text_embeddings=np.zeros([2, 16]))
    with self.assertRaisesRegex(ValueError, "must be finite"):
      class_encoders.MetadataClassEncoder(_CLASS_TEXTS, self._text(),
                                          text_embeddings=np.full([3, 16], np.nan))
    with self.assertRaisesRegex(ValueError, "need `precompute=True` and `text.trainable=False`"):
      class_encoders.MetadataClassEncoder(_CLASS_TEXTS, self._text(trainable=True),
                                          text_embeddings=np.zeros([3, 16]))

  def test_trainable_encoder_recomputes_and_projects(self):
    encoder = class_encoders.MetadataClassEncoder(
      _CLASS_TEXTS,
      self._text(trainable=True),
      output_dim=4,
      use_bias=False,
    )
    with tf.GradientTape() as tape:
      embeddings, _ = encoder(tf.constant([1, 2]))
      total = tf.reduce_sum(embeddings**2)
    self.assertEqual(embeddings.shape, [2, 4])
    gradients = tape.gradient(total, encoder.trainable_weights)
    # Beyond the projection's kernel and bias, BERT's own weights receive gradients.
    self.assertGreater(sum(g is not None for g in gradients), 2)

  def test_empty_class_text_raises(self):
    with self.assertRaisesRegex(ValueError, r"class_texts\[1\]"):
      class_encoders.MetadataClassEncoder(["a", " "], self._text())

  def test_config_from_dataclass_and_save_load_round_trip(self):
    config = class_encoders.ClassEncoderConfig(
      type="metadata",
      metadata=class_encoders.MetadataClassEncoderConfig(
        text=text_encoder.TextEncoderConfig(
          self._handles.preprocess, self._handles.encoder, max_seq_length=8
        ),
        output_dim=5,
      ),
    )
    encoder = class_encoders.make_class_encoder(config, class_names=_CLASS_TEXTS)
    self.assertEqual(encoder.class_texts, _CLASS_TEXTS)
    model = _subset_model(encoder)
    ids = tf.constant([0, 2])
    loaded = keras_round_trip.save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(ids), model(ids), atol=1e-5)

  def _residual(self, l2_normalize: bool = False, **kwargs) -> class_encoders.MetadataClassEncoder:
    return class_encoders.MetadataClassEncoder(
      _CLASS_TEXTS, self._text(l2_normalize=l2_normalize), use_bias=False, residual_projection=True, **kwargs)

  def test_residual_projection_starts_as_identity(self):
    encoder = self._residual()
    embeddings, _ = encoder(None)
    self.assertAllClose(embeddings, self._reference(), atol=1e-5)  # x + 0 x: the zero-initialised kernel.
    self.assertEqual(encoder.embedding_dim, 16)
    self.assertLen(encoder.trainable_weights, 2)  # The projection's kernel [16, 16] and bias [16].
    self.assertAllClose(encoder.encode_class_texts(tf.constant(_CLASS_TEXTS[::-1])),
                        embeddings[::-1], atol=1e-5)

  def test_residual_projection_hand_computed(self):
    encoder = self._residual()
    encoder(None)
    kernel, bias = encoder.trainable_weights
    kernel.assign(tf.ones_like(kernel))
    bias.assign(tf.fill([16], 0.5))
    x = self._reference().numpy()
    # (x + x · ones[16, 16] + 0.5)_j = x_j + sum(x) + 0.5.
    self.assertAllClose(encoder(None)[0], x + x.sum(axis=1, keepdims=True) + 0.5, atol=1e-4)

  def test_normalize_output_gives_unit_length_text_embeddings(self):
    encoder = self._residual(l2_normalize=True, normalize_output=True)
    embeddings, bias = encoder(tf.constant([2, 0]))
    x = self._reference().numpy()[[2, 0]]
    self.assertAllClose(embeddings, x / np.linalg.norm(x, axis=1, keepdims=True), atol=1e-5)
    self.assertAllClose(bias, [0.0, 0.0])
    projected = class_encoders.MetadataClassEncoder(
      _CLASS_TEXTS, self._text(), output_dim=3,
      normalize_output=True)
    self.assertAllClose(tf.norm(projected(None)[0], axis=1), [1.0, 1.0, 1.0])

  def test_residual_projection_to_another_size_raises(self):
    with self.assertRaisesRegex(ValueError, "output_dim.*16, got 8"):
      self._residual(output_dim=8)
    self.assertEqual(self._residual(output_dim=16).embedding_dim, 16)

  def test_config_saved_before_the_options_loads_the_same(self):
    encoder = class_encoders.MetadataClassEncoder(_CLASS_TEXTS, self._text(), output_dim=4, name="m")
    config = encoder.get_config()
    self.assertEqual((config["residual_projection"], config["normalize_output"]), (False, False))
    old = {k: v for k, v in config.items() if k not in ("residual_projection", "normalize_output")}
    self.assertEqual(class_encoders.MetadataClassEncoder.from_config(old).get_config(), config)

  def test_config_saved_with_flat_text_keys_loads_the_same(self):
    # Up to 0.8 the layer saved its text encoder's settings as flat keys, `trainable` as `trainable_encoder`.
    old = {"name": "m", "trainable": True, "dtype": "float32", "use_bias": True, "class_texts": _CLASS_TEXTS,
           "preprocess_handle": self._handles.preprocess, "encoder_handle": self._handles.encoder,
           "trainable_encoder": False, "pooling": "cls", "max_seq_length": 8, "l2_normalize": True,
           "output_dim": 4, "precompute": True, "residual_projection": False, "normalize_output": False,
           "untrained_share": 0.0}
    encoder = class_encoders.MetadataClassEncoder.from_config(old)
    text = self._text(pooling="cls", l2_normalize=True)
    self.assertEqual(encoder.get_config(),
                     class_encoders.MetadataClassEncoder(_CLASS_TEXTS, text, output_dim=4,
                                                         name="m").get_config())
    self.assertEqual(encoder.get_config()["text"], dataclasses.asdict(text))
    with self.assertRaisesRegex(ValueError, "not both"):
      class_encoders.MetadataClassEncoder.from_config({**old, "text": dataclasses.asdict(text)})

  def test_saved_model_with_flat_text_keys_loads(self):
    # A model file as 0.8 saved it: the layer's config has the flat keys.
    encoder = class_encoders.MetadataClassEncoder(_CLASS_TEXTS, self._text(), output_dim=5)
    model = _subset_model(encoder)
    path = os.path.join(self.create_tempdir().full_path, "model.keras")
    model.save(path)
    keras_round_trip.rewrite_layer_config(path, "MetadataClassEncoder",
                                          keras_round_trip.flat_text_layer_config)
    loaded = tf.keras.models.load_model(path)
    ids = tf.constant([0, 2])
    self.assertAllClose(loaded(ids), model(ids), atol=1e-5)

  def test_residual_options_from_dataclass_config_and_save_load_round_trip(self):
    config = class_encoders.ClassEncoderConfig(
      type="metadata",
      metadata=class_encoders.MetadataClassEncoderConfig(
        text=text_encoder.TextEncoderConfig(
          self._handles.preprocess, self._handles.encoder, max_seq_length=8, l2_normalize=True
        ),
        use_bias=False,
        residual_projection=True,
        normalize_output=True,
      ),
    )
    encoder = class_encoders.make_class_encoder(config, class_names=_CLASS_TEXTS)
    self.assertEqual({k: encoder.get_config()[k] for k in ("residual_projection",
                                                           "normalize_output", "use_bias")},
                     {"residual_projection": True, "normalize_output": True, "use_bias": False})
    clone = class_encoders.MetadataClassEncoder.from_config(encoder.get_config())
    self.assertEqual(clone.get_config(), encoder.get_config())
    model = _subset_model(encoder)
    kernel = encoder.trainable_weights[0]
    kernel.assign(np.random.default_rng(0).normal(size=kernel.shape))  # Away from the identity.
    ids = tf.constant([0, 2])
    loaded = keras_round_trip.save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(ids), model(ids), atol=1e-5)
    self.assertNotAllClose(model(ids)["embeddings"],
                           tf.math.l2_normalize(tf.gather(self._reference(), [0, 2]), 1))


class FactoryTest(tf.test.TestCase):
  def test_unknown_name_lists_allowed(self):
    with self.assertRaisesRegex(ValueError, "one_hot.*metadata"):
      class_encoders.get("graph")

  def test_make_one_hot_from_config(self):
    encoder = class_encoders.make_class_encoder(
      class_encoders.ClassEncoderConfig(one_hot=class_encoders.OneHotClassEncoderConfig(embedding_dim=8)),
      class_names=["a", "b", "c", "d"],
    )
    self.assertEqual((encoder.num_classes, encoder.embedding_dim), (4, 8))

  def test_metadata_texts_must_match_classes(self):
    config = class_encoders.ClassEncoderConfig(
      type="metadata",
      metadata=class_encoders.MetadataClassEncoderConfig(
        text=text_encoder.TextEncoderConfig("unused", "unused"), class_texts=["only one"]
      ),
    )
    with self.assertRaisesRegex(ValueError, "1 texts but there are 2 classes"):
      class_encoders.make_class_encoder(config, class_names=["a", "b"])

  def test_metadata_without_settings_raises(self):
    with self.assertRaisesRegex(ValueError, "metadata"):
      class_encoders.make_class_encoder(class_encoders.ClassEncoderConfig(type="metadata"), ["a", "b"])

  def test_unknown_names_raise_when_the_config_is_made(self):
    # Each name with no branch is refused by the config itself, before any model is built.
    with self.assertRaisesRegex(ValueError,
                                r"`class_encoder` must be one of \['one_hot', 'metadata'\], got 'graph'"):
      class_encoders.ClassEncoderConfig(type="graph")
    with self.assertRaisesRegex(ValueError, r"`towers` must be one of \[.*'cosine'.*\], got 'siamese'"):
      class_encoders.ClassEncoderConfig(towers="siamese")
    with self.assertRaisesRegex(ValueError, r"`init` must be one of \[.*'centroids'.*\], got 'zeros'"):
      class_encoders.ClassEncoderConfig(init="zeros")


if __name__ == "__main__":
  tf.test.main()
