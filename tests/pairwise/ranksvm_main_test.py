"""Tests of the pairwise-ranksvm binary: flags to config, one-line errors, and the LOINC sample end to end."""

import json
import os
import pathlib
import re

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from tensorflow_serving.apis import input_pb2

from pairwise import ranksvm, ranksvm_config, ranksvm_main
from pairwise import ranksvm_workflow as workflow
from rank4class_data import ranking_corpus
from tests.rank4class_engine.cli_runner import parsed_config, run_binary

LOINC_DIR = pathlib.Path(__file__).resolve().parents[3] / "shared" / "loinc"
LOINC_FLAGS = {
    "data_format": "csv", "data_dir": str(LOINC_DIR), "categorical_fields": ["property", "scale", "class",
                                                                            "discourage"],
    "multi_hot_fields": ["system:/"], "numeric_fields": ["rank_loinc"], "missing_values": ["-999999999"],
    "text_fields": ["long_common_name", "component"], "similarities": ["bm25", "tfidf"], "num_steps": 500,
}


def _argv(flag_values: dict) -> list[str]:
  argv = []
  for name, value in flag_values.items():
    if isinstance(value, bool):
      argv.append(f"--{name}" if value else f"--no{name}")
    elif isinstance(value, list):
      argv.append(f"--{name}={','.join(value)}")
    else:
      argv.append(f"--{name}={value}")
  return argv


def _config(**flag_values) -> ranksvm_config.RankSVMMainConfig:
  return parsed_config(ranksvm_main, _argv(flag_values))


def _run_main(**flag_values) -> str:
  result = run_binary(ranksvm_main, _argv(flag_values))
  assert (result.code, result.stderr) == (0, ""), result
  return result.stdout


class LoincEndToEndTest(tf.test.TestCase):
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
    mapper = workflow.load_mapper(model_dir)
    self.assertIn("rank_loinc:missing", mapper.feature_names)
    corpus = ranking_corpus.read_corpus_csv(str(LOINC_DIR))
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
    report = workflow.evaluate(_config(mode="evaluate", eval_protocol="leave_one_query_out", **config_flags))
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


class FlagValidationTest(tf.test.TestCase, parameterized.TestCase):

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
  def test_bad_flags_are_one_line_and_exit_2(self, flag_values, message):
    result = run_binary(ranksvm_main, _argv(flag_values))
    self.assertEqual(result.code, 2)
    self.assertEqual(result.stderr.splitlines(), [result.stderr.strip()])
    self.assertRegex(result.stderr, "^pairwise-ranksvm: error: .*" + message)

  def test_unknown_baseline_feature_raises(self):
    if not LOINC_DIR.is_dir():
      self.skipTest(f"LOINC sample not found at {LOINC_DIR}.")
    result = run_binary(ranksvm_main, _argv({"mode": "evaluate", "baseline_features": ["bm25(nothing)"],
                                             **LOINC_FLAGS}))
    self.assertEqual(result.code, 1)
    self.assertRegex(result.stderr, r"^pairwise-ranksvm: error: --baseline_features \['bm25\(nothing\)'\] are "
                     r"not features; [^\n]*\n$")

  def test_bad_libsvm_input_is_one_line_naming_the_file(self):
    path = self.create_tempfile("bad.txt", content="1 qid:1 1:0.5 1:0.7\n0 qid:1 1:0.1\n").full_path
    result = run_binary(ranksvm_main, ["--mode=evaluate", "--data_format=libsvm", f"--data_path={path}"])
    self.assertEqual(result.code, 1)
    self.assertEqual(result.stderr.splitlines(), [result.stderr.strip()])
    self.assertRegex(result.stderr, f"^pairwise-ranksvm: error: {re.escape(path)}")

  def test_missing_model_is_one_line(self):
    result = run_binary(ranksvm_main, ["--mode=rank", "--model_dir=/no/such/model", "--data_format=libsvm",
                                       "--data_path=/no/such/file", "--query_id=1"])
    self.assertEqual(result.code, 1)
    self.assertRegex(result.stderr, r"^pairwise-ranksvm: error: .*/no/such/model/scorer: no trained scorer")



class TfRankingStyleElwcTest(tf.test.TestCase):

  def test_evaluate_reads_a_custom_label_key_and_sparse_features(self):
    rng = np.random.default_rng(1)
    path = os.path.join(self.create_tempdir().full_path, "train.elwc.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
      for _ in range(16):
        elwc = input_pb2.ExampleListWithContext()
        for _ in range(8):
          values = {str(j): float(v) for j, v in enumerate(rng.normal(size=4), start=1) if rng.random() < 0.7}
          example = elwc.examples.add()
          for key, value in values.items():
            example.features.feature[key].float_list.value.append(value)
          grade = values.get("1", 0.0) - 2.0 * values.get("2", 0.0)  # Absent features count as 0.
          example.features.feature["utility"].float_list.value.append(float(np.clip(np.round(grade + 1), 0, 3)))
        writer.write(elwc.SerializeToString())
    missing = run_binary(ranksvm_main, ["--mode=evaluate", "--data_format=elwc", f"--data_path={path}"])
    self.assertEqual(missing.code, 1)
    self.assertRegex(missing.stderr, r"^pairwise-ranksvm: error: .*example 1 has no label 'label' .*--label_key\.\n$")
    result = run_binary(ranksvm_main, ["--mode=evaluate", "--data_format=elwc", f"--data_path={path}",
                                       "--label_key=utility", "--baseline_features=3", "--num_steps=800"])
    self.assertEqual((result.code, result.stderr), (0, ""))
    ndcg = {line.split()[0]: float(line.split()[1]) for line in result.stdout.splitlines()[2:4]}
    self.assertGreater(ndcg["ranksvm"], ndcg["3"] + 0.1, result.stdout)


class RowsTest(tf.test.TestCase):

  def test_evaluate_on_csv_feature_rows_with_ranks_and_a_skipped_bad_row(self):
    rng = np.random.default_rng(2)
    root = self.create_tempdir().full_path
    path = os.path.join(root, "runs.csv")
    with open(path, "w") as f:
      f.write("query,doc,bm25,length,noise,position\n")
      for q in range(16):
        bm25, length, noise = rng.normal(size=(3, 8))
        positions = np.argsort(np.argsort(-(bm25 - 2 * length))) + 1  # 1 = best.
        f.writelines(f"q{q},d{q}_{i},{bm25[i]:.4f},{length[i]:.4f},{noise[i]:.4f},{positions[i]}\n"
                     for i in range(8))
      f.write("q0,bad,n/a,0,0,9\n")
    argv = ["--mode=evaluate", "--data_format=rows", f"--data_path={path}", "--query_id_column=query",
            "--label_column=position", "--label_kind=rank", "--feature_columns=bm25,length,noise",
            "--baseline_features=noise", "--num_steps=800"]
    failed = run_binary(ranksvm_main, argv)
    self.assertEqual((failed.code, failed.stderr), (1, f"pairwise-ranksvm: error: {path}, row 129 (line 130), field "
                                                        "'bm25': 'n/a' is not a number; expected a finite number.\n"))
    result = run_binary(ranksvm_main, [*argv, "--bad_rows=skip"])
    self.assertEqual(result.code, 0, result.stderr)
    rejects = os.path.join(root, "runs.rejects.jsonl")
    self.assertEqual(result.stderr, f"Rows: {path}: 128 rows in 16 groups; 1 bad row left out (listed in "
                                    f"{rejects}).\n")
    ndcg = {line.split()[0]: float(line.split()[1]) for line in result.stdout.splitlines()[2:4]}
    self.assertGreater(ndcg["ranksvm"], ndcg["noise"] + 0.2, result.stdout)
    self.assertGreater(ndcg["ranksvm"], 0.95, result.stdout)  # The labels are a linear order of two features.


if __name__ == "__main__":
  tf.test.main()
