"""Tests for rank4class_engine.loop.engine_config: the engine's settings, their cadence and checks."""

import tensorflow as tf

from rank4class_engine.loop import engine_config


class EngineConfigTest(tf.test.TestCase):

  def test_total_steps_are_the_asked_steps(self):
    config = engine_config.EngineConfig(run_dir="/r", train_steps=250, eval_every=100)
    self.assertEqual((config.total_steps, config.epoch_steps), (250, 100))
    self.assertEqual(engine_config.EngineConfig(run_dir="/r", train_steps=250, eval_every=100,
                                                checkpoint_every=30).epoch_steps, 10)

  def test_bad_values_raise(self):
    with self.assertRaisesRegex(ValueError, "`best_mode` must be one of"):
      engine_config.EngineConfig(run_dir="/r", train_steps=10, best_mode="up")
    with self.assertRaisesRegex(ValueError, "`steps_per_execution` must be an integer >= 0, got -1"):
      engine_config.EngineConfig(run_dir="/r", train_steps=10, steps_per_execution=-1)
    with self.assertRaisesRegex(ValueError, "`train_steps` must be an integer >= 1, got 0"):
      engine_config.EngineConfig(run_dir="/r", train_steps=0)
    with self.assertRaisesRegex(ValueError, "`eval_every` must be an integer >= 1, got 0"):
      engine_config.EngineConfig(run_dir="/r", train_steps=10, eval_every=0)
    with self.assertRaisesRegex(ValueError, "`checkpoint_every` must be an integer >= 0, got -1"):
      engine_config.EngineConfig(run_dir="/r", train_steps=10, checkpoint_every=-1)
    with self.assertRaisesRegex(ValueError, "`global_batch_size` must be an integer >= 1, got 0"):
      engine_config.EngineConfig(run_dir="/r", train_steps=10, global_batch_size=0)
    with self.assertRaisesRegex(ValueError, "`preemption_grace_seconds` must be >= 0, got -1"):
      engine_config.EngineConfig(run_dir="/r", train_steps=10, preemption_grace_seconds=-1)


if __name__ == "__main__":
  tf.test.main()
