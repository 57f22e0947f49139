"""Tests for pairwise.ranksvm.text_similarity: BM25 by hand, TF-IDF against scikit-learn, embedding cosine."""

import math

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from sklearn.feature_extraction.text import TfidfVectorizer

from pairwise.ranksvm import text_similarity

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

  @parameterized.named_parameters(("k1", {"k1": -1.0}, "`k1` must be >= 0, got -1.0"),
                                  ("b", {"b": 1.5}, r"`b` must be in \[0, 1\], got 1.5"))
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


class NearestCentroidsTest(tf.test.TestCase):

  def test_hand_computed_centroid_and_blocking(self):
    collection = np.array([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]])  # Unit rows: e1, e2, (e1 + e2) / sqrt(2).
    points = np.array([[5.0, 0.0], [0.0, 1.0]])
    mean = (np.array([1.0, 0.0]) + np.array([1.0, 1.0]) / np.sqrt(2)) / 2  # Point 1's top 2: rows 0 and 2.
    mirrored = mean[::-1]  # Point 2's top 2: rows 1 and 2.
    expected = np.stack([mean / np.linalg.norm(mean), mirrored / np.linalg.norm(mirrored)])
    self.assertAllClose(text_similarity.nearest_centroids(points, collection, 2), expected)
    self.assertAllClose(text_similarity.nearest_centroids(points, collection, 2, max_block_elements=1),
                        expected)

  def test_ties_go_to_the_lower_index_and_k_is_capped(self):
    collection = np.array([[1.0, 0.0], [0.0, 1.0]])
    self.assertAllClose(text_similarity.nearest_centroids([[1.0, 1.0]], collection, 1), [[1.0, 0.0]])
    self.assertAllClose(text_similarity.nearest_centroids([[1.0, 1.0]], collection, 9),
                        [[1 / np.sqrt(2), 1 / np.sqrt(2)]])

  def test_bad_arguments_raise(self):
    with self.assertRaisesRegex(ValueError, "`k` must be >= 1"):
      text_similarity.nearest_centroids([[1.0, 0.0]], [[1.0, 0.0]], 0)
    with self.assertRaisesRegex(ValueError, "non-empty collection"):
      text_similarity.nearest_centroids([[1.0, 0.0]], np.zeros((0, 2)), 1)


class EmbeddingCosineTest(tf.test.TestCase):

  _VECTORS = {"q": [1.0, 0.0], "a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0]}

  def _cosine(self):
    return text_similarity.EmbeddingCosine(lambda texts: np.array([self._VECTORS[t] for t in texts]))

  def test_feedback_scores_use_the_query_neighbourhood(self):
    # The query's 2 nearest collection documents are a and c: centroid (1 + 1/sqrt2, 1/sqrt2), normalized.
    centroid = np.array([1 + 1 / np.sqrt(2), 1 / np.sqrt(2)])
    centroid /= np.linalg.norm(centroid)
    scores = self._cosine().feedback_scores("q", ["a", "b", "c"], ["a", "b", "c"], k=2)
    self.assertAllClose(scores, [centroid[0], centroid[1], centroid.sum() / np.sqrt(2)])

  def test_neighbor_scores_smooth_each_document(self):
    cosine = self._cosine()
    # k = 1: each document's nearest neighbour is itself, so the plain cosine comes back.
    self.assertAllClose(cosine.neighbor_scores("q", ["a", "b", "c"], ["a", "b", "c"], k=1),
                        [1.0, 0.0, 2 ** -0.5])
    # k = 2: b's neighbours are b and c, so its smoothed vector leans towards the query.
    smoothed_b = np.array([1 / np.sqrt(2), 1 + 1 / np.sqrt(2)])
    scores = cosine.neighbor_scores("q", ["b"], ["a", "b", "c"], k=2)
    self.assertAllClose(scores, [smoothed_b[0] / np.linalg.norm(smoothed_b)])
    with self.assertRaisesRegex(ValueError, "not in the collection"):
      cosine.neighbor_scores("q", ["q"], ["a", "b", "c"], k=2)

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
