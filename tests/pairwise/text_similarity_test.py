"""Tests for pairwise.text_similarity: BM25 by hand, TF-IDF against scikit-learn, embedding cosine."""

import math

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from sklearn.feature_extraction.text import TfidfVectorizer

from pairwise import text_similarity

DOCS = ["glucose in blood", "glucose glucose serum", "bilirubin in plasma", "white blood cells count"]


class TokenizeTest(tf.test.TestCase):

  def test_lowercases_and_splits_on_non_alphanumerics(self):
    self.assertEqual(text_similarity.tokenize("Glucose [Mass/volume] in Ser/Plas 2"),
                     ["glucose", "mass", "volume", "in", "ser", "plas", "2"])


class Bm25Test(tf.test.TestCase, parameterized.TestCase):

  def test_hand_computed_score(self):
    bm25 = text_similarity.Bm25(k1=1.2, b=0.75).fit(DOCS)
    # N = 4, avgdl = (3 + 3 + 3 + 4) / 4 = 3.25. "glucose": df = 2, idf = ln(1 + 2.5 / 2.5) = ln 2.
    # Doc 1 ("glucose glucose serum"): tf 2, |d| 3: ln2 * 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 3 / 3.25)).
    norm = 1.2 * (0.25 + 0.75 * 3 / 3.25)
    expected_doc1 = math.log(2) * 2 * 2.2 / (2 + norm)
    expected_doc0 = math.log(2) * 1 * 2.2 / (1 + norm)
    scores = bm25.scores("GLUCOSE", DOCS)
    self.assertAllClose(scores, [expected_doc0, expected_doc1, 0.0, 0.0])

  def test_repeated_query_terms_count_once_and_unseen_terms_use_df_zero(self):
    bm25 = text_similarity.Bm25().fit(DOCS)
    self.assertAllClose(bm25.scores("blood blood", DOCS), bm25.scores("blood", DOCS))
    unseen = bm25.scores("zebra", ["zebra"])
    # idf = ln(1 + 4.5 / 0.5) = ln 10, tf 1, |d| = 1.
    self.assertAllClose(unseen, [math.log(10) * 2.2 / (1 + 1.2 * (0.25 + 0.75 / 3.25))])

  def test_state_round_trip(self):
    bm25 = text_similarity.Bm25(k1=1.5, b=0.5).fit(DOCS)
    again = text_similarity.Bm25.from_dict(bm25.to_dict())
    self.assertAllClose(again.scores("glucose blood", DOCS), bm25.scores("glucose blood", DOCS))

  @parameterized.named_parameters(("k1", {"k1": -1.0}, "k1"), ("b", {"b": 1.5}, "`b`"))
  def test_bad_parameters_raise(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      text_similarity.Bm25(**kwargs)

  def test_unfitted_raises(self):
    with self.assertRaisesRegex(ValueError, "not fitted"):
      text_similarity.Bm25().scores("a", ["a"])


class TfidfCosineTest(tf.test.TestCase):

  def test_matches_scikit_learn(self):
    tfidf = text_similarity.TfidfCosine().fit(DOCS)
    vectorizer = TfidfVectorizer(analyzer=text_similarity.tokenize, norm="l2", smooth_idf=True).fit(DOCS)
    for query in ("glucose blood", "plasma bilirubin count", "unknown words only"):
      expected = (vectorizer.transform(DOCS) @ vectorizer.transform([query]).T).toarray()[:, 0]
      self.assertAllClose(tfidf.scores(query, DOCS), expected)

  def test_state_round_trip(self):
    tfidf = text_similarity.TfidfCosine().fit(DOCS)
    again = text_similarity.TfidfCosine.from_dict(tfidf.to_dict())
    self.assertAllClose(again.scores("glucose", DOCS), tfidf.scores("glucose", DOCS))


class EmbeddingCosineTest(tf.test.TestCase):

  def test_cosine_similarity_with_zero_vector(self):
    self.assertAllClose(text_similarity.cosine_similarity([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]], [[2.0, 0.0]]),
                        [1.0, 0.0, 1 / math.sqrt(2)])

  def test_scores_and_cache(self):
    calls = []
    table = {"q": [1.0, 0.0], "a": [0.0, 3.0], "b": [2.0, 2.0]}

    def embed(texts):
      calls.append(list(texts))
      return np.array([table[t] for t in texts])

    similarity = text_similarity.EmbeddingCosine(embed, batch_size=2)
    self.assertAllClose(similarity.scores("q", ["a", "b", "a"]), [0.0, 1 / math.sqrt(2), 0.0])
    self.assertAllClose(similarity.scores("q", ["b"]), [1 / math.sqrt(2)])
    self.assertEqual(calls, [["q", "a"], ["b"]])  # Each text embedded once, in batches of 2.

  def test_bad_encoder_output_raises(self):
    similarity = text_similarity.EmbeddingCosine(lambda texts: np.zeros((1, 3)))
    with self.assertRaisesRegex(ValueError, "expected"):
      similarity.scores("q", ["a", "b"])


if __name__ == "__main__":
  tf.test.main()
