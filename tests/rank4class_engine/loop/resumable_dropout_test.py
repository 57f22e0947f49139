"""Tests for rank4class_engine.loop.resumable_dropout: masks determined by (seed, call counter, replica)."""

import os

import numpy as np
import tensorflow as tf

from rank4class_engine import distribute
from rank4class_engine.loop.resumable_dropout import ResumableDropout


class ResumableDropoutTest(tf.test.TestCase):

  def test_inference_is_the_identity_and_counts_nothing(self):
    layer = ResumableDropout(0.5, seed=1)
    x = tf.reshape(tf.range(8, dtype=tf.float32), [2, 4])
    self.assertAllEqual(layer(x, training=False), x)
    self.assertAllEqual(layer(x), x)
    self.assertEqual(layer.get_weights(), [0])

  def test_training_drops_about_rate_and_scales_the_rest(self):
    layer = ResumableDropout(0.25, seed=1)
    out = layer(tf.ones([100, 100]), training=True).numpy()
    self.assertAllClose(np.unique(out), [0.0, 1 / 0.75])  # Kept entries scaled by 1 / (1 - rate).
    self.assertNear(np.mean(out == 0.0), 0.25, 0.02)  # 10,000 draws: standard error 0.004.

  def test_the_counter_determines_the_mask(self):
    first, second = ResumableDropout(0.5, seed=7), ResumableDropout(0.5, seed=7)
    x = tf.ones([4, 8])
    masks = [first(x, training=True).numpy() for _ in range(3)]
    self.assertNotAllEqual(masks[0], masks[1])  # A new mask at every training call.
    second(x, training=False)  # Builds it.
    second.set_weights([np.int64(2)])  # As a resumed run restores it from a checkpoint after two steps.
    self.assertAllEqual(second(x, training=True), masks[2])
    self.assertEqual(second.get_weights(), [3])
    other_seed = ResumableDropout(0.5, seed=8)
    self.assertNotAllEqual(other_seed(x, training=True), masks[0])

  def test_replicas_draw_different_masks_and_count_each_step_once(self):
    strategy = distribute.make_strategy("mirrored", ["/cpu:0", "/cpu:1"])
    with strategy.scope():
      layer = ResumableDropout(0.5, seed=3)
      layer.build([None, 16])
    step = tf.function(lambda: layer(tf.ones([4, 16]), training=True))
    masks = strategy.experimental_local_results(strategy.run(step))
    self.assertNotAllEqual(masks[0], masks[1])
    strategy.run(step)
    self.assertEqual(int(layer.get_weights()[0]), 2)

  def test_rate_outside_zero_to_one_raises(self):
    with self.assertRaisesRegex(ValueError, r"`rate` must be in \[0, 1\), got 1.0"):
      ResumableDropout(1.0)

  def test_config_and_save_load_round_trip(self):
    layer = ResumableDropout(0.3, seed=5, name="drop")
    self.assertEqual(ResumableDropout.from_config(layer.get_config()).get_config(), layer.get_config())
    inputs = tf.keras.Input([6])
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(2)(layer(inputs)))
    x = tf.ones([3, 6])
    layer(x, training=True)
    path = os.path.join(self.create_tempdir().full_path, "model")
    model.save(path, save_format="tf")
    loaded = tf.keras.models.load_model(path)
    self.assertAllClose(loaded(x), model(x))
    self.assertEqual(loaded.get_layer("drop").get_weights(), [1])
    self.assertAllEqual(loaded.get_layer("drop")(x, training=True), layer(x, training=True))


if __name__ == "__main__":
  tf.test.main()
