"""Tests of rank4class.modeling.image_encoder: small CNN, application and custom backbones, pixel scaling,
augmentation (`RandomShift`: hand-checked shifts, the identity at inference, draws that a checkpoint
determines, the config round trip)."""

import dataclasses

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class.modeling import encoders, image_encoder
from tests.rank4class import keras_round_trip


class ImageEncoderTest(tf.test.TestCase, parameterized.TestCase):
  def test_small_cnn_output_is_last_filter_count(self):
    encoder = encoders.get("image", filters=(4, 6), rescale=1.0 / 16.0)
    self.assertEqual(encoder(tf.zeros([2, 8, 8, 1], tf.uint8)).shape, [2, 6])
    self.assertEqual(encoder.output_dim, 6)

  def test_grayscale_without_channel_axis(self):
    self.assertEqual(image_encoder.ImageEncoder(filters=(3,))(tf.zeros([2, 8, 8])).shape, [2, 3])

  def test_rescale_and_offset_before_backbone(self):
    captured = {}

    class Identity(tf.keras.Model):
      def call(self, inputs, training=None):
        captured["x"] = inputs
        return inputs

    encoder = image_encoder.ImageEncoder(backbone=Identity(), rescale=0.5, offset=-1.0, pooling="max")
    out = encoder(tf.constant([[[[2], [4]], [[6], [8]]]], tf.uint8))  # one 2x2 grayscale image
    self.assertAllClose(captured["x"][0, :, :, 0], [[0.0, 1.0], [2.0, 3.0]])
    self.assertAllClose(out, [[3.0]])  # global max pooling

  def test_shift_augments_training_images_only_and_round_trips(self):
    captured = []

    class Identity(tf.keras.Model):
      def call(self, inputs, training=None):
        captured.append(inputs)
        return inputs

    encoder = image_encoder.ImageEncoder(backbone=Identity(), rescale=1.0, shift=1, flip=True, pooling="max")
    images = tf.random.stateless_uniform([32, 5, 5, 1], seed=[0, 1]) + 1.0
    encoder(images)
    encoder(images, training=True)
    self.assertAllEqual(captured[0], images)  # Inference: untouched.
    self.assertNotAllClose(captured[1], images)
    self.assertEqual(encoder.non_trainable_weights[0].numpy(), 1)  # The draws' counter, in every checkpoint.
    config = encoders.get("image",
                          **dataclasses.asdict(encoders.ImageEncoderConfig(shift=2, flip=True))).get_config()
    self.assertEqual((config["shift"], config["flip"], config["filters"]), (2, True, [32, 64, 128]))
    self.assertEqual(image_encoder.ImageEncoder.from_config(config).get_config(), config)
    self.assertEqual(image_encoder.ImageEncoder(filters=(4,)).get_config()["shift"], 0)

  def test_projection_sets_output_dim(self):
    encoder = image_encoder.ImageEncoder(filters=(4,), output_dim=9)
    self.assertEqual(encoder.output_dim, 9)
    self.assertEqual(encoder(tf.zeros([1, 8, 8, 3])).shape, [1, 9])

  def test_resnet50_backbone_by_name_without_download(self):
    encoder = encoders.get("image", backbone="resnet50", image_shape=(32, 32, 3))
    self.assertEqual(encoder(tf.zeros([1, 32, 32, 3])).shape, [1, 2048])
    self.assertGreater(len(encoder.trainable_weights), 100)

  @parameterized.parameters(
    ({"backbone": "alexnet"}, r"`backbone` must be one of \['small_cnn', .*'resnet50'.*\], got 'alexnet'"),
    ({"backbone": "resnet50"}, "needs `image_shape`"),
    ({"backbone": 3}, "`backbone` must be a name in"),
    ({"pooling": "sum"}, r"`pooling` must be one of \['avg', 'max'\], got 'sum'"),
    ({"image_shape": (32, 32)}, "`image_shape` must be"),
    ({"filters": ()}, "`filters` must list at least one layer width"),
  )
  def test_bad_arguments_raise(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      image_encoder.ImageEncoder(**kwargs)

  def test_small_cnn_save_load_round_trip(self):
    encoder = image_encoder.ImageEncoder(filters=(4, 8), rescale=1.0 / 255.0, output_dim=5)
    self.assertEqual(
      image_encoder.ImageEncoder.from_config(encoder.get_config()).get_config(), encoder.get_config()
    )
    model = keras_round_trip.wrap(encoder, (8, 8, 3))
    x = np.random.default_rng(0).integers(0, 255, size=[2, 8, 8, 3]).astype(np.float32)
    loaded = keras_round_trip.save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(x), model(x), atol=1e-5)

  def test_custom_backbone_save_load_round_trip(self):
    inputs = tf.keras.Input(shape=(6, 6, 1))
    backbone = tf.keras.Model(inputs, tf.keras.layers.Conv2D(3, 3)(inputs), name="custom_backbone")
    encoder = image_encoder.ImageEncoder(backbone=backbone, rescale=1.0)
    model = keras_round_trip.wrap(encoder, (6, 6, 1))
    x = np.random.default_rng(1).normal(size=[2, 6, 6, 1]).astype(np.float32)
    loaded = keras_round_trip.save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(x), model(x), atol=1e-5)


def _grid() -> tf.Tensor:
  return tf.reshape(tf.range(1, 17, dtype=tf.float32), [1, 4, 4, 1])


class TranslateTest(tf.test.TestCase):

  def test_shifts_right_and_up_by_whole_pixels_with_the_border_filled(self):
    right = image_encoder.translate(_grid(), tf.constant([[1.0, 0.0]]))[0, :, :, 0]
    self.assertAllEqual(right, [[0, 1, 2, 3], [0, 5, 6, 7], [0, 9, 10, 11], [0, 13, 14, 15]])
    up = image_encoder.translate(_grid(), tf.constant([[0.0, -1.0]]), fill_value=-1.0)[0, :, :, 0]
    self.assertAllEqual(up, [[5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16], [-1, -1, -1, -1]])

  def test_each_image_gets_its_own_shift(self):
    images = tf.concat([_grid(), _grid()], axis=0)
    moved = image_encoder.translate(images, tf.constant([[0.0, 0.0], [-2.0, 0.0]]))
    self.assertAllEqual(moved[0], images[0])
    self.assertAllEqual(moved[1, :, :, 0], [[3, 4, 0, 0], [7, 8, 0, 0], [11, 12, 0, 0], [15, 16, 0, 0]])


class RandomShiftTest(tf.test.TestCase):

  def test_inference_is_the_identity_and_training_moves_by_at_most_max_shift(self):
    layer = image_encoder.RandomShift(max_shift=1, seed=3)
    # No zero pixel: a fill is visible.
    images = tf.random.stateless_uniform([64, 6, 6, 1], seed=[1, 2]) + 1.0
    self.assertAllEqual(layer(images), images)
    moved = layer(images, training=True).numpy()
    padded = np.pad(images.numpy(), [(0, 0), (1, 1), (1, 1), (0, 0)])
    for i in range(64):  # Each output is one of the 9 crops of the zero-padded image.
      crops = [padded[i, 1 - dy:7 - dy, 1 - dx:7 - dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
      self.assertTrue(any(np.array_equal(moved[i], c) for c in crops), msg=i)
    self.assertGreater(len({moved[i].tobytes() for i in range(64)}), 3)  # Not one shift for the whole batch.

  def test_draws_follow_the_checkpointed_call_counter(self):
    images = tf.random.stateless_uniform([8, 5, 5, 1], seed=[3, 4])
    first = image_encoder.RandomShift(max_shift=2, flip=True, seed=7)
    draws = [first(images, training=True).numpy() for _ in range(3)]
    self.assertNotAllClose(draws[0], draws[1])
    resumed = image_encoder.RandomShift(max_shift=2, flip=True, seed=7)
    resumed.build(images.shape)
    resumed.set_weights([np.int64(2)])  # As restored from a checkpoint written after two training calls.
    self.assertAllEqual(resumed(images, training=True), draws[2])

  def test_flip_mirrors_about_half_of_the_images(self):
    layer = image_encoder.RandomShift(max_shift=0, flip=True, seed=0)
    images = tf.random.stateless_uniform([200, 3, 3, 1], seed=[5, 6])
    out = layer(images, training=True).numpy()
    mirrored = [np.array_equal(out[i], images.numpy()[i, :, ::-1]) for i in range(200)]
    kept = [np.array_equal(out[i], images.numpy()[i]) for i in range(200)]
    self.assertTrue(all(m or k for m, k in zip(mirrored, kept, strict=True)))
    self.assertBetween(sum(mirrored), 70, 130)

  def test_config_round_trip_and_bad_shift(self):
    layer = image_encoder.RandomShift(max_shift=3, flip=True, fill_value=0.5, seed=11)
    clone = image_encoder.RandomShift.from_config(layer.get_config())
    self.assertEqual(clone.get_config(), layer.get_config())
    with self.assertRaisesRegex(ValueError, r"`max_shift` must be an integer >= 0, got -1."):
      image_encoder.RandomShift(max_shift=-1)


if __name__ == "__main__":
  tf.test.main()
