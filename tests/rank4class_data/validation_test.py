"""Tests for rank4class_data.validation: located error messages and all-or-nothing writes."""

import dataclasses
import json
import os
import pathlib
import stat

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_data.validation import (
    DataError,
    FieldError,
    atomic_directory,
    atomic_output,
    atomic_paths,
    require_file,
    write_json,
)


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


if __name__ == "__main__":
  tf.test.main()
