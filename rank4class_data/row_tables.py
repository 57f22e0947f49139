"""Row files as they come: CSV, TSV, JSONL, LibSVM and Orange `.tab` opened as a header plus lazily read,
located records (the rows `rank4class_data.convert` turns into TFRecords)."""

import csv
import dataclasses
import glob
import json
import math
import os
from collections.abc import Callable, Iterator
from typing import Any

from rank4class_data import libsvm
from rank4class_data.validation import DataError, FieldError, require_file

INPUT_FORMATS = ("csv", "tsv", "jsonl", "libsvm", "tab")
# File extension -> format (what "auto" reads).
EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".libsvm": "libsvm",
    ".svm": "libsvm",
    ".svmlight": "libsvm",
    ".tab": "tab"
}
AUTO = "auto"

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
    if input_format not in INPUT_FORMATS:
      raise ValueError(f"Unknown format {input_format!r}; expected one of {list(INPUT_FORMATS)}.")
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


def _check_header(path: str, columns: list[str]) -> None:
  duplicates = sorted({c for c in columns if columns.count(c) > 1})
  if duplicates:
    raise DataError(path, f"duplicate column(s) {duplicates}", row=0, line=1, field=duplicates[0],
                    expected="distinct column names")


BadRowHandler = Callable[[DataError], None]


def _reject(error: DataError, on_bad_row: BadRowHandler | None) -> None:
  """Raises `error`, or hands it to `on_bad_row` (which may raise) so that reading goes on with the next row."""
  if on_bad_row is None:
    raise error
  on_bad_row(error)


def _read_delimited(path: str, input_format: str, on_bad_row: BadRowHandler | None = None) -> Table:
  delimiter = "," if input_format == "csv" else "\t"
  with open(path, encoding="utf-8", newline="") as f:
    header = next(csv.reader(f, delimiter=delimiter), None)
  if not header:
    raise DataError(path, "empty file", row=0, line=1, expected="a header row naming the columns")
  _check_header(path, header)

  def records():
    with open(path, encoding="utf-8", newline="") as f:
      reader = csv.reader(f, delimiter=delimiter)
      next(reader)  # The header.
      row = 0
      for values in reader:
        if not values:
          continue
        row += 1
        if len(values) != len(header):
          _reject(DataError(path, f"{len(values)} fields", row=row, line=reader.line_num,
                            expected=f"{len(header)} fields as in the header {header}"), on_bad_row)
          continue
        yield Record(row, reader.line_num, dict(zip(header, values, strict=True)))

  return Table(path, input_format, header, None, None, records())


def _read_tab(path: str, on_bad_row: BadRowHandler | None = None) -> Table:
  """Orange `.tab`: names, types and flags lines, then tab-separated rows (no quoting)."""
  # newline="\n": only "\n" ends a row, so a stray "\r" inside a text cannot split it.
  with open(path, encoding="utf-8", newline="\n") as f:
    header = [f.readline().rstrip("\r\n").split("\t") for _ in range(3)]
  names, types, flags = header
  if names == [""] or len(types) != len(names):
    raise DataError(
        path, f"header lines {header}", row=0, line=1,
        expected="three header lines (names, types, flags), e.g. 'Category\\tText', 'd\\tstring', "
        "'class\\t'")
  _check_header(path, names)
  flags = flags + [""] * (len(names) - len(flags))
  label_column = next((n for n, flag in zip(names, flags, strict=False) if "class" in flag.split()), None)
  text_column = next((n for n, t in zip(names, types, strict=True) if t in _ORANGE_STRING_TYPES), None)

  def records():
    with open(path, encoding="utf-8", newline="\n") as f:
      row = 0
      for line_number, line in enumerate(f, start=1):
        if line_number <= 3:  # The header.
          continue
        line = line.rstrip("\r\n")
        if not line:
          continue
        row += 1
        values = line.split("\t")
        if len(values) != len(names):
          _reject(DataError(path, f"{len(values)} tab-separated fields", row=row, line=line_number,
                            expected=f"{len(names)} as in the header {names}"), on_bad_row)
          continue
        yield Record(row, line_number, dict(zip(names, values, strict=True)))

  return Table(path, "tab", names, text_column, label_column, records())


def _read_jsonl(path: str, on_bad_row: BadRowHandler | None = None) -> Table:
  with open(path, encoding="utf-8") as f:
    lines = f.readlines()

  def parse(row, line_number, line):
    try:
      value = json.loads(line)
    except json.JSONDecodeError as e:
      raise DataError(path, f"invalid JSON ({e.msg} at column {e.colno})", row=row, line=line_number,
                      expected="one JSON object per line") from None
    if not isinstance(value, dict):
      raise DataError(path, f"a JSON {type(value).__name__}", row=row, line=line_number,
                      expected="one JSON object per line")
    return value

  rows = []
  row = 0
  for line_number, line in enumerate(lines, start=1):
    if line.strip():
      row += 1
      try:
        rows.append(Record(row, line_number, parse(row, line_number, line)))
      except DataError as e:
        _reject(e, on_bad_row)
  columns = list(rows[0].fields) if rows else []
  return Table(path, "jsonl", columns, None, None, iter(rows))


def _read_libsvm(path: str, duplicates: str = "error", on_bad_row: BadRowHandler | None = None) -> Table:
  def records():
    with open(path, encoding="utf-8") as f:
      row = 0
      for line_number, text in enumerate(f, start=1):
        try:
          parsed = libsvm.parse_line(text, path, row + 1, line_number, duplicates)
        except DataError as e:
          row += 1
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
      `rank4class_data.libsvm`).
    on_bad_row: None raises a malformed row's DataError; a function gets it instead (and may raise it) and
      the rows go on with the next one (a skip policy).

  Raises:
    FileNotFoundError: naming `path`.
    DataError: for a bad header or, while iterating, a malformed row (naming its row and line).
  """
  input_format = infer_format(path, input_format)
  require_file(path)
  readers = {
      "csv": lambda p, f: _read_delimited(p, f, on_bad_row),
      "tsv": lambda p, f: _read_delimited(p, f, on_bad_row),
      "tab": lambda p, _: _read_tab(p, on_bad_row),
      "jsonl": lambda p, _: _read_jsonl(p, on_bad_row),
      "libsvm": lambda p, _: _read_libsvm(p, libsvm.check_duplicates_policy(libsvm_duplicates), on_bad_row)
  }
  return readers[input_format](path, input_format)
