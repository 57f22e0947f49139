"""Tests of rank4class.modeling.mlp_encoder: the dense-features MLP, plain and residual."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class.modeling import encoders, mlp_encoder
from tests.rank4class import keras_round_trip


class MlpEncoderTest(tf.test.TestCase, parameterized.TestCase):
  def test_hand_computed_with_ones(self):
    encoder = mlp_encoder.MlpEncoder(hidden_units=(2,), activation="relu")
    encoder(tf.zeros([1, 3]))
    kernel, bias = encoder.weights
    kernel.assign(tf.ones_like(kernel))
    bias.assign([0.5, -10.0])
    # [1, 2, 3] . ones = 6; + 0.5 -> 6.5; 6 - 10 -> relu 0.
    self.assertAllClose(encoder(tf.constant([[1.0, 2.0, 3.0]])), [[6.5, 0.0]])

  def test_output_dim_is_last_hidden_width(self):
    encoder = encoders.get("mlp", hidden_units=(16, 8))
    self.assertEqual(encoder.output_dim, 8)
    self.assertEqual(encoder(tf.zeros([4, 10])).shape, [4, 8])

  def test_images_are_flattened(self):
    self.assertEqual(mlp_encoder.MlpEncoder(hidden_units=(5,))(tf.zeros([2, 8, 8])).shape, [2, 5])

  def test_dropout_only_in_training(self):
    encoder = mlp_encoder.MlpEncoder(hidden_units=(64,), dropout=0.5)
    x = tf.ones([4, 3])
    self.assertAllClose(encoder(x, training=False), encoder(x, training=False))
    self.assertNotAllClose(encoder(x, training=True), encoder(x, training=False))

  @parameterized.parameters(
    ({"hidden_units": ()},), ({"hidden_units": (0,)},), ({"dropout": 1.0},), ({"activation": "nope"},)
  )
  def test_bad_arguments_raise(self, kwargs):
    with self.assertRaises(ValueError):
      mlp_encoder.MlpEncoder(**kwargs)

  def test_serving_input_spec_after_build(self):
    encoder = mlp_encoder.MlpEncoder(hidden_units=(4,))
    with self.assertRaisesRegex(ValueError, "built"):
      encoder.serving_input_spec()
    encoder(tf.zeros([2, 7]))
    self.assertEqual(encoder.serving_input_spec(), tf.TensorSpec([None, 7], tf.float32, name="inputs"))

  def test_config_and_save_load_round_trip(self):
    encoder = mlp_encoder.MlpEncoder(hidden_units=(8, 4), activation="tanh", dropout=0.25)
    self.assertEqual(mlp_encoder.MlpEncoder.from_config(encoder.get_config()).get_config(),
                     encoder.get_config())
    model = keras_round_trip.wrap(encoder, (6,))
    x = np.random.default_rng(0).normal(size=[3, 6]).astype(np.float32)
    loaded = keras_round_trip.save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(x), model(x))

  def test_residual_branch_starts_as_identity(self):
    encoder = mlp_encoder.MlpEncoder(hidden_units=(8,), residual=True)
    x = tf.constant([[3.0, -4.0], [1.0, 2.0]])
    self.assertAllClose(encoder(x), x)  # x + 0 · relu(W x + b): the zero-initialised output layer.
    self.assertEqual(encoder.output_dim, 2)  # The input size, not the branch's hidden width.

  def test_residual_branch_hand_computed(self):
    encoder = mlp_encoder.MlpEncoder(hidden_units=(1,), residual=True)
    encoder(tf.zeros([1, 2]))
    for weight in encoder.weights:  # Hidden kernel [2, 1], bias [1]; output kernel [1, 2], bias [2].
      weight.assign(tf.ones_like(weight))
    # Hidden: relu(1 + 2 + 1) = 4; output: 4 · [1, 1] + [1, 1] = [5, 5]; plus the input [1, 2] -> [6, 7].
    self.assertAllClose(encoder(tf.constant([[1.0, 2.0]])), [[6.0, 7.0]])

  def test_l2_normalize_scales_inputs_and_output_to_unit_length(self):
    encoder = mlp_encoder.MlpEncoder(hidden_units=(4,), residual=True, l2_normalize=True)
    self.assertAllClose(encoder(tf.constant([[3.0, -4.0]])), [[0.6, -0.8]])  # [3, -4] / 5, then the identity.
    encoder = mlp_encoder.MlpEncoder(hidden_units=(1,), residual=True, l2_normalize=True)
    encoder(tf.zeros([1, 2]))
    for weight in encoder.weights:
      weight.assign(tf.ones_like(weight))
    # Input [3, 4] -> [0.6, 0.8]; hidden relu(1.4 + 1) = 2.4; branch 2.4 + 1 = 3.4 each: [4.0, 4.2] -> unit
    # length.
    self.assertAllClose(encoder(tf.constant([[3.0, 4.0]])), [[4.0, 4.2]] / np.hypot(4.0, 4.2))
    # Seeded: with some random kernels both rows' ReLU units are all zero, and a zero vector has no unit
    # length.
    tf.keras.utils.set_random_seed(2)
    plain = mlp_encoder.MlpEncoder(hidden_units=(3,), l2_normalize=True)
    self.assertAllClose(tf.norm(plain(tf.constant([[1.0, 2.0], [-3.0, 0.5]])), axis=1), [1.0, 1.0])

  def test_defaults_keep_the_plain_mlp(self):
    config = mlp_encoder.MlpEncoder(name="mlp").get_config()
    self.assertEqual((config["residual"], config["l2_normalize"]), (False, False))
    # Saved before the options.
    old = {k: v for k, v in config.items() if k not in ("residual", "l2_normalize")}
    self.assertEqual(mlp_encoder.MlpEncoder.from_config(old).get_config(), config)

  def test_residual_config_and_save_load_round_trip(self):
    encoder = mlp_encoder.MlpEncoder(hidden_units=(8,), residual=True, l2_normalize=True)
    self.assertEqual(mlp_encoder.MlpEncoder.from_config(encoder.get_config()).get_config(),
                     encoder.get_config())
    model = keras_round_trip.wrap(encoder, (6,))
    # A trained-looking output kernel.
    encoder.weights[2].assign(np.random.default_rng(1).normal(size=[8, 6]))
    x = np.random.default_rng(0).normal(size=[3, 6]).astype(np.float32)
    loaded = keras_round_trip.save_and_load(model, self.create_tempdir().full_path)
    self.assertAllClose(loaded(x), model(x))
    self.assertNotAllClose(model(x), x / np.linalg.norm(x, axis=1, keepdims=True))


if __name__ == "__main__":
  tf.test.main()
