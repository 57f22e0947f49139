"""One run directory's lifecycle, for every family: lock first, compare the config second, write third;
outputs published whole; the resumable checkpoint kept until the run's result is in place; nothing stale left
behind.

  with run_directory.RunDirectory(model_dir, config_dict, result_file="train_result.json") as run:
    if run.finished is not None:
      return run.finished                          # The same config, already done: its result.
    ...                                            # trainer.fit: backup/, best/, logs/, progress.jsonl
    with run.staged("export") as staging:          # Every file of the export, then one rename.
      save(staging)
    run.finish(result_dict)                        # The result, then backup/ goes.

Guarantees (each has a fault-injection test, tests/rank4class_engine/runs/run_directory_test.py and
tests/rank4class/train_faults_test.py):
- One writer: a second run on the directory stops at once and changes nothing (`run_lock`).
- A directory that holds a run's progress (a checkpoint, best weights, an export or a result) resumes only
  under the same config; another config is refused with the changed keys named, or, with `overwrite=True`, its
  run files are removed and the run starts fresh. A directory whose run failed before its first checkpoint
  holds no progress: its leftovers are removed and the corrected rerun starts.
- Temporaries of a killed writer (`.<name>.<random>.tmp`, `.<name>.<random>.old`, TensorFlow's checkpoint
  temporaries) are removed at start; a folder caught between the two renames of its replacement is put back.
- Outputs (`staged`) appear whole or not at all; `finish` writes the result before it removes `backup/`, so a
  kill at any point leaves a directory that resumes (at worst from the last checkpoint) or is finished.
"""

import contextlib
import copy
import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from rank4class_data.validation import atomic_directory, remove_stale_temporaries, write_json
from rank4class_engine.runs import run_lock

CONFIG_FILE = "config.json"
# The engine's files (rank4class_engine.loop.trainer): resumable checkpoint, best weights, logs.
BACKUP_DIR = "backup"
BEST_DIR = "best"
LOG_DIR = "logs"
PROGRESS_FILE = "progress.jsonl"
EXPORT_DIR = "export"
# Multi-worker non-chief scratch folders (rank4class_engine.distribute.output_dir).
WORKERS_DIR = ".workers"
# Entries of a run directory that mean a run made progress there.
_PROGRESS_ENTRIES = (BACKUP_DIR, BEST_DIR, EXPORT_DIR)


class ConfigMismatchError(ValueError):
  """The run directory holds a run whose config differs from the requested one.

  Attributes:
    changes: One "key: old -> new" string per changed (dotted) key.
  """

  def __init__(self, run_dir: str, changes: list[str], overwrite_hint: str):
    self.changes = changes
    shown = "; ".join(changes[:8]) + (f"; and {len(changes) - 8} more" if len(changes) > 8 else "")
    super().__init__(f"{run_dir} holds a run with another config ({shown}): rerun with the same settings to "
                     f"resume it, use another directory, or {overwrite_hint} to start it afresh.")


def changed_keys(old: Mapping[str, Any], new: Mapping[str, Any], ignored: tuple[str, ...] = (),
                 prefix: str = "") -> list[str]:
  """The keys whose values differ between two config dicts, as "dotted.key: old -> new", sorted.

  Nested dicts are compared key by key; `ignored` names (dotted) keys that may differ (e.g. "verbose",
  "train.model_dir").

  Example:
    changed_keys({"lr": 0.1, "model": {"width": 8}}, {"lr": 0.1, "model": {"width": 16}})
    # ["model.width: 8 -> 16"]
  """
  changes = []
  for key in sorted(set(old) | set(new)):
    name = f"{prefix}{key}"
    if name in ignored:
      continue
    a, b = old.get(key, "<absent>"), new.get(key, "<absent>")
    if isinstance(a, Mapping) and isinstance(b, Mapping):
      changes.extend(changed_keys(a, b, ignored, prefix=name + "."))
    elif a != b:
      changes.append(f"{name}: {json.dumps(a, default=str)} -> {json.dumps(b, default=str)}")
  return changes


class RunDirectory:
  """A run directory held by this process from `open` (or `with`) to `close`.

  Args:
    path: The run directory (created when missing).
    config: The requested config as a JSON-able dict (written to `config.json`).
    result_file: Name of the file whose presence marks the run finished (its content is returned as
      `finished`).
    restart_free: Config keys (dotted for nested ones) that may change between runs of the same directory
      (verbosity, devices, the directory's own path, ...): they neither block a resume nor count as changes.
    normalize: Maps a config dict (the one read from `config.json`, and `config`) onto the form in which the
      two are compared: fields added since the run was written take their defaults, "auto" values resolved,
      ...
    overwrite: A different config starts the run afresh (its run files removed) instead of being refused.
    overwrite_hint: How the user asks for `overwrite` (e.g. "--overwrite_model_dir"), named in the refusal.
    run_files: Names of further entries of the directory that belong to the run (reports, rejects files): they
      are removed, with the engine's own, when the run starts afresh.
    chief: Whether this process writes the directory; other multi-worker processes only read and compare it.
    worker_dir: A non-chief's private scratch folder (`distribute.output_dir`), where its collective
      checkpoints
      go: cleaned of temporaries at start, emptied when the run starts afresh.

  Attributes:
    finished: The content of `result_file` when the directory holds a finished run of the same config, else
      None.
    resumed: Whether the directory held a run of the same config with progress (a checkpoint, best weights or
      an export).

  Raises (on open):
    RunDirectoryBusyError: when another live process holds the directory.
    ConfigMismatchError: when the directory holds a run of another config (and not `overwrite`).
  """

  def __init__(self, path: str, config: Mapping[str, Any], result_file: str, *,
               restart_free: tuple[str, ...] = (),
               normalize: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
               overwrite: bool = False, overwrite_hint: str = "overwrite=True",
               run_files: tuple[str, ...] = (), chief: bool = True, worker_dir: str | None = None):
    if not path:
      raise ValueError("The run directory path is empty.")
    self.path = path
    self._config = copy.deepcopy(dict(config))
    self._result_file = result_file
    self._restart_free = tuple(restart_free)
    self._normalize = normalize or (lambda config_dict: config_dict)
    self._overwrite = overwrite
    self._overwrite_hint = overwrite_hint
    self._run_files = (CONFIG_FILE, result_file, BACKUP_DIR, BEST_DIR, EXPORT_DIR, LOG_DIR, PROGRESS_FILE,
                       *run_files)
    self._chief = chief
    self._worker_dir = None if chief else worker_dir
    self._lock = run_lock.RunDirectoryLock(path)
    self.finished: dict[str, Any] | None = None
    self.resumed = False

  def __enter__(self) -> "RunDirectory":
    self.open()
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()

  def file(self, name: str) -> str:
    return os.path.join(self.path, name)

  def open(self) -> None:
    """Locks, cleans, compares and records the config (see the class doc)."""
    if self._chief:
      self._lock.acquire()
    try:
      own = self.path if self._chief else self._worker_dir
      if own is not None:
        remove_stale_temporaries(own)
        remove_stale_temporaries(os.path.join(own, BACKUP_DIR))
      self._compare_and_record()
    except BaseException:
      self._lock.release()
      raise

  def _has_progress(self) -> bool:
    return os.path.exists(self.file(self._result_file)) or any(
        os.path.exists(self.file(name)) for name in _PROGRESS_ENTRIES)

  def _compare_and_record(self) -> None:
    existing = None
    if os.path.exists(self.file(CONFIG_FILE)):
      with open(self.file(CONFIG_FILE), encoding="utf-8") as f:
        try:
          existing = self._normalize(json.load(f))
        except (ValueError, TypeError, KeyError) as e:
          raise ValueError(f"{self.file(CONFIG_FILE)}: not a config this version can read ({e}); use another "
                           f"directory, or {self._overwrite_hint} to start it afresh.") from None
    fresh = True
    if self._has_progress():
      if existing is None and not self._overwrite:
        raise ConfigMismatchError(self.path, [f"{CONFIG_FILE}: absent, but the run's files are there"],
                                  self._overwrite_hint)
      changes = [] if existing is None else changed_keys(existing,
                                                         self._normalize(copy.deepcopy(self._config)),
                                                         self._restart_free)
      if existing is not None and not changes:
        fresh = False
      elif not self._overwrite:
        raise ConfigMismatchError(self.path, changes, self._overwrite_hint)
    if not fresh:
      self.resumed = True
      if os.path.exists(self.file(self._result_file)):
        with open(self.file(self._result_file), encoding="utf-8") as f:
          self.finished = json.load(f)
    if not self._chief:
      if fresh and self._worker_dir is not None:
        shutil.rmtree(self._worker_dir, ignore_errors=True)  # Checkpoints of another run.
      return
    if fresh:
      # A run of another config (overwritten), or one that failed before its first checkpoint: its files
      # would mix with this run's (logs, progress) or be taken for its results.
      self._remove_run_files()
    write_json(self.file(CONFIG_FILE), self._config)

  def _remove_run_files(self) -> None:
    for name in self._run_files:
      path = self.file(name)
      if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
      elif os.path.lexists(path):
        os.remove(path)

  @contextlib.contextmanager
  def staged(self, name: str) -> Iterator[str]:
    """Yields an empty temporary folder; on success it replaces `<run_dir>/<name>` whole (every file written
    into it included), on any error it is removed and the previous `<name>` stays."""
    with atomic_directory(self.file(name)) as staging:
      yield staging

  def finish(self, result: Mapping[str, Any]) -> None:
    """Writes the result file, then removes the resumable checkpoint (no longer needed once the result is in
    place: a rerun returns the result)."""
    if not self._chief:
      return
    write_json(self.file(self._result_file), result)
    shutil.rmtree(self.file(BACKUP_DIR), ignore_errors=True)

  def close(self) -> None:
    self._lock.release()
