"""Tests for rank4class.evaluation.evaluate: a trained export evaluated end to end on records and ELWC lists,
its report."""

import json
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.evaluation import evaluate, evaluation_report
from rank4class.inference import served
from rank4class.modeling import encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class.training import train, training_data
from rank4class_data import datasets
from rank4class_data.records import elwc, tfrecords

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
  return {"top_1_error": np.mean(ranks >= 1), "top_5_error": np.mean(ranks >= 5),
          "ndcg_1": np.mean(ranks == 0),
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


class EvaluateConfigTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("format", dict(input_format="csv"),
       r"`input_format` must be one of \['example', 'elwc', 'rows'\], got 'csv'"),
      ("batch", dict(batch_size=0), "batch_size"),
      ("chunk", dict(chunk_size=-1), "`chunk_size` must be an integer >= 0, got -1."),
      ("model", dict(model_path=""), "model_path"),
  )
  def test_bad_config_raises(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      evaluate.EvaluateConfig(**{"model_path": "m", "data_files": "d", **kwargs})


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
    config = train.Rank4ClassTrainConfig(
        model_dir=cls.model_dir,
        data=training_data.DataConfig(train_files=os.path.join(cls.root, "train.tfrecord"),
                                      validation_files=os.path.join(cls.root, "val.tfrecord"),
                                      test_files=os.path.join(cls.root, "test.tfrecord")),
        model=model_lib.Rank4ClassConfig(
            instance_encoder=encoders.InstanceEncoderConfig(
                type="image", image=encoders.ImageEncoderConfig(filters=(16, 32), pooling="max")),
            interaction=interactions.InteractionConfig(type="latent_cross", hidden_units=(16, 16))),
        optimizer=train.OptimizerConfig(learning_rate=1e-2), batch_size=64, train_steps=60, eval_every=30,
        # Calibration is under test here; baselines in train_test.
        tensorboard=False, verbose=0, baselines=False)
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
    self.assertIsNone(expected.pop("coverage_warning"))  # A random split of digits: the sets hold.
    self.assertIsNone(self.report["calibration"]["coverage_warning"])
    self.assertIsNone(self.result.calibration["test"]["coverage_warning"])
    for name, value in expected.items():
      self.assertAllClose(self.report["calibration"][name], value, atol=1e-5, msg=name)
      self.assertAllClose(self.result.calibration["test"][name], value, atol=1e-5, msg=name)
    self.assertIn("calibrated probabilities (temperature", evaluation_report.format_table(self.report))

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
    self.assertIn("exact ranks over all 10 classes, 3 at a time", evaluation_report.format_table(chunked))
    config = evaluate.EvaluateConfig(model_path="m", data_files="d")
    self.assertEqual((config.chunked(2047), config.chunked(2048)), (0, 4096))
    self.assertEqual(evaluate.EvaluateConfig(model_path="m", data_files="d", chunk_size=0).chunked(10**5), 0)

  def test_matches_the_test_report_written_by_training(self):
    self.assertAllClose(self.result.test_report["metrics"]["ndcg_5"],
                        self.report["metrics"]["ndcg_5"], atol=1e-5)

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
      lists.append(elwc.make_elwc([{"class_id": int(c), "label": float(g)} for c, g in zip(ids, labels,
                                                                                           strict=True)],
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
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                r"bad.tfrecord, row 2, field '?label'?: label out of range"):
      evaluate.evaluate(evaluate.EvaluateConfig(model_path=self.model_dir, data_files=path, report_path=""))


if __name__ == "__main__":
  tf.test.main()

