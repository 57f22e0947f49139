"""Tests for rank4class.training.training_data: the data config, named and TFRecord splits, and their input
pipelines."""

import json
import os
import re
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.training import training_data
from rank4class_data import datasets
from rank4class_data.records import tfrecords
from rank4class_data.validation import DataError
from rank4class_encoders import bert_conversion, text_embeddings, text_encoder
from tests.rank4class_data import elwc_lists


class DataConfigTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("unknown_dataset", dict(dataset="mnist"),
       r"`dataset` must be one of \[.*'reuters_r8'.*\], got 'mnist'"),
      ("no_data", dict(), "needs `dataset`"),
      ("both", dict(dataset="digits", train_files="a"), "either"),
      ("text_mode", dict(dataset="digits", text_mode="cached"),
       r"`text_mode` must be one of \['auto', 'frozen', 'finetune', 'tfidf'.*\], got 'cached'"),
      ("fraction", dict(dataset="digits", validation_fraction=1.0),
       r"`validation_fraction` must be in \(0, 1\), got 1.0"),
      ("no_fraction", dict(dataset="digits", validation_fraction=0.0),
       r"`validation_fraction` must be in \(0, 1\), got 0.0"),
      ("handles", dict(dataset="digits", text_encoder_handles=["only_one"]), "preprocess, encoder"),
      ("subset", dict(dataset="digits", max_train_examples=0),
       "`max_train_examples` must be an integer >= 1, got 0"),
      ("test_subset", dict(dataset="digits", max_test_examples=-5),
       "`max_test_examples` must be an integer >= 1, got -5"),
      ("format", dict(train_files="a", validation_files="b", input_format="xlsx"),
       r"`input_format` must be one of \['auto', .*\], got 'xlsx'"),
      ("row_policy", dict(train_files="a.csv", rows=dict(bad_rows="drop")),
       r"`policy` must be one of \[.*\], got 'drop'"),
      ("elwc_without_names", dict(train_files="a", validation_files="b", input_format="elwc"),
       "needs `label_vocab`"),
      ("unlisted", dict(train_files="a", validation_files="b", input_format="elwc", label_vocab="c",
                        unlisted_classes="ignored"),
       r"`unlisted_classes` must be one of \['irrelevant', 'unjudged'\], got 'ignored'"),
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
    self.assertLen(first.train, 200)  # Exactly the rows asked: 20 of each of the 10 classes.
    self.assertLen(first.validation, 50)
    self.assertAllEqual(np.bincount(first.train.labels), [20] * 10)
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
    # Fine-tuning streams the records and passes the handles on to the model config; nothing is loaded here.
    data = training_data.prepare_data(training_data.DataConfig(
        train_files=os.path.join(root, "train.tfrecord"), validation_files=os.path.join(root, "val.tfrecord"),
        text_encoder_handles=["/hub/preprocess", "/hub/encoder"], text_mode="finetune"))
    self.assertEqual(data.input_kind, training_data.TEXT_INPUT)
    self.assertEqual(data.class_names, ["a", "b"])
    self.assertEqual(data.text_handles, ("/hub/preprocess", "/hub/encoder"))
    self.assertIsNone(data.test)
    self.assertLen(data.train, 8)
    inputs, labels = next(iter(data.train.make_dataset(4, shuffle=False, repeat=False, seed=0)))
    self.assertEqual(inputs.dtype, tf.string)
    self.assertAllEqual(labels, [0, 1, 0, 1])
    self.assertEqual(training_data.input_spec(data.validation), tf.TensorSpec([None], tf.string))

  def test_tfidf_text_keeps_the_raw_strings_and_loads_no_minilm(self):
    root = self.create_tempdir().full_path
    schema = tfrecords.ExampleSchema(text_key="text", num_classes=2)
    texts = [f"word{i % 2} text" for i in range(8)]
    for name in ("train", "val"):
      tfrecords.write_instances(os.path.join(root, f"{name}.tfrecord"), [
          tfrecords.ClassificationInstance(label=i % 2, text=t) for i, t in enumerate(texts)], schema)
    with open(os.path.join(root, "train.labels.json"), "w") as f:
      json.dump({"classes": ["a", "b"], "schema": schema.to_dict()}, f)
    train_files = os.path.join(root, "train.tfrecord")
    with mock.patch.object(text_embeddings, "minilm_handles", side_effect=AssertionError("MiniLM loaded")):
      streamed = training_data.prepare_data(training_data.DataConfig(
          train_files=train_files, validation_files=os.path.join(root, "val.tfrecord"), text_mode="tfidf"))
      carved = training_data.prepare_data(training_data.DataConfig(train_files=train_files, text_mode="tfidf",
                                                                   validation_fraction=0.25))
    for data in (streamed, carved):
      self.assertEqual((data.input_kind, data.text_handles, data.embedded_texts),
                       (training_data.TEXT_INPUT, None, 0))
      self.assertEqual(training_data.input_spec(data.validation), tf.TensorSpec([None], tf.string))
    self.assertCountEqual(list(carved.train.features) + list(carved.validation.features), texts)

  def test_frozen_text_records_are_embedded_once_through_the_cache(self):
    root = self.create_tempdir().full_path
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film"]
    handles = bert_conversion.export_random_bert(os.path.join(root, "bert"), vocab, hidden_size=8,
                                                 num_layers=1, num_heads=2, intermediate_size=8)
    schema = tfrecords.ExampleSchema(text_key="text", num_classes=2)
    texts = ["good film", "bad film", "good good", "bad bad"] * 3
    tfrecords.write_instances(os.path.join(root, "train.tfrecord"), [
        tfrecords.ClassificationInstance(label=int("bad" in t), text=t) for t in texts], schema)
    with open(os.path.join(root, "train.labels.json"), "w") as f:
      json.dump({"classes": ["positive", "negative"], "schema": schema.to_dict()}, f)
    config = training_data.DataConfig(train_files=os.path.join(root, "train.tfrecord"),
                                      validation_fraction=0.25,
                                      text_encoder_handles=[handles.preprocess, handles.encoder],
                                      max_seq_length=8, embedding_cache_dir=os.path.join(root, "cache"))
    data = training_data.prepare_data(config)  # text_mode="frozen" is the default, for files too.
    self.assertEqual(data.input_kind, training_data.EMBEDDING_INPUT)
    # round(12 * 0.25) = 3 validation rows: 1.5 of each class's 6, the half row to one class.
    self.assertEqual((data.train.features.shape, data.validation.features.shape), ((9, 8), (3, 8)))
    train_idx, _ = datasets.train_validation_split(np.array([int("bad" in t) for t in texts]), 0.25, 0)
    encoder = text_encoder.TextEncoderConfig(preprocess_handle=handles.preprocess,
                                             encoder_handle=handles.encoder,
                                             trainable=False, pooling="mean", max_seq_length=8,
                                             precision=config.text_precision)
    expected = text_embeddings.embed_texts([texts[i] for i in train_idx], encoder,
                                           os.path.join(root, "cache"))
    self.assertAllClose(data.train.features, expected)
    # 12 rows embedded, each of the 4 distinct texts computed once; a second run reads all 12 from the cache.
    self.assertEqual((data.embedded_texts, data.computed_texts), (12, 4))
    again = training_data.prepare_data(config)
    self.assertEqual((again.embedded_texts, again.computed_texts), (12, 0))

  def test_records_without_validation_files_carve_a_stratified_seeded_split(self):
    root = self.create_tempdir().full_path
    schema = tfrecords.ExampleSchema(text_key=None, dense_key="features", dense_dim=2, num_classes=3)
    labels = np.repeat([0, 1, 2], [20, 20, 10])
    tfrecords.write_instances(os.path.join(root, "train.tfrecord"), [
        tfrecords.ClassificationInstance(label=int(y), dense=[float(i), float(y)])
        for i, y in enumerate(labels)],
        schema)
    with open(os.path.join(root, "train.labels.json"), "w") as f:
      json.dump({"classes": ["a", "b", "c"], "schema": schema.to_dict()}, f)
    config = training_data.DataConfig(train_files=os.path.join(root, "train.tfrecord"),
                                      validation_fraction=0.2, split_seed=3)
    data = training_data.prepare_data(config)
    self.assertAllEqual(np.bincount(data.validation.labels), [4, 4, 2])  # 20% of each class.
    self.assertAllEqual(np.bincount(data.train.labels), [16, 16, 8])
    # The rows are the named data sets' carving of the same labels; train and validation partition the file.
    train_idx, val_idx = datasets.train_validation_split(labels, 0.2, 3)
    self.assertAllEqual(data.validation.features[:, 0], val_idx)
    self.assertAllEqual(data.train.features[:, 0], train_idx)
    self.assertEqual(data.validation_note, "10 rows carved from the training data (20.0%; "
                     "`validation_fraction`=0.2, stratified by class, seed 3)")
    self.assertAllEqual(training_data.prepare_data(config).validation.features, data.validation.features)

  def test_row_files_are_converted_once_and_numbered_by_the_training_rows(self):
    root = self.create_tempdir().full_path
    train_path, validation_path = os.path.join(root, "train.csv"), os.path.join(root, "validation.tsv")
    with open(train_path, "w") as f:  # Class c has x = c; one row lacks its label.
      f.write("x,noise,label\n" + "".join(f"{c},{i},{name}\n" for i in range(10)
                                         for c, name in enumerate(["a", "b", "c"])) + "7,7,\n")
    with open(validation_path, "w") as f:
      f.write("x\tnoise\tlabel\n2\t0\tc\n0\t0\ta\n")
    config = training_data.DataConfig(
        train_files=train_path, validation_files=validation_path, row_cache_dir=os.path.join(root, "cache"),
        rows=dict(feature_columns=("x", "noise"), bad_rows="skip"))
    data = training_data.prepare_data(config)  # input_format "auto": rows, from the extensions.
    self.assertEqual((data.class_names, data.input_kind), (["a", "b", "c"], training_data.DENSE_INPUT))
    self.assertEqual(data.conversions["train"].summary.rejected, 1)
    self.assertFalse(data.conversions["validation"].reused)
    self.assertEqual(data.validation_note, f"2 rows of {validation_path}")
    features, labels = next(iter(data.train.make_dataset(30, shuffle=False, repeat=False, seed=0)))
    self.assertAllEqual(features[:, 0], labels.numpy().reshape([-1]))  # x = class id, in the right column.
    self.assertAllEqual([y.numpy().reshape([-1]).tolist() for _, y in data.validation.make_dataset(
        2, shuffle=False, repeat=False, seed=0)], [[2, 0]])
    again = training_data.prepare_data(config)
    self.assertTrue(all(c.reused for c in again.conversions.values()))
    with open(validation_path, "a") as f:
      f.write("1\t0\td\n")  # A class the training rows do not have: a bad row, not a new id.
    changed = training_data.prepare_data(config).conversions["validation"]
    self.assertEqual((changed.reused, changed.summary.rows, changed.summary.rejected), (False, 2, 1))
    with open(changed.summary.rejects_path) as f:
      self.assertEqual(json.loads(f.read())["reason"], "unknown label 'd'")

  def test_an_image_folder_trains_as_images(self):
    root = self.create_tempdir().full_path
    digits = datasets.load_image_classification("digits", "train")
    for i in range(40):
      folder = os.path.join(root, "digits", f"digit_{digits.labels[i]}")
      os.makedirs(folder, exist_ok=True)
      with open(os.path.join(folder, f"{i}.png"), "wb") as f:
        f.write(tf.io.encode_png(digits.images[i]).numpy())
    data = training_data.prepare_data(training_data.DataConfig(
        train_files=os.path.join(root, "digits"), row_cache_dir=os.path.join(root, "cache"),
        validation_fraction=0.25))
    self.assertEqual(data.input_kind, training_data.IMAGE_INPUT)
    self.assertEqual(data.class_names, [f"digit_{d}" for d in range(10)])
    self.assertEqual(len(data.train) + len(data.validation), 40)
    self.assertEqual(training_data.input_spec(data.train).shape.as_list(), [None, 8, 8, 1])

  def test_records_without_a_model_input_raise(self):
    root = self.create_tempdir().full_path
    open(os.path.join(root, "train.tfrecord"), "w").close()  # The vocabulary beside it is read first.
    with open(os.path.join(root, "train.labels.json"), "w") as f:
      json.dump({"classes": ["a"], "schema": tfrecords.ExampleSchema(text_key=None).to_dict()}, f)
    with self.assertRaisesRegex(ValueError, "no image, dense or text feature"):
      training_data.prepare_data(training_data.DataConfig(train_files=os.path.join(root, "train.tfrecord"),
                                                          validation_files=os.path.join(root, "v.tfrecord")))


  def test_truncated_training_records_name_the_file_and_record(self):
    root = self.create_tempdir().full_path
    schema = tfrecords.ExampleSchema(text_key=None, dense_key="features", dense_dim=1, num_classes=2)
    for name in ("train", "validation"):
      tfrecords.write_instances(os.path.join(root, f"{name}.tfrecord"), [
          tfrecords.ClassificationInstance(label=i % 2, dense=[float(i)]) for i in range(6)], schema)
    with open(os.path.join(root, "train.labels.json"), "w") as f:
      json.dump({"classes": ["a", "b"], "schema": schema.to_dict()}, f)
    path = os.path.join(root, "train.tfrecord")
    with open(path, "r+b") as f:
      f.truncate(os.path.getsize(path) - 2)
    with self.assertRaisesRegex(DataError, "^" + re.escape(f"{path}, row 6: truncated record at byte ")):
      training_data.prepare_data(training_data.DataConfig(  # Refused before any record is read.
          train_files=path, validation_files=os.path.join(root, "validation.tfrecord")))


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

  def test_elwc_class_lists_give_relevance_rows_and_stratified_subsets(self):
    root = self.create_tempdir().full_path
    names = [f"digit {i}" for i in range(10)]
    vocab = self.create_tempfile("classes.txt", content="\n".join(names) + "\n").full_path
    digits = datasets.load_image_classification("digits", "train")
    for name, rows in (("train", slice(0, 300)), ("val", slice(300, 400))):
      elwc_lists.write(os.path.join(root, f"{name}.elwc"), elwc_lists.digit_lists(
          digits.images[rows], digits.labels[rows], 10, negatives=3, seed=0))
    data = training_data.prepare_data(training_data.DataConfig(
        train_files=os.path.join(root, "train.elwc"), validation_files=os.path.join(root, "val.elwc"),
        input_format="elwc", label_vocab=vocab, label_key="relevance", unlisted_classes="unjudged",
        max_train_examples=100))
    self.assertEqual((data.class_names, data.input_kind, data.test), (names, training_data.DENSE_INPUT, None))
    self.assertEqual(len(data.validation), 100)
    self.assertEqual(data.train.features.shape, (100, 64))  # Exactly the 100 asked, stratified.
    # Per row: the true class 1, three listed classes 0, six unjudged classes -1.
    self.assertAllEqual(np.sort(data.validation.labels, axis=1)[:, ::-1][0], [1] + [0] * 3 + [-1] * 6)
    self.assertAllEqual(np.argmax(data.validation.labels, axis=1), digits.labels[300:400])
    # The subset is the stratified draw of the named data sets, by each list's most relevant class.
    subset = datasets.train_validation_split(digits.labels[:300], 100 / 300, 0)[1]
    self.assertAllEqual(np.argmax(data.train.labels, axis=1), digits.labels[:300][subset])
    features, labels = next(iter(data.train.make_dataset(8, shuffle=False, repeat=False, seed=0)))
    self.assertEqual((features.shape, labels.shape, labels.dtype), ((8, 64), (8, 10), tf.float32))

  def test_repeated_batches_drop_the_remainder_and_input_spec_has_a_free_batch_axis(self):
    split = training_data.ArraySplit(np.zeros((5, 3), np.float32), np.zeros(5, np.int64))
    batches = list(split.make_dataset(2, shuffle=True, repeat=True, seed=0).take(4))
    self.assertEqual([len(labels) for _, labels in batches], [2, 2, 2, 2])
    self.assertEqual(training_data.input_spec(split), tf.TensorSpec([None, 3], tf.float32))


if __name__ == "__main__":
  tf.test.main()
