"""Tests for pairwise.studies.class_conversion: balanced test sets, the converted oracle, and the Table 4
run."""

import dataclasses
import json
import os

import numpy as np
import tensorflow as tf

from pairwise.margin import configs
from pairwise.studies import class_conversion
from tests.pairwise import toy_items


class BalancedSubsetTest(tf.test.TestCase):

  def test_balanced_subset(self):
    items = toy_items.embedding_items(5, 20, seed=0)
    subset = class_conversion.balanced_subset(items, 0, seed=0)
    counts = np.bincount(subset.class_labels)
    self.assertEqual(len(set(counts)), 1)
    with self.assertRaisesRegex(ValueError, "test_per_class"):
      class_conversion.balanced_subset(items, 1000, seed=0)


class ClassConversionTest(tf.test.TestCase):

  def test_class_conversion_of_oracle_is_exact(self):
    items = class_conversion.balanced_subset(toy_items.embedding_items(1, 90, seed=3, noise=0.0), 0, seed=0)
    result = class_conversion.class_conversion(toy_items.oracle(items), items, 3,
                                               configs.PairwiseEvaluationConfig())
    self.assertEqual(result["accuracy"], 1.0)

  def test_class_conversion_run_beats_chance(self):
    train_items = toy_items.embedding_items(1, 150, seed=0, noise=0.4)
    test_items = class_conversion.balanced_subset(toy_items.embedding_items(1, 150, seed=1, noise=0.4), 0,
                                                  seed=0)
    config = toy_items.config(self.create_tempdir().full_path, train_steps=80)
    config.eval = configs.PairwiseEvaluationConfig()
    result = class_conversion.run_class_conversion(config,
                                                   class_conversion.ClassConversionConfig(classifier_steps=80),
                                                   None, train_items, test_items)
    self.assertGreater(result["ranking_converted_accuracy"], 0.6)
    self.assertGreater(result["classifier_accuracy"], 0.5)
    self.assertTrue(os.path.exists(os.path.join(config.train.model_dir, "class_conversion.json")))


  def test_a_finished_run_written_with_flat_optimizer_fields_is_its_result(self):
    # A run directory of 0.8.0, whose train section held AdamW's settings as fields of its own.
    config = toy_items.config(self.create_tempdir().full_path, train_steps=80)
    conversion = class_conversion.ClassConversionConfig(classifier_steps=80)
    flat = config.to_dict()
    optimizer = flat["train"].pop("optimizer")
    flat["train"].update({name: optimizer[name] for name in configs.FLAT_OPTIMIZER_FIELDS})
    model_dir = config.train.model_dir
    with open(os.path.join(model_dir, "config.json"), "w", encoding="utf-8") as f:
      json.dump({"pairwise": flat, "conversion": dataclasses.asdict(conversion)}, f)
    with open(os.path.join(model_dir, class_conversion.RESULT_FILE), "w", encoding="utf-8") as f:
      json.dump({"ranking_converted_accuracy": 0.75}, f)
    self.assertEqual(class_conversion.run_class_conversion(config, conversion, None, None, None),
                     {"ranking_converted_accuracy": 0.75})


if __name__ == "__main__":
  tf.test.main()
