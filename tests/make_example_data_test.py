"""Tests for scripts/make_example_data.py and the data/ it writes: the files parse with the toolkit's readers,
`--check` finds data/ as the script writes it and its card as the files are, only the card is in git, and the
binaries run on the files as a user would run them. data/'s files are made first where they are missing
(`setUpModule`), as where pytest runs without scripts/install.sh having made them."""

import collections
import csv
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf

from rank4class_cli.binaries import predict_main, ranksvm_main, train_main
from rank4class_data.ranking import feature_lists
from rank4class_data.records import class_lists
from rank4class_data.rows import class_texts, row_tables
from tests.rank4class_cli.cli_runner import run_binary

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
_spec = importlib.util.spec_from_file_location("make_example_data", ROOT / "scripts" / "make_example_data.py")
make_example_data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_example_data)

R8_CLASSES = ["acq", "crude", "earn", "grain", "interest", "money-fx", "ship", "trade"]


def setUpModule():
  make_example_data.ensure(str(DATA))


def _path(name: str) -> str:
  return str(DATA / name)


class SamplePerClassTest(tf.test.TestCase):

  def test_takes_up_to_n_rows_of_each_class_in_source_order(self):
    labels = np.array([0, 1, 0, 2, 0, 1, 0])  # Class 0 at rows 0, 2, 4, 6; class 1 at 1, 5; class 2 at 3.
    rows = make_example_data.sample_per_class(labels, 2, seed=0)
    self.assertEqual(sorted(collections.Counter(labels[rows].tolist()).items()), [(0, 2), (1, 2), (2, 1)])
    self.assertAllEqual(rows, np.sort(rows))
    self.assertAllEqual(rows, make_example_data.sample_per_class(labels, 2, seed=0))  # Deterministic.


class ExampleDataFilesTest(tf.test.TestCase):

  def test_data_holds_the_written_files_under_2_mb(self):
    self.assertCountEqual(os.listdir(DATA), make_example_data.FILES + ("README.md", ".gitignore"))
    self.assertLess(sum(os.path.getsize(_path(name)) for name in make_example_data.FILES), 2 * 1024 * 1024)

  def test_text_rows_read_with_the_row_reader(self):
    for name, per_class in ((make_example_data.TRAIN_CSV, [40] * 8),
                            (make_example_data.TEST_JSONL, [25, 25, 25, 10, 25, 25, 25, 25])):
      table = row_tables.read_table(_path(name))
      self.assertEqual(table.columns, ["text", "label"], msg=name)
      counts = collections.Counter(record.fields["label"] for record in table.records)
      self.assertEqual([counts[c] for c in R8_CLASSES], per_class, msg=name)
      self.assertTrue(all(record.fields["text"].strip() for record in table.records), msg=name)
    with open(_path(make_example_data.TRAIN_CSV), encoding="utf-8") as f:
      train = {row["text"] for row in csv.DictReader(f)}
    with open(_path(make_example_data.TEST_JSONL), encoding="utf-8") as f:
      test = {json.loads(line)["text"] for line in f}
    self.assertEmpty(train & test)  # The JSONL is held out: R8's test split.

  def test_class_texts_give_one_text_per_class_of_the_rows(self):
    texts = class_texts.read_class_texts(_path(make_example_data.CLASS_TEXTS_CSV))
    self.assertEqual(sorted(texts), R8_CLASSES)
    self.assertEqual(texts["ship"], "ship: a vessel that carries passengers or freight")

  def test_elwc_reads_as_graded_class_lists_over_20_newsgroups(self):
    names = class_lists.read_class_names(_path(make_example_data.CLASS_LISTS_VOCAB))
    self.assertLen(names, 20)
    self.assertEqual(names[:2], ["alt.atheism", "comp.graphics"])
    lists = class_lists.read_class_lists(
      class_lists.ClassListsConfig(_path(make_example_data.CLASS_LISTS_ELWC), len(names))
    )
    self.assertEqual((lists.kind, lists.relevance.shape), (class_lists.TEXT, (200, 20)))
    self.assertAllEqual((lists.relevance == 2).sum(axis=1), np.ones(200))  # Each post's own newsgroup.
    self.assertAllEqual(np.bincount(lists.relevance.argmax(axis=1), minlength=20), np.full(20, 10))
    comp = [i for i, name in enumerate(names) if name.startswith("comp.")]
    self.assertAllEqual(lists.relevance[lists.relevance[:, comp[0]] == 2][:, comp],
                        np.tile([2, 1, 1, 1, 1], (10, 1)))

  def test_libsvm_reads_as_graded_query_lists(self):
    lists = feature_lists.read_libsvm(_path(make_example_data.QRELS_LIBSVM))
    self.assertEqual((lists.num_queries, lists.relevance.shape[0]), (20, 300))
    self.assertEqual(lists.feature_names, ["bm25(subject)", "tfidf(subject)", "bm25(body)", "tfidf(body)"])
    self.assertAllEqual(np.diff(lists.list_offsets), np.full(20, 15))
    self.assertEqual(sorted(collections.Counter(lists.relevance.tolist()).items()), [(0.0, 105), (1.0, 95),
                                                                                      (2.0, 100)])


class CheckModeTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.fresh = tempfile.mkdtemp()
    cls.facts = make_example_data.write_all(cls.fresh)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.fresh, ignore_errors=True)
    super().tearDownClass()

  def test_data_is_what_the_script_writes_and_the_card_states_its_numbers(self):
    self.assertEqual(make_example_data.differences(str(DATA), self.fresh, self.facts), [])
    self.assertIn(
      "320 rows, 8 classes (acq 40, crude 40, earn 40, grain 40, interest 40, money-fx 40, ship 40, "
      "trade 40)",
      self.facts[make_example_data.TRAIN_CSV],
    )

  def test_changed_missing_and_unexpected_files_are_named(self):
    copy = os.path.join(self.create_tempdir().full_path, "data")
    shutil.copytree(DATA, copy)
    with open(os.path.join(copy, make_example_data.TRAIN_CSV), "a", encoding="utf-8") as f:
      f.write("one more row,earn\n")
    os.remove(os.path.join(copy, make_example_data.QRELS_LIBSVM))
    pathlib.Path(copy, "notes.txt").write_text("mine\n")
    self.assertEqual(make_example_data.differences(copy, self.fresh, self.facts), [
        f"{copy}/{make_example_data.TRAIN_CSV}: differs", f"{copy}/{make_example_data.QRELS_LIBSVM}: missing",
        f"{copy}/notes.txt: not written by python scripts/make_example_data.py"])

  def test_a_number_the_card_no_longer_states_is_named(self):
    copy = os.path.join(self.create_tempdir().full_path, "data")
    shutil.copytree(DATA, copy)
    card = pathlib.Path(copy, "README.md")
    card.write_text(card.read_text(encoding="utf-8").replace("185 rows", "180 rows"), encoding="utf-8")
    self.assertEqual(make_example_data.differences(copy, self.fresh, self.facts), [
        f'{copy}/README.md: does not say "185 rows, 8 classes (acq 25, crude 25, earn 25, grain 10, interest '
        f'25, money-fx 25, ship 25, trade 25)" of {make_example_data.TEST_JSONL}'])
    card.unlink()
    self.assertEqual(make_example_data.differences(copy, self.fresh, self.facts),
                     [f"{copy}/README.md: missing (it is kept by hand, in git)"])


def _fake_write_all(folder: str, fail_after: int | None = None) -> dict:
  """Writes each file of `FILES` as its own name (raising after `fail_after` files): `write_all` in
  miniature."""
  for i, name in enumerate(make_example_data.FILES):
    if i == fail_after:
      raise OSError("disk full")
    pathlib.Path(folder, name).write_text(name)
  return {}


class EnsureTest(tf.test.TestCase):

  def _contents(self, folder: str) -> dict[str, str]:
    return {name: pathlib.Path(folder, name).read_text() for name in sorted(os.listdir(folder))}

  def test_writes_every_file_when_one_is_missing_and_leaves_them_otherwise(self):
    folder = os.path.join(self.create_tempdir().full_path, "data")
    with mock.patch.object(make_example_data, "write_all", _fake_write_all):
      self.assertTrue(make_example_data.ensure(folder))
      self.assertEqual(self._contents(folder), {name: name for name in make_example_data.FILES})
      pathlib.Path(folder, make_example_data.TRAIN_CSV).write_text("edited")
      self.assertFalse(make_example_data.ensure(folder))  # All present: left as they are, even edited.
      self.assertEqual(pathlib.Path(folder, make_example_data.TRAIN_CSV).read_text(), "edited")
      os.remove(os.path.join(folder, make_example_data.QRELS_LIBSVM))
      self.assertTrue(make_example_data.ensure(folder))
    self.assertEqual(self._contents(folder), {name: name for name in make_example_data.FILES})

  def test_a_failed_generation_changes_nothing(self):
    folder = self.create_tempdir().full_path
    pathlib.Path(folder, "README.md").write_text("card")
    with mock.patch.object(make_example_data, "write_all", lambda f: _fake_write_all(f, fail_after=3)):
      with self.assertRaisesRegex(OSError, "disk full"):
        make_example_data.ensure(folder)
    self.assertEqual(self._contents(folder), {"README.md": "card"})  # No file, no temporary folder left.


class RepositoryTest(tf.test.TestCase):

  def test_git_holds_only_the_card_and_gitignore_of_data(self):
    try:
      top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=ROOT, capture_output=True, text=True)
    except FileNotFoundError:
      self.skipTest("git is not installed")
    if top.returncode != 0 or pathlib.Path(top.stdout.strip()).resolve() != ROOT:
      self.skipTest(f"{ROOT} is not a git checkout")
    git = ["git", "-C", str(ROOT), "ls-files", "--", "data/"]
    self.assertContainsSubset(subprocess.run(git, capture_output=True, text=True, check=True).stdout.split(),
                              ["data/.gitignore", "data/README.md"])
    # What `git add data/` would hold: the tracked files and the untracked ones .gitignore does not name.
    added = subprocess.run(git[:4] + ["--cached", "--others", "--exclude-standard", "--", "data/"],
                           capture_output=True, text=True, check=True).stdout.split()
    self.assertCountEqual(added, ["data/.gitignore", "data/README.md"])


class BinariesOnExampleDataTest(tf.test.TestCase):
  """The binaries on data/ as a user runs them: TF-IDF text (no MiniLM), few steps, no baselines."""

  def test_train_on_the_csv_then_predict_the_jsonl(self):
    root = self.create_tempdir().full_path
    model_dir = os.path.join(root, "r8")
    trained = run_binary(train_main, [
        f"--train_files={_path(make_example_data.TRAIN_CSV)}",
        f"--test_files={_path(make_example_data.TEST_JSONL)}",
        "--text_mode=tfidf", "--tfidf_ngrams=1", "--hidden_width=32", "--nobaselines", "--train_steps=20",
        "--eval_every=20", "--verbose=0",
        f"--model_dir={model_dir}"])
    self.assertEqual(trained.code, 0, msg=trained.stderr[-3000:])
    with open(os.path.join(model_dir, "test_report.json"), encoding="utf-8") as f:
      report = json.load(f)
    self.assertEqual(report["n"], 185)
    self.assertLess(report["metrics"]["top_1_error"], 0.5)  # Chance: 7/8 over 8 classes.
    output = os.path.join(root, "predictions.csv")
    predicted = run_binary(predict_main,
                           [f"--model_dir={model_dir}", f"--input={_path(make_example_data.TEST_JSONL)}",
                                          "--label_column=label", f"--output={output}", "--top_k=2"])
    self.assertEqual(predicted.code, 0, msg=predicted.stderr[-3000:])
    with open(output, encoding="utf-8") as f:
      rows = list(csv.DictReader(f))
    self.assertLen(rows, 185)
    self.assertContainsSubset({row["class_1"] for row in rows}, R8_CLASSES)
    self.assertGreater(np.mean([row["class_1"] == row["label"] for row in rows]), 0.5)

  def test_train_on_the_elwc_class_lists(self):
    model_dir = self.create_tempdir().full_path
    trained = run_binary(train_main, [
        "--input_format=elwc", f"--train_files={_path(make_example_data.CLASS_LISTS_ELWC)}",
        f"--label_vocab={_path(make_example_data.CLASS_LISTS_VOCAB)}", "--text_mode=tfidf",
        "--tfidf_ngrams=1", "--hidden_width=32", "--loss=approx_ndcg",
        "--nobaselines", "--noexport", "--train_steps=20", "--eval_every=20", "--verbose=0",
        f"--model_dir={model_dir}"])
    self.assertEqual(trained.code, 0, msg=trained.stderr[-3000:])
    with open(os.path.join(model_dir, "train_result.json"), encoding="utf-8") as f:
      result = json.load(f)
    self.assertEqual(result["steps"], 20)
    # A hit is any class of the post's hierarchy (grade > 0): 3.8 of 20 classes on average, so chance is ~81%.
    self.assertLess(result["validation_metrics"]["top_1_error"], 0.7)

  def test_ranksvm_evaluates_the_libsvm_lists(self):
    evaluated = run_binary(ranksvm_main, ["--mode=evaluate", "--input_format=libsvm",
                                          f"--input={_path(make_example_data.QRELS_LIBSVM)}"])
    self.assertEqual(evaluated.code, 0, msg=evaluated.stderr[-3000:])
    self.assertIn("heldout: 10 evaluated queries, 10 training queries", evaluated.stdout)
    ndcg = dict(re.findall(r"^(ranksvm|bm25\(subject\)) +([0-9.]+) ", evaluated.stdout, re.MULTILINE))
    self.assertGreater(float(ndcg["ranksvm"]), float(ndcg["bm25(subject)"]) + 0.1)  # 0.55 against 0.25.


if __name__ == "__main__":
  tf.test.main()
