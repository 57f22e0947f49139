"""Tests of rank4class.modeling.tfidf_encoder: TF-IDF against a NumPy reference, the learned vocabulary, round
trips."""

import re
import string

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class.modeling import tfidf_encoder
from tests.rank4class import keras_round_trip

_CORPUS = ["A b!", "a c", "a a d"]  # 3 documents: "a" in all 3 (4 times), b, c and d in one each.


def _reference_tfidf(corpus: list[str], documents: list[str]) -> tuple[list[str], np.ndarray]:
  """Unigram TF-IDF as TextVectorization computes it, in NumPy: lowercase, strip punctuation, split on
  whitespace; vocabulary by count (ties: the token, descending), "[UNK]" first; idf(t) = log(1 + N / (1 +
  df(t))), the OOV token's the mean; x_t = count(t) * idf(t)."""
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


def _identity_projection(encoder: tfidf_encoder.TfidfEncoder, width: int) -> tfidf_encoder.TfidfEncoder:
  """The encoder built with its projection set to the identity: it returns its TF-IDF vectors."""
  encoder.build(tf.TensorShape([None]))
  kernel, bias = encoder.trainable_weights
  kernel.assign(np.eye(width))
  bias.assign(np.zeros([width]))
  return encoder


def _vocab() -> list[str]:
  return tfidf_encoder.tfidf_vocabulary(_CORPUS, max_tokens=10, ngrams=1)[0]


def _idf() -> np.ndarray:
  return tfidf_encoder.tfidf_vocabulary(_CORPUS, max_tokens=10, ngrams=1)[1]


class TfidfEncoderTest(tf.test.TestCase, parameterized.TestCase):
  def test_tfidf_of_a_three_document_corpus_matches_the_numpy_reference(self):
    vocabulary, expected = _reference_tfidf(_CORPUS, ["a a b", "zz d", ""])
    # By hand: idf(a) = log(1 + 3/4) = 0.560, idf(b) = idf(c) = idf(d) = log(1 + 3/2) = 0.916, OOV: their
    # mean.
    self.assertEqual(vocabulary, ["[UNK]", "a", "d", "c", "b"])
    self.assertAllClose(expected[0], [0, 2 * np.log(1.75), 0, 0, np.log(2.5)])
    encoder = tfidf_encoder.TfidfEncoder(output_dim=5, ngrams=1, l2_normalize=False)
    encoder.adapt(_CORPUS)
    self.assertEqual(encoder.vocabulary, vocabulary)
    _identity_projection(encoder, 5)
    self.assertAllClose(encoder(tf.constant(["a a b", "zz d", ""])), expected)

  def test_l2_normalize_scales_each_tfidf_vector_to_unit_length(self):
    _, expected = _reference_tfidf(_CORPUS, ["a a b", "zz d", ""])
    encoder = tfidf_encoder.TfidfEncoder(output_dim=5, ngrams=1)
    encoder.adapt(_CORPUS)
    norms = np.maximum(np.linalg.norm(expected, axis=1, keepdims=True), 1e-12)
    self.assertAllClose(_identity_projection(encoder, 5)(tf.constant(["a a b", "zz d", ""])),
                        expected / norms)

  def test_sublinear_tf_weighs_one_plus_the_log_of_the_count(self):
    _, expected = _reference_tfidf(_CORPUS, ["a a a b", "zz d"])
    encoder = tfidf_encoder.TfidfEncoder(output_dim=5, ngrams=1, sublinear_tf=True, l2_normalize=False)
    encoder.adapt(_CORPUS)
    # "a" 3 times: (1 + log 3) idf(a) instead of 3 idf(a); counts of 1 keep their weight.
    expected[0, 1] *= (1 + np.log(3)) / 3
    self.assertAllClose(_identity_projection(encoder, 5)(tf.constant(["a a a b", "zz d"])), expected)

  def test_vocabulary_is_the_most_frequent_ngrams_of_the_texts_in_any_order(self):
    vocabulary, idf = tfidf_encoder.tfidf_vocabulary(_CORPUS, max_tokens=6, ngrams=2)
    # Counts: a 4; b, c, d and the pairs a b, a c, a a, a d 1 each: ties by the n-gram, descending.
    self.assertEqual(vocabulary, ["[UNK]", "a", "d", "c", "b", "a d"])
    self.assertEqual(tfidf_encoder.tfidf_vocabulary(_CORPUS[::-1], max_tokens=6, ngrams=2), (vocabulary, idf))
    self.assertAllClose(idf[1:], np.log([1.75, 2.5, 2.5, 2.5, 2.5]))

  def test_min_df_keeps_the_ngrams_of_that_many_texts_and_weighs_the_rest_zero(self):
    corpus = ["a b", "a b c", "a d", "e f"]  # df: a 3, b 2, c d e f 1.
    vocabulary, idf = tfidf_encoder.tfidf_vocabulary(corpus, ngrams=1, min_df=2)
    self.assertEqual(vocabulary, ["[UNK]", "a", "b"])
    self.assertAllClose(idf, [0.0, np.log(1 + 4 / 4), np.log(1 + 4 / 3)])
    # Every n-gram of 2 texts or more, at 10,000 texts (df 1 and 2: idf 8.52 and 8.11).
    words = [f"w{i}" for i in range(10_000)]
    many = [f"{w} common" for w in words[:-2]] + [f"{words[-2]} pair", "pair"]
    vocabulary, _ = tfidf_encoder.tfidf_vocabulary(many, ngrams=1, min_df=2)
    self.assertEqual(vocabulary, ["[UNK]", "common", "pair"])
    encoder = tfidf_encoder.TfidfEncoder(output_dim=3, ngrams=1, min_df=2, l2_normalize=False)
    encoder.adapt(corpus)
    self.assertEqual(encoder.get_config()["min_df"], 2)
    # "c" is outside the vocabulary: it weighs nothing (column 0 at idf 0), as scikit-learn drops it.
    self.assertAllClose(_identity_projection(encoder, 3)(tf.constant(["a c c"])), [[0, np.log(2), 0]])
    # Sublinear and unit length: a text of only n-grams outside the vocabulary is the zero vector, not NaN.
    encoder = tfidf_encoder.TfidfEncoder(output_dim=3, ngrams=1, min_df=2, sublinear_tf=True)
    encoder.adapt(corpus)
    self.assertAllClose(_identity_projection(encoder, 3)(tf.constant(["c c e", "a a"])),
                        [[0, 0, 0], [0, 1, 0]])

  def test_min_document_frequency_is_two_from_fifty_texts_on(self):
    self.assertEqual([tfidf_encoder.min_document_frequency(n) for n in (1, 49, 50, 10_000)], [1, 1, 2, 2])

  def test_a_vocabulary_without_the_oov_token_gets_it_with_the_mean_idf(self):
    encoder = tfidf_encoder.TfidfEncoder(output_dim=2, vocabulary=["x", "y"], idf_weights=[1.0, 2.0])
    self.assertEqual(encoder.vocabulary, ["[UNK]", "x", "y"])
    self.assertAllClose(encoder.idf_weights, [1.5, 1.0, 2.0])

  def test_config_and_save_load_round_trip_keep_vocabulary_idf_and_outputs(self):
    encoder = tfidf_encoder.TfidfEncoder(output_dim=3, max_tokens=8, dropout=0.5, hidden_units=(4,))
    encoder.adapt(_CORPUS)
    restored = tfidf_encoder.TfidfEncoder.from_config(encoder.get_config())
    self.assertEqual(restored.get_config(), encoder.get_config())
    self.assertEqual(restored.vocabulary, encoder.vocabulary)
    model = keras_round_trip.wrap(encoder, (), dtype="string")
    texts = tf.constant(["a b", "c zz", "d"])
    loaded = keras_round_trip.save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(texts), model(texts))
    self.assertEqual(loaded.layers[-1].vocabulary, encoder.vocabulary)

  def test_a_large_vocabulary_is_not_walked_when_keras_flattens_the_layers(self):
    vocabulary = [f"w{i}" for i in range(50_000)]
    encoder = tfidf_encoder.TfidfEncoder(output_dim=2, vocabulary=vocabulary, idf_weights=np.ones(50_000))
    encoder(tf.constant(["w1 w2", "w3"]))
    lookup = encoder._vectorizer._lookup_layer
    # Nothing Keras tracks holds the n-grams one by one (a list: a ListWrapper, walked entry by entry).
    tracked = [len(t) for t in lookup._self_tracked_trackables if isinstance(t, (list, tuple))]
    self.assertEqual([n for n in tracked if n > 1000], [])
    self.assertTrue(lookup.input_vocabulary)  # Keras' save_assets tests it so.
    self.assertEqual(encoder._vectorizer.get_config()["vocabulary"][:3], ["[UNK]", "w0", "w1"])
    self.assertEqual(len(encoder._vectorizer.get_config()["vocabulary"]), 50_001)
    self.assertFalse((lookup.input_vocabulary == "").any())  # A comparison is a plain array.

  def test_features_are_the_vectors_the_projection_reads(self):
    _, expected = _reference_tfidf(_CORPUS, ["a a b", "zz d"])
    encoder = tfidf_encoder.TfidfEncoder(output_dim=5, ngrams=1, l2_normalize=False)
    encoder.adapt(_CORPUS)
    self.assertAllClose(tf.sparse.to_dense(encoder.features(tf.constant(["a a b", "zz d"]))), expected)

  def test_initial_kernel_starts_the_projection_and_stays_out_of_the_config(self):
    _, expected = _reference_tfidf(_CORPUS, ["a a b", "zz d"])
    kernel = np.arange(10, dtype=np.float32).reshape(5, 2)
    encoder = tfidf_encoder.TfidfEncoder(output_dim=2, ngrams=1, l2_normalize=False, vocabulary=_vocab(),
                                         idf_weights=_idf(), initial_kernel=kernel)
    self.assertAllClose(encoder(tf.constant(["a a b", "zz d"])), expected @ kernel)  # Projection bias: zeros.
    self.assertNotIn("initial_kernel", encoder.get_config())
    model = keras_round_trip.wrap(encoder, (), dtype="string")
    loaded = keras_round_trip.save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(tf.constant(["a a b"])), expected[:1] @ kernel)
    with self.assertRaisesRegex(ValueError, "`initial_kernel` must be finite values of shape"):
      tfidf_encoder.TfidfEncoder(output_dim=3, initial_kernel=kernel)
    with self.assertRaisesRegex(ValueError, "`initial_kernel` has 5 rows, but the vocabulary has 3"):
      tfidf_encoder.TfidfEncoder(output_dim=2, vocabulary=["x", "y"], idf_weights=[1.0, 1.0],
                                 initial_kernel=kernel)(tf.constant(["x"]))

  def test_dropout_only_in_training(self):
    encoder = tfidf_encoder.TfidfEncoder(output_dim=3, ngrams=1, dropout=0.5)
    encoder.adapt(_CORPUS)
    texts = tf.constant(["a b c d"] * 4)
    self.assertAllClose(encoder(texts), encoder(texts, training=False))
    self.assertNotAllClose(encoder(texts, training=True), encoder(texts))

  def test_serving_input_spec_is_a_batch_of_strings(self):
    spec = tfidf_encoder.TfidfEncoder().serving_input_spec()
    self.assertEqual((spec.shape.as_list(), spec.dtype), ([None], tf.string))

  def test_call_before_adapt_raises(self):
    with self.assertRaisesRegex(ValueError, "no vocabulary: `adapt` it on the training texts"):
      tfidf_encoder.TfidfEncoder()(tf.constant(["a"]))

  def test_adapt_after_build_raises(self):
    encoder = tfidf_encoder.TfidfEncoder(output_dim=2)
    encoder.adapt(_CORPUS)
    encoder(tf.constant(["a"]))
    with self.assertRaisesRegex(ValueError, "is built"):
      encoder.adapt(["other texts"])

  @parameterized.parameters(
      (dict(output_dim=0), "output_dim"),
      (dict(max_tokens=1), "`max_tokens` must be an integer >= 2, got 1."),
      (dict(max_tokens=100.0), "`max_tokens` must be an integer >= 2, got 100.0."),
      (dict(ngrams=0), "ngrams"),
      (dict(min_df=0), "`min_df` must be an integer >= 1, got 0."),
      (dict(dropout=1.0), "dropout"),
      (dict(hidden_units=(0,)), "hidden_units"),
      (dict(vocabulary=["a"]), "both `vocabulary` and `idf_weights`"),
      (dict(vocabulary=["a", "b"], idf_weights=[1.0]), "same length"),
  )
  def test_bad_arguments_raise(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      tfidf_encoder.TfidfEncoder(**kwargs)


if __name__ == "__main__":
  tf.test.main()
