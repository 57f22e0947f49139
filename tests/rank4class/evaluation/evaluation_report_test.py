"""Tests for rank4class.evaluation.evaluation_report: the terminal table, and the JSON report with its
per-class CSV."""

import csv
import json
import os

import numpy as np
import tensorflow as tf

from rank4class.evaluation import evaluation_report, evaluators


class EvaluationReportTest(tf.test.TestCase):

  def test_format_table_lists_metrics_x100_and_recall(self):
    evaluator = evaluators.ClassificationEvaluator(["a", "b"])
    evaluator.update(tf.constant([[0.0, 1.0], [1.0, 0.0]]), tf.constant([1, 1]))
    table = evaluation_report.format_table(evaluator.result())
    self.assertRegex(table, r"top_1_error\s+50\.00")
    self.assertRegex(table, r"\na\s+-\s+0\n")
    self.assertRegex(table, r"\nb\s+50\.00\s+2$")

  def test_many_classes_keep_the_report_small_and_show_the_best_and_worst_with_the_rest_in_a_csv(self):
    # 150 classes with long names; instance i of class c is right when i < c % 4 (recall c % 4 / 3 of 3 each).
    names = [f"class number {c:03d} with a long descriptive name" for c in range(150)]
    labels = np.repeat(np.arange(150), 3)
    right = np.tile(np.arange(3), 150) < labels % 4
    scores = np.zeros([len(labels), 150], np.float32)
    scores[np.arange(len(labels)), np.where(right, labels, (labels + 1) % 150)] = 1.0
    evaluator = evaluators.ClassificationEvaluator(names, ks=(1,))
    evaluator.update(tf.constant(scores), tf.constant(labels))
    report = evaluator.result()
    self.assertNotIn("counts", report["confusion"])  # 150 x 150 dense counts: only the non-zero cells.
    cells = report["confusion"]["nonzero"]
    self.assertEqual(sum(count for _, _, count in cells), 450)
    self.assertIn([5, 5, 1], cells)  # Class 5 (5 % 4 = 1): one right, two to class 6.
    self.assertIn([5, 6, 2], cells)
    path = os.path.join(self.create_tempdir().full_path, "report.json")
    evaluation_report.write_report(path, report)
    self.assertEqual(report["per_class_csv"], path[:-len(".json")] + ".per_class.csv")
    with open(report["per_class_csv"], newline="") as f:
      rows = list(csv.reader(f))
    self.assertEqual(rows[0], ["class", "recall", "instances"])
    self.assertLen(rows, 151)
    self.assertEqual([float(r[1]) for r in rows[1:]], sorted(float(r[1]) for r in rows[1:]))  # Worst first.
    self.assertEqual(rows[1][1:], ["0.000000", "3"])
    with open(path) as f:
      self.assertEqual(json.load(f)["per_class_csv"], report["per_class_csv"])
    lines = evaluation_report.format_table(report).splitlines()
    best = lines.index(next(line for line in lines if "(the 10 best of 150 classes)" in line))
    worst = lines.index(next(line for line in lines if "(the 10 worst)" in line))
    self.assertEqual([line.split("  ")[0] for line in lines[best + 2:best + 12]],
                     # Recall 100 (ties by name), whole names.
                     [names[c] for c in range(150) if c % 4 == 3][:10])
    self.assertTrue(all(" 0.00 " in line for line in lines[worst + 2:worst + 12]))
    self.assertIn(f"All 150 classes: {report['per_class_csv']}", lines)


if __name__ == "__main__":
  tf.test.main()
