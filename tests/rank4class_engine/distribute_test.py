"""Tests for rank4class_engine.distribute: strategy choice from a name and TF_CONFIG, chief and output
folders."""

import json
import os

import tensorflow as tf
from absl.testing import parameterized

from rank4class_engine import distribute


class MakeStrategyTest(tf.test.TestCase, parameterized.TestCase):

  def test_unknown_name_raises_listing_the_allowed_names(self):
    with self.assertRaisesRegex(ValueError, r"`strategy` must be one of \['auto', 'mirrored', "
                                r"'multi_worker', 'one_device'\], got 'nccl'"):
      distribute.make_strategy("nccl")

  def test_multi_worker_without_tf_config_raises(self):
    with tf.compat.v1.test.mock.patch.dict(os.environ):
      os.environ.pop("TF_CONFIG", None)
      with self.assertRaisesRegex(ValueError, "TF_CONFIG"):
        distribute.make_strategy("multi_worker")

  def test_bad_tf_config_json_raises(self):
    with tf.compat.v1.test.mock.patch.dict(os.environ, {"TF_CONFIG": "{not json"}):
      with self.assertRaisesRegex(ValueError, "TF_CONFIG is not valid JSON"):
        distribute.num_workers_in_tf_config()

  def test_counts_workers_and_chief(self):
    config = {"cluster": {"chief": ["a:1"], "worker": ["b:1", "c:1"]}, "task": {"type": "chief", "index": 0}}
    with tf.compat.v1.test.mock.patch.dict(os.environ, {"TF_CONFIG": json.dumps(config)}):
      self.assertEqual(distribute.num_workers_in_tf_config(), 3)

  def test_auto_on_one_device_is_the_default_strategy(self):
    with tf.compat.v1.test.mock.patch.dict(os.environ):
      os.environ.pop("TF_CONFIG", None)
      strategy = distribute.make_strategy("auto")
    self.assertIs(strategy, tf.distribute.get_strategy())
    self.assertNotIsInstance(strategy, tf.distribute.MirroredStrategy)
    self.assertEqual(strategy.num_replicas_in_sync, 1)
    self.assertTrue(distribute.is_chief(strategy))
    self.assertEqual(distribute.output_dir("/m", strategy, "export"), "/m/export")

  def test_auto_with_devices_mirrors_them(self):
    strategy = distribute.make_strategy("auto", ["/cpu:0", "/cpu:1"])
    self.assertIsInstance(strategy, tf.distribute.MirroredStrategy)
    self.assertEqual(strategy.num_replicas_in_sync, 2)

  def test_explicit_devices_give_two_replicas(self):
    strategy = distribute.make_strategy("mirrored", ["/cpu:0", "/cpu:1"])
    self.assertEqual(strategy.num_replicas_in_sync, 2)

  def test_single_process_is_chief_and_writes_into_model_dir(self):
    strategy = distribute.make_strategy("one_device")
    self.assertTrue(distribute.is_chief(strategy))
    self.assertEqual(distribute.output_dir("/m", strategy, "export"), "/m/export")


if __name__ == "__main__":
  tf.test.main()
