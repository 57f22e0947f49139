"""Tests of rank4class.modeling.instance_encoder: the base class's serving input spec and the shared settings
checks."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class.modeling import instance_encoder


class _Doubler(instance_encoder.InstanceEncoder):
  """2x, for the base class's bookkeeping."""

  def build(self, input_shape):
    self._seen_input_shape = tf.TensorShape(input_shape)
    super().build(input_shape)

  def call(self, inputs, training=None):
    return 2.0 * inputs


class InstanceEncoderTest(tf.test.TestCase):
  def test_serving_input_spec_keeps_all_but_the_batch_axis(self):
    encoder = _Doubler()
    with self.assertRaisesRegex(ValueError, "_Doubler must be built"):
      encoder.serving_input_spec()
    self.assertAllClose(encoder(tf.ones([3, 2, 5])), 2.0 * tf.ones([3, 2, 5]))
    self.assertEqual(encoder.serving_input_spec(), tf.TensorSpec([None, 2, 5], tf.float32, name="inputs"))

  def test_output_dim_is_the_subclasss_to_give(self):
    with self.assertRaises(NotImplementedError):
      _ = _Doubler().output_dim


class SettingsCheckTest(tf.test.TestCase, parameterized.TestCase):
  def test_valid_settings_pass_through(self):
    self.assertEqual(instance_encoder.check_dropout(0), 0.0)
    self.assertIsInstance(instance_encoder.check_dropout(0), float)
    self.assertEqual(instance_encoder.check_output_dim(None), None)
    self.assertEqual(instance_encoder.check_output_dim(3), 3)

  @parameterized.parameters(
    (lambda: instance_encoder.check_dropout(1.0), r"`dropout` must be in \[0, 1\), got 1.0."),
    (lambda: instance_encoder.check_dropout(-0.1), r"`dropout` must be in \[0, 1\), got -0.1."),
    (lambda: instance_encoder.check_output_dim(0), "`output_dim` must be an integer >= 1, got 0."),
    (lambda: instance_encoder.check_output_dim(2.0), "`output_dim` must be an integer >= 1, got 2.0."),
  )
  def test_bad_settings_raise_naming_the_setting(self, check, message):
    with self.assertRaisesRegex(ValueError, message):
      check()


if __name__ == "__main__":
  tf.test.main()


class FittedValuesTest(tf.test.TestCase):

  def test_gives_its_values_and_zeros_when_rebuilt_from_its_config(self):
    initializer = instance_encoder.FittedValues([[1.0, 2.0], [3.0, 4.0]])
    self.assertAllEqual(initializer([2, 2]), [[1.0, 2.0], [3.0, 4.0]])
    self.assertEqual(initializer.get_config(), {})  # The values stay out of a layer's config.
    rebuilt = tf.keras.initializers.deserialize(tf.keras.initializers.serialize(initializer))
    self.assertAllEqual(rebuilt([2, 3]), np.zeros([2, 3]))
    with self.assertRaisesRegex(ValueError,
                                r"FittedValues of shape \[2, 2\] cannot start a weight of shape \[3\]"):
      initializer([3])
