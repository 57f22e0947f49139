"""Tests for the rank4class-train binary: flags to config, one-line flag errors, fault injection (kills at
every boundary of a run, Ctrl-C) and resume."""

import contextlib
import dataclasses
import importlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.modeling import encoders
from rank4class.training import train
from rank4class_cli import cli, launch
from rank4class_cli.binaries import convert_main, train_main
from rank4class_data import datasets
from rank4class_data.conversion import row_cache
from rank4class_engine.runs import run_directory
from tests.rank4class_cli.cli_runner import parse_error, parsed_config, run_binary
from tests.rank4class_data import elwc_lists
from tests.rank4class_engine import fault_injection

_REQUIRED = ["--dataset=digits", "--model_dir=/tmp/unused"]


def _parse_error(argv: list[str]) -> tuple[int, str]:
  """Runs the binary's flag parser; returns (exit code, stderr)."""
  return parse_error(train_main, argv)


class FlagsTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    train_main.FLAGS.unparse_flags()
    super().tearDown()

  def test_flags_map_onto_the_config(self):
    train_main.parse_flags(["prog", "--dataset=reuters_r8", "--text_mode=finetune", "--model_dir=/m",
                            "--interaction=concat", "--hidden_width=64", "--loss=gumbel_approx_ndcg",
                            "--gumbel_temperature=0.5", "--optimizer=adagrad", "--learning_rate=0.01",
                            "--batch_size=16", "--epochs=2", "--eval_every=50", "--seed=3", "--noexport",
                            "--preemption_grace_seconds=45"])
    config = train_main.config_from_flags(train_main.FLAGS)
    self.assertEqual(config.data.dataset, "reuters_r8")
    self.assertEqual(config.data.text_mode, "finetune")
    self.assertEqual(config.model.interaction.type, "concat")
    self.assertEqual(config.model.interaction.hidden_units, (64, 64))
    self.assertEqual(config.model.instance_encoder.mlp.hidden_units, (64,))
    self.assertEqual(config.model.loss.type, "gumbel_approx_ndcg")
    self.assertEqual(config.model.loss.gumbel_temperature, 0.5)
    self.assertEqual(config.optimizer.type, "adagrad")
    self.assertEqual(config.optimizer.learning_rate, 0.01)
    self.assertEqual((config.run.batch_size, config.run.train_steps, config.run.epochs), (16, None, 2.0))
    self.assertEqual((config.run.eval_every, config.run.seed, config.outputs.export), (50, 3, False))
    self.assertEqual(config.run.preemption_grace_seconds, 45.0)

  def test_tfidf_flags_reach_the_encoder_config(self):
    train_main.parse_flags(["prog", "--dataset=reuters_r8", "--text_mode=tfidf", "--model_dir=/m",
                            "--hidden_width=32",
                            "--tfidf_max_tokens=1000", "--tfidf_ngrams=1", "--tfidf_dropout=0.25",
                            "--tfidf_sublinear_tf"])
    config = train_main.config_from_flags(train_main.FLAGS)
    self.assertEqual((config.data.text_mode, config.model.instance_encoder.type), ("tfidf", "auto"))
    self.assertEqual(config.model.instance_encoder.tfidf, encoders.TfidfEncoderConfig(
        output_dim=32, max_tokens=1000, ngrams=1, sublinear_tf=True, dropout=0.25))

  def test_fine_tuning_defaults_to_the_bert_recipe_and_given_flags_win(self):
    train_main.parse_flags(["prog", "--dataset=reuters_r8", "--text_mode=finetune", "--model_dir=/m"])
    optimizer = train_main.config_from_flags(train_main.FLAGS).optimizer
    self.assertEqual(optimizer, train.OptimizerConfig(type="adamw", learning_rate=3e-5, weight_decay=0.01,
                                                      schedule="linear", warmup_fraction=0.1))
    train_main.FLAGS.unparse_flags()
    train_main.parse_flags(["prog", "--dataset=reuters_r8", "--text_mode=finetune", "--model_dir=/m",
                            "--learning_rate=5e-5", "--lr_schedule=constant"])
    optimizer = train_main.config_from_flags(train_main.FLAGS).optimizer
    self.assertEqual((optimizer.type, optimizer.learning_rate, optimizer.schedule, optimizer.warmup_fraction),
                     ("adamw", 5e-5, "constant", 0.1))
    train_main.FLAGS.unparse_flags()
    # Frozen: a head trains from scratch.
    train_main.parse_flags(["prog", "--dataset=reuters_r8", "--model_dir=/m"])
    self.assertEqual(train_main.config_from_flags(train_main.FLAGS).optimizer, train.OptimizerConfig())

  def test_rescaled_mse_arguments_reach_the_loss(self):
    train_main.parse_flags(["prog", *_REQUIRED, "--loss=rescaled_mse", "--mse_weight_k=15",
                            "--mse_scale_m=30"])
    loss = train_main.config_from_flags(train_main.FLAGS).model.loss
    self.assertEqual((loss.weight_k, loss.scale_m), (15.0, 30.0))

  def test_tfrecord_flags(self):
    train_main.parse_flags(["prog", "--train_files=/d/train-*", "--validation_files=/d/val",
                            "--model_dir=/m"])
    data = train_main.config_from_flags(train_main.FLAGS).data
    self.assertEqual((data.dataset, data.train_files, data.validation_files), (None, "/d/train-*", "/d/val"))

  def test_elwc_flags(self):
    train_main.parse_flags(["prog", "--train_files=/d/t.elwc", "--validation_files=/d/v.elwc",
                            "--model_dir=/m",
                            "--input_format=elwc", "--label_vocab=/d/classes.txt", "--label_key=utility",
                            "--class_id_key=label_id", "--feature_key=query", "--unlisted_classes=unjudged"])
    data = train_main.config_from_flags(train_main.FLAGS).data
    self.assertEqual((data.input_format, data.label_vocab, data.label_key, data.class_id_key,
                      data.feature_key, data.unlisted_classes),
                     ("elwc", "/d/classes.txt", "utility", "label_id", "query", "unjudged"))

  def test_class_sampler_flags(self):
    train_main.parse_flags(["prog", *_REQUIRED, "--class_sampler=log_uniform", "--num_sampled=15",
                            "--hard_negatives=4", "--hard_refresh_every=50", "--hard_refresh_rows=300",
                            "--shared_negatives"])
    sampling = train_main.config_from_flags(train_main.FLAGS).model.sampling
    self.assertEqual((sampling.sampler, sampling.num_sampled, sampling.hard_negatives,
                      sampling.hard_refresh_every, sampling.hard_refresh_rows, sampling.shared_negatives),
                     ("log_uniform", 15, 4, 50, 300, True))
    train_main.FLAGS.unparse_flags()
    train_main.parse_flags(["prog", *_REQUIRED])
    self.assertIsNone(train_main.config_from_flags(train_main.FLAGS).model.sampling.sampler)

  def test_row_flags(self):
    train_main.parse_flags(["prog", "--train_files=/d/t.txt", "--model_dir=/m", "--input_format=tsv",
                            "--text_column=review", "--label_column=rating", "--feature_columns=a,b",
                            "--bad_rows=skip", "--max_bad_rows=5"])
    data = train_main.config_from_flags(train_main.FLAGS).data
    self.assertEqual(data.input_format, "rows")  # A row format means rows of that format.
    self.assertEqual(data.rows, row_cache.RowConversion(input_format="tsv", text_column="review",
                                                        label_column="rating", feature_columns=("a", "b"),
                                                        bad_rows="skip", max_bad_rows=5))
    train_main.FLAGS.unparse_flags()
    train_main.parse_flags(["prog", "--train_files=/d/t.csv", "--model_dir=/m"])
    data = train_main.config_from_flags(train_main.FLAGS).data
    self.assertEqual((data.input_format, data.rows), ("auto", row_cache.RowConversion()))

  @parameterized.named_parameters(
      ("loss", ["--loss=foo"], "--loss=foo",
       "softmax, pairwise_logistic, approx_ndcg, gumbel_approx_ndcg, mse"),
      ("interaction", ["--interaction=bilinear"], "--interaction=bilinear", "dot, latent_cross, concat"),
      ("optimizer", ["--optimizer=sgd"], "--optimizer=sgd", "adam, adagrad, adamw"),
      ("text_mode", ["--text_mode=cached"], "--text_mode=cached", "frozen, finetune"),
      ("strategy", ["--strategy=tpu"], "--strategy=tpu", "auto, mirrored, multi_worker, one_device"),
  )
  def test_bad_choice_is_a_one_line_error_naming_the_flag_and_allowed_values(self, extra, flag, allowed):
    code, stderr = _parse_error([*_REQUIRED, *extra])
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1, msg=stderr)
    self.assertIn(flag, stderr)
    self.assertIn(allowed, stderr)

  def test_unknown_dataset_names_the_data_sets(self):
    code, stderr = _parse_error(["--dataset=mnist", "--model_dir=/m"])
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1)
    self.assertIn("--dataset=mnist", stderr)
    self.assertIn("reuters_r8, 20newsgroups, wordnet_hypernyms, wordnet_hypernyms_all, reuters_r52, "
                  "election_tweets, friends_speakers, drug_review_sentiment, fashion_mnist, digits", stderr)

  @parameterized.named_parameters(
      ("no_model_dir", ["--dataset=digits"], "--model_dir"),
      ("no_data", ["--model_dir=/m"], "--dataset"),
      ("steps_and_epochs", [*_REQUIRED, "--train_steps=5", "--epochs=1"], "--train_steps or --epochs"),
      ("unknown_flag", [*_REQUIRED, "--colour=red"], "colour"),
      ("bad_width", [*_REQUIRED, "--hidden_width=0"], "--hidden_width=0"),
      ("bad_tfidf_vocabulary", [*_REQUIRED, "--tfidf_max_tokens=1"], "--tfidf_max_tokens=1 must be >= 2"),
      ("negative_grace", [*_REQUIRED, "--preemption_grace_seconds=-1"],
       "--preemption_grace_seconds must be >= 0, got -1.0"),
      ("hard_without_sampler", [*_REQUIRED, "--hard_negatives=2"],
       "--hard_negatives=2 needs a --class_sampler"),
      ("in_batch_with_num_sampled", [*_REQUIRED, "--class_sampler=in_batch", "--num_sampled=10"],
       "--num_sampled=10 does not apply to --class_sampler=in_batch"),
  )
  def test_other_bad_flags_are_one_line_errors(self, argv, expected):
    code, stderr = _parse_error(argv)
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1, msg=stderr)
    self.assertIn(expected, stderr)

  def test_console_entry_point_exits_2_with_one_line(self):
    result = subprocess.run([sys.executable, "-m", "rank4class_cli.binaries.train_main",
                             "--loss=foo", *_REQUIRED],
                            capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    self.assertEqual(result.returncode, 2)
    error_lines = [line for line in result.stderr.splitlines() if "rank4class-train: error" in line]
    self.assertLen(error_lines, 1, msg=result.stderr)
    self.assertIn("--loss=foo", error_lines[0])


class BadInputTest(tf.test.TestCase):

  def test_elwc_with_another_label_key_is_one_line_naming_file_row_and_flag(self):
    root = self.create_tempdir().full_path
    lists = [elwc_lists.class_list([0.5, 1.0], [(1, 1.0), (0, 0.0)], label_key="utility")]
    train_file = elwc_lists.write(os.path.join(root, "train.elwc"), lists)
    vocab = self.create_tempfile("classes.txt", content="a\nb\n").full_path
    result = subprocess.run([sys.executable, "-m", "rank4class_cli.binaries.train_main",
                             "--input_format=elwc",
                             f"--train_files={train_file}", f"--validation_files={train_file}",
                             f"--label_vocab={vocab}", f"--model_dir={root}/run"],
                            capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    self.assertEqual(result.returncode, 1, msg=result.stderr[-2000:])
    self.assertNotIn("Traceback", result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("rank4class-train: error:")]
    self.assertEqual(errors, [
        f"rank4class-train: error: {train_file}, row 1, field 'label': example 1 has no 'label' (its "
        "features: {'class_id': 'int64_list', 'utility': 'float_list', 'writer_note': 'bytes_list'}); "
        "expected it in every example; name it with --label_key."], msg=result.stderr[-2000:])


class RowFilesTest(tf.test.TestCase):

  def test_trains_on_libsvm_rows_skipping_a_bad_row_and_says_where_everything_is(self):
    root = self.create_tempdir().full_path
    digits = datasets.load_image_classification("digits", "train")
    pixels = digits.images.reshape([len(digits.labels), -1]) / 16.0
    def write(name, rows):
      with open(os.path.join(root, name), "w") as f:
        f.writelines(f"{digits.labels[i]} " + " ".join(f"{j + 1}:{v:g}" for j, v in enumerate(pixels[i]) if v)
                     + "\n" for i in rows)
      return os.path.join(root, name)
    train_file = write("train.libsvm", range(600))
    with open(train_file, "a") as f:
      f.write("3 1:0.5 2:dark\n")  # A bad row: listed, left out.
    test_file = write("test.libsvm", range(600, 900))
    # The trained model is under test: no logistic-regression candidates, no baselines.
    unexamined = ["--nolinear_candidate", "--nobaselines"]
    result = subprocess.run([sys.executable, "-m", "rank4class_cli.binaries.train_main",
                             f"--train_files={train_file}",
                             f"--test_files={test_file}", "--bad_rows=skip", "--train_steps=150",
                             "--eval_every=50",
                             "--hidden_width=32", "--learning_rate=0.01", *unexamined,
                             f"--model_dir={root}/run"],
                            capture_output=True, text=True,
                            # Cache in root.
                            timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", HOME=root))
    self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
    self.assertIn(f"Rows (train): {train_file}: 600 rows, 10 classes (converted: "
                  f"{root}/.cache/rank4class/rows/", result.stderr)
    self.assertIn("; 1 bad row left out (listed in ", result.stderr)
    self.assertRegex(result.stderr, f"Rows \\(test\\): {re.escape(test_file)}: 300 rows, 10 classes "
                     "\\(converted: [^)]*\\)\\n")
    self.assertIn(
      "Validation split: 60 rows carved from the training data (10.0%; --validation_fraction=0.1, "
      "stratified by class",
      result.stderr,
    )  # 599 good rows.
    self.assertIn(f"Next: rank4class-predict --model_dir={root}/run ", result.stdout)
    top_1_error = float(result.stdout.split("top_1_error")[1].split()[0])  # x100
    self.assertLess(top_1_error, 20, msg=result.stdout)  # Chance: 90.
    # The same folder with another rate: refused in one line, the library's field named as the binary's flag.
    again = subprocess.run([sys.executable, "-m", "rank4class_cli.binaries.train_main",
                            f"--train_files={train_file}", f"--test_files={test_file}", "--bad_rows=skip",
                            "--train_steps=150", "--eval_every=50", "--hidden_width=32",
                            "--learning_rate=0.02", *unexamined,
                            f"--model_dir={root}/run"], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", HOME=root))
    self.assertEqual(again.returncode, 1, msg=again.stderr[-3000:])
    self.assertRegex(again.stderr.strip().splitlines()[-1], r"another config \(optimizer.learning_rate: 0.01 "
                     r"-> 0.02\).*or --overwrite_model_dir to start it afresh\.$")


# Six topics, three short texts each (the class names sort: food, health, music, space, sport, weather).
_TOPICS = {
    "sport": ["the team won the match", "a great goal in the football game", "the tennis player served"],
    "food": ["bake the bread in the oven", "a tasty soup with vegetables", "fresh pasta with tomato sauce"],
    "music": ["the band played a loud song", "a piano concert tonight", "she sang with the guitar"],
    "weather": ["heavy rain and strong wind", "sunny skies and warm air", "snow is falling in the mountains"],
    "space": ["the rocket launched into orbit", "astronauts on the space station",
              "a telescope saw a galaxy"],
    "health": ["the doctor treated the patient", "take the medicine twice a day",
               "exercise keeps the heart fit"],
}


class ClassTextsTest(tf.test.TestCase):
  """--class_texts: the metadata class encoder embeds the file's texts (frozen MiniLM), in class-id order."""

  def tearDown(self):
    train_main.FLAGS.unparse_flags()
    super().tearDown()

  def test_class_texts_flag_reaches_the_data_config(self):
    config = parsed_config(train_main, [*_REQUIRED, "--class_encoder=metadata", "--class_texts=/d/texts.csv"])
    self.assertEqual((config.data.class_texts, config.model.class_encoder.type), ("/d/texts.csv", "metadata"))
    # Filled in from the data (train.resolve_model_config).
    self.assertIsNone(config.model.class_encoder.metadata)
    self.assertIsNone(parsed_config(train_main, _REQUIRED).data.class_texts)

  def test_class_texts_alone_make_the_class_encoder_metadata(self):
    config = parsed_config(train_main, [*_REQUIRED, "--class_texts=/d/texts.csv"])
    self.assertEqual(config.model.class_encoder.type, "metadata")
    self.assertEqual(config.data.class_texts, "/d/texts.csv")

  def test_class_texts_with_another_class_encoder_is_a_one_line_error(self):
    code, stderr = _parse_error([*_REQUIRED, "--class_texts=/d/texts.csv", "--class_encoder=one_hot"])
    self.assertEqual(code, 2)
    self.assertEqual(stderr, "rank4class-train: error: --class_texts=/d/texts.csv needs "
                     "--class_encoder=metadata (the class encoder that embeds class texts), got "
                     "--class_encoder=one_hot\n")

  def test_model_dir_over_the_class_texts_is_refused(self):
    run = self.create_tempdir().full_path
    config = parsed_config(train_main, ["--dataset=digits", f"--model_dir={run}", "--class_encoder=metadata",
                                        f"--class_texts={run}/config.json"])
    with self.assertRaisesRegex(ValueError, "--model_dir and --class_texts name the same file"):
      train_main.check_outputs(config)

  def test_trains_on_the_class_texts_in_class_id_order_and_notes_classes_the_data_lacks(self):
    root = self.create_tempdir().full_path
    with open(os.path.join(root, "train.csv"), "w") as f:
      f.write("text,label\n"
              + "".join(f"{text},{topic}\n" for topic, texts in _TOPICS.items() for text in texts
                                       for _ in range(2)))
    # File order: not class-id order.
    described = {topic: f"news about {topic}" for topic in reversed(_TOPICS)}
    with open(os.path.join(root, "texts.csv"), "w") as f:
      f.write("class,text\n" + "".join(f"{topic},{text}\n" for topic, text in described.items())
              + "travel,trips and holidays\n")  # Not in the data: noted, not trained.
    # The trained class-text model is under test (its export is read below): no logistic-regression
    # candidates, which validation might keep instead, and no baselines.
    config = parsed_config(train_main, [
        f"--train_files={root}/train.csv", "--class_encoder=metadata", f"--class_texts={root}/texts.csv",
        f"--model_dir={root}/run", "--train_steps=20", "--eval_every=10", "--batch_size=8",
        "--hidden_width=16", "--learning_rate=0.01", "--validation_fraction=0.5", "--nolinear_candidate",
        "--nobaselines"])
    train_main.check_outputs(config)
    config = dataclasses.replace(config, tensorboard=False, data=dataclasses.replace(
        config.data, row_cache_dir=os.path.join(root, "rows"),
        embedding_cache_dir=os.path.join(root, "embeddings")))
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
      result = train.train(config)
    self.assertIn(f"Class texts: {root}/texts.csv lists 1 class the training data lacks ('travel'): noted, "
                  "not trained.\n", stderr.getvalue())
    model = tf.keras.models.load_model(result.export_dir)
    classes = sorted(_TOPICS)
    self.assertEqual(model.class_names, classes)
    self.assertEqual(model.class_encoder.class_texts, [described[name] for name in classes])
    # The class embeddings are those of the texts in id order; the default (cosine) towers keep MiniLM's 384
    # dimensions and unit length, and the instance tower the same.
    embeddings, _ = model.class_encoder(None)
    self.assertEqual(embeddings.shape, [6, 384])
    self.assertAllClose(tf.norm(embeddings, axis=1), tf.ones([6]), atol=1e-5)
    self.assertEqual((model.instance_encoder.get_config()["residual"],
                      model.interaction.get_config()["temperature"]),
                     (True, train.COSINE_TOWERS_TEMPERATURE))
    self.assertAllClose(embeddings,
                        model.class_encoder.encode_class_texts([described[name] for name in classes]),
                        atol=1e-5)
    self.assertLess(result.validation_metrics["top_1_error"], 0.5)  # Chance: 5/6.
    # The texts are part of the model: the run refuses to go on with an edited file (and returns its result
    # with the same one).
    self.assertEqual(train.train(config).best_step, result.best_step)
    with open(os.path.join(root, "texts.csv"), "a") as f:
      f.write("sport,games and matches\n")
    with self.assertRaisesRegex(run_directory.ConfigMismatchError, "class_texts_sha256"):
      train.train(config)


def _rows(path: str, count: int, seed: int, bad_row: bool = False) -> str:
  """A CSV of two features and a class (a when x > y, else b), with one bad row when asked."""
  xy = np.random.default_rng(seed).uniform(size=[count, 2])
  with open(path, "w") as f:
    f.write("x,y,cls\n" + "".join(f"{x:.3f},{y:.3f},{'a' if x > y else 'b'}\n" for x, y in xy))
    if bad_row:
      f.write("dark,0.5,a\n")
  return path


def _entry_points() -> dict[str, str]:
  """Console script -> the binary's module (its console script launches it: rank4class_cli.launch)."""
  return launch.PROGRAMS


class NextHintsRunTest(tf.test.TestCase):
  """Every "Next:" hint of rank4class-convert and rank4class-train runs as printed once its one placeholder is
  replaced: convert a training file -> train; convert a test file -> evaluate; train -> predict (on records,
  and on rows with the training run's row flags). In this process (a binary's flags parser, then its `main`,
  as its console script runs them) to spare four TensorFlow imports; `RowFilesTest` runs the console entry
  point."""

  def _hint(self, stdout: str) -> str:
    hints = [line.removeprefix("Next: ") for line in stdout.splitlines() if line.startswith("Next: ")]
    self.assertLen(hints, 1, msg=stdout)
    return hints[0]

  def _run_hint(self, hint: str, placeholder: str, value: str, cwd: str) -> str:
    """Runs the hint with its one placeholder replaced, as its console script would (the binary's module found
    from setup.py: its flags parser, then its `main`), in `cwd`; its stdout."""
    self.assertEqual(cli.PLACEHOLDER.findall(hint), [placeholder], msg=hint)
    words = shlex.split(hint.replace(placeholder, shlex.quote(value)))
    previous = os.getcwd()
    os.chdir(cwd)
    try:
      result = run_binary(importlib.import_module(_entry_points()[words[0]]), words[1:])
    finally:
      os.chdir(previous)
    self.assertEqual(result.code, 0, msg=f"{words}\n{result.stderr[-3000:]}")
    return result.stdout

  def test_hints_run_as_printed(self):
    root = self.create_tempdir().full_path
    train_rows = _rows(os.path.join(root, "train.csv"), 120, seed=0, bad_row=True)
    test_rows = _rows(os.path.join(root, "test.csv"), 40, seed=1, bad_row=True)
    row_flags = ["--feature_columns=x,y", "--label_column=cls", "--bad_rows=skip"]
    converted = run_binary(convert_main,
                           [f"--input={train_rows}", f"--output={root}/train.tfrecord", *row_flags])
    self.assertEqual(converted.code, 0, msg=converted.stderr)
    train_hint = self._hint(converted.stdout)
    self.assertStartsWith(train_hint, "rank4class-train ")
    converted = run_binary(convert_main,
                           [f"--input={test_rows}", f"--output={root}/test.tfrecord", *row_flags,
                                          f"--label_vocab={root}/train.labels.json"])
    self.assertEqual(converted.code, 0, msg=converted.stderr)
    evaluate_hint = self._hint(converted.stdout)  # A test split: evaluate a model, not train one.
    self.assertStartsWith(evaluate_hint, "rank4class-evaluate ")

    run_dir = os.path.join(root, "run")
    trained = self._run_hint(train_hint, "<run folder>", run_dir, root)
    predict_hint = self._hint(trained)
    self.assertRegex(trained, r"Trained 1000 steps in \d+\.\d s ")
    self.assertIn("top_1_error", self._run_hint(evaluate_hint, "<run folder>", run_dir, root))
    predicted = self._run_hint(predict_hint, "<rank4class-convert .tfrecord>", f"{root}/test.tfrecord", root)
    self.assertIn("Top-1 accuracy: ", predicted)
    self.assertIn("True label in the top 2: 100.00% of 40 labelled rows.", predicted)  # 2 classes: not top 5.

    # Trained on rows: the predict hint carries the columns and the bad-row policy (the hint is under test,
    # not the model: no logistic-regression candidates, no baselines).
    row_run = run_binary(train_main, [f"--train_files={train_rows}", *row_flags, "--train_steps=20",
                                      "--eval_every=10", "--verbose=0", "--nolinear_candidate",
                                      "--nobaselines", f"--model_dir={root}/row_run"])
    self.assertEqual(row_run.code, 0, msg=row_run.stderr[-3000:])
    predict_hint = self._hint(row_run.stdout)
    self.assertContainsSubset(row_flags, shlex.split(predict_hint))
    predicted = self._run_hint(predict_hint, "<rows>", test_rows, root)
    self.assertIn("of 40 labelled rows", predicted)
    self.assertIn("Rejected rows: 1 ", predicted)


class BusyModelDirTest(tf.test.TestCase):

  def test_second_run_on_a_locked_model_dir_exits_1_with_one_line(self):
    model_dir = self.create_tempdir().full_path
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom rank4class_engine.runs import run_lock\n"
         "run_lock.RunDirectoryLock(sys.argv[1]).acquire()\nprint('held', flush=True)\ntime.sleep(600)",
         model_dir], stdout=subprocess.PIPE, text=True, env=env)
    try:
      self.assertEqual(holder.stdout.readline().strip(), "held")
      result = subprocess.run([sys.executable, "-m", "rank4class_cli.binaries.train_main", "--dataset=digits",
                               f"--model_dir={model_dir}", "--train_steps=10", "--eval_every=10"],
                              capture_output=True, text=True, timeout=300, env=env)
    finally:
      holder.kill()
      holder.wait()
    self.assertEqual(result.returncode, 1, msg=result.stderr[-2000:])
    errors = [line for line in result.stderr.splitlines() if line.startswith("rank4class-train: error:")]
    self.assertLen(errors, 1, msg=result.stderr[-2000:])
    self.assertIn(f"{model_dir} is being written by another run (pid {holder.pid} on ", errors[0])
    self.assertNotIn("Traceback", result.stderr)
    self.assertFalse(os.path.exists(os.path.join(model_dir, train.CONFIG_FILE)))  # Nothing written.


def _temporaries(folder: str) -> list[str]:
  """Paths under `folder` that a writer leaves only while writing (atomic writes, TensorFlow checkpoints)."""
  found = []
  for root, dirs, files in os.walk(folder):
    for name in dirs + files:
      if name.endswith((".tmp", ".old")) or "_temp" in name or name == ".workers":
        found.append(os.path.relpath(os.path.join(root, name), folder))
  return found


def _result(model_dir: str) -> dict:
  with open(os.path.join(model_dir, train.RESULT_FILE)) as f:
    return json.load(f)


class FaultInjectionTest(tf.test.TestCase):
  """rank4class-train killed (SIGKILL) at every boundary of its run, or stopped by Ctrl-C or SIGTERM, then
  rerun: the result equals an uninterrupted run's, nothing temporary is left, and a stop prints one line."""

  FLAGS = ["--dataset=digits", "--train_steps=130", "--eval_every=40", "--checkpoint_every=20",
           "--hidden_width=8",
           "--cnn_filters=4", "--batch_size=16", "--learning_rate=0.01", "--steps_per_execution=5",
           "--verbose=0",
           "--nobaselines"]  # A finished run's baselines play no part in resuming (~4 s a process).

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.uninterrupted = os.path.join(cls.root, "uninterrupted")
    done = fault_injection.run_binary("rank4class_cli.binaries.train_main",
                                      [*cls.FLAGS, f"--model_dir={cls.uninterrupted}"])
    assert done.returncode == 0, done.stderr[-3000:]

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def _assert_equals_uninterrupted(self, model_dir: str) -> None:
    # Two processes may differ in the last bits (fault_injection.run_binary): numbers within a tolerance.
    resumed, uninterrupted = _result(model_dir), _result(self.uninterrupted)
    self.assertEqual((resumed["steps"], resumed["best_step"]), (130, uninterrupted["best_step"]))
    self.assertEqual([h["step"] for h in resumed["history"]], [40, 80, 120, 130])
    for got, want in zip(resumed["history"], uninterrupted["history"], strict=True):
      self.assertEqual(sorted(got), sorted(want))
      self.assertAllClose([got[k] for k in sorted(got)], [want[k] for k in sorted(want)],
                          rtol=1e-4, atol=1e-5)
    metrics = sorted(uninterrupted["test_report"]["metrics"])
    self.assertAllClose([resumed["test_report"]["metrics"][k] for k in metrics],
                        [uninterrupted["test_report"]["metrics"][k] for k in metrics], atol=5e-3)  # 2 of 450.
    self.assertEqual(_temporaries(model_dir), [])
    self.assertFalse(os.path.exists(os.path.join(model_dir, train.BACKUP_DIR)))  # Removed once finished.
    images = datasets.load_image_classification("digits", "test").images[:50]
    served = [tf.saved_model.load(os.path.join(d, train.EXPORT_DIR)).signatures["serving_default"](
        inputs=tf.constant(images))["scores"].numpy() for d in (model_dir, self.uninterrupted)]
    self.assertAllClose(served[0], served[1], rtol=1e-3, atol=1e-3)

  def _run_until(self, flags: list[str], fault: str, n: int, code: int, what: str | None = None,
                 step: int | None = None) -> None:
    """Runs the binary until `fault` stops it at its n-th occurrence; checks the exit status, that no result
    is written and, for a stop (`what`), its one line naming the step it resumes from."""
    model_dir = flags[-1].split("=", 1)[1]
    stopped = fault_injection.run_binary("rank4class_cli.binaries.train_main", flags, fault, n)
    self.assertEqual(stopped.returncode, code, msg=f"{fault}: {stopped.stderr[-3000:]}")
    self.assertFalse(os.path.exists(os.path.join(model_dir, train.RESULT_FILE)), fault)
    if what is not None:
      self.assertNotIn("Traceback", stopped.stderr)
      self.assertEqual(stopped.stderr.splitlines()[-1],
                       f"rank4class-train: {what}; stopped at step {step} of the run in {model_dir}; rerun "
                       f"the same command to resume from the checkpoint of step {step}.")
      self.assertIn(f"state-{step}.json", os.listdir(os.path.join(model_dir, train.BACKUP_DIR)))

  def test_stopped_and_killed_at_every_boundary_then_resumed_equals_an_uninterrupted_run(self):
    # One run directory, one process after another: each is stopped (Ctrl-C, SIGTERM) or killed (SIGKILL) at
    # its own boundary and the next resumes what the last left, so each stop's step also shows the step the
    # process before it left (the executions are 5 steps long; an epoch is 20 steps, a validation every 40).
    model_dir = os.path.join(self.create_tempdir().full_path, "run")
    flags = [*self.FLAGS, f"--model_dir={model_dir}"]
    # After the 12th execution (step 60): training stops there and checkpoints that step.
    self._run_until(flags, "sigint_in_training", 12, 130, "interrupted", 60)
    # Resumed at 60, after its 3rd execution: step 75, inside the epoch of steps 61-80, as a scheduler
    # preempting the run.
    self._run_until(flags, "sigterm_in_training", 3, 143, "terminated", 75)
    # Inside the validation of step 80: it completes, is recorded and checkpointed with its step.
    self._run_until(flags, "sigterm_during_validation", 1, 143, "terminated", 80)
    # Resumed at 80: killed inside the validation of step 120 (metrics computed, nothing recorded), then
    # inside the writing of its best weights (resumed at step 100's checkpoint), then just after step 120's
    # checkpoint is committed.
    for fault in ("during_validation", "during_best_weights", "after_checkpoint"):
      self._run_until(flags, fault, 1, -signal.SIGKILL)
    # Training is over and its checkpoint written; outside the training loop SIGTERM ends the process at once.
    self._run_until(flags, "sigterm_during_export", 1, -signal.SIGTERM)
    # Staged aside, never in place.
    self.assertFalse(os.path.exists(os.path.join(model_dir, train.EXPORT_DIR)))
    self.assertLen([p for p in _temporaries(model_dir) if p.startswith(".export.")], 1)
    for fault in ("during_export", "before_result"):  # The export half written; the export in place.
      self._run_until(flags, fault, 1, -signal.SIGKILL)
    resumed = fault_injection.run_binary("rank4class_cli.binaries.train_main", flags)
    self.assertEqual(resumed.returncode, 0, msg=resumed.stderr[-3000:])
    self.assertEqual(_result(model_dir)["resumed_from_step"], 130)  # Not trained again: exported and tested.
    # The step each process resumed from: the one killed writing best weights left no checkpoint after its
    # start, and the processes resumed at 130 leave one.
    self.assertEqual(fault_injection.train_begin_steps(os.path.join(model_dir, run_directory.PROGRESS_FILE)),
                     [0, 60, 75, 80, 100, 120, 130])
    self._assert_equals_uninterrupted(model_dir)

if __name__ == "__main__":
  tf.test.main()
