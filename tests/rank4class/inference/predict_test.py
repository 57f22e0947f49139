"""Tests for rank4class.inference.predict and the rank4class-predict binary: rows, text lines and TFRecords to
predictions that equal the model's own ranking, labels in the top K, bad rows, and frozen-text exports."""

import csv
import dataclasses
import json
import os
import shutil
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.evaluation import evaluate
from rank4class.inference import calibration, predict, served, serving
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class.training import train, training_data
from rank4class_cli.binaries import predict_main
from rank4class_data.records import elwc, tfrecords
from rank4class_data.rows import bad_rows
from rank4class_data.validation import DataError
from rank4class_encoders import bert_conversion, embedding_cache, text_embeddings, text_encoder
from rank4class_engine.optimization import losses
from tests.rank4class_cli.cli_runner import run_binary

CLASSES = ["cat", "dog", "eel"]


class PredictConfigTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("input_format", dict(input_format="xlsx"),
       r"`input_format` must be one of \['auto', 'lines', .*\], got 'xlsx'"),
      ("output_format", dict(output_format="parquet"),
       r"`output_format` must be one of \['auto', 'csv', 'jsonl'\], got 'parquet'"),
      ("top_k", dict(top_k=0), "`top_k` must be an integer >= 1, got 0."),
      ("batch_size", dict(batch_size=-1), "`batch_size` must be an integer >= 1, got -1."),
      ("coverage", dict(coverage=1.0), r"`coverage` must be in \(0, 1\), got 1.0."),
  )
  def test_bad_config_raises(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      predict.PredictConfig("/m", "in.csv", "out.csv", **kwargs)


class DenseModelTest(tf.test.TestCase):
  """A dense-feature model (untrained weights: the predictions must equal its own `rank`)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    tf.keras.utils.set_random_seed(0)
    cls.model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)),
                                          class_encoders.get("one_hot", num_classes=3),
                                          interactions.get("dot"), class_names=CLASSES)
    cls.model(tf.zeros([1, 2]))
    cls.export = serving.export_saved_model(cls.model, os.path.join(cls.root, "export"), top_k=3)
    cls.features = np.array([[0.5, -1.0], [2.0, 0.25], [-1.5, 1.0]], np.float32)
    names, _ = cls.model.rank(cls.features, k=2)
    cls.expected = [[CLASSES[i] for i in row] for row in names.numpy()]

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def _rows(self, content: str, name: str = "rows.csv") -> str:
    return self.create_tempfile(name, content=content).full_path

  def test_csv_rows_with_ids_and_labels(self):
    source = self._rows("key,x,y,truth\na,0.5,-1.0,cat\nb,2.0,0.25,dog\nc,-1.5,1.0,eel\n")
    output = os.path.join(self.create_tempdir().full_path, "p.csv")
    summary = predict.predict(predict.PredictConfig(self.export, source, output, feature_columns=("x", "y"),
                                                    id_column="key", label_column="truth", top_k=2,
                                                    progress=False))
    with open(output, encoding="utf-8") as f:
      rows = list(csv.reader(f))
    self.assertEqual(rows[0], ["id", "label", "in_top_k", "class_1", "score_1", "class_2", "score_2"])
    self.assertEqual([r[0] for r in rows[1:]], ["a", "b", "c"])
    self.assertEqual([[r[3], r[5]] for r in rows[1:]], self.expected)
    truths = ["cat", "dog", "eel"]
    hits = [int(t in e) for t, e in zip(truths, self.expected, strict=True)]
    self.assertEqual([int(r[2]) for r in rows[1:]], hits)
    self.assertEqual((summary.rows, summary.labelled), (3, 3))
    self.assertAllClose(summary.top_k_accuracy, sum(hits) / 3)
    scores = self.model(self.features).numpy()
    self.assertAllClose([float(r[4]) for r in rows[1:]], np.sort(scores, axis=1)[:, -1], atol=1e-5)

  def test_summary_gives_top_1_accuracy_and_top_k_within_the_classes(self):
    source = self._rows("x,y,truth\n0.5,-1.0,cat\n2.0,0.25,dog\n-1.5,1.0,eel\n")
    output = os.path.join(self.create_tempdir().full_path, "p.csv")
    summary = predict.predict(predict.PredictConfig(self.export, source, output, feature_columns=("x", "y"),
                                                    # top_k: 5 by default.
                                                    label_column="truth", progress=False))
    top_1 = sum(t == e[0] for t, e in zip(["cat", "dog", "eel"], self.expected, strict=True)) / 3
    self.assertAllClose(summary.top_1_accuracy, top_1)
    self.assertEqual((summary.k, summary.top_k_accuracy), (3, 1.0))  # 3 classes: the top 3 holds every label.
    lines = summary.format().splitlines()
    self.assertEqual(lines[1:], [f"Top-1 accuracy: {100 * top_1:.2f}% of 3 labelled rows.",
                                 "True label in the top 3: 100.00% of 3 labelled rows.",
                                 f"Scores only: {self.export}: this export carries no calibration "
                                 "(calibration.json): it gives scores, not probabilities (exports of "
                                 "rank4class-train since calibration existed carry one unless trained with "
                                 "`rank4class-train --nocalibrate`; zero-shot exports carry none)."])

  def test_calibrated_export_writes_probabilities_and_conformal_class_sets(self):
    rng = np.random.default_rng(0)
    held_out = rng.normal(size=[40, 2]).astype(np.float32)
    fitted = calibration.Calibration.fit(self.model(held_out).numpy(), rng.integers(0, 3, size=40))
    export = serving.export_saved_model(self.model, os.path.join(self.create_tempdir().full_path, "export"),
                                        top_k=3, calibration=fitted)
    source = self._rows("x,y,truth\n0.5,-1.0,cat\n2.0,0.25,dog\n-1.5,1.0,eel\n")
    out = self.create_tempdir().full_path
    summary = predict.predict(predict.PredictConfig(export, source, os.path.join(out, "p.csv"),
                                                    feature_columns=("x", "y"), label_column="truth", top_k=2,
                                                    coverage=0.8, progress=False))
    with open(os.path.join(out, "p.csv"), encoding="utf-8") as f:
      rows = list(csv.reader(f))
    self.assertEqual(rows[0], ["id", "label", "in_top_k", "class_1", "score_1", "probability_1", "class_2",
                               "score_2", "probability_2", "class_set"])
    # NumPy reference.
    probabilities = calibration.softmax(self.model(self.features).numpy(), fitted.temperature)
    self.assertAllClose([[float(r[5]), float(r[8])] for r in rows[1:]],
                        -np.sort(-probabilities)[:, :2], atol=1e-6)
    threshold = fitted.threshold(0.8)
    expected_sets = [[CLASSES[c] for c in np.argsort(-p) if 1 - p[c] <= threshold or c == np.argmax(p)]
                     for p in probabilities]
    self.assertEqual([r[9].split(predict.CLASS_SET_SEPARATOR) for r in rows[1:]], expected_sets)
    self.assertAllClose(summary.mean_set_size, np.mean([len(s) for s in expected_sets]))
    self.assertIsNone(summary.calibration_note)
    self.assertIsNone(summary.coverage_warning)  # 3 labelled rows against 40 calibration rows: within chance.
    self.assertNotIn("Warning", summary.format())
    shifted = dataclasses.replace(summary,
                                  coverage_warning=calibration.coverage_shortfall(0.8, 0.5, 3000, 40))
    self.assertEqual(shifted.format().splitlines()[-1],
                     "Warning: the 80% class sets hold the true class for 50.00% of these 3,000 rows, below "
                     "the 61.4% chance allows: these rows differ from the 40 validation rows the sets were "
                     "calibrated on, and 80% does not hold for rows like them; calibrate on rows like those "
                     "you will predict (rank4class-train --validation_files).")
    result = run_binary(predict_main, [f"--model_dir={export}", f"--input={source}", "--feature_columns=x,y",
                                       f"--output={os.path.join(out, 'p.jsonl')}", "--coverage=0.8"])
    self.assertEqual(result.code, 0, result)
    with open(os.path.join(out, "p.jsonl"), encoding="utf-8") as f:
      records = [json.loads(line) for line in f]
    self.assertEqual([r["class_set"] for r in records], expected_sets)
    self.assertAllClose([r["probabilities"] for r in records], -np.sort(-probabilities), atol=1e-6)
    with self.assertRaisesRegex(ValueError, "coverage 0.99 is out of reach with 40 calibration rows"):
      predict.predict(predict.PredictConfig(export, source, os.path.join(out, "q.csv"),
                                            feature_columns=("x", "y"), coverage=0.99, progress=False))
    with self.assertRaisesRegex(ValueError,
                                r"a coverage \(0.8\) needs class probabilities, but .*no calibration"):
      predict.predict(predict.PredictConfig(self.export, source, os.path.join(out, "q.csv"),
                                            feature_columns=("x", "y"), coverage=0.8, progress=False))
    self.assertFalse(os.path.exists(os.path.join(out, "q.csv")))

  def test_bad_rows_are_skipped_and_listed_or_fail(self):
    source = self._rows("x,y,truth\n0.5,-1.0,cat\nabc,1,dog\n2.0,0.25,wolf\n-1.5,1.0,eel\n")
    out = self.create_tempdir().full_path
    config = predict.PredictConfig(self.export, source, os.path.join(out, "p.jsonl"),
                                   feature_columns=("x", "y"), label_column="truth",
                                   bad_rows=bad_rows.BadRowPolicy("skip"), progress=False)
    summary = predict.predict(config)
    with open(os.path.join(out, "p.jsonl"), encoding="utf-8") as f:
      records = [json.loads(line) for line in f]
    self.assertEqual([r["id"] for r in records], ["1", "4"])
    self.assertEqual(records[0]["classes"],
                     [CLASSES[i] for i in np.argsort(-self.model(self.features[:1])[0])])
    with open(summary.rejects_path, encoding="utf-8") as f:
      rejects = [json.loads(line) for line in f]
    self.assertEqual([(r["row"], r["field"], r["reason"]) for r in rejects],
                     [(2, "x", "'abc' is not a number"), (3, "truth", "unknown label 'wolf'")])
    strict = predict.PredictConfig(self.export, source, os.path.join(out, "q.jsonl"),
                                   feature_columns=("x", "y"), label_column="truth", progress=False)
    with self.assertRaisesRegex(DataError, r"rows\.csv, row 2 \(line 3\), field 'x': 'abc' is not a number"):
      predict.predict(strict)
    self.assertFalse(os.path.exists(os.path.join(out, "q.jsonl")))  # Nothing half-written.

  def test_jsonl_line_without_a_feature_is_a_bad_row(self):
    source = self._rows('{"x": 0.5, "y": -1.0}\n{"x": 2.0}\n', "rows.jsonl")
    out = self.create_tempdir().full_path
    summary = predict.predict(predict.PredictConfig(
        self.export, source, os.path.join(out, "p.csv"), feature_columns=("x", "y"),
        bad_rows=bad_rows.BadRowPolicy("skip"), progress=False))
    with open(summary.rejects_path, encoding="utf-8") as f:
      self.assertEqual([(r["row"], r["field"], r["reason"]) for r in map(json.loads, f)],
                       [(2, "y", "missing field")])
    self.assertEqual(summary.rows, 1)

  def test_converter_tfrecords_carry_their_labels(self):
    root = self.create_tempdir().full_path
    schema = tfrecords.ExampleSchema(text_key=None, dense_key="features", dense_dim=2, num_classes=3)
    path = os.path.join(root, "test.tfrecord")
    tfrecords.write_instances(path, [tfrecords.ClassificationInstance(label=i, dense=self.features[i])
                                     for i in range(3)], schema)
    with open(os.path.join(root, "test.labels.json"), "w") as f:
      json.dump({"classes": CLASSES, "schema": schema.to_dict()}, f)
    summary = predict.predict(predict.PredictConfig(self.export, path, os.path.join(root, "p.csv"), top_k=2,
                                                    progress=False))
    hits = [CLASSES[i] in e for i, e in enumerate(self.expected)]
    self.assertEqual(summary.labelled, 3)
    self.assertAllClose(summary.top_k_accuracy, sum(hits) / 3)
    with open(os.path.join(root, "test.labels.json"), "w") as f:
      json.dump({"classes": ["cat", "eel", "dog"], "schema": schema.to_dict()}, f)
    with self.assertRaisesRegex(ValueError, r"classes \['cat', 'eel', 'dog'\] differ from the model's"):
      predict.predict(predict.PredictConfig(self.export, path, os.path.join(root, "q.csv"), progress=False))
    self.assertFalse(os.path.exists(os.path.join(root, "q.csv")))

  def _records(self, root: str, labels: list) -> str:
    """The three instances as tf.Examples with `labels` stored as given, and the converter's vocabulary."""
    schema = tfrecords.ExampleSchema(text_key=None, dense_key="features", dense_dim=2, num_classes=3)
    path = os.path.join(root, "labels.tfrecord")
    tfrecords.write_tfrecord(path, [
        tf.train.Example(features=tf.train.Features(feature={"label": elwc.to_feature(label),
                                                             "features": elwc.to_feature(x)}))
        for label, x in zip(labels, self.features, strict=True)])
    with open(os.path.join(root, "labels.labels.json"), "w") as f:
      json.dump({"classes": CLASSES, "schema": schema.to_dict()}, f)
    return path

  def test_tfrecord_labels_as_int64_floats_or_class_names_read_alike(self):
    root = self.create_tempdir().full_path
    hits = [CLASSES[i] in e for i, e in enumerate(self.expected)]
    for labels in ([0, 1, 2], [0.0, 1.0, 2.0], CLASSES):
      summary = predict.predict(predict.PredictConfig(self.export, self._records(root, labels),
                                                      os.path.join(root, "p.jsonl"), top_k=2, progress=False))
      self.assertEqual(summary.labelled, 3, labels)
      self.assertAllClose(summary.top_k_accuracy, sum(hits) / 3, msg=labels)
      with open(os.path.join(root, "p.jsonl"), encoding="utf-8") as f:
        self.assertEqual([json.loads(line)["label"] for line in f], CLASSES)

  def test_tfrecord_label_unknown_or_fractional_is_located_or_skipped(self):
    root = self.create_tempdir().full_path
    path = self._records(root, ["cat", "wolf", 2.5])
    with self.assertRaisesRegex(DataError, r"labels\.tfrecord, row 2, field 'label': the record has unknown "
                                           r"class name 'wolf'; expected one of the model's 3 classes "
                                           r"\('cat', 'dog', 'eel'\)\.$"):
      predict.predict(predict.PredictConfig(self.export, path, os.path.join(root, "p.csv"), progress=False))
    self.assertFalse(os.path.exists(os.path.join(root, "p.csv")))
    summary = predict.predict(predict.PredictConfig(self.export, path, os.path.join(root, "p.csv"),
                                                    progress=False, bad_rows=bad_rows.BadRowPolicy("skip")))
    self.assertEqual((summary.rows, summary.rejected), (1, 2))
    with open(summary.rejects_path, encoding="utf-8") as f:
      self.assertEqual([(r["row"], r["field"], r["reason"]) for r in map(json.loads, f)], [
          (2, "label", "the record has unknown class name 'wolf'"),
          (3, "label", "the record has class id 2.5, not an integer")])

  def test_row_labels_written_as_floats_name_numeric_classes(self):
    tf.keras.utils.set_random_seed(0)
    model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)),
                                      class_encoders.get("one_hot", num_classes=3), interactions.get("dot"),
                                      class_names=["1", "2", "10"])
    model(tf.zeros([1, 2]))
    root = self.create_tempdir().full_path
    export = serving.export_saved_model(model, os.path.join(root, "export"))
    source = self._rows('{"x": 0.5, "y": -1.0, "truth": 2.0}\n{"x": 2.0, "y": 0.25, "truth": "10.0"}\n'
                        '{"x": -1.5, "y": 1.0, "truth": 1}\n{"x": 0.0, "y": 0.0, "truth": 2.5}\n',
                        "rows.jsonl")
    summary = predict.predict(predict.PredictConfig(
        export, source, os.path.join(root, "p.jsonl"), feature_columns=("x", "y"), label_column="truth",
        bad_rows=bad_rows.BadRowPolicy("skip"), progress=False))
    with open(os.path.join(root, "p.jsonl"), encoding="utf-8") as f:
      self.assertEqual([json.loads(line)["label"] for line in f], ["2", "10", "1"])
    with open(summary.rejects_path, encoding="utf-8") as f:
      self.assertEqual([(r["row"], r["field"], r["reason"], r["expected"]) for r in map(json.loads, f)], [
          (4, "truth", "unknown label '2.5'", "one of the model's 3 classes ('1', '2', '10')")])

  def test_text_lines_need_a_text_model_and_dense_rows_need_columns(self):
    lines = self._rows("hello\n", "in.txt")
    out = os.path.join(self.create_tempdir().full_path, "p.csv")
    with self.assertRaisesRegex(ValueError, "text lines need a text model; this model reads dense inputs"):
      predict.predict(predict.PredictConfig(self.export, lines, out, progress=False))
    with self.assertRaisesRegex(ValueError, "name their columns"):
      predict.predict(predict.PredictConfig(self.export, self._rows("x,y\n1,2\n"), out, progress=False))
    with self.assertRaisesRegex(ValueError, "cannot tell the output format"):
      predict.PredictConfig(self.export, lines, "p.parquet")

  def test_binary_prints_the_summary_and_bad_input_is_one_line(self):
    source = self._rows("x,y\n0.5,-1.0\n")
    output = os.path.join(self.create_tempdir().full_path, "p.csv")
    result = run_binary(predict_main,
                        [f"--model_dir={self.export}", f"--input={source}", f"--output={output}",
                                       "--feature_columns=x,y"])
    self.assertEqual(result.code, 0, result)
    self.assertNotIn("error", result.stderr)  # A slow machine may show a progress line.
    self.assertIn(f"Wrote 1 predictions to {output}", result.stdout)
    result = run_binary(predict_main,
                        [f"--model_dir={self.export}", f"--input={source}", f"--output={output}",
                                       "--feature_columns=x,z"])
    self.assertEqual(result.code, 1)
    self.assertEqual(result.stderr.strip().splitlines(), [
        f"rank4class-predict: error: {source}, header row (line 1), field 'z': missing column 'z'; expected "
        "one of the header's columns ['x', 'y']."])


  def test_predictions_never_overwrite_the_model(self):
    source = self._rows("x,y\n0.5,-1.0\n")
    graph = os.path.join(self.export, "saved_model.pb")
    with open(graph, "rb") as f:
      before = f.read()
    result = run_binary(predict_main, [f"--model_dir={self.export}", f"--input={source}", f"--output={graph}",
                                       "--output_format=csv", "--feature_columns=x,y"])
    self.assertEqual(result.code, 1)
    self.assertEqual(result.stderr, f"rank4class-predict: error: --output and --model_dir name the same file "
                     f"{graph}: writing --output would overwrite the input; give --output a path outside the "
                     "inputs\n")
    with open(graph, "rb") as f:
      self.assertEqual(f.read(), before)


class ImageFolderTest(tf.test.TestCase):
  """An image model on a folder of images: loose ones unlabelled, class subfolders labelled."""

  def test_folder_images_are_resized_to_the_model_and_ranked_like_the_model(self):
    root = self.create_tempdir().full_path
    tf.keras.utils.set_random_seed(0)
    model = model_lib.Rank4ClassModel(encoders.get("image", filters=(4,)),
                                      class_encoders.get("one_hot", num_classes=3),
                                      interactions.get("dot"), class_names=CLASSES)
    model(tf.zeros([1, 4, 4, 1], tf.uint8))
    export = serving.export_saved_model(model, os.path.join(root, "export"), top_k=3, input_dtype=tf.uint8)
    folder = os.path.join(root, "photos")
    rng = np.random.default_rng(0)
    pictures = {"new.png": rng.integers(0, 255, [8, 8, 1]),
                os.path.join("dog", "a.png"): rng.integers(0, 255, [4, 4, 3]),
                os.path.join("bird", "b.png"): rng.integers(0, 255, [4, 4, 1])}
    for name, pixels in pictures.items():
      os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
      with open(os.path.join(folder, name), "wb") as f:
        f.write(tf.io.encode_png(pixels.astype(np.uint8)).numpy())
    output = os.path.join(root, "p.jsonl")
    summary = predict.predict(predict.PredictConfig(export, folder, output, top_k=2,
                                                    bad_rows=bad_rows.BadRowPolicy(bad_rows.SKIP)))
    self.assertEqual((summary.rows, summary.rejected, summary.labelled), (2, 1, 1))
    with open(output) as f:
      predicted = [json.loads(line) for line in f]
    self.assertEqual([p["id"] for p in predicted], ["new.png", os.path.join("dog", "a.png")])
    self.assertEqual(predicted[1]["label"], "dog")
    small = tf.cast(tf.round(tf.image.resize(pictures["new.png"].astype(np.uint8), (4, 4))), tf.uint8)
    grey = tf.image.rgb_to_grayscale(pictures[os.path.join("dog", "a.png")].astype(np.uint8))
    names, _ = model.rank(tf.stack([small, grey]), k=2)
    self.assertEqual([p["classes"] for p in predicted], [[CLASSES[i] for i in row] for row in names.numpy()])
    with open(summary.rejects_path) as f:
      self.assertIn("class folder 'bird' is not one of the model's classes", f.read())


class FrozenTextExportTest(tf.test.TestCase):
  """A run trained on frozen text embeddings, shared by the tests below: its export takes vectors, and predict
  embeds raw texts."""

  TEXTS = ["good film", "very good film", "good plot", "bad film", "very bad plot", "bad plot"] * 3

  @classmethod
  def setUpClass(cls):
    """A frozen-text run trained on `TEXTS` (label: "bad" in the text), its embedding cache `cls.cache`."""
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "plot", "very"]
    cls.handles = bert_conversion.export_random_bert(os.path.join(cls.root, "bert"), vocab, hidden_size=8,
                                                     num_layers=1, num_heads=2, intermediate_size=8)
    schema = tfrecords.ExampleSchema(text_key="text", num_classes=2)
    tfrecords.write_instances(os.path.join(cls.root, "train.tfrecord"), [
        tfrecords.ClassificationInstance(label=int("bad" in t), text=t) for t in cls.TEXTS], schema)
    with open(os.path.join(cls.root, "train.labels.json"), "w") as f:
      json.dump({"classes": ["positive", "negative"], "schema": schema.to_dict()}, f)
    cls.cache = os.path.join(cls.root, "cache")
    cls.config = train.Rank4ClassTrainConfig(
        model_dir=os.path.join(cls.root, "run"),
        data=training_data.DataConfig(train_files=os.path.join(cls.root, "train.tfrecord"), max_seq_length=8,
                                      text_encoder_handles=[cls.handles.preprocess, cls.handles.encoder],
                                      embedding_cache_dir=cls.cache, validation_fraction=0.34),
        model=model_lib.Rank4ClassConfig(loss=losses.LossConfig(type="softmax")),
        batch_size=6, train_steps=4, eval_every=4, checkpoint_every=0, tensorboard=False, verbose=0,
        # The trained model's export is under test: no logistic-regression candidates, no baselines.
        baselines=False, linear_candidate=False)
    cls.export_dir = train.train(cls.config).export_dir

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def test_the_export_records_its_inputs(self):
    self.assertTrue(os.path.exists(os.path.join(self.export_dir, served.INPUTS_FILE)))

  def test_raw_texts_are_embedded_with_the_training_encoder(self):
    config, handles, cache = self.config, self.handles, self.cache
    lines = self.create_tempfile("new.txt", content="very good plot\n\nbad bad film\n").full_path
    output = os.path.join(self.create_tempdir().full_path, "p.jsonl")
    predictor = predict.Predictor(config.model_dir, embedding_cache_dir=cache)
    self.assertEqual(predictor.input_kind, "text")
    summary = predict.predict(predict.PredictConfig(config.model_dir, lines, output, top_k=2, progress=False),
                              predictor)
    self.assertEqual((summary.rows, summary.top_k_accuracy), (2, None))
    with open(output, encoding="utf-8") as f:
      records = [json.loads(line) for line in f]
    embeddings = text_embeddings.embed_texts(["very good plot", "bad bad film"],
                                             training_data.frozen_text_encoder(config.data,
                                                                               (handles.preprocess,
                                                                                handles.encoder)),
                                             cache)
    scores = predictor.model(embeddings).numpy()
    self.assertEqual([r["id"] for r in records], ["1", "2"])  # Blank lines are not instances.
    for record, row in zip(records, scores, strict=True):
      self.assertEqual(record["classes"], [predictor.class_names[i] for i in np.argsort(-row)])
      self.assertAllClose(record["scores"], np.sort(row)[::-1], atol=1e-5)

  def test_texts_seen_in_training_are_not_embedded_again(self):
    config, cache, texts = self.config, self.cache, self.TEXTS
    lines = self.create_tempfile("seen.txt", content="\n".join(texts[::-1]) + "\n").full_path
    output = os.path.join(self.create_tempdir().full_path, "seen.csv")
    embedded = []
    real = embedding_cache.compute_embeddings

    def counted(encoder, batch, *args):
      embedded.extend(batch)
      return real(encoder, batch, *args)

    with mock.patch.object(embedding_cache, "compute_embeddings", side_effect=counted), \
        mock.patch.object(text_encoder, "make_text_encoder", side_effect=AssertionError("encoder built")):
      summary = predict.predict(predict.PredictConfig(config.model_dir, lines, output, batch_size=4,
                                                      embedding_cache_dir=cache, progress=False))
    self.assertEqual(summary.rows, len(texts))
    self.assertEqual(embedded, [])  # Training embedded them (per text), so predict only reads them.

  def test_evaluate_reads_text_records_through_the_cache(self):
    config, handles, cache, texts = self.config, self.handles, self.cache, self.TEXTS
    records = os.path.join(self.root, "train.tfrecord")
    with mock.patch.object(embedding_cache, "compute_embeddings", side_effect=AssertionError("embedded")):
      report = evaluate.evaluate(evaluate.EvaluateConfig(config.model_dir, records, batch_size=4,
                                                         report_path="",
                                                         progress=False, embedding_cache_dir=cache))
    # The same numbers as the model on the cached vectors: top-1 accuracy over the 18 labelled texts.
    vectors = text_embeddings.embed_texts(
        texts, training_data.frozen_text_encoder(config.data, (handles.preprocess, handles.encoder)), cache)
    scores = predict.Predictor(config.model_dir, cache).model(vectors).numpy()
    labels = np.array([int("bad" in t) for t in texts])
    self.assertEqual(report["n"], len(texts))
    top_1 = np.argmax(scores, 1)
    self.assertAllEqual(report["confusion"]["counts"],
                        [[np.sum((labels == true) & (top_1 == best)) for best in (0, 1)] for true in (0, 1)])


class HybridTextExportTest(tf.test.TestCase):
  """A hybrid text run (TF-IDF beside an MLP on frozen embeddings): predict builds its export without the text
  encoder and reads the embedding branch's vectors from the embedding cache, with the scores of the export's
  graph (which runs the encoder on raw strings)."""

  TEXTS = ["good film", "very good film", "good plot", "bad film", "very bad plot", "bad plot"] * 3

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "plot", "very"]
    handles = bert_conversion.export_random_bert(os.path.join(cls.root, "bert"), vocab, hidden_size=8,
                                                 num_layers=1, num_heads=2, intermediate_size=8)
    schema = tfrecords.ExampleSchema(text_key="text", num_classes=2)
    cls.records = os.path.join(cls.root, "train.tfrecord")
    tfrecords.write_instances(cls.records, [tfrecords.ClassificationInstance(label=int("bad" in t), text=t)
                                            for t in cls.TEXTS], schema)
    with open(os.path.join(cls.root, "train.labels.json"), "w") as f:
      json.dump({"classes": ["positive", "negative"], "schema": schema.to_dict()}, f)
    cls.cache = os.path.join(cls.root, "cache")
    cls.config = train.Rank4ClassTrainConfig(
        model_dir=os.path.join(cls.root, "run"),
        data=training_data.DataConfig(train_files=cls.records, max_seq_length=8, text_mode="hybrid",
                                      text_encoder_handles=[handles.preprocess, handles.encoder],
                                      embedding_cache_dir=cls.cache, validation_fraction=0.34),
        model=model_lib.Rank4ClassConfig(
            instance_encoder=encoders.InstanceEncoderConfig(
                type="auto", mlp=encoders.MlpEncoderConfig(hidden_units=(4,)),
                tfidf=encoders.TfidfEncoderConfig(output_dim=4)),
            loss=losses.LossConfig(type="softmax")),
        batch_size=6, train_steps=4, eval_every=4, checkpoint_every=0, tensorboard=False, verbose=0,
        baselines=False, linear_candidate=False)
    cls.export_dir = train.train(cls.config).export_dir
    # The export's own graph: tf.keras's loader, the text encoder run on raw strings.
    graph_model = served.load_keras_model(cls.export_dir)
    cls.graph_score = staticmethod(served.make_score_fn(graph_model, tf.TensorSpec([None], tf.string)))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def _lines(self, texts: list[str]) -> str:
    return self.create_tempfile(content="\n".join(texts) + "\n").full_path

  def _predict_counting(self, texts: list[str], cache: str) -> tuple[list[dict], list[str]]:
    """predict's JSONL records of `texts` and the texts it ran through an encoder; building or loading a text
    encoder layer fails the test."""
    output = os.path.join(self.create_tempdir().full_path, "p.jsonl")
    embedded = []
    real = embedding_cache.compute_embeddings

    def counted(encoder, batch, *args):
      embedded.extend(batch)
      return real(encoder, batch, *args)

    with mock.patch.object(embedding_cache, "compute_embeddings", side_effect=counted):
      predict.predict(predict.PredictConfig(self.config.model_dir, self._lines(texts), output, top_k=2,
                                            batch_size=4, embedding_cache_dir=cache, progress=False))
    with open(output, encoding="utf-8") as f:
      return [json.loads(line) for line in f], embedded

  def _assert_graph_ranking(self, records: list[dict], texts: list[str]) -> None:
    scores = self.graph_score(tf.constant(texts)).numpy()
    names = ["positive", "negative"]
    for record, row in zip(records, scores, strict=True):
      self.assertEqual(record["classes"], [names[i] for i in np.argsort(-row, kind="stable")])
      self.assertAllClose(record["scores"], np.sort(row)[::-1], atol=1e-5)

  def test_export_records_its_text_encoder(self):
    inputs = served.read_inputs(self.export_dir)
    frozen = training_data.frozen_text_encoder(self.config.data, tuple(self.config.data.text_encoder_handles))
    # The identity (and so the cache rows) of the vectors training embedded.
    self.assertEqual(embedding_cache.encoder_identity(inputs.hybrid_text_encoder),
                     embedding_cache.encoder_identity(frozen))
    self.assertEqual(inputs.embedding_dim, 8)
    self.assertIsNone(inputs.frozen_text_encoder)

  def test_texts_seen_in_training_are_cache_hits_with_the_graphs_scores(self):
    texts = self.TEXTS[:6][::-1]
    with mock.patch.object(text_encoder.TextEncoder, "__init__", side_effect=AssertionError("encoder built")):
      predictor = predict.Predictor(self.config.model_dir, embedding_cache_dir=self.cache)
      records, embedded = self._predict_counting(texts, self.cache)
    self.assertIsNotNone(predictor.served.hybrid_text_encoder)
    self.assertEqual(embedded, [])  # Training embedded them; predict only reads them.
    self._assert_graph_ranking(records, texts)

  def test_new_texts_are_embedded_once_and_stored(self):
    cache = self.create_tempdir().full_path
    shutil.copytree(self.cache, cache, dirs_exist_ok=True)
    texts = ["very very good", "bad bad film", "good film"]
    records, embedded = self._predict_counting(texts, cache)
    self.assertCountEqual(embedded, texts[:2])
    self._assert_graph_ranking(records, texts)
    again, embedded = self._predict_counting(texts, cache)
    self.assertEqual((embedded, again), ([], records))

  def test_evaluate_reads_the_embeddings_from_the_cache(self):
    with mock.patch.object(embedding_cache, "compute_embeddings", side_effect=AssertionError("embedded")):
      report = evaluate.evaluate(evaluate.EvaluateConfig(self.config.model_dir, self.records, batch_size=4,
                                                         report_path="", progress=False,
                                                         embedding_cache_dir=self.cache))
    top_1 = np.argmax(self.graph_score(tf.constant(self.TEXTS)).numpy(), axis=1)
    labels = np.array([int("bad" in t) for t in self.TEXTS])
    self.assertEqual(report["n"], len(self.TEXTS))
    self.assertAllEqual(report["confusion"]["counts"],
                        [[np.sum((labels == true) & (top_1 == best)) for best in (0, 1)] for true in (0, 1)])

  def test_an_export_without_the_record_runs_the_encoder_in_its_graph(self):
    old = os.path.join(self.create_tempdir().full_path, "export")
    shutil.copytree(self.export_dir, old)
    inputs = served.read_inputs(old)
    inputs.hybrid_text_encoder = inputs.embedding_dim = None  # As 0.8 wrote it, without the model config.
    served.write_inputs(old, inputs)
    os.remove(os.path.join(old, served.MODEL_CONFIG_FILE))
    predictor = predict.Predictor(old, embedding_cache_dir=self.cache)
    self.assertIsNone(predictor.served.hybrid_text_encoder)
    names, scores = predictor.rank(self.TEXTS[:6], k=2)
    graph = self.graph_score(tf.constant(self.TEXTS[:6])).numpy()
    self.assertAllClose(scores, -np.sort(-graph, axis=1), atol=1e-6)


if __name__ == "__main__":
  tf.test.main()
