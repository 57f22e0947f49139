"""Tests for rank4class_data.conversion.row_cache: row files converted once, keyed by content and settings."""

import json
import os
import re

import tensorflow as tf

from rank4class_data.conversion import convert, row_cache
from rank4class_data.records import tfrecords
from rank4class_data.validation import DataError


def _write(path: str, lines: list[str]) -> str:
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return path


def _labels(split: row_cache.ConvertedSplit) -> list[int]:
  schema = convert.load_schema(split.vocab_path)
  return [i.label for i in tfrecords.read_instances(split.tfrecord, schema)]


class RowCacheTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    self.cache = os.path.join(self.root, "cache")
    self.train = _write(os.path.join(self.root, "train.csv"),
                        ["text,label", "good film,pos", "bad film,neg", "great,pos", "awful,neg", "fine,pos"])

  def test_second_conversion_of_the_same_rows_and_settings_is_reused(self):
    first = row_cache.convert_split(self.train, row_cache.RowConversion(), cache_dir=self.cache)
    self.assertFalse(first.reused)
    self.assertEqual((first.summary.rows, first.summary.class_counts), (5, {"neg": 2, "pos": 3}))
    self.assertEqual(_labels(first), [1, 0, 1, 0, 1])
    second = row_cache.convert_split(self.train, row_cache.RowConversion(), cache_dir=self.cache)
    self.assertTrue(second.reused)
    self.assertEqual((second.tfrecord, second.summary), (first.tfrecord, first.summary))
    self.assertEqual(len(os.listdir(self.cache)), 1)
    self.assertIn("train.csv: 5 rows, 2 classes (conversion reused: ", second.describe())

  def test_a_changed_file_or_setting_converts_again(self):
    first = row_cache.convert_split(self.train, row_cache.RowConversion(), cache_dir=self.cache)
    with open(self.train, "a", encoding="utf-8") as f:
      f.write("dull,neg\n")
    changed = row_cache.convert_split(self.train, row_cache.RowConversion(), cache_dir=self.cache)
    self.assertFalse(changed.reused)
    self.assertNotEqual(changed.tfrecord, first.tfrecord)
    self.assertEqual(changed.summary.rows, 6)
    policy = row_cache.convert_split(self.train, row_cache.RowConversion(bad_rows="skip"),
                                     cache_dir=self.cache)
    self.assertFalse(policy.reused)
    self.assertEqual(len(os.listdir(self.cache)), 3)

  def test_skip_lists_bad_rows_and_fail_leaves_no_cache_folder(self):
    bad = _write(os.path.join(self.root, "bad.csv"), ["text,label", "good,pos", ",neg", "bad,neg", "ok,"])
    with self.assertRaisesRegex(DataError, r"bad\.csv, row 2 \(line 3\), field 'text': empty text"):
      row_cache.convert_split(bad, row_cache.RowConversion(), cache_dir=self.cache)
    self.assertEqual(os.listdir(self.cache), [])  # Nothing half-written.
    skipped = row_cache.convert_split(bad, row_cache.RowConversion(bad_rows="skip"), cache_dir=self.cache)
    self.assertEqual((skipped.summary.rows, skipped.summary.rejected), (2, 2))
    with open(skipped.summary.rejects_path, encoding="utf-8") as f:
      rejects = [json.loads(line) for line in f]
    self.assertEqual([(r["file"], r["row"], r["line"], r["field"], r["reason"]) for r in rejects],
                     [(bad, 2, 3, "text", "empty text"), (bad, 4, 5, "label", "empty label")])
    self.assertTrue(skipped.describe().endswith("; 2 bad rows left out (listed in "
                                                f"{skipped.summary.rejects_path})"))
    self.assertNotIn("bad row", row_cache.convert_split(self.train, row_cache.RowConversion(bad_rows="skip"),
                                                        cache_dir=self.cache).describe())
    with self.assertRaisesRegex(DataError, "more than max_bad_rows=1"):
      row_cache.convert_split(bad, row_cache.RowConversion(bad_rows="skip", max_bad_rows=1),
                              cache_dir=self.cache)

  def test_other_splits_are_numbered_and_checked_by_the_training_vocabulary(self):
    train = row_cache.convert_split(self.train, row_cache.RowConversion(), cache_dir=self.cache)
    test = _write(os.path.join(self.root, "test.csv"), ["text,label", "nice,pos", "poor,neg"])
    converted = row_cache.convert_split(test, row_cache.RowConversion(), train.vocab_path,
                                        cache_dir=self.cache)
    self.assertEqual(_labels(converted), [1, 0])
    unknown = _write(os.path.join(self.root, "unknown.csv"), ["text,label", "so so,neutral"])
    with self.assertRaisesRegex(DataError,
                                r"unknown\.csv, row 1 .*unknown label 'neutral'.*\['neg', 'pos'\]"):
      row_cache.convert_split(unknown, row_cache.RowConversion(), train.vocab_path, cache_dir=self.cache)

  def test_several_files_make_one_split_with_one_vocabulary(self):
    more = _write(os.path.join(self.root, "train2.csv"), ["text,label", "meh,neutral"])
    both = row_cache.convert_split(f"{self.train},{more}", row_cache.RowConversion(), cache_dir=self.cache)
    self.assertEqual(both.summary.class_counts, {"neg": 2, "neutral": 1, "pos": 3})
    self.assertEqual(_labels(both), [2, 0, 2, 0, 2, 1])
    globbed = row_cache.convert_split(os.path.join(self.root, "train*.csv"), row_cache.RowConversion(),
                                      cache_dir=self.cache)
    self.assertTrue(globbed.reused)  # The same files in the same order.
    other = _write(os.path.join(self.root, "other.csv"), ["review,label", "meh,neutral"])
    with self.assertRaisesRegex(DataError, r"other\.csv.*missing column 'text'"):
      row_cache.convert_split(f"{self.train},{other}", row_cache.RowConversion(), cache_dir=self.cache)

  def test_missing_file_and_row_patterns(self):
    with self.assertRaisesRegex(FileNotFoundError, "nope.csv: no such row file"):
      row_cache.convert_split(os.path.join(self.root, "nope.csv"), row_cache.RowConversion(),
                              cache_dir=self.cache)
    self.assertTrue(row_cache.is_row_pattern(self.train))
    self.assertTrue(row_cache.is_row_pattern(os.path.join(self.root, "*.csv") + ",x.tab,y.jsonl,z.libsvm"))
    self.assertFalse(row_cache.is_row_pattern(self.train + ",x.tfrecord"))
    self.assertFalse(row_cache.is_row_pattern(os.path.join(self.root, "train-*.tfrecord")))

  def test_folder_among_row_files_is_one_located_error(self):
    folder = os.path.join(self.root, "more")
    os.mkdir(folder)
    with self.assertRaisesRegex(DataError, "^" + re.escape(f"{folder}: a directory; expected a row file "
                                                           "(CSV, TSV, JSONL, LibSVM or .tab) (a file, not a "
                                                           "folder).") + "$"):
      row_cache.convert_split(f"{self.train},{folder}", row_cache.RowConversion(), cache_dir=self.cache)

  def test_latin1_rows_are_skipped_and_listed_under_the_users_path(self):
    with open(self.train, "ab") as f:
      f.write(b"caf\xe9 cr\xe8me,pos\n")
    with self.assertRaisesRegex(DataError, "^" + re.escape(f"{self.train}, row 6 (line 7), field 'text': "
                                                           "byte 0xe9 is not UTF-8")):
      row_cache.convert_split(self.train, row_cache.RowConversion(), cache_dir=self.cache)
    self.assertEqual(os.listdir(self.cache), [])  # Nothing half-converted is left in the cache.
    split = row_cache.convert_split(self.train, row_cache.RowConversion(bad_rows="skip"),
                                    cache_dir=self.cache)
    self.assertEqual((split.summary.rows, split.summary.rejected), (5, 1))
    with open(split.summary.rejects_path, encoding="utf-8") as f:
      self.assertEqual([(r["file"], r["row"], r["line"], r["field"]) for r in map(json.loads, f)],
                       [(self.train, 6, 7, "text")])

  def test_bad_settings_raise(self):
    with self.assertRaisesRegex(ValueError, r"`policy` must be one of \[.*\], got 'drop'"):
      row_cache.RowConversion(bad_rows="drop")
    with self.assertRaisesRegex(ValueError,
                                r"`input_format` must be one of \['auto', 'csv', .*\], got 'xlsx'"):
      row_cache.RowConversion(input_format="xlsx")


if __name__ == "__main__":
  tf.test.main()
