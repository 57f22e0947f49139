"""Test fixtures: files of classification tf.Example records, whole (`write_records`) or cut short inside
their last record (`write_truncated`, and where that record starts) or inside its header
(`cut_in_last_header`), or whole but with a record whose checksum fails (`write_corrupted`)."""

import os

import tensorflow as tf

from rank4class_data.records import tfrecords
from rank4class_data.records.tfrecords import ClassificationInstance, ExampleSchema

# Each record of `write_truncated`: 12 header bytes + a 35-byte tf.Example + 4 checksum bytes; the last of
# 3000 starts at byte 2999 * 51.
LAST_RECORD_OFFSET = 2999 * 51


def write_records(folder: str, name: str, instances, schema: ExampleSchema | None = None) -> str:
  """`instances` written as `folder`/`name` (the converter's records, `schema` or the default)."""
  path = os.path.join(folder, name)
  tfrecords.write_instances(path, instances, schema or ExampleSchema())
  return path


def write_truncated(folder: str, records: int = 3000, cut: int = 5) -> str:
  """A TFRecord of `records` equal text instances whose last `cut` bytes are missing (its last record is cut
  short)."""
  path = os.path.join(folder, "cut.tfrecord")
  tfrecords.write_instances(path, [ClassificationInstance(0, "doc")] * records, ExampleSchema())
  with open(path, "rb") as f:
    data = f.read()
  with open(path, "wb") as f:
    f.write(data[:-cut])
  return path


def write_corrupted(folder: str, records: int = 3000) -> str:
  """A TFRecord of `records` equal text instances whose last record has a byte of its data changed: its
  framing holds, its checksum fails (TensorFlow's reader: "corrupted record at <its data's first byte>")."""
  path = os.path.join(folder, "corrupted.tfrecord")
  tfrecords.write_instances(path, [ClassificationInstance(0, "doc")] * records, ExampleSchema())
  with open(path, "r+b") as f:
    f.seek(os.path.getsize(path) - 5)  # The last byte of the last record's data (its checksum follows).
    f.write(b"?")
  return path


def cut_in_last_header(path: str, cut_path: str, cut: int = 5) -> str:
  """A copy of the TFRecord file `path` at `cut_path` that ends `cut` bytes (1 to 11) into its last record's
  12-byte header: TensorFlow's reader reads it as the records before, without an error."""
  lengths = [len(record) for record in tf.data.TFRecordDataset(path).as_numpy_iterator()]
  last_start = sum(12 + length + 4 for length in lengths[:-1])
  with open(path, "rb") as f:
    data = f.read()
  with open(cut_path, "wb") as f:
    f.write(data[:last_start + cut])
  return cut_path
