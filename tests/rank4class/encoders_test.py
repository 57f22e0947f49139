"""Tests of rank4class.encoders: MLP, image, TF Hub text, TF-IDF and hybrid (TF-IDF + frozen text) instance encoders."""

import dataclasses
import os
import re
import string
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class import encoders
from rank4class_encoders import bert_conversion, text_encoder

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "the", "cat", "dog", "sat", "ran", "on", "mat"]


def _save_and_load(model: tf.keras.Model, directory: str) -> tf.keras.Model:
  path = os.path.join(directory, "model.keras")
  model.save(path)
  return tf.keras.models.load_model(path)


def _wrap(encoder: tf.keras.layers.Layer, shape: tuple[int, ...], dtype: str = "float32") -> tf.keras.Model:
  inputs = tf.keras.Input(shape=shape, dtype=dtype)
  return tf.keras.Model(inputs, encoder(inputs))


class MlpEncoderTest(tf.test.TestCase, parameterized.TestCase):
  def test_hand_computed_with_ones(self):
    encoder = encoders.MlpEncoder(hidden_units=(2,), activation="relu")
    encoder(tf.zeros([1, 3]))
    kernel, bias = encoder.weights
    kernel.assign(tf.ones_like(kernel))
    bias.assign([0.5, -10.0])
    # [1, 2, 3] . ones = 6; + 0.5 -> 6.5; 6 - 10 -> relu 0.
    self.assertAllClose(encoder(tf.constant([[1.0, 2.0, 3.0]])), [[6.5, 0.0]])

  def test_output_dim_is_last_hidden_width(self):
    encoder = encoders.get("mlp", hidden_units=(16, 8))
    self.assertEqual(encoder.output_dim, 8)
    self.assertEqual(encoder(tf.zeros([4, 10])).shape, [4, 8])

  def test_images_are_flattened(self):
    self.assertEqual(encoders.MlpEncoder(hidden_units=(5,))(tf.zeros([2, 8, 8])).shape, [2, 5])

  def test_dropout_only_in_training(self):
    encoder = encoders.MlpEncoder(hidden_units=(64,), dropout=0.5)
    x = tf.ones([4, 3])
    self.assertAllClose(encoder(x, training=False), encoder(x, training=False))
    self.assertNotAllClose(encoder(x, training=True), encoder(x, training=False))

  @parameterized.parameters(
    ({"hidden_units": ()},), ({"hidden_units": (0,)},), ({"dropout": 1.0},), ({"activation": "nope"},)
  )
  def test_bad_arguments_raise(self, kwargs):
    with self.assertRaises(ValueError):
      encoders.MlpEncoder(**kwargs)

  def test_serving_input_spec_after_build(self):
    encoder = encoders.MlpEncoder(hidden_units=(4,))
    with self.assertRaisesRegex(ValueError, "built"):
      encoder.serving_input_spec()
    encoder(tf.zeros([2, 7]))
    self.assertEqual(encoder.serving_input_spec(), tf.TensorSpec([None, 7], tf.float32, name="inputs"))

  def test_config_and_save_load_round_trip(self):
    encoder = encoders.MlpEncoder(hidden_units=(8, 4), activation="tanh", dropout=0.25)
    self.assertEqual(encoders.MlpEncoder.from_config(encoder.get_config()).get_config(), encoder.get_config())
    model = _wrap(encoder, (6,))
    x = np.random.default_rng(0).normal(size=[3, 6]).astype(np.float32)
    loaded = _save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(x), model(x))

  def test_residual_branch_starts_as_identity(self):
    encoder = encoders.MlpEncoder(hidden_units=(8,), residual=True)
    x = tf.constant([[3.0, -4.0], [1.0, 2.0]])
    self.assertAllClose(encoder(x), x)  # x + 0 · relu(W x + b): the zero-initialised output layer.
    self.assertEqual(encoder.output_dim, 2)  # The input size, not the branch's hidden width.

  def test_residual_branch_hand_computed(self):
    encoder = encoders.MlpEncoder(hidden_units=(1,), residual=True)
    encoder(tf.zeros([1, 2]))
    for weight in encoder.weights:  # Hidden kernel [2, 1], bias [1]; output kernel [1, 2], bias [2].
      weight.assign(tf.ones_like(weight))
    # Hidden: relu(1 + 2 + 1) = 4; output: 4 · [1, 1] + [1, 1] = [5, 5]; plus the input [1, 2] -> [6, 7].
    self.assertAllClose(encoder(tf.constant([[1.0, 2.0]])), [[6.0, 7.0]])

  def test_l2_normalize_scales_inputs_and_output_to_unit_length(self):
    encoder = encoders.MlpEncoder(hidden_units=(4,), residual=True, l2_normalize=True)
    self.assertAllClose(encoder(tf.constant([[3.0, -4.0]])), [[0.6, -0.8]])  # [3, -4] / 5, then the identity.
    encoder = encoders.MlpEncoder(hidden_units=(1,), residual=True, l2_normalize=True)
    encoder(tf.zeros([1, 2]))
    for weight in encoder.weights:
      weight.assign(tf.ones_like(weight))
    # Input [3, 4] -> [0.6, 0.8]; hidden relu(1.4 + 1) = 2.4; branch 2.4 + 1 = 3.4 each: [4.0, 4.2] -> unit length.
    self.assertAllClose(encoder(tf.constant([[3.0, 4.0]])), [[4.0, 4.2]] / np.hypot(4.0, 4.2))
    plain = encoders.MlpEncoder(hidden_units=(3,), l2_normalize=True)
    self.assertAllClose(tf.norm(plain(tf.constant([[1.0, 2.0], [-3.0, 0.5]])), axis=1), [1.0, 1.0])

  def test_defaults_keep_the_plain_mlp(self):
    config = encoders.MlpEncoder(name="mlp").get_config()
    self.assertEqual((config["residual"], config["l2_normalize"]), (False, False))
    old = {k: v for k, v in config.items() if k not in ("residual", "l2_normalize")}  # Saved before the options.
    self.assertEqual(encoders.MlpEncoder.from_config(old).get_config(), config)

  def test_residual_config_and_save_load_round_trip(self):
    encoder = encoders.MlpEncoder(hidden_units=(8,), residual=True, l2_normalize=True)
    self.assertEqual(encoders.MlpEncoder.from_config(encoder.get_config()).get_config(), encoder.get_config())
    model = _wrap(encoder, (6,))
    encoder.weights[2].assign(np.random.default_rng(1).normal(size=[8, 6]))  # A trained-looking output kernel.
    x = np.random.default_rng(0).normal(size=[3, 6]).astype(np.float32)
    loaded = _save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(x), model(x))
    self.assertNotAllClose(model(x), x / np.linalg.norm(x, axis=1, keepdims=True))


class ImageEncoderTest(tf.test.TestCase, parameterized.TestCase):
  def test_small_cnn_output_is_last_filter_count(self):
    encoder = encoders.get("image", filters=(4, 6), rescale=1.0 / 16.0)
    self.assertEqual(encoder(tf.zeros([2, 8, 8, 1], tf.uint8)).shape, [2, 6])
    self.assertEqual(encoder.output_dim, 6)

  def test_grayscale_without_channel_axis(self):
    self.assertEqual(encoders.ImageEncoder(filters=(3,))(tf.zeros([2, 8, 8])).shape, [2, 3])

  def test_rescale_and_offset_before_backbone(self):
    captured = {}

    class Identity(tf.keras.Model):
      def call(self, inputs, training=None):
        captured["x"] = inputs
        return inputs

    encoder = encoders.ImageEncoder(backbone=Identity(), rescale=0.5, offset=-1.0, pooling="max")
    out = encoder(tf.constant([[[[2], [4]], [[6], [8]]]], tf.uint8))  # one 2x2 grayscale image
    self.assertAllClose(captured["x"][0, :, :, 0], [[0.0, 1.0], [2.0, 3.0]])
    self.assertAllClose(out, [[3.0]])  # global max pooling

  def test_shift_augments_training_images_only_and_round_trips(self):
    captured = []

    class Identity(tf.keras.Model):
      def call(self, inputs, training=None):
        captured.append(inputs)
        return inputs

    encoder = encoders.ImageEncoder(backbone=Identity(), rescale=1.0, shift=1, flip=True, pooling="max")
    images = tf.random.stateless_uniform([32, 5, 5, 1], seed=[0, 1]) + 1.0
    encoder(images)
    encoder(images, training=True)
    self.assertAllEqual(captured[0], images)  # Inference: untouched.
    self.assertNotAllClose(captured[1], images)
    self.assertEqual(encoder.non_trainable_weights[0].numpy(), 1)  # The draws' counter, in every checkpoint.
    config = encoders.get("image", **dataclasses.asdict(encoders.ImageEncoderConfig(shift=2, flip=True))).get_config()
    self.assertEqual((config["shift"], config["flip"], config["filters"]), (2, True, [32, 64, 128]))
    self.assertEqual(encoders.ImageEncoder.from_config(config).get_config(), config)
    self.assertEqual(encoders.ImageEncoder(filters=(4,)).get_config()["shift"], 0)

  def test_projection_sets_output_dim(self):
    encoder = encoders.ImageEncoder(filters=(4,), output_dim=9)
    self.assertEqual(encoder.output_dim, 9)
    self.assertEqual(encoder(tf.zeros([1, 8, 8, 3])).shape, [1, 9])

  def test_resnet50_backbone_by_name_without_download(self):
    encoder = encoders.get("image", backbone="resnet50", image_shape=(32, 32, 3))
    self.assertEqual(encoder(tf.zeros([1, 32, 32, 3])).shape, [1, 2048])
    self.assertGreater(len(encoder.trainable_weights), 100)

  @parameterized.parameters(
    ({"backbone": "alexnet"},),
    ({"backbone": "resnet50"},),
    ({"backbone": 3},),
    ({"pooling": "sum"},),
    ({"image_shape": (32, 32)},),
    ({"filters": ()},),
  )
  def test_bad_arguments_raise(self, kwargs):
    with self.assertRaises(ValueError):
      encoders.ImageEncoder(**kwargs)

  def test_small_cnn_save_load_round_trip(self):
    encoder = encoders.ImageEncoder(filters=(4, 8), rescale=1.0 / 255.0, output_dim=5)
    self.assertEqual(
      encoders.ImageEncoder.from_config(encoder.get_config()).get_config(), encoder.get_config()
    )
    model = _wrap(encoder, (8, 8, 3))
    x = np.random.default_rng(0).integers(0, 255, size=[2, 8, 8, 3]).astype(np.float32)
    loaded = _save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(x), model(x), atol=1e-5)

  def test_custom_backbone_save_load_round_trip(self):
    inputs = tf.keras.Input(shape=(6, 6, 1))
    backbone = tf.keras.Model(inputs, tf.keras.layers.Conv2D(3, 3)(inputs), name="custom_backbone")
    encoder = encoders.ImageEncoder(backbone=backbone, rescale=1.0)
    model = _wrap(encoder, (6, 6, 1))
    x = np.random.default_rng(1).normal(size=[2, 6, 6, 1]).astype(np.float32)
    loaded = _save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(x), model(x), atol=1e-5)


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
    loaded = _save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(texts), model(texts), atol=1e-5)


_CORPUS = ["A b!", "a c", "a a d"]  # 3 documents: "a" in all 3 (4 times), b, c and d in one each.


def _reference_tfidf(corpus: list[str], documents: list[str]) -> tuple[list[str], np.ndarray]:
  """Unigram TF-IDF as TextVectorization computes it, in NumPy: lowercase, strip punctuation, split on whitespace;
  vocabulary by count (ties: the token, descending), "[UNK]" first; idf(t) = log(1 + N / (1 + df(t))), the
  OOV token's the mean; x_t = count(t) * idf(t)."""
  def tokens(text: str) -> list[str]:
    return re.sub(f"[{re.escape(string.punctuation)}]", "", text.lower()).split()

  counts, df = {}, {}
  for text in corpus:
    for token in tokens(text):
      counts[token] = counts.get(token, 0) + 1
    for token in set(tokens(text)):
      df[token] = df.get(token, 0) + 1
  vocabulary = sorted(counts, key=lambda t: (counts[t], t), reverse=True)
  idf = np.log(1 + len(corpus) / (1 + np.array([df[t] for t in vocabulary], np.float64)))
  vocabulary, idf = ["[UNK]", *vocabulary], np.concatenate([[idf.mean()], idf])
  rows = np.zeros([len(documents), len(vocabulary)])
  for row, text in enumerate(documents):
    for token in tokens(text):
      rows[row, vocabulary.index(token) if token in vocabulary else 0] += 1
  return vocabulary, rows * idf


def _identity_projection(encoder: encoders.TfidfEncoder, width: int) -> encoders.TfidfEncoder:
  """The encoder built with its projection set to the identity: it returns its TF-IDF vectors."""
  encoder.build(tf.TensorShape([None]))
  kernel, bias = encoder.trainable_weights
  kernel.assign(np.eye(width))
  bias.assign(np.zeros([width]))
  return encoder


class TfidfEncoderTest(tf.test.TestCase, parameterized.TestCase):
  def test_tfidf_of_a_three_document_corpus_matches_the_numpy_reference(self):
    vocabulary, expected = _reference_tfidf(_CORPUS, ["a a b", "zz d", ""])
    # By hand: idf(a) = log(1 + 3/4) = 0.560, idf(b) = idf(c) = idf(d) = log(1 + 3/2) = 0.916, OOV: their mean.
    self.assertEqual(vocabulary, ["[UNK]", "a", "d", "c", "b"])
    self.assertAllClose(expected[0], [0, 2 * np.log(1.75), 0, 0, np.log(2.5)])
    encoder = encoders.TfidfEncoder(output_dim=5, ngrams=1, l2_normalize=False)
    encoder.adapt(_CORPUS)
    self.assertEqual(encoder.vocabulary, vocabulary)
    _identity_projection(encoder, 5)
    self.assertAllClose(encoder(tf.constant(["a a b", "zz d", ""])), expected)

  def test_l2_normalize_scales_each_tfidf_vector_to_unit_length(self):
    _, expected = _reference_tfidf(_CORPUS, ["a a b", "zz d", ""])
    encoder = encoders.TfidfEncoder(output_dim=5, ngrams=1)
    encoder.adapt(_CORPUS)
    norms = np.maximum(np.linalg.norm(expected, axis=1, keepdims=True), 1e-12)
    self.assertAllClose(_identity_projection(encoder, 5)(tf.constant(["a a b", "zz d", ""])), expected / norms)

  def test_sublinear_tf_weighs_one_plus_the_log_of_the_count(self):
    _, expected = _reference_tfidf(_CORPUS, ["a a a b", "zz d"])
    encoder = encoders.TfidfEncoder(output_dim=5, ngrams=1, sublinear_tf=True, l2_normalize=False)
    encoder.adapt(_CORPUS)
    # "a" 3 times: (1 + log 3) idf(a) instead of 3 idf(a); counts of 1 keep their weight.
    expected[0, 1] *= (1 + np.log(3)) / 3
    self.assertAllClose(_identity_projection(encoder, 5)(tf.constant(["a a a b", "zz d"])), expected)

  def test_vocabulary_is_the_most_frequent_ngrams_of_the_texts_in_any_order(self):
    vocabulary, idf = encoders.tfidf_vocabulary(_CORPUS, max_tokens=6, ngrams=2)
    # Counts: a 4; b, c, d and the pairs a b, a c, a a, a d 1 each: ties by the n-gram, descending.
    self.assertEqual(vocabulary, ["[UNK]", "a", "d", "c", "b", "a d"])
    self.assertEqual(encoders.tfidf_vocabulary(_CORPUS[::-1], max_tokens=6, ngrams=2), (vocabulary, idf))
    self.assertAllClose(idf[1:], np.log([1.75, 2.5, 2.5, 2.5, 2.5]))

  def test_a_vocabulary_without_the_oov_token_gets_it_with_the_mean_idf(self):
    encoder = encoders.TfidfEncoder(output_dim=2, vocabulary=["x", "y"], idf_weights=[1.0, 2.0])
    self.assertEqual(encoder.vocabulary, ["[UNK]", "x", "y"])
    self.assertAllClose(encoder.idf_weights, [1.5, 1.0, 2.0])

  def test_config_and_save_load_round_trip_keep_vocabulary_idf_and_outputs(self):
    encoder = encoders.TfidfEncoder(output_dim=3, max_tokens=8, dropout=0.5, hidden_units=(4,))
    encoder.adapt(_CORPUS)
    restored = encoders.TfidfEncoder.from_config(encoder.get_config())
    self.assertEqual(restored.get_config(), encoder.get_config())
    self.assertEqual(restored.vocabulary, encoder.vocabulary)
    model = _wrap(encoder, (), dtype="string")
    texts = tf.constant(["a b", "c zz", "d"])
    loaded = _save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(texts), model(texts))
    self.assertEqual(loaded.layers[-1].vocabulary, encoder.vocabulary)

  def test_dropout_only_in_training(self):
    encoder = encoders.TfidfEncoder(output_dim=3, ngrams=1, dropout=0.5)
    encoder.adapt(_CORPUS)
    texts = tf.constant(["a b c d"] * 4)
    self.assertAllClose(encoder(texts), encoder(texts, training=False))
    self.assertNotAllClose(encoder(texts, training=True), encoder(texts))

  def test_serving_input_spec_is_a_batch_of_strings(self):
    spec = encoders.TfidfEncoder().serving_input_spec()
    self.assertEqual((spec.shape.as_list(), spec.dtype), ([None], tf.string))

  def test_call_before_adapt_raises(self):
    with self.assertRaisesRegex(ValueError, "no vocabulary: `adapt` it on the training texts"):
      encoders.TfidfEncoder()(tf.constant(["a"]))

  def test_adapt_after_build_raises(self):
    encoder = encoders.TfidfEncoder(output_dim=2)
    encoder.adapt(_CORPUS)
    encoder(tf.constant(["a"]))
    with self.assertRaisesRegex(ValueError, "is built"):
      encoder.adapt(["other texts"])

  @parameterized.parameters(
      (dict(output_dim=0), "output_dim"),
      (dict(max_tokens=1), "max_tokens"),
      (dict(ngrams=0), "ngrams"),
      (dict(dropout=1.0), "dropout"),
      (dict(hidden_units=(0,)), "hidden_units"),
      (dict(vocabulary=["a"]), "both `vocabulary` and `idf_weights`"),
      (dict(vocabulary=["a", "b"], idf_weights=[1.0]), "same length"),
  )
  def test_bad_arguments_raise(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      encoders.TfidfEncoder(**kwargs)


class FactoryTest(tf.test.TestCase):
  def test_unknown_name_lists_allowed(self):
    with self.assertRaisesRegex(ValueError, "mlp.*image.*text.*tfidf"):
      encoders.get("transformer")

  def test_make_instance_encoder_from_config(self):
    mlp = encoders.make_instance_encoder(
      encoders.InstanceEncoderConfig(type="mlp", mlp=encoders.MlpEncoderConfig(hidden_units=(32, 16)))
    )
    self.assertEqual(mlp.output_dim, 16)
    residual = encoders.make_instance_encoder(encoders.InstanceEncoderConfig(
      type="mlp", mlp=encoders.MlpEncoderConfig(hidden_units=(32,), residual=True, l2_normalize=True)))
    self.assertEqual((residual.get_config()["residual"], residual.get_config()["l2_normalize"]), (True, True))
    self.assertEqual(residual(tf.ones([2, 5])).shape, [2, 5])
    image = encoders.make_instance_encoder(
      encoders.InstanceEncoderConfig(
        type="image", image=encoders.ImageEncoderConfig(filters=(8,), rescale=1.0)
      )
    )
    self.assertIsInstance(image, encoders.ImageEncoder)

  def test_make_tfidf_encoder_from_config(self):
    vocabulary, idf_weights = encoders.tfidf_vocabulary(_CORPUS, ngrams=1)
    encoder = encoders.make_instance_encoder(encoders.InstanceEncoderConfig(
        type="tfidf", tfidf=encoders.TfidfEncoderConfig(output_dim=6, vocabulary=vocabulary, idf_weights=idf_weights)))
    self.assertIsInstance(encoder, encoders.TfidfEncoder)
    self.assertEqual((encoder.vocabulary, encoder(tf.constant(["a b"])).shape), (vocabulary, [1, 6]))

  def test_text_config_without_settings_raises(self):
    with self.assertRaisesRegex(ValueError, "text"):
      encoders.make_instance_encoder(encoders.InstanceEncoderConfig(type="text"))


if __name__ == "__main__":
  tf.test.main()


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

  def _encoder(self, combine: str = "concat", tfidf_dim: int = 2, mlp_units: int = 1) -> encoders.HybridTextEncoder:
    """Vocabulary [UNK], cat, dog (idf 1, no normalisation): TF-IDF = n-gram counts. The projection's kernel is
    ones on the diagonal (cat -> column 0, dog -> column 1; for one column, both), the MLP's ones (ReLU of the
    embedding's sum); biases 0."""
    encoder = encoders.HybridTextEncoder(
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
    restored = encoders.HybridTextEncoder.from_config(encoder.get_config())
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
      encoders.HybridTextEncoder(tfidf={}, mlp={}, text_encoder={**self._text, "trainable": True})
