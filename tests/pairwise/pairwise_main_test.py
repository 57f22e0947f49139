"""Tests for the pairwise-train binary: flags to config, one-line flag errors, train/evaluate/Table 4 runs."""

import contextlib
import io
import json
import os

import tensorflow as tf
from absl.testing import parameterized

from pairwise import pairwise_main

_FAST = ["--encoder=hashed_bow", "--train_steps=12", "--learning_rate=1e-3", "--lists_per_batch=2",
         "--checkpoint_every=12", "--strategy=one_device"]


def _parse_error(argv):
  """Runs the binary's flag parser; returns (exit code, stderr)."""
  stderr = io.StringIO()
  with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
    try:
      pairwise_main.parse_flags(["pairwise-train", *argv])
    except SystemExit as e:
      return e.code, stderr.getvalue()
  return 0, stderr.getvalue()


class FlagsTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    pairwise_main.FLAGS.unparse_flags()
    super().tearDown()

  def test_flags_map_onto_the_config(self):
    pairwise_main.parse_flags(["prog", "--model_dir=/m", "--dataset=newsgroups_queries", "--head=linear",
                               "--objective=softmax", "--num_classes=3", "--list_size=10", "--seeds=4,5",
                               "--frozen_embeddings", "--margin=1", "--topn=3", "--proportions=0.2,0.8"])
    run = pairwise_main.config_from_flags(pairwise_main.FLAGS)
    self.assertEqual(run.seeds, (4, 5))
    self.assertEqual(run.pairwise.data.dataset, "newsgroups_queries")
    self.assertEqual((run.pairwise.model.head, run.pairwise.model.objective, run.pairwise.model.num_classes),
                     ("linear", "softmax", 3))
    self.assertTrue(run.pairwise.encoder.precompute)
    self.assertEqual(run.pairwise.train.list_size, 10)
    self.assertEqual(run.pairwise.eval.topn, 3)
    self.assertEqual(run.conversion.proportions, [0.2, 0.8])

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
      ("frozen_bag_of_words", ["--model_dir=/m", "--encoder=hashed_bow", "--frozen_embeddings"], "hashed_bow"),
      ("hub_without_handles", ["--model_dir=/m", "--encoder=hub"], "--preprocess_handle"),
      ("listwise_per_pair", ["--model_dir=/m", "--objective=softmax", "--batching=pairs"], "batching"))
  def test_other_bad_flags_are_one_line_errors(self, argv, expected):
    code, stderr = _parse_error(argv)
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1, msg=stderr)
    self.assertIn(expected, stderr)


class EndToEndTest(tf.test.TestCase):

  def tearDown(self):
    pairwise_main.FLAGS.unparse_flags()
    super().tearDown()

  def _main(self, argv):
    pairwise_main.parse_flags(["pairwise-train", *argv])
    with contextlib.redirect_stdout(io.StringIO()) as out:
      pairwise_main.main([])
    pairwise_main.FLAGS.unparse_flags()
    return json.loads(out.getvalue())

  def test_train_then_evaluate_the_export_reproduces_test_metrics(self):
    model_dir = self.create_tempdir().full_path
    summary = self._main(["--mode=train", f"--model_dir={model_dir}", "--pivot=drug_name", "--topn=3", *_FAST])
    for name in ("config.json", "metrics.json", "summary.json", "export/pair_scorer", "export/list_scorer"):
      self.assertTrue(os.path.exists(os.path.join(model_dir, name)), msg=name)
    with open(os.path.join(model_dir, "metrics.json")) as f:
      trained = json.load(f)
    self.assertAllClose(summary["summary"]["ndcg@3"]["mean"], trained["test"]["ndcg@3"])
    evaluated = self._main(["--mode=evaluate", f"--model_dir={model_dir}"])
    for name in ("ndcg@3", "map@3", "pair_accuracy", "pair_accuracy_raw"):
      self.assertAllClose(evaluated[name], trained["test"][name], msg=name)

  def test_class_conversion(self):
    # One seed: seed folders and the mean ± std summary are covered by pairwise_train_test.summarize_seeds.
    model_dir = self.create_tempdir().full_path
    summary = self._main(["--mode=class_conversion", f"--model_dir={model_dir}", "--pivot=none", "--seeds=1",
                          "--export=false", *_FAST])
    self.assertEqual(summary["summary"]["ranking_converted_accuracy"]["n"], 1)
    with open(os.path.join(model_dir, "class_conversion.json")) as f:
      counts = json.load(f)["test_class_counts"]
    self.assertLen(set(counts), 1)  # balanced test set


if __name__ == "__main__":
  tf.test.main()
