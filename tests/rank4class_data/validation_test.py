"""Tests for rank4class_data.validation: located error messages and all-or-nothing writes."""

import dataclasses
import itertools
import json
import os
import pathlib
import shutil
import stat
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.inference import serving
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_cli.binaries import (
  convert_encoder_main,
  convert_main,
  evaluate_main,
  export_main,
  pairwise_main,
  predict_main,
  ranksvm_main,
  train_main,
)
from rank4class_data.records import tfrecords
from rank4class_data.validation import (
  DataError,
  FieldError,
  atomic_directory,
  atomic_output,
  atomic_paths,
  check_choice,
  check_range,
  check_widths,
  refuse_output_over_inputs,
  require_file,
  write_json,
)
from tests.rank4class_cli.cli_runner import run_binary


class DataErrorTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("full", dict(row=3, line=5, field="text", expected="a non-empty text"),
       "in.csv, row 3 (line 5), field 'text': empty text; expected a non-empty text."),
      ("row_equals_line", dict(row=4, line=4, field="text"), "in.csv, row 4, field 'text': empty text."),
      ("header", dict(row=0, line=1, field="text"), "in.csv, header row (line 1), field 'text': empty text."),
      ("whole_file", dict(), "in.csv: empty text."),
  )
  def test_message_names_location(self, kwargs, message):
    error = DataError("in.csv", "empty text", **kwargs)
    self.assertEqual(str(error), message)
    self.assertIsInstance(error, ValueError)

  def test_field_error_at_locates_it(self):
    error = FieldError("label", "negative label -1", "a class id >= 0").at("in.tsv", 7, line=9)
    self.assertEqual(str(error),
                     "in.tsv, row 7 (line 9), field 'label': negative label -1; expected a class id >= 0.")
    self.assertEqual((error.path, error.row, error.field, error.line), ("in.tsv", 7, "label", 9))


class CheckChoiceTest(tf.test.TestCase):

  def test_allowed_value_passes(self):
    check_choice("loss", "mse", ("softmax", "mse"))
    check_choice("sampler", None, (None, "uniform"))
    check_choice("pivot", "none", iter(["condition", "none"]))  # Any iterable, read once.

  def test_message_names_setting_choices_and_value(self):
    with self.assertRaises(ValueError) as raised:
      check_choice("loss", "sofmax", ("softmax", "mse"))
    self.assertEqual(str(raised.exception), "`loss` must be one of ['softmax', 'mse'], got 'sofmax'.")

  def test_case_and_type_matter(self):
    with self.assertRaisesRegex(ValueError, r"got 'MSE'\.$"):
      check_choice("loss", "MSE", ("softmax", "mse"))
    with self.assertRaisesRegex(ValueError, r"`k` must be one of \[1, 5\], got '1'\."):
      check_choice("k", "1", (1, 5))


class CheckRangeTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("inside", 0.5, dict(low=0.0, high=1.0, high_inclusive=False)),
      ("low_bound_included", 0.0, dict(low=0.0, high=1.0, high_inclusive=False)),
      ("high_bound_included", 1, dict(low=0, high=1)),
      ("low_only", 10**12, dict(low=1, integer=True)),
      ("high_only", -3.5, dict(high=0.0)),
      ("numpy_integer", np.int64(7), dict(low=1, integer=True)),
      ("numpy_float", np.float32(0.25), dict(low=0.0, low_inclusive=False)),
      ("no_bounds", -1e300, dict()),
  )
  def test_values_inside_pass(self, value, bounds):
    check_range("x", value, **bounds)

  @parameterized.named_parameters(
      ("half_open_interval", 1.0, dict(low=0.0, high=1.0, high_inclusive=False),
       "`dropout` must be in [0, 1), got 1.0."),
      ("open_interval", 0.0, dict(low=0.0, high=1.0, low_inclusive=False, high_inclusive=False),
       "`dropout` must be in (0, 1), got 0.0."),
      ("closed_interval", -0.5, dict(low=0, high=1), "`dropout` must be in [0, 1], got -0.5."),
      ("low_only", 0, dict(low=1), "`dropout` must be >= 1, got 0."),
      ("exclusive_low", 0.0, dict(low=0.0, low_inclusive=False), "`dropout` must be > 0, got 0.0."),
      ("high_only", 3, dict(high=2), "`dropout` must be <= 2, got 3."),
      ("exclusive_high", 2, dict(high=2, high_inclusive=False), "`dropout` must be < 2, got 2."),
      ("fractional_bound", 0.1, dict(low=0.5), "`dropout` must be >= 0.5, got 0.1."),
      ("integer_below", 0, dict(low=1, integer=True), "`dropout` must be an integer >= 1, got 0."),
      ("integer_as_float", 2.0, dict(low=1, integer=True), "`dropout` must be an integer >= 1, got 2.0."),
      ("infinite_integer", float("inf"), dict(low=1, integer=True),
       "`dropout` must be an integer >= 1, got inf."),
      ("nan", float("nan"), dict(low=0.0), "`dropout` must be >= 0, got nan."),
      ("none", None, dict(low=0.0), "`dropout` must be >= 0, got None."),
      ("bool", True, dict(low=0, high=1), "`dropout` must be in [0, 1], got True."),
      ("string", "0.5", dict(), "`dropout` must be a number, got '0.5'."),
      ("string_integer", "3", dict(integer=True), "`dropout` must be an integer, got '3'."),
  )
  def test_message_names_setting_interval_and_value(self, value, bounds, message):
    with self.assertRaises(ValueError) as raised:
      check_range("dropout", value, **bounds)
    self.assertEqual(str(raised.exception), message)


class CheckWidthsTest(tf.test.TestCase, parameterized.TestCase):
  def test_valid_widths_come_back_as_a_tuple_of_ints(self):
    self.assertEqual(check_widths("filters", [8, 4]), (8, 4))
    self.assertEqual(check_widths("widths", np.array([16, 32])), (16, 32))
    self.assertEqual(check_widths("hidden_units", (), allow_empty=True), ())

  @parameterized.parameters(
    (dict(name="filters", units=()), r"`filters` must list at least one layer width, got \(\)."),
    (dict(name="hidden_units", units=[4, 0], allow_empty=True),
     r"`hidden_units` must be positive integers, got \(4, 0\)."),
    (dict(name="hidden_units", units=[True]), "positive integers"),
    (dict(name="widths", units=[2.0]), r"`widths` must be positive integers, got \(2.0,\)."),
  )
  def test_bad_widths_raise_naming_the_setting(self, arguments, message):
    with self.assertRaisesRegex(ValueError, message):
      check_widths(**arguments)


class RequireFileTest(tf.test.TestCase):

  def test_existing_file_is_returned(self):
    path = self.create_tempfile(content="x").full_path
    self.assertEqual(require_file(path), path)

  def test_missing_file_raises_naming_path_and_hint(self):
    path = os.path.join(self.create_tempdir().full_path, "absent.csv")
    with self.assertRaisesRegex(FileNotFoundError, f"{path}: no such file; pip install it"):
      require_file(path, "pip install it")


class AtomicOutputTest(tf.test.TestCase):

  def test_success_writes_file_with_default_permissions(self):
    folder = self.create_tempdir().full_path
    path = os.path.join(folder, "out.txt")
    with atomic_output(path) as f:
      f.write("hello\n")
      self.assertFalse(os.path.exists(path))  # Not visible until complete.
    with open(path) as f:
      self.assertEqual(f.read(), "hello\n")
    self.assertEqual(os.listdir(folder), ["out.txt"])
    umask = os.umask(0)
    os.umask(umask)
    self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o666 & ~umask)

  def test_error_leaves_no_file(self):
    folder = self.create_tempdir().full_path
    with self.assertRaises(RuntimeError):
      with atomic_output(os.path.join(folder, "out.txt")) as f:
        f.write("half")
        raise RuntimeError("boom")
    self.assertEmpty(os.listdir(folder))

  def test_error_keeps_previous_file(self):
    path = self.create_tempfile("out.txt", content="old").full_path
    with self.assertRaises(RuntimeError):
      with atomic_output(path) as f:
        f.write("new")
        raise RuntimeError("boom")
    with open(path) as f:
      self.assertEqual(f.read(), "old")
    self.assertLen(os.listdir(os.path.dirname(path)), 1)

  def test_missing_folder_raises(self):
    path = os.path.join(self.create_tempdir().full_path, "no", "out.txt")
    with self.assertRaisesRegex(FileNotFoundError, "output folder .* does not exist"):
      with atomic_output(path):
        pass


@dataclasses.dataclass
class _Point:
  x: int
  y: float


class WriteJsonTest(tf.test.TestCase):

  def test_writes_sorted_indented_json_creating_the_folder(self):
    folder = os.path.join(self.create_tempdir().full_path, "new", "sub")
    path = os.path.join(folder, "a.json")
    write_json(path, {"b": 1, "a": [1, 2]})
    self.assertEqual(os.listdir(folder), ["a.json"])  # No temporary file left.
    with open(path) as f:
      self.assertEqual(f.read(), '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n')

  def test_converts_numpy_and_other_values(self):
    path = os.path.join(self.create_tempdir().full_path, "a.json")
    write_json(path, {"f": np.float32(1.5), "i": np.int64(3), "b": np.bool_(True), "array": np.arange(3),
                      "matrix": np.eye(2, dtype=np.float32), "point": _Point(1, 0.25), "set": {3, 1},
                      "path": pathlib.Path("/x/y"), "tuple": (1, 2), "other": complex(1, 2)})
    with open(path) as f:
      self.assertEqual(json.load(f), {"f": 1.5, "i": 3, "b": True, "array": [0, 1, 2],
                                      "matrix": [[1.0, 0.0], [0.0, 1.0]], "point": {"x": 1, "y": 0.25},
                                      "set": [1, 3], "path": "/x/y", "tuple": [1, 2], "other": "(1+2j)"})

  def test_error_keeps_previous_file(self):
    path = self.create_tempfile("a.json", content="old").full_path
    with self.assertRaises(ValueError):
      write_json(path, {"circular": self._circular()})
    with open(path) as f:
      self.assertEqual(f.read(), "old")
    self.assertLen(os.listdir(os.path.dirname(path)), 1)

  @staticmethod
  def _circular() -> list:
    value: list = []
    value.append(value)
    return value


class AtomicPathsTest(tf.test.TestCase):

  def test_all_files_appear_together(self):
    folder = self.create_tempdir().full_path
    paths = [os.path.join(folder, "a.bin"), os.path.join(folder, "b.json")]
    with atomic_paths(*paths) as temps:
      for temp, content in zip(temps, ["A", "B"], strict=True):
        with open(temp, "w") as f:
          f.write(content)
      self.assertFalse(any(os.path.exists(p) for p in paths))
    self.assertCountEqual(os.listdir(folder), ["a.bin", "b.json"])

  def test_error_leaves_no_file(self):
    folder = self.create_tempdir().full_path
    with self.assertRaises(ValueError):
      with atomic_paths(os.path.join(folder, "a.bin"), os.path.join(folder, "b.json")) as temps:
        with open(temps[0], "w") as f:
          f.write("A")
        raise ValueError("bad row")
    self.assertEmpty(os.listdir(folder))


class AtomicDirectoryTest(tf.test.TestCase):

  def test_success_creates_folder_with_default_permissions(self):
    parent = self.create_tempdir().full_path
    path = os.path.join(parent, "nested", "model")
    with atomic_directory(path) as temp:
      with open(os.path.join(temp, "saved_model.pb"), "w") as f:
        f.write("graph")
      self.assertFalse(os.path.exists(path))  # Not visible until complete.
    self.assertEqual(os.listdir(path), ["saved_model.pb"])
    self.assertEqual(os.listdir(os.path.dirname(path)), ["model"])
    umask = os.umask(0)
    os.umask(umask)
    self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o777 & ~umask)

  def test_success_replaces_previous_folder(self):
    parent = self.create_tempdir().full_path
    path = os.path.join(parent, "model")
    os.makedirs(path)
    with open(os.path.join(path, "old.txt"), "w") as f:
      f.write("old")
    with atomic_directory(path) as temp:
      with open(os.path.join(temp, "new.txt"), "w") as f:
        f.write("new")
    self.assertEqual(os.listdir(path), ["new.txt"])
    self.assertEqual(os.listdir(parent), ["model"])

  def test_error_keeps_previous_folder_and_leaves_nothing_else(self):
    parent = self.create_tempdir().full_path
    path = os.path.join(parent, "model")
    os.makedirs(path)
    with open(os.path.join(path, "old.txt"), "w") as f:
      f.write("old")
    with self.assertRaises(RuntimeError):
      with atomic_directory(path) as temp:
        with open(os.path.join(temp, "half.txt"), "w") as f:
          f.write("half")
        raise RuntimeError("boom")
    self.assertEqual(os.listdir(path), ["old.txt"])
    self.assertEqual(os.listdir(parent), ["model"])



def _write(path: str, content: str = "x") -> str:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(content)
  return path


class RefuseOutputOverInputsTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    self.data = _write(os.path.join(self.root, "in.csv"), "a,b\n1,2\n")

  def _variant(self, variant: str) -> str:
    """The input itself, a symbolic link to it or a hard link to it."""
    if variant == "same":
      return self.data
    link = os.path.join(self.root, f"{variant}.csv")
    (os.symlink if variant == "symlink" else os.link)(self.data, link)
    return link

  @parameterized.named_parameters(
      ("same", "same", r"^--output and --input name the same file .*in\.csv: writing --output would "
                       r"overwrite the input; give --output a path outside the inputs$"),
      ("symlink", "symlink", r"^--output .*symlink\.csv and --input .*in\.csv are the same file \(a symbolic "
                             r"link\): writing --output would overwrite the input"),
      ("hardlink", "hardlink", r"^--output .*hardlink\.csv and --input .*in\.csv are the same file \(a hard "
                               r"link\): writing --output would overwrite the input"),
  )
  def test_output_file_that_is_an_input_is_refused(self, variant, message):
    output = self._variant(variant)
    with self.assertRaisesRegex(ValueError, message):
      refuse_output_over_inputs({"--output": output}, {"--input": self.data})

  def test_other_outputs_pass(self):
    refuse_output_over_inputs({"--output": os.path.join(self.root, "out.csv"), "--rejects": None},
                              {"--input": self.data, "--label_vocab": None})
    _write(os.path.join(self.root, "old.csv"))
    refuse_output_over_inputs({"--output": os.path.join(self.root, "old.csv")}, {"--input": self.data})

  def test_comma_separated_globs_are_expanded(self):
    other = _write(os.path.join(self.root, "parts", "b.csv"))
    with self.assertRaisesRegex(ValueError, r"^--output and --input name the same file .*parts/b\.csv"):
      refuse_output_over_inputs({"--output": other}, {"--input": f"{self.data}, {self.root}/parts/*.csv"})

  def test_output_through_a_linked_folder_is_refused(self):
    os.symlink(self.root, os.path.join(self.root, "alias"))
    with self.assertRaisesRegex(ValueError, r"a symbolic link"):
      refuse_output_over_inputs({"--output": os.path.join(self.root, "alias", "in.csv")},
                                {"--input": self.data})

  def test_input_folder_stands_for_its_files(self):
    folder = os.path.join(self.root, "photos")
    image = _write(os.path.join(folder, "cat", "1.png"))
    notes = _write(os.path.join(folder, "notes.txt"))
    with self.assertRaisesRegex(ValueError, r"--output and --input name the same file .*cat/1\.png"):
      refuse_output_over_inputs({"--output": image}, {"--input": [folder]})
    with self.assertRaisesRegex(ValueError, r"--output and --input name the same folder .*photos: "):
      refuse_output_over_inputs({"--output": folder}, {"--input": [folder]})
    # A new file in an input folder is no input; with `folder_files`, only the files the binary reads are.
    refuse_output_over_inputs({"--output": os.path.join(folder, "predictions.csv")}, {"--input": [folder]})
    refuse_output_over_inputs({"--output": notes}, {"--input": [folder]},
                              folder_files={"--input": lambda path: [image]})

  def test_folder_written_into_must_not_be_an_input(self):
    with self.assertRaisesRegex(ValueError, r"^--model_dir and --train_files name the same file .*in\.csv: "
                                            r"--model_dir would write into the input"):
      refuse_output_over_inputs({}, {"--train_files": self.data}, folders={"--model_dir": self.data})
    folder = os.path.join(self.root, "images")
    _write(os.path.join(folder, "a", "1.png"))
    with self.assertRaisesRegex(ValueError, r"--model_dir and --train_files name the same folder"):
      refuse_output_over_inputs({}, {"--train_files": folder}, folders={"--model_dir": folder + "/"})
    refuse_output_over_inputs({}, {"--train_files": self.data}, folders={"--model_dir": self.root})

  def test_replaced_folder_must_not_hold_an_input(self):
    model = _write(os.path.join(self.root, "run", "export", "saved_model.pb"))
    export = os.path.dirname(model)
    with self.assertRaisesRegex(ValueError, r"^--export_dir .*/run contains --model_dir .*/run/export: "
                                            r"replacing the folder would delete the input"):
      refuse_output_over_inputs({}, {"--model_dir": [export]},
                                replaced={"--export_dir": os.path.dirname(export)})
    with self.assertRaisesRegex(ValueError, r"--export_dir and --model_dir name the same folder"):
      refuse_output_over_inputs({}, {"--model_dir": [export]}, replaced={"--export_dir": export})
    refuse_output_over_inputs({}, {"--model_dir": [export]}, replaced={"--export_dir": export + "_two_stage"})

  def test_two_outputs_naming_one_file_are_refused(self):
    with self.assertRaisesRegex(ValueError, r"^--vocab_output and --output name the same file .*out: one "
                                            r"output would replace the other"):
      refuse_output_over_inputs({"--output": f"{self.root}/out", "--vocab_output": f"{self.root}/out"}, {})


# Every binary that writes files made from input files, with an output aimed at one of its inputs. Each entry:
# (the binary, the input's name, the output's name (for links), the input flag, the output flag, argv of
# (root, input, output)). `_BinaryFixtures` writes the input files in `root`.
_BINARIES = {
    "predict": (predict_main, "in.csv", "out.csv", "--input", "--output", lambda r, i, o: [
        f"--model_dir={r}/model", f"--input={i}", f"--output={o}", "--feature_columns=x,y"]),
    "convert": (convert_main, "in.csv", "out.tfrecord", "--input", "--output", lambda r, i, o: [
        f"--input={i}", f"--output={o}"]),
    "convert_vocabulary": (convert_main, "in.csv", "vocab.json", "--input", "--vocab_output",
                           lambda r, i, o: [
        f"--input={i}", f"--output={r}/out.tfrecord", f"--vocab_output={o}"]),
    "convert_rejects": (convert_main, "in.csv", "bad.jsonl", "--input", "--rejects", lambda r, i, o: [
        f"--input={i}", f"--output={r}/out.tfrecord", "--bad_rows=skip", f"--rejects={o}"]),
    "convert_back_to_rows": (convert_main, "records.tfrecord", "rows.csv", "--input", "--output",
                             lambda r, i, o: ["--direction=from_tfrecord", f"--input={i}", f"--output={o}",
                                              "--output_format=csv"]),
    "evaluate": (evaluate_main, "records.tfrecord", "report.json", "--input", "--report_path",
                 lambda r, i, o: [f"--model_dir={r}/model", f"--input={i}", f"--report_path={o}"]),
    "export": (export_main, "model", "two_stage", "--model_dir", "--export_dir", lambda r, i, o: [
        "--kind=zero_shot", f"--model_dir={i}", f"--export_dir={o}"]),
    "train": (train_main, "in.csv", "run", "--train_files", "--model_dir", lambda r, i, o: [
        f"--train_files={i}", f"--model_dir={o}", "--text_column=text"]),
    "convert_encoder": (convert_encoder_main, "checkpoint", "converted", "--checkpoint_dir", "--output_dir",
                        lambda r, i, o: [f"--checkpoint_dir={i}", f"--output_dir={o}"]),
    "pairwise_train": (pairwise_main, "groups.csv", "bad.jsonl", "--train_files", "--rejects",
                       lambda r, i, o: [
        "--dataset=rows", f"--train_files={i}", "--group_column=group", "--bad_rows=skip", f"--rejects={o}",
        f"--model_dir={r}/run"]),
    "ranksvm": (ranksvm_main, "groups.csv", "bad.jsonl", "--input", "--rejects", lambda r, i, o: [
        "--input_format=rows", f"--input={i}", "--query_id_column=group", "--label_column=label",
        "--label_kind=relevance", "--feature_columns=x", "--bad_rows=skip", f"--rejects={o}",
        f"--model_dir={r}/run"]),
}
# Ways an output can be an input: the same path, a symbolic link to it, and a hard link to it. Folders have no
# hard links: export's third way is a folder holding the input model, convert-encoder's an output folder whose
# config.json is a hard link to the checkpoint's.
_VARIANTS = ("same", "symlink", "hardlink")


def _variant_name(binary: str, variant: str) -> str:
  if variant != "hardlink":
    return variant
  return {"export": "holding_folder", "convert_encoder": "hardlinked_config"}.get(binary, variant)


class BinariesRefuseOutputsOverInputsTest(tf.test.TestCase, parameterized.TestCase):
  """Each binary exits 1 with one line naming both flags, no traceback, and leaves the input
  byte-identical."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.shared = tempfile.mkdtemp()
    model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(4,)),
                                      class_encoders.get("one_hot", num_classes=2), interactions.get("dot"),
                                      class_names=["a", "b"])
    model(tf.zeros([1, 2]))
    cls.model = serving.export_saved_model(model, os.path.join(cls.shared, "model"))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.shared, ignore_errors=True)
    super().tearDownClass()

  def _inputs(self, root: str) -> None:
    _write(os.path.join(root, "in.csv"), "x,y,text,label\n0.5,1.0,hello,a\n")
    _write(os.path.join(root, "groups.csv"), "group,text,label,x\nq1,good,2,0.5\nq1,bad,0,0.1\n")
    schema = tfrecords.ExampleSchema(text_key=None, dense_key="features", dense_dim=2, num_classes=2)
    tfrecords.write_instances(os.path.join(root, "records.tfrecord"),
                              [tfrecords.ClassificationInstance(label=1, dense=[0.5, 1.0])], schema)
    write_json(os.path.join(root, "records.labels.json"), {"classes": ["a", "b"], "schema": schema.to_dict()})
    shutil.copytree(self.model, os.path.join(root, "model"))
    for name in ("config.json", "vocab.txt", "model.safetensors"):
      _write(os.path.join(root, "checkpoint", name), name)

  @parameterized.named_parameters(
      (f"{binary}_{_variant_name(binary, variant)}", binary, variant)
      for binary, variant in itertools.product(_BINARIES, _VARIANTS))
  def test_output_over_an_input_is_refused_and_the_input_kept(self, binary, variant):
    module, input_name, output_name, input_flag, output_flag, argv = _BINARIES[binary]
    root = self.create_tempdir().full_path
    self._inputs(root)
    source = os.path.join(root, input_name)
    kept = os.path.join(source, "config.json" if binary == "convert_encoder" else "saved_model.pb") \
        if os.path.isdir(source) else source
    with open(kept, "rb") as f:
      before = f.read()
    output = os.path.join(root, output_name)
    if variant == "same":
      output = source
    elif variant == "symlink":
      os.symlink(source, output)
    elif os.path.isfile(source):
      os.link(source, output)
    elif binary == "convert_encoder":
      os.makedirs(output)
      os.link(kept, os.path.join(output, "config.json"))
    else:  # A folder holding the input.
      output = root
    result = run_binary(module, argv(root, source, output))
    self.assertEqual(result.code, 1, result)
    self.assertEqual(result.stderr.splitlines(), [result.stderr.strip()], result)
    self.assertNotIn("Traceback", result.stderr)
    self.assertStartsWith(result.stderr, f"{module.PROGRAM}: error: ")
    self.assertIn(output_flag, result.stderr)
    self.assertIn(input_flag, result.stderr)
    with open(kept, "rb") as f:
      self.assertEqual(f.read(), before)


if __name__ == "__main__":
  tf.test.main()
