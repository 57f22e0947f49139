"""Tests for pairwise.ranksvm.features: one-hot, multi-hot, numeric with missing indicator, text
similarities."""

import json

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from pairwise.ranksvm import features, text_similarity
from rank4class_data.ranking.ranking_corpus import RankingCorpus


def _corpus(rank_loinc=("8", "-999999999.0", "2", "")):
  return RankingCorpus(
      doc_ids=["a", "b", "c", "d"],
      doc_fields={
          "name": ["Glucose in Blood", "Glucose in Serum", "Bilirubin in Plasma", "White blood cells"],
          "system": ["Ser/Plas/Bld", "Ser/Plas", "Ser", "Bld"],
          "scale": ["Qn", "Qn", "Ord", "Qn"],
          "rank_loinc": list(rank_loinc),
      },
      query_ids=["q1", "q2"], query_texts=["glucose blood", "bilirubin"],
      judgment_query=[0, 0, 0, 1, 1], judgment_doc=[0, 1, 2, 2, 3], relevance=[2.0, 1.0, 0.0, 1.0, 0.0])


CONFIG = features.FeatureConfig(categorical_fields=["scale"], multi_hot_fields={"system": "/"},
                                numeric_fields=["rank_loinc"], missing_values=["-999999999"],
                                text_fields=["name"], similarities=["bm25", "tfidf"])


class FeatureMapperTest(tf.test.TestCase, parameterized.TestCase):

  def test_feature_names_in_order(self):
    mapper = features.FeatureMapper(CONFIG).fit(_corpus())
    self.assertEqual(mapper.feature_names, [
        "scale=Ord", "scale=Qn", "system=Bld", "system=Plas", "system=Ser", "rank_loinc",
        "rank_loinc:missing", "bm25(name)", "tfidf(name)"])

  def test_document_features_by_hand(self):
    mapper = features.FeatureMapper(CONFIG).fit(_corpus())
    rows = mapper.document_features(_corpus())
    # Present rank_loinc values 8 and 2: mean 5, std 3. The sentinel and the empty value are missing.
    self.assertAllClose(rows, [
        [0, 1, 1, 1, 1, 1.0, 0],
        [0, 1, 0, 1, 1, 0.0, 1],
        [1, 0, 0, 0, 1, -1.0, 0],
        [0, 1, 1, 0, 0, 0.0, 1],
    ])

  def test_similarity_columns_are_the_text_scores(self):
    corpus = _corpus()
    mapper = features.FeatureMapper(CONFIG).fit(corpus)
    rows = mapper.query_features("glucose blood", corpus)
    names = corpus.doc_fields["name"]
    self.assertAllClose(rows[:, 7], text_similarity.Bm25().fit(names).scores("glucose blood", names))
    self.assertAllClose(rows[:, 8], text_similarity.TfidfCosine().fit(names).scores("glucose blood", names))

  def test_transform_groups_judgments_by_query(self):
    corpus = _corpus()
    lists = features.FeatureMapper(CONFIG).fit(corpus).transform(corpus)
    self.assertEqual(lists.query_ids, ["q1", "q2"])
    self.assertAllEqual(lists.list_offsets, [0, 3, 5])
    self.assertEqual(lists.doc_ids, ["a", "b", "c", "c", "d"])
    self.assertAllEqual(lists.relevance, [2.0, 1.0, 0.0, 1.0, 0.0])
    # Document c appears for both queries with the same document part and different similarities.
    self.assertAllEqual(lists.features[2, :7], lists.features[3, :7])
    self.assertNotAllClose(lists.features[2, 7:], lists.features[3, 7:])

  def test_non_numeric_value_raises_naming_field_and_document(self):
    with self.assertRaisesRegex(ValueError, r"Numeric field 'rank_loinc' of document 'b' holds 'high'"):
      features.FeatureMapper(CONFIG).fit(_corpus(rank_loinc=("8", "high", "2", "")))

  def test_constant_numeric_field_is_kept_as_zero_column(self):
    mapper = features.FeatureMapper(CONFIG).fit(_corpus(rank_loinc=("3", "3", "3", "3")))
    rows = mapper.document_features(_corpus(rank_loinc=("3", "3", "3", "3")))
    self.assertAllEqual(rows[:, 5], [0, 0, 0, 0])

  def test_all_missing_numeric_field_raises(self):
    with self.assertRaisesRegex(ValueError, "no present value"):
      features.FeatureMapper(CONFIG).fit(_corpus(rank_loinc=("", " ", "-999999999", "-999999999.0")))

  def test_unseen_category_maps_to_zeros(self):
    mapper = features.FeatureMapper(CONFIG).fit(_corpus())
    other = _corpus()
    other.doc_fields["scale"] = ["Nom", "Qn", "Qn", "Qn"]
    self.assertAllEqual(mapper.document_features(other)[0, :2], [0, 0])

  def test_unknown_field_raises(self):
    config = features.FeatureConfig(categorical_fields=["colour"])
    with self.assertRaisesRegex(ValueError, r"Document field\(s\) \['colour'\] not found"):
      features.FeatureMapper(config).fit(_corpus())

  def test_embedding_similarity_uses_the_encoder(self):
    vectors = {"glucose blood": [1.0, 0.0], "Glucose in Blood": [1.0, 0.0], "Glucose in Serum": [1.0, 1.0],
               "Bilirubin in Plasma": [0.0, 1.0], "White blood cells": [-1.0, 0.0]}
    config = features.FeatureConfig(text_fields=["name"], similarities=["embedding"])
    mapper = features.FeatureMapper(config, embed=lambda texts: np.array([vectors[t] for t in texts]))
    rows = mapper.fit(_corpus()).query_features("glucose blood", _corpus())
    self.assertAllClose(rows[:, 0], [1.0, 1 / np.sqrt(2), 0.0, -1.0])

  def test_collection_aware_embedding_similarities(self):
    vectors = {"glucose blood": [1.0, 0.0], "Glucose in Blood": [1.0, 0.0], "Glucose in Serum": [1.0, 1.0],
               "Bilirubin in Plasma": [0.0, 1.0], "White blood cells": [-1.0, 0.0]}
    config = features.FeatureConfig(text_fields=["name"],
                                    similarities=["embedding_feedback", "embedding_neighbors"],
                                    feedback_k=1, neighbor_k=2)
    mapper = features.FeatureMapper(config,
                                    embed=lambda texts: np.array([vectors[t] for t in texts])).fit(_corpus())
    self.assertEqual(mapper.feature_names, ["embedding_feedback(name)", "embedding_neighbors(name)"])
    rows = mapper.query_features("glucose blood", _corpus())
    # Feedback with k = 1: the centroid is the query's nearest document, "Glucose in Blood" = (1, 0).
    self.assertAllClose(rows[:, 0], [1.0, 1 / np.sqrt(2), 0.0, -1.0])
    # Neighbours with k = 2: "Bilirubin in Plasma" (0, 1) is smoothed with "Glucose in Serum" (1, 1)/sqrt(2).
    smoothed = np.array([1 / np.sqrt(2), 1 + 1 / np.sqrt(2)])
    self.assertAllClose(rows[2, 1], smoothed[0] / np.linalg.norm(smoothed))
    # "White blood cells" (-1, 0): its 2 nearest are itself and "Bilirubin in Plasma" (cosine 0).
    self.assertAllClose(rows[3, 1], -1 / np.sqrt(2))

  def test_bad_neighbourhood_size_raises(self):
    with self.assertRaisesRegex(ValueError, "`feedback_k` must be >= 1"):
      features.FeatureConfig(text_fields=["name"], similarities=["embedding_feedback"], feedback_k=0)

  def test_embedding_without_encoder_raises(self):
    with self.assertRaisesRegex(ValueError, "needs a text encoder"):
      features.FeatureMapper(features.FeatureConfig(text_fields=["name"], similarities=["embedding"]))

  def test_state_round_trips_through_json(self):
    corpus = _corpus()
    mapper = features.FeatureMapper(CONFIG).fit(corpus)
    again = features.FeatureMapper.from_dict(json.loads(json.dumps(mapper.to_dict())))
    self.assertEqual(again.feature_names, mapper.feature_names)
    self.assertAllClose(again.query_features("glucose", corpus), mapper.query_features("glucose", corpus))

  def test_unfitted_raises(self):
    with self.assertRaisesRegex(ValueError, "not fitted"):
      features.FeatureMapper(CONFIG).transform(_corpus())

  @parameterized.named_parameters(
      ("unknown_similarity", {"text_fields": ["name"], "similarities": ["jaccard"]},
       r"`similarities` must be one of \['bm25', 'tfidf', .*\], got 'jaccard'"),
      ("both_encodings", {"categorical_fields": ["system"], "multi_hot_fields": {"system": "/"}}, "both"),
      ("empty_separator", {"multi_hot_fields": {"system": ""}}, "separator"),
      ("no_fields", {}, "no fields"),
  )
  def test_bad_config_raises(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      features.FeatureConfig(**kwargs)


if __name__ == "__main__":
  tf.test.main()
