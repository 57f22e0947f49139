"""The raw-text instance encoder of Rank4Class: a TF Hub BERT-style encoder (frozen or fine-tuned), dropout
and a projection."""

import dataclasses
from typing import Any

import tensorflow as tf

from rank4class.modeling import instance_encoder
from rank4class_encoders import text_encoder as text_encoder_lib


@tf.keras.utils.register_keras_serializable(package="rank4class")
class TextInstanceEncoder(instance_encoder.InstanceEncoder):
  """Encodes raw strings with a TF Hub BERT-style encoder (TF Text preprocessing in the graph).

  Wraps `rank4class_encoders.text_encoder.TextEncoder` (pooled "cls" or "mean"-pooled output, trainable or
  frozen) and adds optional dropout and a linear projection.

  Example:
    text = TextEncoderConfig(preprocess_handle=handles.preprocess, encoder_handle=handles.encoder)
    encoder = TextInstanceEncoder(text)
    encoder(tf.constant(["a cat", "a dog"])).shape  # [2, hidden_size]

  Args:
    text: The text encoder's settings (`rank4class_encoders.text_encoder.TextEncoderConfig`, or its fields as
      a dict): handles, fine-tuned (`trainable`) or frozen, pooling, token budget, unit length (before dropout
      and projection), what a frozen encoder computes in (`precision`).
    output_dim: Optional size of a linear projection on top; None keeps the encoder's hidden size.
    dropout: Dropout rate on the text embedding, in [0, 1).

  Call inputs: string `[batch_size]`.
  Returns: `[batch_size, output_dim or hidden_size]`.
  """

  input_dtype = tf.string

  def __init__(
    self,
    text: text_encoder_lib.TextEncoderConfig | dict[str, Any],
    output_dim: int | None = None,
    dropout: float = 0.0,
    **kwargs,
  ):
    super().__init__(**kwargs)
    self._text_config = text_encoder_lib.TextEncoderConfig.of(text)
    self._output_dim = instance_encoder.check_output_dim(output_dim)
    self._dropout = instance_encoder.check_dropout(dropout)
    self._text_encoder = text_encoder_lib.make_text_encoder(self._text_config)

  @classmethod
  def from_config(cls, config: dict[str, Any]) -> "TextInstanceEncoder":
    """Also reads the configs saved up to 0.8, whose text-encoder settings are flat keys."""
    return cls(**text_encoder_lib.nest_flat_layer_config(config))

  @property
  def output_dim(self) -> int:
    return self._output_dim if self._output_dim is not None else self._text_encoder.output_dim

  def serving_input_spec(self) -> tf.TensorSpec:
    return tf.TensorSpec([None], tf.string, name="inputs")

  def build(self, input_shape):
    self._seen_input_shape = tf.TensorShape(input_shape)
    self._build_dropout_and_projection()
    super().build(input_shape)

  def call(self, inputs, training=None):
    x = self._text_encoder(inputs, training=training)
    return self._dropout_and_projection(x, training)

  def get_config(self) -> dict[str, Any]:
    return {
      **super().get_config(),
      "text": dataclasses.asdict(self._text_config),
      "output_dim": self._output_dim,
      "dropout": self._dropout,
    }
