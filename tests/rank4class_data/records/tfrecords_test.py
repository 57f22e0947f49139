"""Tests for rank4class_data.records.tfrecords: tf.Example classification records and the parser of their
batches."""

import math
import os
import re

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_data.records import tfrecords
from rank4class_data.records.tfrecords import ClassificationInstance, ExampleSchema, InputConfig
from rank4class_data.validation import DataError, FieldError
from tests.rank4class_data import example_record_files

_FULL_SCHEMA = ExampleSchema(group_key="group_id", grade_key="grade", dense_key="features", dense_dim=2,
                             image_key="image", image_shape=(2, 2, 1), num_classes=3)


def _full_instance(label: int = 1, **overrides) -> ClassificationInstance:
  values = dict(label=label, text="héllo world", group_id="q1", grade=2.5,
                dense=np.array([0.5, -1.0], np.float32), image=np.array([[[0], [255]], [[7], [9]]], np.uint8))
  values.update(overrides)
  return ClassificationInstance(**values)


def _text_instances(labels):
  return [ClassificationInstance(label=label, text=f"doc {i}") for i, label in enumerate(labels)]


def _raw_example(**features) -> tf.train.Example:
  """A tf.Example bypassing validation: values are (kind, list)."""
  feature = {}
  for key, (kind, values) in features.items():
    if kind == "bytes":
      feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    elif kind == "int64":
      feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    else:
      feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
  return tf.train.Example(features=tf.train.Features(feature=feature))


class ExampleSchemaTest(tf.test.TestCase, parameterized.TestCase):

  def test_dict_round_trip(self):
    self.assertEqual(ExampleSchema.from_dict(_FULL_SCHEMA.to_dict()), _FULL_SCHEMA)

  @parameterized.named_parameters(
      ("dense_without_dim", dict(dense_key="x"), "dense_dim"),
      ("bad_image_shape", dict(image_key="img", image_shape=(28, 28)), "image_shape"),
      ("zero_classes", dict(num_classes=0), "num_classes"),
      ("duplicate_keys", dict(group_key="text"), "distinct"),
  )
  def test_invalid_schema_raises(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      ExampleSchema(**kwargs)

  def test_feature_spec_requires_every_feature(self):
    spec = _FULL_SCHEMA.feature_spec()
    self.assertEqual(sorted(spec), ["features", "grade", "group_id", "image", "label", "text"])
    # No defaults: a record lacking a feature fails parsing instead of reading as a made-up value.
    self.assertEqual({key: feature.default_value for key, feature in spec.items()}, dict.fromkeys(spec))
    self.assertEqual(spec["features"].shape, [2])


class EncodeDecodeTest(tf.test.TestCase, parameterized.TestCase):

  def test_round_trip_keeps_every_feature(self):
    instance = _full_instance()
    example = tfrecords.encode_instance(instance, _FULL_SCHEMA)
    self.assertEqual(example.features.feature["label"].int64_list.value, [1])
    self.assertEqual(example.features.feature["image"].bytes_list.value, [bytes([0, 255, 7, 9])])
    self.assertEqual(tfrecords.decode_instance(example.SerializeToString(), _FULL_SCHEMA), instance)

  @parameterized.named_parameters(
      ("negative_label", dict(label=-1), "label", "negative label -1"),
      ("label_out_of_range", dict(label=3), "label",
       r"label 3 out of range; expected a class id in \[0, 3\)"),
      ("non_integer_label", dict(label=1.5), "label", "not an integer"),
      ("empty_text", dict(text="  "), "text", "empty text"),
      ("missing_text", dict(text=None), "text", "missing value"),
      ("nan_grade", dict(grade=math.nan), "grade", "not finite"),
      ("nan_feature", dict(dense=np.array([0.0, np.nan])), "features", "feature 1 is nan"),
      ("wrong_dense_length", dict(dense=np.zeros(3)), "features", r"shape \(3,\)"),
      ("wrong_image_dtype", dict(image=np.zeros([2, 2, 1], np.float32)), "image", "uint8"),
  )
  def test_invalid_instance_raises_naming_field(self, overrides, field, message):
    with self.assertRaisesRegex(FieldError, message) as context:
      tfrecords.encode_instance(_full_instance(**overrides), _FULL_SCHEMA)
    self.assertEqual(context.exception.field, field)

  def test_value_without_schema_feature_raises(self):
    with self.assertRaisesRegex(FieldError, "schema has no `group_key`"):
      tfrecords.encode_instance(ClassificationInstance(0, "a", group_id="g"), ExampleSchema())

  def test_decode_missing_feature_raises(self):
    with self.assertRaisesRegex(FieldError, "field 'text': missing feature"):
      tfrecords.decode_instance(_raw_example(label=("int64", [0])), ExampleSchema())


class WriteReadTest(tf.test.TestCase):

  def test_write_then_read_instances(self):
    path = os.path.join(self.create_tempdir().full_path, "a.tfrecord")
    instances = [_full_instance(0), _full_instance(2, text="b", grade=0.0)]
    self.assertEqual(tfrecords.write_instances(path, instances, _FULL_SCHEMA), 2)
    self.assertEqual(list(tfrecords.read_instances(path, _FULL_SCHEMA)), instances)

  def test_bad_instance_raises_naming_row_and_leaves_no_file(self):
    folder = self.create_tempdir().full_path
    path = os.path.join(folder, "a.tfrecord")
    instances = _text_instances([0, 1]) + [ClassificationInstance(label=0, text="")]
    with self.assertRaisesRegex(DataError, f"{path}, row 3, field 'text': empty text"):
      tfrecords.write_instances(path, instances, ExampleSchema())
    self.assertEmpty(os.listdir(folder))

  def test_read_bad_record_names_file_row_field(self):
    path = os.path.join(self.create_tempdir().full_path, "a.tfrecord")
    tfrecords.write_tfrecord(path, [
        tfrecords.encode_instance(ClassificationInstance(0, "a"), ExampleSchema()),
        _raw_example(label=("int64", [5]), text=("bytes", [b"b"]))
    ])
    with self.assertRaisesRegex(DataError, f"{path}, row 2, field 'label': label 5 out of range"):
      list(tfrecords.read_instances(path, ExampleSchema(num_classes=2)))
  def test_record_that_is_no_example_names_its_row(self):
    path = os.path.join(self.create_tempdir().full_path, "a.tfrecord")
    good = tfrecords.encode_instance(ClassificationInstance(0, "a"), ExampleSchema())
    tfrecords.write_tfrecord(path, [good, b"\xff\xff\xff"])
    with self.assertRaisesRegex(DataError, f"{path}, row 2: not a tf.Example record"):
      list(tfrecords.read_instances(path, ExampleSchema()))


class ParseBatchTest(tf.test.TestCase, parameterized.TestCase):
  """`parse_batch_fn` in the input pipeline: every feature parsed, every bad record named."""

  def _write(self, name, instances, schema=None, folder=None):
    return example_record_files.write_records(folder or self.create_tempdir().full_path, name,
                                              instances, schema)

  def test_pipeline_record_that_is_no_example_is_located(self):
    folder = self.create_tempdir().full_path
    good = tfrecords.encode_instance(ClassificationInstance(0, "a"), ExampleSchema()).SerializeToString()
    for name, bad in (("ascii.tfrecord", b"garbage, not a proto"),
                      ("binary.tfrecord", b"\x0a\xff\xff\xffgarbage")):
      path = os.path.join(folder, name)
      tfrecords.write_tfrecord(path, [good, good, bad])
      # TensorFlow's error quotes the record and names no file; bytes that are not UTF-8 make it a
      # UnicodeDecodeError.
      with self.assertRaises((tf.errors.InvalidArgumentError, UnicodeDecodeError)) as caught:
        list(tfrecords.make_dataset(InputConfig(path, batch_size=2, shuffle=False), ExampleSchema()))
      self.assertEqual(tfrecords.located_unparsable_example(caught.exception),
                       f"{path}, row 3: not a tf.Example record (it does not parse); expected classification "
                       "tf.Examples (is the input format right?).")
    self.assertIsNone(tfrecords.located_unparsable_example(ValueError("Could not parse example input")))


  def test_parses_every_feature(self):
    path = self._write("a.tfrecord",
                       [_full_instance(0), _full_instance(2, text="b", grade=0.0)], _FULL_SCHEMA)
    features, labels = next(
        iter(tfrecords.make_dataset(InputConfig(path, batch_size=2, shuffle=False), _FULL_SCHEMA)))
    self.assertAllEqual(labels, [0, 2])
    self.assertEqual(labels.dtype, tf.int64)
    self.assertAllEqual(features["text"], [b"h\xc3\xa9llo world", b"b"])
    self.assertAllEqual(features["group_id"], [b"q1", b"q1"])
    self.assertAllClose(features["grade"], [2.5, 0.0])
    self.assertAllClose(features["features"], [[0.5, -1.0], [0.5, -1.0]])
    self.assertEqual(features["image"].dtype, tf.uint8)
    self.assertAllEqual(features["image"][0, :, :, 0], [[0, 255], [7, 9]])
    self.assertNotIn("label", features)

  def test_unsupervised_keeps_labels_in_dict(self):
    path = self._write("a.tfrecord", _text_instances([1, 0]))
    config = InputConfig(path, batch_size=2, shuffle=False, as_supervised=False)
    batch = next(iter(tfrecords.make_dataset(config, ExampleSchema())))
    self.assertAllEqual(batch["label"], [1, 0])

  @parameterized.named_parameters(
      ("label_out_of_range", ExampleSchema(num_classes=2), dict(label=("int64", [2]), text=("bytes", [b"x"])),
       r"field label: label out of range; expected a class id in \[0, 2\)\."),
      ("negative_label", ExampleSchema(), dict(label=("int64", [-3]), text=("bytes", [b"x"])),
       r"field label: negative label; expected a class id >= 0\."),
      ("missing_label", ExampleSchema(), dict(text=("bytes", [b"x"])),
       r"field label: missing feature; expected label \(int64_list\) in every record\."),
      ("missing_text", ExampleSchema(), dict(label=("int64", [0])),
       r"field text: missing feature; expected text \(bytes_list\) in every record\."),
      ("float_label", ExampleSchema(), dict(label=("float", [1.0]), text=("bytes", [b"x"])),
       r"field label: float_list values; expected int64_list values\."),
      ("string_label", ExampleSchema(), dict(label=("bytes", [b"sports"]), text=("bytes", [b"x"])),
       r"field label: bytes_list values; expected int64_list values\."),
      ("two_labels", ExampleSchema(), dict(label=("int64", [0, 1]), text=("bytes", [b"x"])),
       r"field label: 2 values; expected 1 value\."),
      ("short_vector", ExampleSchema(dense_key="features", dense_dim=2),
       dict(label=("int64", [0]), text=("bytes", [b"x"]), features=("float", [1.0])),
       r"field features: 1 values; expected 2 values\."),
      ("empty_text", ExampleSchema(), dict(label=("int64", [0]), text=("bytes", [b" "])),
       r"field text: empty text; expected a non-empty text\."),
      ("nan_feature", ExampleSchema(dense_key="features", dense_dim=2),
       dict(label=("int64", [0]), text=("bytes", [b"x"]), features=("float", [1.0, math.nan])),
       r"field features: NaN or infinite value; expected finite numbers\."),
  )
  def test_bad_record_fails_naming_file_row_field(self, schema, bad_features, message):
    path = os.path.join(self.create_tempdir().full_path, "bad.tfrecord")
    good = tfrecords.encode_instance(
        ClassificationInstance(0, "ok", dense=[0.0, 1.0] if schema.dense_key else None), schema)
    tfrecords.write_tfrecord(path, [good, good, _raw_example(**bad_features)])
    with self.assertRaises(tf.errors.InvalidArgumentError) as caught:
      list(tfrecords.make_dataset(InputConfig(path, batch_size=2, shuffle=False), schema))
    # The one line a binary prints (`rank4class_cli.cli.guard`).
    self.assertRegex(tfrecords.located_data_problem(caught.exception),
                     f"^{re.escape(path)}, row 3, {message}$")


if __name__ == "__main__":
  tf.test.main()
