"""Tests for rank4class_engine.runs.run_directory: lock first, compare second, write third; stale temporaries;
finish."""

import json
import os
import subprocess
import sys
import textwrap

import tensorflow as tf

from rank4class_data import validation
from rank4class_engine.runs import run_directory, run_lock

_CONFIG = {"lr": 0.1, "model": {"width": 8}, "verbose": 1}


def _open(path: str, config: dict | None = None, **kwargs) -> run_directory.RunDirectory:
  run = run_directory.RunDirectory(path, config or _CONFIG, "result.json",
                                   restart_free=("verbose",), **kwargs)
  run.open()
  return run


def _snapshot(folder: str) -> dict[str, bytes]:
  """Every file under `folder` (relative path -> bytes)."""
  files = {}
  for root, _, names in os.walk(folder):
    for name in names:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        files[os.path.relpath(path, folder)] = f.read()
  return files


class ChangedKeysTest(tf.test.TestCase):

  def test_names_nested_changes_and_skips_ignored_keys(self):
    old = {"lr": 0.1, "model": {"width": 8, "depth": 2}, "verbose": 1, "gone": True}
    new = {"lr": 0.1, "model": {"width": 16, "depth": 2}, "verbose": 2, "added": "x"}
    self.assertEqual(run_directory.changed_keys(old, new, ("verbose",)),
                     ['added: "<absent>" -> "x"', 'gone: true -> "<absent>"', "model.width: 8 -> 16"])
    self.assertEqual(run_directory.changed_keys(old, new, ("verbose", "model.width", "gone", "added")), [])


class RunDirectoryTest(tf.test.TestCase):

  def test_a_new_directory_is_locked_and_gets_its_config(self):
    path = os.path.join(self.create_tempdir().full_path, "run")
    run = _open(path)
    self.assertTrue(os.path.exists(os.path.join(path, run_lock.LOCK_FILE)))
    with open(os.path.join(path, run_directory.CONFIG_FILE)) as f:
      self.assertEqual(json.load(f), _CONFIG)
    self.assertEqual((run.resumed, run.finished), (False, None))
    run.close()

  def test_the_same_config_resumes_and_a_finished_run_returns_its_result(self):
    path = self.create_tempdir().full_path
    with _open(path) as run:
      os.makedirs(run.file(run_directory.BACKUP_DIR))  # A checkpoint.
    with _open(path, {**_CONFIG, "verbose": 0}) as run:  # A restart-free key may change.
      self.assertEqual((run.resumed, run.finished), (True, None))
      run.finish({"steps": 10})
      # Removed once the result is written.
      self.assertFalse(os.path.exists(run.file(run_directory.BACKUP_DIR)))
    with _open(path) as run:
      self.assertEqual(run.finished, {"steps": 10})

  def test_another_config_is_refused_naming_the_changes_and_nothing_is_written(self):
    path = self.create_tempdir().full_path
    with _open(path) as run:
      os.makedirs(run.file(run_directory.BEST_DIR))
    before = _snapshot(path)
    with self.assertRaisesRegex(run_directory.ConfigMismatchError,
                                r"holds a run with another config \(lr: 0.1 -> 0.2; model.width: 8 -> 4\).*"
                                r"or --overwrite to start it afresh"):
      _open(path, {**_CONFIG, "lr": 0.2, "model": {"width": 4}}, overwrite_hint="--overwrite")
    self.assertEqual(_snapshot(path), before)
    self.assertFalse(run_lock.RunDirectoryLock(path).held)  # The refusal released the lock.

  def test_overwrite_starts_afresh_and_keeps_files_that_are_not_the_runs(self):
    path = self.create_tempdir().full_path
    with _open(path) as run:
      for name in (run_directory.BEST_DIR, run_directory.LOG_DIR, run_directory.EXPORT_DIR):
        os.makedirs(run.file(name))
      for name in (run_directory.PROGRESS_FILE, "result.json", "notes.txt"):
        with open(run.file(name), "w") as f:
          f.write("x")
    with _open(path, {**_CONFIG, "lr": 0.2}, overwrite=True) as run:
      self.assertFalse(run.resumed)
    self.assertEqual(sorted(os.listdir(path)), [run_lock.LOCK_FILE, run_directory.CONFIG_FILE, "notes.txt"])

  def test_a_run_that_failed_before_its_first_checkpoint_does_not_block_the_corrected_rerun(self):
    path = self.create_tempdir().full_path
    with _open(path) as run:  # Failed after writing its config, logs and progress, before any checkpoint.
      os.makedirs(run.file(run_directory.LOG_DIR))
      with open(run.file(run_directory.PROGRESS_FILE), "w") as f:
        f.write('{"event": "train_begin"}\n')
    with _open(path, {**_CONFIG, "lr": 0.5}) as run:  # Corrected settings: accepted, stale logs removed.
      self.assertFalse(run.resumed)
      self.assertFalse(os.path.exists(run.file(run_directory.LOG_DIR)))
      self.assertFalse(os.path.exists(run.file(run_directory.PROGRESS_FILE)))
    with open(os.path.join(path, run_directory.CONFIG_FILE)) as f:
      self.assertEqual(json.load(f)["lr"], 0.5)

  def test_run_files_without_a_config_are_refused(self):
    path = self.create_tempdir().full_path
    os.makedirs(os.path.join(path, run_directory.BACKUP_DIR))
    with self.assertRaisesRegex(run_directory.ConfigMismatchError, "config.json: absent"):
      _open(path)

  def test_stale_temporaries_are_removed_and_a_half_replaced_folder_is_put_back(self):
    path = self.create_tempdir().full_path
    with _open(path) as run:
      os.makedirs(run.file(run_directory.EXPORT_DIR))
    # A writer killed in the middle of replacing export/: the old one set aside, the new one half written.
    aside = os.path.join(path, ".export.a1b2c3d4.old")
    os.makedirs(aside)
    os.rename(os.path.join(path, run_directory.EXPORT_DIR), os.path.join(aside, run_directory.EXPORT_DIR))
    for name in (".export.e5f6g7h8.tmp", ".export.tmp-m3n4o5p6"):  # The second: an earlier version's.
      os.makedirs(os.path.join(path, name))
    open(os.path.join(path, ".config.json.i9j0k1l2.tmp"), "w").close()
    os.makedirs(os.path.join(path, run_directory.BACKUP_DIR, "ckpt-30_temp"))
    with open(os.path.join(path, ".hidden.user.file"), "w") as f:  # Not a temporary of ours.
      f.write("keep")
    with _open(path) as run:
      self.assertTrue(os.path.isdir(run.file(run_directory.EXPORT_DIR)))
    self.assertEqual(sorted(os.listdir(path)),
                     [".hidden.user.file", run_lock.LOCK_FILE, run_directory.BACKUP_DIR,
                                                run_directory.CONFIG_FILE, run_directory.EXPORT_DIR])
    self.assertEqual(os.listdir(os.path.join(path, run_directory.BACKUP_DIR)), [])

  def test_staged_folder_appears_whole_or_not_at_all(self):
    path = self.create_tempdir().full_path
    with _open(path) as run:
      with run.staged("export") as staging:
        with open(os.path.join(staging, "a"), "w") as f:
          f.write("1")
      with self.assertRaises(RuntimeError), run.staged("export") as staging:
        with open(os.path.join(staging, "a"), "w") as f:
          f.write("2")
        raise RuntimeError("killed while exporting")
    with open(os.path.join(path, "export", "a")) as f:
      self.assertEqual(f.read(), "1")  # The previous export stays.
    self.assertEqual(validation.remove_stale_temporaries(path), [])

  def test_a_concurrent_run_is_refused_and_the_live_runs_files_stay_byte_identical(self):
    path = self.create_tempdir().full_path
    with _open(path) as run:
      os.makedirs(run.file(run_directory.BACKUP_DIR))
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from rank4class_engine.runs import run_lock
            lock = run_lock.RunDirectoryLock({path!r})
            lock.acquire()
            print("locked", flush=True)
            sys.stdin.read()  # Holds the lock until the test closes stdin.
            """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=os.getcwd(),
        env=dict(os.environ, PYTHONPATH=os.getcwd()))
    try:
      self.assertEqual(holder.stdout.readline().strip(), "locked")
      before = _snapshot(path)
      for config in (_CONFIG, {**_CONFIG, "lr": 9.0}):  # The same config or another one: refused alike.
        with self.assertRaisesRegex(run_lock.RunDirectoryBusyError, "is being written by another run"):
          _open(path, config, overwrite=True)
      self.assertEqual(_snapshot(path), before)
    finally:
      holder.stdin.close()
      holder.wait()


if __name__ == "__main__":
  tf.test.main()
