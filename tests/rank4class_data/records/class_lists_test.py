"""Tests for rank4class_data.records.class_lists: ELWC class lists as TF-Ranking users write them, and their
errors."""

import os
import re

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_data.records import class_lists, tfrecords
from rank4class_data.validation import DataError
from tests.rank4class_data import elwc_lists


class ReadClassListsTest(tf.test.TestCase, parameterized.TestCase):

  def _write(self, lists, name="lists.tfrecord") -> str:
    return elwc_lists.write(os.path.join(self.create_tempdir().full_path, name), lists)

  def test_dense_lists_become_relevance_rows(self):
    path = self._write([elwc_lists.class_list([0.5, 1.0], [(2, 3.0), (0, 0.0)]),
                        elwc_lists.class_list([-1.0, 2.0], [(1, 1.0)])])
    read = class_lists.read_class_lists(class_lists.ClassListsConfig(path, 4, label_key="relevance"))
    self.assertEqual(read.kind, class_lists.DENSE)
    self.assertAllClose(read.features, [[0.5, 1.0], [-1.0, 2.0]])
    self.assertAllClose(read.relevance, [[0.0, 0.0, 3.0, 0.0], [0.0, 1.0, 0.0, 0.0]])

  def test_unjudged_classes_get_the_padding_label(self):
    path = self._write([elwc_lists.class_list([0.5], [(2, 3.0), (0, 0.0)])])
    read = class_lists.read_class_lists(class_lists.ClassListsConfig(
        path, 4, label_key="relevance", unlisted_relevance=class_lists.UNLISTED_MASKED))
    self.assertAllClose(read.relevance, [[0.0, -1.0, 3.0, -1.0]])

  def test_text_instances_and_a_named_context_key(self):
    path = self._write([elwc_lists.class_list(np.array(["good", "film"]), [(1, 1.0)], context_key="review",
                                              label_key="utility", class_id_key="label_id")])
    read = class_lists.read_class_lists(class_lists.ClassListsConfig(
        path, 2, feature_key="review", label_key="utility", class_id_key="label_id"))
    self.assertEqual((read.kind, read.features.tolist()), (class_lists.TEXT, ["good film"]))

  @parameterized.named_parameters(
      ("no_label", [elwc_lists.class_list([1.0], [(1, 1.0)], label_key="utility")],
       r"row 1, field 'relevance': example 1 has no 'relevance' \(its features: \{'class_id': 'int64_list', "
       r"'utility': 'float_list', 'writer_note': 'bytes_list'\}\); expected it in every example; name it "
       r"with `label_key`"),
      ("class_out_of_range", [elwc_lists.class_list([1.0], [(1, 1.0), (3, 0.0)])],
       r"row 1, field 'class_id': example 2 has class id 3; expected an integer class id in \[0, 3\)"),
      ("class_twice", [elwc_lists.class_list([1.0], [(1, 1.0), (1, 0.0)])],
       r"example 2 lists class 1 a second time"),
      ("negative_label", [elwc_lists.class_list([1.0], [(1, -2.0)])],
       r"example 1 has label -2.0; expected one relevance number >= 0"),
      ("no_positive", [elwc_lists.class_list([1.0], [(1, 0.0)])], r"no candidate has a positive label"),
      ("empty_list", [elwc_lists.class_list([1.0], [])], r"empty list"),
      ("size_changes",
       [elwc_lists.class_list([1.0], [(1, 1.0)]), elwc_lists.class_list([1.0, 2.0], [(1, 1.0)])],
       r"row 2, field 'features': the instance is a vector of 2 but the first list's is a vector of 1"),
      ("no_instance", [elwc_lists.class_list([1.0], [(1, 1.0)], context_key="query")],
       r"the context has no 'text' \(its features: \{'query': 'float_list'\}\); expected the instance in the "
       r"context; name it with `feature_key`"),
  )
  def test_bad_lists_name_file_row_and_feature(self, lists, message):
    path = self._write(lists)
    with self.assertRaisesRegex(DataError,
                                "^" + path.replace(".", "[.]") + ", " + message if message.startswith(
        "row") else message):
      class_lists.read_class_lists(class_lists.ClassListsConfig(path, 3, label_key="relevance"))

  def test_examples_without_the_class_id_key_name_the_example(self):
    path = self._write([elwc_lists.class_list([1.0], [(1, 1.0)]),
                        elwc_lists.class_list([1.0], [(0, 1.0), (2, 0.0)], class_id_key="id")])
    with self.assertRaisesRegex(DataError, "^" + re.escape(
        f"{path}, row 2, field 'class_id': example 1 has no 'class_id' (its features: {{'id': 'int64_list', "
        "'relevance': 'float_list', 'writer_note': 'bytes_list'}); expected it in every example; name it "
        "with `class_id_key`.")):
      class_lists.read_class_lists(class_lists.ClassListsConfig(path, 3, label_key="relevance"))

  def test_class_ids_and_labels_of_either_numeric_type_read_alike(self):
    whole_floats = elwc_lists.class_list([1.0], [(2, 1.0)])
    whole_floats.examples[0].features.feature["class_id"].CopyFrom(elwc_lists.feature(np.float32(2.0)))
    whole_floats.examples[0].features.feature["relevance"].CopyFrom(elwc_lists.feature(np.int64(3)))
    read = class_lists.read_class_lists(class_lists.ClassListsConfig(self._write([whole_floats]), 3,
                                                                     label_key="relevance"))
    self.assertAllClose(read.relevance, [[0.0, 0.0, 3.0]])

  def test_class_name_where_an_id_belongs_is_located(self):
    named = elwc_lists.class_list([1.0], [(2, 1.0)])
    named.examples[0].features.feature["class_id"].CopyFrom(elwc_lists.feature(np.str_("sports")))
    path = self._write([named])
    with self.assertRaisesRegex(DataError, "^" + re.escape(
        f"{path}, row 1, field 'class_id': example 1 has 'class_id' as bytes_list; expected numbers "
        "(float_list or int64_list).")):
      class_lists.read_class_lists(class_lists.ClassListsConfig(path, 3, label_key="relevance"))

  def test_unreadable_files_are_located(self):
    path = self._write([elwc_lists.class_list([1.0], [(1, 1.0)])] * 3)
    with open(path, "r+b") as f:
      f.truncate(os.path.getsize(path) - 3)
    with self.assertRaisesRegex(DataError, "^" + re.escape(f"{path}, row 3: truncated record at byte ")):
      class_lists.read_class_lists(class_lists.ClassListsConfig(path, 3, label_key="relevance"))
    examples = os.path.join(self.create_tempdir().full_path, "examples.tfrecord")
    tfrecords.write_instances(examples, [tfrecords.ClassificationInstance(0, "a")], tfrecords.ExampleSchema())
    with self.assertRaisesRegex(DataError,
                                "^" + re.escape(f"{examples}, row 1: not an ExampleListWithContext record")):
      class_lists.read_class_lists(class_lists.ClassListsConfig(examples, 3))

  def test_no_matching_file_raises(self):
    with self.assertRaises(FileNotFoundError):
      class_lists.read_class_lists(class_lists.ClassListsConfig("/nonexistent/*.elwc", 3))

  def test_bad_config_raises(self):
    with self.assertRaisesRegex(ValueError, r"`unlisted_relevance` must be one of \[0.0, -1.0\], got 0.5"):
      class_lists.ClassListsConfig("a", 3, unlisted_relevance=0.5)
    with self.assertRaisesRegex(ValueError, "`num_classes` must be an integer >= 2, got 1."):
      class_lists.ClassListsConfig("a", 1)


class ReadClassNamesTest(tf.test.TestCase):

  def _file(self, name, text) -> str:
    return self.create_tempfile(name, content=text).full_path

  def test_text_and_json(self):
    self.assertEqual(class_lists.read_class_names(self._file("c.txt", "cat\ndog\n")), ["cat", "dog"])
    self.assertEqual(class_lists.read_class_names(self._file("c.json", '{"classes": ["a", "b"], "x": 1}')),
                     ["a", "b"])

  def test_bad_names_raise_naming_the_line(self):
    with self.assertRaisesRegex(DataError,
                                r"c\.txt, field 'classes': Duplicate class 'cat' on lines 1 and 3"):
      class_lists.read_class_names(self._file("c.txt", "cat\ndog\ncat\n"))
    with self.assertRaisesRegex(DataError, r"row 2: an empty class name"):
      class_lists.read_class_names(self._file("c.txt", "cat\n\ndog\n"))
    with self.assertRaisesRegex(DataError, r"1 class name\(s\); expected at least two"):
      class_lists.read_class_names(self._file("c.txt", "cat\n"))
    with self.assertRaisesRegex(DataError,
                                r"c\.json, field 'classes': no 'classes' list or 'label_to_id' map"):
      class_lists.read_class_names(self._file("c.json", '["a", "b"]'))


if __name__ == "__main__":
  tf.test.main()
