"""Tests for rank4class.training_data: the data config, named and TFRecord splits, and their input pipelines."""

import json
import os

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class import training_data
from rank4class_data import datasets, tfrecords


class DataConfigTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("unknown_dataset", dict(dataset="mnist"), "Unknown dataset 'mnist'.*reuters_r8"),
      ("no_data", dict(), "needs `dataset`"),
      ("both", dict(dataset="digits", train_files="a"), "either"),
      ("records_without_validation", dict(train_files="a"), "needs `validation_files`"),
      ("text_mode", dict(dataset="digits", text_mode="cached"), "Unknown text_mode 'cached'.*frozen, finetune"),
      ("fraction", dict(dataset="digits", validation_fraction=1.0), "validation_fraction"),
      ("handles", dict(dataset="digits", text_encoder_handles=["only_one"]), "preprocess, encoder"),
      ("subset", dict(dataset="digits", max_train_examples=0), "max_train_examples"),
  )
  def test_bad_data_config_raises(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      training_data.DataConfig(**kwargs)


class PrepareDataTest(tf.test.TestCase):

  def test_named_image_data_carves_a_stratified_validation_split_from_train(self):
    data = training_data.prepare_data(training_data.DataConfig(dataset="digits", validation_fraction=0.2,
                                                               max_test_examples=100))
    full_train = datasets.load_image_classification("digits", "train")
    self.assertEqual(data.input_kind, training_data.IMAGE_INPUT)
    self.assertIsNone(data.text_handles)
    self.assertEqual(len(data.train) + len(data.validation), len(full_train.labels))
    self.assertLen(data.test, 100)
    self.assertAllClose(np.bincount(data.validation.labels) / len(data.validation),
                        np.bincount(full_train.labels) / len(full_train.labels), atol=0.02)
    # No validation image is also a training image.
    train_rows = {row.tobytes() for row in data.train.features}
    self.assertLess(sum(row.tobytes() in train_rows for row in data.validation.features), 3)

  def test_subsets_are_stratified_and_seeded(self):
    config = training_data.DataConfig(dataset="digits", max_train_examples=200, max_validation_examples=50)
    first, again = training_data.prepare_data(config), training_data.prepare_data(config)
    self.assertLen(first.train, 199)  # 20 rows of each of the 10 classes, less one to per-class rounding.
    self.assertLen(first.validation, 50)
    self.assertEqual(np.bincount(first.train.labels).min(), 19)
    self.assertEqual(np.bincount(first.train.labels).max(), 20)
    self.assertAllEqual(np.bincount(first.validation.labels), [5] * 10)
    self.assertAllEqual(first.train.labels, again.train.labels)

  def test_tfrecord_text_data_passes_the_given_text_encoder_on(self):
    root = self.create_tempdir().full_path
    schema = tfrecords.ExampleSchema(text_key="text", num_classes=2)
    for name in ("train", "val"):
      tfrecords.write_instances(os.path.join(root, f"{name}.tfrecord"), [
          tfrecords.ClassificationInstance(label=i % 2, text=f"word{i % 2} text") for i in range(8)], schema)
    with open(os.path.join(root, "train.labels.json"), "w") as f:
      json.dump({"classes": ["a", "b"], "schema": schema.to_dict()}, f)
    # Record splits only pass the handles on to the model config; nothing is loaded here.
    data = training_data.prepare_data(training_data.DataConfig(
        train_files=os.path.join(root, "train.tfrecord"), validation_files=os.path.join(root, "val.tfrecord"),
        text_encoder_handles=["/hub/preprocess", "/hub/encoder"]))
    self.assertEqual(data.input_kind, training_data.TEXT_INPUT)
    self.assertEqual(data.class_names, ["a", "b"])
    self.assertEqual(data.text_handles, ("/hub/preprocess", "/hub/encoder"))
    self.assertIsNone(data.test)
    self.assertLen(data.train, 8)
    inputs, labels = next(iter(data.train.make_dataset(4, shuffle=False, repeat=False, seed=0)))
    self.assertEqual(inputs.dtype, tf.string)
    self.assertAllEqual(labels, [0, 1, 0, 1])
    self.assertEqual(training_data.input_spec(data.validation), tf.TensorSpec([None], tf.string))

  def test_records_without_a_model_input_raise(self):
    root = self.create_tempdir().full_path
    open(os.path.join(root, "train.tfrecord"), "w").close()  # The vocabulary beside it is read first.
    with open(os.path.join(root, "train.labels.json"), "w") as f:
      json.dump({"classes": ["a"], "schema": tfrecords.ExampleSchema(text_key=None).to_dict()}, f)
    with self.assertRaisesRegex(ValueError, "no image, dense or text feature"):
      training_data.prepare_data(training_data.DataConfig(train_files=os.path.join(root, "train.tfrecord"),
                                                          validation_files=os.path.join(root, "v.tfrecord")))


class ArraySplitTest(tf.test.TestCase):

  def test_array_split_gives_each_input_pipeline_its_own_rows(self):
    split = training_data.ArraySplit(np.arange(8, dtype=np.float32)[:, None], np.arange(8, dtype=np.int64))
    seen = []
    for pipeline in range(2):
      context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                           num_replicas_in_sync=2)
      for _, labels in split.make_dataset(4, shuffle=False, repeat=False, seed=0, input_context=context):
        self.assertLen(labels, 2)  # Per-replica batch: 4 / 2.
        seen += labels.numpy().tolist()
    self.assertCountEqual(seen, range(8))

  def test_repeated_batches_drop_the_remainder_and_input_spec_has_a_free_batch_axis(self):
    split = training_data.ArraySplit(np.zeros((5, 3), np.float32), np.zeros(5, np.int64))
    batches = list(split.make_dataset(2, shuffle=True, repeat=True, seed=0).take(4))
    self.assertEqual([len(labels) for _, labels in batches], [2, 2, 2, 2])
    self.assertEqual(training_data.input_spec(split), tf.TensorSpec([None, 3], tf.float32))


if __name__ == "__main__":
  tf.test.main()
