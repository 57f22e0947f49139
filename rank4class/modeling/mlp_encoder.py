"""The dense-features instance encoder of Rank4Class: a multilayer perceptron, optionally a residual
branch."""

from typing import Any

import tensorflow as tf

from rank4class.modeling import instance_encoder, ranking_math
from rank4class_data import validation
from rank4class_data.validation import check_range
from rank4class_engine.loop import resumable_dropout


@tf.keras.utils.register_keras_serializable(package="rank4class")
class MlpEncoder(instance_encoder.InstanceEncoder):
  """Encodes dense feature vectors with a multilayer perceptron (the "dense features" encoder).

  Inputs with more than one feature axis (e.g. 8x8 digit images) are flattened first.

  With `residual=True` the MLP is a residual branch that starts at zero: `h = x + W_out MLP(x)`, where `W_out`
  maps the last hidden layer back to the input size and is initialised at zeros, so the untrained encoder is
  the identity (zero-shot transfer then starts from the input space, e.g. frozen text embeddings, and training
  moves it only as far as the loss asks). With `l2_normalize=True` the inputs and the output are scaled to
  unit length: with a residual branch and unit-length classes, the untrained model's dot scores are cosine
  similarities.

  Example:
    encoder = MlpEncoder(hidden_units=(64, 32))
    encoder(tf.ones([2, 10])).shape  # [2, 32]
    MlpEncoder(hidden_units=(64,), residual=True)(tf.ones([2, 10])).shape  # [2, 10], equal to the inputs

  Args:
    hidden_units: Widths of the hidden layers; the last is the embedding size `d` (with `residual`, hidden
      widths of the branch only: `d` is the input size).
    activation: Keras activation name applied after every layer.
    dropout: Dropout rate after every hidden layer, in [0, 1).
    residual: Add the MLP, through a zero-initialised linear layer back to the input size, to the input.
    l2_normalize: Scale the input features and the output embedding to unit length.
    untrained_share: With `residual` and `l2_normalize`, in [0, 1]: the output is the unit embedding times
      sqrt(1 - share) beside the unit input times sqrt(share) (`ranking_math.with_untrained_share`, twice the
      input size), so against classes built the same way a dot product mixes the trained cosine with the
      untrained one (a zero-shot model keeps that share of the frozen embeddings' cosine). 0: the embedding
      alone.

  Call inputs: float `[batch_size, num_features]` (or `[batch_size, ...]`, flattened).
  Returns: `[batch_size, hidden_units[-1]]` (with `residual`: `[batch_size, num_features]`; with
    `untrained_share` > 0: `[batch_size, 2 * num_features]`).
  """

  def __init__(
    self,
    hidden_units: tuple[int, ...] = (128, 128),
    activation: str = "relu",
    dropout: float = 0.0,
    residual: bool = False,
    l2_normalize: bool = False,
    untrained_share: float = 0.0,
    **kwargs,
  ):
    super().__init__(**kwargs)
    check_range("untrained_share", untrained_share, 0.0, 1.0)
    if untrained_share > 0 and not (residual and l2_normalize):
      raise ValueError("`untrained_share` mixes the unit-length inputs into the embedding; it needs "
                       "`residual` and `l2_normalize`.")
    self._untrained_share = float(untrained_share)
    self._hidden_units = validation.check_widths("hidden_units", hidden_units, allow_empty=False)
    tf.keras.activations.get(activation)  # Raises ValueError naming an unknown activation.
    self._activation = activation
    self._dropout = instance_encoder.check_dropout(dropout)
    self._residual = bool(residual)
    self._l2_normalize = bool(l2_normalize)
    self._input_dim = None

  @property
  def output_dim(self) -> int | None:
    """`hidden_units[-1]`; with `residual`, the input size (None until built); twice it with
    `untrained_share`."""
    if not self._residual:
      return self._hidden_units[-1]
    if self._input_dim is None:
      return None
    return 2 * self._input_dim if self._untrained_share > 0 else self._input_dim

  def build(self, input_shape):
    self._seen_input_shape = tf.TensorShape(input_shape)
    self._input_dim = self._seen_input_shape[1:].num_elements()
    self._dense_layers = [
      tf.keras.layers.Dense(units, activation=self._activation, name=f"dense_{i}")
      for i, units in enumerate(self._hidden_units)
    ]
    self._dropout_layers = [
      resumable_dropout.ResumableDropout(self._dropout) if self._dropout > 0 else None
      for _ in self._hidden_units
    ]
    self._residual_output = (
      tf.keras.layers.Dense(self._input_dim, kernel_initializer="zeros", name="residual_output")
      if self._residual
      else None
    )
    super().build(input_shape)

  def call(self, inputs, training=None):
    x = tf.cast(inputs, self.compute_dtype)
    if x.shape.rank > 2:
      x = tf.reshape(x, [-1, x.shape[1:].num_elements()])
    if self._l2_normalize:
      x = tf.math.l2_normalize(x, axis=-1)
    features = x
    for dense, dropout in zip(self._dense_layers, self._dropout_layers, strict=True):
      x = dense(x)
      if dropout is not None:
        x = dropout(x, training=training)
    if self._residual_output is not None:
      x = features + self._residual_output(x)
    if self._l2_normalize:
      x = tf.math.l2_normalize(x, axis=-1)
    if self._untrained_share > 0:
      x = ranking_math.with_untrained_share(x, features, self._untrained_share)
    return x

  def get_config(self) -> dict[str, Any]:
    return {
      **super().get_config(),
      "hidden_units": list(self._hidden_units),
      "activation": self._activation,
      "dropout": self._dropout,
      "residual": self._residual,
      "l2_normalize": self._l2_normalize,
      "untrained_share": self._untrained_share,
    }
