"""Errors that name the file, row and field of bad input, and all-or-nothing file writes."""

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np


def _publish(temp_path: str, path: str) -> None:
  """Gives the temp file a plainly created file's permissions (mkstemp makes it 0600), then renames it."""
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(temp_path, 0o666 & ~umask)
  os.replace(temp_path, path)


class DataError(ValueError):
  """Bad input data, located by file, row and field, with what was expected.

  The message reads `<path>, row <row> (line <line>), field '<field>': <problem>; expected <expected>.`,
  leaving out the parts that are unknown, so users can open the file at the failing line.

  Attributes:
    path: The file holding the bad data.
    row: 1-based data row (header lines not counted), 0 for the header, None when the error concerns the whole
      file.
    field: Column, JSON key or feature name, or None.
    problem: What is wrong, e.g. "empty text".
    expected: What was expected instead, e.g. "a non-empty string".
    line: 1-based physical line in the file where the row ends, when it differs from the row number.
  """

  def __init__(self, path: str, problem: str, *, row: int | None = None, field: str | None = None,
               expected: str | None = None, line: int | None = None):
    self.path = str(path)
    self.row = row
    self.field = field
    self.problem = problem
    self.expected = expected
    self.line = line
    location = [self.path]
    if row == 0:
      location.append("header row" + (f" (line {line})" if line is not None else ""))
    elif row is not None:
      location.append(f"row {row}" + (f" (line {line})" if line is not None and line != row else ""))
    if field is not None:
      location.append(f"field '{field}'")
    message = ", ".join(location) + f": {problem}"
    if expected is not None:
      message += f"; expected {expected}"
    super().__init__(message + ".")


def file_sha256(path: str) -> str:
  """SHA-256 (hex) of a file's content, read in blocks (cache keys over input files)."""
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 22), b""):
      digest.update(block)
  return digest.hexdigest()


def require_file(path: str, hint: str | None = None) -> str:
  """Returns `path` if it is an existing file, else raises FileNotFoundError naming it (and `hint`)."""
  if not os.path.isfile(path):
    message = f"{path}: no such file"
    if hint:
      message += f"; {hint}"
    raise FileNotFoundError(message)
  return path


@contextlib.contextmanager
def atomic_output(path: str, mode: str = "w", encoding: str | None = "utf-8") -> Iterator:
  """Opens a temp file beside `path`; renames it to `path` on success, deletes it on any error.

  Readers therefore see either the complete old file, the complete new file, or none: never a half-written
  one. The temp file lives in the same folder so the final `os.replace` is atomic on POSIX.

  Args:
    path: Final output path. Its folder must exist.
    mode: "w" (text) or "wb" (binary).
    encoding: Text encoding for mode "w".

  Yields:
    The open temp file object; its `.name` is the temp path (for writers that reopen by name).
  """
  folder = os.path.dirname(os.path.abspath(path))
  if not os.path.isdir(folder):
    raise FileNotFoundError(f"{path}: output folder {folder} does not exist")
  fd, temp_path = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
  try:
    with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding,
                   newline=None if "b" in mode else "") as f:
      yield f
    _publish(temp_path, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.remove(temp_path)
    raise


def write_json(path: str, value: Any) -> None:
  """Writes `value` as JSON to `path`, all or nothing (`atomic_output`), creating its folder.

  Indented by 2, keys sorted, ending with a newline. Values JSON has no type for are converted (`_json_default`):
  NumPy scalars and arrays to numbers and lists, dataclasses to dicts, sets to sorted lists, paths and anything
  else to their string.
  """
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with atomic_output(path) as f:
    json.dump(value, f, indent=2, sort_keys=True, default=_json_default)
    f.write("\n")


def _json_default(value: Any) -> Any:
  """The JSON form of a value `json` cannot write itself."""
  if isinstance(value, np.generic | np.ndarray):
    return value.tolist()
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    return dataclasses.asdict(value)
  if isinstance(value, set | frozenset):
    try:
      return sorted(value)
    except TypeError:  # Mixed types: any order is as good.
      return list(value)
  if isinstance(value, os.PathLike):
    return os.fspath(value)
  return str(value)


@contextlib.contextmanager
def atomic_paths(*paths: str) -> Iterator[list[str]]:
  """Yields temp paths beside `paths`; renames all of them into place on success, deletes all on any error.

  For writers that want a path rather than a file object (`tf.io.TFRecordWriter`), and for outputs made of
  several files (a TFRecord plus its label vocabulary) that must appear together or not at all.
  """
  temp_paths = []
  try:
    for path in paths:
      folder = os.path.dirname(os.path.abspath(path))
      if not os.path.isdir(folder):
        raise FileNotFoundError(f"{path}: output folder {folder} does not exist")
      fd, temp_path = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
      os.close(fd)
      temp_paths.append(temp_path)
    yield list(temp_paths)
    for temp_path, path in zip(temp_paths, paths, strict=True):
      _publish(temp_path, path)
  except BaseException:
    for temp_path in temp_paths:
      with contextlib.suppress(FileNotFoundError):
        os.remove(temp_path)
    raise


@contextlib.contextmanager
def atomic_directory(path: str) -> Iterator[str]:
  """Yields an empty temp folder beside `path`; on success it replaces `path` (folder or none), on any error it
  is deleted.

  For outputs that are whole folders (a SavedModel): readers see the complete old folder or the complete new
  one. Replacing an existing folder takes two renames (old folder aside, new one in), so a reader may briefly
  find none; never a half-written one. The parent folder is created if needed.

  Yields:
    The temp folder's path.
  """
  path = os.path.abspath(path)
  parent, name = os.path.split(path)
  os.makedirs(parent, exist_ok=True)
  temp_dir = tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=parent)
  try:
    yield temp_dir
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(temp_dir, 0o777 & ~umask)  # mkdtemp makes it 0700; give it a plainly created folder's mode.
    if os.path.exists(path):
      old_dir = tempfile.mkdtemp(prefix=f".{name}.", suffix=".old", dir=parent)
      os.rename(path, os.path.join(old_dir, name))
      os.rename(temp_dir, path)
      shutil.rmtree(old_dir, ignore_errors=True)
    else:
      os.rename(temp_dir, path)
  finally:
    if os.path.exists(temp_dir):
      shutil.rmtree(temp_dir, ignore_errors=True)


class FieldError(ValueError):
  """A bad value in one field of one record, before its file and row are known (see `at`).

  Attributes:
    field: Column, JSON key or feature name.
    problem: What is wrong.
    expected: What was expected instead.
  """

  def __init__(self, field: str, problem: str, expected: str | None = None):
    self.field = field
    self.problem = problem
    self.expected = expected
    super().__init__(f"field '{field}': {problem}" + (f"; expected {expected}" if expected else "") + ".")

  def at(self, path: str, row: int | None, line: int | None = None) -> DataError:
    """This error located in `path` at `row` (and physical `line`)."""
    return DataError(path, self.problem, row=row, field=self.field, expected=self.expected, line=line)
