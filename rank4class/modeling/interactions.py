"""Instance-class interactions I(h, c_i) of Rank4Class (§4.2): dot, latent cross + MLP, concat + MLP."""

import dataclasses
from typing import Any

import tensorflow as tf

from rank4class.modeling import ranking_math
from rank4class_data.validation import check_choice, check_range, check_widths
from rank4class_engine.loop import resumable_dropout

DOT = "dot"
LATENT_CROSS = "latent_cross"
CONCAT = "concat"
INTERACTION_NAMES = (DOT, LATENT_CROSS, CONCAT)


def _split_shapes(input_shape) -> tuple[tf.TensorShape, tf.TensorShape]:
  if not isinstance(input_shape, (list, tuple)) or len(input_shape) != 2:
    raise ValueError(f"Interactions take (instances, classes); got input shape {input_shape}.")
  instances, classes = (tf.TensorShape(s) for s in input_shape)
  if instances.rank != 2 or classes.rank not in (2, 3) or instances[-1] is None or classes[-1] is None:
    raise ValueError(
      "Interactions take instances [batch_size, dim_h] and classes [num_classes, dim_c] (or per-instance "
      f"lists [batch_size, list_size, dim_c]) with known dims; got {instances} and {classes}."
    )
  return instances, classes


class Interaction(tf.keras.layers.Layer):
  """Base class: `call((instances [batch_size, dim_h], classes [num_classes, dim_c]))` -> `[batch_size,
  num_classes]`, every class scored at once (broadcasting, no loop over classes); with per-instance class
  lists `[batch_size, list_size, dim_c]` (sampled classes) -> `[batch_size, list_size]`, each instance scored
  against its own list only."""


class _ProjectingInteraction(Interaction):
  """Projects the instance embedding to the class embedding size when the two differ (a bias-free Dense)."""

  def _build_projection(self, instances: tf.TensorShape, classes: tf.TensorShape) -> None:
    self._instance_projection = None
    if instances[-1] != classes[-1]:
      self._instance_projection = tf.keras.layers.Dense(
        classes[-1], use_bias=False, name="instance_projection"
      )

  def _project(self, instances: tf.Tensor) -> tf.Tensor:
    return instances if self._instance_projection is None else self._instance_projection(instances)


@tf.keras.utils.register_keras_serializable(package="rank4class")
class DotInteraction(_ProjectingInteraction):
  """Scores each instance against each class by a dot product, `s_i = <h, c_i> / temperature` (§3.2).

  If `dim_h != dim_c`, h is first projected to `dim_c` by a bias-free Dense layer.

  Example:
    DotInteraction(temperature=0.5)((tf.constant([[1., 2.]]), tf.constant([[1., 1.], [1., 0.]])))
    # [[6., 2.]]

  Args:
    temperature: Positive float dividing the scores.
  """

  def __init__(self, temperature: float = 1.0, **kwargs):
    super().__init__(**kwargs)
    check_range("temperature", temperature, 0, low_inclusive=False)
    self._temperature = float(temperature)

  @property
  def temperature(self) -> float:
    return self._temperature

  def build(self, input_shape):
    self._build_projection(*_split_shapes(input_shape))
    super().build(input_shape)

  def call(self, inputs, training=None):
    instances, classes = inputs
    instances = self._project(instances)
    if classes.shape.rank == 3:
      scores = tf.einsum("bd,bkd->bk", instances, classes)
    else:
      scores = tf.matmul(instances, classes, transpose_b=True)
    return scores / self._temperature if self._temperature != 1.0 else scores

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "temperature": self._temperature}


class _MlpInteraction(Interaction):
  """Shared MLP head: hidden Dense layers on `[batch_size, num_classes, width]` and a linear score."""

  def __init__(
    self, hidden_units: tuple[int, ...] = (128, 128), activation: str = "relu", dropout: float = 0.0, **kwargs
  ):
    super().__init__(**kwargs)
    self._hidden_units = check_widths("hidden_units", hidden_units)
    tf.keras.activations.get(activation)  # Raises ValueError naming an unknown activation.
    self._activation = activation
    check_range("dropout", dropout, 0.0, 1.0, high_inclusive=False)
    self._dropout = float(dropout)

  def _build_head(self, hidden_units: tuple[int, ...]) -> None:
    self._hidden_layers = [
      tf.keras.layers.Dense(units, activation=self._activation, name=f"hidden_{i}")
      for i, units in enumerate(hidden_units)
    ]
    self._dropout_layer = resumable_dropout.ResumableDropout(self._dropout) if self._dropout > 0 else None
    self._score_layer = tf.keras.layers.Dense(1, name="score")

  def _head(self, x: tf.Tensor, training: bool | None) -> tf.Tensor:
    """`x`: `[batch_size, num_classes, width]` -> scores `[batch_size, num_classes]`."""
    for layer in self._hidden_layers:
      if self._dropout_layer is not None:
        x = self._dropout_layer(x, training=training)
      x = layer(x)
    if self._dropout_layer is not None:
      x = self._dropout_layer(x, training=training)
    return tf.squeeze(self._score_layer(x), axis=-1)

  def get_config(self) -> dict[str, Any]:
    return {
      **super().get_config(),
      "hidden_units": list(self._hidden_units),
      "activation": self._activation,
      "dropout": self._dropout,
    }


@tf.keras.utils.register_keras_serializable(package="rank4class")
class LatentCrossInteraction(_MlpInteraction, _ProjectingInteraction):
  """Latent cross + MLP (LC+MLP, §4.2): `s_i = MLP(h ⊙ c_i)` for all classes at once.

  `h ⊙ c` is broadcast to `[batch_size, num_classes, dim]`; the MLP (`hidden_units`, e.g. two equal layers of
  64/128/256/512 as in App. C) runs on the last axis and a linear layer gives one score per class. If
  `dim_h != dim_c`, h is first projected to `dim_c` by a bias-free Dense layer.

  Example:
    LatentCrossInteraction(hidden_units=(64, 64))((tf.ones([8, 16]), tf.ones([10, 16]))).shape  # [8, 10]

  Args:
    hidden_units: Widths of the hidden layers.
    activation: Keras activation of the hidden layers.
    dropout: Dropout rate before each Dense layer of the MLP, in [0, 1).
  """

  def build(self, input_shape):
    self._build_projection(*_split_shapes(input_shape))
    self._build_head(self._hidden_units)
    super().build(input_shape)

  def call(self, inputs, training=None):
    instances, classes = inputs
    crossed = ranking_math.latent_cross(self._project(instances), classes)  # [batch, classes, dim]
    return self._head(crossed, training)


@tf.keras.utils.register_keras_serializable(package="rank4class")
class ConcatInteraction(_MlpInteraction):
  """Concatenation + MLP (Concat+MLP, §4.2): `s_i = MLP([h, c_i])` for all classes at once.

  The first layer's kernel `W = [W_h; W_c]` is applied as `h W_h + c_i W_c + b` (`ranking_math.concat_dense`),
  the same numbers as `Dense` on the concatenation but without materializing `[batch_size, num_classes,
  dim_h + dim_c]`. `dim_h` and `dim_c` may differ.

  Example:
    ConcatInteraction(hidden_units=(64, 64))((tf.ones([8, 16]), tf.ones([10, 4]))).shape  # [8, 10]

  Args:
    hidden_units: Widths of the hidden layers (the first is the split concat layer).
    activation: Keras activation of the hidden layers.
    dropout: Dropout rate before each hidden layer after the first and before the score layer, in [0, 1).
  """

  def build(self, input_shape):
    instances, classes = _split_shapes(input_shape)
    width = self._hidden_units[0]
    self.concat_kernel = self.add_weight(
      "concat_kernel", shape=[instances[-1] + classes[-1], width], initializer="glorot_uniform"
    )
    self.concat_bias = self.add_weight("concat_bias", shape=[width], initializer="zeros")
    self._build_head(self._hidden_units[1:])
    super().build(input_shape)

  def call(self, inputs, training=None):
    instances, classes = inputs
    first = ranking_math.concat_dense(instances, classes, self.concat_kernel, self.concat_bias)
    first = tf.keras.activations.get(self._activation)(first)  # [batch, classes, hidden_units[0]]
    return self._head(first, training)


def get(name: str, **kwargs) -> Interaction:
  """Builds an interaction by name.

  Args:
    name: One of `INTERACTION_NAMES`.
    **kwargs: Constructor arguments (`temperature` for "dot"; `hidden_units`, `activation`, `dropout` for the
      MLP interactions).

  Raises:
    ValueError: If `name` is unknown (the message lists the allowed names) or an argument is invalid.
  """
  classes = {DOT: DotInteraction, LATENT_CROSS: LatentCrossInteraction, CONCAT: ConcatInteraction}
  check_choice("interaction", name, classes)
  return classes[name](**kwargs)


@dataclasses.dataclass
class InteractionConfig:
  """Which interaction to build, and its settings.

  Attributes:
    type: One of `INTERACTION_NAMES`.
    hidden_units: MLP widths for "latent_cross"/"concat" (the paper: two equal layers of 64/128/256/512).
    activation: MLP activation.
    dropout: MLP dropout rate.
    temperature: Score divisor for "dot".
  """

  type: str = DOT
  hidden_units: tuple[int, ...] = (128, 128)
  activation: str = "relu"
  dropout: float = 0.0
  temperature: float = 1.0

  def __post_init__(self):
    check_choice("interaction", self.type, INTERACTION_NAMES)


def make_interaction(config: InteractionConfig) -> Interaction:
  """Builds the interaction that `config` describes.

  Raises:
    ValueError: If `config.type` is unknown or a setting is invalid.
  """
  if config.type == DOT:
    return get(DOT, temperature=config.temperature)
  return get(
    config.type, hidden_units=tuple(config.hidden_units), activation=config.activation, dropout=config.dropout
  )
