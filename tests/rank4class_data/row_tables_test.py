"""Tests of rank4class_data.row_tables: each format opened as a header plus located records."""

import os

import tensorflow as tf
from absl.testing import parameterized

from rank4class_data import row_tables
from rank4class_data.validation import DataError


class RowTablesTest(tf.test.TestCase, parameterized.TestCase):

  def _write(self, name: str, content: str) -> str:
    path = os.path.join(self.create_tempdir().full_path, name)
    with open(path, "w", encoding="utf-8", newline="") as f:
      f.write(content)
    return path

  @parameterized.named_parameters(
      ("csv", "in.csv", "csv"), ("tsv", "in.TSV", "tsv"), ("ndjson", "in.ndjson", "jsonl"),
      ("svmlight", "in.svmlight", "libsvm"), ("tab", "in.tab", "tab"))
  def test_format_from_extension(self, path, expected):
    self.assertEqual(row_tables.infer_format(path), expected)

  def test_unknown_extension_raises(self):
    with self.assertRaisesRegex(ValueError, r"cannot tell the format.*'\.xlsx'"):
      row_tables.infer_format("data.xlsx")

  def test_csv_records_count_rows_without_blank_lines(self):
    table = row_tables.read_table(self._write("in.csv", "text,label\na,x\n\nb,y\n"))
    self.assertEqual(table.columns, ["text", "label"])
    records = list(table.records)
    self.assertEqual([(r.row, r.line, r.fields) for r in records],
                     [(1, 2, {"text": "a", "label": "x"}), (2, 4, {"text": "b", "label": "y"})])

  def test_tab_header_names_text_and_class_columns(self):
    table = row_tables.read_table(self._write("in.tab", "Category\tText\nd\tstring\nclass\t\nx\thello\n"))
    self.assertEqual((table.text_column, table.label_column), ("Text", "Category"))
    self.assertEqual([r.fields for r in table.records], [{"Category": "x", "Text": "hello"}])

  def test_libsvm_line_gives_label_qid_and_features(self):
    table = row_tables.read_table(self._write("in.libsvm", "# comment\n2 qid:7 1:0.5 3:2\n"))
    (record,) = list(table.records)
    self.assertEqual((record.row, record.line), (1, 2))
    self.assertEqual(record.fields[row_tables.LIBSVM_LABEL], "2")
    self.assertEqual(record.fields[row_tables.LIBSVM_QID], "7")
    self.assertLen(record.fields[row_tables.LIBSVM_FEATURES], 2)

  def test_duplicate_header_column_raises_naming_it(self):
    with self.assertRaisesRegex(DataError, r"duplicate column\(s\) \['a'\]"):
      row_tables.read_table(self._write("in.csv", "a,a\n1,2\n"))

  def test_short_row_raises_with_its_row_and_line(self):
    table = row_tables.read_table(self._write("in.csv", "text,label\na,x\nb\n"))
    with self.assertRaisesRegex(DataError, r"row 2 \(line 3\).*1 fields.*2 fields"):
      list(table.records)

  def test_jsonl_line_that_is_not_an_object_raises(self):
    with self.assertRaisesRegex(DataError, r"row 2: a JSON list"):
      row_tables.read_table(self._write("in.jsonl", '{"text": "a"}\n[1, 2]\n'))

  def test_missing_file_raises_naming_it(self):
    with self.assertRaisesRegex(FileNotFoundError, "nowhere.csv"):
      row_tables.read_table("/nowhere/nowhere.csv")


if __name__ == "__main__":
  tf.test.main()
