"""Writes the file system refuses, on every write path (guide: "Full disk, one line"): a full disk (ENOSPC),
the file-size limit (EFBIG), a quota (EDQUOT), a read-only file system (EROFS), a folder this user may not
write (EACCES). How each is recognised and printed: tests/rank4class_data/write_failures_test.py.

- the atomic writers remove their temporaries and name their target; the progress log keeps whole lines;
- the caches (embedding store, row cache, encoder conversion cache) are skipped with one line and the run goes
  on;
- a table of binaries whose writes are refused (the final rename of each output patched to fail: the tests
  run as root, whom permission bits do not stop): one line, exit 74, nothing half-written, earlier outputs
  kept;
- a real file-size limit (RLIMIT_FSIZE in a subprocess): a training run stopped while it exports resumes
  once the limit is lifted, and a conversion leaves nothing behind.
"""

import contextlib
import csv
import dataclasses
import errno
import io
import os
import re
import resource
import sqlite3
import subprocess
import sys
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.inference import serving
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_cli.binaries import (
  convert_main,
  evaluate_main,
  pairwise_main,
  predict_main,
  ranksvm_main,
  train_main,
)
from rank4class_data import validation, write_failures
from rank4class_data.conversion import row_cache
from rank4class_encoders import bert_conversion, embedding_cache, embedding_store, text_encoder
from rank4class_engine.loop import progress
from tests.rank4class_cli import cli_runner
from tests.rank4class_encoders import tiny_bert

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE = "{{function_node __wrapped__SaveV2_dtypes_2_device_/job:localhost/replica:0/task:0/device:CPU:0}} "
# A temporary of the toolkit's writers or of TensorFlow's checkpoint writer, in a line or a folder.
TEMPORARY = re.compile(r"\.[^/\s]+\.[A-Za-z0-9_]{8}\.(tmp|old)\b|_temp\b|\.tempstate")
FEATURES = tuple(f"x{i}" for i in range(8))
COLUMNS = "--feature_columns=" + ",".join(FEATURES)
CLASSES = ("cat", "dog", "eel")


def _rows(path: str) -> str:
  rng = np.random.default_rng(0)
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(["id", *FEATURES, "label"])
    for i in range(40):
      writer.writerow([f"r{i}", *(f"{v:.3f}" for v in rng.normal(size=8) + i % 3), CLASSES[i % 3]])
  return path


def _ranking_rows(path: str) -> str:
  rng = np.random.default_rng(1)
  lines = ["query,doc,bm25,length,position"]
  for q in range(6):
    bm25, length = rng.normal(size=(2, 5))
    positions = np.argsort(np.argsort(-(bm25 - 2 * length))) + 1
    lines += [f"q{q},d{q}_{i},{bm25[i]:.4f},{length[i]:.4f},{positions[i]}" for i in range(5)]
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return path


def _grouped_rows(path: str) -> str:
  rng = np.random.default_rng(2)
  words = "good bad film plot fine great poor dull".split()
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(["group", "text", "label"])
    for g in range(8):
      for _ in range(5):
        writer.writerow([f"g{g}", " ".join(rng.choice(words, 4)), int(rng.integers(0, 3))])
  return path


def _files(folder: str) -> dict[str, bytes | None]:
  found = {}
  for parent, folders, names in os.walk(folder):
    for name in folders:
      found[os.path.relpath(os.path.join(parent, name), folder)] = None
    for name in names:
      with open(os.path.join(parent, name), "rb") as f:
        found[os.path.relpath(os.path.join(parent, name), folder)] = f.read()
  return found


@contextlib.contextmanager
def refused_renames(under: str, number: int):
  """Every rename into `under` (the last step of each atomic writer: a file's `os.replace`, a folder's
  `os.rename`) fails with `number`, as the file system would refuse it."""
  real = {"replace": os.replace, "rename": os.rename}

  def refuse(kind: str):
    def renamed(source, target, *args, **kwargs):
      if (os.path.abspath(target) + os.sep).startswith(under.rstrip(os.sep) + os.sep):
        raise OSError(number, os.strerror(number), target)
      return real[kind](source, target, *args, **kwargs)
    return renamed

  with mock.patch.object(os, "replace", refuse("replace")), mock.patch.object(os, "rename", refuse("rename")):
    yield


class WholeOutputsTest(tf.test.TestCase, parameterized.TestCase):
  """A refused write leaves no temporary, keeps the earlier output and names the target."""

  @parameterized.parameters(errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
  def test_atomic_output_removes_its_temporary_and_names_the_target(self, number):
    folder = self.create_tempdir().full_path
    target = os.path.join(folder, "report.json")
    with open(target, "w") as f:
      f.write("earlier")
    real_fdopen = os.fdopen

    def failing_fdopen(*args, **kwargs):
      opened = real_fdopen(*args, **kwargs)
      opened.write = mock.Mock(side_effect=OSError(number, os.strerror(number)))
      return opened

    with mock.patch.object(validation.os, "fdopen", failing_fdopen), self.assertRaises(OSError) as caught:
      with validation.atomic_output(target) as f:
        f.write("new")
    self.assertEqual(caught.exception.filename, target)
    self.assertEqual(_files(folder), {"report.json": b"earlier"})

  @parameterized.parameters(errno.EROFS, errno.EACCES)
  def test_atomic_directory_removes_its_temporary(self, number):
    folder = self.create_tempdir().full_path
    with refused_renames(folder, number), self.assertRaises(OSError):
      with validation.atomic_directory(os.path.join(folder, "export")) as staging:
        with open(os.path.join(staging, "saved_model.pb"), "wb") as f:
          f.write(b"graph")
    self.assertEmpty(os.listdir(folder))

  def test_the_progress_log_keeps_whole_lines(self):
    path = os.path.join(self.create_tempdir().full_path, "progress.jsonl")
    write_failures.append_line(path, '{"step": 1}')
    real_open = open

    def short_write_then_full(*args, **kwargs):  # 3 bytes of the line reach the disk, then it is full.
      f = real_open(*args, **kwargs)
      real_write, calls = f.write, []

      def write(data):
        calls.append(data)
        if len(calls) > 1:
          raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(data[:3])

      f.write = write
      return f

    reporter = progress.ProgressReporter.__new__(progress.ProgressReporter)
    reporter._log_path = path  # pylint: disable=protected-access
    with mock.patch("builtins.open", short_write_then_full), self.assertRaises(OSError) as caught:
      reporter.log({"step": 2})
    self.assertEqual(caught.exception.filename, path)
    with open(path, encoding="utf-8") as f:
      self.assertEqual(f.read(), '{"step": 1}\n')


class CachesTest(tf.test.TestCase, parameterized.TestCase):
  """A cache that cannot be written is skipped with one line; the run goes on with the same numbers."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handles = tiny_bert.tiny_handles()  # Exported before the tests move the temporary folder.

  def setUp(self):
    super().setUp()
    self.addCleanup(embedding_store._STORES.clear)  # pylint: disable=protected-access
    self.root = self.create_tempdir().full_path
    self.enter_context(mock.patch.object(tempfile, "tempdir", os.path.join(self.root, "tmp")))
    os.makedirs(tempfile.tempdir)

  def _said(self, run) -> tuple[object, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
      result = run()
    return result, err.getvalue().splitlines()

  @parameterized.parameters((errno.EROFS, "read-only file system"), (errno.EACCES, "permission denied"))
  def test_embedding_store_in_a_folder_that_cannot_be_made(self, number, reason):
    frozen = text_encoder.TextEncoderConfig(self.handles.preprocess, self.handles.encoder, max_seq_length=8)
    texts = ["the cat sat", "the dog ran", "the cat sat"]
    expected = embedding_cache.embed_texts(frozen, texts, cache_dir=None)
    cache_dir = os.path.join(self.root, "embeddings")
    real_makedirs = os.makedirs

    def refused(path, *args, **kwargs):
      if os.path.abspath(path).startswith(cache_dir):
        raise OSError(number, os.strerror(number), path)
      return real_makedirs(path, *args, **kwargs)

    with mock.patch.object(os, "makedirs", refused):
      vectors, lines = self._said(lambda: embedding_cache.embed_texts(frozen, texts, cache_dir=cache_dir))
      again, more = self._said(lambda: embedding_cache.embed_texts(frozen, texts, cache_dir=cache_dir))
    self.assertAllClose(vectors, expected)
    self.assertAllClose(again, expected)
    store = os.path.join(cache_dir, embedding_store.STORE_FILE)
    self.assertEqual(lines, [f"Embedding cache {store} cannot be written ({reason}); embedding texts without "
                             "it."])
    self.assertEmpty(more)  # Said once per process.

  @parameterized.parameters((13, "no space left on device"), (10, "input/output error"))
  def test_embedding_store_that_is_full_keeps_its_hits(self, code, reason):
    store = embedding_store.EmbeddingStore(os.path.join(self.root, "store"))
    keys = [bytes([i]) * 32 for i in range(3)]
    store.insert(keys[:2], np.ones([2, 4], np.float32))
    # Hits older than an hour are touched: a write.
    store._clock = lambda: 10**12  # pylint: disable=protected-access
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = code
    connect = store._connect  # pylint: disable=protected-access

    class FullDisk:
      """The store's connection, on a disk that takes no more rows."""

      def __init__(self, connection):
        self._connection = connection

      def executemany(self, *args):
        raise full

      def __getattr__(self, name):
        return getattr(self._connection, name)

    with mock.patch.object(store, "_connect", lambda: FullDisk(connect())):
      (found, vectors), lines = self._said(lambda: store.lookup_matrix(keys))
      _, more = self._said(lambda: store.insert(keys[2:], np.zeros([1, 4], np.float32)))
    self.assertEqual(found.tolist(), [True, True, False])
    self.assertAllEqual(vectors[:2], np.ones([2, 4]))
    self.assertLen(lines, 1)
    self.assertIn(f"cannot be written ({reason}", lines[0])
    self.assertEmpty(more)
    store.close()

  @parameterized.parameters(errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES)
  def test_row_cache_that_cannot_be_written_converts_into_the_temporary_folder(self, number):
    rows = _rows(os.path.join(self.root, "rows.csv"))
    cache_dir = os.path.join(self.root, "cache")
    with refused_renames(cache_dir, number):
      split, lines = self._said(lambda: row_cache.convert_split(
          rows, row_cache.RowConversion(feature_columns=FEATURES), cache_dir=cache_dir))
    fallback = write_failures.fallback_cache_dir("rows")
    self.assertStartsWith(split.tfrecord, fallback + os.sep)
    self.assertEqual(split.summary.rows, 40)
    self.assertEqual(lines, [f"Row cache {cache_dir} cannot be written ({write_failures.REASONS[number]}); "
                             f"writing it into {fallback} for this run."])
    self.assertEqual(_files(cache_dir), {})

  def test_the_file_size_limit_binds_everywhere(self):
    rows = _rows(os.path.join(self.root, "rows.csv"))
    cache_dir = os.path.join(self.root, "cache")
    with refused_renames(self.root, errno.EFBIG), self.assertRaises(OSError) as caught:
      row_cache.convert_split(rows, row_cache.RowConversion(feature_columns=FEATURES), cache_dir=cache_dir)
    self.assertEqual(write_failures.find(caught.exception).errno, errno.EFBIG)
    self.assertFalse(os.path.exists(write_failures.fallback_cache_dir("rows")))

  def test_encoder_conversion_cache_on_a_full_disk(self):
    checkpoint = os.path.join(self.root, "bert")
    os.makedirs(checkpoint)
    tiny_bert.write_tiny_checkpoint(checkpoint)
    cache_dir = os.path.join(self.root, "hub")
    convert = bert_conversion.convert_bert_checkpoint

    def full_disk(checkpoint_dir, output_dir, *args, **kwargs):
      if output_dir.startswith(cache_dir):
        raise tf.errors.ResourceExhaustedError(
            None, None, f"{NODE}{output_dir}/encoder/variables/variables_temp/part-0.tempstate1; No space "
                        "left on device [Op:SaveV2]")
      return convert(checkpoint_dir, output_dir, *args, **kwargs)

    with mock.patch.object(bert_conversion, "convert_bert_checkpoint", full_disk):
      handles, lines = self._said(lambda: bert_conversion.cached_conversion(checkpoint, cache_dir))
    fallback = write_failures.fallback_cache_dir("hub")
    self.assertStartsWith(handles.encoder, fallback + os.sep)
    self.assertTrue(os.path.isfile(os.path.join(handles.encoder, "saved_model.pb")))
    self.assertEqual(lines, [f"Encoder conversion cache {cache_dir} cannot be written (no space left on "
                             f"device); writing it into {fallback} for this run."])
    self.assertEqual(os.listdir(cache_dir), [])


@dataclasses.dataclass(frozen=True)
class Row:
  """One binary whose write into `refused` (under the row's output folder `{out}`) the file system refuses.

  Attributes:
    binary: The binary's module.
    argv: Its flags; `{name}` stands for a fixture path, `{out}` for the row's output folder.
    refused: The folder (under `{out}`) into which every rename fails.
    number: The errno of the refusal.
    named: Regex of the path the line names.
    sentinels: Earlier outputs (under `{out}`) that must stay byte-identical.
  """

  binary: object
  argv: tuple[str, ...]
  refused: str
  number: int
  named: str
  sentinels: tuple[str, ...] = ()

  @property
  def name(self) -> str:
    return f"{self.binary.parse_flags.program}_{errno.errorcode[self.number]}".replace("-", "_")


TRAIN = ("--train_files={rows}", "--model_dir={out}/run", COLUMNS, "--train_steps=4", "--eval_every=2",
         "--checkpoint_every=2", "--batch_size=8", "--hidden_width=8", "--seed=0",
         "--baselines=false", "--calibrate=false", "--linear_candidate=false")
PAIRWISE = ("--train_files={grouped}", "--dataset=rows", "--group_column=group", "--model_dir={out}/run",
            "--encoder=hashed_bow", "--train_steps=2", "--checkpoint_every=2", "--lists_per_batch=2",
            "--strategy=one_device", "--export=false", "--topn=3", "--test_fraction=0.25",
            "--validation_fraction=0.25", "--dropout=0")
TABLE = (
    Row(convert_main, ("--input={rows}", "--output={out}/out.tfrecord", COLUMNS), "", errno.ENOSPC,
        "{out}/out.tfrecord", ("out.tfrecord", "out.labels.json")),
    Row(predict_main, ("--input={rows}", "--model_dir={dense}", "--output={out}/predictions.csv", COLUMNS,
                       "--id_column=id", "--label_column=label"), "", errno.EDQUOT, "{out}/predictions.csv",
        ("predictions.csv",)),
    Row(evaluate_main, ("--input={rows}", "--model_dir={dense}", "--report_path={out}/report.json",
                        "--batch_size=16", COLUMNS), "", errno.EROFS,
        r"{out}/report(\.per_class\.csv|\.json)", ("report.json",)),
    Row(train_main, TRAIN, "run", errno.EACCES, "{out}/run/config.json"),
    Row(train_main, (*TRAIN, "--export=false"), "run/best", errno.EDQUOT, "{out}/run/best"),
    Row(pairwise_main, PAIRWISE, "run", errno.EFBIG, "{out}/run/config.json"),
    Row(ranksvm_main, ("--mode=train", "--input={ranking}", "--model_dir={out}/svm", "--input_format=rows",
                       "--query_id_column=query", "--label_column=position", "--label_kind=rank",
                       "--feature_columns=bm25,length", "--max_iterations=20"), "svm", errno.ENOSPC,
        "{out}/svm(/[^:]+)?"),
)


class BinariesTest(tf.test.TestCase, parameterized.TestCase):
  """Each binary's outputs, refused: one line naming the path, exit 74, nothing half-written."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls._home = mock.patch.dict(os.environ, {"HOME": os.path.join(cls.root, "home")})
    cls._home.start()
    data = os.path.join(cls.root, "data")
    os.makedirs(data)
    cls.paths = {"rows": _rows(os.path.join(data, "rows.csv")),
                 "ranking": _ranking_rows(os.path.join(data, "ranking.csv")),
                 "grouped": _grouped_rows(os.path.join(data, "grouped.csv")),
                 "dense": os.path.join(cls.root, "dense")}
    tf.keras.utils.set_random_seed(0)
    dense = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)),
                                      class_encoders.get("one_hot", num_classes=len(CLASSES)),
                                      interactions.get("dot"), class_names=list(CLASSES))
    dense(tf.zeros([1, len(FEATURES)]))
    serving.export_saved_model(dense, os.path.join(cls.paths["dense"], "export"))

  @classmethod
  def tearDownClass(cls):
    cls._home.stop()
    super().tearDownClass()

  def _run(self, row: Row, out: str, refused: bool = True) -> cli_runner.BinaryRun:
    argv = [arg.format(**self.paths, out=out) for arg in row.argv]
    with refused_renames(os.path.join(out, row.refused), row.number) if refused else contextlib.nullcontext():
      return cli_runner.run_binary(row.binary, argv)

  def _check_refused(self, row: Row, result: cli_runner.BinaryRun, out: str, before: dict) -> None:
    program = row.binary.parse_flags.program
    self.assertEqual(result.code, 74, msg=result.stderr[-3000:])
    self.assertNotIn("Traceback", result.stderr)
    lines = result.stderr.splitlines()[-1:]  # After the lines of what was read (a row file converted).
    self.assertEmpty([line for line in result.stderr.splitlines()[:-1] if "error:" in line])
    named = row.named.format(out=re.escape(out))
    reason = re.escape(write_failures.REASONS[row.number])
    self.assertRegex(lines[0], f"^{re.escape(program)}: error: {named}: {reason}; .* and rerun the same "
                               r"command(: training resumes from its last checkpoint)?\.$")
    self.assertNotRegex(lines[0], TEMPORARY)
    left = _files(out)
    self.assertEmpty([name for name in left if TEMPORARY.search(name)])
    for name in row.sentinels:
      self.assertEqual(left[name], before[name])

  @parameterized.named_parameters((row.name, row) for row in TABLE)
  def test_refused_write(self, row: Row):
    out = tempfile.mkdtemp(dir=self.root)
    for name in row.sentinels:
      with open(os.path.join(out, name), "wb") as f:
        f.write(b"an earlier output\n")
    before = _files(out)
    self._check_refused(row, self._run(row, out), out, before)

  def test_a_training_run_refused_its_export_resumes(self):
    row = Row(train_main, TRAIN, "run/export", errno.ENOSPC, "{out}/run/export")
    out = tempfile.mkdtemp(dir=self.root)
    self._check_refused(row, self._run(row, out), out, {})
    self.assertIn("backup", os.listdir(os.path.join(out, "run")))
    rerun = self._run(row, out, refused=False)
    self.assertEqual(rerun.code, 0, msg=rerun.stderr[-3000:])
    self.assertIn("Resuming at step 4 of 4", rerun.stderr)
    self.assertTrue(os.path.isfile(os.path.join(out, "run", "export", "saved_model.pb")))

  def test_a_refused_checkpoint(self):
    row = Row(train_main, (*TRAIN, "--export=false"), "", errno.ENOSPC, "{out}/run/backup/ckpt-2")
    out = tempfile.mkdtemp(dir=self.root)
    full = tf.errors.ResourceExhaustedError(
        None, None, f"{NODE}{out}/run/backup/ckpt-2_temp/part-00000-of-00001.data-00000-of-00001.tempstate1; "
                    "No space left on device [Op:SaveV2]")
    with mock.patch.object(tf.train.CheckpointManager, "save", side_effect=full):
      result = cli_runner.run_binary(train_main, [arg.format(**self.paths, out=out) for arg in row.argv])
    self._check_refused(row, result, out, {})

  def test_a_training_run_on_rows_whose_cache_is_read_only(self):
    row = Row(train_main, (*TRAIN, "--export=false"), "", errno.EROFS, "")
    out = tempfile.mkdtemp(dir=self.root)
    home = os.path.join(out, "home")  # A cache no other test filled.
    cache = os.path.join(home, ".cache", "rank4class", "rows")
    with mock.patch.object(tempfile, "tempdir", out), mock.patch.dict(os.environ, {"HOME": home}), \
        refused_renames(cache, errno.EROFS):
      result = cli_runner.run_binary(train_main, [a.format(**self.paths, out=out) for a in row.argv])
      fallback = write_failures.fallback_cache_dir("rows")
    self.assertEqual(result.code, 0, msg=result.stderr[-3000:])
    self.assertIn(f"Row cache {cache} cannot be written (read-only file system); writing it into {fallback} "
                  "for this run.", result.stderr.splitlines())


def _limited(limit: int):
  """A subprocess's file-size limit (`ulimit -f`), in bytes."""
  return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


class FileSizeLimitTest(tf.test.TestCase):
  """A real limit: the binary (not the test) ignores SIGXFSZ, so a write past it is EFBIG, not a kill."""

  def _binary(self, module: str, argv: list[str], home: str, limit: int | None
              ) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=home, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, timeout=300,
                          env=env, cwd=ROOT, preexec_fn=_limited(limit) if limit else None)

  def test_training_stopped_while_it_exports_resumes_once_the_limit_is_lifted(self):
    root = self.create_tempdir().full_path
    home, run = os.path.join(root, "home"), os.path.join(root, "run")
    argv = [arg.format(rows=_rows(os.path.join(root, "rows.csv")), out=root) for arg in TRAIN]
    # 20 kB: the config, checkpoints and best weights (under 7 kB each) fit, the export's graph (~86 kB) not.
    done = self._binary("rank4class_cli.binaries.train_main", argv, home, 20_000)
    self.assertEqual(done.returncode, 74, msg=done.stderr[-3000:])
    self.assertEqual(done.stderr.splitlines()[-1],
                     f"rank4class-train: error: {run}/export: file too large for the file-size limit; raise "
                     "the file-size limit (ulimit -f) and rerun the same command: training resumes from its "
                     "last checkpoint.")
    self.assertNotIn("Traceback", done.stderr)
    self.assertEmpty([name for name in _files(run) if TEMPORARY.search(name)])
    self.assertNotIn("export", os.listdir(run))
    with mock.patch.dict(os.environ, {"HOME": home}):
      rerun = cli_runner.run_binary(train_main, argv)
    self.assertEqual(rerun.code, 0, msg=rerun.stderr[-3000:])
    self.assertIn("Resuming at step 4 of 4", rerun.stderr)

  def test_a_conversion_past_the_limit_leaves_nothing(self):
    root = self.create_tempdir().full_path
    out = os.path.join(root, "out")
    os.makedirs(out)
    rows = os.path.join(root, "rows.csv")
    with open(rows, "w", encoding="utf-8") as f:
      f.write("text,label\n" + "".join(f"{'word ' * 40}{i},c{i % 2}\n" for i in range(200)))
    done = self._binary("rank4class_cli.binaries.convert_main",
                        [f"--input={rows}", f"--output={out}/rows.tfrecord"], root, 10_000)
    self.assertEqual(done.returncode, 74, msg=done.stderr[-3000:])
    self.assertRegex(done.stderr.splitlines()[-1],
                     f"^rank4class-convert: error: {re.escape(out)}(/rows\\.tfrecord)?: file too large for "
                     r"the file-size limit; .*\.$")
    self.assertEqual(os.listdir(out), [])


if __name__ == "__main__":
  tf.test.main()
