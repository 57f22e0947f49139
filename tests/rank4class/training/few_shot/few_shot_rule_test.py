"""Tests for rank4class.training.few_shot.few_shot_rule: rows per class and folds by hand, when a run is
few-shot, and every labelled row as one training split."""

import dataclasses

import numpy as np
import tensorflow as tf

from rank4class.modeling import model as model_lib
from rank4class.training import training_data as data_lib
from rank4class.training.few_shot import few_shot_rule
from rank4class.training.train_config import RunConfig


def _data(rows_per_class: int, classes: int = 3) -> data_lib.PreparedData:
  """Frozen-text data of `rows_per_class` rows a class, a tenth of them (at least one) as the validation."""
  labels = np.repeat(np.arange(classes), rows_per_class)
  x = np.random.default_rng(0).normal(size=(len(labels), 4)).astype(np.float32)
  held = np.zeros(len(labels), bool)
  held[::10] = True
  texts = np.array([f"text {i}" for i in range(len(labels))], dtype=object)
  return data_lib.PreparedData(
      class_names=[f"class {c}" for c in range(classes)], input_kind=data_lib.EMBEDDING_INPUT,
      train=data_lib.ArraySplit(x[~held], labels[~held]),
      validation=data_lib.ArraySplit(x[held], labels[held]),
      test=None, text_handles=("preprocess", "encoder"), raw_texts=(texts[~held], texts[held], None))


class RowsAndFoldsTest(tf.test.TestCase):

  def test_rows_per_class_counts_each_class(self):
    self.assertAllEqual(few_shot_rule.rows_per_class(np.array([0, 2, 2, 0, 2]), 4), [2, 0, 3, 0])

  def test_folds_are_the_smallest_class_at_most_five_at_least_two(self):
    self.assertEqual(few_shot_rule.fold_count(np.array([8, 3, 9])), 3)
    self.assertEqual(few_shot_rule.fold_count(np.array([64, 64])), 5)
    self.assertEqual(few_shot_rule.fold_count(np.array([2, 40])), 2)


class AppliesTest(tf.test.TestCase):

  def _applies(self, data: data_lib.PreparedData, **run) -> bool:
    return few_shot_rule.applies(RunConfig(**{"train_steps": None, **run}),
                                 data_lib.DataConfig(train_files="x.csv"), model_lib.Rank4ClassConfig(), data)

  def test_a_median_of_32_rows_a_class_is_few_shot_and_33_is_not(self):
    self.assertTrue(self._applies(_data(32)))
    self.assertFalse(self._applies(_data(33)))

  def test_a_length_given_or_off_keeps_the_usual_run(self):
    self.assertFalse(self._applies(_data(8), train_steps=100))
    self.assertFalse(self._applies(_data(8), few_shot="off"))

  def test_on_applies_to_many_rows_and_names_what_it_lacks(self):
    self.assertTrue(self._applies(_data(100), few_shot="on"))
    with self.assertRaisesRegex(ValueError, "at least 2 labelled rows in every class"):
      self._applies(_data(1), few_shot="on")
    images = dataclasses.replace(_data(8), input_kind=data_lib.IMAGE_INPUT)
    with self.assertRaisesRegex(ValueError, "frozen text embeddings"):
      self._applies(images, few_shot="on")


class AllRowsTest(tf.test.TestCase):

  def test_training_and_validation_rows_train_together(self):
    data = _data(8)
    rows = few_shot_rule.all_rows(data)
    self.assertLen(rows.train, 24)
    self.assertIs(rows.validation, rows.train)
    self.assertAllEqual(np.bincount(rows.train.labels), [8, 8, 8])
    self.assertLen(rows.raw_texts[0], 24)
    self.assertIn("every labelled row trains", rows.validation_note)


if __name__ == "__main__":
  tf.test.main()
