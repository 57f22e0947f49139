"""Writes the file system refuses: a full disk, the file-size limit (`ulimit -f`), a disk quota, a read-only
file system, a folder this user may not write. Found in Python's `OSError`s, TensorFlow's errors that wrap
them (their message names the path and the C library's words), and SQLite's; named in one line that says
where, what and what to do (`rank4class_cli.cli` prints it and exits `WRITE_FAILED_EXIT_CODE`); and skipped
by the caches (`skip_cache`: one line, then the run goes on without them).

Example:
  failure = write_failures.find(error)   # None unless `error` is (or was raised from) a refused write
  failure.reason                         # "no space left on device"
  failure.path                           # "/data/run/export" (a writer's temporary named as its target)
"""

import dataclasses
import errno
import os
import re
import sqlite3
import tempfile
from collections.abc import Callable
from typing import TypeVar

import tensorflow as tf

from rank4class_data.messages import say

_T = TypeVar("_T")

# errno -> what the file system said, in the words the one line uses.
REASONS = {
    errno.ENOSPC: "no space left on device",
    errno.EFBIG: "file too large for the file-size limit",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
}
# What the user does about each, before rerunning.
ADVICE = {
    errno.ENOSPC: "free space there",
    errno.EFBIG: "raise the file-size limit (ulimit -f)",
    errno.EDQUOT: "free space within the quota (or have it raised)",
    errno.EROFS: "make it writable, or give a path on a writable file system,",
    errno.EACCES: "give this user access to it, or give another path,",
}
# The errors only a write raises (no path of their own when a buffered write or close fails): the atomic
# writers name their target in them (`rank4class_data.validation`).
SPACE_ERRNOS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
# The exit status of a binary stopped by a refused write: sysexits.h's EX_IOERR ("an error occurred while
# doing I/O on some file"), apart from bad input (1), bad flags (2) and signals (128 + n).
WRITE_FAILED_EXIT_CODE = 74
# strerror(3)'s words, as TensorFlow's messages quote them, -> errno.
_STRERROR = {os.strerror(number): number for number in REASONS}
_STRERROR_WORDS = re.compile("|".join(re.escape(words) for words in _STRERROR))
# TensorFlow's errors that carry a failed write: OutOfRange (EFBIG), ResourceExhausted (ENOSPC, EDQUOT),
# PermissionDenied (EACCES, EROFS), Unknown and FailedPrecondition (what other file systems report).
_TF_WRITE_ERRORS = (tf.errors.OutOfRangeError, tf.errors.ResourceExhaustedError,
                    tf.errors.PermissionDeniedError, tf.errors.UnknownError,
                    tf.errors.FailedPreconditionError)
# A TensorFlow function's node name ("{{function_node __wrapped__SaveV2_..._device_/job:localhost/...}}"),
# whose slashes are no path; an absolute path up to a separator TensorFlow puts after it.
_FUNCTION_NODE = re.compile(r"\{\{[^{}]*\}\}")
_TF_PATH = re.compile(r"(/[^\s;,'\"]+?)(?=[;,:'\"]?\s|[;,'\"]|$)")
# SQLite's result codes of a store that cannot be written: SQLITE_PERM, SQLITE_READONLY, SQLITE_IOERR (a
# write the file system refused: EFBIG, EDQUOT), SQLITE_FULL, SQLITE_CANTOPEN.
_SQLITE_CODES = {3: errno.EACCES, 8: errno.EROFS, 10: errno.EIO, 13: errno.ENOSPC, 14: errno.EACCES}
# Temporaries of the writers, named as their target: the atomic writers' ".<target>.<8 characters>.tmp" /
# ".old", TensorFlow's checkpoint staging "<prefix>_temp[_<hex>]" and its files' ".tempstate<digits>".
_ATOMIC_TEMPORARY = re.compile(r"^\.(?P<target>.+)\.[A-Za-z0-9_]{8}\.(tmp|old)$")
_TF_TEMPORARY = re.compile(r"^(?P<target>.+?)(_temp(_[0-9a-f]+)?|\.tempstate\d+)$")


@dataclasses.dataclass(frozen=True)
class WriteFailure:
  """A write the file system refused.

  Attributes:
    errno: One of `REASONS`' keys (or EIO for a SQLite store's I/O error).
    path: The file or folder being written, a writer's temporary named as its target; None when unknown.
  """

  errno: int
  path: str | None

  @property
  def reason(self) -> str:
    return REASONS.get(self.errno, "input/output error (a full disk or the file-size limit)")

  def line(self, program: str, rerun: str = "") -> str:
    """`<program>: error: <path>: <reason>; <advice> and rerun the same command<rerun>.`, on one line."""
    where = f"{self.path}: " if self.path else ""
    advice = ADVICE.get(self.errno, "free space there")
    return f"{program}: error: {where}{self.reason}; {advice} and rerun the same command{rerun}."


def target_path(path: str) -> str:
  """`path` with its first temporary component (a writer's staging file or folder) named as its target and
  what lies under it dropped: `/r/.export.ab12cd34.tmp/variables/x` -> `/r/export`, `/r/backup/ckpt-2_temp/
  part-0.tempstate9` -> `/r/backup/ckpt-2`."""
  parts = path.split(os.sep)
  for index, part in enumerate(parts):
    target = part
    while match := _ATOMIC_TEMPORARY.match(target) or _TF_TEMPORARY.match(target):
      target = match["target"]  # A temporary of a temporary: ".<.out.ab12cd34.tmp>.ef56gh78.tmp".
    if target != part:
      return os.sep.join(parts[:index] + [target])
  return path


def _os_failure(error: OSError) -> WriteFailure | None:
  if error.errno not in REASONS:
    return None
  path = error.filename if error.filename is not None else None
  return WriteFailure(error.errno, target_path(os.fsdecode(path)) if path is not None else None)


def _tf_failure(error: tf.errors.OpError) -> WriteFailure | None:
  message = _FUNCTION_NODE.sub("", error.message or "")
  words = _STRERROR_WORDS.search(message)
  if words is None:
    return None
  path = _TF_PATH.search(message)
  return WriteFailure(_STRERROR[words[0]], target_path(path[1]) if path else None)


def _sqlite_failure(error: sqlite3.Error, path: str | None) -> WriteFailure | None:
  code = getattr(error, "sqlite_errorcode", None)
  if code is None or code & 0xFF not in _SQLITE_CODES:
    return None
  return WriteFailure(_SQLITE_CODES[code & 0xFF], path)


def find(error: BaseException, path: str | None = None) -> WriteFailure | None:
  """The refused write `error` is, or was raised from (its `__cause__` / `__context__` chain), else None.

  Args:
    error: Any exception.
    path: The file a SQLite error concerns (SQLite's errors name none).
  """
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if isinstance(error, OSError):
      failure = _os_failure(error)
    elif isinstance(error, _TF_WRITE_ERRORS):
      failure = _tf_failure(error)
    elif isinstance(error, sqlite3.Error):
      failure = _sqlite_failure(error, path)
    else:
      failure = None
    if failure is not None:
      return failure
    error = error.__cause__ or error.__context__
  return None


def name_target(error: BaseException, path: str) -> None:
  """Names `path` in an `OSError` of a refused write that names no file (a buffered write or a close that
  failed), so the one line says where."""
  if isinstance(error, OSError) and error.filename is None and error.errno in SPACE_ERRNOS:
    error.filename = path


def append_line(path: str, line: str) -> None:
  """Appends `line` and a line end to the text file `path` (UTF-8), whole or not at all: a write the file
  system refuses part-way is cut back off, so a reader of the file never meets half a line."""
  data = (line + "\n").encode("utf-8")
  with open(path, "ab", buffering=0) as f:
    start = f.seek(0, os.SEEK_END)
    try:
      written = 0
      while written < len(data):
        written += f.write(data[written:])
    except OSError as e:
      f.truncate(start)
      name_target(e, path)
      raise


def skip_cache(what: str, where: str, failure: WriteFailure, instead: str) -> None:
  """Says, on one line, that the cache `what` at `where` cannot be written and what the run does instead."""
  say(f"{what} {where} cannot be written ({failure.reason}); {instead}.")


def fallback_cache_dir(name: str) -> str:
  """`<the system's temporary folder>/rank4class-<uid>/<name>`: where a cache goes for a run whose own cache
  folder cannot be written."""
  return os.path.join(tempfile.gettempdir(), f"rank4class-{os.getuid()}", name)


def cached_or_fallback(what: str, cache_dir: str, name: str, make: Callable[[str], _T]) -> _T:
  """`make(cache_dir)`: a cache entry made (or found) under `cache_dir`. Where the file system refuses to
  write there (a full disk, a quota, a read-only or forbidden folder), one line says so and the entry is made
  under `fallback_cache_dir(name)` instead, so the run goes on. The file-size limit binds in every folder:
  its failure, and one in the fallback folder too, propagates.

  Args:
    what: The cache as the line names it ("Row cache").
    cache_dir: The cache's folder.
    name: The fallback folder's last part ("rows").
    make: Makes (or finds) the entry under the folder it is given; writes it whole or not at all.
  """
  fallback = fallback_cache_dir(name)
  try:
    return make(cache_dir)
  except (OSError, tf.errors.OpError) as e:
    failure = find(e)
    if failure is None or failure.errno == errno.EFBIG or os.path.abspath(cache_dir) == fallback:
      raise
    skip_cache(what, cache_dir, failure, f"writing it into {fallback} for this run")
  return make(fallback)
