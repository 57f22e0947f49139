"""Listwise and double-headed options (Rank over Class §5 future work) on TF-Ranking listwise losses.

Listwise: an item scorer f(p) (the encoder, then the paper's Linear-BatchNorm-PReLU blocks d→d→d/2→1 on one
passage) scores every item of a group-batched list, and a TF-Ranking listwise loss ("softmax": softmax
cross-entropy; "approx_ndcg": ApproxNDCG) compares the list's scores with its graded labels.

Double-headed: a class head (`margin_model.ClassHead`) on each item embedding predicts the absolute class; its
softmax cross-entropy, averaged over the real items of a batch, is added to the ranking loss with a weight.
Both the pairwise `margin_model.PairwiseRanker` and the `ListwiseRanker` here take `num_classes` for it.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from pairwise.margin import aggregate, margin_model
from rank4class_data.validation import check_choice, check_range
from rank4class_engine.optimization import losses

LISTWISE_LOSSES = (losses.SOFTMAX, losses.APPROX_NDCG)


def get_listwise_loss(name: str, **kwargs) -> tf.keras.losses.Loss:
  """The registry's loss `name` (one of `LISTWISE_LOSSES`) with per-list outputs (reduction NONE).

  Labels < 0 mark padding (TF-Ranking convention). `kwargs` go to the TF-Ranking constructor (e.g.
  `temperature`).

  Raises:
    ValueError: for an unknown name, listing the allowed ones.
  """
  check_choice("objective", name, LISTWISE_LOSSES)
  return losses.get(name, reduction=tf.keras.losses.Reduction.NONE, **kwargs)


def listwise_loss_values(loss: tf.keras.losses.Loss, labels: tf.Tensor, scores: tf.Tensor) -> tf.Tensor:
  """Per-list losses [num_lists] from labels [num_lists, n] (-1 = padding) and scores [num_lists, n]."""
  labels = tf.convert_to_tensor(labels, tf.float32)
  # Padding scores are irrelevant to TF-Ranking (masked by label), but a huge sentinel would hurt ApproxNDCG.
  scores = tf.where(labels >= 0, tf.convert_to_tensor(scores, tf.float32), 0.0)
  return tf.reshape(loss(labels, scores), [-1])


def class_loss_values(class_logits: tf.Tensor, classes: tf.Tensor, num_classes: int) -> tf.Tensor:
  """Softmax cross-entropy per item: logits [num_items, num_classes], classes int [num_items] -> [num_items].

  Raises (at run time) when a class id is outside [0, num_classes): labels out of range are errors.
  """
  classes = tf.cast(classes, tf.int64)
  check = tf.debugging.assert_less(
      classes, tf.cast(num_classes, tf.int64), message="class label >= num_classes of the class head")
  check_low = tf.debugging.assert_non_negative(classes, message="negative class label")
  with tf.control_dependencies([check, check_low]):
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=classes, logits=class_logits)


@tf.keras.utils.register_keras_serializable(package="pairwise")
class ItemScoringHead(margin_model.DenseBlockLayer):
  """Scores one passage: blocks d→d→d/2 (Linear-BatchNorm-PReLU-Dropout) then a linear output.

  Example:
    ItemScoringHead()(tf.ones([3, 8]))  # [3]

  Args:
    dropout: Dropout rate in [0, 1).
    batch_norm: Whether the blocks use BatchNorm.
  """

  def build(self, input_shape):
    dim = int(input_shape[-1])
    self._blocks = margin_model.paper_tower(dim, self._dropout, self._batch_norm)
    self._output = tf.keras.layers.Dense(1, name="output")
    super().build(input_shape)

  def call(self, inputs, training=None):
    """`inputs`: [batch_size, d] -> scores [batch_size]."""
    x = inputs
    for block in self._blocks:
      x = block(x, training=training)
    return tf.squeeze(self._output(x), axis=-1)


@tf.keras.utils.register_keras_serializable(package="pairwise")
class ListwiseRanker(tf.keras.Model):
  """Per-item ranking model for listwise losses, optionally double-headed (Rank over Class §5).

  Example:
    model = ListwiseRanker(margin_model.HashedBagOfWordsEncoder(output_dim=16), num_classes=3)
    model(tf.constant(["great", "awful"]))  # {"scores": [2], "class_logits": [2, 3]}

  Args:
    encoder: Layer mapping items [batch_size] to [batch_size, d]; None for precomputed embeddings.
    dropout: Head dropout.
    batch_norm: Head BatchNorm.
    num_classes: > 0 adds the class head; `call` then returns {"scores", "class_logits"}.
  """

  def __init__(self, encoder: tf.keras.layers.Layer | None = None, dropout: float = 0.2,
               batch_norm: bool = True, num_classes: int = 0, **kwargs):
    super().__init__(**kwargs)
    check_range("dropout", dropout, 0.0, 1.0, high_inclusive=False)
    self._encoder = encoder
    self._dropout = dropout
    self._batch_norm = batch_norm
    self._num_classes = num_classes
    self._head = ItemScoringHead(dropout, batch_norm, name="head")
    self._class_head = margin_model.optional_class_head(num_classes, dropout, batch_norm)

  @property
  def encoder(self) -> tf.keras.layers.Layer | None:
    return self._encoder

  @property
  def num_classes(self) -> int:
    return self._num_classes

  def encode(self, items: tf.Tensor, training=None) -> tf.Tensor:
    """Items [batch_size] (strings) or embeddings [batch_size, d] -> float32 [batch_size, d]."""
    if self._encoder is None:
      return tf.cast(items, tf.float32)
    return tf.cast(self._encoder(items, training=training), tf.float32)

  def encode_lists(self, items: tf.Tensor, mask: tf.Tensor, training=None) -> tf.Tensor:
    """Embeds each real item of padded lists once: [num_lists, n(, d)] -> [num_lists, n, d]."""
    return margin_model.encode_valid_items(lambda x: self.encode(x, training=training), items, mask)

  def score_embeddings(self, embeddings: tf.Tensor, training=None) -> tf.Tensor:
    """[..., d] -> scores [...]."""
    dim = embeddings.shape[-1]
    flat = self._head(tf.reshape(embeddings, [-1, dim]), training=training)
    return tf.reshape(flat, tf.shape(embeddings)[:-1])

  def classify(self, embeddings: tf.Tensor, training=None) -> tf.Tensor:
    """Class logits [..., num_classes] of embeddings [..., d]."""
    if self._class_head is None:
      raise ValueError("This model has no class head; build it with `num_classes` >= 2.")
    dim = embeddings.shape[-1]
    flat = self._class_head(tf.reshape(embeddings, [-1, dim]), training=training)
    return tf.reshape(flat, tf.concat([tf.shape(embeddings)[:-1], [self._num_classes]], axis=0))

  def score_lists(self, items: tf.Tensor, mask: tf.Tensor, training=None) -> tf.Tensor:
    """Scores [num_lists, n] of padded lists, `aggregate.PADDING_SCORE` at padding."""
    mask = tf.cast(mask, tf.bool)
    scores = self.score_embeddings(self.encode_lists(items, mask, training=training), training=training)
    return tf.where(mask, scores, aggregate.PADDING_SCORE)

  def call(self, inputs, training=None):
    """`inputs`: items [batch_size] -> scores [batch_size] (or {"scores", "class_logits"} with a class
    head)."""
    embeddings = self.encode(inputs, training=training)
    scores = self.score_embeddings(embeddings, training=training)
    if self._class_head is None:
      return scores
    return {"scores": scores, "class_logits": self.classify(embeddings, training=training)}

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(),
            "encoder": margin_model.serialize_encoder(self._encoder),
            "dropout": self._dropout, "batch_norm": self._batch_norm, "num_classes": self._num_classes}

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    config["encoder"] = margin_model.deserialize_encoder(config.get("encoder"))
    return cls(**config)
