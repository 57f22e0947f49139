"""The raw-text instance encoder of Rank4Class: a TF Hub BERT-style encoder (frozen or fine-tuned), dropout and a
projection."""

from typing import Any

import tensorflow as tf

from rank4class.modeling import instance_encoder
from rank4class_encoders import text_encoder as text_encoder_lib


@tf.keras.utils.register_keras_serializable(package="rank4class")
class TextInstanceEncoder(instance_encoder.InstanceEncoder):
  """Encodes raw strings with a TF Hub BERT-style encoder (TF Text preprocessing in the graph).

  Wraps `rank4class_encoders.text_encoder.TextEncoder` (pooled "cls" or "mean"-pooled output, trainable or frozen)
  and adds optional dropout and a linear projection.

  Example:
    encoder = TextInstanceEncoder(preprocess_handle=handles.preprocess, encoder_handle=handles.encoder)
    encoder(tf.constant(["a cat", "a dog"])).shape  # [2, hidden_size]

  Args:
    preprocess_handle: TF Hub handle or local SavedModel dir of the BERT preprocessing model.
    encoder_handle: TF Hub handle or local SavedModel dir of the BERT encoder.
    trainable_encoder: Fine-tune the encoder (True) or keep it frozen (False).
    pooling: "cls" (pooled_output) or "mean" (sequence_output averaged over the input mask).
    max_seq_length: Token budget per text.
    l2_normalize: Scale the text embedding to unit length (before dropout and projection).
    precision: What the frozen text encoder computes in (`rank4class_encoders.text_encoder.PRECISIONS`).
    output_dim: Optional size of a linear projection on top; None keeps the encoder's hidden size.
    dropout: Dropout rate on the text embedding, in [0, 1).

  Call inputs: string `[batch_size]`.
  Returns: `[batch_size, output_dim or hidden_size]`.
  """

  input_dtype = tf.string

  def __init__(
    self,
    preprocess_handle: str,
    encoder_handle: str,
    trainable_encoder: bool = False,
    pooling: str = "mean",
    max_seq_length: int = 128,
    l2_normalize: bool = False,
    precision: str = text_encoder_lib.FLOAT32,
    output_dim: int | None = None,
    dropout: float = 0.0,
    **kwargs,
  ):
    super().__init__(**kwargs)
    self._text_config = text_encoder_lib.TextEncoderConfig(
      preprocess_handle=preprocess_handle, encoder_handle=encoder_handle, trainable=trainable_encoder,
      pooling=pooling, max_seq_length=max_seq_length, l2_normalize=l2_normalize, precision=precision)
    self._output_dim = instance_encoder.check_output_dim(output_dim)
    self._dropout = instance_encoder.check_dropout(dropout)
    self._text_encoder = text_encoder_lib.make_text_encoder(self._text_config)

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
      **self._text_config.layer_arguments(),
      "output_dim": self._output_dim,
      "dropout": self._dropout,
    }
