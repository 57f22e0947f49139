"""Tests for rank4class_data.tfrecord_files: TFRecord files written whole, read in order, broken ones located."""

import os
import re

import tensorflow as tf

from rank4class_data import tfrecord_files, tfrecords
from rank4class_data.tfrecords import ClassificationInstance, ExampleSchema
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
        f"{path}, row 3000: truncated record at byte {example_record_files.LAST_RECORD_OFFSET} (the file ends inside it); expected a "
        "complete TFRecord file (write or copy it again).")):
      list(tfrecord_files.read_tfrecord(path))
    with self.assertRaisesRegex(DataError, f"{path}, row 3000: truncated"):
      tfrecord_files.count_records(path)

  def test_csv_file_is_not_a_tfrecord(self):
    path = os.path.join(self.create_tempdir().full_path, "rows.csv")
    with open(path, "w", encoding="utf-8") as f:
      f.write("text,label\nhello world,sports\n")
    with self.assertRaisesRegex(DataError, re.escape(
        f"{path}, row 1: not a TFRecord file (no valid record at byte 0); expected a TFRecord file (is the input "
        "format right?).")):
      list(tfrecord_files.read_tfrecord(path))

  def test_folder_is_one_located_error(self):
    folder = self.create_tempdir().full_path
    with self.assertRaisesRegex(DataError, re.escape(f"{folder}: a directory; expected a TFRecord file (a file, not "
                                                     "a folder).")):
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
    with self.assertRaisesRegex(DataError, re.escape(f"{short}, row 1: not a TFRecord file (8 bytes, shorter than "
                                                     "one record)")):
      tfrecord_files.first_record(short)
    tfrecord_files.check_record_file(empty, empty_ok=True)  # An empty shard among others is fine ...
    with self.assertRaisesRegex(DataError, re.escape(f"{empty}: no records (the file is empty)")):
      tfrecord_files.require_records([empty])  # ... but not only empty ones.

  def test_first_record_reads_one_record_only(self):
    path = example_record_files.write_truncated(self.create_tempdir().full_path)
    self.assertEqual(tf.train.Example.FromString(tfrecord_files.first_record(path)).features.feature["label"]
                     .int64_list.value, [0])

  def test_data_loss_is_located_among_the_given_files(self):
    folder = self.create_tempdir().full_path
    good = os.path.join(folder, "good.tfrecord")
    tfrecords.write_instances(good, _text_instances([0, 1]), ExampleSchema())
    path = example_record_files.write_truncated(folder)
    with self.assertRaises(tf.errors.DataLossError) as caught:
      list(tf.data.TFRecordDataset(path))
    self.assertEqual(tfrecord_files.located_data_loss_in(caught.exception, [good, path]),
                     f"{path}, row 3000: truncated record at byte {example_record_files.LAST_RECORD_OFFSET} (the file ends inside it); "
                     "expected a complete TFRecord file (write or copy it again).")
    self.assertIsNone(tfrecord_files.located_data_loss_in(caught.exception, [good]))
    self.assertIsNone(tfrecord_files.located_data_loss_in(ValueError("truncated record at 0"), [path]))


if __name__ == "__main__":
  tf.test.main()
