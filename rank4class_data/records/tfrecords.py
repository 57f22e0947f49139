"""Classification instances as `tf.Example` TFRecords: the schema, validated encoding and decoding, writing
and reading files, and the parser of a batch for the input pipeline
(`rank4class_data.records.input_pipeline`).

TFRecord files themselves (`rank4class_data.records.tfrecord_files`) and the input pipeline are re-exported
here under their old names (`tfrecords.write_tfrecord`, `tfrecords.InputConfig`, `tfrecords.make_dataset`,
...).
"""

import dataclasses
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

# The TFRecord file and input-pipeline names this module had before they got their own modules.
from rank4class_data.records.input_pipeline import (  # noqa: F401
  InputConfig,
  ParseBatchFn,
  assert_valid,
  build_pipeline,
  first_unparsable_record,
  located_data_loss,
  located_data_problem,
  make_dataset,
  record_names,
)
from rank4class_data.records.tfrecord_files import (  # noqa: F401
  PROTO_PARSE_ERRORS,
  check_record_file,
  count_records,
  first_record,
  read_tfrecord,
  require_records,
  write_tfrecord,
)
from rank4class_data.validation import DataError, FieldError, check_range

# Feature keys the converter writes; `ExampleSchema` defaults to them.
TEXT_KEY = "text"
LABEL_KEY = "label"
GROUP_KEY = "group_id"
GRADE_KEY = "grade"
DENSE_KEY = "features"
IMAGE_KEY = "image"


@dataclasses.dataclass
class ExampleSchema:
  """Which features a classification `tf.Example` holds, under which keys, with which shapes.

  Attributes:
    label_key: int64 class id in [0, num_classes).
    text_key: bytes feature with the UTF-8 text, or None when the instances have no text.
    group_key: bytes feature with a group id (e.g. a query or a condition) for pairwise use, or None.
    grade_key: float feature with an ordinal/graded label (e.g. a rating or a vote count), or None.
    dense_key: float feature vector of length `dense_dim`, or None.
    dense_dim: Length of the dense feature vector.
    image_key: bytes feature with raw uint8 pixels of shape `image_shape` (row-major), or None.
    image_shape: [height, width, channels] of the images.
    num_classes: When set, labels outside [0, num_classes) are errors.
  """

  label_key: str = LABEL_KEY
  text_key: str | None = TEXT_KEY
  group_key: str | None = None
  grade_key: str | None = None
  dense_key: str | None = None
  dense_dim: int = 0
  image_key: str | None = None
  image_shape: tuple[int, int, int] = (0, 0, 0)
  num_classes: int | None = None

  def __post_init__(self):
    self.image_shape = tuple(int(d) for d in self.image_shape)
    if self.dense_key is not None and self.dense_dim <= 0:
      raise ValueError(f"`dense_dim` must be positive when `dense_key` is set, got {self.dense_dim}.")
    if self.image_key is not None and (len(self.image_shape) != 3 or min(self.image_shape) <= 0):
      raise ValueError(
          f"`image_shape` must be 3 positive ints [height, width, channels], got {self.image_shape}.")
    if self.num_classes is not None:
      check_range("num_classes", self.num_classes, 1, integer=True)
    keys = [k for k in self.keys() if k is not None]
    if len(set(keys)) != len(keys):
      raise ValueError(f"Feature keys must be distinct, got {keys}.")

  def keys(self) -> list[str | None]:
    return [self.label_key, self.text_key, self.group_key, self.grade_key, self.dense_key, self.image_key]

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, config: dict[str, Any]) -> "ExampleSchema":
    return cls(**config)

  def feature_spec(self) -> dict[str, tf.io.FixedLenFeature]:
    """The `tf.io.parse_example` spec. Every feature the schema names is required (no default): a record
    lacking one fails parsing, and `parse_batch_fn` names its file, row and key."""
    spec = {self.label_key: tf.io.FixedLenFeature([], tf.int64)}
    if self.text_key is not None:
      spec[self.text_key] = tf.io.FixedLenFeature([], tf.string)
    if self.group_key is not None:
      spec[self.group_key] = tf.io.FixedLenFeature([], tf.string)
    if self.grade_key is not None:
      spec[self.grade_key] = tf.io.FixedLenFeature([], tf.float32)
    if self.dense_key is not None:
      spec[self.dense_key] = tf.io.FixedLenFeature([self.dense_dim], tf.float32)
    if self.image_key is not None:
      spec[self.image_key] = tf.io.FixedLenFeature([], tf.string)
    return spec

  def batch_parser(self, config: InputConfig) -> ParseBatchFn:
    """`parse_batch_fn(self, config.as_supervised)`: the parser `input_pipeline.make_dataset` uses."""
    return parse_batch_fn(self, config.as_supervised)


@dataclasses.dataclass
class ClassificationInstance:
  """One classification instance as Python values (the unit the converter writes and reads back).

  Attributes:
    label: Class id.
    text: Document text.
    group_id: Group id for pairwise use (a query, a condition).
    grade: Ordinal or graded label.
    dense: Float feature vector [dense_dim].
    image: uint8 pixels [height, width, channels].
  """

  label: int
  text: str | None = None
  group_id: str | None = None
  grade: float | None = None
  dense: np.ndarray | None = None
  image: np.ndarray | None = None

  def __eq__(self, other):
    if not isinstance(other, ClassificationInstance):
      return NotImplemented
    arrays_equal = all((a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))
                       for a, b in ((self.dense, other.dense), (self.image, other.image)))
    return (self.label, self.text, self.group_id, self.grade) == (other.label, other.text, other.group_id,
                                                                  other.grade) and arrays_equal


def validate_instance(instance: ClassificationInstance, schema: ExampleSchema) -> None:
  """Checks that `instance` fills exactly the schema's features with valid values.

  Raises:
    FieldError: naming the feature key, what is wrong and what was expected.
  """
  label = instance.label
  if isinstance(label, bool) or not isinstance(label, (int, np.integer)):
    raise FieldError(schema.label_key, f"label {label!r} is not an integer", "an integer class id")
  if label < 0:
    raise FieldError(schema.label_key, f"negative label {label}", "a class id >= 0")
  if schema.num_classes is not None and label >= schema.num_classes:
    raise FieldError(schema.label_key, f"label {label} out of range",
                     f"a class id in [0, {schema.num_classes})")
  optional = (("text", "text_key", schema.text_key,
               instance.text), ("group_id", "group_key", schema.group_key,
                                instance.group_id), ("grade", "grade_key", schema.grade_key, instance.grade),
              ("dense", "dense_key", schema.dense_key, instance.dense), ("image", "image_key",
                                                                         schema.image_key, instance.image))
  for name, schema_attr, key, value in optional:
    if key is None and value is not None:
      raise FieldError(name, f"the instance has a {name} but the schema has no `{schema_attr}`",
                       f"{name}=None, or a schema with `{schema_attr}` set")
    if key is not None and value is None:
      raise FieldError(key, "missing value", f"a {name} for every instance")
  if schema.text_key is not None and not instance.text.strip():
    raise FieldError(schema.text_key, "empty text", "a non-empty text")
  if schema.grade_key is not None and not math.isfinite(float(instance.grade)):
    raise FieldError(schema.grade_key, f"grade {instance.grade} is not finite", "a finite number")
  if schema.dense_key is not None:
    dense = np.asarray(instance.dense, np.float64)
    if dense.shape != (schema.dense_dim,):
      raise FieldError(schema.dense_key, f"feature vector of shape {dense.shape}",
                       f"shape ({schema.dense_dim},)")
    bad = np.flatnonzero(~np.isfinite(dense))
    if bad.size:
      raise FieldError(schema.dense_key, f"feature {bad[0]} is {dense[bad[0]]}", "finite numbers (no NaN)")
  if schema.image_key is not None:
    image = np.asarray(instance.image)
    if image.dtype != np.uint8 or image.shape != schema.image_shape:
      raise FieldError(schema.image_key, f"image {image.dtype} {image.shape}", f"uint8 {schema.image_shape}")


def _bytes_feature(value: bytes) -> tf.train.Feature:
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _float_feature(values: Sequence[float]) -> tf.train.Feature:
  return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def encode_instance(instance: ClassificationInstance, schema: ExampleSchema) -> tf.train.Example:
  """Validates `instance` and builds its `tf.Example`.

  Raises:
    FieldError: see `validate_instance`.
  """
  validate_instance(instance, schema)
  feature = {schema.label_key: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(instance.label)]))}
  if schema.text_key is not None:
    feature[schema.text_key] = _bytes_feature(instance.text.encode("utf-8"))
  if schema.group_key is not None:
    feature[schema.group_key] = _bytes_feature(str(instance.group_id).encode("utf-8"))
  if schema.grade_key is not None:
    feature[schema.grade_key] = _float_feature([float(instance.grade)])
  if schema.dense_key is not None:
    feature[schema.dense_key] = _float_feature(np.asarray(instance.dense, np.float32).tolist())
  if schema.image_key is not None:
    feature[schema.image_key] = _bytes_feature(np.ascontiguousarray(instance.image).tobytes())
  return tf.train.Example(features=tf.train.Features(feature=feature))


def _single(example: tf.train.Example, key: str, kind: str, length: int = 1) -> list:
  article = "an" if kind.startswith("int") else "a"
  if key not in example.features.feature:
    raise FieldError(key, "missing feature", f"{article} {kind} feature '{key}'")
  feature = example.features.feature[key]
  if feature.WhichOneof("kind") != kind:
    raise FieldError(key, f"{feature.WhichOneof('kind')} feature", f"{article} {kind} feature")
  values = list(getattr(feature, kind).value)
  if len(values) != length:
    raise FieldError(key, f"{len(values)} values", f"{length} value(s)")
  return values


def decode_instance(example: tf.train.Example | bytes, schema: ExampleSchema) -> ClassificationInstance:
  """Inverse of `encode_instance`, validating what it reads.

  Raises:
    FieldError: for a missing feature, a feature of the wrong kind or length, or an invalid value.
  """
  if isinstance(example, bytes):
    example = tf.train.Example.FromString(example)
  instance = ClassificationInstance(label=int(_single(example, schema.label_key, "int64_list")[0]))
  if schema.text_key is not None:
    instance.text = _single(example, schema.text_key, "bytes_list")[0].decode("utf-8")
  if schema.group_key is not None:
    instance.group_id = _single(example, schema.group_key, "bytes_list")[0].decode("utf-8")
  if schema.grade_key is not None:
    instance.grade = float(_single(example, schema.grade_key, "float_list")[0])
  if schema.dense_key is not None:
    instance.dense = np.asarray(_single(example, schema.dense_key, "float_list", schema.dense_dim),
                                np.float32)
  if schema.image_key is not None:
    raw = _single(example, schema.image_key, "bytes_list")[0]
    if len(raw) != math.prod(schema.image_shape):
      raise FieldError(schema.image_key, f"{len(raw)} bytes",
                       f"{math.prod(schema.image_shape)} for {schema.image_shape}")
    instance.image = np.frombuffer(raw, np.uint8).reshape(schema.image_shape)
  validate_instance(instance, schema)
  return instance


# `tf.io.parse_example`'s error for a record that is no tf.Example quotes the record's bytes (and names no
# file), cut at its first NUL byte; a record that is not UTF-8 makes the message itself undecodable (a
# UnicodeDecodeError holding its bytes).
_UNPARSABLE_EXAMPLE = b"Could not parse example input, value: '"
# The end of the quoted record: TensorFlow's node name, else (the message cut at a NUL) the eager op's suffix.
_QUOTE_END = re.compile(rb"'\n\t \[\[|'?\s*\[Op:[^\]]*\](?: name: [^\n]*)?$")
_NOT_AN_EXAMPLE = ("not a tf.Example record (it does not parse)",
                   "classification tf.Examples (is the input format right?)")


def _message_bytes(error: BaseException) -> bytes:
  if isinstance(error, UnicodeDecodeError) and isinstance(error.object, bytes | bytearray):
    return bytes(error.object)
  return str(error).encode("utf-8", "surrogateescape")


def _parses_as_example(record: bytes) -> bool:
  try:
    tf.train.Example.FromString(record)
  except PROTO_PARSE_ERRORS:
    return False
  return True


def located_unparsable_example(error: BaseException) -> str | None:
  """`<path>, row <row>: not a tf.Example record ...` for TensorFlow's error on a record of a tf.Example
  pipeline that does not parse ("Could not parse example input", or the UnicodeDecodeError of that message
  when the record is not UTF-8), or None."""
  if not isinstance(error, tf.errors.InvalidArgumentError | UnicodeDecodeError):
    return None
  text = _message_bytes(error)
  start = text.find(_UNPARSABLE_EXAMPLE)
  if start < 0:
    return None
  quoted = text[start + len(_UNPARSABLE_EXAMPLE):]
  end = _QUOTE_END.search(quoted)
  found = first_unparsable_record(_parses_as_example, quoted[:end.start()] if end else quoted)
  if found is None:
    return None
  problem, expected = _NOT_AN_EXAMPLE
  return str(DataError(found[0], problem, row=found[1], expected=expected))


def write_instances(path: str, instances: Iterable[ClassificationInstance], schema: ExampleSchema) -> int:
  """Validates and writes classification instances; a bad one raises DataError (row = its 1-based index)."""

  def examples():
    for row, instance in enumerate(instances, start=1):
      try:
        yield encode_instance(instance, schema)
      except FieldError as e:
        raise e.at(path, row) from None

  return write_tfrecord(path, examples())


def read_instances(path: str, schema: ExampleSchema) -> Iterator[ClassificationInstance]:
  """Yields the instances of a TFRecord file; a bad record raises DataError naming file, row and feature."""
  for row, record in enumerate(read_tfrecord(path), start=1):
    try:
      yield decode_instance(record, schema)
    except FieldError as e:
      raise e.at(path, row) from None
    except PROTO_PARSE_ERRORS:
      raise DataError(path, _NOT_AN_EXAMPLE[0], row=row, expected=_NOT_AN_EXAMPLE[1]) from None


def parse_batch_fn(schema: ExampleSchema, as_supervised: bool = True) -> ParseBatchFn:
  """Returns the function that parses and validates a batch of classification `tf.Example`s.

  The function maps (paths, rows, serialized [batch_size]) to features:
  text string [batch_size], group string [batch_size], grade float32 [batch_size],
  dense float32 [batch_size, dense_dim], image uint8 [batch_size, height, width, channels] (those the schema
  names), and labels int64 [batch_size]: as (features, labels) when `as_supervised`, else labels join the
  dict.
  A missing feature, a feature of another type or length (e.g. a float label), empty text, NaN or a label
  outside [0, num_classes) fails the pipeline with tf.errors.InvalidArgumentError naming the file, row and
  feature (`located_data_problem` reads it).
  """

  def parse(paths, rows, serialized):
    features = tf.io.parse_example(serialized, schema.feature_spec(), example_names=record_names(paths, rows))
    checks = [
        assert_valid(features[schema.label_key] >= 0, paths, rows, schema.label_key,
                     "negative label; expected a class id >= 0")
    ]
    if schema.num_classes is not None:
      checks.append(
          assert_valid(features[schema.label_key] < schema.num_classes, paths, rows, schema.label_key,
                       f"label out of range; expected a class id in [0, {schema.num_classes})"))
    if schema.text_key is not None:
      checks.append(
          assert_valid(
              tf.strings.length(tf.strings.strip(features[schema.text_key])) > 0, paths, rows,
              schema.text_key, "empty text; expected a non-empty text"))
    for key in (schema.grade_key, schema.dense_key):
      if key is not None:
        checks.append(
            assert_valid(tf.math.is_finite(features[key]), paths, rows, key,
                         "NaN or infinite value; expected finite numbers"))
    if schema.image_key is not None:
      checks.append(
          assert_valid(
              tf.strings.length(features[schema.image_key]) == math.prod(schema.image_shape), paths, rows,
              schema.image_key,
              f"image of the wrong size; expected {math.prod(schema.image_shape)} bytes"))
    with tf.control_dependencies(checks):
      features = {key: tf.identity(value) for key, value in features.items()}
    if schema.image_key is not None:
      pixels = tf.io.decode_raw(features[schema.image_key], tf.uint8)
      features[schema.image_key] = tf.reshape(pixels, [-1, *schema.image_shape])
    if not as_supervised:
      return features
    labels = features.pop(schema.label_key)
    return features, labels

  return parse
