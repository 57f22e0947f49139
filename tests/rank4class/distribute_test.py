"""Tests for rank4class.distribute, and for training under 1 vs 2 replicas and two local workers."""

import json
import os
import socket
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class import distribute, encoders, interactions, train
from rank4class import model as model_lib


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _digits_config(model_dir: str, devices: list[str], steps: int = 40) -> train.TrainConfig:
  return train.TrainConfig(
      model_dir=model_dir, data=train.DataConfig(dataset="digits"),
      model=model_lib.Rank4ClassConfig(
          instance_encoder=encoders.InstanceEncoderConfig(
              type="image", image=encoders.ImageEncoderConfig(filters=(16, 32), pooling="max")),
          interaction=interactions.InteractionConfig(type="latent_cross", hidden_units=(16, 16))),
      optimizer=train.OptimizerConfig(learning_rate=1e-2), batch_size=64, train_steps=steps, eval_every=20,
      checkpoint_every=0, strategy="mirrored", devices=devices, export=False, tensorboard=False, verbose=0)


class MakeStrategyTest(tf.test.TestCase, parameterized.TestCase):

  def test_unknown_name_raises_listing_the_allowed_names(self):
    with self.assertRaisesRegex(ValueError, "'nccl'.*auto, mirrored, multi_worker, one_device"):
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

  def test_auto_on_cpu_is_one_replica_mirrored(self):
    with tf.compat.v1.test.mock.patch.dict(os.environ):
      os.environ.pop("TF_CONFIG", None)
      strategy = distribute.make_strategy("auto")
    self.assertIsInstance(strategy, tf.distribute.MirroredStrategy)
    self.assertEqual(strategy.num_replicas_in_sync, 1)

  def test_explicit_devices_give_two_replicas(self):
    strategy = distribute.make_strategy("mirrored", ["/cpu:0", "/cpu:1"])
    self.assertEqual(strategy.num_replicas_in_sync, 2)

  def test_single_process_is_chief_and_writes_into_model_dir(self):
    strategy = distribute.make_strategy("one_device")
    self.assertTrue(distribute.is_chief(strategy))
    self.assertEqual(distribute.output_dir("/m", strategy, "export"), "/m/export")


class ReplicaEquivalenceTest(tf.test.TestCase):
  """One replica and two logical CPU replicas see the same global batches, so they train the same model."""

  def test_one_and_two_replicas_give_the_same_metrics(self):
    data = train.prepare_data(train.DataConfig(dataset="digits"))
    root = self.create_tempdir().full_path
    one = train.train(_digits_config(os.path.join(root, "one"), ["/cpu:0"]), data)
    two = train.train(_digits_config(os.path.join(root, "two"), ["/cpu:0", "/cpu:1"]), data)
    self.assertEqual(one.steps, 40)
    self.assertEqual(two.steps, 40)
    for name in ("loss", "top_1_error", "ndcg_5", "mrr"):
      self.assertAllClose(one.validation_metrics[name], two.validation_metrics[name], atol=2e-3, msg=name)
    for name in ("top_1_error", "top_5_error", "ndcg_5"):
      self.assertAllClose(one.test_report["metrics"][name], two.test_report["metrics"][name], atol=5e-3)
    np.testing.assert_allclose(one.history[-1]["loss"], two.history[-1]["loss"], atol=2e-3)
    self.assertLess(one.test_report["metrics"]["top_1_error"], 0.5)  # Chance: 0.9.


class MultiWorkerTest(tf.test.TestCase):
  """Two worker processes on 127.0.0.1 with MultiWorkerMirroredStrategy train one model and export it."""

  def test_two_local_workers_train_and_export(self):
    model_dir = self.create_tempdir().full_path
    ports = [_free_port(), _free_port()]
    processes = []
    logs = []
    for index in range(2):
      tf_config = {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                   "task": {"type": "worker", "index": index}}
      env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TF_CPP_MIN_LOG_LEVEL="2")
      log = tempfile.TemporaryFile("w+")
      logs.append(log)
      processes.append(subprocess.Popen(
          [sys.executable, "-m", "rank4class.train_main", "--dataset=digits", f"--model_dir={model_dir}",
           "--train_steps=20", "--eval_every=10", "--checkpoint_every=10", "--hidden_width=8", "--cnn_filters=4",
           "--strategy=multi_worker", "--verbose=0"], env=env, stdout=log, stderr=subprocess.STDOUT))
    try:
      codes = [p.wait(timeout=400) for p in processes]
    finally:
      for p in processes:
        if p.poll() is None:
          p.kill()
    outputs = []
    for log in logs:
      log.seek(0)
      outputs.append(log.read()[-3000:])
    self.assertEqual(codes, [0, 0], msg="\n---\n".join(outputs))
    with open(os.path.join(model_dir, train.RESULT_FILE)) as f:
      result = json.load(f)
    self.assertEqual(result["steps"], 20)
    self.assertFalse(os.listdir(os.path.join(model_dir, ".workers")) if os.path.exists(
        os.path.join(model_dir, ".workers")) else [], msg="non-chief scratch files were left behind")
    reloaded = tf.keras.models.load_model(os.path.join(model_dir, "export"), compile=False)
    images = train.prepare_data(train.DataConfig(dataset="digits")).test.features[:5]
    self.assertEqual(reloaded(images).shape, (5, 10))


if __name__ == "__main__":
  tf.test.main()
