"""Tests for the rank4class-evaluate binary: flags, one-line errors, and a run on real digits records."""

import contextlib
import io
import json
import os
import shutil
import tempfile

import tensorflow as tf
from absl.testing import parameterized

from rank4class import class_encoders, encoders, evaluate_main, interactions, serving
from rank4class import model as model_lib
from rank4class_data import datasets, tfrecords
from tests.rank4class_engine.cli_runner import parse_error, run_binary


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
                                      num_classes=10), interactions.get("dot"), class_names=digits.class_names)
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
    argv = evaluate_main.parse_flags(["prog", f"--model_dir={self.model_dir}", f"--data_files={self.records}",
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

  def test_flags_map_onto_the_config(self):
    evaluate_main.parse_flags(["prog", f"--model_dir={self.model_dir}", f"--data_files={self.records}",
                               "--input_format=elwc", "--metric_ks=1,3,10", "--report_path=/tmp/r.json",
                               "--chunk_size=512"])
    config = evaluate_main.config_from_flags(evaluate_main.FLAGS)
    self.assertEqual((config.input_format, config.metric_ks, config.report_path, config.chunk_size),
                     ("elwc", (1, 3, 10), "/tmp/r.json", 512))

  def test_missing_model_dir_is_a_one_line_error(self):
    code, stderr = _parse([f"--data_files={self.records}"])
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1)
    self.assertIn("--model_dir", stderr)

  def test_model_dir_without_export_is_a_one_line_error(self):
    code, stderr = _parse([f"--model_dir={self.root}/nothing", f"--data_files={self.records}"])
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1)
    self.assertIn("--model_dir", stderr)
    self.assertIn("nothing", stderr)

  def test_unknown_input_format_names_the_allowed_values(self):
    code, stderr = _parse([f"--model_dir={self.model_dir}", f"--data_files={self.records}", "--input_format=csv"])
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1)
    self.assertIn("--input_format=csv", stderr)
    self.assertIn("example, elwc", stderr)


  def test_records_with_a_label_outside_the_model_classes_are_one_line_and_exit_1(self):
    schema = tfrecords.ExampleSchema(text_key=None, image_key="image", image_shape=(8, 8, 1), num_classes=12)
    bad = os.path.join(self.root, "bad.tfrecord")
    tfrecords.write_instances(bad, [tfrecords.ClassificationInstance(label=int(y), image=x) for x, y in
                                    zip(self.images[:4], [1, 2, 11, 3], strict=True)], schema)
    result = run_binary(evaluate_main, [f"--model_dir={self.model_dir}", f"--data_files={bad}",
                                        f"--report_path={self.root}/bad_report.json"])
    self.assertEqual(result.code, 1, result)
    self.assertEqual(result.stderr.splitlines(), [result.stderr.strip()])
    self.assertRegex(result.stderr, r"^rank4class-evaluate: error: .*bad\.tfrecord.*label")
    self.assertFalse(os.path.exists(f"{self.root}/bad_report.json"))

  def test_missing_data_files_are_one_line(self):
    result = run_binary(evaluate_main, [f"--model_dir={self.model_dir}", f"--data_files={self.root}/none-*.tfrecord"])
    self.assertIn(result.code, (1, 2))
    self.assertEqual(result.stderr.splitlines(), [result.stderr.strip()])
    self.assertRegex(result.stderr, r"^rank4class-evaluate: error: .*none-\*\.tfrecord")

if __name__ == "__main__":
  tf.test.main()
