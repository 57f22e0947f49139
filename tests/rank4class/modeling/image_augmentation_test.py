"""Tests for rank4class.modeling.image_augmentation: hand-checked shifts, the identity at inference, draws that a checkpoint
determines, the config round trip."""

import numpy as np
import tensorflow as tf

from rank4class.modeling import image_augmentation


def _grid() -> tf.Tensor:
  return tf.reshape(tf.range(1, 17, dtype=tf.float32), [1, 4, 4, 1])


class TranslateTest(tf.test.TestCase):

  def test_shifts_right_and_up_by_whole_pixels_with_the_border_filled(self):
    right = image_augmentation.translate(_grid(), tf.constant([[1.0, 0.0]]))[0, :, :, 0]
    self.assertAllEqual(right, [[0, 1, 2, 3], [0, 5, 6, 7], [0, 9, 10, 11], [0, 13, 14, 15]])
    up = image_augmentation.translate(_grid(), tf.constant([[0.0, -1.0]]), fill_value=-1.0)[0, :, :, 0]
    self.assertAllEqual(up, [[5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16], [-1, -1, -1, -1]])

  def test_each_image_gets_its_own_shift(self):
    images = tf.concat([_grid(), _grid()], axis=0)
    moved = image_augmentation.translate(images, tf.constant([[0.0, 0.0], [-2.0, 0.0]]))
    self.assertAllEqual(moved[0], images[0])
    self.assertAllEqual(moved[1, :, :, 0], [[3, 4, 0, 0], [7, 8, 0, 0], [11, 12, 0, 0], [15, 16, 0, 0]])


class RandomShiftTest(tf.test.TestCase):

  def test_inference_is_the_identity_and_training_moves_by_at_most_max_shift(self):
    layer = image_augmentation.RandomShift(max_shift=1, seed=3)
    images = tf.random.stateless_uniform([64, 6, 6, 1], seed=[1, 2]) + 1.0  # No zero pixel: a fill is visible.
    self.assertAllEqual(layer(images), images)
    moved = layer(images, training=True).numpy()
    padded = np.pad(images.numpy(), [(0, 0), (1, 1), (1, 1), (0, 0)])
    for i in range(64):  # Each output is one of the 9 crops of the zero-padded image.
      crops = [padded[i, 1 - dy:7 - dy, 1 - dx:7 - dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
      self.assertTrue(any(np.array_equal(moved[i], c) for c in crops), msg=i)
    self.assertGreater(len({moved[i].tobytes() for i in range(64)}), 3)  # Not one shift for the whole batch.

  def test_draws_follow_the_checkpointed_call_counter(self):
    images = tf.random.stateless_uniform([8, 5, 5, 1], seed=[3, 4])
    first = image_augmentation.RandomShift(max_shift=2, flip=True, seed=7)
    draws = [first(images, training=True).numpy() for _ in range(3)]
    self.assertNotAllClose(draws[0], draws[1])
    resumed = image_augmentation.RandomShift(max_shift=2, flip=True, seed=7)
    resumed.build(images.shape)
    resumed.set_weights([np.int64(2)])  # As restored from a checkpoint written after two training calls.
    self.assertAllEqual(resumed(images, training=True), draws[2])

  def test_flip_mirrors_about_half_of_the_images(self):
    layer = image_augmentation.RandomShift(max_shift=0, flip=True, seed=0)
    images = tf.random.stateless_uniform([200, 3, 3, 1], seed=[5, 6])
    out = layer(images, training=True).numpy()
    mirrored = [np.array_equal(out[i], images.numpy()[i, :, ::-1]) for i in range(200)]
    kept = [np.array_equal(out[i], images.numpy()[i]) for i in range(200)]
    self.assertTrue(all(m or k for m, k in zip(mirrored, kept, strict=True)))
    self.assertBetween(sum(mirrored), 70, 130)

  def test_config_round_trip_and_bad_shift(self):
    layer = image_augmentation.RandomShift(max_shift=3, flip=True, fill_value=0.5, seed=11)
    clone = image_augmentation.RandomShift.from_config(layer.get_config())
    self.assertEqual(clone.get_config(), layer.get_config())
    with self.assertRaisesRegex(ValueError, r"`max_shift` must be an integer >= 0, got -1."):
      image_augmentation.RandomShift(max_shift=-1)


if __name__ == "__main__":
  tf.test.main()
