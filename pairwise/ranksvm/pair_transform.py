"""The pairwise transform of RankSVM: (x_i - x_j, sign(y_i - y_j)) within each query, balanced by sign flips.

Herbrich et al. (1999) and Joachims (2002) turn ranking into binary classification of feature differences; the
paper's §3.4 applies it. Pairs are formed only inside a query (never across queries) and only between
documents whose labels differ. With no intercept, the hinge loss of (x_i - x_j, +1) equals that of
(x_j - x_i, -1), so flipping the sign of a random half of the pairs leaves the SVM objective unchanged while
giving a classifier such as scikit-learn's LinearSVC the two classes it needs (the seed code produced one
class).

The transformed matrix X [num_pairs, num_features] is used three ways: materialized (`pairwise_differences`,
small sets and tests), as lazy tf.data batches (`pair_dataset`, mini-batch training), and as a linear operator
(`PairDifferences`: X w, X^T c and X^T diag(h) X from the pair indices and the rows alone, the Newton solver's
needs), which never holds more than the rows, the pair indices and a few per-pair vectors.
"""

import dataclasses
import math

import numpy as np
import tensorflow as tf

from rank4class_data.validation import check_choice, check_range

UNPAIRABLE_POLICIES = ("raise", "skip")


@dataclasses.dataclass
class PairIndices:
  """Row-index pairs and their signs.

  Attributes:
    first: int64 [num_pairs], the row whose features are the minuend.
    second: int64 [num_pairs], the subtrahend row (same query as `first`).
    signs: float32 [num_pairs], +1 when row `first` is preferred over `second`, -1 when `second` is.
    num_skipped_queries: Queries that yielded no pair (all labels equal, or fewer than two documents when
      skipping is allowed).
  """

  first: np.ndarray
  second: np.ndarray
  signs: np.ndarray
  num_skipped_queries: int = 0

  @property
  def num_pairs(self) -> int:
    return int(self.first.shape[0])


def preference_pairs(relevance, list_offsets, query_ids: list[str] | None = None,
                     max_pairs_per_query: int | None = None, unpairable: str = "raise",
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
  """All (better, worse) row pairs inside each query.

  Args:
    relevance: [num_rows] labels, higher = better; rows of query q are `list_offsets[q]:list_offsets[q + 1]`.
    list_offsets: int [num_queries + 1].
    query_ids: Optional [num_queries] names used in error messages.
    max_pairs_per_query: If set, a query with more pairs keeps a uniform random sample of this many.
    unpairable: "raise" (a query with fewer than two documents is an error) or "skip" (it yields no pairs).
    seed: Seed of the subsampling.

  Returns:
    (better [num_pairs], worse [num_pairs], num_skipped_queries); pairs are ordered by query, then by the
    better row, then by the worse row.

  Raises:
    ValueError: on a query with fewer than two documents (unless skipped), on malformed offsets, or when no
      query yields a pair.
  """
  check_choice("unpairable", unpairable, UNPAIRABLE_POLICIES)
  if max_pairs_per_query is not None:
    check_range("max_pairs_per_query", max_pairs_per_query, 1)
  relevance = np.asarray(relevance, dtype=np.float64)
  offsets = np.asarray(list_offsets, dtype=np.int64)
  if offsets.ndim != 1 or offsets[0] != 0 or offsets[-1] != len(relevance) or np.any(np.diff(offsets) < 0):
    raise ValueError(f"`list_offsets` must rise from 0 to {len(relevance)} (the number of rows).")
  rng = np.random.default_rng(seed)
  better, worse, skipped = [], [], 0
  for q in range(len(offsets) - 1):
    start, end = int(offsets[q]), int(offsets[q + 1])
    if end - start < 2:
      if unpairable == "raise":
        name = query_ids[q] if query_ids is not None else str(q)
        raise ValueError(
            f"Query {name!r} has {end - start} document(s); a query needs at least two to form pairs. Remove "
            "it, or skip such queries (`skip_unpairable_queries`).")
      skipped += 1
      continue
    labels = relevance[start:end]
    i, j = np.nonzero(labels[:, None] > labels[None, :])
    if i.size == 0:
      skipped += 1
      continue
    if max_pairs_per_query is not None and i.size > max_pairs_per_query:
      keep = np.sort(rng.choice(i.size, size=max_pairs_per_query, replace=False))
      i, j = i[keep], j[keep]
    better.append(i + start)
    worse.append(j + start)
  if not better:
    raise ValueError(
        "No query has two documents with different labels, so there is no preference pair to learn from.")
  return np.concatenate(better), np.concatenate(worse), skipped


def balance_by_sign_flips(better: np.ndarray, worse: np.ndarray, seed: int = 0) -> PairIndices:
  """Flips exactly floor(num_pairs / 2) randomly chosen pairs to (worse, better, -1).

  Args:
    better: int [num_pairs] preferred rows.
    worse: int [num_pairs] rows they are preferred over.
    seed: Seed choosing which pairs flip.

  Returns:
    `PairIndices` with as many -1 as +1 signs (one more +1 for an odd count).
  """
  better = np.asarray(better, dtype=np.int64)
  worse = np.asarray(worse, dtype=np.int64)
  if better.shape != worse.shape or better.ndim != 1:
    raise ValueError(f"`better` and `worse` must be 1-D of equal length; got {better.shape}, {worse.shape}.")
  flip = np.zeros(better.shape[0], dtype=bool)
  flip[np.random.default_rng(seed).permutation(better.shape[0])[: better.shape[0] // 2]] = True
  return PairIndices(
      first=np.where(flip, worse, better), second=np.where(flip, better, worse),
      signs=np.where(flip, -1.0, 1.0).astype(np.float32))


def pairs_within_queries(relevance, list_offsets, query_ids: list[str] | None = None,
                         max_pairs_per_query: int | None = None, unpairable: str = "raise",
                         seed: int = 0) -> PairIndices:
  """`preference_pairs` followed by `balance_by_sign_flips`; see both for the arguments."""
  better, worse, skipped = preference_pairs(relevance, list_offsets, query_ids, max_pairs_per_query,
                                            unpairable, seed)
  pairs = balance_by_sign_flips(better, worse, seed + 1)
  pairs.num_skipped_queries = skipped
  return pairs


def pairwise_differences(features, pairs: PairIndices) -> tuple[np.ndarray, np.ndarray]:
  """Materializes the transformed data set.

  Args:
    features: [num_rows, num_features] Φ(q, d) rows.
    pairs: Row pairs from `pairs_within_queries`.

  Returns:
    (x [num_pairs, num_features] = features[first] - features[second], y [num_pairs] = signs).
  """
  features = np.asarray(features)
  return features[pairs.first] - features[pairs.second], pairs.signs.copy()


def pair_dataset(features, pairs: PairIndices, batch_size: int,
                 shuffle_seed: int | None = 0) -> tf.data.Dataset:
  """A tf.data pipeline of (x_i - x_j, sign) batches that never materializes all differences.

  Only the int64 pair indices ([num_pairs] each), the signs and the feature rows ([num_rows,
  num_features]) are held. Shuffling draws one permutation of the pair ids per pass (8 bytes per pair; a
  `Dataset.shuffle` buffer would hold every pair as its own element, many times that) and every step gathers
  its batch of differences, so nothing runs per pair on the Python or tf.data element level.

  Args:
    features: [num_rows, num_features] Φ(q, d) rows.
    pairs: Row pairs from `pairs_within_queries`.
    batch_size: Pairs per batch.
    shuffle_seed: Seed of the permutations; each pass over the dataset gets a new one (reproducible from the
      seed); None keeps the pair order.

  Returns:
    Dataset of (x float32 [batch_size, num_features], y float32 [batch_size]); the last batch may be smaller.
  """
  check_range("batch_size", batch_size, 1)
  table = tf.constant(np.asarray(features, dtype=np.float32))
  first, second = tf.constant(pairs.first, tf.int64), tf.constant(pairs.second, tf.int64)
  signs = tf.constant(np.asarray(pairs.signs, np.float32))
  num_pairs = pairs.num_pairs
  num_batches = math.ceil(num_pairs / batch_size)
  if shuffle_seed is None:
    orders = tf.data.Dataset.from_tensors(tf.range(num_pairs, dtype=tf.int64))
  else:
    seeds = tf.data.Dataset.random(seed=shuffle_seed, rerandomize_each_iteration=True).take(1)
    orders = seeds.map(lambda seed: tf.random.experimental.stateless_shuffle(
        tf.range(num_pairs, dtype=tf.int64), seed=tf.stack([seed, tf.constant(0, tf.int64)])))

  def batches(order):
    return tf.data.Dataset.range(num_batches).map(lambda b: order[b * batch_size:(b + 1) * batch_size])

  def gather(ids):
    return (tf.gather(table, tf.gather(first, ids)) - tf.gather(table, tf.gather(second, ids)),
            tf.gather(signs, ids))

  dataset = orders.flat_map(batches)
  return dataset.map(gather, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


class PairDifferences:
  """The pairwise-transformed matrix X as a linear operator: row k is x_k = s_k (Φ[first_k] - Φ[second_k]).

  Nothing of size [num_pairs, num_features] is formed. Products go through the rows: X w = s ⊙ (Φw[first] -
  Φw[second]) and X^T c scatters s ⊙ c onto the rows (+ at `first`, - at `second`) and multiplies by Φ^T, both
  O(num_pairs + num_rows num_features); X^T diag(h) X gathers the differences of the pairs with h_k != 0
  `chunk_pairs` at a time (O(num_weighted_pairs num_features^2) flops in BLAS, at most chunk_pairs x
  num_features floats held). Signs s_k = ±1 square away in the Gram matrix.

  Example:
    # Rows [1, 0], [0, 2], [3, 3]; pairs 0 - 1 (+1) and 2 - 0 (-1): X = [[1, -2], [-2, -3]].
    ops = PairDifferences([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]], PairIndices([0, 2], [1, 0], [1.0, -1.0]))
    ops.matvec([1.0, 1.0])        # [-1, -5]
    ops.rmatvec([1.0, 1.0])       # [-1, -5]
    ops.gram([1.0, 1.0])          # X^T X = [[5, 4], [4, 13]]

  Args:
    features: [num_rows, num_features] Φ rows (copied as float64).
    pairs: Row pairs and signs, e.g. from `pairs_within_queries`.
    chunk_pairs: Pair differences materialized at once by `gram`.

  Raises:
    ValueError: for a pair index outside the rows, a sign other than ±1, mismatched lengths, or chunk_pairs <
      1.
  """

  def __init__(self, features, pairs: PairIndices, chunk_pairs: int = 1 << 15):
    check_range("chunk_pairs", chunk_pairs, 1, integer=True)
    self._chunk_pairs = chunk_pairs
    self._features = np.ascontiguousarray(features, dtype=np.float64)
    if self._features.ndim != 2:
      raise ValueError(f"`features` must be [num_rows, num_features], got shape {self._features.shape}.")
    self._first = np.asarray(pairs.first, dtype=np.int64)
    self._second = np.asarray(pairs.second, dtype=np.int64)
    self._signs = np.asarray(pairs.signs, dtype=np.float64)
    if not self._first.shape == self._second.shape == self._signs.shape or self._first.ndim != 1:
      raise ValueError(f"Pair arrays must be 1-D of one length; got first {self._first.shape}, second "
                       f"{self._second.shape}, signs {self._signs.shape}.")
    num_rows = self._features.shape[0]
    for name, rows in (("first", self._first), ("second", self._second)):
      if rows.size and (rows.min() < 0 or rows.max() >= num_rows):
        raise ValueError(f"Pair index `{name}` must lie in [0, {num_rows}), got {rows.min()}..{rows.max()}.")
    if not np.all(np.abs(self._signs) == 1.0):
      raise ValueError("Pair signs must be +1 or -1.")

  @property
  def num_pairs(self) -> int:
    return int(self._first.shape[0])

  @property
  def num_features(self) -> int:
    return int(self._features.shape[1])

  def matvec(self, weights) -> np.ndarray:
    """X w: float64 [num_pairs] (the margins y_k w·x_k of the transformed set) for w [num_features]."""
    scores = self._features @ np.asarray(weights, dtype=np.float64)
    return self._signs * (scores[self._first] - scores[self._second])

  def _scatter(self, coefficients: np.ndarray) -> np.ndarray:
    """[num_rows] r with Φ^T r = X^T c: each pair adds s_k c_k to row `first` and subtracts it from
    `second`."""
    signed = self._signs * coefficients
    num_rows = self._features.shape[0]
    return (np.bincount(self._first, signed, minlength=num_rows)
            - np.bincount(self._second, signed, minlength=num_rows))

  def rmatvec(self, coefficients) -> np.ndarray:
    """X^T c = Σ_k c_k x_k: float64 [num_features] for c [num_pairs]."""
    coefficients = np.asarray(coefficients, dtype=np.float64)
    if coefficients.shape != (self.num_pairs,):
      raise ValueError(f"`coefficients` must be [num_pairs={self.num_pairs}], got {coefficients.shape}.")
    return self._features.T @ self._scatter(coefficients)

  def rows(self, pair_ids) -> np.ndarray:
    """The rows x_k of the given pairs: float64 [len(pair_ids), num_features]."""
    pair_ids = np.asarray(pair_ids, dtype=np.int64)
    return self._signs[pair_ids, None] * (self._features[self._first[pair_ids]]
                                          - self._features[self._second[pair_ids]])

  def gram(self, pair_weights) -> np.ndarray:
    """X^T diag(h) X = Σ_k h_k x_k x_k^T: float64 [num_features, num_features] for h >= 0 [num_pairs].

    Only pairs with h_k > 0 are visited (a Newton step's active pairs), `chunk_pairs` differences at a time.

    Raises:
      ValueError: for a negative or non-finite weight.
    """
    pair_weights = np.asarray(pair_weights, dtype=np.float64)
    if pair_weights.shape != (self.num_pairs,):
      raise ValueError(f"`pair_weights` must be [num_pairs={self.num_pairs}], got {pair_weights.shape}.")
    if not np.all(np.isfinite(pair_weights) & (pair_weights >= 0.0)):
      raise ValueError("`pair_weights` must be finite and >= 0.")
    active = np.nonzero(pair_weights)[0]
    gram = np.zeros((self.num_features, self.num_features))
    for start in range(0, active.size, self._chunk_pairs):
      chunk = active[start:start + self._chunk_pairs]
      rows = self._features[self._first[chunk]] - self._features[self._second[chunk]]
      rows *= np.sqrt(pair_weights[chunk])[:, None]
      gram += rows.T @ rows  # One operand twice: NumPy calls BLAS syrk, several times faster than gemm here.
    return gram
