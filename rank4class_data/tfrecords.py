"""Classification instances as `tf.Example` TFRecords, and the sharded tf.data pipeline that reads them."""

import dataclasses
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError

from rank4class_data.validation import DataError, FieldError, atomic_paths, require_input_file

# What parsing a serialized proto raises for bytes that are no such proto: DecodeError, or with the pure-Python
# protobuf (the reference stack's) a UnicodeDecodeError for a string field that is not UTF-8.
PROTO_PARSE_ERRORS = (DecodeError, UnicodeDecodeError)

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
    if self.num_classes is not None and self.num_classes < 1:
      raise ValueError(f"`num_classes` must be positive, got {self.num_classes}.")
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


def write_tfrecord(path: str, records: Iterable[tf.train.Example | bytes]) -> int:
  """Writes serialized protos to `path` all at once or not at all (temp file + rename).

  Args:
    path: Output TFRecord path; its folder must exist.
    records: Protos (anything with `SerializeToString`) or serialized bytes. If the iterable raises, no file
      is left behind.

  Returns:
    The number of records written.
  """
  count = 0
  with atomic_paths(path) as (temp_path,):
    with tf.io.TFRecordWriter(temp_path) as writer:
      for record in records:
        writer.write(record if isinstance(record, bytes) else record.SerializeToString())
        count += 1
  return count


# TensorFlow's reader errors: "truncated record at <byte offset>' failed with ...", "corrupted record at <byte
# offset> (Is this even a TFRecord file?)". They name no file.
_DATA_LOSS = re.compile(r"(truncated|corrupted) record at (\d+)")


# A TFRecord record's header: its length (8 bytes) and the length's CRC (4). TensorFlow's reader takes a file
# shorter than that for an empty one, without an error.
_RECORD_HEADER_BYTES = 12


def check_record_file(path: str, empty_ok: bool = False) -> None:
  """DataError naming `path` when it holds no record: an empty file (unless `empty_ok`: one shard of several may
  be), or one shorter than a record's header (not a TFRecord, which TensorFlow's reader would read as empty)."""
  size = tf.io.gfile.stat(path).length
  if size == 0 and not empty_ok:
    raise DataError(path, "no records (the file is empty)", expected="a TFRecord file with records")
  if 0 < size < _RECORD_HEADER_BYTES:
    raise DataError(path, f"not a TFRecord file ({size} bytes, shorter than one record)", row=1,
                    expected="a TFRecord file (is the input format right?)")


def read_tfrecord(path: str) -> Iterator[bytes]:
  """Yields the serialized records of one TFRecord file, in order.

  Raises:
    FileNotFoundError: naming a missing file.
    DataError: naming the file for a folder, an empty file, a file that is not a TFRecord, or a truncated or
      corrupted record (with its 1-based row).
  """
  require_input_file(path, "a TFRecord file")
  check_record_file(path)
  done = 0
  try:
    for batch in tf.data.TFRecordDataset(path).batch(1024):  # Batched: eager iteration per record is slow.
      records = batch.numpy().tolist()
      yield from records
      done += len(records)
  except tf.errors.DataLossError as e:
    raise _data_loss_error(path, done + _readable_records(path, done) + 1, e) from None


def _readable_records(path: str, start: int) -> int:
  """How many records after the first `start` read before the file's first broken one."""
  count = 0
  try:
    for _ in tf.data.TFRecordDataset(path).skip(start):
      count += 1
  except tf.errors.DataLossError:
    pass
  return count


def _data_loss_error(path: str, row: int, error: tf.errors.DataLossError) -> DataError:
  """The located form of TensorFlow's reader error for record `row` of `path`."""
  match = _DATA_LOSS.search(str(error))
  kind, offset = (match.group(1), int(match.group(2))) if match else ("unreadable", None)
  at = f" at byte {offset}" if offset is not None else ""
  if row == 1:
    problem = (f"not a TFRecord file, or cut short in its first record{at}" if kind == "truncated" else
               f"not a TFRecord file (no valid record{at or ' at its start'})")
    return DataError(path, problem, row=row, expected="a TFRecord file (is the input format right?)")
  reason = " (the file ends inside it)" if kind == "truncated" else " (checksum mismatch)" if match else ""
  return DataError(path, f"{kind} record{at}{reason}", row=row,
                   expected="a complete TFRecord file (write or copy it again)")


def first_record(path: str) -> bytes:
  """The first record of one TFRecord file, read alone (a record broken further on is named when it is read).

  Raises:
    FileNotFoundError / DataError: as `read_tfrecord`, for the file and its first record.
  """
  require_input_file(path, "a TFRecord file")
  check_record_file(path)
  try:
    for record in tf.data.TFRecordDataset(path).take(1):
      return record.numpy()
  except tf.errors.DataLossError as e:
    raise _data_loss_error(path, 1, e) from None
  raise DataError(path, "no records", expected="a TFRecord file with records")


def require_records(files: Sequence[str]) -> None:
  """DataError naming the first of `files` when all of them are empty (the pipelines allow empty shards)."""
  if files and all(tf.io.gfile.stat(path).length == 0 for path in files):
    if len(files) == 1:
      raise DataError(files[0], "no records (the file is empty)", expected="a TFRecord file with records")
    raise DataError(files[0], f"no records (it and the other {len(files) - 1} files are empty)",
                    expected="TFRecord files with records")


def count_records(path: str) -> int:
  """The number of records (at least one) of one TFRecord file, every one read; DataError as `read_tfrecord`."""
  return sum(1 for _ in read_tfrecord(path))


# The TFRecord files this process's pipelines read (`build_pipeline`). A DataLossError met inside a pipeline names
# no file; `located_data_loss` looks for the broken one among these.
_PIPELINE_FILES: dict[str, None] = {}


def located_data_loss(error: BaseException) -> str | None:
  """`<path>, row <row>: <problem>; expected ...` for a DataLossError a pipeline raised, or None.

  Only the files that pipelines of this process read and that are long enough to hold the error's byte offset
  are read again, until the broken one is found; so this costs nothing unless reading failed.
  """
  if not isinstance(error, tf.errors.DataLossError):
    return None
  match = _DATA_LOSS.search(str(error))
  offset = int(match.group(2)) if match else -1
  fallback = None
  for path in reversed(list(_PIPELINE_FILES)):
    try:
      if os.path.getsize(path) <= offset:
        continue
      broken = _broken_record(path)
    except OSError:
      continue
    if broken is not None:
      located = str(_data_loss_error(path, *broken))
      theirs = _DATA_LOSS.search(str(broken[1]))
      if match is None or (theirs is not None and theirs.groups() == match.groups()):
        return located
      fallback = fallback or located
  return fallback


# `tf.io.parse_example`'s error for a record that is no tf.Example quotes the record's bytes (and names no file),
# cut at its first NUL byte; a record that is not UTF-8 makes the message itself undecodable (a UnicodeDecodeError
# holding its bytes).
_UNPARSABLE_EXAMPLE = b"Could not parse example input, value: '"
# The end of the quoted record: TensorFlow's node name, else (the message cut at a NUL) the eager op's suffix.
_QUOTE_END = re.compile(rb"'\n\t \[\[|'?\s*\[Op:[^\]]*\](?: name: [^\n]*)?$")
_NOT_AN_EXAMPLE = ("not a tf.Example record (it does not parse)",
                   "classification tf.Examples (is the input format right?)")


def _message_bytes(error: BaseException) -> bytes:
  if isinstance(error, UnicodeDecodeError) and isinstance(error.object, bytes | bytearray):
    return bytes(error.object)
  return str(error).encode("utf-8", "surrogateescape")


def first_unparsable_record(parses: Callable[[bytes], bool], quoted: bytes | None = None
                            ) -> tuple[str, int] | None:
  """(file, 1-based row) of a record of this process's pipelines (the files read last first) that `parses` refuses;
  with `quoted` (the record as a TensorFlow error quotes it: up to its first NUL byte), the first record quoted so
  (one that `parses` refuses, if any), else None."""
  quoted_so = None
  for path in reversed(list(_PIPELINE_FILES)):
    try:
      for row, record in enumerate(read_tfrecord(path), start=1):
        if quoted is not None and record.partition(b"\x00")[0] != quoted:
          continue
        if not parses(record):
          return path, row
        quoted_so = quoted_so or (path, row)
    except (OSError, DataError):
      continue
  return quoted_so if quoted is not None else None


def _parses_as_example(record: bytes) -> bool:
  try:
    tf.train.Example.FromString(record)
  except PROTO_PARSE_ERRORS:
    return False
  return True


def located_unparsable_example(error: BaseException) -> str | None:
  """`<path>, row <row>: not a tf.Example record ...` for TensorFlow's error on a record of a tf.Example pipeline
  that does not parse ("Could not parse example input", or the UnicodeDecodeError of that message when the
  record is not UTF-8), or None."""
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


def _broken_record(path: str) -> tuple[int, tf.errors.DataLossError] | None:
  """(1-based row, TensorFlow's error) of the first record of `path` that cannot be read, or None."""
  done = 0
  try:
    for batch in tf.data.TFRecordDataset(path).batch(1024):
      done += int(batch.shape[0])
  except tf.errors.DataLossError as e:
    return done + _readable_records(path, done) + 1, e
  return None


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


@dataclasses.dataclass
class InputConfig:
  """How a tf.data pipeline reads TFRecord files.

  Attributes:
    file_pattern: A glob, a comma-separated list of globs, or a list of them.
    batch_size: Global batch size; under a tf.distribute strategy each replica gets
      `input_context.get_per_replica_batch_size(batch_size)`.
    shuffle: Shuffle files and records (training); False keeps the file order (evaluation).
    shuffle_buffer_size: Records held by the shuffle buffer.
    seed: Seed for shuffling; None for a different order every run.
    num_epochs: Passes over the data; None repeats forever.
    drop_remainder: Drop the last partial batch (static batch shapes).
    as_supervised: Yield (features, labels) pairs for `Model.fit`; otherwise one feature dict with the labels.
  """

  file_pattern: str | Sequence[str]
  batch_size: int = 32
  shuffle: bool = True
  shuffle_buffer_size: int = 10_000
  seed: int | None = None
  num_epochs: int | None = 1
  drop_remainder: bool = False
  as_supervised: bool = True

  def __post_init__(self):
    if self.batch_size < 1:
      raise ValueError(f"`batch_size` must be positive, got {self.batch_size}.")
    if self.shuffle_buffer_size < 1:
      raise ValueError(f"`shuffle_buffer_size` must be positive, got {self.shuffle_buffer_size}.")
    if self.num_epochs is not None and self.num_epochs < 1:
      raise ValueError(f"`num_epochs` must be positive or None, got {self.num_epochs}.")

  def files(self) -> list[str]:
    """The sorted files the pattern matches; FileNotFoundError naming the pattern when there are none."""
    patterns = self.file_pattern.split(",") if isinstance(self.file_pattern, str) else list(self.file_pattern)
    files = sorted({f for pattern in patterns for f in tf.io.gfile.glob(pattern.strip())})
    if not files:
      raise FileNotFoundError(f"{self.file_pattern}: no TFRecord file matches the file pattern")
    for path in files:
      if tf.io.gfile.isdir(path):
        raise DataError(path, "a directory", expected="TFRecord files (a file, or a pattern such as "
                        f"{os.path.join(path, '*.tfrecord')})")
      check_record_file(path, empty_ok=True)
    return files


# Records per provenance block (see `build_pipeline`).
_TAG_BLOCK = 1024

# (paths [batch_size] string, rows [batch_size] int64, serialized [batch_size] string) -> dataset element.
ParseBatchFn = Callable[[tf.Tensor, tf.Tensor, tf.Tensor], Any]


def build_pipeline(config: InputConfig, parse_batch: ParseBatchFn,
                   input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
  """Reads, shards, shuffles, repeats, batches, parses and prefetches TFRecord files.

  Each input pipeline reads its own share: whole files when there are at least as many files as pipelines,
  else every `num_input_pipelines`-th record. Records keep their file path and 1-based row through shuffling
  so `parse_batch` can name a bad one. Without shuffling or record sharding (evaluation) records flow in
  blocks of `_TAG_BLOCK` re-cut into batches, so nothing runs per record; files are interleaved block-wise.

  Args:
    config: Files, batch size, shuffling and epochs.
    parse_batch: Turns a batch of (paths, rows, serialized records) into the dataset element.
    input_context: From `strategy.distribute_datasets_from_function`; None for a single pipeline.

  Returns:
    The batched, parsed, prefetched dataset.
  """
  files = config.files()
  for path in files:  # Newest last: a failure is looked for in the files read last first.
    _PIPELINE_FILES.pop(path, None)
    _PIPELINE_FILES[path] = None
  num_pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  batch_size = input_context.get_per_replica_batch_size(
      config.batch_size) if input_context else config.batch_size
  shard_files = len(files) >= num_pipelines
  dataset = tf.data.Dataset.from_tensor_slices(files)
  if num_pipelines > 1 and shard_files:
    dataset = dataset.shard(num_pipelines, pipeline_id)
  if config.shuffle:
    dataset = dataset.shuffle(len(files), seed=config.seed, reshuffle_each_iteration=True)

  # Provenance is attached per block of records, not per record: a per-record map costs more than parsing.
  def read_file(path):
    def tag(block_index, records):
      size = tf.shape(records, out_type=tf.int64)[0]
      rows = block_index * _TAG_BLOCK + 1 + tf.range(size, dtype=tf.int64)
      return tf.fill([size], path), rows, records

    return tf.data.TFRecordDataset(path).batch(_TAG_BLOCK).enumerate().map(tag)

  dataset = dataset.interleave(read_file, cycle_length=min(len(files), 4), block_length=1,
                               num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  per_record = config.shuffle or (num_pipelines > 1 and not shard_files)
  if per_record:
    dataset = dataset.unbatch()
    if num_pipelines > 1 and not shard_files:
      dataset = dataset.shard(num_pipelines, pipeline_id)
    if config.shuffle:
      dataset = dataset.shuffle(config.shuffle_buffer_size, seed=config.seed, reshuffle_each_iteration=True)
  if config.num_epochs != 1:
    dataset = dataset.repeat(config.num_epochs)
  if per_record:
    dataset = dataset.batch(batch_size, drop_remainder=config.drop_remainder)
  else:  # Evaluation order: re-cut the tagged blocks into batches with batch-level slicing.
    dataset = dataset.rebatch(batch_size, drop_remainder=config.drop_remainder)
  dataset = dataset.map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE)
  return dataset.prefetch(tf.data.AUTOTUNE)


def assert_valid(ok: tf.Tensor, paths: tf.Tensor, rows: tf.Tensor, field: str, problem: str,
                 positions: tf.Tensor | None = None) -> tf.Operation:
  """An op failing with `<path>, row <row>[, example <position>], field <field>: <problem>.` for the first
  record not `ok`.

  Args:
    ok: bool [batch_size], or [batch_size, ...] reduced over the trailing axes; batch_size may be 0.
    paths: string [batch_size] record files.
    rows: int64 [batch_size] 1-based rows within the files.
    field: Feature name for the message.
    problem: What is wrong and what was expected.
    positions: int64 [batch_size] 1-based positions of ELWC examples within their lists, or None.
  """
  ok = tf.reduce_all(ok, axis=tf.range(1, tf.rank(ok)))
  # One always-failing entry at the end, so the first bad one is found even in an empty or all-good batch.
  first_bad = tf.argmin(tf.cast(tf.concat([ok, [False]], 0), tf.int32), output_type=tf.int32)

  def at(values: tf.Tensor, padding: Any) -> tf.Tensor:
    return tf.gather(tf.concat([values, tf.fill([1], tf.cast(padding, values.dtype))], 0), first_bad)

  parts = [at(paths, ""), ", row ", tf.strings.as_string(at(rows, 0))]
  if positions is not None:
    parts += [", example ", tf.strings.as_string(at(positions, 0))]
  message = tf.strings.join(parts + [f", field {field}: {problem}."])
  return tf.debugging.Assert(tf.reduce_all(ok), [message])


def record_names(paths: tf.Tensor, rows: tf.Tensor, suffix: str = "") -> tf.Tensor:
  """`<path>, row <row><suffix>` per record: the `example_names` of `tf.io.parse_example`, which its errors (a
  missing required feature, another value type, another length) quote, so `located_data_problem` can name the
  record."""
  return tf.strings.join([paths, ", row ", tf.strings.as_string(rows), suffix])


_ASSERTION = re.compile(r"assertion failed: \[(.+?, row \d+(?:, example \d+|, context)?, field [^\]]*?\.)\]",
                        re.DOTALL)
# `tf.io.parse_example`'s errors for a record named by `record_names` (ELWC adds ", example <i>" or ", context").
_NAME = r"Name: (?P<name>.+?, row \d+(?:, example \d+|, context)?), "
_MISSING = re.compile(_NAME + r"Feature: (?P<key>.+?) \(data type: (?P<want>\w+)\) is required but could not be "
                      r"found")
_OTHER_TYPE = re.compile(_NAME + r"Key: (?P<key>.+?), Index: \d+\.\s+Data types don't match\. Data type: "
                         r"(?P<got>\w+) but expected type: (?P<want>\w+)")
_OTHER_LENGTH = re.compile(_NAME + r"Key: (?P<key>.+?), Index: \d+\.\s+Number of \w+ values != expected\.\s+"
                           r"Values size: (?P<got>\d+) but output shape: \[(?P<shape>[^\]]*)\]")
# TensorFlow's dtype names in those errors -> the tf.train.Feature kinds users write.
_KINDS = {"float": "float_list", "int64": "int64_list", "string": "bytes_list"}


def _parse_problem(text: str) -> str | None:
  """The located message of a `tf.io.parse_example` error on records named by `record_names`, or None."""
  match = _MISSING.search(text)
  if match:
    name, key, want = match["name"], match["key"], _KINDS.get(match["want"], match["want"])
    where = "example" if ", example " in name else "list's context" if name.endswith(", context") else "record"
    return f"{name}, field {key}: missing feature; expected {key} ({want}) in every {where}."
  match = _OTHER_TYPE.search(text)
  if match:
    return (f"{match['name']}, field {match['key']}: {_KINDS.get(match['got'], match['got'])} values; expected "
            f"{_KINDS.get(match['want'], match['want'])} values.")
  match = _OTHER_LENGTH.search(text)
  if match:
    dims = [int(d) for d in match["shape"].replace(" ", "").split(",") if d]
    size = math.prod(dims)
    expected = f"{size} value" + ("s" if size != 1 else "") + (f" (shape {dims})" if len(dims) > 1 else "")
    return f"{match['name']}, field {match['key']}: {match['got']} values; expected {expected}."
  return None


def located_data_problem(error: BaseException) -> str | None:
  """The `<path>, row <row>, field <field>: <problem>.` message of a bad record inside `error`.

  A bad record fails the tf.data pipeline with TensorFlow's InvalidArgumentError, whose text buries the located
  message among op names: an `assert_valid` failure, or a `tf.io.parse_example` error on records named by
  `record_names` (a missing required feature, a value of another type or length). Binaries report just the
  message. None when `error` holds no such message.
  """
  if not isinstance(error, tf.errors.InvalidArgumentError):
    return None
  text = str(error)
  match = _ASSERTION.search(text)
  return match.group(1) if match else _parse_problem(text)


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


def make_dataset(config: InputConfig, schema: ExampleSchema,
                 input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
  """The classification pipeline of `build_pipeline` with `parse_batch_fn(schema)`."""
  return build_pipeline(config, parse_batch_fn(schema, config.as_supervised), input_context)


def make_dataset_fn(config: InputConfig,
                    schema: ExampleSchema) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
  """A dataset function for `strategy.distribute_datasets_from_function`.

  Example:
    strategy = tf.distribute.MirroredStrategy()
    dataset_fn = make_dataset_fn(InputConfig("train-*.tfrecord", batch_size=64), schema)
    dataset = strategy.distribute_datasets_from_function(dataset_fn)
  """
  config.files()  # Fail fast, before the strategy calls the function on its workers.
  return lambda input_context: make_dataset(config, schema, input_context)
