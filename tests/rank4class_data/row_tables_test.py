"""Tests of rank4class_data.row_tables: each format opened as a header plus located records."""

import os
import re

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


class AsTheyComeTest(tf.test.TestCase, parameterized.TestCase):
  """Files as users export them: a byte order mark, Latin-1 bytes, huge fields, no rows, a folder."""

  def _write_bytes(self, name: str, content: bytes) -> str:
    path = os.path.join(self.create_tempdir().full_path, name)
    with open(path, "wb") as f:
      f.write(content)
    return path

  @parameterized.named_parameters(
      ("csv", "in.csv", "text,label\nsunny day,pos\n"),
      ("tsv", "in.tsv", "text\tlabel\nsunny day\tpos\n"),
      ("jsonl", "in.jsonl", '{"text": "sunny day", "label": "pos"}\n'),
      ("tab", "in.tab", "text\tlabel\nstring\td\n\tclass\nsunny day\tpos\n"),
  )
  def test_byte_order_mark_is_not_part_of_the_first_column(self, name, content):
    table = row_tables.read_table(self._write_bytes(name, b"\xef\xbb\xbf" + content.encode("utf-8")))
    self.assertEqual(table.columns, ["text", "label"])
    self.assertEqual([r.fields for r in table.records], [{"text": "sunny day", "label": "pos"}])

  @parameterized.named_parameters(
      ("csv", "in.csv", b"text,label\ncaf\xc3\xa9,x\ncaf\xe9,y\nthe end,z\n", "row 2 (line 3), field 'text'"),
      ("tsv", "in.tsv", b"text\tlabel\ncaf\xc3\xa9\tx\ncaf\xe9\ty\nthe end\tz\n", "row 2 (line 3), field 'text'"),
      ("tab", "in.tab", b"text\tlabel\nstring\td\n\tclass\ncaf\xc3\xa9\tx\ncaf\xe9\ty\nthe end\tz\n",
       "row 2 (line 5), field 'text'"),
      ("jsonl", "in.jsonl", b'{"text": "caf\xc3\xa9", "label": "x"}\n{"text": "caf\xe9", "label": "y"}\n'
       b'{"text": "the end", "label": "z"}\n', "row 2"),
      ("libsvm", "in.libsvm", b"1 1:0.5 # caf\xe9 is fine in a comment\n2\xe9 2:1\n3 1:1\n", "row 2"),
  )
  def test_latin1_row_is_a_located_bad_row(self, name, content, location):
    path = self._write_bytes(name, content)
    with self.assertRaisesRegex(DataError, "^" + re.escape(
        f"{path}, {location}: byte 0xe9 is not UTF-8; expected UTF-8 text (save the file as UTF-8, e.g. iconv -f "
        "latin1 -t utf-8).") + "$"):
      list(row_tables.read_table(path).records)
    # Under a skip policy the row is handed over and reading goes on.
    rejected = []
    records = list(row_tables.read_table(path, on_bad_row=rejected.append).records)
    self.assertEqual([r.row for r in records], [1, 3])
    self.assertEqual([(e.row, e.problem) for e in rejected], [(2, "byte 0xe9 is not UTF-8")])
    if not name.endswith(".libsvm"):
      self.assertEqual(records[0].fields["text"], "caf\u00e9")

  def test_latin1_header_is_a_header_error(self):
    path = self._write_bytes("in.csv", b"caf\xe9,label\na,x\n")
    with self.assertRaisesRegex(DataError, re.escape(f"{path}, header row (line 1), field 'caf\udce9': byte 0xe9 "
                                                     "is not UTF-8")):
      row_tables.read_table(path)

  def test_five_megabyte_csv_field_reads_whole(self):
    text = "word " * 1_000_000
    table = row_tables.read_table(self._write_bytes("in.csv", f'text,label\n"{text}",x\n'.encode()))
    (record,) = list(table.records)
    self.assertLen(record.fields["text"], 5_000_000)

  @parameterized.named_parameters(
      ("empty_csv", "in.csv", b"", "no rows (the file is empty); expected a row file (CSV, TSV, JSONL, LibSVM or "
       ".tab) with data rows."),
      ("blank_csv", "in.csv", b"\n\n", "no rows (the file is empty)"),
      ("header_only_csv", "in.csv", b"text,label\n", "no rows (only a header); expected data rows after the "
       "header."),
      ("header_and_blank_lines_tsv", "in.tsv", b"text\tlabel\n\n\n", "no rows (only a header)"),
      ("header_only_tab", "in.tab", b"text\tlabel\nstring\td\n\tclass\n", "no rows (only a header)"),
      ("empty_tab", "in.tab", b"", "no rows (the file is empty)"),
      ("empty_jsonl", "in.jsonl", b"\n", "no rows (the file is empty)"),
      ("comments_only_libsvm", "in.libsvm", b"# nothing yet\n", "no rows (the file is empty)"),
  )
  def test_file_without_rows_is_one_located_error(self, name, content, message):
    path = self._write_bytes(name, content)
    with self.assertRaisesRegex(DataError, "^" + re.escape(f"{path}: {message}")):
      row_tables.read_table(path)

  def test_folder_is_one_located_error(self):
    folder = self.create_tempdir().full_path
    with self.assertRaisesRegex(DataError, "^" + re.escape(f"{folder}: a directory; expected a row file (CSV, TSV, "
                                                           "JSONL, LibSVM or .tab) (a file, not a folder).") + "$"):
      row_tables.read_table(folder, "csv")


class ReadLinesTest(tf.test.TestCase):

  def _write_bytes(self, content: bytes) -> str:
    path = os.path.join(self.create_tempdir().full_path, "in.txt")
    with open(path, "wb") as f:
      f.write(content)
    return path

  def test_non_blank_lines_are_rows_without_bom_or_line_ends(self):
    table = row_tables.read_lines(self._write_bytes(b"\xef\xbb\xbfsunny day\r\n\ncaf\xc3\xa9\n"))
    self.assertEqual([(r.row, r.line, r.fields["text"]) for r in table.records],
                     [(1, 1, "sunny day"), (2, 3, "caf\u00e9")])

  def test_latin1_line_is_a_bad_row_and_empty_file_an_error(self):
    path = self._write_bytes(b"a\ncaf\xe9\nb\n")
    with self.assertRaisesRegex(DataError, re.escape(f"{path}, row 2: byte 0xe9 is not UTF-8")):
      list(row_tables.read_lines(path).records)
    rejected = []
    self.assertEqual([r.fields["text"] for r in row_tables.read_lines(path, rejected.append).records], ["a", "b"])
    self.assertLen(rejected, 1)
    empty = self._write_bytes(b"\n \n")
    with self.assertRaisesRegex(DataError, re.escape(f"{empty}: no rows (no non-blank line); expected one input per "
                                                     "line.")):
      row_tables.read_lines(empty)


if __name__ == "__main__":
  tf.test.main()
