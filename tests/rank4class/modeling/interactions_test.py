"""Tests of rank4class.modeling.interactions: hand-computed scores, the split concat layer, and
serialization."""

import os

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class.modeling import interactions

_RNG = np.random.default_rng(0)
_H = _RNG.normal(size=[3, 4]).astype(np.float32)
_C = _RNG.normal(size=[5, 4]).astype(np.float32)


def _functional(interaction: tf.keras.layers.Layer, dim_h: int, dim_c: int) -> tf.keras.Model:
  """Wraps an interaction in a functional model; the class input's "batch" axis is the class axis."""
  instances = tf.keras.Input(shape=(dim_h,), name="instances")
  classes = tf.keras.Input(shape=(dim_c,), name="classes")
  return tf.keras.Model([instances, classes], interaction((instances, classes)))


class DotInteractionTest(tf.test.TestCase):
  def test_scores_hand_computed(self):
    # [1, 2] . [1, 1] = 3 and [1, 2] . [1, 0] = 1, divided by 0.5.
    scores = interactions.DotInteraction(temperature=0.5)(
      (tf.constant([[1.0, 2.0]]), tf.constant([[1.0, 1.0], [1.0, 0.0]]))
    )
    self.assertAllClose(scores, [[6.0, 2.0]])

  def test_zero_temperature_raises(self):
    with self.assertRaisesRegex(ValueError, "`temperature` must be > 0, got 0."):
      interactions.DotInteraction(temperature=0)

  def test_equal_dims_have_no_projection(self):
    layer = interactions.DotInteraction()
    layer((_H, _C))
    self.assertEmpty(layer.trainable_weights)

  def test_different_dims_project_instances(self):
    layer = interactions.DotInteraction()
    scores = layer((_H, _C[:, :2]))
    self.assertEqual(scores.shape, [3, 5])
    self.assertEqual([w.shape.as_list() for w in layer.trainable_weights], [[4, 2]])
    projected = _H @ layer.trainable_weights[0].numpy()
    self.assertAllClose(scores, projected @ _C[:, :2].T, atol=1e-5)


class LatentCrossInteractionTest(tf.test.TestCase):
  def test_one_unit_identity_mlp_is_relu_of_dot(self):
    layer = interactions.LatentCrossInteraction(hidden_units=(1,))
    layer((_H, _C))
    hidden, hidden_bias, score, score_bias = layer.weights
    hidden.assign(tf.ones_like(hidden))  # sum over the crossed vector = <h, c>
    hidden_bias.assign(tf.zeros_like(hidden_bias))
    score.assign(tf.ones_like(score))
    score_bias.assign(tf.zeros_like(score_bias))
    self.assertAllClose(layer((_H, _C)), np.maximum(_H @ _C.T, 0.0), atol=1e-5)

  def test_matches_per_class_loop(self):
    layer = interactions.LatentCrossInteraction(hidden_units=(8, 8))
    scores = layer((_H, _C)).numpy()
    # pylint: disable-next=protected-access
    dense = [layer._hidden_layers[0], layer._hidden_layers[1], layer._score_layer]
    for i in range(5):
      x = _H * _C[i]
      for d in dense:
        x = d(x)
      self.assertAllClose(scores[:, i], x[:, 0], atol=1e-5)

  def test_empty_hidden_units_raise(self):
    with self.assertRaisesRegex(ValueError, "hidden_units"):
      interactions.LatentCrossInteraction(hidden_units=())

  def test_dropout_out_of_range_raises(self):
    with self.assertRaisesRegex(ValueError, "dropout"):
      interactions.LatentCrossInteraction(dropout=1.0)

  def test_dropout_only_in_training(self):
    layer = interactions.LatentCrossInteraction(hidden_units=(16, 16), dropout=0.5)
    self.assertAllClose(layer((_H, _C), training=False), layer((_H, _C), training=False))
    self.assertNotAllClose(layer((_H, _C), training=True), layer((_H, _C), training=False))


class ConcatInteractionTest(tf.test.TestCase):
  def test_split_first_layer_equals_naive_concat_mlp(self):
    layer = interactions.ConcatInteraction(hidden_units=(6, 6))
    classes = _C[:, :3]  # dim_c != dim_h is allowed
    scores = layer((_H, classes)).numpy()
    pairs = np.concatenate([np.repeat(_H[:, None], 5, axis=1), np.repeat(classes[None], 3, axis=0)], axis=-1)
    x = np.maximum(pairs @ layer.concat_kernel.numpy() + layer.concat_bias.numpy(), 0.0)  # [3, 5, 6]
    hidden, score = layer._hidden_layers[0], layer._score_layer  # pylint: disable=protected-access
    x = np.maximum(x @ hidden.kernel.numpy() + hidden.bias.numpy(), 0.0)
    expected = (x @ score.kernel.numpy() + score.bias.numpy())[..., 0]
    self.assertAllClose(scores, expected, atol=1e-5)

  def test_all_classes_scored_at_once(self):
    self.assertEqual(interactions.ConcatInteraction(hidden_units=(4,))((_H, _C)).shape, [3, 5])


class FactoryAndSerializationTest(tf.test.TestCase, parameterized.TestCase):
  def test_unknown_name_lists_allowed(self):
    with self.assertRaisesRegex(ValueError, "dot.*latent_cross.*concat"):
      interactions.get("bilinear")

  def test_unknown_name_raises_when_the_config_is_made(self):
    with self.assertRaisesRegex(ValueError,
                                r"`interaction` must be one of \['dot', 'latent_cross', 'concat'\], "
                                r"got 'bilinear'"):
      interactions.InteractionConfig(type="bilinear")

  @parameterized.parameters(
    ("dot", {"temperature": 2.0}),
    ("latent_cross", {"hidden_units": (8, 8), "activation": "tanh", "dropout": 0.1}),
    ("concat", {"hidden_units": (8, 8)}),
  )
  def test_config_round_trip(self, name, kwargs):
    layer = interactions.get(name, **kwargs)
    clone = type(layer).from_config(layer.get_config())
    self.assertEqual(clone.get_config(), layer.get_config())

  @parameterized.parameters("dot", "latent_cross", "concat")
  def test_save_load_round_trip(self, name):
    kwargs = {} if name == "dot" else {"hidden_units": (8, 8)}
    model = _functional(interactions.get(name, **kwargs), 4, 3)
    expected = model([_H, _C[:, :3]])
    path = os.path.join(self.create_tempdir().full_path, "model.keras")
    model.save(path)
    loaded = tf.keras.models.load_model(path)
    self.assertAllClose(loaded([_H, _C[:, :3]]), expected)

  def test_make_interaction_from_config(self):
    layer = interactions.make_interaction(
      interactions.InteractionConfig(type="concat", hidden_units=(64, 64))
    )
    self.assertIsInstance(layer, interactions.ConcatInteraction)
    self.assertEqual(layer.get_config()["hidden_units"], [64, 64])
    dot = interactions.make_interaction(interactions.InteractionConfig(type="dot", temperature=0.5))
    self.assertEqual(dot.get_config()["temperature"], 0.5)


if __name__ == "__main__":
  tf.test.main()
