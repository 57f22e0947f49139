"""The base class of Rank4Class's instance encoders H(x) and the checks of the settings they share."""

import numpy as np
import tensorflow as tf

from rank4class_data import validation
from rank4class_engine.loop import resumable_dropout


@tf.keras.utils.register_keras_serializable(package="rank4class")
class FittedValues(tf.keras.initializers.Initializer):
  """Starts a weight at given values, e.g. a fitted classifier's (class centroids, a logistic regression).

  Unlike a Keras `Constant`, its config leaves the values out (a layer's config would otherwise hold every
  value): a layer rebuilt from its config starts at zeros, and a reloaded model takes its weights from the
  checkpoint or SavedModel anyway.

  Args:
    value: The weight's values, or None (zeros of the asked shape).
  """

  def __init__(self, value: np.ndarray | None = None):
    self._value = None if value is None else np.asarray(value, np.float32)

  def __call__(self, shape, dtype=None, **kwargs):
    dtype = dtype or tf.float32
    if self._value is None:
      return tf.zeros(shape, dtype=dtype)
    if tuple(self._value.shape) != tuple(shape):
      raise ValueError(f"FittedValues of shape {list(self._value.shape)} cannot start a weight of shape "
                       f"{list(shape)}.")
    return tf.constant(self._value, dtype=dtype)

  def get_config(self):
    return {}


def check_dropout(dropout: float) -> float:
  """`dropout` as a float in [0, 1); ValueError otherwise."""
  validation.check_range("dropout", dropout, 0.0, 1.0, high_inclusive=False)
  return float(dropout)


def check_output_dim(output_dim: int | None) -> int | None:
  """`output_dim` (the size of an optional projection): None or a positive integer; ValueError otherwise."""
  if output_dim is None:
    return None
  validation.check_range("output_dim", output_dim, 1, integer=True)
  return int(output_dim)


class InstanceEncoder(tf.keras.layers.Layer):
  """Base class of instance encoders: maps a batch of raw instances to embeddings `[batch_size, output_dim]`.

  Subclasses set `input_dtype` (the dtype a serving signature feeds) and report `output_dim` once known.
  """

  input_dtype: tf.DType = tf.float32

  @property
  def output_dim(self) -> int | None:
    """Embedding size `d`, or None while it depends on a not-yet-built backbone."""
    raise NotImplementedError

  def serving_input_spec(self) -> tf.TensorSpec:
    """The `tf.TensorSpec` of one batch of raw inputs, for serving signatures (needs a built encoder)."""
    if not self.built or getattr(self, "_seen_input_shape", None) is None:
      raise ValueError(f"{type(self).__name__} must be built (called once) before its input spec is known.")
    shape = tf.TensorShape(self._seen_input_shape).as_list()
    return tf.TensorSpec([None, *shape[1:]], self.input_dtype, name="inputs")

  def _build_dropout_and_projection(self) -> None:
    """The head of encoders that end in dropout then an optional linear projection (text, image): sets
    `_dropout_layer` (None at rate 0) and `_projection` (None without an `_output_dim`) from `_dropout` and
    `_output_dim`. The attribute names are those of saved checkpoints."""
    self._dropout_layer = resumable_dropout.ResumableDropout(self._dropout) if self._dropout > 0 else None
    self._projection = (
      tf.keras.layers.Dense(self._output_dim, name="projection") if self._output_dim is not None else None
    )

  def _dropout_and_projection(self, x: tf.Tensor, training: bool | None) -> tf.Tensor:
    """Applies the head `_build_dropout_and_projection` built."""
    if self._dropout_layer is not None:
      x = self._dropout_layer(x, training=training)
    if self._projection is not None:
      x = self._projection(x)
    return x
