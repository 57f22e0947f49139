"""Tests of the pairwise-ranksvm binary: flags to config, one-line errors, the LOINC sample end to end, saved
models mapping new files' features by name, label kinds, and convergence reports."""

import ast
import contextlib
import io
import json
import os
import pathlib
import re

import numpy as np
import tensorflow as tf
from absl import flags
from absl.testing import parameterized
from tensorflow_serving.apis import input_pb2

from pairwise.ranksvm import ranksvm, ranksvm_config
from pairwise.studies import ranksvm_workflow as workflow
from rank4class_cli import cli
from rank4class_cli.binaries import ranksvm_main
from rank4class_data.ranking import feature_lists, ranking_corpus
from rank4class_data.records import elwc
from tests.rank4class_cli.cli_runner import parse_error, parsed_config, run_binary

LOINC_DIR = pathlib.Path(__file__).resolve().parents[4] / "shared" / "loinc"
LOINC_FLAGS = {
    "input_format": "corpus", "input": str(LOINC_DIR), "categorical_fields": ["property", "scale", "class",
                                                                            "discourage"],
    "multi_hot_fields": ["system:/"], "numeric_fields": ["rank_loinc"], "missing_values": ["-999999999"],
    "text_fields": ["long_common_name", "component"], "similarities": ["bm25", "tfidf"],
    "label_column": "rank", "label_kind": "rank",  # The LOINC sample ranks its documents (1 = best).
}
RANK_LABELS_LINE = ("Labels: 'rank' read as ranks (1 = best within the query), turned into relevance; "
                    "--label_kind=relevance reads higher = better.\n")


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


def _run_main(stderr: str = "", **flag_values) -> str:
  """The binary's stdout; its stderr must be exactly `stderr`."""
  result = run_binary(ranksvm_main, _argv(flag_values))
  assert (result.code, result.stderr) == (0, stderr), result
  return result.stdout


class LoincEndToEndTest(tf.test.TestCase):
  """The LOINC sample trains and ranks end to end (its ranks carry no relevance signal: no quality claim)."""

  def setUp(self):
    super().setUp()
    if not LOINC_DIR.is_dir():
      self.skipTest(f"LOINC sample not found at {LOINC_DIR} (the shared/loinc folder beside the repository).")

  def test_train_exports_a_scorer_that_reloads_and_predicts_the_same(self):
    model_dir = self.create_tempdir().full_path
    output = _run_main(mode="train", model_dir=model_dir, stderr=RANK_LABELS_LINE, **LOINC_FLAGS)
    self.assertIn("Trained on", output)
    self.assertRegex(output, r"Solver: Newton, \d+ iterations, [^\n]*: converged\.")
    for name in ("config.json", "feature_mapping.json", "weights.json", "scorer"):
      self.assertTrue(os.path.exists(os.path.join(model_dir, name)), name)
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
      self.assertEqual(json.load(f)["features"]["multi_hot_fields"], {"system": "/"})
    mapper = workflow.load_mapper(model_dir)
    self.assertIn("rank_loinc:missing", mapper.feature_names)
    corpus = ranking_corpus.read_corpus_csv(str(LOINC_DIR), ranking_corpus.LOINC_LAYOUT)
    rows = mapper.query_features("glucose in blood", corpus)
    loaded = tf.keras.models.load_model(os.path.join(model_dir, "scorer"))
    with open(os.path.join(model_dir, "weights.json"), encoding="utf-8") as f:
      saved = json.load(f)
    weights = saved["weights"]
    scorer = ranksvm.scorer_of(loaded)
    self.assertEqual(saved["feature_names"], scorer.feature_names)  # The folder states the features' order.
    # JSON keys are sorted: the order is in feature_names.
    self.assertCountEqual(weights, scorer.feature_names)
    self.assertTrue(saved["solver"]["converged"], saved["solver"])
    expected = ((rows - np.array(scorer.get_config()["feature_mean"])) / np.array(
        scorer.get_config()["feature_scale"])) @ np.array([weights[n] for n in scorer.feature_names])
    self.assertAllClose(ranksvm.score_rows(loaded, rows), expected, rtol=1e-4, atol=1e-4)

    # Rank mode prints the top-k, best first, with the scores of the exported model.
    printed = _run_main(mode="rank", model_dir=model_dir, input_format="corpus", input=str(LOINC_DIR),
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
    with contextlib.redirect_stderr(io.StringIO()):
      report = workflow.evaluate(_config(mode="evaluate", eval_protocol="leave_one_query_out",
                                         **config_flags))
    self.assertEqual((report["num_eval_queries"], report["num_train_queries"]), (3, 2))
    self.assertEqual(report["metrics_config"]["gain"], "linear")  # Rank labels use linear gain.
    self.assertIn("bm25(long_common_name)", report["results"])
    for values in report["results"].values():
      self.assertTrue(all(np.isfinite(v) for v in values.values()), values)
    model_dir = self.create_tempdir().full_path
    _run_main(mode="train", model_dir=model_dir, stderr=RANK_LABELS_LINE, **LOINC_FLAGS)
    printed = _run_main(mode="evaluate", eval_protocol="model", model_dir=model_dir, input_format="corpus",
                        input=str(LOINC_DIR), label_column="rank", label_kind="rank", stderr=RANK_LABELS_LINE)
    self.assertRegex(printed, r"ranksvm\s+\d\.\d{4}")
    self.assertTrue(os.path.isfile(os.path.join(model_dir, "evaluation.json")))


class ConfigFromFlagsTest(tf.test.TestCase):

  def test_flags_fill_the_nested_configs(self):
    config = _config(mode="train", model_dir="/tmp/m", input="/data", multi_hot_fields=["system:/", "kind:|"],
                     text_fields=["title"], label_kind="relevance", ng_seed=3, c=0.5, topn=5, gain="linear")
    self.assertEqual(config.features.multi_hot_fields, {"system": "/", "kind": "|"})
    self.assertEqual(config.features.similarities, ["bm25", "tfidf"])
    self.assertEqual((config.data.format, config.data.data_dir, config.data.data_path,
                      config.data.layout.label_kind), ("corpus", "/data", None, "relevance"))
    self.assertEqual(config.data.newsgroups.seed, 3)
    self.assertEqual((config.svm.c, config.evaluation.metrics.topn, config.evaluation.gain),
                     (0.5, 5, "linear"))

  def test_defaults_read_relevance_and_solve_by_newton(self):
    config = _config(mode="evaluate", input_format="tsv", input="runs.csv", tolerance=1e-8, max_iterations=50)
    self.assertEqual((config.data.data_dir, config.data.data_path), (None, "runs.csv"))
    self.assertEqual((config.data.layout.label_column, config.data.layout.label_kind), ("label", "relevance"))
    self.assertEqual((config.data.format, config.data.rows_format), ("rows", "tsv"))
    self.assertEqual((config.svm.tolerance, config.svm.max_iterations, config.svm.batch_size),
                     (1e-8, 50, None))

  def test_no_document_fields_means_no_feature_config(self):
    config = _config(mode="evaluate", input_format="libsvm", input="lists.txt")
    self.assertIsNone(config.features)

  def test_newsgroups_queries_default_to_pairwise_trains(self):
    config = _config(mode="evaluate", input_format="newsgroups20", text_fields=["text"])
    self.assertEqual(config.data.newsgroups.num_queries, 60)

  def test_malformed_multi_hot_item_raises(self):
    with self.assertRaisesRegex(ValueError, r"--multi_hot_fields item 'system' must be field:separator"):
      ranksvm_main.parse_multi_hot(["system"])


class DataFormatTest(tf.test.TestCase, parameterized.TestCase):
  """One format flag: the corpus folder is `corpus`, row files are named by their format (`rows`: by the
  extension); `csv` for a folder and --rows_format (before 0.9.0) still work, each with one warning line."""

  def _parsed(self, argv: list[str]) -> tuple[ranksvm_config.RankingDataConfig, str]:
    code, stderr = parse_error(ranksvm_main, ["--mode=evaluate", "--text_fields=t", *argv])
    self.assertEqual(code, 0, stderr)
    return parsed_config(ranksvm_main, ["--mode=evaluate", "--text_fields=t", *argv]).data, stderr

  def test_corpus_names_the_folder(self):
    folder = self.create_tempdir().full_path
    data, stderr = self._parsed(["--input_format=corpus", f"--input={folder}"])
    self.assertEqual((data.format, data.data_dir, data.data_path, stderr), ("corpus", folder, None, ""))

  @parameterized.named_parameters(("csv", "csv", "runs.csv"), ("tsv", "tsv", "runs.txt"),
                                  ("jsonl", "jsonl", "runs.json"), ("tab", "tab", "runs.tab"))
  def test_a_row_format_names_row_files_of_that_format(self, name, file_name):
    path = self.create_tempfile(file_name).full_path
    data, stderr = self._parsed([f"--input_format={name}", f"--input={path}"])
    self.assertEqual((data.format, data.rows_format, data.data_dir, data.data_path, stderr),
                     ("rows", name, None, path, ""))

  def test_rows_reads_each_format_from_the_extension(self):
    data, stderr = self._parsed(["--input_format=rows", "--input=runs.tsv"])
    self.assertEqual((data.format, data.rows_format, stderr), ("rows", "auto", ""))

  def test_old_csv_with_a_folder_is_the_corpus_with_one_warning_line(self):
    folder = self.create_tempdir().full_path
    data, stderr = self._parsed(["--input_format=csv", f"--input={folder}"])
    self.assertEqual((data.format, data.data_dir, data.data_path), ("corpus", folder, None))
    self.assertEqual(stderr, "--input_format=csv for a folder is deprecated; use --input_format=corpus (the "
                             "folder of docs.csv, queries.csv and query_doc.csv).\n")

  def test_old_csv_with_a_file_is_a_csv_row_file(self):
    path = self.create_tempfile("runs.txt").full_path
    data, stderr = self._parsed(["--input_format=csv", f"--input={path}"])
    self.assertEqual((data.format, data.rows_format, data.data_path, stderr), ("rows", "csv", path, ""))

  @parameterized.named_parameters(
      ("with_rows", ["--input_format=rows"], "tsv", "tsv"),
      ("alone", [], "jsonl", "jsonl"),
      ("with_its_own_format", ["--input_format=tsv"], "tsv", "tsv"),
      ("auto", ["--input_format=rows"], "auto", "auto"),
  )
  def test_deprecated_rows_format_means_row_files_of_that_format(self, argv, rows_format, parsed):
    data, stderr = self._parsed([*argv, "--input=runs.txt", f"--rows_format={rows_format}"])
    self.assertEqual((data.format, data.rows_format, data.data_path), ("rows", parsed, "runs.txt"))
    new = (f"--input_format={rows_format} (row files of that format)" if rows_format != "auto" else
           "--input_format=rows (each row file's format from its extension)")
    self.assertEqual(stderr, f"--rows_format is deprecated; use {new}.\n")

  def test_two_row_formats_are_refused_in_one_line(self):
    code, stderr = parse_error(ranksvm_main, ["--mode=evaluate", "--input_format=csv", "--input=runs.txt",
                                              "--rows_format=tsv"])
    self.assertEqual((code, stderr), (2, "pairwise-ranksvm: error: --input_format=csv and --rows_format=tsv "
                                         "name two row formats; give --input_format only.\n"))

  def test_a_config_json_of_0_8_reads_csv_as_the_corpus(self):
    old = ranksvm_config.RankingDataConfig(format="csv", data_dir="/data")
    self.assertEqual((old.format, old.data_dir), ("corpus", "/data"))
    rows = ranksvm_config.RankingDataConfig(format="rows", data_path="runs.csv", rows_format="csv")
    self.assertEqual(ranksvm_config.RankingDataConfig(format="csv", data_path="runs.csv"), rows)

  def test_the_library_names_fields_and_the_binary_its_flags(self):
    with self.assertRaisesRegex(ValueError, r"^`format`=corpus needs `data_dir`, the folder"):
      ranksvm_config.RankingDataConfig(format="corpus")
    code, stderr = parse_error(ranksvm_main, ["--mode=train", "--model_dir=/tmp/x", "--text_fields=t"])
    self.assertEqual((code, stderr), (2, "pairwise-ranksvm: error: --input_format=corpus needs --input, the "
                                         "folder of docs.csv, queries.csv and query_doc.csv.\n"))


class FlagValidationTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("rank_without_query", {"mode": "rank", "model_dir": "/tmp/x", "input": "/tmp"}, "needs --query"),
      ("csv_without_dir", {"mode": "train", "model_dir": "/tmp/x", "text_fields": ["t"]}, "needs --input"),
      ("train_without_model_dir", {"mode": "train", "input": "/tmp", "text_fields": ["t"]}, "--model_dir"),
      ("no_fields", {"mode": "train", "model_dir": "/tmp/x", "input": "/tmp"}, "Give document fields"),
      ("bad_multi_hot", {"mode": "train", "model_dir": "/tmp/x", "input": "/tmp", "multi_hot_fields": ["x"]},
       "field:separator"),
      ("libsvm_rank_without_id", {"mode": "rank", "model_dir": "/tmp/x", "input_format": "libsvm",
                                  "input": "/tmp/f"}, "needs --query_id"),
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
    self.assertRegex(result.stderr, "^" + re.escape(RANK_LABELS_LINE) + r"pairwise-ranksvm: error: "
                     r"--baseline_features \['bm25\(nothing\)'\] are not features; [^\n]*\n$")

  def test_bad_libsvm_input_is_one_line_naming_the_file(self):
    path = self.create_tempfile("bad.txt", content="1 qid:1 1:0.5 1:0.7\n0 qid:1 1:0.1\n").full_path
    result = run_binary(ranksvm_main, ["--mode=evaluate", "--input_format=libsvm", f"--input={path}"])
    self.assertEqual(result.code, 1)
    self.assertEqual(result.stderr.splitlines(), [result.stderr.strip()])
    self.assertRegex(result.stderr, f"^pairwise-ranksvm: error: {re.escape(path)}")

  def test_missing_model_is_one_line(self):
    result = run_binary(ranksvm_main, ["--mode=rank", "--model_dir=/no/such/model", "--input_format=libsvm",
                                       "--input=/no/such/file", "--query_id=1"])
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
          example.features.feature["utility"].float_list.value.append(float(np.clip(np.round(grade + 1), 0,
                                                                                    3)))
        writer.write(elwc.SerializeToString())
    missing = run_binary(ranksvm_main, ["--mode=evaluate", "--input_format=elwc", f"--input={path}"])
    self.assertEqual(missing.code, 1)
    self.assertRegex(missing.stderr,
                     r"^pairwise-ranksvm: error: .*example 1 has no label 'label' .*--label_key\.\n$")
    result = run_binary(ranksvm_main, ["--mode=evaluate", "--input_format=elwc", f"--input={path}",
                                       "--label_key=utility", "--baseline_features=3"])
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
    argv = ["--mode=evaluate", "--input_format=rows", f"--input={path}", "--query_id_column=query",
            "--label_column=position", "--label_kind=rank", "--feature_columns=bm25,length,noise",
            "--baseline_features=noise"]
    labels = ("Labels: 'position' read as ranks (1 = best within the query), turned into relevance; "
              "--label_kind=relevance reads higher = better.\n")
    failed = run_binary(ranksvm_main, argv)
    self.assertEqual((failed.code, failed.stderr), (1, f"pairwise-ranksvm: error: {path}, row 129 (line "
                                                        "130), field 'bm25': 'n/a' is not a number; expected "
                                                        "a finite number.\n"))
    result = run_binary(ranksvm_main, [*argv, "--bad_rows=skip"])
    self.assertEqual(result.code, 0, result.stderr)
    rejects = os.path.join(root, "runs.rejects.jsonl")
    self.assertEqual(result.stderr, f"Rows: {path}: 128 rows in 16 groups; 1 bad row left out (listed in "
                                    f"{rejects}).\n" + labels)
    ndcg = {line.split()[0]: float(line.split()[1]) for line in result.stdout.splitlines()[2:4]}
    # Rank labels score with linear gain (--gain=auto), which spreads NDCG less than 2^label - 1 did.
    self.assertGreater(ndcg["ranksvm"], ndcg["noise"] + 0.15, result.stdout)
    self.assertGreater(ndcg["ranksvm"], 0.95, result.stdout)  # The labels are a linear order of two features.


# Modules whose messages and hints reach pairwise-ranksvm's users.
MESSAGE_MODULES = ("pairwise/ranksvm/ranksvm.py", "pairwise/ranksvm/ranksvm_solver.py",
                   "pairwise/ranksvm/ranksvm_config.py",
                   "pairwise/studies/ranksvm_workflow.py", "rank4class_cli/binaries/ranksvm_main.py",
                   "pairwise/ranksvm/pair_transform.py",
                   "pairwise/ranksvm/features.py", "rank4class_data/ranking/feature_lists.py",
                   "rank4class_data/ranking/grouped_rows.py",
                   "rank4class_data/rows/libsvm.py", "rank4class_data/ranking/ranking_corpus.py")


class FlagHintsTest(tf.test.TestCase):

  def test_every_flag_named_in_messages_and_hints_exists(self):
    # The binary names flags; the library modules name config fields, which the binary writes as its flags.
    root = pathlib.Path(ranksvm_main.__file__).resolve().parents[2]
    named, converted = {}, set()
    for module in MESSAGE_MODULES:
      for node in ast.walk(ast.parse((root / module).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # f-strings' literal parts too.
          if module.startswith("rank4class_cli/"):
            for name in re.findall(r"--([a-z][a-z0-9_]*)", node.value):
              named.setdefault(name, module)
          for field in re.findall(r"`[A-Za-z_][\w.]*`", node.value):
            flag = cli.flag_words(field, ranksvm_main.FLAGS)
            if flag.startswith("--"):
              converted.add(flag[2:].partition("=")[0])
    self.assertContainsSubset({"input_format", "input", "max_iterations", "tolerance", "label_kind",
                               "label_key", "overwrite_model_dir", "query_id", "model_dir"}, converted)
    unknown = {name: module for name, module in named.items()
               if name not in ranksvm_main.FLAGS and name not in flags.FLAGS and name not in ("help",
                                                                                              "helpfull")}
    self.assertEqual(unknown, {})
    self.assertContainsSubset(converted, set(ranksvm_main.FLAGS))


def _graded_lists(
  seed: int, names=("a", "b", "c", "noise"), num_queries: int = 12
) -> feature_lists.FeatureLists:
  """Lists of 10 documents whose grade 0..3 follows a - 2 b + c / 2 (the last feature is noise)."""
  rng = np.random.default_rng(seed)
  features = rng.normal(size=(num_queries * 10, len(names)))
  relevance = np.clip(np.round(features[:, :3] @ [1.0, -2.0, 0.5] + 1.5), 0, 3) + 0.0  # + 0.0: no -0 grades.
  return feature_lists.FeatureLists(features, relevance, np.arange(0, num_queries * 10 + 1, 10),
                                    [f"q{i}" for i in range(num_queries)],
                                    [f"d{i}" for i in range(len(relevance))], list(names))


def _with_columns(lists: feature_lists.FeatureLists, names: list[str],
                  extra: dict[str, np.ndarray] | None = None) -> feature_lists.FeatureLists:
  """The same rows with the named columns in the given order, plus extra columns."""
  columns = {name: lists.features[:, j] for j, name in enumerate(lists.feature_names)}
  columns.update(extra or {})
  return feature_lists.FeatureLists(np.stack([columns[name] for name in names], axis=1), lists.relevance,
                                    lists.list_offsets, lists.query_ids, lists.doc_ids, list(names))


def _ranksvm_row(stdout: str) -> str:
  return next(line for line in stdout.splitlines() if line.startswith("ranksvm "))


class SavedModelFeatureMappingTest(tf.test.TestCase, parameterized.TestCase):
  """A saved model reads a new file's features by name: permuted columns score the same, extra ones are
  ignored (named on stderr), missing ones are an error naming the file and the features."""

  def _write(self, lists, data_format: str, name: str) -> str:
    path = os.path.join(self.create_tempdir().full_path, name)
    if data_format == "libsvm":
      feature_lists.write_libsvm(lists, path)
    elif data_format == "elwc":
      elwc.write_elwc(path, feature_lists.to_elwc(lists))
    else:
      with open(path, "w", encoding="utf-8") as f:
        f.write(",".join(["query", "doc", "grade", *lists.feature_names]) + "\n")
        for q in range(lists.num_queries):
          for row in range(*lists.list_offsets[q:q + 2]):
            values = ",".join(f"{v:.6f}" for v in lists.features[row])
            f.write(f"{lists.query_ids[q]},{lists.doc_ids[row]},{lists.relevance[row]:g},{values}\n")
    return path

  def _flags(self, data_format: str, path: str) -> dict:
    flag_values = {"input_format": data_format, "input": path}
    if data_format == "rows":
      flag_values.update(query_id_column="query", label_column="grade")
    if data_format == "elwc":
      flag_values.update(label_key="label")
    return flag_values

  @parameterized.named_parameters(("libsvm", "libsvm", "lists.libsvm"), ("elwc", "elwc", "lists.tfrecord"),
                                  ("rows", "rows", "lists.csv"))
  def test_permuted_extra_and_missing_features(self, data_format, name):
    lists = _graded_lists(0)
    labels = ("Labels: 'grade' read as relevance (higher = better); --label_kind=rank reads 1 = best.\n"
              if data_format == "rows" else "")

    def stderr(path: str, ignored: str = "") -> str:  # What the binary says about reading `path`.
      rows = f"Rows: {path}: 120 rows in 12 groups.\n" if data_format == "rows" else ""
      return rows + labels + ignored

    model_dir = self.create_tempdir().full_path
    train = self._write(lists, data_format, name)
    extra_flags = {"feature_columns": ["a", "b", "c", "noise"]} if data_format == "rows" else {}
    _run_main(mode="train", model_dir=model_dir, stderr=stderr(train), **self._flags(data_format, train),
              **extra_flags)
    with open(os.path.join(model_dir, "weights.json"), encoding="utf-8") as f:
      self.assertEqual(json.load(f)["feature_names"], ["a", "b", "c", "noise"])
    evaluate = {"mode": "evaluate", "eval_protocol": "model", "model_dir": model_dir}
    expected = _ranksvm_row(_run_main(stderr=stderr(train), **evaluate, **self._flags(data_format, train)))

    permuted = self._write(_with_columns(lists, ["noise", "c", "a", "b"]), data_format, name)
    self.assertEqual(_ranksvm_row(_run_main(stderr=stderr(permuted), **evaluate,
                                            **self._flags(data_format, permuted))), expected)

    wider = _with_columns(lists, ["b", "zzz", "a", "noise", "c"], {"zzz": np.linspace(-1, 1, 120)})
    wide = self._write(wider, data_format, name)
    wide_flags = {"feature_columns": ["b", "zzz", "a", "noise", "c"]} if data_format == "rows" else {}
    ignored = f"Ignoring 1 feature(s) of {wide} that the model does not use: ['zzz'].\n"
    self.assertEqual(_ranksvm_row(_run_main(stderr=stderr(wide, ignored), **evaluate,
                                            **self._flags(data_format, wide), **wide_flags)), expected)

    narrow = self._write(_with_columns(lists, ["noise", "a", "c"]), data_format, name)
    failed = run_binary(ranksvm_main, _argv({**evaluate, **self._flags(data_format, narrow)}))
    self.assertEqual(failed.code, 1)
    missing = (r"missing column 'b'; expected one of the header's columns \[[^\n]*\]" if data_format == "rows"
               else r"field 'features': 1 of the model's 4 features missing: \['b'\]; expected every feature "
               r"the model was trained on \(the file has \['a', 'c', 'noise'\]\)")
    self.assertRegex(failed.stderr, f"^pairwise-ranksvm: error: {re.escape(narrow)}, [^\n]*"
                     f"{missing}\\.\n$")

    # Rank mode maps by name too: the permuted file ranks its list as the training file does.
    query_id = "4" if data_format == "libsvm" else "q3"  # SVMlight qids are written 1-based in list order.
    ranked = [_run_main(stderr=stderr(path), mode="rank", model_dir=model_dir, query_id=query_id, top_k=10,
                        **self._flags(data_format, path)).splitlines()[2:] for path in (train, permuted)]
    self.assertEqual(ranked[0], ranked[1])

  def test_libsvm_without_header_maps_indices_and_zero_fills_unwritten_ones(self):
    lists = _graded_lists(1, names=("f1", "f2", "f3", "f4"))
    root = self.create_tempdir().full_path

    def plain_libsvm(name, features):
      path = os.path.join(root, name)
      with open(path, "w", encoding="utf-8") as f:
        for row, values in enumerate(features):
          pairs = " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(values) if v != 0)
          f.write(f"{lists.relevance[row]:g} qid:{row // 10} {pairs}\n")
      return path

    train = plain_libsvm("train.svm", lists.features)
    model_dir = self.create_tempdir().full_path
    _run_main(mode="train", model_dir=model_dir, input_format="libsvm", input=train)
    evaluate = {"mode": "evaluate", "eval_protocol": "model", "model_dir": model_dir,
                "input_format": "libsvm"}
    # Feature 4 zero everywhere: a sparse file never writes index 4, yet it is the model's f4 = 0, not
    # missing.
    zeroed = lists.features.copy()
    zeroed[:, 3] = 0.0
    expected = _ranksvm_row(_run_main(**evaluate, input=plain_libsvm("zeroed_wide.svm", np.hstack(
        [zeroed, np.zeros((120, 1))]))))
    self.assertEqual(_ranksvm_row(_run_main(**evaluate, input=plain_libsvm("zeroed.svm", zeroed))), expected)
    wider = plain_libsvm("wider.svm", np.hstack([lists.features, np.ones((120, 1))]))
    self.assertEqual(_ranksvm_row(_run_main(stderr=f"Ignoring 1 feature(s) of {wider} that the model does "
                                                   "not use: ['f5'].\n", **evaluate, input=wider)),
                     _ranksvm_row(_run_main(**evaluate, input=train)))


class LabelKindTest(tf.test.TestCase):

  def _rows(self, name: str) -> str:
    lists = _graded_lists(2)
    path = os.path.join(self.create_tempdir().full_path, name)
    with open(path, "w", encoding="utf-8") as f:
      f.write("query,a,b,c,noise,grade\n")
      for row, values in enumerate(lists.features):
        f.write(f"q{row // 10}," + ",".join(f"{v:.5f}" for v in values) + f",{lists.relevance[row]:g}\n")
    return path

  def test_grades_are_relevance_by_default_and_the_terminal_says_so(self):
    path = self._rows("graded.csv")
    argv = ["--mode=evaluate", "--input_format=rows", f"--input={path}", "--query_id_column=query",
            "--label_column=grade", "--feature_columns=a,b,c,noise", "--baseline_features=a"]
    result = run_binary(ranksvm_main, argv)
    self.assertEqual((result.code, result.stderr), (0, f"Rows: {path}: 120 rows in 12 groups.\n"
                                                       "Labels: 'grade' read as relevance (higher = better); "
                                                       "--label_kind=rank reads 1 = best.\n"))
    ndcg = float(_ranksvm_row(result.stdout).split()[1])
    self.assertGreater(ndcg, 0.9)  # Grades follow a - 2b + c/2: read the right way round, RankSVM ranks well.
    # Ranks are opt-in; grade 0 is no rank, which the rank reading says instead of inverting the grades.
    as_ranks = run_binary(ranksvm_main, [*argv, "--label_kind=rank"])
    self.assertEqual(as_ranks.code, 1)
    self.assertRegex(as_ranks.stderr, r"^pairwise-ranksvm: error: "
                     rf"{re.escape(path)}, row \d+ \(line \d+\), field 'grade': label 0 out of range; "
                     r"expected a rank >= 1\.\n$")

  def test_flag_defaults(self):
    self.assertEqual(ranksvm_main.FLAGS["label_kind"].default, "relevance")
    self.assertEqual(ranksvm_main.FLAGS["label_column"].default, "label")
    self.assertEqual(ranking_corpus.CsvLayout().label_kind, "relevance")
    self.assertEqual(ranking_corpus.LOINC_LAYOUT.label_kind, "rank")


class RowsFormatTest(tf.test.TestCase):

  def test_unknown_extension_names_the_real_flags(self):
    path = self.create_tempfile("runs.txt", content="".join(
        f"{(i % 3)} qid:{i // 6} 1:{i % 5}.5 2:{(i * 7) % 3}\n" for i in range(36))).full_path
    failed = run_binary(ranksvm_main, ["--mode=evaluate", "--input_format=rows", f"--input={path}"])
    self.assertEqual(failed.code, 1)
    self.assertIn(f"pairwise-ranksvm: error: {path}: cannot tell the row format from extension '.txt'; give "
                  "--input_format (one of csv, tsv, jsonl, tab), or for an SVMlight/LibSVM file with qid: "
                  "--input_format=libsvm.\n", failed.stderr)
    for flag_name in re.findall(r"--([a-z_]+)", failed.stderr):
      self.assertIn(flag_name, ranksvm_main.FLAGS)
    result = run_binary(ranksvm_main, ["--mode=evaluate", "--input_format=rows", f"--input={path}",
                                       "--rows_format=libsvm"])
    self.assertEqual(result.code, 0, result.stderr)
    self.assertEqual(result.stderr.splitlines()[0],
                     "--rows_format is deprecated; use --input_format=rows (each row file's format from its "
                     "extension) or --input_format=libsvm (SVMlight qid files).")
    self.assertIn("ranksvm", result.stdout)


class ConvergenceReportTest(tf.test.TestCase):

  def test_one_iteration_warns_on_stderr_and_in_weights_json(self):
    path = os.path.join(self.create_tempdir().full_path, "lists.libsvm")
    feature_lists.write_libsvm(_graded_lists(3), path)
    model_dir = self.create_tempdir().full_path
    result = run_binary(ranksvm_main, ["--mode=train", "--input_format=libsvm", f"--input={path}",
                                       f"--model_dir={model_dir}", "--max_iterations=1"])
    self.assertEqual(result.code, 0, result.stderr)
    self.assertRegex(result.stderr, r"^RankSVM warning: not converged after 1 Newton iteration\(s\) \(raise "
                     r"--max_iterations, or --tolerance\): [^\n]*\n$")
    self.assertRegex(result.stdout, r"Solver: Newton, 1 iterations, [^\n]*: NOT converged\.")
    with open(os.path.join(model_dir, "weights.json"), encoding="utf-8") as f:
      solver = json.load(f)["solver"]
    self.assertEqual((solver["method"], solver["converged"], solver["iterations"]), ("newton", False, 1))
    self.assertGreater(solver["relative_gap"], solver["tolerance"])
    for key in ("primal_objective", "dual_objective", "duality_gap"):
      self.assertTrue(np.isfinite(solver[key]), key)
    with open(os.path.join(model_dir, "weights.json"), "rb") as f:
      weights = f.read()
    argv = ["--mode=train", "--input_format=libsvm", f"--input={path}", f"--model_dir={model_dir}"]
    refused = run_binary(ranksvm_main, argv)  # The model folder holds a model of other settings.
    self.assertEqual((refused.code, refused.stderr), (1, (
        f"pairwise-ranksvm: error: {model_dir} holds a run with another config (svm.max_iterations: 1 -> "
        "200): rerun with the same settings to resume it, use another directory, or --overwrite_model_dir to "
        "start it afresh.\n")))
    with open(os.path.join(model_dir, "weights.json"), "rb") as f:
      self.assertEqual(f.read(), weights)  # Untouched.
    converged = run_binary(ranksvm_main, [*argv, "--overwrite_model_dir"])
    self.assertEqual((converged.code, converged.stderr), (0, ""))
    with open(os.path.join(model_dir, "weights.json"), encoding="utf-8") as f:
      self.assertTrue(json.load(f)["solver"]["converged"])


if __name__ == "__main__":
  tf.test.main()
