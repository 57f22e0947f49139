"""Tests for the rank4class-evaluate binary: flags, one-line errors, and a run on real digits records."""

import contextlib
import io
import json
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.inference import serving
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class.training import train, training_data
from rank4class_cli.binaries import evaluate_main
from rank4class_data import datasets
from rank4class_data.records import elwc, tfrecords
from rank4class_data.validation import write_json
from tests.rank4class_cli.cli_runner import BinaryRun, parse_error, run_binary


def _parse(argv: list[str]) -> tuple[int, str]:
  """Runs the binary's flag parser; returns (exit code, stderr)."""
  return parse_error(evaluate_main, argv)


class EvaluateMainTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    digits = datasets.load_image_classification("digits", "test")
    cls.images, cls.labels = digits.images[:64], digits.labels[:64]
    schema = tfrecords.ExampleSchema(text_key=None, image_key="image", image_shape=(8, 8, 1), num_classes=10)
    cls.records = os.path.join(cls.root, "test.tfrecord")
    tfrecords.write_instances(cls.records, [tfrecords.ClassificationInstance(label=int(y), image=x)
                                            for x, y in zip(cls.images, cls.labels, strict=True)], schema)
    # An untrained model is enough to check the binary's plumbing; quality is tested in evaluate_test.
    model = model_lib.Rank4ClassModel(encoders.get("image", filters=(4,)), class_encoders.get("one_hot",
                                      num_classes=10), interactions.get("dot"),
                                      class_names=digits.class_names)
    model(cls.images[:2])
    cls.model_dir = os.path.join(cls.root, "run")
    serving.export_saved_model(model, os.path.join(cls.model_dir, "export"), input_dtype=tf.uint8)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def tearDown(self):
    evaluate_main.FLAGS.unparse_flags()
    super().tearDown()

  def test_main_prints_the_table_and_writes_the_report(self):
    argv = evaluate_main.parse_flags(["prog", f"--model_dir={self.model_dir}", f"--input={self.records}",
                                      "--batch_size=16"])
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
      evaluate_main.main(argv)
    self.assertRegex(stdout.getvalue(), r"ndcg_5\s+\d+\.\d\d")
    self.assertRegex(stdout.getvalue(), r"instances\s+64")
    with open(os.path.join(self.model_dir, "eval_report.json")) as f:
      report = json.load(f)
    self.assertEqual(report["n"], 64)
    self.assertEqual(sum(map(sum, report["confusion"]["counts"])), 64)
    self.assertLen(report["per_class_recall"], 10)

  def test_an_image_folder_gives_the_report_of_the_same_records(self):
    folder = os.path.join(self.root, "images")
    for i, (image, label) in enumerate(zip(self.images, self.labels, strict=True)):
      os.makedirs(os.path.join(folder, str(label)), exist_ok=True)
      tf.io.write_file(os.path.join(folder, str(label), f"{i:03d}.png"), tf.io.encode_png(image))
    reports = {}
    for name, data in (("records", self.records), ("folder", folder)):
      path = os.path.join(self.root, f"{name}_report.json")
      result = run_binary(evaluate_main, [f"--model_dir={self.model_dir}", f"--input={data}",
                                          f"--report_path={path}", "--batch_size=16"])
      self.assertEqual(result.code, 0, result)
      with open(path) as f:
        reports[name] = json.load(f)
    self.assertEqual(reports["folder"]["input_format"], "rows")
    self.assertEqual(reports["folder"]["n"], 64)
    self.assertAllClose(reports["folder"]["metrics"], reports["records"]["metrics"], atol=1e-6)
    self.assertEqual(reports["folder"]["confusion"], reports["records"]["confusion"])

  def test_report_never_overwrites_the_model_or_the_records(self):
    graph = os.path.join(self.model_dir, "export", "saved_model.pb")
    for target, flag in ((graph, "--model_dir"), (self.records, "--input")):
      with open(target, "rb") as f:
        before = f.read()
      result = run_binary(evaluate_main, [f"--model_dir={self.model_dir}", f"--input={self.records}",
                                          f"--report_path={target}"])
      self.assertEqual(result.code, 1)
      self.assertEqual(result.stderr, f"rank4class-evaluate: error: --report_path and {flag} name the same "
                       f"file {target}: writing --report_path would overwrite the input; give --report_path "
                       "a path outside the inputs\n")
      with open(target, "rb") as f:
        self.assertEqual(f.read(), before)

  def test_flags_map_onto_the_config(self):
    evaluate_main.parse_flags(["prog", f"--model_dir={self.model_dir}", f"--input={self.records}",
                               "--input_format=elwc", "--metric_ks=1,3,10", "--report_path=/tmp/r.json",
                               "--chunk_size=512"])
    config = evaluate_main.config_from_flags(evaluate_main.FLAGS)
    self.assertEqual((config.input_format, config.metric_ks, config.report_path, config.chunk_size),
                     ("elwc", (1, 3, 10), "/tmp/r.json", 512))

  def test_missing_model_dir_is_a_one_line_error(self):
    code, stderr = _parse([f"--input={self.records}"])
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1)
    self.assertIn("--model_dir", stderr)

  def test_model_dir_without_export_is_a_one_line_error(self):
    code, stderr = _parse([f"--model_dir={self.root}/nothing", f"--input={self.records}"])
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1)
    self.assertIn("--model_dir", stderr)
    self.assertIn("nothing", stderr)

  def test_unknown_input_format_names_the_allowed_values(self):
    code, stderr = _parse([f"--model_dir={self.model_dir}", f"--input={self.records}", "--input_format=csv"])
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1)
    self.assertIn("--input_format=csv", stderr)
    self.assertIn("auto, example, elwc, rows", stderr)


  def test_records_with_a_label_outside_the_model_classes_are_one_line_and_exit_1(self):
    schema = tfrecords.ExampleSchema(text_key=None, image_key="image", image_shape=(8, 8, 1), num_classes=12)
    bad = os.path.join(self.root, "bad.tfrecord")
    tfrecords.write_instances(bad, [tfrecords.ClassificationInstance(label=int(y), image=x) for x, y in
                                    zip(self.images[:4], [1, 2, 11, 3], strict=True)], schema)
    result = run_binary(evaluate_main, [f"--model_dir={self.model_dir}", f"--input={bad}",
                                        f"--report_path={self.root}/bad_report.json"])
    self.assertEqual(result.code, 1, result)
    self.assertEqual(result.stderr.splitlines(), [result.stderr.strip()])
    self.assertRegex(result.stderr, r"^rank4class-evaluate: error: .*bad\.tfrecord.*label")
    self.assertFalse(os.path.exists(f"{self.root}/bad_report.json"))

  def test_missing_data_files_are_one_line(self):
    result = run_binary(evaluate_main,
                        [f"--model_dir={self.model_dir}", f"--input={self.root}/none-*.tfrecord"])
    self.assertIn(result.code, (1, 2))
    self.assertEqual(result.stderr.splitlines(), [result.stderr.strip()])
    self.assertRegex(result.stderr, r"^rank4class-evaluate: error: .*none-\*\.tfrecord")


_CLASSES = ["ant", "bee", "cat"]
_CENTERS = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]], np.float32)


def _points(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """`n` points around three well-apart centers (class i % 3), 2-D."""
  labels = np.arange(n) % 3
  noise = np.random.default_rng(seed).normal(scale=0.3, size=(n, 2))
  return (_CENTERS[labels] + noise).astype(np.float32), labels


def _example(label: tf.train.Feature, point: np.ndarray) -> tf.train.Example:
  return tf.train.Example(features=tf.train.Features(feature={"label": label,
                                                              "features": elwc.to_feature(point)}))


# The class of an "example" record in each form training accepts: an int64 id, an integral float, a class
# name.
_CLASS_FORMS = {"int64": int, "float": float, "name": lambda i: _CLASSES[i]}


class LabelFormsTest(tf.test.TestCase, parameterized.TestCase):
  """A tiny trained dense model evaluated on one set of instances whose classes are stored as int64 ids,
  integral floats or class names, in tf.Examples and in ELWC lists (with int64 or float relevance labels)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    schema = tfrecords.ExampleSchema(text_key=None, dense_key="features", dense_dim=2, num_classes=3)
    for name, n, seed in (("train", 60, 0), ("val", 15, 1)):
      points, labels = _points(n, seed)
      instances = [tfrecords.ClassificationInstance(label=int(y), dense=x)
                   for x, y in zip(points, labels, strict=True)]
      tfrecords.write_instances(os.path.join(cls.root, f"{name}.tfrecord"), instances, schema)
    write_json(os.path.join(cls.root, "train.labels.json"), {"classes": _CLASSES, "schema": schema.to_dict()})
    cls.model_dir = os.path.join(cls.root, "run")
    data = training_data.DataConfig(train_files=os.path.join(cls.root, "train.tfrecord"),
                                    validation_files=os.path.join(cls.root, "val.tfrecord"))
    train.train(train.Rank4ClassTrainConfig(
        model_dir=cls.model_dir, data=data,
        optimizer=train.OptimizerConfig(learning_rate=0.05), batch_size=20, train_steps=30, eval_every=30,
        checkpoint_every=0, tensorboard=False, verbose=0, baselines=False, calibrate=False,
        linear_candidate=False))  # The trained model is what rank4class-evaluate reads here.
    cls.points, cls.labels = _points(12, 2)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def _examples(self, name: str, classes: list) -> str:
    path = os.path.join(self.root, f"{name}.tfrecord")
    tfrecords.write_tfrecord(path, [_example(elwc.to_feature(c), x) for c, x in zip(classes, self.points,
                                                                                    strict=True)])
    return path

  def _lists(self, name: str, class_form, relevance_form) -> str:
    """One list per point: its class (relevance 1) and the next class (relevance 0)."""
    lists = [elwc.make_elwc([{"class_id": class_form(int(y)), "label": relevance_form(1)},
                             {"class_id": class_form(int(y + 1) % 3), "label": relevance_form(0)}],
                            context={"features": x}) for x, y in zip(self.points, self.labels, strict=True)]
    path = os.path.join(self.root, f"{name}.tfrecord")
    elwc.write_elwc(path, lists)
    return path

  def _evaluate(self, path: str, *flags: str) -> tuple[BinaryRun, dict | None]:
    report_path = os.path.join(self.root, os.path.basename(path) + ".report.json")
    result = run_binary(evaluate_main, [f"--model_dir={self.model_dir}", f"--input={path}",
                                        f"--report_path={report_path}", "--batch_size=5", *flags])
    if result.code:
      return result, None
    with open(report_path, encoding="utf-8") as f:
      return result, json.load(f)

  def _rows(self, name: str, classes: list[str]) -> str:
    path = os.path.join(self.root, f"{name}.csv")
    with open(path, "w", encoding="utf-8") as f:
      f.write("x,y,label\n")
      f.writelines(f"{x:.6f},{y:.6f},{c}\n" for (x, y), c in zip(self.points, classes, strict=True))
    return path

  def test_row_files_give_the_report_of_the_same_records(self):
    _, records = self._evaluate(self._examples("examples_for_rows", [int(y) for y in self.labels]))
    rows = self._rows("rows", [_CLASSES[y] for y in self.labels])
    result, report = self._evaluate(rows, "--feature_columns=x,y")  # --input_format=auto: rows for a .csv.
    self.assertEqual(result.code, 0, result)
    self.assertIn("Rows: ", result.stderr)
    self.assertEqual((report["n"], report["data_files"], report["input_format"]), (12, rows, "rows"))
    for name, value in records["metrics"].items():
      # Points written with 6 decimals.
      self.assertAllClose(report["metrics"][name], value, atol=1e-5, msg=name)
    self.assertEqual(report["per_class_recall"], records["per_class_recall"])

  def test_a_row_whose_class_the_model_lacks_is_one_located_line_or_left_out(self):
    classes = [_CLASSES[y] for y in self.labels]
    classes[4] = "dog"
    rows = self._rows("rows_with_dog", classes)
    result, _ = self._evaluate(rows, "--feature_columns=x,y")
    self.assertEqual(result.code, 1, result)
    self.assertEqual(result.stderr.splitlines(), [result.stderr.strip()])
    self.assertIn(f"{rows}", result.stderr)
    self.assertIn("dog", result.stderr)
    result, report = self._evaluate(rows, "--feature_columns=x,y", "--bad_rows=skip")
    self.assertEqual(result.code, 0, result)
    self.assertEqual(report["n"], 11)
    self.assertIn("1 bad row left out", result.stderr)

  def test_example_classes_as_int64_floats_or_names_give_one_report(self):
    reports = {}
    for form, to_class in _CLASS_FORMS.items():
      result, reports[form] = self._evaluate(self._examples(f"examples_{form}", [to_class(int(y))
                                                                                 for y in self.labels]))
      self.assertEqual(result.code, 0, (form, result))
    self.assertEqual(reports["int64"]["n"], 12)
    self.assertGreater(reports["int64"]["metrics"]["accuracy"], 0.9)  # Trained: chance is 1/3.
    for form in ("float", "name"):
      self.assertAllClose(reports[form]["metrics"], reports["int64"]["metrics"], msg=form)
      self.assertEqual(reports[form]["confusion"], reports["int64"]["confusion"], msg=form)

  def test_a_file_mixing_the_forms_is_read_record_by_record(self):
    forms = list(_CLASS_FORMS.values())
    mixed = [forms[i % 3 if i else 0](int(y)) for i, y in enumerate(self.labels)]  # The first record: int64.
    _, expected = self._evaluate(self._examples("examples_int64_too", [int(y) for y in self.labels]))
    result, report = self._evaluate(self._examples("examples_mixed", mixed))
    self.assertEqual(result.code, 0, result)
    self.assertAllClose(report["metrics"], expected["metrics"])

  def test_elwc_class_ids_as_floats_or_names_and_int64_relevance_give_one_report(self):
    # Lists as TF-Ranking writes them (int64 class ids, float relevance), with float ids and int64 relevance,
    # and with class names.
    reports = {}
    for name, class_form, relevance_form in (("int64_ids", int, float), ("float_ids", float, int),
                                             ("name_ids", _CLASS_FORMS["name"], float)):
      result, reports[name] = self._evaluate(self._lists(f"lists_{name}", class_form, relevance_form),
                                             "--input_format=elwc")
      self.assertEqual(result.code, 0, (name, result))
    self.assertEqual((reports["int64_ids"]["n"], reports["int64_ids"]["num_items"]), (12, 24))
    for name in ("float_ids", "name_ids"):
      self.assertAllClose(reports[name]["metrics"], reports["int64_ids"]["metrics"], msg=name)

  @parameterized.named_parameters(
      ("unknown_name", ["ant", "bee", "wasp"], "row 3, field 'label': the record has unknown class name "
                                               "'wasp'; expected one of the model's 3 classes ('ant', "
                                               "'bee', 'cat')."),
      ("fraction", [0.0, 1.5, 2.0], "row 2, field 'label': the record has class id 1.5, not an integer; "
                                    "expected an integral class id in [0, 3) or a class name."),
  )
  def test_a_bad_class_is_one_located_line(self, first_classes, message):
    classes = first_classes + [_CLASSES[int(y)] for y in self.labels[3:]]
    path = self._examples("examples_bad", classes)
    result, _ = self._evaluate(path)
    self.assertEqual(result.code, 1, result)
    self.assertEqual(result.stderr.splitlines(), [f"rank4class-evaluate: error: {path}, {message}"])

  def test_an_unknown_class_name_in_a_list_is_one_located_line(self):
    path = self._lists("lists_bad", lambda i: ["ant", "bee", "wasp"][i], float)
    result, _ = self._evaluate(path, "--input_format=elwc")
    self.assertEqual(result.code, 1, result)
    # List 2 (a class-1 point) names its class, then class 2 ("wasp"), second.
    self.assertEqual(result.stderr.splitlines(), [
        f"rank4class-evaluate: error: {path}, row 2, field 'class_id': example 2 has unknown class name "
        "'wasp'; expected one of the model's 3 classes ('ant', 'bee', 'cat')."])

  def test_an_out_of_range_int64_class_id_in_a_list_is_one_located_line(self):
    path = self._lists("lists_out_of_range", lambda i: i + 1, float)  # Class 2 becomes id 3.
    result, _ = self._evaluate(path, "--input_format=elwc")
    self.assertEqual(result.code, 1, result)
    self.assertRegex(result.stderr, r"^rank4class-evaluate: error: .*lists_out_of_range\.tfrecord, row \d+, "
                                    r"field class_id: missing class id, or one outside \[0, 3\)")
    self.assertEqual(result.stderr.splitlines(), [result.stderr.strip()])


if __name__ == "__main__":
  tf.test.main()
