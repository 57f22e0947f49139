"""A user's class-texts file: one text per class (a name, a description) for the metadata class encoder, read
from CSV, TSV or JSONL with the columns `class` and `text` and put in class-id order.

The file may list classes the training data does not have (a master class table that also holds classes kept
for zero-shot use later): those are returned apart, for a note, not refused. A class of the data without a
text is an error: falling back to its name would train on other texts than the user gave.
"""

import hashlib
import os
from collections.abc import Mapping, Sequence

from rank4class_data.rows import row_tables
from rank4class_data.validation import DataError, FieldError, require_input_file

CLASS_COLUMN = "class"
TEXT_COLUMN = "text"
# The row formats of `file_formats` with named columns a class-texts file uses.
FORMATS = ("csv", "tsv", "jsonl")
# What a class-texts file is, for errors.
CLASS_TEXTS_FILE = "a CSV, TSV or JSONL file with columns class,text (one text per class)"
# Classes named in a message about many classes.
_LISTED = 5


def _listed(names: Sequence[str]) -> str:
  """The first few `names`, with how many there are in all when some are left out."""
  shown = ", ".join(repr(name) for name in names[:_LISTED])
  return shown + (f", ... ({len(names)} in all)" if len(names) > _LISTED else "")


def _class_name(record: row_tables.Record) -> str:
  """The record's class as a name, surrounding spaces removed (as the converter reads labels)."""
  value = record.value(CLASS_COLUMN)
  if isinstance(value, int) and not isinstance(value, bool):  # A JSONL class id such as 3 names class "3".
    value = str(value)
  if not isinstance(value, str):
    raise FieldError(CLASS_COLUMN, f"a {type(value).__name__}", "a class name (a string)")
  if not value.strip():
    raise FieldError(CLASS_COLUMN, "an empty class name", "a class name")
  return value.strip()


def read_class_texts(path: str) -> dict[str, str]:
  """Reads a class-texts file: class name -> text, in file order.

  CSV and TSV need a header with the columns `class` and `text` (others are ignored); JSONL needs both keys
  in every object. UTF-8 with or without a byte order mark (`row_tables`). Class names lose surrounding spaces
  (as the converter's labels do); texts are kept as written.

  Example:
    class,text
    sci.space,"Space flight, astronomy and NASA"
    rec.autos,Cars and driving

  Args:
    path: The file; its extension (.csv, .tsv, .jsonl/.json/.ndjson) names the format.

  Returns:
    {class name: text} in the file's row order.

  Raises:
    FileNotFoundError: naming `path`.
    DataError: naming the file, row and field: a folder, another format, an empty file, a missing `class` or
      `text` column (listing the columns there are), an empty class, an empty or blank text, a class given
      twice (naming both rows), a malformed row.
  """
  require_input_file(path, CLASS_TEXTS_FILE)
  extension = os.path.splitext(path)[1].lower()
  input_format = row_tables.EXTENSIONS.get(extension)
  if input_format not in FORMATS:
    raise DataError(path, f"a file with extension {extension!r}", expected=CLASS_TEXTS_FILE)
  table = row_tables.read_table(path, input_format)
  if input_format != "jsonl":  # JSONL has no header: each row is checked for its keys below.
    missing = [name for name in (CLASS_COLUMN, TEXT_COLUMN) if name not in table.columns]
    if missing:
      raise DataError(path, f"no '{missing[0]}' column (the header has {table.columns})", row=0, line=1,
                      field=missing[0], expected=f"columns '{CLASS_COLUMN}' and '{TEXT_COLUMN}'")
  texts: dict[str, str] = {}
  first_row: dict[str, int] = {}
  for record in table.records:
    for name in (CLASS_COLUMN, TEXT_COLUMN):
      if name not in record.fields:
        raise DataError(path, f"no '{name}' key (the row has {sorted(record.fields)})", row=record.row,
                        line=record.line, field=name, expected=f"keys '{CLASS_COLUMN}' and '{TEXT_COLUMN}' "
                        "in every row")
    try:
      name = _class_name(record)
      text = record.text(TEXT_COLUMN)
    except FieldError as e:
      raise e.at(path, record.row, record.line) from None
    if name in texts:
      raise DataError(path, f"class {name!r} again (first on row {first_row[name]})", row=record.row,
                      line=record.line, field=CLASS_COLUMN, expected="one row per class")
    texts[name] = text
    first_row[name] = record.row
  return texts


def texts_in_class_order(table: Mapping[str, str], class_names: Sequence[str],
                         path: str) -> tuple[list[str], list[str]]:
  """The texts of `table` (`read_class_texts`) for the classes `class_names`, in class-id order.

  Args:
    table: Class name -> text.
    class_names: The data's class names in id order.
    path: The file `table` was read from, for the error.

  Returns:
    (one text per class of `class_names` in id order, the classes of `table` that `class_names` lacks, in file
    order: listed for a note, not trained).

  Raises:
    DataError: naming `path`, how many classes of the data have no text and the first few of them.
  """
  missing = [name for name in class_names if name not in table]
  if missing:
    raise DataError(path, f"no text for {len(missing)} of the data's {len(class_names)} classes: "
                    f"{_listed(missing)}", field=CLASS_COLUMN,
                    expected="a row for every class of the training data")
  known = set(class_names)
  return [table[name] for name in class_names], [name for name in table if name not in known]


def unseen_classes_note(path: str, unseen: Sequence[str]) -> str:
  """One line for the terminal on the classes a class-texts file lists that the data lacks (`unseen`
  non-empty)."""
  return (f"{path} lists {len(unseen)} class{'es' if len(unseen) != 1 else ''} the training data lacks "
          f"({_listed(unseen)}): noted, not trained")


def file_sha256(path: str) -> str:
  """The sha256 of a class-texts file's bytes (a run records it: its texts are part of the model).

  Raises:
    FileNotFoundError / DataError: naming a missing path or a folder.
  """
  require_input_file(path, CLASS_TEXTS_FILE)
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()
