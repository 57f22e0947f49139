"""One writer per run directory: an advisory lock that the operating system drops when its holder dies."""

import datetime
import fcntl
import json
import os
import socket

LOCK_FILE = ".run.lock"
# Lock file path -> [fd, holders]: the lock is re-entrant inside one process (a training library holding it
# calls the engine, which takes it again), exclusive across processes.
_HELD: dict[str, list[int]] = {}


class RunDirectoryBusyError(RuntimeError):
  """Another live process holds the run directory's lock."""


class RunDirectoryLock:
  """Holds an exclusive `flock` on `<run_dir>/.run.lock` while one run writes the directory.

  A second run on the same directory fails at once with a message naming the holder (pid, host, start time).
  Inside one process the lock is re-entrant: nested holders share it, and the last release drops it.
  The lock belongs to the open file: when the holding process exits or is killed, the kernel drops it, so a
  killed run never leaves the directory stuck; the stale file is simply locked again by the next run. Locks
  are per machine: on a network file system shared between hosts, `flock` may not exclude the other host.

  Example:
    with RunDirectoryLock("/tmp/run"):
      ...  # write checkpoints, logs and exports

  Args:
    run_dir: The directory; created when missing.

  Raises:
    RunDirectoryBusyError: on `__enter__`, when another live process holds the lock.
  """

  def __init__(self, run_dir: str):
    if not run_dir:
      raise ValueError("`run_dir` must be a directory path, got an empty string.")
    self._run_dir = run_dir
    self._path = os.path.join(run_dir, LOCK_FILE)
    self._key = os.path.realpath(self._path)
    self._held = False

  @property
  def path(self) -> str:
    return self._path

  @property
  def held(self) -> bool:
    return self._held

  def acquire(self) -> None:
    if self._held:
      return
    if self._key in _HELD:
      _HELD[self._key][1] += 1
      self._held = True
      return
    os.makedirs(self._run_dir, exist_ok=True)
    fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = _read_holder(fd)
      os.close(fd)
      raise RunDirectoryBusyError(
          f"{self._run_dir} is being written by another run ({holder}); wait for it to finish, stop it, or "
          "use another run directory.") from None
    os.ftruncate(fd, 0)
    info = {"pid": os.getpid(), "host": socket.gethostname(),
            "since": datetime.datetime.now().isoformat(timespec="seconds")}
    os.write(fd, json.dumps(info).encode("utf-8"))
    os.fsync(fd)
    _HELD[self._key] = [fd, 1]
    self._held = True

  def release(self) -> None:
    if not self._held:
      return
    self._held = False
    entry = _HELD[self._key]
    entry[1] -= 1
    if entry[1] == 0:
      del _HELD[self._key]
      fcntl.flock(entry[0], fcntl.LOCK_UN)
      os.close(entry[0])

  def __enter__(self) -> "RunDirectoryLock":
    self.acquire()
    return self

  def __exit__(self, *exc_info) -> None:
    self.release()


def _read_holder(fd: int) -> str:
  try:
    info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
    return f"pid {info['pid']} on {info['host']}, since {info['since']}"
  except (ValueError, KeyError, OSError):
    return "holder unknown"
