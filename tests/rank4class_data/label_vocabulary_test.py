"""Tests for rank4class_data.label_vocabulary: class names in id order from labels and files."""

import re

import tensorflow as tf

from rank4class_data.label_vocabulary import LabelVocabulary
from rank4class_data.validation import DataError


class VocabularyTest(tf.test.TestCase):

  def test_text_file_one_class_per_line(self):
    path = self.create_tempfile("v.txt", content="b\na\n\n").full_path
    self.assertEqual(LabelVocabulary.from_file(path).label_to_id, {"b": 0, "a": 1})

  def test_json_label_to_id_map(self):
    path = self.create_tempfile("v.json", content='{"x": 1, "y": 0}').full_path
    self.assertEqual(LabelVocabulary.from_file(path).classes, ["y", "x"])

  def test_blank_line_inside_a_class_list_raises_naming_the_line(self):
    path = self.create_tempfile("v.txt", content="b\n\na\n").full_path  # "a" would silently get id 2.
    with self.assertRaisesRegex(DataError,
                                f"{re.escape(path)}, row 2: an empty class name; expected one unique"):
      LabelVocabulary.from_file(path)

  def test_duplicate_classes_raise_naming_file(self):
    path = self.create_tempfile("v.txt", content="a\na\n").full_path
    with self.assertRaisesRegex(DataError, f"{re.escape(path)}, field 'classes'.*Duplicate"):
      LabelVocabulary.from_file(path)

  def test_from_labels_sorts_numbers_numerically_and_counts(self):
    vocabulary = LabelVocabulary.from_labels(["10", "b", "2", "a", "2"])
    self.assertEqual((vocabulary.classes, vocabulary.counts), (["2", "10", "a", "b"], [2, 1, 1, 1]))


if __name__ == "__main__":
  tf.test.main()
