"""The pairwise-transformed set as RankSVM's solver reads it: per-pair margins, scattered coefficients and
Gram sums rebuilt chunk by chunk from [num_rows] vectors, so no per-pair vector outlives a chunk."""

from collections.abc import Callable, Iterator

import numpy as np

from pairwise.ranksvm.pair_transform import PairDifferences

# Pairs per chunk of the solver's passes over the pairs: no per-pair vector is longer.
PAIR_CHUNK = 1 << 16
# Bytes of gathered pair differences the Hessian's accumulation holds at once.
GRAM_CHUNK_BYTES = 1 << 22


class PairPasses:
  """The pairwise-transformed set as the solver reads it: per-pair values rebuilt chunk by chunk from row
  vectors.

  Margins are m_k = s_k (r[first_k] - r[second_k]) for row scores r = Φ w, so the solver keeps [num_rows]
  vectors (Φ w, Φ p, the row coefficients of X^T c = Φ^T (scattered c)) and recomputes per-pair values inside
  chunks of `PAIR_CHUNK` pairs: nothing of length num_pairs outlives a chunk, and the memory is a few
  [num_rows] vectors, one chunk's temporaries and the [num_features, num_features] Hessian. The rows and pair
  indices are `PairDifferences`' own arrays, read in place (it keeps them private; this module is its one
  close partner).
  """

  def __init__(self, operator: PairDifferences, chunk: int | None = None):
    chunk = chunk or PAIR_CHUNK
    self.features = operator._features  # float64 [num_rows, num_features]; read only.
    self.first, self.second, self.signs = operator._first, operator._second, operator._signs
    self.num_rows, self.num_features = self.features.shape
    self.num_pairs = operator.num_pairs
    self.parts = [slice(start, min(start + chunk, self.num_pairs)) for start in range(0,
                                                                                      self.num_pairs, chunk)]

  # Matrix-vector products and dot products go through einsum, not BLAS: on a busy machine OpenBLAS's threads
  # made these memory-bound products 3-250x slower (measured under load 4 on 2 cores), and one thread is as
  # fast.

  def row_scores(self, weights: np.ndarray) -> np.ndarray:
    """Φ w: float64 [num_rows]."""
    return np.einsum("ij,j->i", self.features, weights)

  def combine(self, row_coefficients: np.ndarray) -> np.ndarray:
    """Φ^T r: float64 [num_features]; X^T c for the row coefficients r that `add_scattered` gathers from c."""
    return np.einsum("ij,i->j", self.features, row_coefficients)

  def margins(self, row_scores: np.ndarray, part: slice) -> np.ndarray:
    """s_k (r[first_k] - r[second_k]) for the pairs k in `part`: X w for r = Φ w."""
    return self.signs[part] * (row_scores[self.first[part]] - row_scores[self.second[part]])

  def add_scattered(self, total: np.ndarray, part: slice, coefficients: np.ndarray) -> None:
    """total [num_rows] += the part's share of the row coefficients of X^T c (X^T c = Φ^T total in the
    end)."""
    signed = self.signs[part] * coefficients
    total += np.bincount(self.first[part], signed, minlength=self.num_rows)
    total -= np.bincount(self.second[part], signed, minlength=self.num_rows)

  def rows(self, pair_ids: np.ndarray) -> np.ndarray:
    """x_k of the given pairs: float64 [len(pair_ids), num_features]."""
    rows = self.features[self.first[pair_ids]]
    rows -= self.features[self.second[pair_ids]]
    return rows * self.signs[pair_ids, None]

  def ray(self, scores: np.ndarray, direction_scores: np.ndarray
          ) -> Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]]:
    """For `exact_step`: chunk by chunk, slacks z = 1 - X w and direction margins q = X p from Φ w and Φ p."""

    def chunks():
      for part in self.parts:
        yield 1.0 - self.margins(scores, part), self.margins(direction_scores, part)

    return chunks

  def add_gram(self, total: np.ndarray, part: slice, selected: np.ndarray) -> None:
    """total += Σ_k x_k x_k^T over the pairs `part.start + selected` (signs square away)."""
    step = max(GRAM_CHUNK_BYTES // (8 * self.num_features), 1)
    for start in range(0, selected.size, step):
      ids = selected[start:start + step] + part.start
      rows = self.features[self.first[ids]]
      rows -= self.features[self.second[ids]]
      total += rows.T @ rows  # One operand twice: NumPy calls BLAS syrk.
