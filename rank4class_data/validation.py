"""Errors that name the file, row and field of bad input, checks of settings (choices, ranges), and
all-or-nothing file writes."""

import contextlib
import dataclasses
import glob
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from rank4class_data.write_failures import name_target


def _publish(temp_path: str, path: str) -> None:
  """Gives the temp file a plainly created file's permissions (mkstemp makes it 0600), then renames it."""
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(temp_path, 0o666 & ~umask)
  os.replace(temp_path, path)


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> None:
  """Raises a ValueError naming `name`, the allowed values and `value` unless `value` is one of `allowed`.

  The one choice check of the toolkit (configs' `__post_init__`, loaders' and registries' arguments): a mode,
  sampler or loss name that no branch handles is refused here, where the setting is made, never by falling
  through later. Binaries' flag-level messages ("--pivot=user must be one of ...") stay with their flags.

  Example:
    check_choice("loss", "softmax", ("softmax", "mse"))   # passes
    check_choice("loss", "sofmax", ("softmax", "mse"))    # ValueError: `loss` must be one of ['softmax',
                                                          # 'mse'], got 'sofmax'.
  """
  allowed = tuple(allowed)
  if value not in allowed:
    raise ValueError(f"`{name}` must be one of {list(allowed)}, got {value!r}.")


def _number_text(value: Any) -> str:
  """A number as a message shows it: 1.0 -> "1", 0.5 -> "0.5", np.float32(0.1) -> "0.1", 10**6 ->
  "1000000"."""
  if isinstance(value, float | np.floating) and np.isfinite(value) and float(value).is_integer():
    return str(int(value))
  return str(value)


def check_range(name: str, value: Any, low: float | None = None, high: float | None = None,
                low_inclusive: bool = True, high_inclusive: bool = True, integer: bool = False) -> None:
  """Raises a ValueError naming `name`, the allowed interval and `value` unless `value` lies in it.

  The one range check of settings (configs' `__post_init__`, layers' `__init__`). The message reads
  "`dropout` must be in [0, 1), got 1.0." with both bounds, "`num_sampled` must be >= 1, got 0." with one, and
  says "an integer" where `integer` asks for one.

  Args:
    name: The setting's name, as the user wrote it (a config field or an argument).
    value: The value to check; None, NaN, bools and non-numbers are refused.
    low, high: Bounds; None for an open side.
    low_inclusive, high_inclusive: Whether each bound itself is allowed.
    integer: Also require an integer type (int or NumPy integer; 2.0 is refused).

  Example:
    check_range("dropout", 0.5, 0.0, 1.0, high_inclusive=False)   # passes
    check_range("batch_size", 0, 1, integer=True)                 # ValueError: `batch_size` must be an
                                                                  # integer >= 1, got 0.
  """
  if low is not None and high is not None:
    interval = (f"in {'[' if low_inclusive else '('}{_number_text(low)}, {_number_text(high)}"
                f"{']' if high_inclusive else ')'}")
  elif low is not None:
    interval = f"{'>=' if low_inclusive else '>'} {_number_text(low)}"
  elif high is not None:
    interval = f"{'<=' if high_inclusive else '<'} {_number_text(high)}"
  else:
    interval = ""
  kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
  # NaN is the one number unequal to itself.
  ok = isinstance(value, kinds) and not isinstance(value, bool | np.bool_) and value == value
  if ok and low is not None:
    ok = value >= low if low_inclusive else value > low
  if ok and high is not None:
    ok = value <= high if high_inclusive else value < high
  if not ok:
    expected = " ".join(part for part in ("an integer" if integer else "", interval) if part) or "a number"
    shown = str(value) if isinstance(value, int | float | np.integer | np.floating) else repr(value)
    raise ValueError(f"`{name}` must be {expected}, got {shown}.")


def check_widths(name: str, units: Any, allow_empty: bool = False) -> tuple[int, ...]:
  """`units` as a tuple of positive integer layer widths (an MLP's hidden units, a CNN's filters, the widths a
  search tries); a ValueError naming `name` otherwise, or when empty unless `allow_empty`."""
  units = tuple(units)
  if not allow_empty and not units:
    raise ValueError(f"`{name}` must list at least one layer width, got {units}.")
  for unit in units:
    if not isinstance(unit, (int, np.integer)) or isinstance(unit, bool) or unit < 1:
      raise ValueError(f"`{name}` must be positive integers, got {units}.")
  return tuple(int(unit) for unit in units)


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


def require_input_file(path: str, expected: str) -> str:
  """Returns `path` if it is an existing file; a folder raises DataError ("<path>: a directory; expected
  <expected> ..."), a missing path FileNotFoundError naming it."""
  if os.path.isdir(path):
    raise DataError(path, "a directory", expected=f"{expected} (a file, not a folder)")
  return require_file(path)


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
  except BaseException as e:
    with contextlib.suppress(FileNotFoundError):
      os.remove(temp_path)
    name_target(e, path)
    raise


def write_json(path: str, value: Any) -> None:
  """Writes `value` as JSON to `path`, all or nothing (`atomic_output`), creating its folder.

  Indented by 2, keys sorted, ending with a newline. Values JSON has no type for are converted
  (`_json_default`): NumPy scalars and arrays to numbers and lists, dataclasses to dicts, sets to sorted
  lists, paths and anything else to their string.
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
  except BaseException as e:
    for temp_path in temp_paths:
      with contextlib.suppress(FileNotFoundError):
        os.remove(temp_path)
    name_target(e, paths[0] if len(paths) == 1 else os.path.dirname(os.path.abspath(paths[0])))
    raise


@contextlib.contextmanager
def atomic_directory(path: str) -> Iterator[str]:
  """Yields an empty temp folder beside `path`; on success it replaces `path` (folder or none), on any error
  it is deleted.

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
  except BaseException as e:
    name_target(e, path)
    raise
  finally:
    if os.path.exists(temp_dir):
      shutil.rmtree(temp_dir, ignore_errors=True)


# Names of the temporaries `atomic_output`, `atomic_paths` and `atomic_directory` make beside their target:
# ".<target name>.<8 random characters>.tmp" (being written) or ".old" (the replaced folder, set aside).
_TEMPORARY = re.compile(r"^\.(?P<target>.+)\.[A-Za-z0-9_]{8}\.(?P<kind>tmp|old)$")
# Earlier versions' export temporaries: ".<target>.tmp-<8 random characters>" (and ".old-").
_LEGACY_TEMPORARY = re.compile(r"^\..+\.(tmp|old)-[A-Za-z0-9_]{8}$")
# TensorFlow's checkpoint writer stages shards in "<prefix>_temp/" (or "_temp_<uuid>") before merging them.
_TF_CHECKPOINT_TEMPORARY = re.compile(r"_temp(_[0-9a-f]+)?(/|$)")


def remove_stale_temporaries(folder: str) -> list[str]:
  """Removes the temporaries a killed writer left in `folder` (not recursive); returns the removed names.

  Only call it while no other writer can use the folder (a run directory under its lock). A folder caught
  between the two renames of `atomic_directory` (the old one set aside, the new one not yet in place) is put
  back: the replacement never happened. TensorFlow checkpoint temporaries ("*_temp*") are removed too.
  """
  if not os.path.isdir(folder):
    return []
  removed = []
  for name in sorted(os.listdir(folder)):
    path = os.path.join(folder, name)
    match = _TEMPORARY.match(name)
    if match and match["kind"] == "old" and os.path.isdir(path):
      target = os.path.join(folder, match["target"])
      aside = os.path.join(path, match["target"])
      if not os.path.lexists(target) and os.path.exists(aside):
        os.rename(aside, target)
    elif not match and not _TF_CHECKPOINT_TEMPORARY.search(name) and not _LEGACY_TEMPORARY.match(name):
      continue
    if os.path.isdir(path) and not os.path.islink(path):
      shutil.rmtree(path, ignore_errors=True)
    else:
      with contextlib.suppress(FileNotFoundError):
        os.remove(path)
    removed.append(name)
  return removed


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


# What a binary reads or writes for one flag: a path (inputs: comma-separated paths or globs), paths, or none.
FlagPaths = str | Sequence[str] | None


@dataclasses.dataclass(frozen=True)
class _FlagPath:
  """A path a binary reads or writes, under the flag that names it.

  Attributes:
    flag: The flag as the user knows it, e.g. "--output".
    path: The path (user folder expanded).
    real: The path with every symbolic link resolved.
    identity: (device, inode) of an existing file or folder, else None.
    is_folder: Whether it is an existing folder.
  """

  flag: str
  path: str
  real: str
  identity: tuple[int, int] | None
  is_folder: bool

  @classmethod
  def of(cls, flag: str, path: str) -> "_FlagPath":
    path = os.path.expanduser(path)
    try:
      status = os.stat(path)
    except OSError:  # Not there (yet): only its resolved path can meet another.
      return cls(flag, path, os.path.realpath(path), None, False)
    identity = (status.st_dev, status.st_ino)
    return cls(flag, path, os.path.realpath(path), identity, stat.S_ISDIR(status.st_mode))

  def same(self, other: "_FlagPath") -> bool:
    """The same file or folder: one inode (`os.path.samefile`: hard or symbolic links), else one real path."""
    if self.identity is not None and other.identity is not None:
      return self.identity == other.identity
    return self.real == other.real

  def contains(self, other: "_FlagPath") -> bool:
    return other.real.startswith(self.real.rstrip(os.sep) + os.sep)


def _input_paths(value: FlagPaths) -> list[str]:
  """A string's comma-separated paths or globs expanded as the binaries expand them
  (`row_tables.expand_paths`, `tfrecords.InputConfig.files`): each glob's matches sorted, a glob matching
  nothing kept as it is; a sequence's paths as they are."""
  if not value:
    return []
  if not isinstance(value, str):
    return [path for path in value if path]
  paths = []
  for pattern in (p.strip() for p in value.split(",")):
    if pattern:
      paths.extend(sorted(glob.glob(os.path.expanduser(pattern))) or [pattern])
  return paths


def _files_under(folder: str) -> Iterator[str]:
  for parent, _, names in os.walk(folder):
    for name in names:
      yield os.path.join(parent, name)


def _same_path_refusal(output: _FlagPath, other: _FlagPath, consequence: str) -> ValueError:
  kinds = {output.is_folder, other.is_folder}
  noun = "folder" if kinds == {True} else "file" if kinds == {False} else "path"
  if os.path.abspath(output.path) == os.path.abspath(other.path):
    what = f"{output.flag} and {other.flag} name the same {noun} {output.path}"
  elif output.real == other.real:
    what = f"{output.flag} {output.path} and {other.flag} {other.path} are the same {noun} (a symbolic link)"
  else:
    what = f"{output.flag} {output.path} and {other.flag} {other.path} are the same {noun} (a hard link)"
  return ValueError(f"{what}: {consequence}")


def _read_paths(inputs: Mapping[str, FlagPaths],
                folder_files: Mapping[str, Callable[[str], Iterable[str]]] | None) -> list[_FlagPath]:
  """Every path the inputs name, each input folder followed by its files (`folder_files`)."""
  read: list[_FlagPath] = []
  for flag, value in inputs.items():
    for path in _input_paths(value):
      source = _FlagPath.of(flag, path)
      read.append(source)
      if source.is_folder:
        list_files = (folder_files or {}).get(flag, _files_under)
        read.extend(_FlagPath.of(flag, name) for name in list_files(source.path))
  return read


def refuse_output_over_inputs(
    outputs: Mapping[str, FlagPaths], inputs: Mapping[str, FlagPaths], *,
    folders: Mapping[str, FlagPaths] | None = None, replaced: Mapping[str, FlagPaths] | None = None,
    folder_files: Mapping[str, Callable[[str], Iterable[str]]] | None = None) -> None:
  """Refuses, before anything is opened for writing, an output that would overwrite or delete an input.

  Every binary that writes files derived from input files calls it first. An output is the same file as an
  input when both exist and share an inode (`os.path.samefile`: the same path, a symbolic link or a hard
  link), or, when one does not exist yet, when their real paths (symbolic links resolved) are equal. Refused,
  with one line naming both flags and the path:
  - an output file that is an input file (an input folder stands for its files) or an input folder;
  - a folder the binary writes files into (a run's model_dir) that is an input file or an input folder;
  - a folder the binary replaces whole (`atomic_directory`) that is, or contains, an input file or folder;
  - two outputs that are one file (the second would replace the first).

  Args:
    outputs: Flag (e.g. "--output", "--rejects") -> the file(s) the binary writes for it; None: none.
    inputs: Flag -> what the binary reads for it: comma-separated paths or globs (a string), or paths (a
      sequence); None: nothing. A folder is read as the files under it (see `folder_files`).
    folders: Flag -> folders the binary writes files into. Name the files it writes there in `outputs` where
      they may meet inputs.
    replaced: Flag -> folders the binary replaces whole.
    folder_files: Input flag -> how the binary lists the files of a folder given for it (an image folder: its
      images); default: every file under the folder.

  Raises:
    ValueError: e.g. "--output and --input name the same file in.csv: writing --output would overwrite the
      input; give --output a path outside the inputs".
  """
  read = _read_paths(inputs, folder_files)
  by_identity = {source.identity: source for source in reversed(read) if source.identity is not None}
  by_real = {source.real: source for source in reversed(read)}
  written: list[_FlagPath] = []
  for kind, group in (("folder", folders or {}), ("replaced", replaced or {}), ("file", outputs)):
    for flag, value in group.items():
      for path in _input_paths([value] if isinstance(value, str) else value):
        output = _FlagPath.of(flag, path)
        source = (by_identity.get(output.identity) if output.identity is not None else None) or by_real.get(
            output.real)
        if source is not None and output.same(source):
          harm = {"file": f"writing {flag} would overwrite the input",
                  "folder": f"{flag} would write into the input",
                  "replaced": f"replacing {flag} would delete the input"}[kind]
          raise _same_path_refusal(output, source, f"{harm}; give {flag} a path outside the inputs")
        if kind == "replaced":
          inside = next((s for s in read if output.contains(s)), None)
          if inside is not None:
            raise ValueError(f"{flag} {output.path} contains {inside.flag} {inside.path}: replacing the "
                             f"folder would delete the input; give {flag} a folder that holds no input")
        earlier = next((other for other in written
                        if other.same(output) and (other.flag, other.path) != (flag, output.path)), None)
        if earlier is not None:
          raise _same_path_refusal(output, earlier, "one output would replace the other; give them different "
                                   "paths")
        written.append(output)
