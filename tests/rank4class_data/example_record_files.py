"""Test fixtures: files of classification tf.Example records, whole (`write_records`) or cut short inside their
last record (`write_truncated`, and where that record starts)."""

import os

from rank4class_data import tfrecords
from rank4class_data.tfrecords import ClassificationInstance, ExampleSchema

# Each record of `write_truncated`: 12 header bytes + a 35-byte tf.Example + 4 checksum bytes; the last of 3000
# starts at byte 2999 * 51.
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
