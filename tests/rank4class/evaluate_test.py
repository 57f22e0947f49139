"""Tests for rank4class.evaluate: streaming metrics, per-class recall, confusion counts, ELWC lists, reports."""

import contextlib
import csv
import io
import json
import os
import shutil
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class import encoders, evaluate, interactions, served, train, training_data
from rank4class import model as model_lib
from rank4class_data import datasets, elwc, progress_line, tfrecords
from rank4class_data.validation import DataError

_SCHEMA = tfrecords.ExampleSchema(text_key=None, image_key="image", image_shape=(8, 8, 1), num_classes=10)


def _write_split(path: str, images: np.ndarray, labels: np.ndarray) -> None:
  tfrecords.write_instances(path, [tfrecords.ClassificationInstance(label=int(y), image=x)
                                   for x, y in zip(images, labels, strict=True)], _SCHEMA)


def _numpy_report(scores: np.ndarray, labels: np.ndarray, num_classes: int) -> dict:
  """The report's numbers recomputed from the scores (one relevant class per instance)."""
  true_scores = scores[np.arange(len(labels)), labels]
  ranks = (scores > true_scores[:, None]).sum(axis=1)  # 0-based rank of the true class (no ties here).
  gain = np.where(ranks < 5, 1.0 / np.log2(ranks + 2.0), 0.0)
  confusion = np.zeros([num_classes, num_classes], np.int64)
  np.add.at(confusion, (labels, scores.argmax(axis=1)), 1)
  return {"top_1_error": np.mean(ranks >= 1), "top_5_error": np.mean(ranks >= 5), "ndcg_1": np.mean(ranks == 0),
          "ndcg_5": np.mean(gain), "mrr": np.mean(1.0 / (ranks + 1.0)), "accuracy": np.mean(ranks == 0),
          "confusion": confusion}


def _numpy_ndcg(item_scores: list[np.ndarray], item_labels: list[np.ndarray], k: int) -> float:
  values = []
  for scores, labels in zip(item_scores, item_labels, strict=True):
    order = np.argsort(-scores)
    gains = (2.0 ** labels[order] - 1.0)[:k]
    ideal = (2.0 ** np.sort(labels)[::-1] - 1.0)[:k]
    discounts = 1.0 / np.log2(np.arange(2, len(gains) + 2))
    values.append((gains * discounts).sum() / (ideal * discounts[:len(ideal)]).sum())
  return float(np.mean(values))


class ClassificationEvaluatorTest(tf.test.TestCase):

  def test_hand_computed_metrics_recall_and_confusion(self):
    evaluator = evaluate.ClassificationEvaluator(["a", "b", "c"], ks=(1, 5))
    # Instance 0: true b scored 1, ranked third of three; predicted a. Instance 1: true b ranked first.
    evaluator.update(tf.constant([[3.0, 1.0, 2.0], [0.0, 5.0, 1.0]]), tf.constant([1, 1]))
    report = evaluator.result()
    self.assertEqual(report["n"], 2)
    self.assertAllClose(report["metrics"]["top_1_error"], 0.5)
    self.assertAllClose(report["metrics"]["top_5_error"], 0.0)
    self.assertAllClose(report["metrics"]["ndcg_5"], (1 / np.log2(4) + 1.0) / 2)  # (0.5 + 1) / 2
    self.assertAllClose(report["metrics"]["mrr"], (1 / 3 + 1.0) / 2)
    self.assertAllClose(report["metrics"]["accuracy"], 0.5)
    self.assertEqual(report["confusion"]["counts"], [[0, 0, 0], [1, 1, 0], [0, 0, 0]])
    self.assertEqual(report["per_class_recall"], {"a": None, "b": 0.5, "c": None})
    self.assertEqual(report["class_counts"], {"a": 0, "b": 2, "c": 0})

  def test_graph_optimizer_setting_is_restored_around_every_call(self):
    # The evaluator's functions run with Grappler off (their first call is 0.15-0.3 s cheaper), and leave the
    # process's setting as they found it: the training step keeps its optimized graph.
    for before in (False, True):
      tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": before})
      try:
        evaluator = evaluate.ClassificationEvaluator(["a", "b"], ks=(1,))
        evaluator.update(tf.constant([[1.0, 0.0]]), tf.constant([1]))
        self.assertEqual(tf.config.optimizer.get_experimental_options()["disable_meta_optimizer"], before)
        self.assertAllClose(evaluator.result()["metrics"]["top_1_error"], 1.0)
        self.assertEqual(tf.config.optimizer.get_experimental_options()["disable_meta_optimizer"], before)
      finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})

  def test_graded_relevance_rows(self):
    evaluator = evaluate.ClassificationEvaluator(["a", "b", "c"], ks=(1, 5))
    # Instance 0: b (relevance 2) ranked second behind a (relevance 1), c unjudged (-1): among the judged a, b
    # the ranking is [a, b], DCG = 1/log2(2) + 3/log2(3), ideal [b, a] = 3 + 1/log2(3). Instance 1: one-hot c,
    # ranked first.
    evaluator.update(tf.constant([[3.0, 1.0, 2.0], [0.0, 1.0, 5.0]]),
                     tf.constant([[1.0, 2.0, -1.0], [0.0, 0.0, 1.0]]))
    report = evaluator.result()
    ndcg_0 = (1.0 + 3.0 / np.log2(3)) / (3.0 + 1.0 / np.log2(3))
    self.assertAllClose(report["metrics"]["ndcg_5"], (ndcg_0 + 1.0) / 2)
    # Top-K error is TF-Ranking's 1 - Hits@K: a hit is any class with relevance > 0 (a, first, in instance 0).
    self.assertAllClose(report["metrics"]["top_1_error"], 0.0)
    # The confusion matrix counts the most relevant class as the true one.
    self.assertEqual(report["confusion"]["counts"], [[0, 0, 0], [1, 0, 0], [0, 0, 1]])

  def test_reset_forgets_earlier_batches(self):
    evaluator = evaluate.get_evaluator(["a", "b"])
    evaluator.update(tf.constant([[0.0, 1.0]]), tf.constant([0]))
    evaluator = evaluate.get_evaluator(["a", "b"])
    evaluator.update(tf.constant([[0.0, 1.0]]), tf.constant([1]))
    self.assertEqual(evaluator.result()["n"], 1)
    self.assertAllClose(evaluator.result()["metrics"]["top_1_error"], 0.0)

  def test_evaluate_dataset_adds_the_instance_weighted_mean_loss(self):
    # Batches of 2 and 1 instances with batch-mean losses 1 and 4: (2 * 1 + 1 * 4) / 3 = 2, as Keras' evaluate.
    dataset = tf.data.Dataset.from_tensor_slices((np.zeros([3, 2], np.float32), np.array([0, 1, 1]))).batch(2)
    batch_means = iter([1.0, 4.0])
    report = evaluate.evaluate_dataset(lambda x: tf.zeros([tf.shape(x)[0], 2]), dataset, ["a", "b"],
                                       loss_fn=lambda scores, labels: tf.constant(next(batch_means)))
    self.assertAllClose(report["metrics"]["loss"], 2.0)
    self.assertEqual(report["n"], 3)

  def test_progress_line_counts_the_instances(self):
    dataset = tf.data.Dataset.from_tensor_slices((np.zeros([3, 2], np.float32), np.array([0, 1, 1]))).batch(2)
    stderr = io.StringIO()
    with mock.patch.object(progress_line, "DEFAULT_EVERY_SECONDS", 0.0), contextlib.redirect_stderr(stderr):
      evaluate.evaluate_dataset(lambda x: tf.zeros([tf.shape(x)[0], 2]), dataset, ["a", "b"], progress=True)
      silent = evaluate.evaluate_dataset(lambda x: tf.zeros([tf.shape(x)[0], 2]), dataset, ["a", "b"])
    self.assertEqual(silent["n"], 3)
    self.assertRegex(stderr.getvalue(), r"^evaluated 2 instances \([\d,]+ instances/s\)\n"  # Not a terminal: lines.
                                        r"evaluated 3 instances \([\d,]+ instances/s\)\n$")

  def test_label_out_of_range_is_an_error(self):
    evaluator = evaluate.ClassificationEvaluator(["a", "b"])
    with self.assertRaises(tf.errors.InvalidArgumentError):
      evaluator.update(tf.constant([[0.0, 1.0]]), tf.constant([2]))

  def test_format_table_lists_metrics_x100_and_recall(self):
    evaluator = evaluate.ClassificationEvaluator(["a", "b"])
    evaluator.update(tf.constant([[0.0, 1.0], [1.0, 0.0]]), tf.constant([1, 1]))
    table = evaluate.format_table(evaluator.result())
    self.assertRegex(table, r"top_1_error\s+50\.00")
    self.assertRegex(table, r"\na\s+-\s+0\n")
    self.assertRegex(table, r"\nb\s+50\.00\s+2$")


  def test_many_classes_keep_the_report_small_and_show_the_best_and_worst_with_the_rest_in_a_csv(self):
    # 150 classes with long names; instance i of class c is right when i < c % 4 (recall c % 4 / 3 of 3 each).
    names = [f"class number {c:03d} with a long descriptive name" for c in range(150)]
    labels = np.repeat(np.arange(150), 3)
    right = np.tile(np.arange(3), 150) < labels % 4
    scores = np.zeros([len(labels), 150], np.float32)
    scores[np.arange(len(labels)), np.where(right, labels, (labels + 1) % 150)] = 1.0
    evaluator = evaluate.ClassificationEvaluator(names, ks=(1,))
    evaluator.update(tf.constant(scores), tf.constant(labels))
    report = evaluator.result()
    self.assertNotIn("counts", report["confusion"])  # 150 x 150 dense counts: only the non-zero cells.
    cells = report["confusion"]["nonzero"]
    self.assertEqual(sum(count for _, _, count in cells), 450)
    self.assertIn([5, 5, 1], cells)  # Class 5 (5 % 4 = 1): one right, two to class 6.
    self.assertIn([5, 6, 2], cells)
    path = os.path.join(self.create_tempdir().full_path, "report.json")
    evaluate.write_report(path, report)
    self.assertEqual(report["per_class_csv"], path[:-len(".json")] + ".per_class.csv")
    with open(report["per_class_csv"], newline="") as f:
      rows = list(csv.reader(f))
    self.assertEqual(rows[0], ["class", "recall", "instances"])
    self.assertLen(rows, 151)
    self.assertEqual([float(r[1]) for r in rows[1:]], sorted(float(r[1]) for r in rows[1:]))  # Worst first.
    self.assertEqual(rows[1][1:], ["0.000000", "3"])
    with open(path) as f:
      self.assertEqual(json.load(f)["per_class_csv"], report["per_class_csv"])
    lines = evaluate.format_table(report).splitlines()
    best = lines.index(next(line for line in lines if "(the 10 best of 150 classes)" in line))
    worst = lines.index(next(line for line in lines if "(the 10 worst)" in line))
    self.assertEqual([line.split("  ")[0] for line in lines[best + 2:best + 12]],
                     [names[c] for c in range(150) if c % 4 == 3][:10])  # Recall 100 (ties by name), whole names.
    self.assertTrue(all(" 0.00 " in line for line in lines[worst + 2:worst + 12]))
    self.assertIn(f"All 150 classes: {report['per_class_csv']}", lines)


_IDS = {"ant": 0, "bee": 1, "cat": 2}


def _feature(value) -> tf.train.Feature:
  return elwc.to_feature(value)


class ClassIdTest(tf.test.TestCase, parameterized.TestCase):
  """A class stored as an int64 id, an integral float or a class name; anything else is a located error."""

  @parameterized.named_parameters(
      ("int64", 2, 2), ("integral_float", 1.0, 1), ("name", "cat", 2), ("name_with_spaces", b" bee ", 1))
  def test_accepted_forms(self, value, expected):
    self.assertEqual(evaluate.class_id(_feature(value), _IDS, "d.tfrecord", 3, "label"), expected)

  @parameterized.named_parameters(
      ("unknown_name", "wasp", "d.tfrecord, row 3, field 'label': the record has unknown class name 'wasp'; expected "
                               "one of the model's 3 classes ('ant', 'bee', 'cat')."),
      ("fraction", 1.5, "d.tfrecord, row 3, field 'label': the record has class id 1.5, not an integer; expected an "
                        "integral class id in [0, 3) or a class name."),
      ("nan", float("nan"), "the record has class id nan, not an integer"),
      ("out_of_range", 3, "d.tfrecord, row 3, field 'label': the record has class id 3; expected a class id in "
                          "[0, 3) or a class name."),
      ("negative", -1.0, "the record has class id -1; expected a class id in [0, 3)"),
      ("two_names", ["ant", "bee"], "the record has 2 values for 'label'; expected exactly one class id or class "
                                    "name"),
  )
  def test_bad_values_are_located(self, value, message):
    with self.assertRaises(DataError) as raised:
      evaluate.class_id(_feature(value), _IDS, "d.tfrecord", 3, "label")
    self.assertIn(message, str(raised.exception))

  def test_many_classes_are_listed_by_a_few(self):
    ids = {f"c{i}": i for i in range(1000)}
    with self.assertRaisesRegex(DataError, r"one of the model's 1,000 classes \('c0', 'c1', 'c2', 'c3', 'c4', "
                                           r"\.\.\. \(1,000 in all\)\)"):
      evaluate.class_id(_feature("c1000"), ids, "d.tfrecord", 1, "class_id", "example 2")

  def test_example_label_is_rewritten_as_an_int64_id(self):
    example = tf.train.Example(features=tf.train.Features(feature={"label": _feature("bee"),
                                                                   "text": _feature("hello")}))
    rewritten = tf.train.Example.FromString(
        evaluate.example_with_class_id(example.SerializeToString(), "label", _IDS, "d.tfrecord", 1))
    self.assertEqual(list(rewritten.features.feature["label"].int64_list.value), [1])
    self.assertEqual(rewritten.features.feature["text"], example.features.feature["text"])
    with self.assertRaisesRegex(DataError, r"d.tfrecord, row 4, field 'label': missing feature"):
      evaluate.example_with_class_id(tf.train.Example().SerializeToString(), "label", _IDS, "d.tfrecord", 4)


class EvaluateConfigTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("format", dict(input_format="csv"), "Unknown input_format 'csv'.*example, elwc"),
      ("batch", dict(batch_size=0), "batch_size"),
      ("model", dict(model_path=""), "model_path"),
  )
  def test_bad_config_raises(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      evaluate.EvaluateConfig(**{"model_path": "m", "data_files": "d", **kwargs})


class ListEvaluatorTest(tf.test.TestCase):

  def test_ranks_only_the_given_candidates_and_ignores_padding(self):
    evaluator = evaluate.ListEvaluator(ks=(1, 5))
    scores = tf.constant([[0.1, 0.9, 0.5, 0.3]])
    # Candidates: class 2 (relevant, 1) and class 0; class 1, scored highest, is not a candidate.
    evaluator.update(scores, tf.constant([[2, 0, 0]]), tf.constant([[1.0, 0.0, -1.0]]),
                     tf.constant([[True, True, False]]))
    report = evaluator.result()
    self.assertEqual((report["n"], report["num_items"]), (1, 2))
    self.assertAllClose(report["metrics"]["top_1_error"], 0.0)
    self.assertAllClose(report["metrics"]["mrr"], 1.0)


class EndToEndTest(tf.test.TestCase):
  """Real digits records: train briefly from TFRecords, export, evaluate, and check against NumPy."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    train_data = datasets.load_image_classification("digits", "train")
    test_data = datasets.load_image_classification("digits", "test")
    train_idx, val_idx = datasets.train_validation_split(train_data.labels, 0.15, seed=0)
    cls.test_images, cls.test_labels = test_data.images[:300], test_data.labels[:300]
    for name, images, labels in (("train", train_data.images[train_idx], train_data.labels[train_idx]),
                                 ("val", train_data.images[val_idx], train_data.labels[val_idx]),
                                 ("test", cls.test_images, cls.test_labels)):
      _write_split(os.path.join(cls.root, f"{name}.tfrecord"), images, labels)
    with open(os.path.join(cls.root, "train.labels.json"), "w") as f:
      json.dump({"classes": train_data.class_names, "schema": _SCHEMA.to_dict()}, f)
    cls.model_dir = os.path.join(cls.root, "run")
    config = train.TrainConfig(
        model_dir=cls.model_dir,
        data=training_data.DataConfig(train_files=os.path.join(cls.root, "train.tfrecord"),
                                      validation_files=os.path.join(cls.root, "val.tfrecord"),
                                      test_files=os.path.join(cls.root, "test.tfrecord")),
        model=model_lib.Rank4ClassConfig(
            instance_encoder=encoders.InstanceEncoderConfig(
                type="image", image=encoders.ImageEncoderConfig(filters=(16, 32), pooling="max")),
            interaction=interactions.InteractionConfig(type="latent_cross", hidden_units=(16, 16))),
        optimizer=train.OptimizerConfig(learning_rate=1e-2), batch_size=64, train_steps=60, eval_every=30,
        tensorboard=False, verbose=0, baselines=False)  # Calibration is under test here; baselines in train_test.
    cls.result = train.train(config)
    cls.report = evaluate.evaluate(evaluate.EvaluateConfig(
        model_path=cls.model_dir, data_files=os.path.join(cls.root, "test.tfrecord"), batch_size=128))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def test_export_reloads_and_predicts_the_same(self):
    reloaded = served.load_keras_model(served.resolve_export_dir(self.model_dir))
    scores = reloaded(self.test_images).numpy()
    serve = tf.saved_model.load(self.result.export_dir).signatures["serving_default"]
    outputs = serve(inputs=tf.constant(self.test_images))
    self.assertAllEqual(outputs["class_ids"].numpy(), np.argsort(-scores, axis=1)[:, :5])
    self.assertAllClose(outputs["scores"].numpy(), -np.sort(-scores, axis=1)[:, :5], atol=1e-5)

  def test_calibration_of_the_export_is_evaluated_as_training_evaluated_it(self):
    # The same test records: the report's ECE, coverage and set size equal those training computed, and the
    # calibration's own evaluation of the reloaded model's scores.
    calibrated = served.read_calibration(served.resolve_export_dir(self.model_dir))
    reloaded = served.load_keras_model(served.resolve_export_dir(self.model_dir))
    expected = calibrated.evaluate(reloaded(self.test_images).numpy(), self.test_labels)
    for name, value in expected.items():
      self.assertAllClose(self.report["calibration"][name], value, atol=1e-5, msg=name)
      self.assertAllClose(self.result.calibration["test"][name], value, atol=1e-5, msg=name)
    self.assertIn("calibrated probabilities (temperature", evaluate.format_table(self.report))

  def test_report_equals_a_numpy_recomputation(self):
    reloaded = served.load_keras_model(served.resolve_export_dir(self.model_dir))
    expected = _numpy_report(reloaded(self.test_images).numpy(), self.test_labels, 10)
    self.assertEqual(self.report["n"], 300)
    for name in ("top_1_error", "top_5_error", "ndcg_1", "ndcg_5", "mrr", "accuracy"):
      self.assertAllClose(self.report["metrics"][name], expected[name], atol=1e-5, msg=name)
    self.assertAllEqual(self.report["confusion"]["counts"], expected["confusion"])
    recall = np.diag(expected["confusion"]) / expected["confusion"].sum(axis=1)
    self.assertAllClose([self.report["per_class_recall"][str(c)] for c in range(10)], recall)
    self.assertLess(self.report["metrics"]["top_1_error"], 0.5)  # Trained: chance is 0.9.

  def test_report_is_written_as_json_beside_the_run(self):
    with open(os.path.join(self.model_dir, evaluate.REPORT_FILE)) as f:
      written = json.load(f)
    self.assertEqual(written["metrics"], self.report["metrics"])
    self.assertEqual(written["input_format"], "example")
    self.assertGreater(written["timing"]["instances_per_second"], 0)
    self.assertBetween(written["timing"]["steady_input_fraction"], 0.0, 1.0)

  def test_chunked_ranking_over_all_classes_gives_the_same_metrics_and_recall(self):
    chunked = evaluate.evaluate(evaluate.EvaluateConfig(
        model_path=self.model_dir, data_files=os.path.join(self.root, "test.tfrecord"), batch_size=128,
        chunk_size=3, report_path="", progress=False))
    self.assertEqual(chunked["chunk_size"], 3)
    self.assertNotIn("confusion", chunked)
    for name in ("top_1_error", "top_5_error", "ndcg_1", "ndcg_5", "mrr", "accuracy"):
      self.assertAllClose(chunked["metrics"][name], self.report["metrics"][name], atol=1e-5, msg=name)
    self.assertAllClose([chunked["per_class_recall"][str(c)] for c in range(10)],
                        [self.report["per_class_recall"][str(c)] for c in range(10)])
    self.assertIn("exact ranks over all 10 classes, 3 at a time", evaluate.format_table(chunked))
    config = evaluate.EvaluateConfig(model_path="m", data_files="d")
    self.assertEqual((config.chunked(2047), config.chunked(2048)), (0, 4096))
    self.assertEqual(evaluate.EvaluateConfig(model_path="m", data_files="d", chunk_size=0).chunked(10**5), 0)

  def test_matches_the_test_report_written_by_training(self):
    self.assertAllClose(self.result.test_report["metrics"]["ndcg_5"], self.report["metrics"]["ndcg_5"], atol=1e-5)

  def test_elwc_lists_are_ranked_over_their_candidates(self):
    rng = np.random.default_rng(0)
    lists, candidates, grades = [], [], []
    for image, label in zip(self.test_images[:60], self.test_labels[:60], strict=True):
      others = rng.choice([c for c in range(10) if c != label], size=rng.integers(1, 5), replace=False)
      ids = np.concatenate([[label], others]).astype(np.int64)
      labels = np.concatenate([[2.0], rng.integers(0, 2, len(others)).astype(np.float64)])
      order = rng.permutation(len(ids))
      ids, labels = ids[order], labels[order]
      candidates.append(ids)
      grades.append(labels)
      lists.append(elwc.make_elwc([{"class_id": int(c), "label": float(g)} for c, g in zip(ids, labels, strict=True)],
                                  context={"image": image.tobytes()}))
    path = os.path.join(self.root, "lists.tfrecord")
    elwc.write_elwc(path, lists)
    report = evaluate.evaluate(evaluate.EvaluateConfig(
        model_path=self.model_dir, data_files=path, input_format="elwc", batch_size=16, report_path=""))
    scores = served.load_keras_model(self.result.export_dir)(self.test_images[:60]).numpy()
    item_scores = [s[ids] for s, ids in zip(scores, candidates, strict=True)]
    self.assertEqual(report["n"], 60)
    self.assertEqual(report["num_items"], sum(len(c) for c in candidates))
    self.assertAllClose(report["metrics"]["ndcg_5"], _numpy_ndcg(item_scores, grades, 5), atol=1e-5)
    self.assertNotIn("per_class_recall", report)

  def test_missing_model_names_the_path(self):
    with self.assertRaisesRegex(FileNotFoundError, "no SavedModel.*nowhere"):
      evaluate.evaluate(evaluate.EvaluateConfig(model_path=os.path.join(self.root, "nowhere"),
                                                data_files=os.path.join(self.root, "test.tfrecord")))

  def test_records_with_other_classes_are_refused(self):
    path = os.path.join(self.root, "other.tfrecord")
    shutil.copy(os.path.join(self.root, "test.tfrecord"), path)
    with open(os.path.join(self.root, "other.labels.json"), "w") as f:
      json.dump({"classes": [f"c{i}" for i in range(10)], "schema": _SCHEMA.to_dict()}, f)
    with self.assertRaisesRegex(ValueError, "differ from the model's"):
      evaluate.evaluate(evaluate.EvaluateConfig(model_path=self.model_dir, data_files=path, report_path=""))

  def test_label_out_of_range_names_file_row_and_field(self):
    path = os.path.join(self.root, "bad.tfrecord")
    schema = tfrecords.ExampleSchema(text_key=None, image_key="image", image_shape=(8, 8, 1))
    images = self.test_images[:3]
    tfrecords.write_instances(path, [tfrecords.ClassificationInstance(label=label, image=image)
                                     for label, image in zip([1, 12, 3], images, strict=True)], schema)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, r"bad.tfrecord, row 2, field '?label'?: label out of range"):
      evaluate.evaluate(evaluate.EvaluateConfig(model_path=self.model_dir, data_files=path, report_path=""))


if __name__ == "__main__":
  tf.test.main()
