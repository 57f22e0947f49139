"""The base class of Rank4Class's instance encoders H(x) and the checks of the settings they share."""

from typing import Any

import tensorflow as tf

from rank4class_data import validation


def check_layer_widths(name: str, units: Any, allow_empty: bool) -> tuple[int, ...]:
  """`units` as a tuple of positive integer layer widths; ValueError naming `name` otherwise (or when empty, unless
  `allow_empty`)."""
  units = tuple(units)
  if not allow_empty and not units:
    raise ValueError(f"`{name}` must list at least one layer width, got {units}.")
  for unit in units:
    if not isinstance(unit, int) or isinstance(unit, bool) or unit < 1:
      raise ValueError(f"`{name}` must be positive integers, got {units}.")
  return units


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
