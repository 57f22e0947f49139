"""Tests for rank4class_data.labelled_records: labels as int64 ids, integral floats or class names, rewritten
as the model's class ids; anything else a located error."""

import tensorflow as tf
from absl.testing import parameterized

from rank4class_data import labelled_records
from rank4class_data.records import elwc
from rank4class_data.validation import DataError

_IDS = {"ant": 0, "bee": 1, "cat": 2}


def _feature(value) -> tf.train.Feature:
  return elwc.to_feature(value)


class ClassIdTest(tf.test.TestCase, parameterized.TestCase):
  """A class stored as an int64 id, an integral float or a class name; anything else is a located error."""

  @parameterized.named_parameters(
      ("int64", 2, 2), ("integral_float", 1.0, 1), ("name", "cat", 2), ("name_with_spaces", b" bee ", 1))
  def test_accepted_forms(self, value, expected):
    self.assertEqual(labelled_records.class_id(_feature(value), _IDS, "d.tfrecord", 3, "label"), expected)

  @parameterized.named_parameters(
      ("unknown_name", "wasp", "d.tfrecord, row 3, field 'label': the record has unknown class name 'wasp'; "
                               "expected one of the model's 3 classes ('ant', 'bee', 'cat')."),
      ("fraction", 1.5, "d.tfrecord, row 3, field 'label': the record has class id 1.5, not an integer; "
                        "expected an integral class id in [0, 3) or a class name."),
      ("nan", float("nan"), "the record has class id nan, not an integer"),
      ("out_of_range", 3, "d.tfrecord, row 3, field 'label': the record has class id 3; expected a class id "
                          "in [0, 3) or a class name."),
      ("negative", -1.0, "the record has class id -1; expected a class id in [0, 3)"),
      ("two_names", ["ant", "bee"], "the record has 2 values for 'label'; expected exactly one class id or "
                                    "class name"),
  )
  def test_bad_values_are_located(self, value, message):
    with self.assertRaises(DataError) as raised:
      labelled_records.class_id(_feature(value), _IDS, "d.tfrecord", 3, "label")
    self.assertIn(message, str(raised.exception))

  def test_many_classes_are_listed_by_a_few(self):
    ids = {f"c{i}": i for i in range(1000)}
    with self.assertRaisesRegex(DataError, r"one of the model's 1,000 classes \('c0', 'c1', 'c2', 'c3', "
                                           r"'c4', \.\.\. \(1,000 in all\)\)"):
      labelled_records.class_id(_feature("c1000"), ids, "d.tfrecord", 1, "class_id", "example 2")

  def test_example_label_is_rewritten_as_an_int64_id(self):
    example = tf.train.Example(features=tf.train.Features(feature={"label": _feature("bee"),
                                                                   "text": _feature("hello")}))
    rewritten = tf.train.Example.FromString(
        labelled_records.example_with_class_id(example.SerializeToString(), "label", _IDS, "d.tfrecord", 1))
    self.assertEqual(list(rewritten.features.feature["label"].int64_list.value), [1])
    self.assertEqual(rewritten.features.feature["text"], example.features.feature["text"])
    with self.assertRaisesRegex(DataError, r"d.tfrecord, row 4, field 'label': missing feature"):
      labelled_records.example_with_class_id(tf.train.Example().SerializeToString(), "label", _IDS,
                                             "d.tfrecord", 4)


if __name__ == "__main__":
  tf.test.main()
