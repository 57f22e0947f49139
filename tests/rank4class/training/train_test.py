"""Tests for rank4class.training.train: what validation computes, the run's notes, training outputs, model
selection, resumption, model reuse, replicas and workers, and the printed result."""

import dataclasses
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.evaluation import evaluate
from rank4class.inference import served
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class.training import model_choice, model_setup, train, training_data
from rank4class_cli.binaries import train_main
from rank4class_data import datasets
from rank4class_data.conversion import row_cache
from rank4class_data.records import tfrecords
from rank4class_encoders import bert_conversion, text_encoder
from rank4class_engine.loop import model_reuse
from rank4class_engine.optimization import losses
from rank4class_engine.runs import run_directory
from tests.rank4class import digits_config
from tests.rank4class.training import short_linear_path
from tests.rank4class_data import elwc_lists

_digits_config = digits_config.digits_config


_REVIEWS = ["good film", "very good film", "good plot", "bad film", "very bad plot", "bad plot"] * 2


def _write_review_records(root: str) -> tuple[str, str]:
  """Train and validation TFRecords of `_REVIEWS` (negative: the texts with "bad"), with their vocabulary."""
  schema = tfrecords.ExampleSchema(text_key="text", num_classes=2)
  paths = []
  for name in ("train", "val"):
    paths.append(os.path.join(root, f"{name}.tfrecord"))
    tfrecords.write_instances(paths[-1], [
        tfrecords.ClassificationInstance(label=int("bad" in t), text=t) for t in _REVIEWS], schema)
  with open(os.path.join(root, "train.labels.json"), "w") as f:
    json.dump({"classes": ["positive", "negative"], "schema": schema.to_dict()}, f)
  return paths[0], paths[1]


class ValidationAndNotesTest(tf.test.TestCase, parameterized.TestCase):
  """What validation computes and the lines the run writes before its loop."""

  @parameterized.named_parameters(
      # (loss, classes, validation_loss, tensorboard, best_metric) -> computed, words of the line.
      ("softmax_read_by_tensorboard", "softmax", 1100, "auto", True, "ndcg_5", True, "and the softmax loss"),
      ("pairs_at_many_classes", "pairwise_logistic", 1100, "auto", True, "ndcg_5", False, "O(C^2) memory"),
      ("approx_ndcg_at_few_classes", "approx_ndcg", 256, "auto", True, "ndcg_5", True,
       "and the approx_ndcg loss"),
      ("nothing_reads_it", "softmax", 10, "auto", False, "ndcg_5", False, "nothing reads it"),
      ("asked_for", "gumbel_approx_ndcg", 1100, "on", False, "ndcg_5", True,
       "and the gumbel_approx_ndcg loss"),
      ("best_metric_loss", "approx_ndcg", 1100, "auto", False, "loss", True, "and the approx_ndcg loss"),
      ("off", "softmax", 10, "off", True, "ndcg_5", False, "`run.validation_loss`=off"),
      ("chunked", "softmax", 5000, "auto", True, "ndcg_5", False, "exact ranks, chunk by chunk"),
  )
  def test_validation_says_what_it_computes(self, loss, classes, validation_loss, tensorboard, best_metric,
                                           computed, words):
    config = _digits_config("/m", validation_loss=validation_loss, tensorboard=tensorboard,
                            best_metric=best_metric,
                            model=model_lib.Rank4ClassConfig(loss=losses.LossConfig(type=loss)))
    with_loss, line = train.validation_loss_note(config.run, config.model.loss.type, classes)
    self.assertEqual(with_loss, computed, msg=line)
    self.assertIn(words, line)
    self.assertTrue(line.startswith(f"Validation: top-K error, NDCG@K and MRR over all {classes:,} classes"))

  def test_data_notes_name_the_validation_split_and_what_fine_tuning_costs(self):
    split = training_data.ArraySplit(np.zeros([4], object), np.zeros([4], np.int64))
    text = training_data.PreparedData(["a"], training_data.TEXT_INPUT, split, split, None, ("/p", "/e"),
                                      validation_note="4 rows of v.csv")
    # 1000 steps of 32 examples at 34 examples/s: 941 s.
    self.assertEqual(train._data_notes(text, 32_000).splitlines(), [
        "Validation split: 4 rows of v.csv.",
        "Text mode finetune: the whole text encoder runs forward and backward on every example; on 2 CPU "
        "cores about 34 examples/s, so ~16 min for 32,000 examples (a GPU is far faster). "
        "`data.text_mode`=frozen embeds each text once."])
    self.assertEqual(train._data_notes(dataclasses.replace(text, input_kind=training_data.EMBEDDING_INPUT,
                                                           validation_note=None), 32_000), "")
    # TF-IDF text (raw strings, no MiniLM handles) costs no fine-tuning.
    self.assertEqual(train._data_notes(dataclasses.replace(text, text_handles=None, validation_note=None),
                                       32_000), "")
    # A head's learning rate on a pre-trained encoder is named; the recipe's is not.
    warning = train._data_notes(text, 32_000, learning_rate=1e-3).splitlines()[-1]
    self.assertEqual(warning, "WARNING: learning rate 0.001 fine-tunes a pre-trained encoder; above 0.0001 "
                     "its weights are usually wrecked (2e-5..5e-5 is the usual range; rank4class-train's "
                     "default for `data.text_mode`=finetune is 3e-05 with AdamW, 10% warmup "
                     "and linear decay).")
    self.assertNotIn("WARNING", train._data_notes(text, 32_000, learning_rate=3e-5))

  def test_many_classes_validate_by_exact_chunked_ranks_without_a_loss(self):
    num_classes = train.CHUNKED_VALIDATION_CLASSES
    rng = np.random.default_rng(0)
    split = training_data.ArraySplit(rng.normal(size=[40, 4]).astype(np.float32),
                                     rng.integers(0, num_classes, 40).astype(np.int64))
    data = training_data.PreparedData([str(i) for i in range(num_classes)], training_data.DENSE_INPUT, split,
                                      split, None)
    model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)),
                                      class_encoders.get("one_hot", num_classes=num_classes),
                                      interactions.get("dot"))
    model(split.features[:1])
    # Over all classes its loss would be O(C^2) per instance.
    model.compile("adam", losses.get("approx_ndcg"))
    validate = train.make_validate_fn(None, model, data, (1, 5), 16, with_loss=True)
    metrics = validate(model)
    scores = model(split.features).numpy()
    true = scores[np.arange(40), split.labels]
    ranks = (scores > true[:, None]).sum(axis=1)
    self.assertNotIn("loss", metrics)
    self.assertAllClose(metrics["mrr"], np.mean(1 / (ranks + 1)), atol=1e-6)
    self.assertAllClose(metrics["top_5_error"], np.mean(ranks >= 5))


class TrainTest(tf.test.TestCase):
  """One short digits run, shared by the tests below (training is the expensive part)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.config = _digits_config(os.path.join(cls.root, "run"), tensorboard=True, export=True, baselines=True,
                                calibrate=True)
    cls.result = train.train(cls.config)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def test_trains_the_requested_steps_and_beats_chance(self):
    self.assertEqual(self.result.steps, 60)
    self.assertEqual(self.result.resumed_from_step, 0)
    self.assertLess(self.result.test_report["metrics"]["top_1_error"], 0.3)  # Chance: 0.9.
    self.assertEqual(self.result.test_report["n"], 450)

  def test_best_model_is_chosen_on_validation(self):
    values = [h["val_ndcg_5"] for h in self.result.history]
    self.assertLen(values, 3)
    self.assertAllClose(self.result.best_value, max(values))
    self.assertEqual(self.result.best_step, 20 * (int(np.argmax(values)) + 1))
    self.assertAllClose(self.result.validation_metrics["ndcg_5"], max(values))

  def test_writes_config_progress_logs_and_export(self):
    model_dir = self.config.model_dir
    self.assertEqual(train.load_config(model_dir), self.config)
    with open(os.path.join(model_dir, train.PROGRESS_FILE)) as f:
      events = [json.loads(line)["event"] for line in f]
    self.assertEqual(events, ["train_begin", "eval", "eval", "eval", "train_end"])
    self.assertNotEmpty(tf.io.gfile.glob(os.path.join(model_dir, "logs", "validation", "events.*")))
    self.assertTrue(os.path.exists(os.path.join(model_dir, train.TEST_REPORT_FILE)))
    reloaded = tf.keras.models.load_model(self.result.export_dir, compile=False)
    self.assertEqual(reloaded.class_names, [str(i) for i in range(10)])

  def test_export_serving_signature_takes_raw_uint8_images(self):
    serve = tf.saved_model.load(self.result.export_dir).signatures["serving_default"]
    images = datasets.load_image_classification("digits", "test").images[:3]
    outputs = serve(inputs=tf.constant(images))
    self.assertEqual(outputs["class_names"].shape, (3, 5))

  def test_calibration_is_fitted_on_validation_evaluated_on_test_and_exported(self):
    summary = self.result.calibration
    self.assertGreater(summary["n"], 50)
    self.assertFalse(summary["temperature_at_bound"])
    test = summary["test"]
    self.assertEqual((test["n"], test["coverage"]), (450, 0.9))
    self.assertGreater(test["set_coverage"], 0.8)
    self.assertIsNone(test["coverage_warning"])  # Digits' test rows are a random split: the sets hold.
    exported = served.read_calibration(self.result.export_dir)
    self.assertAllClose(exported.temperature, summary["temperature"])
    self.assertEqual(exported.n, summary["n"])
    out = io.StringIO()
    train_main.print_result(self.result, self.config, out)
    self.assertIn(f"Calibration (validation, {summary['n']:,} rows): temperature", out.getvalue())

  def test_the_baselines_notes_name_the_flags_of_the_binary(self):
    note = "not computed for raw-text models (`text_mode`=frozen embeds the texts)"
    baselines = dict(self.result.baselines, notes=[note])
    out = io.StringIO()
    train_main.print_result(dataclasses.replace(self.result, baselines=baselines), self.config, out)
    self.assertIn("  note: not computed for raw-text models (--text_mode=frozen embeds", out.getvalue())

  def test_finished_run_is_returned_without_training_again(self):
    again = train.train(self.config)
    self.assertEqual(again.seconds, self.result.seconds)
    self.assertEqual(again.best_value, self.result.best_value)

  def test_each_phase_is_timed_apart_and_printed_on_its_own_line(self):
    phases = self.result.phase_seconds
    self.assertCountEqual(phases, ["data", "embedding", "loop", "calibration", "export", "test", "baselines"])
    self.assertEqual(phases["embedding"], 0.0)  # Images: nothing embedded.
    self.assertGreater(phases["loop"], 0.0)
    self.assertLessEqual(sum(phases.values()), self.result.seconds)  # Each phase apart, none counted twice.
    out = io.StringIO()
    train_main.print_result(self.result, self.config, out)
    lines = out.getvalue().splitlines()
    self.assertRegex(lines[0], r"^Read the data in \d+\.\d s\.$")
    # The loop alone.
    self.assertEqual(lines[1].split(" (")[0], f"Trained 60 steps in {phases['loop']:.1f} s")
    self.assertEqual(lines[2],
                     f"Exported the best model to {self.result.export_dir} in {phases['export']:.1f} s.")
    self.assertEqual(lines[3], f"Next: rank4class-predict --model_dir={self.config.model_dir} "
                     "--input=<image folder> --output=predictions.csv")  # An image model reads images.
    self.assertEqual(lines[4], f"Test split (evaluated in {phases['test']:.1f} s):")

  def test_baselines_are_reported_beside_the_model_on_the_test_split(self):
    report = self.result.baselines
    self.assertEqual((report["split"], report["n"]), ("test", 450))
    rows = {row["name"]: row["metrics"]["top_1_error"] for row in report["rows"]}
    self.assertCountEqual(rows, ["majority", "pixels_lr"])
    self.assertGreater(rows["majority"], 0.85)  # Balanced digits: one class of ten.
    self.assertLess(rows["pixels_lr"], 0.1)  # LR on 8 x 8 pixels is a strong digits baseline.
    model = self.result.test_report["metrics"]["top_1_error"]
    out = io.StringIO()
    train_main.print_result(self.result, self.config, out)
    self.assertIn(f"Model top-1 error {100 * model:.2f} vs best baseline (LR on pixels) "
                  f"{100 * rows['pixels_lr']:.2f}",
                  out.getvalue())
    with open(os.path.join(self.config.model_dir, train.RESULT_FILE)) as f:
      self.assertEqual(json.load(f)["baselines"]["rows"][1]["name"], "pixels_lr")

  def test_auto_text_precision_is_recorded_as_this_machines_choice_where_texts_are_embedded(self):
    text = dataclasses.replace(self.config, data=training_data.DataConfig(dataset="reuters_r8"))
    self.assertEqual(text.data.text_precision, "auto")  # The default.
    for cpu, recorded in ((False, "float32"), (True, "bfloat16")):
      with mock.patch.object(text_encoder, "cpu_has_bfloat16", return_value=cpu), \
          mock.patch.object(tf.config, "list_physical_devices", return_value=[]):
        self.assertEqual(train._with_recorded_inputs(text).data.text_precision, recorded)
    # An image set embeds no text: "auto" stays, and its finished run is returned on any machine.
    self.assertEqual(self.config.data.text_precision, "auto")
    for cpu in (False, True):
      with mock.patch.object(text_encoder, "cpu_has_bfloat16", return_value=cpu), \
          mock.patch.object(tf.config, "list_physical_devices", return_value=[]):
        self.assertEqual(train._with_recorded_inputs(self.config), self.config)
        self.assertEqual(train.train(self.config).steps, 60)

  def test_other_config_in_the_same_model_dir_raises(self):
    with self.assertRaisesRegex(run_directory.ConfigMismatchError,
                                r"another config \(optimizer.learning_rate: 0.01 -> "
                                r"0.1\).*or `overwrite` to start it afresh"):
      train.train(dataclasses.replace(self.config, optimizer=train.OptimizerConfig(learning_rate=0.1)))


def _digits_as_features() -> training_data.PreparedData:
  """scikit-learn's 8 x 8 digits as 64 dense features (the model's own inputs: LR on them is a baseline)."""
  from sklearn import datasets as sklearn_datasets
  digits = sklearn_datasets.load_digits()
  x, y = digits.data.astype(np.float32), digits.target.astype(np.int64)
  order = np.random.default_rng(0).permutation(len(y))
  train_rows, validation_rows, test_rows = order[:900], order[900:1200], order[1200:]
  return training_data.PreparedData([str(i) for i in range(10)], training_data.DENSE_INPUT,
                                    training_data.ArraySplit(x[train_rows], y[train_rows]),
                                    training_data.ArraySplit(x[validation_rows], y[validation_rows]),
                                    training_data.ArraySplit(x[test_rows], y[test_rows]))


class LinearCandidateTest(tf.test.TestCase):
  """The trained model against the logistic regression of its own inputs, chosen on validation."""

  def _run(
    self, model_dir: str, steps: int, learning_rate: float, **overrides
  ) -> train.Rank4ClassTrainResult:
    config = _digits_config(model_dir, data=training_data.DataConfig(dataset="digits"),
                            model=model_lib.Rank4ClassConfig(
                                instance_encoder=encoders.InstanceEncoderConfig(
                                    type="mlp", mlp=encoders.MlpEncoderConfig((32,))),
                                interaction=interactions.InteractionConfig(type="dot"),
                                loss=losses.LossConfig(type="softmax")),
                            optimizer=dataclasses.replace(_digits_config("/x").optimizer,
                                                          learning_rate=learning_rate),
                            train_steps=steps, eval_every=min(steps, 20), checkpoint_every=min(steps, 20),
                            baselines=True, export=True, **overrides)
    return train.train(config, _digits_as_features())

  def test_an_undertrained_model_gives_way_to_the_logistic_regression_at_least_as_good_as_the_baseline(self):
    root = self.create_tempdir().full_path
    # One step at a tiny rate: the trained model is near chance, the LR of the 64 features is not.
    result = self._run(os.path.join(root, "run"), steps=1, learning_rate=1e-6)
    choice = result.choice
    self.assertEqual(choice["chosen"], train.LINEAR_CHOICE)
    self.assertCountEqual(choice["values"], [train.TRAINED_CHOICE, train.LINEAR_CHOICE])
    # ndcg_5.
    self.assertGreater(choice["values"][train.LINEAR_CHOICE], choice["values"][train.TRAINED_CHOICE])
    # The exported model's.
    self.assertEqual(result.validation_metrics, choice["metrics"][train.LINEAR_CHOICE])
    fit = choice["fits"][train.LINEAR_CHOICE]
    self.assertIn(fit["inverse_regularization"], (0.01, 0.1, 1.0, 10.0, 100.0))
    self.assertTrue(fit["converged"])
    self.assertEqual(choice["rule"], "one standard error")
    self.assertEqual(choice["rows"], 300)
    # The engine's regression (C on a path, chosen on validation) is at least as good on test as
    # scikit-learn's default one, the baseline printed beside it.
    baseline = next(row for row in result.baselines["rows"] if row["name"] == "features_lr")
    self.assertLessEqual(result.test_report["metrics"]["top_1_error"],
                         baseline["metrics"]["top_1_error"] + 3 / 597, msg=f"{fit} {baseline}")
    self.assertLess(result.test_report["metrics"]["top_1_error"], 0.1)  # Chance: 0.9.
    # The export is the logistic regression, and it serves alone.
    data = _digits_as_features()
    loaded = tf.keras.models.load_model(result.export_dir)
    scores = loaded(data.test.features, training=False)
    scores = scores["scores"] if isinstance(scores, dict) else scores
    top_1_error = np.mean(np.argmax(np.asarray(scores), axis=1) != data.test.labels)
    self.assertAllClose(top_1_error, result.test_report["metrics"]["top_1_error"], atol=1e-6)
    out = io.StringIO()
    train_main.print_result(result, None, out)
    self.assertIn("Chosen on validation (ndcg_5, higher is better; 300 rows, the trained model kept only "
                  "when better beyond one standard error): the logistic regression of the model's inputs "
                  f"(C={fit['inverse_regularization']:g} by validation log-loss", out.getvalue())
    # Its duality gap's bound is said exactly when it does not certify the head within 5 %.
    self.assertEqual("below its objective (duality gap)" in out.getvalue(), not fit["certified"], fit)

  def test_a_trained_model_better_on_validation_is_kept_and_nothing_is_chosen_when_turned_off(self):
    root = self.create_tempdir().full_path
    # The rule's bookkeeping is under test, not the regression's optimum (the test above): a shorter path.
    with short_linear_path.short_linear_path():
      result = self._run(os.path.join(root, "run"), steps=200, learning_rate=3e-3)
    choice = result.choice
    # Its path is ShortPathConfig's: 30 steps, each of all 900 training rows.
    fit = choice["fits"][train.LINEAR_CHOICE]
    self.assertEqual((fit["steps"], fit["batch_size"]), (30, 900))
    # The best per-row mean, or a simpler model within one standard error of it.
    best = choice["per_row_means"][choice["best"]]
    self.assertLessEqual(choice["per_row_means"][choice["chosen"]],
                         best + choice["standard_errors"][choice["chosen"]] + 1e-12)
    if choice["chosen"] != choice["best"]:
      self.assertEqual(choice["chosen"], train.LINEAR_CHOICE)  # The simpler one.
    if result.choice["chosen"] == train.TRAINED_CHOICE:
      self.assertEqual(result.validation_metrics[result.best_metric], result.best_value)
    off = self._run(os.path.join(root, "off"), steps=1, learning_rate=1e-6, linear_candidate=False)
    self.assertIsNone(off.choice)
    self.assertGreater(off.test_report["metrics"]["top_1_error"], 0.5)  # The untrained model, kept.


class ModelPoolTest(tf.test.TestCase):
  """Runs that share a traced model (the study's runs of a cell) give the numbers of runs that do not."""

  def test_a_run_on_a_pooled_model_gives_the_numbers_of_a_fresh_run(self):
    data = training_data.prepare_data(training_data.DataConfig(dataset="digits"))
    root = self.create_tempdir().full_path
    config = _digits_config(root, train_steps=40, checkpoint_every=0, steps_per_execution=20, export=False,
                            tensorboard=False)
    run = lambda name, seed, lr, models=None: train.train(dataclasses.replace(  # noqa: E731
        config, model_dir=os.path.join(root, name), seed=seed,
        optimizer=train.OptimizerConfig(learning_rate=lr)),
        data, models=models)
    pool = model_reuse.ModelPool()
    first = run("pooled-0", 0, 1e-2, pool)
    pooled = run("pooled-1", 1, 3e-3, pool)
    self.assertEqual(pool.reused_runs, 1)
    fresh = run("fresh-1", 1, 3e-3)
    self.assertLen(pooled.history, 2)
    for got, want in zip(pooled.history, fresh.history, strict=True):
      self.assertCountEqual(got, want)
      for name in want:
        self.assertAllClose(got[name], want[name], atol=1e-6, msg=name)
    for name, value in fresh.test_report["metrics"].items():
      self.assertAllClose(pooled.test_report["metrics"][name], value, atol=1e-6, msg=name)
    self.assertNotAllClose(first.history[-1]["loss"], pooled.history[-1]["loss"])  # Another seed and rate.
    self.assertLess(pooled.test_report["metrics"]["top_1_error"], 0.5)  # Chance: 0.9.


class PredictHintTest(tf.test.TestCase):
  """The `rank4class-predict` command printed after training carries what reading the same rows needs."""

  def _hint(self, input_kind: str, train_files: str | None, **rows) -> str:
    data = training_data.DataConfig(dataset=None if train_files else "digits", train_files=train_files,
                                    rows=row_cache.RowConversion(**rows),
                                    input_format="rows" if "input_format" in rows else "auto")
    config = dataclasses.replace(_digits_config("/runs/my run"), data=data)
    result = train.Rank4ClassTrainResult(model_dir="/runs/my run", export_dir="/runs/my run/export", steps=1,
                               resumed_from_step=0, best_metric="ndcg_5", best_step=1, best_value=1.0,
                               validation_metrics={}, test_report=None, history=[], seconds=1.0,
                               input_kind=input_kind)
    return train_main.predict_hint(result, config)

  def test_rows_carry_columns_format_and_bad_row_policy(self):
    self.assertEqual(
        self._hint(training_data.DENSE_INPUT, "/d/train.txt", input_format="tsv", feature_columns=("x", "y"),
                   label_column="cls", bad_rows="skip", max_bad_rows=3),
        "Next: rank4class-predict --model_dir='/runs/my run' --input=<rows> --feature_columns=x,y "
        "--input_format=tsv --label_column=cls --bad_rows=skip --max_bad_rows=3 --output=predictions.csv")
    self.assertEqual(self._hint(training_data.EMBEDDING_INPUT, "/d/reviews.csv", text_column="review"),
                     "Next: rank4class-predict --model_dir='/runs/my run' --input=<rows> "
                     "--text_column=review --output=predictions.csv")

  def test_other_inputs_name_what_the_model_reads(self):
    self.assertIn("--input=<texts or rows> ", self._hint(training_data.EMBEDDING_INPUT, None))
    self.assertIn("--input=<image folder> ", self._hint(training_data.IMAGE_INPUT, None))
    self.assertIn("--input=<rank4class-convert .tfrecord> ",
                  self._hint(training_data.DENSE_INPUT, "/d/t.libsvm"))


class TextTest(tf.test.TestCase):
  """The text paths with a tiny random BERT in the MiniLM format (the real MiniLM is exercised by the
  study)."""

  VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "plot", "very"]

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    handles = bert_conversion.export_random_bert(os.path.join(cls.root, "bert"), cls.VOCAB, hidden_size=8,
                                                num_layers=1, num_heads=2, intermediate_size=8)
    cls.handles = [handles.preprocess, handles.encoder]

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def test_fine_tuning_on_text_records_trains_the_encoder_and_exports_a_string_model(self):
    train_files, validation_files = _write_review_records(self.root)
    config = _digits_config(
        os.path.join(self.root, "run"), train_steps=24, eval_every=12, batch_size=6, checkpoint_every=0,
        data=training_data.DataConfig(train_files=train_files, validation_files=validation_files,
                                      text_encoder_handles=self.handles, max_seq_length=8,
                                      text_mode="finetune"),
        optimizer=train.OptimizerConfig(learning_rate=3e-2), tensorboard=False, evaluate_test=False,
        best_metric="loss")  # Selecting on the loss makes the validation compute it.
    result = train.train(config)
    self.assertEqual(result.steps, 24)
    # Below chance's log(2): it learned (0.002-0.18 over 5 seeds; after 12 steps it was 0.28-0.60).
    self.assertLess(result.validation_metrics["loss"], 0.69)
    self.assertEqual(train.load_config(config.model_dir).model.instance_encoder.type, "auto")  # As given.
    serve = tf.saved_model.load(result.export_dir).signatures["serving_default"]
    outputs = serve(inputs=tf.constant(["very good film", "bad plot"]))
    self.assertEqual([sorted(row) for row in outputs["class_names"].numpy().tolist()],
                     [[b"negative", b"positive"]] * 2)  # Raw strings in, both classes ranked.

  def test_auto_text_mode_trains_the_frozen_model_and_keeps_the_tfidf_regression_when_it_validates_best(self):
    train_files, validation_files = _write_review_records(self.root)
    config = _digits_config(
        os.path.join(self.root, "auto"), train_steps=1, eval_every=1, batch_size=6, checkpoint_every=0,
        data=training_data.DataConfig(train_files=train_files, validation_files=validation_files,
                                      text_encoder_handles=self.handles, max_seq_length=8, text_mode="auto"),
        model=model_lib.Rank4ClassConfig(interaction=interactions.InteractionConfig(type="dot"),
                                         loss=losses.LossConfig(type="softmax")),
        optimizer=train.OptimizerConfig(learning_rate=1e-6), tensorboard=False, evaluate_test=False,
        best_metric="mrr")
    applies = model_setup.logistic_regression_applies
    # The regression of the embeddings alone is left out: the tiny BERT's mean of "bad" separates these
    # reviews as well as TF-IDF does, and a tie keeps the simpler candidate.
    with mock.patch.object(model_choice, "logistic_regression_applies", side_effect=lambda model, data: (
        applies(model, data) if data.input_kind == training_data.TEXT_AND_EMBEDDING_INPUT else ["left out"])):
      result = train.train(config)
    # One step at a tiny rate leaves the frozen model at chance; "bad" alone separates the classes.
    values = result.choice["values"]
    self.assertCountEqual(values, [train.TRAINED_CHOICE, train.TFIDF_LINEAR_CHOICE])
    self.assertEqual(result.choice["chosen"], train.TFIDF_LINEAR_CHOICE)
    self.assertEqual(values[train.TFIDF_LINEAR_CHOICE], 1.0)  # Every validation review ranked right.
    self.assertLess(values[train.TRAINED_CHOICE], 1.0)
    self.assertEqual(result.input_kind, training_data.TEXT_AND_EMBEDDING_INPUT)
    self.assertEqual(train.load_config(config.model_dir).data.text_mode, "auto")
    # The export reads raw strings (TF-IDF and the frozen encoder in its graph) and ranks as validated.
    serve = tf.saved_model.load(result.export_dir).signatures["serving_default"]
    outputs = serve(inputs=tf.constant(["very good film", "bad plot"]))
    self.assertEqual([row[0] for row in outputs["class_names"].numpy().tolist()], [b"positive", b"negative"])
    # And as a plain Keras model in another process's way: load_model after `import rank4class`.
    loaded = tf.keras.models.load_model(result.export_dir)
    self.assertAllEqual(np.argmax(loaded(tf.constant(["very good film", "bad plot"])), axis=1), [0, 1])


class TfidfTrainTest(tf.test.TestCase, parameterized.TestCase):
  """--text_mode=tfidf end to end: TF-IDF in the graph, its vocabulary learned on the training texts, the
  export scoring raw strings (Keras model and serving signature alike)."""

  @parameterized.parameters("dot", "latent_cross")
  def test_trains_on_raw_text_and_the_reloaded_export_scores_raw_strings_the_same(self, interaction):
    root = self.create_tempdir().full_path
    train_files, validation_files = _write_review_records(root)
    config = _digits_config(
        os.path.join(root, "run"), train_steps=16, eval_every=16, batch_size=6, checkpoint_every=0,
        data=training_data.DataConfig(train_files=train_files, validation_files=validation_files,
                                      text_mode="tfidf"),
        model=model_lib.Rank4ClassConfig(
            instance_encoder=encoders.InstanceEncoderConfig(type="auto", tfidf=encoders.TfidfEncoderConfig(
                output_dim=8)),
            interaction=interactions.InteractionConfig(type=interaction, hidden_units=(8, 8)),
            loss=losses.LossConfig(type="softmax")),
        optimizer=train.OptimizerConfig(learning_rate=5e-2), tensorboard=False, evaluate_test=False,
        best_metric="loss")
    result = train.train(config)
    # Below chance's log(2): it learned.
    self.assertLess(result.validation_metrics["loss"], 0.69)
    # Not in JSON.
    self.assertIsNone(train.load_config(config.model_dir).model.instance_encoder.tfidf.vocabulary)
    texts = ["very good film", "bad plot", "unseen words"]
    loaded = tf.keras.models.load_model(result.export_dir)
    self.assertIsInstance(loaded.instance_encoder, encoders.TfidfEncoder)
    self.assertCountEqual(loaded.instance_encoder.vocabulary,
                          ["[UNK]", *{w for t in _REVIEWS for w in t.split()},
                           *{" ".join(p) for t in _REVIEWS for p in zip(t.split(), t.split()[1:],
                                                                        strict=False)}])
    scores = loaded(tf.constant(texts)).numpy()
    self.assertEqual(np.argmax(scores[:2], axis=1).tolist(), [0, 1])  # positive, negative
    served = tf.saved_model.load(result.export_dir).signatures["serving_default"](inputs=tf.constant(texts))
    self.assertAllClose(served["scores"], np.take_along_axis(scores, served["class_ids"].numpy(), axis=1))


class ElwcTrainTest(tf.test.TestCase):
  """Rank4Class trained and evaluated on ELWC class lists written the TF-Ranking way (label "relevance")."""

  def test_trains_on_graded_class_lists_and_evaluates_the_export_on_elwc(self):
    root = self.create_tempdir().full_path
    names = [f"digit {i}" for i in range(10)]
    vocab = self.create_tempfile("classes.txt", content="\n".join(names) + "\n").full_path
    train_digits = datasets.load_image_classification("digits", "train")
    test_digits = datasets.load_image_classification("digits", "test")
    files = {}
    for name, digits, rows in (("train", train_digits, slice(0, 1000)),
                               ("val", train_digits, slice(1000, None)), ("test", test_digits, slice(None))):
      files[name] = elwc_lists.write(os.path.join(root, f"{name}.elwc"), elwc_lists.digit_lists(
          digits.images[rows], digits.labels[rows], 10, negatives=4, seed=1))
    config = _digits_config(
        os.path.join(root, "run"), train_steps=60, eval_every=20, checkpoint_every=0, tensorboard=False,
        data=training_data.DataConfig(train_files=files["train"], validation_files=files["val"],
                                      test_files=files["test"], input_format="elwc", label_vocab=vocab,
                                      label_key="relevance", unlisted_classes="unjudged"),
        model=model_lib.Rank4ClassConfig(loss=losses.LossConfig(type="approx_ndcg")))
    result = train.train(config)
    self.assertEqual(result.steps, 60)
    # Lists hold the true class and 4 others; the test report ranks the listed classes only (-1: unjudged).
    # A random ranking puts the true class first in 1 of 5 lists: top-1 error 0.8.
    test_metrics = result.test_report["metrics"]
    self.assertLess(test_metrics["top_1_error"], 0.3)
    self.assertEqual(result.test_report["n"], len(test_digits.labels))
    # The export reads the same files through rank4class-evaluate's ELWC path with the same keys.
    report = evaluate.evaluate(evaluate.EvaluateConfig(
        model_path=result.export_dir, data_files=files["test"], input_format="elwc", feature_key="features",
        label_key="relevance", report_path=""))
    self.assertEqual(report["n"], len(test_digits.labels))
    self.assertAllClose(report["metrics"]["top_1_error"], test_metrics["top_1_error"], atol=1e-6)
    self.assertAllClose(report["metrics"]["ndcg_5"], test_metrics["ndcg_5"], atol=1e-5)


def _free_ports(count: int) -> list[int]:
  """`count` distinct free ports: all sockets stay bound until every port is chosen, so two cannot
  coincide."""
  sockets = [socket.socket() for _ in range(count)]
  try:
    for s in sockets:
      s.bind(("127.0.0.1", 0))
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def _digits_mirrored_config(
  model_dir: str, devices: list[str], steps: int = 40
) -> train.Rank4ClassTrainConfig:
  return train.Rank4ClassTrainConfig(
      model_dir=model_dir, data=training_data.DataConfig(dataset="digits"),
      model=model_lib.Rank4ClassConfig(
          instance_encoder=encoders.InstanceEncoderConfig(
              type="image", image=encoders.ImageEncoderConfig(filters=(16, 32), pooling="max")),
          interaction=interactions.InteractionConfig(type="latent_cross", hidden_units=(16, 16))),
      optimizer=train.OptimizerConfig(learning_rate=1e-2), batch_size=64, train_steps=steps, eval_every=20,
      checkpoint_every=0, strategy="mirrored", devices=devices, export=False, tensorboard=False, verbose=0,
      baselines=False, calibrate=False)


class ReplicaEquivalenceTest(tf.test.TestCase):
  """One replica and two logical CPU replicas see the same global batches, so they train the same model."""

  def test_one_and_two_replicas_give_the_same_metrics(self):
    data = training_data.prepare_data(training_data.DataConfig(dataset="digits"))
    root = self.create_tempdir().full_path
    one = train.train(_digits_mirrored_config(os.path.join(root, "one"), ["/cpu:0"]), data)
    two = train.train(_digits_mirrored_config(os.path.join(root, "two"), ["/cpu:0", "/cpu:1"]), data)
    self.assertEqual(one.steps, 40)
    self.assertEqual(two.steps, 40)
    # Summing gradients over two replicas rounds differently: a near-tied instance may change rank (TF 2.15,
    # one of 5 seeds: 1 of the 136 validation images), so up to 2 instances' worth.
    for name in ("top_1_error", "ndcg_5", "mrr"):
      self.assertAllClose(one.validation_metrics[name], two.validation_metrics[name],
                          atol=2 / len(data.validation) + 1e-6, msg=name)
    for name in ("top_1_error", "top_5_error", "ndcg_5"):
      self.assertAllClose(one.test_report["metrics"][name], two.test_report["metrics"][name], atol=5e-3)
    np.testing.assert_allclose(one.history[-1]["loss"], two.history[-1]["loss"], atol=2e-3)
    self.assertLess(one.test_report["metrics"]["top_1_error"], 0.5)  # Chance: 0.9.


class MultiWorkerTest(tf.test.TestCase):
  """Two worker processes on 127.0.0.1 with MultiWorkerMirroredStrategy train one model and export it."""

  def test_two_local_workers_train_and_export(self):
    model_dir = self.create_tempdir().full_path
    ports = _free_ports(2)
    processes = []
    logs = []
    for index in range(2):
      tf_config = {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                   "task": {"type": "worker", "index": index}}
      env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TF_CPP_MIN_LOG_LEVEL="2")
      log = tempfile.TemporaryFile("w+")
      logs.append(log)
      processes.append(subprocess.Popen(
          [sys.executable, "-m", "rank4class_cli.binaries.train_main", "--dataset=digits",
           f"--model_dir={model_dir}",
           "--train_steps=20", "--eval_every=10", "--checkpoint_every=10", "--hidden_width=8",
           "--cnn_filters=4", "--strategy=multi_worker", "--verbose=0", "--nobaselines"], env=env, stdout=log,
          stderr=subprocess.STDOUT))
    try:
      codes = [p.wait(timeout=600) for p in processes]  # A safety net only: the workers end on their own.
    finally:
      for p in processes:
        if p.poll() is None:
          p.kill()
    outputs = []
    for log in logs:
      log.seek(0)
      outputs.append(log.read()[-3000:])
    self.assertEqual(codes, [0, 0], msg="\n---\n".join(outputs))
    with open(os.path.join(model_dir, train.RESULT_FILE)) as f:
      result = json.load(f)
    self.assertEqual(result["steps"], 20)
    self.assertFalse(os.listdir(os.path.join(model_dir, ".workers")) if os.path.exists(
        os.path.join(model_dir, ".workers")) else [], msg="non-chief scratch files were left behind")
    reloaded = tf.keras.models.load_model(os.path.join(model_dir, "export"), compile=False)
    images = training_data.prepare_data(training_data.DataConfig(dataset="digits")).test.features[:5]
    self.assertEqual(reloaded(images).shape, (5, 10))


if __name__ == "__main__":
  tf.test.main()
