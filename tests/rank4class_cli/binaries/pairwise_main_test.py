"""Tests for the pairwise-train binary: flags to config, one-line flag errors, train/evaluate/Table 4 runs,
fault injection and the run directory's config check."""

import contextlib
import csv
import io
import json
import os
import re
import shutil
import signal
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from tensorflow_serving.apis import input_pb2

from pairwise.margin import configs, runs
from pairwise.studies import class_conversion
from rank4class_cli.binaries import pairwise_main
from rank4class_data import datasets
from rank4class_engine.runs import run_directory
from tests.rank4class_cli.cli_runner import parse_error, run_binary
from tests.rank4class_engine import fault_injection

_FAST = ["--encoder=hashed_bow", "--train_steps=12", "--learning_rate=1e-3", "--lists_per_batch=2",
         "--checkpoint_every=12", "--strategy=one_device"]


def _parse_error(argv: list[str]) -> tuple[int, str]:
  """Runs the binary's flag parser; returns (exit code, stderr)."""
  return parse_error(pairwise_main, argv)


class FlagsTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    pairwise_main.FLAGS.unparse_flags()
    super().tearDown()

  def test_flags_map_onto_the_config(self):
    pairwise_main.parse_flags(["prog", "--model_dir=/m", "--dataset=newsgroups_queries", "--head=linear",
                               "--objective=softmax", "--num_classes=3", "--list_size=10", "--seeds=4,5",
                               "--frozen_embeddings", "--margin=1", "--topn=3", "--proportions=0.2,0.8",
                               "--preemption_grace_seconds=45"])
    run = pairwise_main.config_from_flags(pairwise_main.FLAGS)
    self.assertEqual(run.seeds, (4, 5))
    self.assertEqual(run.pairwise.data.dataset, "newsgroups_queries")
    self.assertEqual((run.pairwise.model.head, run.pairwise.model.objective, run.pairwise.model.num_classes),
                     ("linear", "softmax", 3))
    self.assertTrue(run.pairwise.encoder.precompute)
    self.assertEqual((run.pairwise.train.list_size, run.pairwise.train.preemption_grace_seconds), (10, 45.0))
    self.assertEqual(run.pairwise.eval.topn, 3)
    self.assertEqual((run.pairwise.train.optimizer.learning_rate,
                      run.pairwise.train.optimizer.global_clipnorm),
                     (4e-5, 1.0))
    self.assertEqual(pairwise_main.conversion_from_flags(pairwise_main.FLAGS).proportions, [0.2, 0.8])

  def test_optimizer_flags_set_the_optimizer_config(self):
    pairwise_main.parse_flags(["prog", "--model_dir=/m", "--learning_rate=1e-3", "--weight_decay=0.5",
                               "--global_clipnorm=0"])
    optimizer = pairwise_main.config_from_flags(pairwise_main.FLAGS).pairwise.train.optimizer
    self.assertEqual((optimizer.type, optimizer.learning_rate, optimizer.weight_decay,
                      optimizer.global_clipnorm),
                     ("adamw", 1e-3, 0.5, None))  # A clip norm of 0: none.

  def test_the_seed_run_of_each_mode(self):
    pairwise_main.parse_flags(["prog", "--model_dir=/m"])
    self.assertIs(pairwise_main.seed_run_from_flags(pairwise_main.FLAGS), runs.train_seed)
    pairwise_main.parse_flags(["prog", "--model_dir=/m", "--mode=class_conversion", "--test_per_class=7"])
    seed_run = pairwise_main.seed_run_from_flags(pairwise_main.FLAGS)
    config = configs.PairwiseConfig()
    with mock.patch.object(class_conversion, "run_class_conversion",
                           return_value={"accuracy": 1.0}) as experiment:
      self.assertEqual(seed_run(config, "strategy", overwrite=True), {"accuracy": 1.0})
    experiment.assert_called_once_with(config, class_conversion.ClassConversionConfig(test_per_class=7),
                                       "strategy", overwrite=True)

  @parameterized.named_parameters(
      ("objective", ["--objective=lambda"], "--objective=lambda", "margin, softmax, approx_ndcg"),
      ("head", ["--head=deep"], "--head=deep", "mlp, linear"),
      ("pivot", ["--pivot=user"], "--pivot=user", "condition, drug_name, none"),
      ("mode", ["--mode=serve"], "--mode=serve", "train, evaluate, class_conversion"))
  def test_bad_choice_is_a_one_line_error(self, extra, flag, allowed):
    code, stderr = _parse_error(["--model_dir=/m", *extra])
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1, msg=stderr)
    self.assertIn(flag, stderr)
    self.assertIn(allowed, stderr)

  @parameterized.named_parameters(
      ("no_model_dir", [], "--model_dir"),
      ("bad_seeds", ["--model_dir=/m", "--seeds=a"], "--seeds=a"),
      ("frozen_bag_of_words",
       ["--model_dir=/m", "--encoder=hashed_bow", "--frozen_embeddings"], "hashed_bow"),
      ("hub_without_handles", ["--model_dir=/m", "--encoder=hub"], "--preprocess_handle"),
      ("listwise_per_pair", ["--model_dir=/m", "--objective=softmax", "--batching=pairs"], "batching"),
      ("bad_proportions", ["--model_dir=/m", "--proportions=0.5,x"], "--proportions=0.5,x"))
  def test_other_bad_flags_are_one_line_errors(self, argv, expected):
    code, stderr = _parse_error(argv)
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1, msg=stderr)
    self.assertIn(expected, stderr)


class InputFormatTest(tf.test.TestCase, parameterized.TestCase):
  """--input_format of --train_files, as rank4class-train's: auto from the extension, or named."""

  def tearDown(self):
    pairwise_main.FLAGS.unparse_flags()
    super().tearDown()

  def _data(self, argv: list[str]) -> configs.ItemDataConfig:
    pairwise_main.parse_flags(["prog", "--model_dir=/m", *argv])
    return pairwise_main.config_from_flags(pairwise_main.FLAGS).pairwise.data

  @parameterized.named_parameters(
      ("rows_by_extension", ["--train_files=reviews.tsv"], "rows", "auto", "auto"),
      ("elwc_by_extension", ["--train_files=lists.tfrecord"], "elwc", "auto", "auto"),
      ("named_row_format", ["--train_files=reviews.txt", "--input_format=tsv"], "rows", "tsv", "tsv"),
      ("named_rows", ["--train_files=reviews.csv", "--input_format=rows"], "rows", "rows", "auto"),
      ("named_elwc", ["--train_files=lists.data", "--input_format=elwc"], "elwc", "elwc", "auto"),
      ("dataset_rows_as_before", ["--dataset=rows", "--train_files=r.csv", "--group_column=g"], "rows",
       "auto", "auto"),
      ("dataset_rows_named_format", ["--dataset=rows", "--train_files=r.txt", "--group_column=g",
                                     "--input_format=jsonl"], "rows", "jsonl", "jsonl"),
      ("no_files_is_drug_reviews", [], "drug_reviews", "auto", "auto"),
  )
  def test_the_format_and_data_set_of_the_files(self, argv, dataset, input_format, rows_format):
    if "--dataset=rows" not in argv and "rows" == dataset:
      argv = [*argv, "--group_column=g"]
    data = self._data(argv)
    self.assertEqual((data.dataset, data.input_format, data.rows_format),
                     (dataset, input_format, rows_format))

  def test_a_format_that_does_not_fit_the_data_set_is_one_line_naming_the_flags(self):
    code, stderr = _parse_error(["--model_dir=/m", "--dataset=elwc", "--train_files=l.tfrecord",
                                 "--input_format=csv"])
    self.assertEqual((code, stderr), (2, "pairwise-train: error: --input_format=csv does not fit "
                                         "--dataset=elwc: ELWC lists are --input_format=elwc.\n"))

  def test_rows_without_a_group_column_name_the_flags(self):
    code, stderr = _parse_error(["--model_dir=/m", "--train_files=reviews.csv"])
    self.assertEqual((code, stderr), (2, "pairwise-train: error: --dataset=rows needs --train_files "
                                         "(CSV/TSV/JSONL/.tab rows), --group_column, --text_column and "
                                         "--label_column.\n"))


class EndToEndTest(tf.test.TestCase):

  def tearDown(self):
    pairwise_main.FLAGS.unparse_flags()
    super().tearDown()

  def _main(self, argv):
    pairwise_main.parse_flags(["pairwise-train", *argv])
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
      pairwise_main.main([])
    pairwise_main.FLAGS.unparse_flags()
    self.stderr = err.getvalue()
    return json.loads(out.getvalue())

  def test_train_then_evaluate_the_export_reproduces_test_metrics(self):
    model_dir = self.create_tempdir().full_path
    summary = self._main(["--mode=train", f"--model_dir={model_dir}", "--pivot=drug_name",
                          "--topn=3", *_FAST])
    for name in ("config.json", "metrics.json", "summary.json", "export/pair_scorer", "export/list_scorer"):
      self.assertTrue(os.path.exists(os.path.join(model_dir, name)), msg=name)
    with open(os.path.join(model_dir, "metrics.json")) as f:
      trained = json.load(f)
    self.assertAllClose(summary["summary"]["ndcg@3"]["mean"], trained["test"]["ndcg@3"])
    # Each phase on its own stderr line (stdout is the JSON); "Trained" times the loop alone.
    phases = trained["phase_seconds"]
    self.assertContainsSubset({"data", "loop", "test", "export"}, set(phases))
    trained_line = re.search(r"^Trained (\d+) steps in ([\d.]+) s \(the training loop", self.stderr, re.M)
    self.assertIsNotNone(trained_line, msg=self.stderr)
    self.assertEqual(float(trained_line.group(2)), round(phases["loop"], 1))
    self.assertRegex(self.stderr, rf"(?m)^Exported to {re.escape(model_dir)}/export in [\d.]+ s\.$")
    evaluated = self._main(["--mode=evaluate", f"--model_dir={model_dir}"])
    for name in ("ndcg@3", "map@3", "pair_accuracy", "pair_accuracy_raw"):
      self.assertAllClose(evaluated[name], trained["test"][name], msg=name)

  def test_class_conversion(self):
    # One seed: seed folders and the mean ± std summary are covered by runs_test.summarize_seeds.
    model_dir = self.create_tempdir().full_path
    summary = self._main(["--mode=class_conversion", f"--model_dir={model_dir}", "--pivot=none", "--seeds=1",
                          "--export=false", *_FAST])
    self.assertEqual(summary["summary"]["ranking_converted_accuracy"]["n"], 1)
    with open(os.path.join(model_dir, "class_conversion.json")) as f:
      counts = json.load(f)["test_class_counts"]
    self.assertLen(set(counts), 1)  # balanced test set



class ElwcInputTest(tf.test.TestCase):
  """A user's text ranking lists in ELWC (ANTIQUE's layout: query_tokens, document_tokens, int64 relevance).

  Real 20 Newsgroups posts, 40 lists of 12; a post's relevance is its hierarchy's rank in a reader's fixed
  taste (sci 2, comp 1, others 0), learnable from the posts alone.
  """

  def test_trains_on_elwc_with_the_label_key_set_by_a_flag_and_beats_random_order(self):
    data = datasets.load_text_classification("20newsgroups", "train")
    grade = {"sci": 2, "comp": 1}
    rng = np.random.default_rng(0)
    path = os.path.join(self.create_tempdir().full_path, "lists.tfrecord")
    num_items = 0
    with tf.io.TFRecordWriter(path) as writer:
      for _ in range(40):
        elwc = input_pb2.ExampleListWithContext()
        elwc.context.features.feature["query_tokens"].bytes_list.value.extend([b"science", b"first"])
        for row in rng.choice(len(data.texts), size=12, replace=False):
          example = elwc.examples.add().features.feature
          example["document_tokens"].bytes_list.value.extend(w.encode() for w in data.texts[row].split()[:40])
          example["relevance"].int64_list.value.append(
            grade.get(data.class_names[data.labels[row]].split(".")[0], 0)
          )
          num_items += 1
        writer.write(elwc.SerializeToString())
    model_dir = self.create_tempdir().full_path
    argv = ["--mode=train", "--dataset=elwc", f"--train_files={path}", f"--model_dir={model_dir}", "--topn=5",
            "--encoder=minilm", "--frozen_embeddings", "--train_steps=150", "--learning_rate=3e-3",
            "--lists_per_batch=4", "--checkpoint_every=150", "--strategy=one_device", "--export=false",
            "--test_fraction=0.3"]
    no_files = run_binary(pairwise_main, [*argv[:2], "--train_files=/no/such/lists-*.tfrecord", *argv[3:]])
    self.assertEqual((no_files.code, no_files.stderr), (1, "pairwise-train: error: "
                                                            "/no/such/lists-*.tfrecord: no TFRecord file "
                                                            "matches the file pattern\n"))
    missing = run_binary(pairwise_main, argv)
    self.assertEqual(missing.code, 1)
    self.assertRegex(missing.stderr, r"^pairwise-train: error: .*lists.tfrecord, row 1, field 'label': "
                     r"example 1 has no 'label' .*--label_key\.\n$")
    result = run_binary(pairwise_main, [*argv, "--label_key=relevance"])
    self.assertEqual(result.code, 0, result.stderr[-3000:])
    with open(os.path.join(model_dir, "metrics.json")) as f:
      metrics = json.load(f)
    self.assertEqual(sum(metrics["num_items"].values()), num_items)
    self.assertGreater(metrics["test"]["ndcg@5"], metrics["test_random_baseline"]["ndcg@5"] + 0.2,
                       (metrics["test"]["ndcg@5"], metrics["test_random_baseline"]))


class RowsTest(tf.test.TestCase):
  """A user's grouped rows in a CSV: the same reader taste as above, with ordinal label names and bad rows."""

  def test_trains_on_csv_rows_skipping_bad_rows_and_beats_random_order(self):
    data = datasets.load_text_classification("20newsgroups", "train")
    order = ["other", "comp", "sci"]
    rng = np.random.default_rng(0)
    path = os.path.join(self.create_tempdir().full_path, "rows.csv")
    with open(path, "w", newline="") as f:
      writer = csv.writer(f)
      writer.writerow(["reader", "post", "taste"])
      for group in range(40):
        for row in rng.choice(len(data.texts), size=12, replace=False):
          top = data.class_names[data.labels[row]].split(".")[0]
          writer.writerow([f"reader{group}", " ".join(data.texts[row].split()[:40]),
                           top if top in order else "other"])
      writer.writerow(["reader0", "", "sci"])  # Bad: an empty text.
      writer.writerow(["reader1", "a post", "best"])  # Bad: not one of the label order.
    model_dir = self.create_tempdir().full_path
    argv = ["--mode=train", "--dataset=rows", f"--train_files={path}", "--group_column=reader",
            "--text_column=post",
            "--label_column=taste", "--label_order=other,comp,sci", f"--model_dir={model_dir}", "--topn=5",
            "--encoder=minilm", "--frozen_embeddings", "--train_steps=150", "--learning_rate=3e-3",
            "--lists_per_batch=4", "--checkpoint_every=150", "--strategy=one_device", "--export=false",
            "--test_fraction=0.3"]
    failed = run_binary(pairwise_main, argv)
    self.assertEqual((failed.code, failed.stderr), (1, f"pairwise-train: error: {path}, row 481 (line 482), "
                                                        "field 'post': empty text; expected a "
                                                        "non-empty text.\n"))
    result = run_binary(pairwise_main, [*argv, "--bad_rows=skip"])
    self.assertEqual(result.code, 0, result.stderr[-3000:])
    rejects = os.path.join(model_dir, "rejects.jsonl")
    self.assertIn(f"Rows: {path}: 480 rows in 40 groups; 2 bad rows left out (listed in {rejects}).",
                  result.stderr)
    with open(rejects) as f:
      self.assertEqual([json.loads(line)["reason"] for line in f],
                       ["empty text", "label 'best' is not one of the label order"])
    with open(os.path.join(model_dir, "metrics.json")) as f:
      metrics = json.load(f)
    self.assertEqual(sum(metrics["num_items"].values()), 480)
    self.assertGreater(metrics["test"]["ndcg@5"], metrics["test_random_baseline"]["ndcg@5"] + 0.2,
                       (metrics["test"]["ndcg@5"], metrics["test_random_baseline"]))


class FaultInjectionTest(tf.test.TestCase):
  """pairwise-train killed (SIGKILL) at the boundaries of its run, or stopped by Ctrl-C or SIGTERM, then
  rerun: the metrics and export equal an uninterrupted run's and nothing temporary is left (the engine's
  lifecycle, as rank4class-train's: tests/rank4class_cli/binaries/train_main_test.py)."""

  # The linear head: the MLP head's BatchNorm follows biases whose gradients are ~0, which Adam turns into
  # steps of size ~learning rate in whatever direction float noise points, so two uninterrupted processes of
  # the MLP head already differ visibly (sparse embedding updates on CPU differ in the last bits between
  # processes). Dropout's masks resume exactly: tests/pairwise/margin/pairwise_train_test.py compares that bit
  # for bit in one process.
  FLAGS = ["--mode=train", "--pivot=drug_name", "--topn=3", "--encoder=hashed_bow", "--head=linear",
           "--train_steps=45", "--eval_every=20", "--checkpoint_every=10", "--lists_per_batch=2",
           "--learning_rate=1e-2", "--strategy=one_device"]

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.uninterrupted = os.path.join(cls.root, "uninterrupted")
    done = fault_injection.run_binary("rank4class_cli.binaries.pairwise_main",
                                      [*cls.FLAGS, f"--model_dir={cls.uninterrupted}"])
    assert done.returncode == 0, done.stderr[-3000:]

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def _assert_equals_uninterrupted(self, model_dir: str) -> None:
    """Metrics and export scores as the uninterrupted run's; no temporary and no checkpoint left."""
    self._assert_metrics_close(model_dir, self.uninterrupted)
    leftovers = [name for _, dirs, files in os.walk(model_dir) for name in dirs + files
                 if name.endswith((".tmp", ".old")) or "_temp" in name or name == "backup"]
    self.assertEqual(leftovers, [])
    items = tf.constant(["a good drug", "it did not help", "terrible side effects"])
    scores = [tf.keras.models.load_model(os.path.join(d, "export", "pair_scorer"))((items,
                                                                                    items[::-1])).numpy()
              for d in (model_dir, self.uninterrupted)]
    self.assertAllClose(scores[0], scores[1], rtol=1e-4, atol=1e-4)

  def _assert_metrics_close(self, model_dir: str, uninterrupted: str) -> None:
    def numbers(metrics: dict) -> dict[str, float]:
      flat = {f"test.{k}": v for k, v in metrics["test"].items() if isinstance(v, float)}
      for record in metrics["validation_history"]:
        flat.update({f"validation.{record['step']}.{k}": v for k, v in record.items()})
      return {**flat, "best_step": metrics["best_step"]}

    with open(os.path.join(model_dir, "metrics.json")) as f, open(os.path.join(uninterrupted,
                                                                               "metrics.json")) as g:
      got, want = numbers(json.load(f)), numbers(json.load(g))
    self.assertEqual(sorted(got), sorted(want))
    self.assertAllClose([got[k] for k in sorted(got)], [want[k] for k in sorted(want)], rtol=1e-4, atol=1e-4)

  def test_stopped_and_killed_at_every_boundary_then_resumed_equals_an_uninterrupted_run(self):
    # One run directory, one process after another, each resuming what the last left.
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    flags = [*self.FLAGS, f"--model_dir={model_dir}"]
    # The engine's first executions are 2 steps long (it times them to choose the length; the epoch is 10
    # steps): after the 3rd, step 6, inside the epoch of steps 1-10, as a scheduler preempting the run.
    stopped = fault_injection.run_binary("rank4class_cli.binaries.pairwise_main", flags,
                                         "sigterm_in_training", 3)
    self.assertEqual(stopped.returncode, 143, msg=stopped.stderr[-3000:])
    self.assertNotIn("Traceback", stopped.stderr)
    self.assertEqual(stopped.stderr.splitlines()[-1], "pairwise-train: terminated; stopped at step 6 of the "
                     f"run in {model_dir}; rerun the same command to resume from the checkpoint of step 6.")
    self.assertEqual(sorted(os.listdir(os.path.join(model_dir, "backup"))),
                     ["checkpoint", "ckpt-6.data-00000-of-00001", "ckpt-6.index", "state-6.json"])
    self.assertFalse(os.path.exists(os.path.join(model_dir, "metrics.json")))
    # Resumed at step 6: Ctrl-C just after its 2nd checkpoint, step 20's.
    stopped = fault_injection.run_binary("rank4class_cli.binaries.pairwise_main", flags,
                                         "sigint_after_checkpoint", 2)
    self.assertEqual(stopped.returncode, 130, msg=stopped.stderr[-3000:])
    self.assertNotIn("Traceback", stopped.stderr)
    self.assertEqual(stopped.stderr.splitlines()[-1], "pairwise-train: interrupted; stopped at step 20 of "
                     f"the run in {model_dir}; rerun the same command to resume from the "
                     "checkpoint of step 20.")
    for fault, n in (("during_validation", 1), ("after_checkpoint", 1), ("during_export", 1),
                     ("before_result", 1)):
      killed = fault_injection.run_binary("rank4class_cli.binaries.pairwise_main", flags, fault, n)
      self.assertEqual(killed.returncode, -signal.SIGKILL, msg=f"{fault}: {killed.stderr[-3000:]}")
      self.assertFalse(os.path.exists(os.path.join(model_dir, "metrics.json")), fault)
    resumed = fault_injection.run_binary("rank4class_cli.binaries.pairwise_main", flags)
    self.assertEqual(resumed.returncode, 0, msg=resumed.stderr[-3000:])
    # The step each process resumed from (the processes resumed at 45, training done, leave one).
    self.assertEqual(fault_injection.train_begin_steps(os.path.join(model_dir, run_directory.PROGRESS_FILE)),
                     [0, 6, 20, 30, 40, 45])
    self._assert_equals_uninterrupted(model_dir)

  def test_another_config_is_refused_naming_the_change_and_overwrite_starts_afresh(self):
    model_dir = self.create_tempdir().full_path
    argv = ["--mode=train", f"--model_dir={model_dir}", "--pivot=drug_name", *_FAST, "--export=false"]
    self.assertEqual(run_binary(pairwise_main, argv).code, 0)
    with open(os.path.join(model_dir, "config.json"), "rb") as f:
      config = f.read()
    refused = run_binary(pairwise_main, [*argv, "--learning_rate=0.5"])
    self.assertEqual(refused.code, 1)
    self.assertEqual(refused.stderr, f"pairwise-train: error: {model_dir} holds a run with another config "
                     "(train.optimizer.learning_rate: 0.001 -> 0.5): rerun with the same settings to resume "
                     "it, use another directory, or --overwrite_model_dir to start it afresh.\n")
    with open(os.path.join(model_dir, "config.json"), "rb") as f:
      self.assertEqual(f.read(), config)
    fresh = run_binary(pairwise_main, [*argv, "--learning_rate=0.5", "--overwrite_model_dir"])
    self.assertEqual(fresh.code, 0, fresh.stderr[-2000:])
    with open(os.path.join(model_dir, "config.json")) as f:
      self.assertEqual(json.load(f)["train"]["optimizer"]["learning_rate"], 0.5)


if __name__ == "__main__":
  tf.test.main()
