"""Keras save/load round trips of single layers, shared by the instance encoder tests."""

import os

import tensorflow as tf


def save_and_load(model: tf.keras.Model, directory: str) -> tf.keras.Model:
  """`model` saved as `directory`/model.keras and loaded back (no custom_objects: the registrations load it)."""
  path = os.path.join(directory, "model.keras")
  model.save(path)
  return tf.keras.models.load_model(path)


def wrap(layer: tf.keras.layers.Layer, shape: tuple[int, ...], dtype: str = "float32") -> tf.keras.Model:
  """A functional model of `layer` on inputs `[batch_size, *shape]` of `dtype`."""
  inputs = tf.keras.Input(shape=shape, dtype=dtype)
  return tf.keras.Model(inputs, layer(inputs))
