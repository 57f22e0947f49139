"""The TF-IDF instance encoder of Rank4Class (`--text_mode=tfidf`): n-gram TF-IDF in the graph, its vocabulary
and idf weights learned from the training texts (`tfidf_vocabulary`), then a projection."""

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class.modeling import instance_encoder
from rank4class_data import validation
from rank4class_engine.loop import resumable_dropout

# TextVectorization's out-of-vocabulary token: column 0 of a TF-IDF vector counts the n-grams outside the
# vocabulary.
OOV_TOKEN = "[UNK]"
# TF-IDF vocabulary size: on 20 Newsgroups (seed 0, words and pairs) 50,000 n-grams gave 16.5 % top-1 error
# where 20,000 gave 18.4 %; on Reuters R8 20,000 was ~0.3 points better (2 seeds).
DEFAULT_TFIDF_MAX_TOKENS = 50000


def min_document_frequency(num_texts: int) -> int:
  """The least number of training texts an n-gram must occur in to enter the vocabulary of the TF-IDF + LR
  baseline (`rank4class.evaluation.baselines`) and of the TF-IDF candidate of text mode "auto": 2 from 50
  texts on, else 1. An n-gram of one text says nothing about a class, and on a small set these n-grams are
  most of the vocabulary and take most of each unit-length vector from the n-grams texts share. On Drugs.com
  (540 training texts, 29,742 n-grams, 7,297 in 2 texts or more) dropping them lowered the candidate's
  validation log-loss from 0.710 to 0.688."""
  return 2 if num_texts >= 50 else 1


class _Vocabulary(np.ndarray):
  """The n-grams as TextVectorization keeps them: a NumPy array, which Keras does not track (a list becomes a
  tracked ListWrapper that Keras walks entry by entry whenever it flattens the layers or saves them: 0.5 s at
  each `trainable_variables` with 200,000 n-grams), truthy when it holds any, as Keras' `save_assets` tests
  it. What NumPy computes from it (comparisons, reductions) is a plain array."""

  def __bool__(self) -> bool:
    return bool(self.size)

  def __array_wrap__(self, array, context=None, return_scalar=False):
    return np.asarray(array)[()] if return_scalar else np.asarray(array)


def _text_vectorization(max_tokens: int | None, ngrams: int, vocabulary: np.ndarray | None = None,
                        idf_weights: np.ndarray | None = None) -> tf.keras.layers.TextVectorization:
  """TextVectorization in "tf_idf" mode with sparse outputs: lowercased, punctuation stripped, split on
  whitespace, n-grams of 1 to `ngrams` words."""
  return tf.keras.layers.TextVectorization(
      max_tokens=max_tokens, ngrams=ngrams if ngrams > 1 else None, output_mode="tf_idf", sparse=True,
      vocabulary=None if vocabulary is None else np.asarray(vocabulary, dtype=str).view(_Vocabulary),
      idf_weights=None if idf_weights is None else idf_weights)


def tfidf_vocabulary(texts: Sequence[str] | np.ndarray, max_tokens: int = DEFAULT_TFIDF_MAX_TOKENS,
                     ngrams: int = 2, min_df: int = 1) -> tuple[list[str], list[float]]:
  """The vocabulary and idf weights that `TextVectorization.adapt` learns from `texts` (pass the training
  texts only).

  The vocabulary is `OOV_TOKEN`, then the `max_tokens - 1` most frequent n-grams (of 1 to `ngrams` words,
  after lowercasing and stripping punctuation), ties broken by the n-gram (TextVectorization sorts so): a
  function of the multiset of texts alone, so a resumed run rebuilds the same one. idf(t) = log(1 + N / (1 +
  df(t))) over the N texts, df(t) the texts holding t; the OOV token's idf is the mean of the others'.

  With `min_df` > 1 the n-grams of fewer than `min_df` texts leave the vocabulary, and the OOV token's idf is
  0: the n-grams outside the vocabulary then weigh nothing, as scikit-learn's `TfidfVectorizer(min_df=...)`
  drops them (`min_document_frequency`).

  Raises:
    ValueError: for no texts, or settings `TfidfEncoder` rejects.
  """
  _check_tfidf_settings(max_tokens, ngrams, min_df)
  texts = [str(text) for text in np.asarray(texts, dtype=object).reshape([-1])]
  if not texts:
    raise ValueError("A TF-IDF vocabulary needs at least one training text.")
  layer = _text_vectorization(max_tokens, ngrams)
  layer.adapt(tf.data.Dataset.from_tensor_slices(texts).batch(1024))
  vocabulary = [str(token) for token in layer.get_vocabulary()]
  # TextVectorization has no public reader of its adapted idf weights (its config holds only given ones).
  idf_weights = layer._lookup_layer.idf_weights.numpy()[:len(vocabulary)].astype(np.float64)
  if min_df > 1:
    # df from idf = log(1 + N / (1 + df)); rounded, it is exact for the small counts the threshold compares.
    document_frequency = np.rint(len(texts) / np.expm1(idf_weights) - 1)
    keep = document_frequency >= min_df
    keep[0] = True  # The OOV token stays column 0, at idf 0.
    vocabulary = [token for token, kept in zip(vocabulary, keep, strict=True) if kept]
    idf_weights = idf_weights[keep]
    idf_weights[0] = 0.0
  return vocabulary, [float(w) for w in idf_weights]


def _check_tfidf_settings(max_tokens: int, ngrams: int, min_df: int = 1) -> None:
  validation.check_range("max_tokens", max_tokens, 2, integer=True)  # The OOV token and one n-gram.
  validation.check_range("ngrams", ngrams, 1, integer=True)
  validation.check_range("min_df", min_df, 1, integer=True)


@tf.keras.utils.register_keras_serializable(package="rank4class")
class TfidfEncoder(instance_encoder.InstanceEncoder):
  """Encodes raw strings as TF-IDF bags of n-grams, in the graph, projected to `output_dim` (or through an
  MLP).

  A `tf.keras.layers.TextVectorization(output_mode="tf_idf", sparse=True)` lowercases, strips punctuation,
  splits on whitespace and weighs the n-grams of a vocabulary learned on the training texts
  (`tfidf_vocabulary`, or `adapt`): x_t = count(t) * idf(t), or with `sublinear_tf` (1 + log count(t)) *
  idf(t) (as scikit-learn's `sublinear_tf`: a word repeated in a long text counts less), n-grams outside the
  vocabulary counted in column 0. The vector is scaled to unit length (`l2_normalize`, as scikit-learn's
  `TfidfVectorizer` does), dropped out in training, then mapped by `hidden_units` ReLU layers (none by
  default: a linear model on TF-IDF) and a linear layer to `output_dim`. The sparse vector is never densified:
  the first layer gathers the kernel rows of the n-grams present.

  The vocabulary and idf weights are arguments and part of the config, so the encoder saves and reloads with
  its model (`tf.keras.models.load_model` after `import rank4class`, or the SavedModel's signature alone).

  Example:
    encoder = TfidfEncoder(output_dim=16)
    encoder.adapt(["a good film", "a bad plot"])
    encoder(tf.constant(["good plot"])).shape  # [1, 16]

  Args:
    output_dim: Size of the embedding.
    max_tokens: Vocabulary size `adapt` keeps, the OOV token included.
    ngrams: N-grams of 1 to `ngrams` words (2: words and word pairs).
    min_df: `adapt` keeps the n-grams of at least `min_df` texts (`tfidf_vocabulary`); 1 keeps every n-gram.
    sublinear_tf: Weigh an n-gram by 1 + log of its count in the text instead of the count.
    l2_normalize: Scale each TF-IDF vector to unit length before the layers.
    dropout: Dropout rate on the TF-IDF entries of a text (training), in [0, 1).
    hidden_units: Widths of ReLU layers before the output layer; empty for a linear projection.
    vocabulary: The n-grams in column order, `OOV_TOKEN` first (prepended when missing); None until `adapt`.
    idf_weights: Their idf weights, same length (the OOV token's, when prepended, is the mean).
    initial_kernel: Optional initial kernel of the linear projection `[len(vocabulary), output_dim]` (rows in
      the vocabulary's column order, `OOV_TOKEN` first), e.g. a logistic regression's weights
      (`rank4class.training.linear_candidates.logistic_regression_model`); not part of the config: the
      checkpoint and the export hold the trained kernel.

  Call inputs: string `[batch_size]` (or `[batch_size, 1]`).
  Returns: `[batch_size, output_dim]`.

  Raises:
    ValueError: for bad settings, a vocabulary without idf weights (or of another length), or a call before
      the encoder has a vocabulary.
  """

  input_dtype = tf.string

  def __init__(
    self,
    output_dim: int = 128,
    max_tokens: int = DEFAULT_TFIDF_MAX_TOKENS,
    ngrams: int = 2,
    min_df: int = 1,
    sublinear_tf: bool = False,
    l2_normalize: bool = True,
    dropout: float = 0.0,
    hidden_units: tuple[int, ...] = (),
    vocabulary: Sequence[str] | None = None,
    idf_weights: Sequence[float] | None = None,
    initial_kernel: np.ndarray | None = None,
    **kwargs,
  ):
    super().__init__(**kwargs)
    validation.check_range("output_dim", output_dim, 1, integer=True)
    _check_tfidf_settings(max_tokens, ngrams, min_df)
    self._initial_kernel = None
    if initial_kernel is not None:
      kernel = np.asarray(initial_kernel, np.float32)
      if hidden_units or kernel.ndim != 2 or kernel.shape[1] != output_dim or not np.all(np.isfinite(kernel)):
        raise ValueError("`initial_kernel` must be finite values of shape [len(vocabulary), "
                         f"output_dim={output_dim}] for a linear projection (no hidden_units), got shape "
                         f"{list(kernel.shape)}.")
      self._initial_kernel = kernel
    self._output_dim = int(output_dim)
    self._max_tokens = int(max_tokens)
    self._ngrams = int(ngrams)
    self._min_df = int(min_df)
    self._sublinear_tf = bool(sublinear_tf)
    self._l2_normalize = bool(l2_normalize)
    self._dropout = instance_encoder.check_dropout(dropout)
    self._hidden_units = validation.check_widths("hidden_units", hidden_units, allow_empty=True)
    if (vocabulary is None) != (idf_weights is None):
      raise ValueError("Give both `vocabulary` and `idf_weights` (TextVectorization's tf_idf mode needs "
                       "both), or neither and `adapt` the encoder.")
    self._vocabulary = self._idf_weights = self._vectorizer = None
    if vocabulary is not None:
      self._set_vocabulary(vocabulary, idf_weights)

  def _set_vocabulary(self, vocabulary: Sequence[str], idf_weights: Sequence[float]) -> None:
    # NumPy arrays, not lists: Keras would track a list attribute and walk its ~10^4 entries whenever it
    # flattens the layers.
    vocabulary = np.asarray([str(token) for token in vocabulary], dtype=object)
    idf_weights = np.asarray(idf_weights, dtype=np.float64).reshape([-1])
    if len(vocabulary) != len(idf_weights) or not len(vocabulary):
      raise ValueError(f"`vocabulary` ({len(vocabulary)} n-grams) and `idf_weights` ({len(idf_weights)}) "
                       "must be non-empty and of the same length.")
    if vocabulary[0] != OOV_TOKEN:  # As TextVectorization pads it: the OOV token weighs the mean idf.
      vocabulary = np.concatenate([[OOV_TOKEN], vocabulary])
      idf_weights = np.concatenate([[np.mean(idf_weights)], idf_weights])
    self._vocabulary = vocabulary
    self._idf_weights = idf_weights.astype(np.float32)
    self._vectorizer = _text_vectorization(None, self._ngrams, self._vocabulary, self._idf_weights)

  def adapt(self, texts: Sequence[str] | np.ndarray) -> None:
    """Learns the vocabulary and idf weights from `texts` (`tfidf_vocabulary`); call it with training texts
    only.

    Raises:
      ValueError: once the encoder is built (its first layer's rows are the vocabulary's).
    """
    if self.built:
      raise ValueError("TfidfEncoder is built: its first layer has one row per n-gram of its vocabulary; "
                       "adapt a new encoder instead.")
    self._set_vocabulary(*tfidf_vocabulary(texts, self._max_tokens, self._ngrams, self._min_df))

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
      raise ValueError("TfidfEncoder has no vocabulary: `adapt` it on the training texts, or give "
                       "`vocabulary` and `idf_weights`.")
    self._seen_input_shape = tf.TensorShape(input_shape)
    self._dropout_layer = resumable_dropout.ResumableDropout(self._dropout) if self._dropout > 0 else None
    self._dense_layers = [tf.keras.layers.Dense(units, activation="relu", name=f"dense_{i}")
                          for i, units in enumerate(self._hidden_units)]
    self._projection = tf.keras.layers.Dense(
        self._output_dim, name="projection",
        kernel_initializer=(instance_encoder.FittedValues(self._initial_kernel)
                            if self._initial_kernel is not None else "glorot_uniform"))
    width = len(self._vocabulary)
    if self._initial_kernel is not None and self._initial_kernel.shape[0] != width:
      raise ValueError(f"`initial_kernel` has {self._initial_kernel.shape[0]} rows, but the vocabulary has "
                       f"{width} n-grams (the OOV token included).")
    for layer in (*self._dense_layers, self._projection):  # Sparse inputs carry no static width: built here.
      layer.build(tf.TensorShape([None, width]))
      width = layer.units
    super().build(input_shape)

  def features(self, inputs, dtype: tf.DType = tf.float32) -> tf.SparseTensor:
    """The (optionally sublinear, unit-length) TF-IDF vectors of strings `[batch_size]`: sparse
    `[batch_size, len(vocabulary)]`, what the layers read (before dropout)."""
    if self._vectorizer is None:
      raise ValueError("TfidfEncoder has no vocabulary: `adapt` it on the training texts, or give "
                       "`vocabulary` and `idf_weights`.")
    tfidf = self._vectorizer(inputs)  # SparseTensor [batch_size, len(vocabulary)]
    values = tfidf.values
    # count * idf -> (1 + log count) * idf; an idf of 0 (the OOV token's with min_df) stays 0.
    if self._sublinear_tf:
      idf = tf.gather(tf.constant(self._idf_weights), tfidf.indices[:, 1])
      counts = tf.maximum(tf.round(tf.math.divide_no_nan(values, idf)), 1.0)
      values = (1.0 + tf.math.log(counts)) * idf
    values = tf.cast(values, dtype)
    if self._l2_normalize:
      rows = tfidf.indices[:, 0]
      norms = tf.math.unsorted_segment_sum(tf.square(values), rows, tfidf.dense_shape[0])
      values *= tf.gather(tf.math.rsqrt(tf.maximum(norms, tf.cast(1e-12, values.dtype))), rows)
    return tf.SparseTensor(tfidf.indices, values, tfidf.dense_shape)

  def call(self, inputs, training=None):
    tfidf = self.features(inputs, self.compute_dtype)
    values = tfidf.values
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
      "min_df": self._min_df,
      "sublinear_tf": self._sublinear_tf,
      "l2_normalize": self._l2_normalize,
      "dropout": self._dropout,
      "hidden_units": list(self._hidden_units),
      "vocabulary": self.vocabulary,
      "idf_weights": None if self._idf_weights is None else [float(w) for w in self._idf_weights],
    }
