"""TFRecord files: all-or-nothing writing, a check that a file is whole (framed to its last byte), reading in
order, and errors that name the file and row of a broken record (TensorFlow's reader names neither)."""

import os
import re
import struct
from collections.abc import Iterable, Iterator, Sequence

import tensorflow as tf
from google.protobuf.message import DecodeError

from rank4class_data.validation import DataError, atomic_paths, require_input_file

# What parsing a serialized proto raises for bytes that are no such proto: DecodeError, or with the
# pure-Python protobuf (the reference stack's) a UnicodeDecodeError for a string field that is not UTF-8.
PROTO_PARSE_ERRORS = (DecodeError, UnicodeDecodeError)


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

# A TFRecord record's framing: a header of its data's length (uint64, little-endian: 8 bytes) and the length's
# masked CRC32C (4), the data, and the data's masked CRC32C (4). TensorFlow's reader takes fewer than 12 bytes
# left after a record for the end of the file, without an error: a file shorter than a header reads as empty,
# and one cut 1 to 11 bytes after a record as the records before the cut.
_RECORD_HEADER_BYTES = 12
_RECORD_FOOTER_BYTES = 4
_RECORD_LENGTH = struct.Struct("<Q")
# (path, inode, size, modification time in ns) of the local files whose framing checked out: a binary lists
# and opens its files several times, and a file is walked again only once it has changed. (TensorFlow's stat
# gives whole seconds: a file rewritten within the second would look unchanged.)
_FRAMED_FILES: set[tuple[str, int, int, int]] = set()


def check_record_file(path: str, empty_ok: bool = False) -> None:
  """DataError naming `path` unless it is a TFRecord file framed to its last byte.

  The records' headers are walked with file seeks (their data is not read, so a big file is walked quickly)
  and their lengths plus framing must add up to the file's size: TensorFlow's reader would silently take a
  file cut inside a record's header for a shorter one. A file that checked out is walked again only once it
  has changed.

  Refused: an empty file (unless `empty_ok`: one shard of several may be), one shorter than a header (not a
  TFRecord, which TensorFlow's reader would read as empty), and one whose framing does not reach its last byte
  exactly: cut short, corrupted or not a TFRecord, named by the record where that shows (its 1-based row and
  the byte where it starts).

  The toolkit reads and writes its TFRecords uncompressed, so the walk reads the framing of the bytes on disk;
  a reader of GZIP or ZLIB files would skip it, their decompressor catching a cut.
  """
  size = tf.io.gfile.stat(path).length
  if size == 0 and not empty_ok:
    raise DataError(path, "no records (the file is empty)", expected="a TFRecord file with records")
  if 0 < size < _RECORD_HEADER_BYTES:
    raise DataError(path, f"not a TFRecord file ({size} bytes, shorter than one record)", row=1,
                    expected="a TFRecord file (is the input format right?)")
  status = None if "://" in path else os.stat(path)
  version = (path, status.st_ino, status.st_size, status.st_mtime_ns) if status else None
  if version in _FRAMED_FILES:
    return
  unframed = _unframed_record(path, size)
  if unframed is None:
    if version:
      _FRAMED_FILES.add(version)
    return
  # The walk checks no checksum (Python has no CRC32C at hand): TensorFlow's reader, whose checksums tell a
  # corrupted record or another format from a cut one, names the first record it cannot read, if any.
  broken = _broken_record(path)
  if broken is not None:
    raise _data_loss_error(path, *broken)
  row, offset, length = unframed
  if length is None:
    problem = f"the file ends {_bytes(size - offset)} into its {_RECORD_HEADER_BYTES}-byte header"
  else:
    problem = (f"its header gives {_bytes(length)} of data but the file ends "
               f"{_bytes(size - offset - _RECORD_HEADER_BYTES)} into them")
  raise DataError(path, f"truncated record at byte {offset} ({problem})", row=row,
                  expected="a complete TFRecord file (write or copy it again)")


def _bytes(count: int) -> str:
  return f"{count} byte" + ("" if count == 1 else "s")


def _unframed_record(path: str, size: int) -> tuple[int, int, int | None] | None:
  """(1-based row, start byte, data length or None for a header cut short) of the record of `path` (`size`
  bytes) that its framing ends inside, or None when the records' framing ends exactly at the file's end."""
  # Plain file seeks: TensorFlow's GFile reads a header 30 times slower; it serves the paths with a scheme
  # only.
  with (tf.io.gfile.GFile(path, "rb") if "://" in path else open(path, "rb")) as f:
    row, offset = 1, 0
    while offset < size:
      header = f.read(_RECORD_HEADER_BYTES)
      if len(header) < _RECORD_HEADER_BYTES:
        return row, offset, None
      (length,) = _RECORD_LENGTH.unpack_from(header)
      end = offset + _RECORD_HEADER_BYTES + length + _RECORD_FOOTER_BYTES
      if end > size:
        return row, offset, length
      row, offset = row + 1, end
      f.seek(offset)
  return None


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
  """The first record of one TFRecord file, read alone once the file's framing is checked (a later record
  whose checksum fails is named when it is read).

  Raises:
    FileNotFoundError / DataError: as `read_tfrecord`, for the file's framing and its first record.
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
  """The number of records (at least one) of one TFRecord file, every one read; DataError as
  `read_tfrecord`."""
  return sum(1 for _ in read_tfrecord(path))


def _broken_record(path: str) -> tuple[int, tf.errors.DataLossError] | None:
  """(1-based row, TensorFlow's error) of the first record of `path` that cannot be read, or None."""
  done = 0
  try:
    for batch in tf.data.TFRecordDataset(path).batch(1024):
      done += int(batch.shape[0])
  except tf.errors.DataLossError as e:
    return done + _readable_records(path, done) + 1, e
  return None


def located_data_loss_in(error: BaseException, paths: Sequence[str]) -> str | None:
  """`<path>, row <row>: <problem>; expected ...` for a DataLossError met reading one of `paths`, or None.

  TensorFlow's error names no file: `paths` (the candidates, most likely first) that are long enough to hold
  the error's byte offset are read again until the broken one is found; the one whose error matches
  TensorFlow's is named, else the first broken one.
  """
  if not isinstance(error, tf.errors.DataLossError):
    return None
  match = _DATA_LOSS.search(str(error))
  offset = int(match.group(2)) if match else -1
  fallback = None
  for path in paths:
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
