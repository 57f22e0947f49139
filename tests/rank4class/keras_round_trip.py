"""Keras save/load round trips of single layers, shared by the instance encoder tests."""

import json
import os
import zipfile
from collections.abc import Callable
from typing import Any

import tensorflow as tf


def save_and_load(model: tf.keras.Model, directory: str) -> tf.keras.Model:
  """`model` saved as `directory`/model.keras and loaded back (no custom_objects: the registrations load
  it)."""
  path = os.path.join(directory, "model.keras")
  model.save(path)
  return tf.keras.models.load_model(path)


def wrap(layer: tf.keras.layers.Layer, shape: tuple[int, ...], dtype: str = "float32") -> tf.keras.Model:
  """A functional model of `layer` on inputs `[batch_size, *shape]` of `dtype`."""
  inputs = tf.keras.Input(shape=shape, dtype=dtype)
  return tf.keras.Model(inputs, layer(inputs))


def rewrite_layer_config(path: str, class_name: str,
                         rewrite: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
  """Rewrites, in the .keras file `path`, the config of every layer of class `class_name` by `rewrite`: a
  model as an earlier version saved it, whose layer configs had another form."""

  def visit(node):
    if isinstance(node, dict):
      if node.get("class_name") == class_name and isinstance(node.get("config"), dict):
        node["config"] = rewrite(node["config"])
      for value in node.values():
        visit(value)
    elif isinstance(node, list):
      for value in node:
        visit(value)

  with zipfile.ZipFile(path) as archive:
    files = {name: archive.read(name) for name in archive.namelist()}
  config = json.loads(files["config.json"])
  visit(config)
  files["config.json"] = json.dumps(config).encode("utf-8")
  with zipfile.ZipFile(path, "w") as archive:
    for name, data in files.items():
      archive.writestr(name, data)


def flat_text_layer_config(config: dict[str, Any]) -> dict[str, Any]:
  """A text instance or metadata class encoder's config in the form saved up to 0.8: the `text` entry's fields
  as flat keys, `trainable` as `trainable_encoder`."""
  config = dict(config)
  text = dict(config.pop("text"))
  text["trainable_encoder"] = text.pop("trainable")
  return {**config, **text}
