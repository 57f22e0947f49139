"""Tests for rank4class_data.records.input_pipeline: files, sharding, shuffling, batching, and located bad
records."""

import os
import re

import tensorflow as tf
from absl.testing import parameterized

from rank4class_data.records import elwc, input_pipeline, tfrecords
from rank4class_data.records.input_pipeline import InputConfig
from rank4class_data.records.tfrecords import ClassificationInstance, ExampleSchema
from rank4class_data.validation import DataError
from rank4class_engine import distribute
from tests.rank4class_data import example_record_files


def _text_instances(labels):
  return [ClassificationInstance(label=label, text=f"doc {i}") for i, label in enumerate(labels)]


def _raw_label_example(label: int) -> tf.train.Example:
  """A tf.Example with text "x" and any int64 label, bypassing validation."""
  return tf.train.Example(features=tf.train.Features(feature={
      "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
      "text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x"]))}))


class PipelineTest(tf.test.TestCase, parameterized.TestCase):

  def _write(self, name, instances, schema=None, folder=None):
    return example_record_files.write_records(folder or self.create_tempdir().full_path, name,
                                              instances, schema)

  def test_batches_epochs_and_remainder(self):
    path = self._write("a.tfrecord", _text_instances([0, 1, 0, 1, 0]))
    sizes = [
        int(tf.size(labels)) for _, labels in input_pipeline.make_dataset(
            InputConfig(path, batch_size=2, shuffle=False, num_epochs=2), ExampleSchema())
    ]
    self.assertEqual(sizes, [2, 2, 2, 2, 2])
    sizes = [
        int(tf.size(labels)) for _, labels in input_pipeline.make_dataset(
            InputConfig(path, batch_size=2, shuffle=False, drop_remainder=True), ExampleSchema())
    ]
    self.assertEqual(sizes, [2, 2])

  def test_seeded_shuffle_is_reproducible_and_a_permutation(self):
    path = self._write("a.tfrecord", _text_instances(range(20)))
    config = InputConfig(path, batch_size=20, seed=3)

    def order():
      return next(iter(input_pipeline.make_dataset(config, ExampleSchema())))[1].numpy().tolist()

    first = order()
    self.assertEqual(order(), first)
    self.assertCountEqual(first, list(range(20)))
    self.assertNotEqual(first, list(range(20)))

  @parameterized.named_parameters(("file_sharding", 2), ("record_sharding", 1))
  def test_input_pipelines_read_disjoint_shares(self, num_files):
    folder = self.create_tempdir().full_path
    labels = list(range(8))
    for i in range(num_files):
      self._write(f"part-{i}.tfrecord", _text_instances(labels[i::num_files]), folder=folder)
    config = InputConfig(os.path.join(folder, "part-*.tfrecord"), batch_size=4, shuffle=False)
    shares = []
    for pipeline_id in range(2):
      context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id,
                                           num_replicas_in_sync=2)
      batches = list(input_pipeline.make_dataset(config, ExampleSchema(), context))
      self.assertTrue(all(int(tf.size(b[1])) <= 2 for b in batches))  # Per-replica batch 4 / 2.
      shares.append(sorted(int(label) for _, b in batches for label in b))
    self.assertEmpty(set(shares[0]) & set(shares[1]))
    self.assertEqual(sorted(shares[0] + shares[1]), labels)

  def test_distribute_datasets_from_function_on_two_replicas(self):
    path = self._write("a.tfrecord", _text_instances([0, 1, 2, 0, 1, 2, 0, 1]))
    strategy = distribute.make_strategy("mirrored", ["/cpu:0", "/cpu:1"])
    config = InputConfig(path, batch_size=4, shuffle=False)
    dist = strategy.distribute_datasets_from_function(
        lambda context: input_pipeline.make_dataset(config, ExampleSchema(), context))
    seen = []
    for _, labels in dist:
      per_replica = strategy.experimental_local_results(labels)
      self.assertLen(per_replica, 2)
      self.assertEqual([int(tf.size(t)) for t in per_replica], [2, 2])
      seen += [int(v) for t in per_replica for v in t]
    self.assertEqual(sorted(seen), [0, 0, 0, 1, 1, 1, 2, 2])

  def test_missing_files_raise_naming_pattern(self):
    pattern = os.path.join(self.create_tempdir().full_path, "none-*.tfrecord")
    with self.assertRaisesRegex(FileNotFoundError, re.escape(f"{pattern}: no TFRecord file matches")):
      input_pipeline.make_dataset(InputConfig(pattern), ExampleSchema())

  @parameterized.named_parameters(("evaluation", False), ("training", True))
  def test_bad_record_after_first_provenance_block_names_its_row(self, shuffle):
    # Rows are tagged per block of records; a record past the first block must still get its own row.
    path = os.path.join(self.create_tempdir().full_path, "long.tfrecord")
    good = tfrecords.encode_instance(ClassificationInstance(0, "ok"), ExampleSchema()).SerializeToString()
    bad_row = input_pipeline._TAG_BLOCK + 7
    records = [good] * (bad_row - 1) + [_raw_label_example(-1)] + [good] * 5
    tfrecords.write_tfrecord(path, records)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, f"{path}, row {bad_row}, field label"):
      list(input_pipeline.make_dataset(InputConfig(path, batch_size=64, shuffle=shuffle, seed=1),
                                       ExampleSchema()))

  def test_unshuffled_multi_file_read_keeps_every_record_once(self):
    folder = self.create_tempdir().full_path
    for i in range(3):
      self._write(f"part-{i}.tfrecord", _text_instances(range(i * 10, i * 10 + 10)), folder=folder)
    config = InputConfig(os.path.join(folder, "part-*.tfrecord"), batch_size=7, shuffle=False)
    batches = [labels.numpy().tolist() for _, labels in input_pipeline.make_dataset(config, ExampleSchema())]
    self.assertEqual([len(b) for b in batches], [7, 7, 7, 7, 2])
    self.assertEqual(sorted(sum(batches, [])), list(range(30)))

  @parameterized.named_parameters(
      ("batch_size", dict(batch_size=0), "batch_size"),
      ("buffer", dict(shuffle_buffer_size=0), "shuffle_buffer_size"),
      ("epochs", dict(num_epochs=0), "num_epochs"),
  )
  def test_invalid_input_config_raises(self, kwargs, name):
    with self.assertRaisesRegex(ValueError, name):
      InputConfig("x", **kwargs)


  def test_folder_is_one_located_error(self):
    folder = self.create_tempdir().full_path
    with self.assertRaisesRegex(DataError, re.escape(f"{folder}: a directory; expected TFRecord files (a "
                                                     f"file, or a pattern such as {folder}/*.tfrecord).")):
      input_pipeline.make_dataset(InputConfig(folder), ExampleSchema())

  def test_empty_shard_reads_but_too_short_file_is_an_error(self):
    folder = self.create_tempdir().full_path
    empty, short = os.path.join(folder, "empty.tfrecord"), os.path.join(folder, "short.tfrecord")
    open(empty, "wb").close()
    with open(short, "wb") as f:
      f.write(b"a,b\n1,2\n")  # TensorFlow's reader takes under 12 bytes for an empty file.
    with self.assertRaisesRegex(DataError, f"{short}, row 1: not a TFRecord file"):
      InputConfig(short).files()
    self.assertEqual(InputConfig(empty).files(), [empty])  # An empty shard among others is fine.

  def test_pipeline_data_loss_is_located_in_the_files_it_read(self):
    folder = self.create_tempdir().full_path
    good = os.path.join(folder, "good.tfrecord")
    tfrecords.write_instances(good, _text_instances([0, 1]), ExampleSchema())
    # Framed whole, so the files pass `check_record_file`; a checksum fails while the pipeline reads.
    path = example_record_files.write_corrupted(folder)
    config = InputConfig(os.path.join(folder, "*.tfrecord"), batch_size=64, shuffle=True, seed=0)
    with self.assertRaises(tf.errors.DataLossError) as caught:
      list(input_pipeline.make_dataset(config, ExampleSchema()))
    self.assertNotIn(path, str(caught.exception))  # TensorFlow's message names no file ...
    self.assertEqual(input_pipeline.located_data_loss(caught.exception),  # ... the located one does.
                     f"{path}, row 3000: corrupted record at byte "
                     f"{example_record_files.LAST_RECORD_OFFSET + 12} (checksum mismatch); expected a "
                     "complete TFRecord file (write or copy it again).")
    self.assertIsNone(input_pipeline.located_data_loss(ValueError("truncated record at 0")))

  def test_the_record_modules_name_the_one_pipeline(self):
    for module in (tfrecords, elwc):
      self.assertIs(module.InputConfig, InputConfig)
      self.assertIs(module.make_dataset, input_pipeline.make_dataset)


if __name__ == "__main__":
  tf.test.main()
