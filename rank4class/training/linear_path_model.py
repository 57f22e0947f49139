"""The linear path's model: multinomial logistic regressions of shared inputs, one head per L2 strength (and
per weight of a dense block beside TF-IDF), as one Keras model, and the loss that sums their softmax
cross-entropies (`linear_path` trains it through the engine and chooses a head).

Head k scores `[t(x) ; a_k e(x)] W_k + b_k` (`t` a sparse TF-IDF vector, `e` a dense vector; either may be
absent) and carries the L2 penalty of scikit-learn's `LogisticRegression(C=C_k)`, `||W_k||^2 / (2 C_k n)`.

Example:
  model = LinearPathModel(num_classes=3, tfidf_width=0, dense_width=4, dense_weights=[1.0, 1.0],
                          penalties=[0.01, 0.001])
  model({DENSE_KEY: x})  # [batch_size, 2 heads, 3 classes]
"""

import dataclasses
import math
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class_data.validation import check_range
from rank4class_engine.optimization import losses as losses_lib

TFIDF_KEY = "tfidf"
DENSE_KEY = "dense"


@dataclasses.dataclass(frozen=True)
class Head:
  """One logistic regression of the path.

  Attributes:
    inverse_regularization: scikit-learn's C: the penalty is `||W||^2 / (2 C n)` beside the mean log-loss.
    dense_weight: The dense block's scale a in `[t ; a e]` (1 without TF-IDF; 0: TF-IDF alone).
    prior_weight: p in the dense weights `p P + W` (`PathInputs.prior` P, penalty on W only; 0: plain LR).
  """

  inverse_regularization: float
  dense_weight: float = 1.0
  prior_weight: float = 0.0


def dense_heads(inverse_regularization: tuple[float, ...]) -> list[Head]:
  """The path of one dense input: a head per C, the most regularised (smallest C) first."""
  return [Head(c) for c in sorted(inverse_regularization)]


def hybrid_heads(inverse_regularization: tuple[float, ...], embedding_weights: tuple[float, ...],
                 dense_width: int) -> list[Head]:
  """The path of TF-IDF beside a dense embedding of `dense_width` dimensions: a head per (C, w) with
  `a = w / sqrt(dense_width)` (at w = 1 a standardised embedding is as long as the unit TF-IDF vector), the
  simplest first (smallest C, then smallest w)."""
  return [Head(c, w / math.sqrt(dense_width)) for c in sorted(inverse_regularization)
          for w in sorted(embedding_weights)]


@tf.keras.utils.register_keras_serializable(package="rank4class")
class LinearPathModel(tf.keras.Model):
  """Logistic regressions over shared inputs, one head per `Head`: scores `[batch_size, heads, num_classes]`.

  Inputs: a dict with `TFIDF_KEY` (sparse `[batch_size, tfidf_width]`) and/or `DENSE_KEY` (`[batch_size,
  dense_width]`). Its L2 penalties are added as the model's losses, so Keras' own `train_step` minimises every
  head's objective at once (the heads share no weight, so each one's gradient is its own).

  The TF-IDF kernel is read by a sparse lookup (the rows of the batch's distinct n-grams, gathered once, times
  the batch's TF-IDF over them), so a step's gradient holds those rows only, each once, and a lazy optimizer
  updates them alone (`rank4class_engine.optimization.lazy_adam`): a step costs the batch's n-grams, not the
  vocabulary. Its penalty is taken on those rows too, each weighed by the inverse of the chance that a batch
  holds its n-gram (`touch_weights`), so that the penalty of a step is an unbiased estimate of the whole
  kernel's: the steps minimise the same objective as a dense update does.

  Args:
    num_classes: Classes per head.
    tfidf_width: Width of the sparse input (0: none).
    dense_width: Width of the dense input (0: none).
    dense_weights: Each head's scale of the dense block.
    penalties: Each head's `1 / (2 C n)`.
    touch_weights: `[tfidf_width]` the inverse of the chance that a training batch (of one replica) holds each
      n-gram (0 for n-grams no training row holds); None without TF-IDF.
    sparse_updates: Read the TF-IDF kernel by a lookup (sparse gradients, lazy updates, the penalty estimated
      per batch). False: a sparse-dense matmul, dense gradients and the exact penalty, for several replicas,
      whose all-reduce needs gradients of one shape on every replica.
    prior: `[dense_width, num_classes]` class vectors P: head k adds `p_k (x . P)` to its dense block's
      scores, a fixed offset, never penalised (the few-shot path's class texts); None: none.
    prior_weights: Each head's p (`Head.prior_weight`); None: 0 for every head.
  """

  def __init__(self, num_classes: int, tfidf_width: int, dense_width: int, dense_weights: list[float],
               penalties: list[float], touch_weights: list[float] | None = None, sparse_updates: bool = True,
               prior: list | None = None, prior_weights: list[float] | None = None, **kwargs):
    super().__init__(**kwargs)
    check_range("num_classes", num_classes, 1, integer=True)
    if not tfidf_width and not dense_width:
      raise ValueError("LinearPathModel needs a TF-IDF or a dense input (both widths are 0).")
    if len(dense_weights) != len(penalties) or not penalties:
      raise ValueError(f"One dense weight and one penalty per head: got {len(dense_weights)} and "
                       f"{len(penalties)}.")
    if tfidf_width and (touch_weights is None or len(touch_weights) != tfidf_width):
      raise ValueError(f"`touch_weights` must give one weight per TF-IDF column ({tfidf_width}).")
    self._num_classes = int(num_classes)
    self._tfidf_width, self._dense_width = int(tfidf_width), int(dense_width)
    self._dense_weights, self._penalties = [float(w) for w in dense_weights], [float(p) for p in penalties]
    self._touch_weights = None if touch_weights is None else np.asarray(touch_weights, np.float32)
    self._sparse_updates = bool(sparse_updates)
    # `[dense_width, num_classes]` (a wrong shape raises) and each head's weight of it (`Head.prior_weight`).
    self._prior = None if prior is None else np.asarray(prior, np.float32).reshape([dense_width, num_classes])
    self._prior_weights = [float(p) for p in prior_weights or [0.0] * len(penalties)]
    heads = len(penalties) * self._num_classes
    self.tfidf_kernel = (self.add_weight(name="tfidf_kernel", shape=[self._tfidf_width, heads],
                                         initializer="zeros") if self._tfidf_width else None)
    self.dense_kernel = (self.add_weight(name="dense_kernel", shape=[self._dense_width, heads],
                                         initializer="zeros") if self._dense_width else None)
    self.bias = self.add_weight(name="bias", shape=[heads], initializer="zeros")

  @property
  def num_heads(self) -> int:
    return len(self._penalties)

  @property
  def penalties(self) -> list[float]:
    return self._penalties

  @property
  def dense_weights(self) -> list[float]:
    return self._dense_weights

  def head_weights(self, kernel: tf.Tensor) -> tf.Tensor:
    """A kernel `[width, heads x classes]` as `[width, heads, classes]`."""
    return tf.reshape(kernel, [-1, self.num_heads, self._num_classes])

  def _head_squares(self, rows: tf.Tensor, row_weights: tf.Tensor | None = None) -> tf.Tensor:
    squares = tf.reduce_sum(tf.square(self.head_weights(rows)), axis=2)  # [rows, heads]
    if row_weights is not None:
      squares *= row_weights[:, tf.newaxis]
    return tf.reduce_sum(squares, axis=0)

  def penalty(self) -> tf.Tensor:
    """`sum_k penalty_k ||W_k||^2` over the heads (biases are not penalised, as in scikit-learn)."""
    squares = tf.zeros([self.num_heads])
    for kernel in (self.tfidf_kernel, self.dense_kernel):
      if kernel is not None:
        squares += self._head_squares(kernel)
    return tf.reduce_sum(tf.constant(self._penalties) * squares)

  def batch_penalty(self, tfidf: tf.SparseTensor | None, ngrams: tuple | None = None) -> tf.Tensor:
    """`penalty`'s unbiased estimate from one batch: the dense kernel whole, the TF-IDF kernel's rows of the
    batch's n-grams weighed by `touch_weights` (`ngrams`: the batch's `_batch_ngrams`, given by the call)."""
    squares = tf.zeros([self.num_heads])
    if self.dense_kernel is not None:
      squares += self._head_squares(self.dense_kernel)
    if self.tfidf_kernel is not None:
      ids, rows, _ = ngrams or self._batch_ngrams(tfidf)
      squares += self._head_squares(rows, tf.gather(tf.constant(self._touch_weights), ids))
    return tf.reduce_sum(tf.constant(self._penalties) * squares)

  def _batch_ngrams(self, tfidf: tf.SparseTensor) -> tuple[tf.Tensor, tf.Tensor, tf.SparseTensor]:
    """The batch's distinct n-grams `ids`, their kernel rows, and the batch's TF-IDF over those rows only
    (column j = n-gram `ids[j]`): a step reads and updates each distinct n-gram's row once."""
    ids, positions = tf.unique(tfidf.indices[:, 1])
    local = tf.SparseTensor(tf.stack([tfidf.indices[:, 0], tf.cast(positions, tf.int64)], axis=1),
                            tfidf.values, tf.stack([tfidf.dense_shape[0], tf.cast(tf.size(ids), tf.int64)]))
    return ids, tf.gather(self.tfidf_kernel, ids), local

  def call(self, inputs, training=None):
    logits = tf.reshape(self.bias, [1, self.num_heads, self._num_classes])
    tfidf = inputs.get(TFIDF_KEY)
    ngrams = None
    if self.tfidf_kernel is not None and self._sparse_updates:
      # t . W from the rows of the batch's distinct n-grams: the gradient is those rows only, each once.
      ngrams = self._batch_ngrams(tfidf)
      logits += tf.reshape(tf.sparse.sparse_dense_matmul(ngrams[2], ngrams[1]),
                           [-1, self.num_heads, self._num_classes])
    elif self.tfidf_kernel is not None:
      logits += tf.reshape(tf.sparse.sparse_dense_matmul(tfidf, self.tfidf_kernel),
                           [-1, self.num_heads, self._num_classes])
    if self.dense_kernel is not None:
      dense = tf.reshape(tf.matmul(inputs[DENSE_KEY], self.dense_kernel),
                         [-1, self.num_heads, self._num_classes])
      logits += dense * tf.reshape(tf.constant(self._dense_weights), [1, -1, 1])
      if self._prior is not None:  # Each head's p x (x . P): not a weight, so never penalised.
        prior = tf.matmul(inputs[DENSE_KEY], tf.constant(self._prior))[:, tf.newaxis, :]
        logits += prior * tf.reshape(tf.constant(self._prior_weights), [1, -1, 1])
    if training:
      self.add_loss(self.batch_penalty(tfidf, ngrams) if self._sparse_updates else self.penalty())
    return logits

  def get_config(self) -> dict[str, Any]:
    return {"num_classes": self._num_classes, "tfidf_width": self._tfidf_width,
            "dense_width": self._dense_width, "dense_weights": self._dense_weights,
            "penalties": self._penalties,
            "touch_weights": None if self._touch_weights is None else self._touch_weights.tolist(),
            "sparse_updates": self._sparse_updates, "prior_weights": self._prior_weights,
            "prior": None if self._prior is None else self._prior.tolist(), "name": self.name}


def touch_weights(tfidf: tf.SparseTensor, batch_size: int) -> np.ndarray:
  """For each TF-IDF column, 1 / the chance that a batch of `batch_size` training rows drawn at random holds
  it (0 for a column no row holds): `1 / (1 - (1 - df / n)^batch_size)`."""
  rows = int(tfidf.dense_shape[0])
  frequency = np.bincount(tfidf.indices[:, 1].numpy(), minlength=int(tfidf.dense_shape[1])) / max(rows, 1)
  touched = 1.0 - np.power(1.0 - frequency, batch_size)
  return np.where(touched > 0, 1.0 / np.maximum(touched, 1e-30), 0.0).astype(np.float32)


@tf.keras.utils.register_keras_serializable(package="rank4class")
class HeadsSoftmaxLoss(tf.keras.losses.Loss):
  """TF-Ranking's softmax cross-entropy of every head, summed over the heads: class ids `[batch_size]` against
  scores `[batch_size, heads, num_classes]` (each head's list is the classes, the true one relevant)."""

  def __init__(self, num_classes: int, folds: int = 0, reduction: str = tf.keras.losses.Reduction.AUTO,
               name: str | None = None):
    super().__init__(reduction=reduction, name=name)
    self._num_classes, self._folds = int(num_classes), int(folds)
    self._softmax = losses_lib.get(losses_lib.SOFTMAX, reduction=tf.keras.losses.Reduction.NONE)

  def call(self, y_true, y_pred):
    """`y_true`: class ids, or with `folds` `class id + num_classes x fold`; the heads are `folds + 1` groups
    of equal size, group g < `folds` trained without the rows of fold g, the last on every row."""
    heads = tf.shape(y_pred)[1]
    codes = tf.reshape(tf.cast(y_true, tf.int32), [-1])
    relevance = tf.one_hot(codes % self._num_classes, self._num_classes)
    relevance = tf.reshape(tf.repeat(relevance[:, tf.newaxis, :], heads, axis=1), [-1, self._num_classes])
    per_list = tf.reshape(self._softmax(relevance, tf.reshape(y_pred, [-1, self._num_classes])), [-1, heads])
    if self._folds:
      group = tf.range(heads) // (heads // (self._folds + 1))
      kept = tf.not_equal(group[tf.newaxis, :], (codes // self._num_classes)[:, tf.newaxis])
      per_list *= tf.cast(kept, per_list.dtype)
    return tf.reduce_sum(per_list, axis=1)

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "num_classes": self._num_classes, "folds": self._folds}
