"""Tests of rank4class.modeling.text_instance_encoder: a TF Hub BERT (frozen or fine-tuned), then a projection."""

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
      preprocess_handle=self._handles.preprocess,
      encoder_handle=self._handles.encoder,
      pooling="mean",
      max_seq_length=8,
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
    self.assertEqual(encoder.get_config()["pooling"], "cls")
    self.assertTrue(encoder.get_config()["trainable_encoder"])
    self.assertEqual(encoder.output_dim, 16)
    inputs = tf.keras.Input(shape=(), dtype=tf.string)
    model = tf.keras.Model(inputs, encoder(inputs))
    texts = tf.constant(["a cat sat", "the mat"])
    self.assertGreater(len(encoder.trainable_weights), 2)  # BERT's own weights train.
    loaded = keras_round_trip.save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(texts), model(texts), atol=1e-5)


if __name__ == "__main__":
  tf.test.main()
