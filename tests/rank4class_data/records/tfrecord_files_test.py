"""Tests for rank4class_data.records.tfrecord_files: TFRecord files written whole, read in order, broken ones
located."""

import os
import re

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_data.records import elwc, tfrecord_files, tfrecords
from rank4class_data.records.tfrecords import ClassificationInstance, ExampleSchema
from rank4class_data.validation import DataError
from tests.rank4class_data import example_record_files


def _text_instances(labels):
  return [ClassificationInstance(label=label, text=f"doc {i}") for i, label in enumerate(labels)]


class TfrecordFilesTest(tf.test.TestCase):
  """A truncated TFRecord, a file that is not one, and a folder: one located error, never TensorFlow's."""

  def test_read_missing_file_raises(self):
    with self.assertRaisesRegex(FileNotFoundError, "absent.tfrecord"):
      list(tfrecord_files.read_tfrecord("/nonexistent/absent.tfrecord"))

  def test_truncated_file_names_file_and_row(self):
    path = example_record_files.write_truncated(self.create_tempdir().full_path)
    with self.assertRaisesRegex(DataError, re.escape(
        f"{path}, row 3000: truncated record at byte {example_record_files.LAST_RECORD_OFFSET} (the file "
        "ends inside it); expected a complete TFRecord file (write or copy it again).")):
      list(tfrecord_files.read_tfrecord(path))
    with self.assertRaisesRegex(DataError, f"{path}, row 3000: truncated"):
      tfrecord_files.count_records(path)

  def test_csv_file_is_not_a_tfrecord(self):
    path = os.path.join(self.create_tempdir().full_path, "rows.csv")
    with open(path, "w", encoding="utf-8") as f:
      f.write("text,label\nhello world,sports\n")
    with self.assertRaisesRegex(DataError, re.escape(
        f"{path}, row 1: not a TFRecord file (no valid record at byte 0); expected a TFRecord file (is the "
        "input format right?).")):
      list(tfrecord_files.read_tfrecord(path))

  def test_folder_is_one_located_error(self):
    folder = self.create_tempdir().full_path
    with self.assertRaisesRegex(DataError, re.escape(f"{folder}: a directory; expected a TFRecord file (a "
                                                     "file, not a folder).")):
      list(tfrecord_files.read_tfrecord(folder))

  def test_empty_and_too_short_files_are_errors_not_empty_data(self):
    folder = self.create_tempdir().full_path
    empty, short = os.path.join(folder, "empty.tfrecord"), os.path.join(folder, "short.tfrecord")
    open(empty, "wb").close()
    with open(short, "wb") as f:
      f.write(b"a,b\n1,2\n")  # TensorFlow's reader takes under 12 bytes for an empty file.
    with self.assertRaisesRegex(DataError, re.escape(f"{empty}: no records (the file is empty); expected a "
                                                     "TFRecord file with records.")):
      list(tfrecord_files.read_tfrecord(empty))
    with self.assertRaisesRegex(DataError, re.escape(f"{short}, row 1: not a TFRecord file (8 bytes, shorter "
                                                     "than one record)")):
      tfrecord_files.first_record(short)
    tfrecord_files.check_record_file(empty, empty_ok=True)  # An empty shard among others is fine ...
    with self.assertRaisesRegex(DataError, re.escape(f"{empty}: no records (the file is empty)")):
      tfrecord_files.require_records([empty])  # ... but not only empty ones.

  def test_first_record_reads_one_record_of_a_whole_file(self):
    folder = self.create_tempdir().full_path
    path = example_record_files.write_corrupted(folder)  # Framed whole; the last record's checksum fails.
    self.assertEqual(tf.train.Example.FromString(tfrecord_files.first_record(path)).features.feature["label"]
                     .int64_list.value, [0])
    with self.assertRaisesRegex(DataError, re.escape(
        f"{path}, row 3000: corrupted record at byte {example_record_files.LAST_RECORD_OFFSET + 12} "
        "(checksum mismatch)")):
      list(tfrecord_files.read_tfrecord(path))
    # A cut file is refused whole, before its first record.
    cut = example_record_files.write_truncated(folder)
    with self.assertRaisesRegex(DataError, re.escape(f"{cut}, row 3000: truncated record at byte ")):
      tfrecord_files.first_record(cut)

  def test_data_loss_is_located_among_the_given_files(self):
    folder = self.create_tempdir().full_path
    good = os.path.join(folder, "good.tfrecord")
    tfrecords.write_instances(good, _text_instances([0, 1]), ExampleSchema())
    path = example_record_files.write_truncated(folder)
    with self.assertRaises(tf.errors.DataLossError) as caught:
      list(tf.data.TFRecordDataset(path))
    self.assertEqual(tfrecord_files.located_data_loss_in(caught.exception, [good, path]),
                     f"{path}, row 3000: truncated record at byte {example_record_files.LAST_RECORD_OFFSET} "
                     "(the file ends inside it); expected a complete TFRecord file (write or copy it again).")
    self.assertIsNone(tfrecord_files.located_data_loss_in(caught.exception, [good]))
    self.assertIsNone(tfrecord_files.located_data_loss_in(ValueError("truncated record at 0"), [path]))



def _example_records() -> list[bytes]:
  """tf.Examples of a few lengths, so that cuts fall at many offsets of headers, data and checksums."""
  return [tfrecords.encode_instance(ClassificationInstance(label=i % 3, text="w" * length), ExampleSchema())
          .SerializeToString() for i, length in enumerate((1, 9, 3, 14, 6, 2))]


def _elwc_records() -> list[bytes]:
  """ELWC lists of a few lengths (a context feature, 1 or 2 examples)."""
  return [elwc.make_elwc([{"relevance": float(j)} for j in range(i % 2 + 1)], {"query": "q" * (i + 1)})
          .SerializeToString() for i in range(6)]


class CutRecordFilesTest(tf.test.TestCase, parameterized.TestCase):
  """A TFRecord cut at any byte is refused naming the file and the record it ends inside, or, cut between two
  records, reads as exactly the records before the cut: never as a shorter file with no error."""

  @parameterized.named_parameters(("tf_examples", _example_records, tfrecord_files.read_tfrecord),
                                  ("elwc_lists", _elwc_records,
                                   lambda path: [lst.SerializeToString() for lst in elwc.read_elwc(path)]))
  def test_every_cut_in_the_last_two_records_is_refused_or_reads_whole_records(self, make_records, read):
    records = make_records()
    folder = self.create_tempdir().full_path
    path = os.path.join(folder, "whole.tfrecord")
    tfrecord_files.write_tfrecord(path, records)
    with open(path, "rb") as f:
      data = f.read()
    # Each record: a 12-byte header (length, its checksum), the data, the data's 4-byte checksum.
    starts = [0, *np.cumsum([12 + len(record) + 4 for record in records]).tolist()]
    self.assertEqual(starts[-1], len(data))
    cut_path = os.path.join(folder, "cut.tfrecord")  # One path, rewritten: a changed file is checked again.
    # Every byte offset inside the last two records, and the end.
    for end in range(starts[-3], len(data) + 1):
      with open(cut_path, "wb") as f:
        f.write(data[:end])
      if end in starts:
        tfrecord_files.check_record_file(cut_path)
        self.assertEqual(list(read(cut_path)), records[:starts.index(end)], msg=f"cut at byte {end}")
        continue
      row = max(i for i, start in enumerate(starts) if start < end) + 1
      start = starts[row - 1]
      into = end - start
      where = (f"the file ends {into} byte{'s' if into > 1 else ''} into its 12-byte header" if into < 12 else
               "the file ends inside it")
      with self.assertRaisesRegex(DataError, "^" + re.escape(
          f"{cut_path}, row {row}: truncated record at byte {start} ({where}); expected a complete TFRecord "
          "file (write or copy it again)."), msg=f"cut at byte {end}"):
        tfrecord_files.check_record_file(cut_path)

  def test_tensorflow_reads_a_file_cut_inside_a_header_as_a_shorter_one_the_check_does_not(self):
    folder = self.create_tempdir().full_path
    whole = os.path.join(folder, "whole.tfrecord")
    tfrecord_files.write_tfrecord(whole, _example_records())
    cut = example_record_files.cut_in_last_header(whole, os.path.join(folder, "cut.tfrecord"), cut=11)
    self.assertLen(list(tf.data.TFRecordDataset(cut)), 5)  # Why the check exists: no error from TensorFlow.
    readers = {"read_tfrecord": lambda: list(tfrecord_files.read_tfrecord(cut)),
               "first_record": lambda: tfrecord_files.first_record(cut),
               "count_records": lambda: tfrecord_files.count_records(cut),
               "InputConfig.files": lambda: tfrecords.InputConfig(cut).files(),
               "read_elwc": lambda: list(elwc.read_elwc(cut))}
    for name, read in readers.items():
      with self.assertRaisesRegex(DataError, "^" + re.escape(f"{cut}, row 6: truncated record at byte ") +
                                  r"\d+ \(the file ends 11 bytes into its 12-byte header\)", msg=name):
        read()


if __name__ == "__main__":
  tf.test.main()
