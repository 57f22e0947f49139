"""Keras pieces of the pairwise margin-ranking Transformer (Rank over Class §3): encoder stand-in, heads,
model.

The margin loss and pair accuracy of training are computed in `pairwise_train.TrainingModel.train_step` from
`pairs.margin_ranking_loss` and `ranking_metrics.pairs_correct`; no loss or metric object is compiled into a
model.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from rank4class_data.validation import check_choice, check_range
from rank4class_engine.loop import resumable_dropout

# Scoring heads selectable by flag: the paper's context-aggregating MLP, or its "w/o MLP" ablation (Table 6).
HEADS = ("mlp", "linear")


@tf.keras.utils.register_keras_serializable(package="pairwise")
class HashedBagOfWordsEncoder(tf.keras.layers.Layer):
  """A cheap text encoder: mean of hashed-token embeddings (a stand-in for a Transformer in tests and
  baselines).

  Lower-cases, splits on whitespace, hashes each token into `num_buckets` and averages its trainable
  embeddings. It follows the `rank4class_encoders.text_encoder.TextEncoder` contract (strings [batch_size] ->
  float32 [batch_size, output_dim]) so any model here can take either.

  Example:
    encoder = HashedBagOfWordsEncoder(num_buckets=1000, output_dim=16)
    encoder(tf.constant(["good drug", "bad"]))  # [2, 16]

  Args:
    num_buckets: Hash buckets (>= 1).
    output_dim: Embedding width (>= 1).
  """

  def __init__(self, num_buckets: int = 4096, output_dim: int = 32, **kwargs):
    super().__init__(**kwargs)
    check_range("num_buckets", num_buckets, 1)
    check_range("output_dim", output_dim, 1)
    self._num_buckets = num_buckets
    self._output_dim = output_dim

  @property
  def output_dim(self) -> int:
    return self._output_dim

  def build(self, input_shape):
    self._embeddings = self.add_weight(
        name="embeddings", shape=[self._num_buckets, self._output_dim],
        initializer=tf.keras.initializers.RandomNormal(stddev=0.1))
    super().build(input_shape)

  def call(self, inputs, training=None):
    """`inputs`: string [batch_size] -> float32 [batch_size, output_dim] (zeros for an empty string)."""
    tokens = tf.strings.split(tf.strings.lower(inputs))
    ids = tf.strings.to_hash_bucket_fast(tokens, self._num_buckets)
    return tf.nn.safe_embedding_lookup_sparse(self._embeddings, ids.to_sparse(), combiner="mean")

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "num_buckets": self._num_buckets, "output_dim": self._output_dim}


class DenseBlockLayer(tf.keras.layers.Layer):
  """Base of the layers built of `DenseBlock`s (the block itself, the pair heads, the class head, the listwise
  item scorer): checks and keeps their one dropout rate and BatchNorm switch, and saves both in the config.

  Args:
    dropout: Dropout rate in [0, 1), active only with `training=True`.
    batch_norm: False replaces BatchNorm by the identity.
  """

  def __init__(self, dropout: float = 0.2, batch_norm: bool = True, **kwargs):
    super().__init__(**kwargs)
    check_range("dropout", dropout, 0.0, 1.0, high_inclusive=False)
    self._dropout = dropout
    self._batch_norm = batch_norm

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "dropout": self._dropout, "batch_norm": self._batch_norm}


@tf.keras.utils.register_keras_serializable(package="pairwise")
class DenseBlock(DenseBlockLayer):
  """Linear-BatchNorm-PReLU-Dropout, the module of the context-aggregating MLP (Rank over Class §3.3).

  The reference code applies Linear-PReLU-BatchNorm; the paper's stated order is used here. BatchNorm uses
  PyTorch's defaults (momentum 0.1 ≙ Keras 0.9, epsilon 1e-5) and PReLU one shared slope initialised to 0.25
  (`nn.PReLU()`).

  Args:
    units: Output width (>= 1).
    dropout: Dropout rate in [0, 1), active only with `training=True`.
    batch_norm: False replaces BatchNorm by the identity.
  """

  def __init__(self, units: int, dropout: float = 0.2, batch_norm: bool = True, **kwargs):
    check_range("units", units, 1)
    super().__init__(dropout, batch_norm, **kwargs)
    self._units = units

  def build(self, input_shape):
    self._linear = tf.keras.layers.Dense(self._units, name="linear")
    self._norm = (tf.keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5, name="batch_norm")
                  if self._batch_norm else None)
    self._prelu = tf.keras.layers.PReLU(
        alpha_initializer=tf.keras.initializers.Constant(0.25), shared_axes=[1], name="prelu")
    # Masks a checkpoint determines: a resumed run trains as an uninterrupted one.
    self._drop = resumable_dropout.ResumableDropout(self._dropout, name="dropout")
    super().build(input_shape)

  def call(self, inputs, training=None):
    """`inputs`: [batch_size, in_dim] -> [batch_size, units]."""
    x = self._linear(inputs)
    if self._norm is not None:
      x = self._norm(x, training=training)
    return self._drop(self._prelu(x), training=training)

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "units": self._units}


def paper_tower(dim: int, dropout: float, batch_norm: bool) -> list[DenseBlock]:
  """The paper's tower of `DenseBlock`s with widths d, d, d/2 (at least 1), named block_1..block_3 (§3.3).

  The context-aggregating MLP, the listwise item scorer and the classifier baseline all stack it.
  """
  widths = (dim, dim, max(dim // 2, 1))
  return [DenseBlock(width, dropout, batch_norm, name=f"block_{i}") for i, width in enumerate(widths,
                                                                                              start=1)]


@tf.keras.utils.register_keras_serializable(package="pairwise")
class ContextAggregatingMLP(DenseBlockLayer):
  """Scores a pair from [z_i ‖ z_j]: 4 layers 2d→d→d→d/2→(1, 1), the two scores f(p_i), f(p_j) (§3.1, Fig. 1).

  Three `DenseBlock`s (widths d, d, d/2) aggregate both passages; two separate linear outputs give the left
  and right scores, so each score depends on both passages and on their order (as in the reference's
  `layer4_left` / `layer4_right`).

  Example:
    head = ContextAggregatingMLP()
    head((tf.ones([4, 8]), tf.zeros([4, 8])))  # [4, 2]: columns f(p_i), f(p_j)

  Args:
    dropout: Dropout after each block, in [0, 1) (paper: 0.2).
    batch_norm: False drops BatchNorm (e.g. for exact per-pair vs group-batched comparisons in training mode).
  """

  def build(self, input_shape):
    dim = int(input_shape[0][-1])
    if dim < 2:
      raise ValueError(f"Embeddings must have at least 2 dimensions for the d/2 layer, got {dim}.")
    self._blocks = paper_tower(dim, self._dropout, self._batch_norm)
    self._left_output = tf.keras.layers.Dense(1, name="left_output")
    self._right_output = tf.keras.layers.Dense(1, name="right_output")
    super().build(input_shape)

  def call(self, inputs, training=None):
    """`inputs`: (z_left [batch_size, d], z_right [batch_size, d]) -> [batch_size, 2] scores."""
    left, right = inputs
    x = tf.concat([left, right], axis=-1)
    for block in self._blocks:
      x = block(x, training=training)
    return tf.concat([self._left_output(x), self._right_output(x)], axis=-1)


@tf.keras.utils.register_keras_serializable(package="pairwise")
class LinearPairHead(tf.keras.layers.Layer):
  """The "w/o MLP" ablation (§4.5, Table 6): one linear layer maps each passage to its own score.

  f(p) = w·z + b with the same w, b for both sides, so the pair scores are pointwise.

  Example:
    LinearPairHead()((z_left, z_right))  # [batch_size, 2]
  """

  def build(self, input_shape):
    self._linear = tf.keras.layers.Dense(1, name="linear")
    super().build(input_shape)

  def call(self, inputs, training=None):
    """`inputs`: (z_left [batch_size, d], z_right [batch_size, d]) -> [batch_size, 2] scores."""
    left, right = inputs
    return tf.concat([self._linear(left), self._linear(right)], axis=-1)


@tf.keras.utils.register_keras_serializable(package="pairwise")
class ClassHead(DenseBlockLayer):
  """Absolute-class head of the double-headed option (§5 future work): DenseBlock(d/2) -> logits.

  Args:
    num_classes: Number of classes (>= 2).
    dropout: Dropout of the hidden block.
    batch_norm: Whether the hidden block uses BatchNorm.
  """

  def __init__(self, num_classes: int, dropout: float = 0.2, batch_norm: bool = True, **kwargs):
    check_range("num_classes", num_classes, 2)
    super().__init__(dropout, batch_norm, **kwargs)
    self._num_classes = num_classes

  def build(self, input_shape):
    self._hidden = DenseBlock(max(int(input_shape[-1]) // 2, 1), self._dropout,
                              self._batch_norm, name="hidden")
    self._logits = tf.keras.layers.Dense(self._num_classes, name="logits")
    super().build(input_shape)

  def call(self, inputs, training=None):
    """`inputs`: [batch_size, d] -> logits [batch_size, num_classes]."""
    return self._logits(self._hidden(inputs, training=training))

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "num_classes": self._num_classes}


def make_head(name: str, dropout: float = 0.2, batch_norm: bool = True) -> tf.keras.layers.Layer:
  """Returns the pair head called `name` (one of `HEADS`).

  Raises:
    ValueError: for an unknown name, listing the allowed ones.
  """
  check_choice("head", name, HEADS)
  if name == "mlp":
    return ContextAggregatingMLP(dropout=dropout, batch_norm=batch_norm, name="head")
  return LinearPairHead(name="head")


def encode_valid_items(encode_fn, items: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
  """Encodes only the real items of padded lists, once each.

  Args:
    encode_fn: Maps items [num_valid] (or [num_valid, d]) to embeddings [num_valid, d].
    items: Strings [num_lists, list_size] or embeddings [num_lists, list_size, d].
    mask: bool [num_lists, list_size], true for real items.

  Returns:
    float32 [num_lists, list_size, d] embeddings, zeros at padding.
  """
  mask = tf.cast(mask, tf.bool)
  shape = tf.shape(mask, out_type=tf.int64)
  flat_items = tf.reshape(items, tf.concat([[-1], tf.shape(items)[2:]], axis=0))
  positions = tf.where(tf.reshape(mask, [-1]))
  embeddings = tf.cast(encode_fn(tf.gather_nd(flat_items, positions)), tf.float32)
  dim = tf.shape(embeddings, out_type=tf.int64)[-1]
  scattered = tf.scatter_nd(positions, embeddings, tf.stack([shape[0] * shape[1], dim]))
  result = tf.reshape(scattered, tf.stack([shape[0], shape[1], dim]))
  result.set_shape(mask.shape.concatenate([embeddings.shape[-1]]))
  return result


def optional_class_head(num_classes: int, dropout: float, batch_norm: bool) -> ClassHead | None:
  """The double-headed option's class head of the pairwise and listwise rankers: a `ClassHead` named
  "class_head" for `num_classes` >= 2, None for 0 (no class head).

  Raises:
    ValueError: for a negative `num_classes` or 1.
  """
  if num_classes < 0 or num_classes == 1:
    raise ValueError(f"`num_classes` must be 0 (no class head) or >= 2, got {num_classes}.")
  return ClassHead(num_classes, dropout, batch_norm, name="class_head") if num_classes else None


def serialize_encoder(layer: tf.keras.layers.Layer | None) -> dict[str, Any] | None:
  """A ranker's item encoder in its config (None: precomputed embeddings)."""
  return None if layer is None else tf.keras.layers.serialize(layer)


def deserialize_encoder(config: dict[str, Any] | None) -> tf.keras.layers.Layer | None:
  """The item encoder `serialize_encoder` wrote."""
  return None if config is None else tf.keras.layers.deserialize(config)


@tf.keras.utils.register_keras_serializable(package="pairwise")
class PairwiseRanker(tf.keras.Model):
  """The pairwise ranking model of Rank over Class (§3.1, Fig. 1): shared encoder, then a pair head.

  Both passages go through the same text encoder (or two copies with `separate_encoders`, the §4.5 ablation);
  the head maps (z_i, z_j) to the two scores f(p_i), f(p_j). E(p_i, p_j) = +1 is predicted when
  f(p_i) > f(p_j). `encode` and `score_embeddings` are exposed so group-batched training and list ranking
  encode each item once.

  Example:
    model = PairwiseRanker(HashedBagOfWordsEncoder(output_dim=16))
    model((tf.constant(["great"]), tf.constant(["awful"])))  # [1, 2]

  Args:
    encoder: Layer mapping items [batch_size] (strings) to [batch_size, d], e.g.
      `rank4class_encoders.text_encoder.TextEncoder`; None when the inputs are precomputed embeddings
      [batch_size, d].
    head: One of `HEADS`.
    separate_encoders: Encode right passages with a second, independently trained copy of `encoder`.
    dropout: Head dropout.
    batch_norm: Head BatchNorm.
    num_classes: > 0 adds the double-headed option's class head on each item embedding; `call` then returns a
      dict with "scores", "left_class_logits" and "right_class_logits".
  """

  def __init__(self, encoder: tf.keras.layers.Layer | None = None, head: str = "mlp",
               separate_encoders: bool = False, dropout: float = 0.2, batch_norm: bool = True,
               num_classes: int = 0, **kwargs):
    super().__init__(**kwargs)
    check_choice("head", head, HEADS)
    if separate_encoders and encoder is None:
      raise ValueError("`separate_encoders=True` needs an `encoder`; got None (precomputed embeddings).")
    check_range("dropout", dropout, 0.0, 1.0, high_inclusive=False)
    self._encoder = encoder
    self._right_encoder = (encoder.__class__.from_config({**encoder.get_config(), "name": "right_encoder"})
                           if separate_encoders else None)
    self._head_name = head
    self._separate_encoders = separate_encoders
    self._dropout = dropout
    self._batch_norm = batch_norm
    self._num_classes = num_classes
    self._head = make_head(head, dropout, batch_norm)
    self._class_head = optional_class_head(num_classes, dropout, batch_norm)

  @property
  def encoder(self) -> tf.keras.layers.Layer | None:
    return self._encoder

  @property
  def num_classes(self) -> int:
    return self._num_classes

  @property
  def separate_encoders(self) -> bool:
    return self._separate_encoders

  @property
  def is_pointwise(self) -> bool:
    """True when the head scores each passage alone (the linear ablation): ranking a list is then a sort."""
    return self._head_name == "linear"

  def encode(self, items: tf.Tensor, side: str = "left", training=None) -> tf.Tensor:
    """Embeds items: strings [batch_size] (or embeddings [batch_size, d]) -> float32 [batch_size, d].

    `side` picks the right-passage encoder when `separate_encoders`; otherwise both sides share one.
    """
    check_choice("side", side, ("left", "right"))
    encoder = self._right_encoder if side == "right" and self._right_encoder is not None else self._encoder
    if encoder is None:
      return tf.cast(items, tf.float32)
    return tf.cast(encoder(items, training=training), tf.float32)

  def encode_lists(self, items: tf.Tensor, mask: tf.Tensor, side: str = "left", training=None) -> tf.Tensor:
    """Embeds each real item of padded lists once: [num_lists, list_size(, d)] -> [num_lists, list_size,
    d]."""
    return encode_valid_items(lambda x: self.encode(x, side, training=training), items, mask)

  def score_embeddings(self, left: tf.Tensor, right: tf.Tensor, training=None) -> tf.Tensor:
    """Pair head on embeddings: (z_left [batch_size, d], z_right [batch_size, d]) -> [batch_size, 2]."""
    return self._head((left, right), training=training)

  def classify(self, embeddings: tf.Tensor, training=None) -> tf.Tensor:
    """Class logits [batch_size, num_classes] of item embeddings [batch_size, d] (double-headed option)."""
    if self._class_head is None:
      raise ValueError("This model has no class head; build it with `num_classes` >= 2.")
    return self._class_head(embeddings, training=training)

  def call(self, inputs, training=None):
    """`inputs`: (left items [batch_size], right items [batch_size]) -> scores [batch_size, 2] (f(p_i),
    f(p_j)).

    With a class head, returns {"scores": [batch_size, 2], "left_class_logits": [batch_size, num_classes],
    "right_class_logits": [batch_size, num_classes]}.
    """
    left_items, right_items = inputs
    left = self.encode(left_items, "left", training=training)
    right = self.encode(right_items, "right", training=training)
    scores = self.score_embeddings(left, right, training=training)
    if self._class_head is None:
      return scores
    # The class of an item does not depend on its side: both use the left (shared) embedding.
    right_shared = self.encode(right_items, "left", training=training) if self._separate_encoders else right
    return {"scores": scores, "left_class_logits": self.classify(left, training=training),
            "right_class_logits": self.classify(right_shared, training=training)}

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "encoder": serialize_encoder(self._encoder), "head": self._head_name,
            "separate_encoders": self._separate_encoders, "dropout": self._dropout,
            "batch_norm": self._batch_norm, "num_classes": self._num_classes}

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    config["encoder"] = deserialize_encoder(config.get("encoder"))
    return cls(**config)
