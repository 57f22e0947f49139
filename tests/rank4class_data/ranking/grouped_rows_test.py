"""Tests for rank4class_data.ranking.grouped_rows: a user's ranking rows -> GroupedItems / FeatureLists, bad
rows."""

import json
import os

import numpy as np
import tensorflow as tf

from rank4class_data.ranking import grouped_rows
from rank4class_data.ranking.grouped_rows import GroupedRowsConfig
from rank4class_data.rows import bad_rows
from rank4class_data.validation import DataError


class GroupedRowsTest(tf.test.TestCase):

  def _file(self, name: str, content: str) -> str:
    return self.create_tempfile(name, content=content).full_path

  def test_text_rows_with_ordinal_labels_become_grouped_items(self):
    path = self._file("reviews.csv", "condition,review,rating\nAcne,works,positive\nPain,meh,neutral\n"
                                     "Acne,awful,negative\nPain,great,positive\n")
    rows = grouped_rows.read_grouped_rows(GroupedRowsConfig(
        path, "condition", "rating", text_column="review", label_order=("negative", "neutral", "positive")))
    items = rows.to_grouped_items()
    self.assertEqual(items.features, ["works", "meh", "awful", "great"])
    self.assertAllEqual(items.labels, [2, 1, 0, 2])
    self.assertAllEqual(items.group_ids, [0, 1, 0, 1])
    self.assertEqual(items.group_names, ["Acne", "Pain"])
    self.assertEqual(rows.summary(path), f"{path}: 4 rows in 2 groups")
    with self.assertRaisesRegex(ValueError, "no feature columns"):
      rows.to_feature_lists()

  def test_feature_rows_with_ranks_become_feature_lists_grouped_in_order_of_appearance(self):
    path = self._file("runs.tsv", "q\tdoc\tbm25\tlen\trank\nq2\ta\t1.5\t10\t2\nq1\tb\t0.5\t3\t1\n"
                                  "q2\tc\t2.5\t7\t1\nq2\td\t0.1\t1\t3\n")
    lists = grouped_rows.read_grouped_rows(GroupedRowsConfig(
        path, "q", "rank", feature_columns=("bm25", "len"), id_column="doc",
        label_kind="rank")).to_feature_lists()
    self.assertEqual(lists.query_ids, ["q2", "q1"])
    self.assertEqual(lists.doc_ids, ["a", "c", "d", "b"])
    self.assertAllEqual(lists.list_offsets, [0, 3, 4])
    self.assertAllClose(lists.features, [[1.5, 10], [2.5, 7], [0.1, 1], [0.5, 3]])
    self.assertAllClose(lists.relevance, [1, 2, 0, 0])  # Largest rank in the group minus the rank.
    self.assertEqual(lists.feature_names, ["bm25", "len"])

  def test_libsvm_qid_is_the_group_and_every_index_a_feature(self):
    path = self._file("r.libsvm", "2 qid:7 1:0.5 3:1\n0 qid:7 2:4\n1 qid:9 3:2\n")
    rows = grouped_rows.read_grouped_rows(GroupedRowsConfig(path, "qid", "label"))
    lists = rows.to_feature_lists()
    self.assertEqual((lists.query_ids, lists.feature_names), (["7", "9"], ["f1", "f2", "f3"]))
    self.assertAllClose(lists.features, [[0.5, 0, 1], [0, 4, 0], [0, 0, 2]])
    self.assertAllClose(lists.relevance, [2, 0, 1])

  def test_bad_rows_fail_naming_the_row_or_are_skipped_and_listed(self):
    path = self._file("bad.jsonl", "\n".join(json.dumps(r) for r in [
        {"g": "a", "t": "fine", "y": 1}, {"g": "", "t": "no group", "y": 1}, {"g": "a", "t": "x", "y": -1},
        {"g": "b", "t": "  ", "y": 0}, {"g": "b", "y": 2}, {"g": "b", "t": "ok", "y": "two"},
        {"g": "b", "t": "good", "y": 0}]) + "\n")
    config = GroupedRowsConfig(path, "g", "y", text_column="t")
    with self.assertRaisesRegex(DataError, r"bad\.jsonl, row 2, field 'g': empty group id"):
      grouped_rows.read_grouped_rows(config)
    config.bad_rows = bad_rows.BadRowPolicy(bad_rows.SKIP)
    rows = grouped_rows.read_grouped_rows(config)
    self.assertEqual(rows.texts, ["fine", "good"])
    self.assertEqual([(r["row"], r["field"], r["reason"]) for r in rows.rejected.rows], [
        (2, "g", "empty group id"), (3, "y", "label -1 out of range"), (4, "t", "empty text"),
        (5, "t", "missing field"), (6, "y", "'two' is not a number")])
    rejects = os.path.join(self.create_tempdir().full_path, "rejects.jsonl")
    grouped_rows.write_rejects(rows, rejects)
    with open(rejects) as f:
      self.assertLen(f.readlines(), 5)
    self.assertEqual(rows.summary(path, rejects), f"{path}: 2 rows in 2 groups; 5 bad rows left out (listed "
                                                  f"in {rejects})")

  def test_missing_columns_and_bad_settings(self):
    path = self._file("r.csv", "g,text,y\na,x,1\n")
    with self.assertRaisesRegex(DataError,
                                r"r\.csv, header row \(line 1\), field 'label': missing column 'label'"):
      grouped_rows.read_grouped_rows(GroupedRowsConfig(path, "g", "label", text_column="text"))
    with self.assertRaisesRegex(DataError, r"r\.csv, header row \(line 1\), field 'label': missing columns "
                                r"\['label', 'score', 'length'\]; expected one of the header's columns "
                                r"\['g', 'text', 'y'\]"):
      grouped_rows.read_grouped_rows(GroupedRowsConfig(path, "g", "label",
                                                       feature_columns=("score", "length")))
    with self.assertRaisesRegex(ValueError, r"`label_kind` must be one of \[.*\], got 'grade'"):
      GroupedRowsConfig(path, "g", "y", label_kind="grade")
    with self.assertRaisesRegex(ValueError, "repeats a label"):
      GroupedRowsConfig(path, "g", "y", label_order=("a", "a"))
    empty = self._file("e.csv", "g,text,y\n")
    with self.assertRaisesRegex(DataError, r"e\.csv: no rows \(only a header\)"):
      grouped_rows.read_grouped_rows(GroupedRowsConfig(empty, "g", "y", text_column="text"))
    self.assertAllEqual(grouped_rows.read_grouped_rows(GroupedRowsConfig(
        f"{path},{path}", "g", "y", text_column="text")).relevance, np.ones(2))


if __name__ == "__main__":
  tf.test.main()
