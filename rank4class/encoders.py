"""Instance encoders H(x) of Rank4Class: dense features (MLP), images (CNN backbones), text (TF Hub), bags of
words (TF-IDF), and TF-IDF beside frozen text embeddings (hybrid)."""

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class import image_augmentation
from rank4class_encoders import text_encoder as text_encoder_lib
from rank4class_engine import resumable_dropout

MLP = "mlp"
IMAGE = "image"
TEXT = "text"
TFIDF = "tfidf"
HYBRID = "hybrid"
ENCODER_NAMES = (MLP, IMAGE, TEXT, TFIDF, HYBRID)
# How `HybridTextEncoder` joins its two branches.
CONCAT = "concat"
SUM = "sum"
HYBRID_COMBINES = (CONCAT, SUM)
# The keys of `HybridTextEncoder`'s training input: the raw texts and their frozen embeddings.
TEXT_KEY = "text"
EMBEDDING_KEY = "embedding"

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
    shift: Training images are moved by up to this many pixels on each axis (`image_augmentation.RandomShift`,
      the identity at inference); 0: none.
    flip: Training images are also mirrored left-right with probability 1/2 (not for digits or text).

  Call inputs: numeric `[batch_size, height, width, channels]` or `[batch_size, height, width]`.
  Returns: `[batch_size, output_dim or channels]`.
  """

  def __init__(
    self,
    backbone: str | tf.keras.Model = SMALL_CNN,
    image_shape: tuple[int, int, int] | None = None,
    filters: tuple[int, ...] = (32, 64, 128),
    pooling: str = "avg",
    rescale: float = 1.0 / 255.0,
    offset: float = 0.0,
    output_dim: int | None = None,
    dropout: float = 0.0,
    backbone_weights: str | None = None,
    shift: int = 0,
    flip: bool = False,
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
    self._augmentation = (image_augmentation.RandomShift(shift, flip=flip, name="augmentation")
                          if shift or flip else None)
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
    if self._augmentation is not None:
      images = self._augmentation(images, training=training)
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
      "shift": self._augmentation.max_shift if self._augmentation is not None else 0,
      "flip": self._augmentation.flip if self._augmentation is not None else False,
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


# TextVectorization's out-of-vocabulary token: column 0 of a TF-IDF vector counts the n-grams outside the vocabulary.
OOV_TOKEN = "[UNK]"
# TF-IDF vocabulary size: on 20 Newsgroups (seed 0, words and pairs) 50,000 n-grams gave 16.5 % top-1 error where
# 20,000 gave 18.4 %; on Reuters R8 20,000 was ~0.3 points better (2 seeds).
DEFAULT_TFIDF_MAX_TOKENS = 50000


def _text_vectorization(max_tokens: int | None, ngrams: int, vocabulary: np.ndarray | None = None,
                        idf_weights: np.ndarray | None = None) -> tf.keras.layers.TextVectorization:
  """TextVectorization in "tf_idf" mode with sparse outputs: lowercased, punctuation stripped, split on whitespace,
  n-grams of 1 to `ngrams` words."""
  return tf.keras.layers.TextVectorization(
      max_tokens=max_tokens, ngrams=ngrams if ngrams > 1 else None, output_mode="tf_idf", sparse=True,
      vocabulary=None if vocabulary is None else list(vocabulary),
      idf_weights=None if idf_weights is None else idf_weights)


def tfidf_vocabulary(texts: Sequence[str] | np.ndarray, max_tokens: int = DEFAULT_TFIDF_MAX_TOKENS,
                     ngrams: int = 2) -> tuple[list[str], list[float]]:
  """The vocabulary and idf weights that `TextVectorization.adapt` learns from `texts` (pass the training texts
  only).

  The vocabulary is `OOV_TOKEN`, then the `max_tokens - 1` most frequent n-grams (of 1 to `ngrams` words, after
  lowercasing and stripping punctuation), ties broken by the n-gram (TextVectorization sorts so): a function of
  the multiset of texts alone, so a resumed run rebuilds the same one. idf(t) = log(1 + N / (1 + df(t))) over the
  N texts, df(t) the texts holding t; the OOV token's idf is the mean of the others'.

  Raises:
    ValueError: for no texts, or settings `TfidfEncoder` rejects.
  """
  _check_tfidf_settings(max_tokens, ngrams)
  texts = [str(text) for text in np.asarray(texts, dtype=object).reshape([-1])]
  if not texts:
    raise ValueError("A TF-IDF vocabulary needs at least one training text.")
  layer = _text_vectorization(max_tokens, ngrams)
  layer.adapt(tf.data.Dataset.from_tensor_slices(texts).batch(1024))
  vocabulary = [str(token) for token in layer.get_vocabulary()]
  # TextVectorization has no public reader of its adapted idf weights (its config holds only given ones).
  idf_weights = layer._lookup_layer.idf_weights.numpy()
  return vocabulary, [float(w) for w in idf_weights[:len(vocabulary)]]


def _check_tfidf_settings(max_tokens: int, ngrams: int) -> None:
  if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 2:
    raise ValueError(f"`max_tokens` must be an integer >= 2 (the OOV token and one n-gram), got {max_tokens}.")
  if not isinstance(ngrams, int) or isinstance(ngrams, bool) or ngrams < 1:
    raise ValueError(f"`ngrams` must be a positive integer, got {ngrams}.")


@tf.keras.utils.register_keras_serializable(package="rank4class")
class TfidfEncoder(InstanceEncoder):
  """Encodes raw strings as TF-IDF bags of n-grams, in the graph, projected to `output_dim` (or through an MLP).

  A `tf.keras.layers.TextVectorization(output_mode="tf_idf", sparse=True)` lowercases, strips punctuation, splits
  on whitespace and weighs the n-grams of a vocabulary learned on the training texts (`tfidf_vocabulary`, or
  `adapt`): x_t = count(t) * idf(t), or with `sublinear_tf` (1 + log count(t)) * idf(t) (as scikit-learn's
  `sublinear_tf`: a word repeated in a long text counts less), n-grams outside the vocabulary counted in column 0.
  The vector is scaled to unit length (`l2_normalize`, as scikit-learn's `TfidfVectorizer` does), dropped out in training, then mapped by
  `hidden_units` ReLU layers (none by default: a linear model on TF-IDF) and a linear layer to `output_dim`. The
  sparse vector is never densified: the first layer gathers the kernel rows of the n-grams present.

  The vocabulary and idf weights are arguments and part of the config, so the encoder saves and reloads with its
  model (`tf.keras.models.load_model` after `import rank4class`, or the SavedModel's signature alone).

  Example:
    encoder = TfidfEncoder(output_dim=16)
    encoder.adapt(["a good film", "a bad plot"])
    encoder(tf.constant(["good plot"])).shape  # [1, 16]

  Args:
    output_dim: Size of the embedding.
    max_tokens: Vocabulary size `adapt` keeps, the OOV token included.
    ngrams: N-grams of 1 to `ngrams` words (2: words and word pairs).
    sublinear_tf: Weigh an n-gram by 1 + log of its count in the text instead of the count.
    l2_normalize: Scale each TF-IDF vector to unit length before the layers.
    dropout: Dropout rate on the TF-IDF entries of a text (training), in [0, 1).
    hidden_units: Widths of ReLU layers before the output layer; empty for a linear projection.
    vocabulary: The n-grams in column order, `OOV_TOKEN` first (prepended when missing); None until `adapt`.
    idf_weights: Their idf weights, same length (the OOV token's, when prepended, is the mean).

  Call inputs: string `[batch_size]` (or `[batch_size, 1]`).
  Returns: `[batch_size, output_dim]`.

  Raises:
    ValueError: for bad settings, a vocabulary without idf weights (or of another length), or a call before the
      encoder has a vocabulary.
  """

  input_dtype = tf.string

  def __init__(
    self,
    output_dim: int = 128,
    max_tokens: int = DEFAULT_TFIDF_MAX_TOKENS,
    ngrams: int = 2,
    sublinear_tf: bool = False,
    l2_normalize: bool = True,
    dropout: float = 0.0,
    hidden_units: tuple[int, ...] = (),
    vocabulary: Sequence[str] | None = None,
    idf_weights: Sequence[float] | None = None,
    **kwargs,
  ):
    super().__init__(**kwargs)
    if _check_output_dim(output_dim) is None:
      raise ValueError("`output_dim` must be a positive integer, got None.")
    _check_tfidf_settings(max_tokens, ngrams)
    self._output_dim = output_dim
    self._max_tokens = max_tokens
    self._ngrams = ngrams
    self._sublinear_tf = bool(sublinear_tf)
    self._l2_normalize = bool(l2_normalize)
    self._dropout = _check_dropout(dropout)
    self._hidden_units = _check_positive_units("hidden_units", hidden_units, allow_empty=True)
    if (vocabulary is None) != (idf_weights is None):
      raise ValueError("Give both `vocabulary` and `idf_weights` (TextVectorization's tf_idf mode needs both), or "
                       "neither and `adapt` the encoder.")
    self._vocabulary = self._idf_weights = self._vectorizer = None
    if vocabulary is not None:
      self._set_vocabulary(vocabulary, idf_weights)

  def _set_vocabulary(self, vocabulary: Sequence[str], idf_weights: Sequence[float]) -> None:
    # NumPy arrays, not lists: Keras would track a list attribute and walk its ~10^4 entries whenever it
    # flattens the layers.
    vocabulary = np.asarray([str(token) for token in vocabulary], dtype=object)
    idf_weights = np.asarray(idf_weights, dtype=np.float64).reshape([-1])
    if len(vocabulary) != len(idf_weights) or not len(vocabulary):
      raise ValueError(f"`vocabulary` ({len(vocabulary)} n-grams) and `idf_weights` ({len(idf_weights)}) must be "
                       "non-empty and of the same length.")
    if vocabulary[0] != OOV_TOKEN:  # As TextVectorization pads it: the OOV token weighs the mean idf.
      vocabulary = np.concatenate([[OOV_TOKEN], vocabulary])
      idf_weights = np.concatenate([[np.mean(idf_weights)], idf_weights])
    self._vocabulary = vocabulary
    self._idf_weights = idf_weights.astype(np.float32)
    self._vectorizer = _text_vectorization(None, self._ngrams, self._vocabulary, self._idf_weights)

  def adapt(self, texts: Sequence[str] | np.ndarray) -> None:
    """Learns the vocabulary and idf weights from `texts` (`tfidf_vocabulary`); call it with training texts only.

    Raises:
      ValueError: once the encoder is built (its first layer's rows are the vocabulary's).
    """
    if self.built:
      raise ValueError("TfidfEncoder is built: its first layer has one row per n-gram of its vocabulary; adapt a "
                       "new encoder instead.")
    self._set_vocabulary(*tfidf_vocabulary(texts, self._max_tokens, self._ngrams))

  @property
  def output_dim(self) -> int:
    return self._output_dim

  @property
  def vocabulary(self) -> list[str] | None:
    """The n-grams in column order, `OOV_TOKEN` first; None before `adapt`."""
    return None if self._vocabulary is None else self._vocabulary.tolist()

  @property
  def idf_weights(self) -> np.ndarray | None:
    """float32 `[len(vocabulary)]`; None before `adapt`."""
    return self._idf_weights

  def serving_input_spec(self) -> tf.TensorSpec:
    return tf.TensorSpec([None], tf.string, name="inputs")

  def build(self, input_shape):
    if self._vectorizer is None:
      raise ValueError("TfidfEncoder has no vocabulary: `adapt` it on the training texts, or give `vocabulary` and "
                       "`idf_weights`.")
    self._seen_input_shape = tf.TensorShape(input_shape)
    self._dropout_layer = resumable_dropout.ResumableDropout(self._dropout) if self._dropout > 0 else None
    self._dense_layers = [tf.keras.layers.Dense(units, activation="relu", name=f"dense_{i}")
                          for i, units in enumerate(self._hidden_units)]
    self._projection = tf.keras.layers.Dense(self._output_dim, name="projection")
    width = len(self._vocabulary)
    for layer in (*self._dense_layers, self._projection):  # Sparse inputs carry no static width: built here.
      layer.build(tf.TensorShape([None, width]))
      width = layer.units
    super().build(input_shape)

  def call(self, inputs, training=None):
    tfidf = self._vectorizer(inputs)  # SparseTensor [batch_size, len(vocabulary)]
    values = tfidf.values
    if self._sublinear_tf:  # count * idf -> (1 + log count) * idf; every idf is > 0.
      idf = tf.gather(tf.constant(self._idf_weights), tfidf.indices[:, 1])
      values = (1.0 + tf.math.log(tf.round(values / idf))) * idf
    values = tf.cast(values, self.compute_dtype)
    if self._l2_normalize:
      rows = tfidf.indices[:, 0]
      norms = tf.math.unsorted_segment_sum(tf.square(values), rows, tfidf.dense_shape[0])
      values *= tf.gather(tf.math.rsqrt(tf.maximum(norms, tf.cast(1e-12, values.dtype))), rows)
    if self._dropout_layer is not None:  # Dropping stored entries drops entries of the dense vector.
      values = self._dropout_layer(values, training=training)
    x = tf.SparseTensor(tfidf.indices, values, tfidf.dense_shape)
    for dense in self._dense_layers:
      x = dense(x)
    return self._projection(x)

  def get_config(self) -> dict[str, Any]:
    return {
      **super().get_config(),
      "output_dim": self._output_dim,
      "max_tokens": self._max_tokens,
      "ngrams": self._ngrams,
      "sublinear_tf": self._sublinear_tf,
      "l2_normalize": self._l2_normalize,
      "dropout": self._dropout,
      "hidden_units": list(self._hidden_units),
      "vocabulary": self.vocabulary,
      "idf_weights": None if self._idf_weights is None else [float(w) for w in self._idf_weights],
    }


# Keys of Keras' base `Layer.get_config` (the sub-layers' names are the hybrid encoder's, not arguments).
_LAYER_KEYS = ("name", "trainable", "dtype", "batch_input_shape")
# The frozen text encoder's settings a `HybridTextEncoder` takes (`TextEncoderConfig` without `trainable`).
_FROZEN_TEXT_KEYS = ("preprocess_handle", "encoder_handle", "pooling", "max_seq_length", "l2_normalize")


def _layer_arguments(layer: tf.keras.layers.Layer) -> dict[str, Any]:
  return {key: value for key, value in layer.get_config().items() if key not in _LAYER_KEYS}


@tf.keras.utils.register_keras_serializable(package="rank4class")
class HybridTextEncoder(InstanceEncoder):
  """Encodes raw strings by sparse TF-IDF and a frozen text encoder's embedding side by side (`--text_mode=hybrid`).

  `h = [T(x) ; M(e(x))]` ("concat") or `h = T(x) + M(e(x))` ("sum"), where `T` is a `TfidfEncoder` (word n-grams
  weighted by TF-IDF, projected), `e` the frozen text encoder (MiniLM, mean-pooled: the embeddings of
  `--text_mode=frozen`) and `M` an `MlpEncoder` on them. Sparse n-grams keep word identity, which a sentence
  embedding blurs (topic sets); the embedding adds meaning beyond the vocabulary. Rank4Class §3.1's H(x) with two
  feature views.

  Two call inputs compute the same function:
  - strings `[batch_size]` (serving, the export): `e(x)` runs in the graph, frozen;
  - a dict {`TEXT_KEY`: strings `[batch_size]`, `EMBEDDING_KEY`: float `[batch_size, d]`} (training): the
    embeddings are given, read once from the embedding cache, so the text encoder never runs in a training step.
    Each row's embedding must be `e` of that row's text (`rank4class.training_data` builds both from one array).
  The model holding the encoder is built on strings first (`rank4class.train.build_compiled_model`), so a saved
  model records and reloads the raw-text input.

  Example:
    encoder = HybridTextEncoder(
        tfidf={"output_dim": 4, "vocabulary": ["good", "bad"], "idf_weights": [1.0, 1.0]},
        mlp={"hidden_units": [3]},
        text_encoder={"preprocess_handle": handles.preprocess, "encoder_handle": handles.encoder})
    encoder(tf.constant(["good film"])).shape  # [1, 7]
    encoder({"text": tf.constant(["good film"]), "embedding": tf.zeros([1, 384])}).shape  # [1, 7]

  Args:
    tfidf: `TfidfEncoder` arguments (its vocabulary and idf weights included).
    mlp: `MlpEncoder` arguments of the embedding branch.
    text_encoder: The frozen `rank4class_encoders.text_encoder.TextEncoder`'s `preprocess_handle`,
      `encoder_handle`, `pooling`, `max_seq_length`, `l2_normalize`: the encoder the given embeddings came from.
    combine: "concat" (output size: the TF-IDF projection's + the MLP's) or "sum" (the two sizes must match).

  Call inputs: strings `[batch_size]`, or the dict above.
  Returns: `[batch_size, output_dim]`.

  Raises:
    ValueError: for an unknown `combine`, branch sizes that "sum" cannot add, settings the branches reject, or
      inputs that are not strings / the dict with an embedding of the text encoder's width.
  """

  input_dtype = tf.string

  def __init__(
    self,
    tfidf: dict[str, Any],
    mlp: dict[str, Any],
    text_encoder: dict[str, Any],
    combine: str = CONCAT,
    **kwargs,
  ):
    super().__init__(**kwargs)
    if combine not in HYBRID_COMBINES:
      raise ValueError(f"`combine` must be one of {HYBRID_COMBINES}, got {combine!r}.")
    unknown = sorted(set(text_encoder) - set(_FROZEN_TEXT_KEYS))
    if unknown:
      raise ValueError(f"`text_encoder` takes {_FROZEN_TEXT_KEYS} (the encoder is frozen), got {unknown}.")
    self._combine = combine
    self._tfidf = TfidfEncoder(**tfidf, name="tfidf")
    self._mlp = MlpEncoder(**mlp, name="embedding_mlp")
    self._text_encoder = text_encoder_lib.TextEncoder(**text_encoder, trainable=False, name="frozen_text_encoder")
    self._embedding_dim = self._text_encoder.output_dim
    mlp_dim = self._embedding_dim if mlp.get("residual") else self._mlp.output_dim
    if combine == SUM and mlp_dim != self._tfidf.output_dim:
      raise ValueError(f"combine='sum' adds the TF-IDF projection ({self._tfidf.output_dim}) and the embedding MLP "
                       f"({mlp_dim}); give them one size, or combine='concat'.")
    self._output_dim = self._tfidf.output_dim + mlp_dim if combine == CONCAT else mlp_dim

  @property
  def output_dim(self) -> int:
    return self._output_dim

  @property
  def embedding_dim(self) -> int:
    """Width of the frozen text embeddings the dict input carries."""
    return self._embedding_dim

  @property
  def text_encoder_config(self) -> text_encoder_lib.TextEncoderConfig:
    """The frozen text encoder that makes the embeddings."""
    preprocess, encoder = self._text_encoder.handles
    return text_encoder_lib.TextEncoderConfig(
      preprocess_handle=preprocess, encoder_handle=encoder, trainable=False, pooling=self._text_encoder.pooling,
      max_seq_length=self._text_encoder.max_seq_length,
      l2_normalize=self._text_encoder.get_config()["l2_normalize"])

  def serving_input_spec(self) -> tf.TensorSpec:
    return tf.TensorSpec([None], tf.string, name="inputs")

  def build(self, input_shape):
    self._seen_input_shape = tf.TensorShape([None])  # Strings, whichever input built it: the served one.
    self._tfidf.build(tf.TensorShape([None]))
    self._mlp.build(tf.TensorShape([None, self._embedding_dim]))
    super().build(input_shape)

  def _split_inputs(self, inputs) -> tuple[tf.Tensor, tf.Tensor | None]:
    """(texts, embeddings or None)."""
    if isinstance(inputs, dict):
      if set(inputs) != {TEXT_KEY, EMBEDDING_KEY}:
        raise ValueError(f"HybridTextEncoder takes strings or a dict with keys {TEXT_KEY!r} and {EMBEDDING_KEY!r}, "
                         f"got keys {sorted(inputs)}.")
      texts, embeddings = inputs[TEXT_KEY], tf.convert_to_tensor(inputs[EMBEDDING_KEY])
      if embeddings.shape.rank != 2 or embeddings.shape[-1] not in (None, self._embedding_dim):
        raise ValueError(f"HybridTextEncoder's {EMBEDDING_KEY!r} must be [batch_size, {self._embedding_dim}] (the "
                         f"frozen text encoder's width), got shape {embeddings.shape}.")
    else:
      texts, embeddings = inputs, None
    texts = tf.convert_to_tensor(texts)
    if texts.dtype != tf.string:
      raise ValueError(f"HybridTextEncoder reads raw texts (strings), got {texts.dtype.name} inputs of shape "
                       f"{texts.shape}.")
    if texts.shape.rank == 2 and texts.shape[1] == 1:
      texts = tf.squeeze(texts, axis=1)
    return texts, embeddings

  def call(self, inputs, training=None):
    texts, embeddings = self._split_inputs(inputs)
    if embeddings is None:
      embeddings = self._text_encoder(texts, training=False)  # Frozen: inference mode, no dropout.
    sparse = self._tfidf(texts, training=training)
    dense = self._mlp(embeddings, training=training)
    if self._combine == SUM:
      return sparse + dense
    return tf.concat([sparse, dense], axis=-1)

  def get_config(self) -> dict[str, Any]:
    text = self.text_encoder_config
    return {
      **super().get_config(),
      "tfidf": _layer_arguments(self._tfidf),
      "mlp": _layer_arguments(self._mlp),
      "text_encoder": {key: getattr(text, key) for key in _FROZEN_TEXT_KEYS},
      "combine": self._combine,
    }


_ENCODER_CLASSES = {MLP: MlpEncoder, IMAGE: ImageEncoder, TEXT: TextInstanceEncoder, TFIDF: TfidfEncoder,
                    HYBRID: HybridTextEncoder}


def get(name: str, **kwargs) -> InstanceEncoder:
  """Builds an instance encoder by name.

  Args:
    name: One of `ENCODER_NAMES`.
    **kwargs: Constructor arguments of `MlpEncoder`, `ImageEncoder`, `TextInstanceEncoder`, `TfidfEncoder` or
      `HybridTextEncoder`.

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
    shift: Random shifts of training images, in pixels (0: none).
    flip: Random left-right mirroring of training images.
  """

  backbone: str = SMALL_CNN
  image_shape: tuple[int, int, int] | None = None
  filters: tuple[int, ...] = (32, 64, 128)
  pooling: str = "avg"
  rescale: float = 1.0 / 255.0
  offset: float = 0.0
  output_dim: int | None = None
  dropout: float = 0.0
  backbone_weights: str | None = None
  shift: int = 0
  flip: bool = False


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
class TfidfEncoderConfig:
  """Settings of `TfidfEncoder`.

  Attributes:
    output_dim: Embedding size.
    max_tokens: Vocabulary size, the OOV token included.
    ngrams: N-grams of 1 to `ngrams` words.
    sublinear_tf: Weigh an n-gram by 1 + log of its count.
    l2_normalize: Scale each TF-IDF vector to unit length.
    dropout: Dropout on the TF-IDF entries.
    hidden_units: ReLU layers before the output layer (empty: linear).
    vocabulary: The n-grams in column order. None in a run's config.json: `rank4class.train.resolve_model_config`
      learns them and their idf weights from the training texts when it builds the model (`tfidf_vocabulary`),
      the same on every resume.
    idf_weights: Their idf weights (None with `vocabulary`).
  """

  output_dim: int = 128
  max_tokens: int = DEFAULT_TFIDF_MAX_TOKENS
  ngrams: int = 2
  sublinear_tf: bool = False
  l2_normalize: bool = True
  dropout: float = 0.0
  hidden_units: tuple[int, ...] = ()
  vocabulary: list[str] | None = None
  idf_weights: list[float] | None = None


@dataclasses.dataclass
class HybridTextEncoderConfig:
  """Settings of `HybridTextEncoder` beside its branches' (`InstanceEncoderConfig.tfidf` and `.mlp`).

  Attributes:
    combine: "concat" or "sum" of the TF-IDF projection and the embedding MLP. Concat was better on both sets
      measured (softmax + dot, width 128, seeds 0-2, test top-1 error): Reuters R8 2.86 +- 0.21 against sum's
      3.03 +- 0.15, Drugs.com sentiment 28.23 +- 0.26 against 30.08 +- 0.79.
    text: The frozen text encoder whose embeddings the MLP reads. None in a run's config.json:
      `rank4class.train.resolve_model_config` gives the one the training data was embedded with.
  """

  combine: str = CONCAT
  text: text_encoder_lib.TextEncoderConfig | None = None

  def __post_init__(self):
    if isinstance(self.text, dict):
      self.text = text_encoder_lib.TextEncoderConfig(**self.text)
    if self.combine not in HYBRID_COMBINES:
      raise ValueError(f"Unknown hybrid combine {self.combine!r}; allowed: {', '.join(HYBRID_COMBINES)}.")


@dataclasses.dataclass
class InstanceEncoderConfig:
  """Which instance encoder to build, and its settings (only the chosen kind's settings are used).

  Attributes:
    type: One of `ENCODER_NAMES`.
    mlp: Settings used when `type == "mlp"`, and by the embedding branch of "hybrid".
    image: Settings used when `type == "image"`.
    text: Settings used when `type == "text"`; required then.
    tfidf: Settings used when `type == "tfidf"`, and by the TF-IDF branch of "hybrid".
    hybrid: Settings used when `type == "hybrid"` (`hybrid.text` required then).
  """

  type: str = MLP
  mlp: MlpEncoderConfig = dataclasses.field(default_factory=MlpEncoderConfig)
  image: ImageEncoderConfig = dataclasses.field(default_factory=ImageEncoderConfig)
  text: TextInstanceEncoderConfig | None = None
  tfidf: TfidfEncoderConfig = dataclasses.field(default_factory=TfidfEncoderConfig)
  hybrid: HybridTextEncoderConfig = dataclasses.field(default_factory=HybridTextEncoderConfig)


def make_instance_encoder(config: InstanceEncoderConfig) -> InstanceEncoder:
  """Builds the instance encoder that `config` describes.

  Raises:
    ValueError: If `config.type` is unknown, `config.text` is missing for a text encoder or `config.hybrid.text`
      for a hybrid one. A TF-IDF encoder without a vocabulary is built unadapted (`TfidfEncoder.adapt` it before
      use); a hybrid one without a vocabulary raises.
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
  if config.type == TFIDF:
    return get(TFIDF, **dataclasses.asdict(config.tfidf))
  if config.type == HYBRID:
    text = config.hybrid.text
    if text is None:
      raise ValueError("InstanceEncoderConfig.type is 'hybrid' but `hybrid.text` (the frozen text encoder of the "
                       "embeddings) is missing.")
    if config.tfidf.vocabulary is None:
      raise ValueError("InstanceEncoderConfig.type is 'hybrid' but `tfidf.vocabulary` is missing (learn it from "
                       "the training texts: `tfidf_vocabulary`).")
    return get(HYBRID, tfidf=dataclasses.asdict(config.tfidf), mlp=dataclasses.asdict(config.mlp),
               text_encoder={key: getattr(text, key) for key in _FROZEN_TEXT_KEYS}, combine=config.hybrid.combine)
  raise ValueError(f"Unknown instance encoder {config.type!r}; allowed: {ENCODER_NAMES}.")
