"""Tests of rank4class_data.rows.row_tables: each format opened as a header plus located records."""

import os
import re

import tensorflow as tf
from absl.testing import parameterized

from rank4class_data.rows import row_tables
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
      ("tsv", "in.tsv", b"text\tlabel\ncaf\xc3\xa9\tx\ncaf\xe9\ty\nthe end\tz\n",
       "row 2 (line 3), field 'text'"),
      ("tab", "in.tab", b"text\tlabel\nstring\td\n\tclass\ncaf\xc3\xa9\tx\ncaf\xe9\ty\nthe end\tz\n",
       "row 2 (line 5), field 'text'"),
      ("jsonl", "in.jsonl", b'{"text": "caf\xc3\xa9", "label": "x"}\n{"text": "caf\xe9", "label": "y"}\n'
       b'{"text": "the end", "label": "z"}\n', "row 2"),
      ("libsvm", "in.libsvm", b"1 1:0.5 # caf\xe9 is fine in a comment\n2\xe9 2:1\n3 1:1\n", "row 2"),
  )
  def test_latin1_row_is_a_located_bad_row(self, name, content, location):
    path = self._write_bytes(name, content)
    with self.assertRaisesRegex(DataError, "^" + re.escape(
        f"{path}, {location}: byte 0xe9 is not UTF-8; expected UTF-8 text (save the file as UTF-8, e.g. "
        "iconv -f latin1 -t utf-8).") + "$"):
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
    with self.assertRaisesRegex(DataError, re.escape(f"{path}, header row (line 1), field 'caf\udce9': byte "
                                                     "0xe9 is not UTF-8")):
      row_tables.read_table(path)

  def test_five_megabyte_csv_field_reads_whole(self):
    text = "word " * 1_000_000
    table = row_tables.read_table(self._write_bytes("in.csv", f'text,label\n"{text}",x\n'.encode()))
    (record,) = list(table.records)
    self.assertLen(record.fields["text"], 5_000_000)

  @parameterized.named_parameters(
      ("empty_csv", "in.csv", b"", "no rows (the file is empty); expected a row file (CSV, TSV, JSONL, "
       "LibSVM or .tab) with data rows."),
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
    with self.assertRaisesRegex(DataError, "^" + re.escape(f"{folder}: a directory; expected a row file "
                                                           "(CSV, TSV, JSONL, LibSVM or .tab) (a file, not a "
                                                           "folder).") + "$"):
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
    self.assertEqual([r.fields["text"] for r in row_tables.read_lines(path, rejected.append).records],
                     ["a", "b"])
    self.assertLen(rejected, 1)
    empty = self._write_bytes(b"\n \n")
    with self.assertRaisesRegex(DataError, re.escape(f"{empty}: no rows (no non-blank line); expected one "
                                                     "input per line.")):
      row_tables.read_lines(empty)



# Row files for the cuts: a header (CSV, TSV) and rows, the last two of which are cut at every byte. The CSV
# rows hold quoted fields over two lines, a quoted delimiter and doubled quotes; each row ends with its line
# end.
_CUT_FILES = {
    "csv": ("text,label\n", ["plain,a\n", '"two\nlines, and a comma",bb\n', '"say ""hi""\n",cc\n']),
    "tsv": ("text\tlabel\n", ["plain\ta\n", '"two\nlines\tand a tab"\tbb\n', '"say ""hi""\n"\tcc\n']),
    "jsonl": ("", ['{"text": "plain", "label": "a"}\n', '{"text": "two", "label": "bb"}\n',
                   '{"text": "say \\"hi\\"", "label": "cc"}\n']),
    "libsvm": ("# a comment line\n", ["1 qid:1 1:0.5\n", "2 qid:1 1:0.25 3:2 # docid = d2\n",
                                      "0 qid:2 2:1.5 # docid = d3\n"]),
}


class CutRowFilesTest(tf.test.TestCase, parameterized.TestCase):
  """A row file cut at any byte of its last two rows is refused naming the file, under every bad-row policy,
  or reads as the complete rows before the cut, plus, where the cut leaves a well-formed last row, that row
  cut short.

  Detectable (refused): a CSV or TSV file ending inside a quoted field, or with a last row of fewer fields
  than the header and no line end; a JSONL or LibSVM last line without a line end that does not parse.
  Undetectable (read): a cut inside an unquoted last field (CSV, TSV: the label "cc" read as "c" or ""),
  inside a number, a label or a comment (LibSVM: "0.25" read as "0.2", "# docid = d2" as "# doc"), or one that
  removes only the final line end. A JSONL line is never well-formed cut short: every cut there is refused or
  lands on a row end.
  """

  def _read(self, path: str, skip: bool) -> tuple[str, object]:
    """("refused", message) or ("read", [fields per record]) reading `path` under fail or skip."""
    rejected = []
    try:
      fields = [r.fields for r in row_tables.read_table(path,
                                                        on_bad_row=rejected.append if skip else None).records]
    except DataError as e:
      return "refused", str(e)
    self.assertEqual(rejected, [], msg="a cut was skipped as a bad row")
    return "read", fields

  @parameterized.named_parameters((name, name) for name in _CUT_FILES)
  def test_every_cut_in_the_last_two_rows_is_refused_or_reads_the_rows_before(self, input_format):
    header, rows = _CUT_FILES[input_format]
    data = (header + "".join(rows)).encode("utf-8")
    ends = [len((header + "".join(rows[:i])).encode("utf-8")) for i in range(len(rows) + 1)]  # Row ends.
    path = os.path.join(self.create_tempdir().full_path, f"in.{input_format}")
    with open(path, "wb") as f:
      f.write(data)
    whole = self._read(path, skip=False)[1]
    self.assertLen(whole, len(rows))
    refused = 0
    for end in range(ends[-3], len(data) + 1):
      with open(path, "wb") as f:
        f.write(data[:end])
      outcome = self._read(path, skip=False)
      self.assertEqual(self._read(path, skip=True), outcome, msg=f"cut at byte {end}: the policies differ")
      complete = max(i for i, row_end in enumerate(ends) if row_end <= end)  # Rows whole before the cut.
      if outcome[0] == "refused":
        refused += 1
        self.assertNotIn(end, ends, msg=f"cut at byte {end}, a row end, refused: {outcome[1]}")
        self.assertStartsWith(outcome[1], f"{path}, row {complete + 1}")
        continue
      read = outcome[1]
      self.assertEqual(read[:complete], whole[:complete], msg=f"cut at byte {end}")
      if end in ends:
        self.assertLen(read, complete, msg=f"cut at byte {end}")
        continue
      # An undetectable cut: one more row, the cut one, read short.
      self.assertLen(read, complete + 1, msg=f"cut at byte {end}")
      if input_format == "jsonl":  # Only the final line end can go.
        self.assertEqual((end, read[-1]), (ends[complete + 1] - 1, whole[complete]))
      elif input_format in ("csv", "tsv"):  # Only the unquoted last field can be cut.
        self.assertEqual(read[-1]["text"], whole[complete]["text"], msg=f"cut at byte {end}")
        self.assertStartsWith(whole[complete]["label"], read[-1]["label"])
    self.assertGreater(refused, 0)


  @parameterized.named_parameters(
      ("csv_quoted_field", "in.csv", 'text,label\na,x\n"b, and\nmore', "row 2 (line 4): the file ends inside "
       "a quoted field of this row (which starts on line 3): it is cut short, or a quote is not closed"),
      ("csv_fewer_fields", "in.csv", 'text,label\na,x\n"b"', "row 2 (line 3): the last line is cut (1 "
       "fields, no line end)"),
      ("jsonl", "in.jsonl", '{"text": "a"}\n{"text": "b', "row 2: the last line is cut (invalid JSON "
       "(Unterminated string starting at at column 10), no line end)"),
      ("libsvm", "in.libsvm", "1 qid:1 1:0.5\n0 qid:1 1:", "row 2, field 'features': the last line is cut "
       "(token '1:', no line end)"),
  )
  def test_cut_last_row_is_refused_under_skip_too(self, name, content, message):
    path = os.path.join(self.create_tempdir().full_path, name)
    with open(path, "w", encoding="utf-8", newline="") as f:
      f.write(content)
    for on_bad_row in (None, [].append):
      with self.assertRaisesRegex(DataError, "^" + re.escape(
          f"{path}, {message}; expected a complete file (write or copy it again).") + "$"):
        list(row_tables.read_table(path, on_bad_row=on_bad_row).records)

  @parameterized.named_parameters(
      ("csv", "in.csv", "text,label\na,x\nb\n", "text,label\na,x\nb,y"),
      ("jsonl", "in.jsonl", '{"text": "a"}\n{"text": "b\n', '{"text": "a"}\n{"text": "b"}'),
      ("libsvm", "in.libsvm", "1 qid:1 1:0.5\n0 qid:1 1:\n", "1 qid:1 1:0.5\n0 qid:1 1:1"),
  )
  def test_bad_last_row_with_a_line_end_is_a_bad_row_and_a_good_one_without_reads(self, name, bad, good):
    folder = self.create_tempdir().full_path
    bad_path, good_path = os.path.join(folder, name), os.path.join(folder, "good_" + name)
    for path, content in ((bad_path, bad), (good_path, good)):
      with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(content)
    rejected = []
    self.assertLen(list(row_tables.read_table(bad_path, on_bad_row=rejected.append).records), 1)
    self.assertEqual([e.row for e in rejected], [2])
    self.assertLen(list(row_tables.read_table(good_path).records), 2)  # Many files lack their final line end.


if __name__ == "__main__":
  tf.test.main()
