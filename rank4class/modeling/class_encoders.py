"""Class encoders of Rank4Class: embeddings c_i of the classes, the list items that each instance ranks."""

import contextlib
import dataclasses
import threading
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class.modeling import ranking_math
from rank4class.modeling.instance_encoder import FittedValues
from rank4class.modeling.ranking_math import class_centroids  # noqa: F401  Re-exported: its callers import it here.
from rank4class_data.validation import check_choice, check_range
from rank4class_encoders import text_encoder as text_encoder_lib

ONE_HOT = "one_hot"
METADATA = "metadata"
CLASS_ENCODER_NAMES = (ONE_HOT, METADATA)
# How a training run sets up a model whose classes are texts (`ClassEncoderConfig.towers`).
AUTO_TOWERS = "auto"
COSINE_TOWERS = "cosine"
PROJECTION_TOWERS = "projection"
TOWERS = (AUTO_TOWERS, COSINE_TOWERS, PROJECTION_TOWERS)
# How a training run starts the one-hot class embeddings (`ClassEncoderConfig.init`).
AUTO_INIT = "auto"
RANDOM_INIT = "random"
CENTROID_INIT = "centroids"
CLASS_INITS = (AUTO_INIT, RANDOM_INIT, CENTROID_INIT)


class ClassEncoder(tf.keras.layers.Layer):
  """Base class of class encoders.

  `call(class_ids=None)` returns `(embeddings [n, embedding_dim], bias [n])` for the classes `class_ids`
  (int `[n]`), or for all `num_classes` classes in id order when `class_ids` is None. The bias is a learned
  per-class offset added to the interaction score (zeros when `use_bias` is False).
  """

  def __init__(self, num_classes: int, use_bias: bool = True, **kwargs):
    super().__init__(**kwargs)
    check_range("num_classes", num_classes, 2, integer=True)
    self._num_classes = int(num_classes)  # A NumPy integer too; a plain int in the Keras config.
    self._use_bias = bool(use_bias)
    self._bias = None

  @property
  def num_classes(self) -> int:
    return self._num_classes

  @property
  def embedding_dim(self) -> int | None:
    """Size of each class embedding, or None until it is resolved (see `OneHotClassEncoder`)."""
    raise NotImplementedError

  def resolve_embedding_dim(self, instance_dim: int) -> None:
    """Called by `Rank4ClassModel` with the instance embedding size before the first call; default no-op."""
    del instance_dim

  def _add_bias(self, initializer: Any = "zeros") -> None:
    self._bias = (self.add_weight("bias", shape=[self._num_classes], initializer=initializer, trainable=True)
                  if self._use_bias else None)

  def _select(self, embeddings, class_ids: tf.Tensor | None) -> tuple[tf.Tensor, tf.Tensor]:
    """All classes' (embeddings, biases), or the rows of `class_ids` only: gathered straight from the
    variables (a sparse read, and a sparse gradient), so a step that looks up K classes never touches all C
    rows."""
    dtype = embeddings.dtype
    if class_ids is None:
      bias = self._bias if self._bias is not None else tf.zeros([self._num_classes], dtype)
      return tf.convert_to_tensor(embeddings), tf.cast(bias, dtype)
    selected = tf.gather(embeddings, class_ids)
    if self._bias is None:
      return selected, tf.zeros(tf.shape(class_ids), selected.dtype)
    return selected, tf.cast(tf.gather(self._bias, class_ids), selected.dtype)

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "num_classes": self._num_classes, "use_bias": self._use_bias}


@tf.keras.utils.register_keras_serializable(package="rank4class")
class OneHotClassEncoder(ClassEncoder):
  """One-hot class encoder: `c_i = W^T e_i`, a learned `[num_classes, embedding_dim]` matrix, plus bias b_i.

  With a dot-product interaction this is exactly the classic classification layer `Dense(num_classes)`:
  `s_i = <h, W_i> + b_i` (Rank4Class Claim 1, §3.2). Copy a Dense layer's kernel `[d, C]` transposed into
  `embeddings` and its bias into `bias` to reproduce its logits.

  `initial_embeddings` (and `initial_bias`) start W (and b) at given values, e.g. the classes' unit-length
  training centroids (`class_centroids`): with unit-length instances and a dot product the untrained model is
  then the nearest class centroid classifier (`rank4class.training.train.with_class_centroids`). They are not
  part of `get_config` (a matrix of C x d floats in every saved model's config): a saved model restores W and
  b from its weights, and a config round trip gives an encoder that starts at `embeddings_initializer` and
  zero biases.

  Example:
    encoder = OneHotClassEncoder(num_classes=3, embedding_dim=4)
    embeddings, bias = encoder(None)  # [3, 4], [3]
    OneHotClassEncoder(num_classes=2, initial_embeddings=[[1., 0.], [0., 1.]])(None)[0]  # [[1, 0], [0, 1]]

  Args:
    num_classes: Number of classes C >= 2.
    embedding_dim: Embedding size; None takes the instance embedding size when used in `Rank4ClassModel` (or
      the width of `initial_embeddings`).
    use_bias: Learn a per-class bias.
    embeddings_initializer: Initializer of W (glorot_uniform, as Dense's kernel); unused with
      `initial_embeddings`.
    embeddings_regularizer: Optional regularizer of W.
    initial_embeddings: Optional initial W, float `[num_classes, embedding_dim]`.
    initial_bias: Optional initial b, float `[num_classes]` (zeros when None); needs `use_bias`.

  Raises:
    ValueError: For a bad argument, or initial values of another shape or not finite.
  """

  def __init__(self, num_classes: int, embedding_dim: int | None = None, use_bias: bool = True,
               embeddings_initializer: str | dict = "glorot_uniform",
               embeddings_regularizer: str | dict | None = None, initial_embeddings: np.ndarray | None = None,
               initial_bias: np.ndarray | None = None, **kwargs):
    super().__init__(num_classes, use_bias, **kwargs)
    if embedding_dim is not None:  # None: the instance embedding's size (`resolve_embedding_dim`).
      check_range("embedding_dim", embedding_dim, 1, integer=True)
      embedding_dim = int(embedding_dim)
    self._initial_embeddings = None
    if initial_embeddings is not None:
      initial = np.asarray(initial_embeddings, np.float32)
      if initial.ndim != 2 or initial.shape[0] != num_classes or (
          embedding_dim is not None and initial.shape[1] != embedding_dim):
        raise ValueError(f"`initial_embeddings` must have shape [num_classes={num_classes}, "
                         f"{embedding_dim or 'embedding_dim'}], got {list(initial.shape)}.")
      if not np.all(np.isfinite(initial)):
        raise ValueError("`initial_embeddings` must be finite.")
      self._initial_embeddings = initial
      embedding_dim = int(initial.shape[1])  # Kept in the config: a reloaded encoder has W's shape.
    self._initial_bias = None
    if initial_bias is not None:
      bias = np.asarray(initial_bias, np.float32)
      if not use_bias:
        raise ValueError("`initial_bias` needs `use_bias=True`.")
      if bias.shape != (num_classes,) or not np.all(np.isfinite(bias)):
        raise ValueError(f"`initial_bias` must be finite values of shape [num_classes={num_classes}], got "
                         f"shape {list(bias.shape)}.")
      self._initial_bias = bias
    self._embedding_dim = embedding_dim
    self._configured_embedding_dim = embedding_dim
    self._embeddings_initializer = tf.keras.initializers.get(embeddings_initializer)
    self._embeddings_regularizer = tf.keras.regularizers.get(embeddings_regularizer)

  @property
  def embedding_dim(self) -> int | None:
    return self._embedding_dim

  def resolve_embedding_dim(self, instance_dim: int) -> None:
    if self._embedding_dim is None:
      self._embedding_dim = instance_dim

  def build(self, input_shape=None):
    if self._embedding_dim is None:
      raise ValueError("OneHotClassEncoder needs `embedding_dim` (or a Rank4ClassModel to resolve it).")
    initializer = self._embeddings_initializer
    if self._initial_embeddings is not None:
      initializer = FittedValues(self._initial_embeddings)
    self.embeddings = self.add_weight("embeddings", shape=[self._num_classes, self._embedding_dim],
                                      initializer=initializer, regularizer=self._embeddings_regularizer,
                                      trainable=True)
    self._add_bias("zeros" if self._initial_bias is None else FittedValues(self._initial_bias))
    super().build(input_shape)

  def call(self, inputs=None, training=None):
    """`inputs`: None (all classes) or class ids int `[n]` -> (`[n, embedding_dim]`, `[n]`)."""
    return self._select(self.embeddings, inputs)

  @property
  def bias(self) -> tf.Variable | None:
    return self._bias

  def get_config(self) -> dict[str, Any]:
    return {
      **super().get_config(),
      "embedding_dim": self._configured_embedding_dim,
      "embeddings_initializer": tf.keras.initializers.serialize(self._embeddings_initializer),
      "embeddings_regularizer": (tf.keras.regularizers.serialize(self._embeddings_regularizer)
                                 if self._embeddings_regularizer is not None else None),
    }


@tf.keras.utils.register_keras_serializable(package="rank4class")
class MetadataClassEncoder(ClassEncoder):
  """Embeds each class from its name/description text with the TF Hub text encoder (the paper's §4 "richer
  class inputs", left there as future work).

  The class texts are a constant `[num_classes]` string tensor in the graph. With a frozen encoder
  (`text.trainable` False) and `precompute=True`, the text embeddings are computed once when the layer
  is built and kept as a non-trainable weight; otherwise they are recomputed on every call so the encoder
  can be fine-tuned. An optional linear projection (`output_dim`) maps them to the wanted size.

  For classes unseen in training (zero-shot, `Rank4ClassModel.text_class_scores`), `residual_projection=True`
  makes the projection `x + W x` with `W` initialised at zeros (the identity at the start: the class
  embeddings stay in the text encoder's space, where unseen class texts are as well placed as seen ones), and
  `normalize_output=True` scales the projected embeddings to unit length (a cosine interaction with
  unit-length instances; no per-class bias then, `use_bias=False`, as seen classes' biases do not transfer).

  Example:
    text = TextEncoderConfig(preprocess_handle=p, encoder_handle=e, max_seq_length=32)
    encoder = MetadataClassEncoder(["cat", "dog"], text, output_dim=8)
    embeddings, bias = encoder(None)  # [2, 8], [2]
    # Starts as the unit-length text embeddings themselves, the cosine baseline's class vectors:
    MetadataClassEncoder(["cat", "dog"], dataclasses.replace(text, l2_normalize=True), use_bias=False,
                         residual_projection=True, normalize_output=True)

  Args:
    class_texts: One text per class, in class-id order (at least 2).
    text: The text encoder's settings (`rank4class_encoders.text_encoder.TextEncoderConfig`, or its fields as
      a dict): handles, fine-tuned (`trainable`) or frozen, pooling, token budget per class text, unit length
      (`l2_normalize`, before the projection), what a frozen encoder computes in (`precision`).
    output_dim: Optional projection size; None keeps the encoder's hidden size.
    use_bias: Learn a per-class bias.
    precompute: With a frozen encoder, compute the text embeddings once at build time.
    residual_projection: The projection is `x + Dense(x)` with the Dense kernel initialised at zeros (it
      starts as the identity); needs `output_dim` None or the encoder's hidden size.
    normalize_output: Scale the (projected) class embeddings to unit length.
    untrained_share: With `text.l2_normalize`, `residual_projection` and `normalize_output`, in [0, 1]: the
      class embedding is the projected one times sqrt(1 - share) beside the text embedding times sqrt(share)
      (`ranking_math.with_untrained_share`, twice the size); against instances built the same way
      (`MlpEncoder(untrained_share=...)`) a dot product keeps that share of the frozen embeddings' cosine.
    text_embeddings: The frozen encoder's embeddings of `class_texts` `[num_classes, hidden]`, where given
      (a run reads them from the embedding cache): `precompute` takes them instead of running the encoder
      over every class text. Not in the config: a saved model holds them as a weight.
  """

  def __init__(
    self,
    class_texts: list[str],
    text: text_encoder_lib.TextEncoderConfig | dict[str, Any],
    output_dim: int | None = None,
    use_bias: bool = True,
    precompute: bool = True,
    residual_projection: bool = False,
    normalize_output: bool = False,
    untrained_share: float = 0.0,
    text_embeddings: np.ndarray | None = None,
    **kwargs,
  ):
    class_texts = list(class_texts)
    text = text_encoder_lib.TextEncoderConfig.of(text)
    check_range("untrained_share", untrained_share, 0.0, 1.0)
    if untrained_share > 0 and not (text.l2_normalize and residual_projection and normalize_output):
      raise ValueError("`untrained_share` mixes the unit-length text embeddings into the class embeddings; "
                       "it needs `l2_normalize`, `residual_projection` and `normalize_output`.")
    for i, class_text in enumerate(class_texts):
      if not isinstance(class_text, str) or not class_text.strip():
        raise ValueError(f"`class_texts[{i}]` must be a non-empty string, got {class_text!r}.")
    super().__init__(len(class_texts), use_bias, **kwargs)
    if output_dim is not None:
      check_range("output_dim", output_dim, 1, integer=True)
    # Untracked (see `Rank4ClassModel`'s class names).
    self._class_texts = np.asarray(class_texts, dtype=object)
    self._output_dim = output_dim
    self._precompute = bool(precompute)
    self._residual_projection = bool(residual_projection)
    self._normalize_output = bool(normalize_output)
    self._untrained_share = float(untrained_share)
    self._text_config = text
    self._text_encoder = text_encoder_lib.make_text_encoder(self._text_config)
    if residual_projection and output_dim not in (None, self._text_encoder.output_dim):
      raise ValueError("`residual_projection` adds the projection to the text embedding, so `output_dim` "
                       f"must be None or the encoder's size {self._text_encoder.output_dim}, "
                       f"got {output_dim}.")
    self._text_embeddings = None if text_embeddings is None else self._checked_embeddings(text_embeddings)

  def _checked_embeddings(self, text_embeddings) -> np.ndarray:
    if not self._precompute or self._text_config.trainable:
      raise ValueError("`text_embeddings` stand for the embeddings a frozen encoder precomputes; they need "
                       "`precompute=True` and `text.trainable=False`.")
    values = np.asarray(text_embeddings, np.float32)
    shape = (len(self._class_texts), self._text_encoder.output_dim)
    if values.shape != shape or not np.all(np.isfinite(values)):
      raise ValueError(f"`text_embeddings` must be finite values of shape [num_classes={shape[0]}, "
                       f"hidden={shape[1]}], got shape {list(values.shape)}.")
    return values

  @classmethod
  def from_config(cls, config: dict[str, Any]) -> "MetadataClassEncoder":
    """Also reads the configs saved up to 0.8, whose text-encoder settings are flat keys."""
    return cls(**text_encoder_lib.nest_flat_layer_config(config))

  @property
  def class_texts(self) -> list[str]:
    return list(self._class_texts)

  @property
  def embedding_dim(self) -> int:
    size = self._output_dim if self._output_dim is not None else self._text_encoder.output_dim
    return 2 * size if self._untrained_share > 0 else size

  def _encode_texts(self, training: bool | None) -> tf.Tensor:
    # [num_classes, hidden]
    return self._text_encoder(tf.constant(list(self._class_texts)), training=training)

  def build(self, input_shape=None):
    self._cached = None
    if self._precompute and not self._text_config.trainable:
      initial = self._text_embeddings
      if initial is None and getattr(_RESTORING, "on", False):  # The saved values replace these zeros.
        initial = np.zeros([self._num_classes, self._text_encoder.output_dim], np.float32)
      if initial is None:
        with tf.init_scope():  # Runs eagerly even when the first call is being traced.
          initial = self._encode_texts(training=False).numpy()
      self._cached = self.add_weight("text_embeddings", shape=initial.shape, dtype=initial.dtype,
                                     initializer=tf.keras.initializers.Constant(initial), trainable=False)
    if self._residual_projection:
      self._projection = tf.keras.layers.Dense(self._text_encoder.output_dim, kernel_initializer="zeros",
                                               name="projection")
    else:
      self._projection = (
        tf.keras.layers.Dense(self._output_dim, name="projection") if self._output_dim is not None else None
      )
    self._add_bias()
    super().build(input_shape)

  def _project(self, embeddings: tf.Tensor) -> tf.Tensor:
    """Text embeddings `[n, hidden]` -> class embeddings `[n, embedding_dim]` (projection, unit length)."""
    text_embeddings = embeddings
    if self._projection is not None:
      projected = self._projection(embeddings)
      embeddings = embeddings + projected if self._residual_projection else projected
    embeddings = tf.math.l2_normalize(embeddings, axis=-1) if self._normalize_output else embeddings
    if self._untrained_share > 0:
      embeddings = ranking_math.with_untrained_share(embeddings, text_embeddings, self._untrained_share)
    return embeddings

  def encode_class_texts(self, texts, training: bool | None = None) -> tf.Tensor:
    """Embeddings `[n, embedding_dim]` of any class texts `[n]` (new classes, or a re-written class table),
    through the same text encoder and projection as the training classes: what zero-shot scoring uses."""
    return self._project(self._text_encoder(tf.convert_to_tensor(texts, tf.string), training=training))

  def project_text_embeddings(self, embeddings) -> tf.Tensor:
    """Class embeddings `[n, embedding_dim]` of class texts' text-encoder embeddings `[n, hidden]` (unit
    length where the encoder's are, `l2_normalize`): `encode_class_texts` without the text encoder."""
    return self._project(tf.convert_to_tensor(embeddings))

  def call(self, inputs=None, training=None):
    """`inputs`: None (all classes) or class ids int `[n]` -> (`[n, embedding_dim]`, `[n]`)."""
    embeddings = (
      tf.convert_to_tensor(self._cached) if self._cached is not None else self._encode_texts(training)
    )
    return self._select(self._project(embeddings), inputs)

  def unrestored_text_embeddings(self) -> bool:
    """Whether a precomputed `text_embeddings` weight still has a row of zeros: the placeholder of
    `restoring_text_embeddings` that the saved values did not replace (a text encoder never gives zeros)."""
    return self._cached is not None and bool(np.any(np.all(self._cached.numpy() == 0, axis=1)))

  def get_config(self) -> dict[str, Any]:
    config = super().get_config()
    del config["num_classes"]  # Implied by class_texts.
    return {**config, "class_texts": list(self._class_texts), "text": dataclasses.asdict(self._text_config),
            "output_dim": self._output_dim, "precompute": self._precompute,
            "residual_projection": self._residual_projection, "normalize_output": self._normalize_output,
            "untrained_share": self._untrained_share}


# Inside `restoring_text_embeddings()` a frozen `MetadataClassEncoder` builds its `text_embeddings` weight at
# zeros instead of running its text encoder over every class text: the model being loaded restores the saved
# values over them (the loader checks `unrestored_text_embeddings`).
_RESTORING = threading.local()


@contextlib.contextmanager
def restoring_text_embeddings():
  """The context of loading a saved model (see `_RESTORING`), in this thread."""
  previous, _RESTORING.on = getattr(_RESTORING, "on", False), True
  try:
    yield
  finally:
    _RESTORING.on = previous


def get(name: str, **kwargs) -> ClassEncoder:
  """Builds a class encoder by name.

  Args:
    name: One of `CLASS_ENCODER_NAMES`.
    **kwargs: Constructor arguments of `OneHotClassEncoder` or `MetadataClassEncoder`.

  Raises:
    ValueError: If `name` is unknown (the message lists the allowed names) or an argument is invalid.
  """
  classes = {ONE_HOT: OneHotClassEncoder, METADATA: MetadataClassEncoder}
  check_choice("class_encoder", name, classes)
  return classes[name](**kwargs)


@dataclasses.dataclass
class OneHotClassEncoderConfig:
  """Settings of `OneHotClassEncoder` (the class count comes from the data's class names).

  Attributes:
    embedding_dim: Embedding size; None matches the instance embedding.
    use_bias: Learn a per-class bias.
    initial_embeddings: Initial class embeddings `[num_classes, d]`. None in a run's config.json: with
      `ClassEncoderConfig.init` "centroids" (or "auto" where it picks them)
      `rank4class.training.train.resolve_model_config` computes the training split's class centroids when it
      builds the model (`with_class_centroids`), the same on every resume; the checkpoint and the export hold
      the trained values.
    initial_bias: Initial class biases `[num_classes]` (zeros when None); None in config.json as well.
  """

  embedding_dim: int | None = None
  use_bias: bool = True
  initial_embeddings: np.ndarray | None = None
  initial_bias: np.ndarray | None = None


@dataclasses.dataclass
class MetadataClassEncoderConfig:
  """Settings of `MetadataClassEncoder`.

  Attributes:
    text: Handles and pooling of the TF Hub text encoder (`trainable` there means fine-tuning).
    class_texts: One text per class in id order; None uses the class names.
    output_dim: Optional projection size.
    use_bias: Learn a per-class bias.
    precompute: Compute frozen text embeddings once at build time.
    residual_projection: Project by `x + Dense(x)`, the kernel initialised at zeros (starts as the identity).
    normalize_output: Scale the class embeddings to unit length after the projection.
    untrained_share: The share of the frozen text embeddings' cosine a dot product keeps (see
      `MetadataClassEncoder`); 0 for the projected embeddings alone.
    text_embeddings: The class texts' frozen embeddings, which `precompute` takes (`MetadataClassEncoder`);
      None in config.json: a run reads them from its embedding cache at each build (`model_setup`).
  """

  text: text_encoder_lib.TextEncoderConfig
  class_texts: list[str] | None = None
  output_dim: int | None = None
  use_bias: bool = True
  precompute: bool = True
  residual_projection: bool = False
  normalize_output: bool = False
  untrained_share: float = 0.0
  text_embeddings: np.ndarray | None = None


@dataclasses.dataclass
class ClassEncoderConfig:
  """Which class encoder to build, and its settings (only the chosen kind's settings are used).

  Attributes:
    type: One of `CLASS_ENCODER_NAMES`.
    one_hot: Settings used when `type == "one_hot"`.
    metadata: Settings used when `type == "metadata"`; required then (a training run fills it from its data
      when
      None: `rank4class.training.train.resolve_model_config`).
    towers: "metadata" filled by a training run: `COSINE_TOWERS` (both towers start at the frozen text
      encoder's cosine similarity: l2-normalised embeddings, residual layers initialised at zeros, dot / 0.05,
      no class bias; needs frozen text embeddings as inputs, the MLP instance encoder and the dot
      interaction), `PROJECTION_TOWERS` (an MLP of the instance, a projection of the class texts to its size),
      or `AUTO_TOWERS` (cosine where it applies).
    init: How a training run starts the "one_hot" class embeddings: `CENTROID_INIT` (the centroids of each
      class's training inputs scaled to length 20, with the instance tower `x + MLP(x)` of unit length, its
      output layer initialised at zeros: the untrained model's scores are cosines x 20 to the centroids, the
      nearest class centroid classifier; needs fixed-vector inputs (frozen embeddings or dense features), the
      MLP instance encoder, the dot interaction, class ids as labels and `one_hot.embedding_dim` None;
      `rank4class.training.train.with_class_centroids`), `RANDOM_INIT` (glorot uniform), or `AUTO_INIT`
      (centroids where they apply to frozen text embeddings of at least
      `rank4class.training.train.AUTO_CENTROID_CLASSES` classes).
  """

  type: str = ONE_HOT
  one_hot: OneHotClassEncoderConfig = dataclasses.field(default_factory=OneHotClassEncoderConfig)
  metadata: MetadataClassEncoderConfig | None = None
  towers: str = "auto"
  init: str = AUTO_INIT

  def __post_init__(self):
    check_choice("class_encoder", self.type, CLASS_ENCODER_NAMES)
    check_choice("towers", self.towers, TOWERS)
    check_choice("init", self.init, CLASS_INITS)


def make_class_encoder(config: ClassEncoderConfig, class_names: list[str]) -> ClassEncoder:
  """Builds the class encoder that `config` describes for the classes `class_names` (in id order).

  Raises:
    ValueError: If `config.type` is unknown, `metadata` settings are missing, or `class_texts` does not have
      one text per class.
  """
  check_choice("class_encoder", config.type, CLASS_ENCODER_NAMES)
  if config.type == ONE_HOT:
    return get(ONE_HOT, num_classes=len(class_names), **dataclasses.asdict(config.one_hot))
  if config.type == METADATA:
    if config.metadata is None:
      raise ValueError("ClassEncoderConfig.type is 'metadata' but `metadata` settings are missing.")
    meta = config.metadata
    texts = list(meta.class_texts) if meta.class_texts is not None else list(class_names)
    if len(texts) != len(class_names):
      raise ValueError(f"`class_texts` has {len(texts)} texts but there are {len(class_names)} classes.")
    settings = {field.name: getattr(meta, field.name) for field in dataclasses.fields(meta)}
    return get(METADATA, **{**settings, "class_texts": texts})
