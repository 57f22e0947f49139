"""Instance encoders H(x) of Rank4Class: dense features (MLP), images (CNN backbones) and text (TF Hub)."""

import dataclasses
from typing import Any

import tensorflow as tf

from rank4class_encoders import text_encoder as text_encoder_lib
from rank4class_engine import resumable_dropout

MLP = "mlp"
IMAGE = "image"
TEXT = "text"
ENCODER_NAMES = (MLP, IMAGE, TEXT)

SMALL_CNN = "small_cnn"
# Backbones from `tf.keras.applications` by name; always built without downloads unless weights are given.
APPLICATION_BACKBONES = {
  "resnet50": tf.keras.applications.ResNet50,
  "vgg16": tf.keras.applications.VGG16,
  "mobilenet_v2": tf.keras.applications.MobileNetV2,
  "efficientnet_b0": tf.keras.applications.EfficientNetB0,
  "densenet121": tf.keras.applications.DenseNet121,
}
BACKBONE_NAMES = (SMALL_CNN, *APPLICATION_BACKBONES)
POOLINGS = ("avg", "max")


def _check_positive_units(name: str, units: Any, allow_empty: bool) -> tuple[int, ...]:
  units = tuple(units)
  if not allow_empty and not units:
    raise ValueError(f"`{name}` must list at least one layer width, got {units}.")
  for unit in units:
    if not isinstance(unit, int) or isinstance(unit, bool) or unit < 1:
      raise ValueError(f"`{name}` must be positive integers, got {units}.")
  return units


def _check_dropout(dropout: float) -> float:
  if not 0.0 <= dropout < 1.0:
    raise ValueError(f"`dropout` must be in [0, 1), got {dropout}.")
  return float(dropout)


def _check_output_dim(output_dim: int | None) -> int | None:
  if output_dim is not None and (not isinstance(output_dim, int) or output_dim < 1):
    raise ValueError(f"`output_dim` must be a positive integer or None, got {output_dim}.")
  return output_dim


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


@tf.keras.utils.register_keras_serializable(package="rank4class")
class MlpEncoder(InstanceEncoder):
  """Encodes dense feature vectors with a multilayer perceptron (the "dense features" encoder).

  Inputs with more than one feature axis (e.g. 8x8 digit images) are flattened first.

  With `residual=True` the MLP is a residual branch that starts at zero: `h = x + W_out MLP(x)`, where `W_out`
  maps the last hidden layer back to the input size and is initialised at zeros, so the untrained encoder is the
  identity (zero-shot transfer then starts from the input space, e.g. frozen text embeddings, and training moves
  it only as far as the loss asks). With `l2_normalize=True` the inputs and the output are scaled to unit length:
  with a residual branch and unit-length classes, the untrained model's dot scores are cosine similarities.

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

  Call inputs: float `[batch_size, num_features]` (or `[batch_size, ...]`, flattened).
  Returns: `[batch_size, hidden_units[-1]]` (with `residual`: `[batch_size, num_features]`).
  """

  def __init__(
    self,
    hidden_units: tuple[int, ...] = (128, 128),
    activation: str = "relu",
    dropout: float = 0.0,
    residual: bool = False,
    l2_normalize: bool = False,
    **kwargs,
  ):
    super().__init__(**kwargs)
    self._hidden_units = _check_positive_units("hidden_units", hidden_units, allow_empty=False)
    tf.keras.activations.get(activation)  # Raises ValueError naming an unknown activation.
    self._activation = activation
    self._dropout = _check_dropout(dropout)
    self._residual = bool(residual)
    self._l2_normalize = bool(l2_normalize)
    self._input_dim = None

  @property
  def output_dim(self) -> int | None:
    """`hidden_units[-1]`; with `residual`, the input size (None until built)."""
    return self._input_dim if self._residual else self._hidden_units[-1]

  def build(self, input_shape):
    self._seen_input_shape = tf.TensorShape(input_shape)
    self._input_dim = self._seen_input_shape[1:].num_elements()
    self._dense_layers = [
      tf.keras.layers.Dense(units, activation=self._activation, name=f"dense_{i}")
      for i, units in enumerate(self._hidden_units)
    ]
    self._dropout_layers = [
      resumable_dropout.ResumableDropout(self._dropout) if self._dropout > 0 else None for _ in self._hidden_units
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
    return x

  def get_config(self) -> dict[str, Any]:
    return {
      **super().get_config(),
      "hidden_units": list(self._hidden_units),
      "activation": self._activation,
      "dropout": self._dropout,
      "residual": self._residual,
      "l2_normalize": self._l2_normalize,
    }


@tf.keras.utils.register_keras_serializable(package="rank4class")
class ImageEncoder(InstanceEncoder):
  """Encodes images with a CNN backbone followed by global pooling (ResNet50/VGG16 in the paper, App. B.2).

  `backbone` is "small_cnn" (a few conv + max-pool blocks, fast on CPU), the name of a
  `tf.keras.applications` model in `APPLICATION_BACKBONES` (built with `include_top=False` and
  `weights=backbone_weights`, None by default so nothing is downloaded), or any `tf.keras.Model` mapping
  images to a feature map `[batch_size, h, w, channels]` or to vectors `[batch_size, channels]`.
  Pixels are mapped by `x * rescale + offset` first; grayscale `[batch_size, height, width]` gets a channel
  axis.

  Example:
    encoder = ImageEncoder(backbone="small_cnn", filters=(16, 32), rescale=1 / 16)
    encoder(tf.zeros([4, 8, 8, 1], tf.uint8)).shape  # [4, 32]

  Args:
    backbone: "small_cnn", a name in `APPLICATION_BACKBONES`, or a `tf.keras.Model`.
    image_shape: `(height, width, channels)`; required by `tf.keras.applications` backbones.
    filters: Conv widths of the "small_cnn" blocks (ignored otherwise).
    pooling: "avg" or "max" global pooling of the feature map.
    rescale: Multiplier applied to the pixels.
    offset: Added to the pixels after `rescale`.
    output_dim: Optional size of a linear projection on top; None keeps the backbone's channels.
    dropout: Dropout rate before the projection, in [0, 1).
    backbone_weights: `weights` argument of a `tf.keras.applications` backbone (None: random init).

  Call inputs: numeric `[batch_size, height, width, channels]` or `[batch_size, height, width]`.
  Returns: `[batch_size, output_dim or channels]`.
  """

  def __init__(
    self,
    backbone: str | tf.keras.Model = SMALL_CNN,
    image_shape: tuple[int, int, int] | None = None,
    filters: tuple[int, ...] = (32, 64),
    pooling: str = "avg",
    rescale: float = 1.0 / 255.0,
    offset: float = 0.0,
    output_dim: int | None = None,
    dropout: float = 0.0,
    backbone_weights: str | None = None,
    **kwargs,
  ):
    super().__init__(**kwargs)
    if isinstance(backbone, dict):  # A serialized custom backbone, from get_config.
      backbone = tf.keras.layers.deserialize(backbone)
    if isinstance(backbone, str):
      if backbone not in BACKBONE_NAMES:
        raise ValueError(
          f"Unknown image backbone {backbone!r}; allowed: {BACKBONE_NAMES} or a tf.keras.Model."
        )
      if backbone in APPLICATION_BACKBONES and image_shape is None:
        raise ValueError(f"Backbone {backbone!r} needs `image_shape` (height, width, channels).")
    elif not isinstance(backbone, tf.keras.Model):
      raise ValueError(
        f"`backbone` must be a name in {BACKBONE_NAMES} or a tf.keras.Model, got {backbone!r}."
      )
    if image_shape is not None:
      image_shape = tuple(image_shape)
      if len(image_shape) != 3 or any(not isinstance(d, int) or d < 1 for d in image_shape):
        raise ValueError(f"`image_shape` must be (height, width, channels) positive ints, got {image_shape}.")
    if pooling not in POOLINGS:
      raise ValueError(f"`pooling` must be one of {POOLINGS}, got {pooling!r}.")
    self._backbone_arg = backbone
    self._image_shape = image_shape
    self._filters = _check_positive_units("filters", filters, allow_empty=False)
    self._pooling = pooling
    self._rescale = float(rescale)
    self._offset = float(offset)
    self._output_dim = _check_output_dim(output_dim)
    self._dropout = _check_dropout(dropout)
    self._backbone_weights = backbone_weights
    self._feature_dim = None

  @property
  def output_dim(self) -> int | None:
    return self._output_dim if self._output_dim is not None else self._feature_dim

  def _make_backbone(self) -> tf.keras.Model | list[tf.keras.layers.Layer]:
    if isinstance(self._backbone_arg, tf.keras.Model):
      return self._backbone_arg
    if self._backbone_arg == SMALL_CNN:
      layers = []
      for i, width in enumerate(self._filters):
        layers.append(tf.keras.layers.Conv2D(width, 3, padding="same", activation="relu", name=f"conv_{i}"))
        layers.append(tf.keras.layers.MaxPool2D(2, padding="same", name=f"pool_{i}"))
      self._feature_dim = self._filters[-1]
      return layers
    application = APPLICATION_BACKBONES[self._backbone_arg]
    return application(include_top=False, weights=self._backbone_weights, input_shape=self._image_shape)

  def build(self, input_shape):
    input_shape = tf.TensorShape(input_shape)
    self._seen_input_shape = input_shape
    if input_shape.rank not in (3, 4):
      raise ValueError(f"ImageEncoder expects [batch, height, width(, channels)] images, got {input_shape}.")
    self._backbone = self._make_backbone()
    self._dropout_layer = resumable_dropout.ResumableDropout(self._dropout) if self._dropout > 0 else None
    self._projection = (
      tf.keras.layers.Dense(self._output_dim, name="projection") if self._output_dim is not None else None
    )
    super().build(input_shape)

  def _features(self, images: tf.Tensor, training: bool | None) -> tf.Tensor:
    if isinstance(self._backbone, list):
      x = images
      for layer in self._backbone:
        x = layer(x)
    else:
      x = self._backbone(images, training=training)
    if x.shape.rank == 4:
      x = tf.reduce_mean(x, axis=[1, 2]) if self._pooling == "avg" else tf.reduce_max(x, axis=[1, 2])
    self._feature_dim = x.shape[-1]
    return x

  def call(self, inputs, training=None):
    images = tf.cast(inputs, self.compute_dtype) * self._rescale + self._offset
    if images.shape.rank == 3:
      images = images[..., tf.newaxis]
    x = self._features(images, training)
    if self._dropout_layer is not None:
      x = self._dropout_layer(x, training=training)
    if self._projection is not None:
      x = self._projection(x)
    return x

  def get_config(self) -> dict[str, Any]:
    backbone = self._backbone_arg
    if isinstance(backbone, tf.keras.Model):
      backbone = tf.keras.layers.serialize(backbone)
    return {
      **super().get_config(),
      "backbone": backbone,
      "image_shape": list(self._image_shape) if self._image_shape else None,
      "filters": list(self._filters),
      "pooling": self._pooling,
      "rescale": self._rescale,
      "offset": self._offset,
      "output_dim": self._output_dim,
      "dropout": self._dropout,
      "backbone_weights": self._backbone_weights,
    }


@tf.keras.utils.register_keras_serializable(package="rank4class")
class TextInstanceEncoder(InstanceEncoder):
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
    output_dim: int | None = None,
    dropout: float = 0.0,
    **kwargs,
  ):
    super().__init__(**kwargs)
    self._text_config = text_encoder_lib.TextEncoderConfig(
      preprocess_handle=preprocess_handle,
      encoder_handle=encoder_handle,
      trainable=trainable_encoder,
      pooling=pooling,
      max_seq_length=max_seq_length,
      l2_normalize=l2_normalize,
    )
    self._output_dim = _check_output_dim(output_dim)
    self._dropout = _check_dropout(dropout)
    self._text_encoder = text_encoder_lib.make_text_encoder(self._text_config)

  @property
  def output_dim(self) -> int:
    return self._output_dim if self._output_dim is not None else self._text_encoder.output_dim

  def serving_input_spec(self) -> tf.TensorSpec:
    return tf.TensorSpec([None], tf.string, name="inputs")

  def build(self, input_shape):
    self._seen_input_shape = tf.TensorShape(input_shape)
    self._dropout_layer = resumable_dropout.ResumableDropout(self._dropout) if self._dropout > 0 else None
    self._projection = (
      tf.keras.layers.Dense(self._output_dim, name="projection") if self._output_dim is not None else None
    )
    super().build(input_shape)

  def call(self, inputs, training=None):
    x = self._text_encoder(inputs, training=training)
    if self._dropout_layer is not None:
      x = self._dropout_layer(x, training=training)
    if self._projection is not None:
      x = self._projection(x)
    return x

  def get_config(self) -> dict[str, Any]:
    return {
      **super().get_config(),
      "preprocess_handle": self._text_config.preprocess_handle,
      "encoder_handle": self._text_config.encoder_handle,
      "trainable_encoder": self._text_config.trainable,
      "pooling": self._text_config.pooling,
      "max_seq_length": self._text_config.max_seq_length,
      "l2_normalize": self._text_config.l2_normalize,
      "output_dim": self._output_dim,
      "dropout": self._dropout,
    }


_ENCODER_CLASSES = {MLP: MlpEncoder, IMAGE: ImageEncoder, TEXT: TextInstanceEncoder}


def get(name: str, **kwargs) -> InstanceEncoder:
  """Builds an instance encoder by name.

  Args:
    name: One of `ENCODER_NAMES`.
    **kwargs: Constructor arguments of `MlpEncoder`, `ImageEncoder` or `TextInstanceEncoder`.

  Returns:
    The encoder layer.

  Raises:
    ValueError: If `name` is unknown (the message lists the allowed names) or an argument is invalid.
  """
  if name not in _ENCODER_CLASSES:
    raise ValueError(f"Unknown instance encoder {name!r}; allowed: {ENCODER_NAMES}.")
  return _ENCODER_CLASSES[name](**kwargs)


@dataclasses.dataclass
class MlpEncoderConfig:
  """Settings of `MlpEncoder`.

  Attributes:
    hidden_units: Widths of the hidden layers; the last is the embedding size.
    activation: Keras activation name.
    dropout: Dropout rate after each hidden layer.
    residual: The MLP is a zero-initialised residual branch added to the input (the encoder starts as the
      identity; the embedding size is the input size).
    l2_normalize: Scale the inputs and the embedding to unit length.
  """

  hidden_units: tuple[int, ...] = (128, 128)
  activation: str = "relu"
  dropout: float = 0.0
  residual: bool = False
  l2_normalize: bool = False


@dataclasses.dataclass
class ImageEncoderConfig:
  """Settings of `ImageEncoder` with a named backbone.

  Attributes:
    backbone: "small_cnn" or a name in `APPLICATION_BACKBONES`.
    image_shape: (height, width, channels); required by application backbones.
    filters: Conv widths of "small_cnn".
    pooling: "avg" or "max".
    rescale: Pixel multiplier.
    offset: Pixel offset after rescaling.
    output_dim: Optional projection size.
    dropout: Dropout before the projection.
    backbone_weights: Weights of an application backbone (None: random init, no download).
  """

  backbone: str = SMALL_CNN
  image_shape: tuple[int, int, int] | None = None
  filters: tuple[int, ...] = (32, 64)
  pooling: str = "avg"
  rescale: float = 1.0 / 255.0
  offset: float = 0.0
  output_dim: int | None = None
  dropout: float = 0.0
  backbone_weights: str | None = None


@dataclasses.dataclass
class TextInstanceEncoderConfig:
  """Settings of `TextInstanceEncoder`.

  Attributes:
    text: Handles and pooling of the TF Hub text encoder (`trainable` there means fine-tuning).
    output_dim: Optional projection size.
    dropout: Dropout on the text embedding.
  """

  text: text_encoder_lib.TextEncoderConfig
  output_dim: int | None = None
  dropout: float = 0.0


@dataclasses.dataclass
class InstanceEncoderConfig:
  """Which instance encoder to build, and its settings (only the chosen kind's settings are used).

  Attributes:
    type: One of `ENCODER_NAMES`.
    mlp: Settings used when `type == "mlp"`.
    image: Settings used when `type == "image"`.
    text: Settings used when `type == "text"`; required then.
  """

  type: str = MLP
  mlp: MlpEncoderConfig = dataclasses.field(default_factory=MlpEncoderConfig)
  image: ImageEncoderConfig = dataclasses.field(default_factory=ImageEncoderConfig)
  text: TextInstanceEncoderConfig | None = None


def make_instance_encoder(config: InstanceEncoderConfig) -> InstanceEncoder:
  """Builds the instance encoder that `config` describes.

  Raises:
    ValueError: If `config.type` is unknown or `config.text` is missing for a text encoder.
  """
  if config.type == MLP:
    return get(MLP, **dataclasses.asdict(config.mlp))
  if config.type == IMAGE:
    return get(IMAGE, **dataclasses.asdict(config.image))
  if config.type == TEXT:
    if config.text is None:
      raise ValueError("InstanceEncoderConfig.type is 'text' but `text` settings are missing.")
    text = config.text.text
    return get(
      TEXT,
      preprocess_handle=text.preprocess_handle,
      encoder_handle=text.encoder_handle,
      trainable_encoder=text.trainable,
      pooling=text.pooling,
      max_seq_length=text.max_seq_length,
      l2_normalize=text.l2_normalize,
      output_dim=config.text.output_dim,
      dropout=config.text.dropout,
    )
  raise ValueError(f"Unknown instance encoder {config.type!r}; allowed: {ENCODER_NAMES}.")
