"""Tests for rank4class_data.stack: the installed TensorFlow must be one TF-Ranking 0.5.5 runs on."""

import importlib.metadata
from unittest import mock

import tensorflow as tf

from rank4class_data import stack

_real_version = importlib.metadata.version


def _metadata_version(tensorflow_version: str):
  """importlib.metadata.version that reports `tensorflow_version` for tensorflow only."""
  return lambda name: tensorflow_version if name == "tensorflow" else _real_version(name)


class CheckTensorflowStackTest(tf.test.TestCase):

  def test_installed_stack_passes(self):
    stack.check_tensorflow_stack()
    self.assertTrue(tf.__version__.startswith("2.15"))

  def test_tensorflow_2_16_in_metadata_raises(self):
    with mock.patch.object(importlib.metadata, "version", side_effect=_metadata_version("2.16.0")):
      with self.assertRaisesRegex(ImportError, r"tensorflow 2\.16\.0 is installed.*tensorflow<2\.16"):
        stack.check_tensorflow_stack()

  def test_tensorflow_2_15_in_metadata_passes(self):
    with mock.patch.object(importlib.metadata, "version", side_effect=_metadata_version("2.15.1")):
      stack.check_tensorflow_stack()

  def test_keras_3_as_tf_keras_raises(self):
    with mock.patch.object(tf.keras, "version", return_value="3.1.0", create=True):
      with self.assertRaisesRegex(ImportError, r"tf\.keras is Keras 3\.1\.0.*Keras 2"):
        stack.check_tensorflow_stack()

  def test_keras_2_version_function_passes(self):
    with mock.patch.object(tf.keras, "version", return_value="2.15.0", create=True):
      stack.check_tensorflow_stack()


if __name__ == "__main__":
  tf.test.main()
