"""Tests of rank4class.hybrid_text_encoder: TF-IDF beside an MLP on frozen text embeddings."""

import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class import encoders, hybrid_text_encoder
from rank4class_encoders import bert_conversion, text_encoder

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "the", "cat", "dog", "sat", "ran", "on", "mat"]


class HybridTextEncoderTest(tf.test.TestCase, parameterized.TestCase):
  """TF-IDF beside an MLP on frozen embeddings: hand-computed outputs, the served (strings) and training (texts with
  their embeddings) inputs agreeing, config and SavedModel round trips, bad inputs."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls._tmp = tempfile.TemporaryDirectory()
    handles = bert_conversion.export_random_bert(cls._tmp.name, _VOCAB, hidden_size=4, num_layers=1, num_heads=1,
                                                 intermediate_size=4)
    cls._text = {"preprocess_handle": handles.preprocess, "encoder_handle": handles.encoder, "max_seq_length": 8}

  @classmethod
  def tearDownClass(cls):
    cls._tmp.cleanup()
    super().tearDownClass()

  def _encoder(self, combine: str = "concat", tfidf_dim: int = 2,
               mlp_units: int = 1) -> hybrid_text_encoder.HybridTextEncoder:
    """Vocabulary [UNK], cat, dog (idf 1, no normalisation): TF-IDF = n-gram counts. The projection's kernel is
    ones on the diagonal (cat -> column 0, dog -> column 1; for one column, both), the MLP's ones (ReLU of the
    embedding's sum); biases 0."""
    encoder = hybrid_text_encoder.HybridTextEncoder(
        tfidf={"output_dim": tfidf_dim, "ngrams": 1, "l2_normalize": False, "vocabulary": ["[UNK]", "cat", "dog"],
               "idf_weights": [1.0, 1.0, 1.0]},
        mlp={"hidden_units": [mlp_units]}, text_encoder=self._text, combine=combine)
    encoder(tf.constant(["cat"]))  # Builds both branches, on the served input.
    (tfidf_kernel, tfidf_bias), (mlp_kernel, mlp_bias) = (encoder._tfidf.trainable_weights,
                                                          encoder._mlp.trainable_weights)
    tfidf_kernel.assign(np.eye(3, tfidf_dim, k=-1) if tfidf_dim == 2 else [[0.0], [1.0], [1.0]])
    tfidf_bias.assign(np.zeros([tfidf_dim]))
    mlp_kernel.assign(np.ones([4, mlp_units]))
    mlp_bias.assign(np.zeros([mlp_units]))
    return encoder

  def test_concat_is_the_tfidf_projection_then_the_embedding_mlp(self):
    encoder = self._encoder()
    embeddings = tf.constant([[0.5, 1.0, 1.5, 2.0], [-1.0, -1.0, 0.0, 0.0]])
    outputs = encoder({"text": tf.constant(["cat cat dog", "a dog"]), "embedding": embeddings})
    # TF-IDF counts (cat, dog): (2, 1) and (0, 1); MLP: relu(0.5 + 1 + 1.5 + 2) = 5 and relu(-2) = 0.
    self.assertAllClose(outputs, [[2.0, 1.0, 5.0], [0.0, 1.0, 0.0]])
    self.assertEqual(encoder.output_dim, 3)
    self.assertEqual(encoder.serving_input_spec(), tf.TensorSpec([None], tf.string, name="inputs"))

  def test_sum_adds_the_two_branches(self):
    encoder = self._encoder("sum", tfidf_dim=1)
    outputs = encoder({"text": tf.constant(["cat cat dog"]), "embedding": tf.constant([[0.5, 1.0, 1.5, 2.0]])})
    self.assertAllClose(outputs, [[3.0 + 5.0]])  # cat + dog counts 2 + 1, plus the MLP's 5.
    self.assertEqual(encoder.output_dim, 1)

  def test_raw_strings_embed_with_the_frozen_encoder_as_the_training_input_does(self):
    encoder = self._encoder()
    texts = tf.constant(["the cat sat on the mat", "a dog ran"])
    frozen = text_encoder.TextEncoder(**self._text)  # What the embedding cache computes for training.
    self.assertAllClose(encoder(texts), encoder({"text": texts, "embedding": frozen(texts)}), atol=1e-6)
    self.assertEqual(encoder.text_encoder_config, text_encoder.TextEncoderConfig(**self._text))
    self.assertLen(encoder.trainable_weights, 4)  # The text encoder stays frozen.

  def test_config_round_trip(self):
    # The SavedModel round trip (a trained model's export reloaded by `load_model`, the same scores) is
    # tests/rank4class/hybrid_text_test.py's.
    encoder = self._encoder()
    restored = hybrid_text_encoder.HybridTextEncoder.from_config(encoder.get_config())
    self.assertEqual(restored.get_config(), encoder.get_config())
    texts = tf.constant(["cat dog", "the mat"])
    restored(texts)  # Built: its weights exist.
    restored.set_weights(encoder.get_weights())
    self.assertAllClose(restored(texts), encoder(texts))

  def test_make_instance_encoder_from_config(self):
    config = encoders.InstanceEncoderConfig(
        type="hybrid", mlp=encoders.MlpEncoderConfig(hidden_units=(3,)),
        tfidf=encoders.TfidfEncoderConfig(output_dim=5, vocabulary=["cat"], idf_weights=[1.0]),
        hybrid=encoders.HybridTextEncoderConfig(text=text_encoder.TextEncoderConfig(**self._text)))
    self.assertEqual(encoders.make_instance_encoder(config).output_dim, 8)
    with self.assertRaisesRegex(ValueError, "hybrid.text"):
      encoders.make_instance_encoder(encoders.InstanceEncoderConfig(type="hybrid"))

  @parameterized.named_parameters(
      ("float_inputs", lambda e: e(tf.zeros([2, 4])), "reads raw texts"),
      ("missing_key", lambda e: e({"text": tf.constant(["cat"])}), "keys 'text' and 'embedding'"),
      ("wrong_width", lambda e: e({"text": tf.constant(["cat"]), "embedding": tf.zeros([1, 5])}), r"\[batch_size, 4\]"),
  )
  def test_bad_inputs_raise(self, call, message):
    with self.assertRaisesRegex(ValueError, message):
      call(self._encoder())

  def test_bad_arguments_raise(self):
    with self.assertRaisesRegex(ValueError, "combine"):
      self._encoder("max")
    with self.assertRaisesRegex(ValueError, "give them one size"):
      self._encoder("sum", tfidf_dim=2, mlp_units=1)
    with self.assertRaisesRegex(ValueError, "frozen"):
      hybrid_text_encoder.HybridTextEncoder(tfidf={}, mlp={}, text_encoder={**self._text, "trainable": True})


if __name__ == "__main__":
  tf.test.main()
