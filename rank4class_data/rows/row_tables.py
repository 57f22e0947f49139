"""Row files as they come: CSV, TSV, JSONL, LibSVM and Orange `.tab` opened as a header plus lazily read,
located records (the rows `rank4class_data.conversion.convert` turns into TFRecords).

Files are read as UTF-8, with or without a byte order mark. A row holding bytes that are not UTF-8 (a Latin-1
export) is a bad row like any other: located, and skipped or fatal under the bad-row policy. CSV fields may be
of any length.

A file cut short is refused under every policy where the cut shows: a CSV or TSV file that ends inside a
quoted field, and a last line without a line end that does not parse (a JSONL line, a LibSVM line, a CSV row
with fewer fields than the header). A cut that leaves a well-formed last row (inside an unquoted field or a
number) cannot be told from a file that lacks its final line end, which many files do.
"""

import csv
import dataclasses
import glob
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from rank4class_data import file_formats
from rank4class_data.rows import libsvm
from rank4class_data.validation import DataError, FieldError, check_choice, require_input_file

# The row formats and their extensions (what "auto" reads), from the one format registry.
INPUT_FORMATS = file_formats.names(container=file_formats.ROWS)
EXTENSIONS = file_formats.extensions(file_formats.ROWS)
AUTO = "auto"

# What a row file is, for errors naming a folder or an empty file.
ROW_FILE = "a row file (CSV, TSV, JSONL, LibSVM or .tab)"
# The csv module refuses fields over 128 KiB by default; a long document is a valid field.
_CSV_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)
# `surrogateescape` decodes each byte that is not UTF-8 to one of these code points (U+DC80 + byte - 0x80).
_UNDECODABLE = re.compile("[\udc80-\udcff]")

# Orange `.tab` header: names, types ("d" discrete, "c" continuous, "string"), flags ("class", "meta").
_ORANGE_STRING_TYPES = ("s", "string", "text")
ORANGE_DEFAULT_COLUMNS = ("Category", "Text")
# Column names a LibSVM line provides: "<label> [qid:<id>] <index>:<value> ...".
LIBSVM_LABEL = "label"
LIBSVM_QID = "qid"
LIBSVM_FEATURES = "features"


def expand_paths(paths: str) -> list[str]:
  """The files of a comma-separated list of paths or globs, in the order given (each glob's matches sorted).

  A path that matches nothing is kept as it is, so that opening it raises FileNotFoundError naming it.
  """
  files = []
  for pattern in (p.strip() for p in paths.split(",")):
    if pattern:
      files.extend(sorted(glob.glob(os.path.expanduser(pattern))) or [pattern])
  if not files:
    raise ValueError(f"No input file in {paths!r}.")
  return files


def infer_format(path: str, input_format: str = AUTO) -> str:
  """`input_format` if given, else the format the file extension names; ValueError listing the choices."""
  if input_format != AUTO:
    check_choice("input_format", input_format, INPUT_FORMATS)
    return input_format
  extension = os.path.splitext(path)[1].lower()
  if extension not in EXTENSIONS:
    raise ValueError(f"{path}: cannot tell the format from extension {extension!r}; give the format, one of "
                     f"{list(INPUT_FORMATS)}.")
  return EXTENSIONS[extension]


@dataclasses.dataclass(frozen=True)
class Record:
  """One data row of an input file.

  Attributes:
    row: 1-based data row, header lines and blank lines not counted.
    line: 1-based physical line where the row ends.
    fields: Column name -> raw value (strings; JSON values for JSONL; for LibSVM "label", "qid" and
      "features" {index: value string}).
  """

  row: int
  line: int
  fields: dict[str, Any]

  def value(self, name: str) -> Any:
    """The field's raw value; FieldError when this row lacks it (a JSONL line without the key)."""
    if name not in self.fields:
      raise FieldError(name, "missing field", f"a '{name}' field in every row")
    return self.fields[name]

  def text(self, name: str) -> str:
    """The field as a non-empty text; FieldError otherwise."""
    text = self.value(name)
    if not isinstance(text, str):
      raise FieldError(name, f"a {type(text).__name__}", "a text string")
    if not text.strip():
      raise FieldError(name, "empty text", "a non-empty text")
    return text

  def number(self, name: str) -> float:
    """The field as a finite number; FieldError otherwise."""
    return number(self.value(name), name)


def number(value: Any, name: str) -> float:
  """`value` (a string or a JSON number) as a finite float; FieldError naming `name` otherwise."""
  if isinstance(value, bool) or value is None:
    raise FieldError(name, f"{value!r} is not a number", "a finite number")
  try:
    parsed = float(value)
  except (TypeError, ValueError):
    raise FieldError(name, f"{value!r} is not a number", "a finite number") from None
  if not math.isfinite(parsed):
    raise FieldError(name, f"{value!r} is not finite (NaN or infinity)", "a finite number")
  return parsed


@dataclasses.dataclass
class Table:
  """An opened input file: its header and a lazy iterator over its rows.

  Attributes:
    path: The file.
    input_format: One of INPUT_FORMATS.
    columns: Column names from the header (JSONL: the keys of the first row).
    text_column: The text column the format implies (`.tab`: its string column), else None.
    label_column: The label column the format implies (`.tab`: the column flagged "class"), else None.
    records: The data rows.
  """

  path: str
  input_format: str
  columns: list[str]
  text_column: str | None
  label_column: str | None
  records: Iterator[Record]


def open_text(path: str, newline: str | None = None) -> TextIO:
  """Opens a text input: UTF-8 with or without a byte order mark; bytes that are not UTF-8 are kept as lone
  surrogates for `undecodable_byte` to find, so one bad row does not stop the file."""
  return open(path, encoding="utf-8-sig", errors="surrogateescape", newline=newline)


def allow_long_csv_fields() -> None:
  """Lifts the csv module's 128 KiB field limit (a process-wide setting) for the toolkit's CSV readers."""
  if csv.field_size_limit() < _CSV_FIELD_LIMIT:
    csv.field_size_limit(_CSV_FIELD_LIMIT)


def undecodable_byte(text: str) -> int | None:
  """The first byte of `text` (read by `open_text`) that was not UTF-8, or None."""
  if text.isascii():
    return None
  match = _UNDECODABLE.search(text)
  return ord(match.group()) - 0xDC00 if match else None


def undecodable_error(path: str, byte: int, row: int | None, line: int | None,
                      field: str | None = None) -> DataError:
  """The located error of a row (row 0: the header) holding `byte`, which is not UTF-8."""
  return DataError(path, f"byte 0x{byte:02x} is not UTF-8", row=row, line=line, field=field,
                   expected="UTF-8 text (save the file as UTF-8, e.g. iconv -f latin1 -t utf-8)")


def _undecodable_field(path: str, names: list[str], values: list[str], row: int,
                       line: int) -> DataError | None:
  """The error of the first of `values` (a row of columns `names`) that holds a byte that is not UTF-8."""
  for index, value in enumerate(values):
    byte = undecodable_byte(value)
    if byte is not None:
      return undecodable_error(path, byte, row, line, names[index] if index < len(names) else None)
  return None


def no_rows_error(path: str, after_header: bool) -> DataError:
  """The error of a file without data rows (empty, or a header only)."""
  if after_header:
    return DataError(path, "no rows (only a header)", expected="data rows after the header")
  return DataError(path, "no rows (the file is empty)", expected=f"{ROW_FILE} with data rows")


# What a file cut short should be instead.
_COMPLETE_FILE = "a complete file (write or copy it again)"


def cut_last_line_error(error: DataError) -> DataError:
  """`error` of a file's last line, which no line end closes, as what it signals: the file was cut short
  there.

  Raised under every bad-row policy: skipping the row would hide that the rows after the cut are lost.
  """
  return DataError(error.path, f"the last line is cut ({error.problem}, no line end)", row=error.row,
                   line=error.line, field=error.field, expected=_COMPLETE_FILE)


class TrackedLines:
  """The lines of an open text file, remembering the last one taken (`last_line`) and whether the file's end
  was reached (`ended`): what a csv reader over them needs to tell a file cut short (`open_quote_error`,
  `cut_last_line_error`)."""

  def __init__(self, f):
    self._f = f
    self.last_line = ""
    self.ended = False

  def __iter__(self):
    for line in self._f:
      self.last_line = line
      yield line
    self.ended = True

  def ends_unterminated(self) -> bool:
    """Whether the last line taken has no line end (the file's last line, cut or not)."""
    return not self.last_line.endswith(("\n", "\r"))


def open_quote_error(path: str, row: int, line: int, first_line: int) -> DataError:
  """The record that a csv reader ends only at the file's end: a quoted field opened on `first_line` is never
  closed (the reader ends a record at each line's end unless a quoted field is open)."""
  return DataError(path, "the file ends inside a quoted field of this row (which starts on line "
                   f"{first_line}): it is cut short, or a quote is not closed", row=row, line=line,
                   expected=_COMPLETE_FILE)


def _check_header(path: str, columns: list[str]) -> None:
  error = _undecodable_field(path, columns, columns, 0, 1)
  if error is not None:
    raise error
  duplicates = sorted({c for c in columns if columns.count(c) > 1})
  if duplicates:
    raise DataError(path, f"duplicate column(s) {duplicates}", row=0, line=1, field=duplicates[0],
                    expected="distinct column names")


BadRowHandler = Callable[[DataError], None]


def _reject(error: DataError, on_bad_row: BadRowHandler | None) -> None:
  """Raises `error`, or hands it to `on_bad_row` (which may raise) so that reading goes on with the next
  row."""
  if on_bad_row is None:
    raise error
  on_bad_row(error)


def _read_delimited(path: str, input_format: str, on_bad_row: BadRowHandler | None = None) -> Table:
  delimiter = "," if input_format == "csv" else "\t"
  allow_long_csv_fields()
  with open_text(path, newline="") as f:
    reader = csv.reader(f, delimiter=delimiter)
    header = next(reader, None)
    if not header:
      raise no_rows_error(path, after_header=False)
    _check_header(path, header)
    if next((values for values in reader if values), None) is None:
      raise no_rows_error(path, after_header=True)

  def records():
    with open_text(path, newline="") as f:
      lines = TrackedLines(f)
      reader = csv.reader(lines, delimiter=delimiter)
      next(reader)  # The header.
      row, start = 0, reader.line_num + 1  # `start`: the line where the next record starts.
      for values in reader:
        first_line, start = start, reader.line_num + 1
        if lines.ended:
          raise open_quote_error(path, row + 1, reader.line_num, first_line)
        if not values:
          continue
        row += 1
        error = _undecodable_field(path, header, values, row, reader.line_num)
        if error is None and len(values) != len(header):
          error = DataError(path, f"{len(values)} fields", row=row, line=reader.line_num,
                            expected=f"{len(header)} fields as in the header {header}")
          if len(values) < len(header) and lines.ends_unterminated():
            raise cut_last_line_error(error)
        if error is not None:
          _reject(error, on_bad_row)
          continue
        yield Record(row, reader.line_num, dict(zip(header, values, strict=True)))

  return Table(path, input_format, header, None, None, records())


def _read_tab(path: str, on_bad_row: BadRowHandler | None = None) -> Table:
  """Orange `.tab`: names, types and flags lines, then tab-separated rows (no quoting)."""
  # newline="\n": only "\n" ends a row, so a stray "\r" inside a text cannot split it.
  with open_text(path, newline="\n") as f:
    header = [f.readline().rstrip("\r\n").split("\t") for _ in range(3)]
    has_rows = any(line.strip() for line in f)
  names, types, flags = header
  if names == [""] and not has_rows:
    raise no_rows_error(path, after_header=False)
  if names == [""] or len(types) != len(names):
    raise DataError(
        path, f"header lines {header}", row=0, line=1,
        expected="three header lines (names, types, flags), e.g. 'Category\\tText', 'd\\tstring', "
        "'class\\t'")
  _check_header(path, names)
  if not has_rows:
    raise no_rows_error(path, after_header=True)
  flags = flags + [""] * (len(names) - len(flags))
  label_column = next((n for n, flag in zip(names, flags, strict=False) if "class" in flag.split()), None)
  text_column = next((n for n, t in zip(names, types, strict=True) if t in _ORANGE_STRING_TYPES), None)

  def records():
    with open_text(path, newline="\n") as f:
      row = 0
      for line_number, line in enumerate(f, start=1):
        if line_number <= 3:  # The header.
          continue
        line = line.rstrip("\r\n")
        if not line:
          continue
        row += 1
        values = line.split("\t")
        error = _undecodable_field(path, names, values, row, line_number)
        if error is None and len(values) != len(names):
          error = DataError(path, f"{len(values)} tab-separated fields", row=row, line=line_number,
                            expected=f"{len(names)} as in the header {names}")
        if error is not None:
          _reject(error, on_bad_row)
          continue
        yield Record(row, line_number, dict(zip(names, values, strict=True)))

  return Table(path, "tab", names, text_column, label_column, records())


def _read_jsonl(path: str, on_bad_row: BadRowHandler | None = None) -> Table:
  with open_text(path) as f:
    lines = f.readlines()

  rows = []
  row = 0
  for line_number, line in enumerate(lines, start=1):
    if not line.strip():
      continue
    row += 1
    byte = undecodable_byte(line)
    if byte is not None:
      _reject(undecodable_error(path, byte, row, line_number), on_bad_row)
      continue
    try:
      value = json.loads(line)
    except json.JSONDecodeError as e:
      error = DataError(path, f"invalid JSON ({e.msg} at column {e.colno})", row=row, line=line_number,
                        expected="one JSON object per line")
      if not line.endswith("\n"):  # The file's last line: cut short.
        raise cut_last_line_error(error) from None
      _reject(error, on_bad_row)
      continue
    if not isinstance(value, dict):
      _reject(DataError(path, f"a JSON {type(value).__name__}", row=row, line=line_number,
                        expected="one JSON object per line"), on_bad_row)
      continue
    rows.append(Record(row, line_number, value))
  if row == 0:
    raise no_rows_error(path, after_header=False)
  columns = list(rows[0].fields) if rows else []
  return Table(path, "jsonl", columns, None, None, iter(rows))


def _read_libsvm(path: str, duplicates: str = "error", on_bad_row: BadRowHandler | None = None) -> Table:
  with open_text(path) as f:
    if not any(line.partition("#")[0].strip() for line in f):
      raise no_rows_error(path, after_header=False)

  def records():
    with open_text(path) as f:
      row = 0
      for line_number, text in enumerate(f, start=1):
        byte = undecodable_byte(text.partition("#")[0])  # Comments may hold any bytes.
        try:
          if byte is not None:
            raise undecodable_error(path, byte, row + 1, line_number)
          parsed = libsvm.parse_line(text, path, row + 1, line_number, duplicates)
        except DataError as e:
          row += 1
          if byte is None and not text.endswith("\n"):  # The file's last line: cut short.
            raise cut_last_line_error(e) from None
          _reject(e, on_bad_row)
          continue
        if parsed is None:
          continue
        row += 1
        fields = {LIBSVM_LABEL: parsed.label, LIBSVM_FEATURES: parsed.features}
        if parsed.qid is not None:
          fields[LIBSVM_QID] = parsed.qid
        yield Record(row, line_number, fields)

  return Table(path, "libsvm", [LIBSVM_LABEL, LIBSVM_QID], None, LIBSVM_LABEL, records())


def read_table(path: str, input_format: str = AUTO, libsvm_duplicates: str = "error",
               on_bad_row: BadRowHandler | None = None) -> Table:
  """Opens a CSV, TSV, JSONL, LibSVM or Orange `.tab` file.

  The header is read now (a missing file or a bad header fails here); the rows are read lazily.

  Args:
    path: Input file.
    input_format: One of INPUT_FORMATS, or "auto" for the file extension's.
    libsvm_duplicates: LibSVM: what a feature index given twice in a line means ("error", "last", "sum";
      `rank4class_data.rows.libsvm`).
    on_bad_row: None raises a malformed row's DataError; a function gets it instead (and may raise it) and
      the rows go on with the next one (a skip policy).

  Raises:
    FileNotFoundError: naming `path`.
    DataError: for a folder, a file without data rows, a bad header or, while iterating, a malformed row or
      one with bytes that are not UTF-8 (naming its row and line).
  """
  require_input_file(path, ROW_FILE)
  input_format = infer_format(path, input_format)
  readers = {
      "csv": lambda p, f: _read_delimited(p, f, on_bad_row),
      "tsv": lambda p, f: _read_delimited(p, f, on_bad_row),
      "tab": lambda p, _: _read_tab(p, on_bad_row),
      "jsonl": lambda p, _: _read_jsonl(p, on_bad_row),
      "libsvm": lambda p, _: _read_libsvm(p, libsvm.check_duplicates_policy(libsvm_duplicates), on_bad_row)
  }
  return readers[input_format](path, input_format)


def read_lines(path: str, on_bad_row: BadRowHandler | None = None) -> Table:
  """Opens a plain text file as rows: each non-blank line is one record with the field "text" (its line ending
  removed), read lazily. A byte order mark is dropped; a line with bytes that are not UTF-8 is a bad row.

  Raises:
    FileNotFoundError: naming `path`.
    DataError: for a folder, a file without a non-blank line, or (while iterating, unless `on_bad_row` takes
      it) a line that is not UTF-8.
  """
  require_input_file(path, "a text file (one input per line)")
  with open_text(path) as f:
    if not any(line.strip() for line in f):
      raise DataError(path, "no rows (no non-blank line)", expected="one input per line")

  def records():
    with open_text(path) as f:
      row = 0
      for line_number, line in enumerate(f, start=1):
        if not line.strip():
          continue
        row += 1
        byte = undecodable_byte(line)
        if byte is not None:
          _reject(undecodable_error(path, byte, row, line_number), on_bad_row)
          continue
        yield Record(row, line_number, {"text": line.rstrip("\r\n")})

  return Table(path, "lines", ["text"], "text", None, records())
