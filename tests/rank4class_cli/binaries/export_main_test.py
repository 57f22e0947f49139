"""Tests for rank4class_cli.binaries.export_main: flags -> ExportConfig, one-line errors, an end-to-end
export."""

import contextlib
import io
import os
import shlex
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.inference import export as export_lib
from rank4class.inference import serving
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_cli.binaries import export_main, predict_main
from rank4class_data.conversion import convert
from tests.rank4class_cli.cli_runner import parse_error, run_binary


def _parse(argv: list[str]) -> tuple[int, str]:
  """Runs the binary's flag parser; returns (exit code, stderr)."""
  return parse_error(export_main, argv)


class ExportMainTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    export_main.FLAGS.unparse_flags()
    super().tearDown()

  def test_flags_map_onto_the_config(self):
    export_main.parse_flags(["prog", "--model_dir=/r", "--retriever_dir=/d", "--export_dir=/o",
                             "--num_candidates=50", "--top_k=3", "--chunk_size=1000"])
    config = export_main.config_from_flags(export_main.FLAGS)
    self.assertEqual((config.kind, config.model_path, config.retriever_path, config.export_dir,
                      config.num_candidates, config.top_k, config.chunk_size),
                     ("two_stage", "/r", "/d", "/o", 50, 3, 1000))

  @parameterized.named_parameters(
      ("no_retriever", ["--model_dir=/r", "--export_dir=/o"], "--kind=two_stage needs --retriever_dir"),
      ("bad_kind", ["--model_dir=/r", "--export_dir=/o", "--kind=three"],
       "--kind=three: value should be one of <two_stage|zero_shot>"),
      ("bad_m", ["--model_dir=/r", "--retriever_dir=/d", "--export_dir=/o", "--num_candidates=0"],
       "--num_candidates=0 must be positive"),
      ("no_export_dir", ["--model_dir=/r"], "--export_dir"),
  )
  def test_bad_flags_are_one_line_errors(self, argv, expected):
    code, stderr = _parse(argv)
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1, msg=stderr)
    self.assertIn(expected, stderr)

  def test_main_exports_and_says_what_it_wrote(self):
    root = tempfile.mkdtemp(dir=self.create_tempdir().full_path)
    dirs = []
    for seed, interaction in enumerate(("dot", "concat")):
      tf.keras.utils.set_random_seed(seed)
      hidden = {} if interaction == "dot" else {"hidden_units": (8, 8)}
      model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)),
                                        class_encoders.get("one_hot", num_classes=12),
                                        interactions.get(interaction, **hidden))
      model(tf.zeros([1, 3]))
      dirs.append(serving.export_saved_model(model, os.path.join(root, interaction)))
    out = os.path.join(root, "two_stage")
    export_main.parse_flags(["prog", f"--model_dir={dirs[1]}", f"--retriever_dir={dirs[0]}",
                             f"--export_dir={out}", "--num_candidates=4", "--top_k=2"])
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
      export_main.main([])
    self.assertIn(f"Exported two_stage over 12 classes to {out}: inputs inputs -> candidate_ids, class_ids",
                  stdout.getvalue())
    hint = stdout.getvalue().strip().splitlines()[-1]
    self.assertEqual(hint, f"Next: rank4class-predict --model_dir={out} --input=<rank4class-convert "
                     ".tfrecord> --output=predictions.csv")
    # The hint runs as printed once its input is given: the converter's records of dense rows.
    rows = os.path.join(root, "rows.csv")
    with open(rows, "w") as f:
      f.write("a,b,c,label\n" + "".join(f"{i},{-i},{i % 3},{i % 12}\n" for i in range(5)))
    records = os.path.join(root, "rows.tfrecord")
    convert.convert_to_tfrecord(convert.ConvertConfig(rows, records, feature_columns=("a", "b", "c"),
                                                      labels_are_ids=True, num_classes=12))
    command = shlex.split(hint[len("Next: "):].replace("<rank4class-convert .tfrecord>", records).replace(
        "predictions.csv", os.path.join(root, "predictions.csv")))
    predict_main.parse_flags(["prog", *command[1:]])
    with contextlib.redirect_stdout(io.StringIO()):
      predict_main.main([])
    with open(os.path.join(root, "predictions.csv")) as f:
      self.assertLen(f.read().splitlines(), 6)
    served = tf.saved_model.load(out).signatures["serving_default"](inputs=tf.ones([2, 3]))
    self.assertEqual(served["candidate_ids"].shape, [2, 4])
    self.assertEqual(served["class_ids"].shape, [2, 2])
    self.assertTrue(np.isin(served["class_ids"].numpy()[0], served["candidate_ids"].numpy()[0]).all())


  def test_export_dir_holding_or_being_the_model_is_refused(self):
    run = self.create_tempdir().full_path
    model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(4,)),
                                      class_encoders.get("one_hot", num_classes=3), interactions.get("dot"))
    model(tf.zeros([1, 2]))
    export = serving.export_saved_model(model, os.path.join(run, "export"))
    with open(os.path.join(export, "saved_model.pb"), "rb") as f:
      before = f.read()
    for export_dir, message in ((run, f"--export_dir {run} contains --model_dir {export}: replacing the "
                                      "folder would delete the input; give --export_dir a folder that "
                                      "holds no input"),
                                (export, f"--export_dir and --model_dir name the same folder {export}: "
                                         "replacing --export_dir would delete the input")):
      result = run_binary(export_main, [f"--model_dir={run}", f"--retriever_dir={export}",
                                        f"--export_dir={export_dir}"])
      self.assertEqual(result.code, 1, result)
      self.assertEqual(result.stderr.splitlines(), [result.stderr.strip()])
      self.assertStartsWith(result.stderr, f"rank4class-export: error: {message}")
    with open(os.path.join(export, "saved_model.pb"), "rb") as f:
      self.assertEqual(f.read(), before)
    # An export beside the model's, inside the run, holds no input: it may be made again.
    os.makedirs(os.path.join(run, "two_stage"))
    with open(os.path.join(run, "two_stage", "saved_model.pb"), "w") as f:
      f.write("an earlier export")
    export_main.check_outputs(export_lib.ExportConfig(run, os.path.join(run, "two_stage"),
                                                      retriever_path=export))


if __name__ == "__main__":
  tf.test.main()
