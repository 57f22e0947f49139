"""Dropout whose masks a checkpoint determines, so a resumed run draws the masks an uninterrupted one would.

Keras 2's `Dropout` draws from the state of a random op (or of a `tf.random.Generator` that no checkpoint
holds): a run resumed from a checkpoint draws other masks from then on, and its weights drift from an
uninterrupted run's. Here a mask is a pure function of (the layer's seed, a call counter kept as a weight of
the layer, the replica): the counter is checkpointed with the other weights, so the engine's resume guarantee
(`rank4class_engine.loop.trainer`) holds for models with dropout too.
"""

import random
from typing import Any

import tensorflow as tf

from rank4class_data.validation import check_range


@tf.keras.utils.register_keras_serializable(package="rank4class")
class ResumableDropout(tf.keras.layers.Layer):
  """Inverted dropout (as `tf.keras.layers.Dropout`) with masks from `tf.nn.experimental.stateless_dropout`.

  The mask of a training call is seeded by (`seed`, the number of training calls before it, the replica id);
  the call count is a non-trainable int64 weight ("calls"), saved and restored with the model's other weights.
  At inference (`training` false) it is the identity.

  Example:
    layer = ResumableDropout(0.5, seed=7)
    layer(tf.ones([2, 4]), training=True)  # each entry 0.0 or 2.0; the same on every run from the same
                                           # counter

  Args:
    rate: Fraction of the inputs dropped, in [0, 1).
    seed: Integer seed; None draws one from Python's `random` (seeded by `tf.keras.utils.set_random_seed`),
      kept in the config.

  Raises:
    ValueError: for a rate outside [0, 1).
  """

  def __init__(self, rate: float, seed: int | None = None, **kwargs):
    super().__init__(**kwargs)
    check_range("rate", rate, 0.0, 1.0, high_inclusive=False)
    self._rate = float(rate)
    self._seed = int(seed) if seed is not None else random.randrange(2**31)
    self.supports_masking = True

  def build(self, input_shape):
    self._calls = add_call_counter(self)
    super().build(input_shape)

  def call(self, inputs, training=None):
    """`inputs`: any float tensor -> the same shape, entries dropped with probability `rate` and the rest
    scaled by 1 / (1 - rate) when training."""
    if not training or self._rate == 0.0:
      return inputs
    return tf.nn.experimental.stateless_dropout(inputs, self._rate,
                                                seed=next_call_seed(self._seed, self._calls))

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "rate": self._rate, "seed": self._seed}


def add_call_counter(layer: tf.keras.layers.Layer) -> tf.Variable:
  """The non-trainable int64 weight "calls" of `layer` (in its build): its training calls so far, checkpointed
  with its other weights. Summed over replicas it would count a step once per replica; every replica adds 1 to
  the same value, so it is kept from the first one."""
  return layer.add_weight(name="calls", shape=[], dtype=tf.int64, initializer="zeros", trainable=False,
                          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


def next_call_seed(layer_seed: int, calls: tf.Variable) -> tf.Tensor:
  """The stateless seed of this training call, a pure function of (`layer_seed`, the calls before it, the
  replica), and `calls` counted up by one: the draws of any layer that uses it resume as an uninterrupted
  run's."""
  context = tf.distribute.get_replica_context()
  replica = context.replica_id_in_sync_group if context is not None else 0
  count = tf.identity(calls)
  seed = tf.random.experimental.stateless_fold_in(
      tf.random.experimental.stateless_fold_in(tf.constant([layer_seed, 0], tf.int64), count),
      tf.cast(replica, tf.int64))
  with tf.control_dependencies([count]):
    calls.assign_add(1)
  return seed
