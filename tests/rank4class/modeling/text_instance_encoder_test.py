"""Tests of rank4class.modeling.text_instance_encoder: a TF Hub BERT (frozen or fine-tuned), then a
projection."""

import dataclasses
import os

import tensorflow as tf

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class.modeling import encoders
from rank4class_encoders import bert_conversion, text_encoder
from tests.rank4class import keras_round_trip

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "the", "cat", "dog", "sat", "ran", "on", "mat"]


class TextInstanceEncoderTest(tf.test.TestCase):
  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls._bert_dir = cls.create_tempdir_for_class()
    cls._handles = bert_conversion.export_random_bert(
      cls._bert_dir, _VOCAB, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32
    )

  @classmethod
  def create_tempdir_for_class(cls) -> str:
    import tempfile  # pylint: disable=g-import-not-at-top

    cls._tmp = tempfile.TemporaryDirectory()
    return cls._tmp.name

  @classmethod
  def tearDownClass(cls):
    cls._tmp.cleanup()
    super().tearDownClass()

  def test_frozen_encoder_is_text_encoder_then_projection(self):
    texts = tf.constant(["a cat sat", "the dog ran on the mat"])
    encoder = encoders.get(
      "text",
      text=text_encoder.TextEncoderConfig(self._handles.preprocess, self._handles.encoder, pooling="mean",
                                          max_seq_length=8),
      output_dim=4,
    )
    reference = text_encoder.TextEncoder(
      self._handles.preprocess, self._handles.encoder, pooling="mean", max_seq_length=8
    )
    outputs = encoder(texts)
    kernel, bias = encoder.trainable_weights  # Frozen BERT: only the projection trains.
    self.assertAllClose(outputs, reference(texts) @ kernel + bias, atol=1e-5)
    self.assertEqual(encoder.output_dim, 4)
    self.assertEqual(encoder.input_dtype, tf.string)
    self.assertEqual(encoder.serving_input_spec(), tf.TensorSpec([None], tf.string, name="inputs"))

  def test_trainable_encoder_from_dataclass_and_save_load_round_trip(self):
    config = encoders.InstanceEncoderConfig(
      type="text",
      text=encoders.TextInstanceEncoderConfig(
        text=text_encoder.TextEncoderConfig(
          self._handles.preprocess, self._handles.encoder, pooling="cls", max_seq_length=8, trainable=True
        )
      ),
    )
    encoder = encoders.make_instance_encoder(config)
    self.assertEqual(encoder.get_config()["text"]["pooling"], "cls")
    self.assertTrue(encoder.get_config()["text"]["trainable"])
    self.assertEqual(encoder.output_dim, 16)
    inputs = tf.keras.Input(shape=(), dtype=tf.string)
    model = tf.keras.Model(inputs, encoder(inputs))
    texts = tf.constant(["a cat sat", "the mat"])
    self.assertGreater(len(encoder.trainable_weights), 2)  # BERT's own weights train.
    loaded = keras_round_trip.save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(texts), model(texts), atol=1e-5)

  def test_config_saved_with_flat_text_keys_loads_the_same(self):
    # Up to 0.8 the layer saved its text encoder's settings as flat keys, `trainable` as `trainable_encoder`.
    old = {"name": "text_instance_encoder", "trainable": True, "dtype": "float32",
           "preprocess_handle": self._handles.preprocess, "encoder_handle": self._handles.encoder,
           "trainable_encoder": True, "pooling": "cls", "max_seq_length": 8, "l2_normalize": False,
           "output_dim": 4, "dropout": 0.1}
    encoder = encoders.TextInstanceEncoder.from_config(old)
    text = text_encoder.TextEncoderConfig(self._handles.preprocess, self._handles.encoder, trainable=True,
                                          pooling="cls", max_seq_length=8)
    self.assertEqual(encoder.get_config(), encoders.TextInstanceEncoder(
      text, output_dim=4, dropout=0.1, name="text_instance_encoder").get_config())
    self.assertEqual(encoder.get_config()["text"], dataclasses.asdict(text))
    self.assertNotIn("preprocess_handle", encoder.get_config())
    self.assertEqual(encoders.TextInstanceEncoder.from_config(encoder.get_config()).get_config(),
                     encoder.get_config())

  def test_saved_model_with_flat_text_keys_loads(self):
    # A model file as 0.8 saved it: the layer's config has the flat keys.
    encoder = encoders.TextInstanceEncoder(text_encoder.TextEncoderConfig(
      self._handles.preprocess, self._handles.encoder, max_seq_length=8), output_dim=3)
    inputs = tf.keras.Input(shape=(), dtype=tf.string)
    model = tf.keras.Model(inputs, encoder(inputs))
    path = os.path.join(self.create_tempdir().full_path, "model.keras")
    model.save(path)
    keras_round_trip.rewrite_layer_config(path, "TextInstanceEncoder",
                                          keras_round_trip.flat_text_layer_config)
    loaded = tf.keras.models.load_model(path)
    texts = tf.constant(["a cat sat", "the mat"])
    self.assertAllClose(loaded(texts), model(texts), atol=1e-5)


if __name__ == "__main__":
  tf.test.main()
