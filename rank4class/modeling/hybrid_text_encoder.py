"""The hybrid text instance encoder of Rank4Class (`--text_mode=hybrid`): TF-IDF of the raw text beside an MLP
on its frozen text embedding."""

import dataclasses
from typing import Any

import tensorflow as tf

from rank4class.modeling import instance_encoder, mlp_encoder, tfidf_encoder
from rank4class_data.classification_data import EMBEDDING_KEY, TEXT_KEY  # noqa: F401  Re-exported by encoders.
from rank4class_data.validation import check_choice, check_range
from rank4class_encoders import text_encoder as text_encoder_lib

# How `HybridTextEncoder` joins its two branches.
CONCAT = "concat"
SUM = "sum"
HYBRID_COMBINES = (CONCAT, SUM)
# The keys of `HybridTextEncoder`'s training input: the raw texts and their frozen embeddings.

# Keys of Keras' base `Layer.get_config` (the sub-layers' names are the hybrid encoder's, not arguments).
_LAYER_KEYS = ("name", "trainable", "dtype", "batch_input_shape")
# The frozen text encoder's settings a `HybridTextEncoder` takes (`TextEncoderConfig` without `trainable`).
FROZEN_TEXT_KEYS = tuple(field.name for field in dataclasses.fields(text_encoder_lib.TextEncoderConfig)
                         if field.name != "trainable")


def _layer_arguments(layer: tf.keras.layers.Layer) -> dict[str, Any]:
  return {key: value for key, value in layer.get_config().items() if key not in _LAYER_KEYS}


@tf.keras.utils.register_keras_serializable(package="rank4class")
class HybridTextEncoder(instance_encoder.InstanceEncoder):
  """Encodes raw strings by sparse TF-IDF and a frozen text encoder's embedding side by side
  (`--text_mode=hybrid`).

  `h = [T(x) ; M(e(x))]` ("concat") or `h = T(x) + M(e(x))` ("sum"), where `T` is a `TfidfEncoder` (word
  n-grams weighted by TF-IDF, projected), `e` the frozen text encoder (MiniLM, mean-pooled: the embeddings of
  `--text_mode=frozen`) and `M` an `MlpEncoder` on them. Sparse n-grams keep word identity, which a sentence
  embedding blurs (topic sets); the embedding adds meaning beyond the vocabulary. Rank4Class §3.1's H(x) with
  two feature views.

  Two call inputs compute the same function:
  - strings `[batch_size]` (serving, the export): `e(x)` runs in the graph, frozen;
  - a dict {`TEXT_KEY`: strings `[batch_size]`, `EMBEDDING_KEY`: float `[batch_size, d]`} (training): the
    embeddings are given, read once from the embedding cache, so the text encoder never runs in a training
    step. Each row's embedding must be `e` of that row's text (`rank4class.training.training_data` builds both
    from one array).
  The model holding the encoder is built on strings first (`rank4class.training.train.build_compiled_model`),
  so a saved model records and reloads the raw-text input.

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
      `encoder_handle`, `pooling`, `max_seq_length`, `l2_normalize`, `precision`: the encoder the given
      embeddings came from.
    combine: "concat" (output size: the TF-IDF projection's + the MLP's) or "sum" (the two sizes must match).
    embedding_dim: None (the default) loads the text encoder; the width of its embeddings skips loading it
      (the encoder then takes the dict input only). Not part of the config: a saved model loads with it.

  Scoring given embeddings only (`embedding_dim` set): the text encoder is not loaded, so the encoder reads
  the dict input alone. `rank4class.inference.served` builds a hybrid export so: its texts' embeddings are
  read from the embedding cache (keyed by `text_encoder_config`); MiniLM loads only for texts it lacks.

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
    embedding_dim: int | None = None,
    **kwargs,
  ):
    super().__init__(**kwargs)
    check_choice("combine", combine, HYBRID_COMBINES)
    unknown = sorted(set(text_encoder) - set(FROZEN_TEXT_KEYS))
    if unknown:
      raise ValueError(f"`text_encoder` takes {FROZEN_TEXT_KEYS} (the encoder is frozen), got {unknown}.")
    self._combine = combine
    self._tfidf = tfidf_encoder.TfidfEncoder(**tfidf, name="tfidf")
    self._mlp = mlp_encoder.MlpEncoder(**mlp, name="embedding_mlp")
    self._text_config = text_encoder_lib.TextEncoderConfig(**text_encoder, trainable=False)
    if embedding_dim is None:
      self._text_encoder = text_encoder_lib.TextEncoder(**text_encoder, trainable=False,
                                                        name="frozen_text_encoder")
      self._embedding_dim = self._text_encoder.output_dim
    else:
      check_range("embedding_dim", embedding_dim, 1, integer=True)
      self._text_encoder = None
      self._embedding_dim = int(embedding_dim)
    mlp_dim = self._embedding_dim if mlp.get("residual") else self._mlp.output_dim
    if combine == SUM and mlp_dim != self._tfidf.output_dim:
      raise ValueError(f"combine='sum' adds the TF-IDF projection ({self._tfidf.output_dim}) and the "
                       f"embedding MLP ({mlp_dim}); give them one size, or combine='concat'.")
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
    """The frozen text encoder that makes the embeddings (`trainable` False: `tf.keras.models.load_model` sets
    every sub-layer's flag to the model's, but this encoder never trains)."""
    if self._text_encoder is None:
      return self._text_config
    return dataclasses.replace(self._text_encoder.text_encoder_config, trainable=False)

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
        raise ValueError(f"HybridTextEncoder takes strings or a dict with keys {TEXT_KEY!r} and "
                         f"{EMBEDDING_KEY!r}, got keys {sorted(inputs)}.")
      texts, embeddings = inputs[TEXT_KEY], tf.convert_to_tensor(inputs[EMBEDDING_KEY])
      if embeddings.shape.rank != 2 or embeddings.shape[-1] not in (None, self._embedding_dim):
        raise ValueError(f"HybridTextEncoder's {EMBEDDING_KEY!r} must be [batch_size, {self._embedding_dim}] "
                         f"(the frozen text encoder's width), got shape {embeddings.shape}.")
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
      if self._text_encoder is None:
        raise ValueError("This HybridTextEncoder was built without its text encoder (embedding_dim given): "
                         f"it takes a dict with keys {TEXT_KEY!r} and {EMBEDDING_KEY!r}, not texts alone.")
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
      "text_encoder": {key: getattr(text, key) for key in FROZEN_TEXT_KEYS},
      "combine": self._combine,
    }
