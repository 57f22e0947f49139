"""The duality gap of an L2-regularised multinomial logistic regression: a certificate of how far a fit's
objective is above its optimum, whatever optimizer made the fit.

The primal over n rows, with an unpenalised bias b and fixed per-row offsets o_i (scores not learned):

  P(W, b) = 1/n sum_i CE(W^T x_i + b + o_i, y_i) + lambda/2 ||W||^2

For any u_i = q_i - e_{y_i} with q_i a distribution over the classes and sum_i u_i = 0 (the bias' condition),

  D(u) = 1/n sum_i [H(q_i) + u_i . o_i] - 1/(2 lambda n^2) ||X^T U||^2

is at most the optimum P* (Fenchel duality: the softmax cross-entropy's conjugate is the negative entropy on
the simplex), so `P(W, b) - D(u)` bounds `P(W, b) - P*` from above, and is 0 only at the optimum. The
certificate takes q_i from the fit's own scores, its biases first moved so that the q_i sum to each class's
rows (a few multiplicative steps; what they leave is closed exactly by mixing each q_i with one shared
distribution), leaves out the classes no row holds (their optimum is at a bias of minus infinity, and the
problem without them has the same infimum and a dual of its own), and keeps the best multiple s u, s in
[0, 1], of the resulting dual direction (far from the optimum, with a weak penalty, s = 1 overshoots).

Example:
  gap = duality_gap(scores, labels, penalty=1 / (2 * C * n), squared_weights=np.sum(w ** 2),
                    transposed_squares=lambda u: np.sum((x.T @ u) ** 2))
  gap.relative  # (P - D) / P: at least the fit's relative distance above its optimum
"""

import dataclasses
from collections.abc import Callable

import numpy as np

_BIAS_STEPS = 20
_BIAS_TOLERANCE = 1e-6  # The rows' mean within this share of each class's frequency: the mix closes the rest.
_SCALE_STEPS = 25  # The step's interval shrinks to 0.618^25 < 1e-5.


@dataclasses.dataclass
class Gap:
  """A fit's primal objective, the dual bound below its optimum, and their gap.

  Attributes:
    primal: P(W, b): the mean cross-entropy plus the penalty.
    dual: D(u) <= P*.
    gap: primal - dual (>= 0 up to rounding).
    relative: gap / primal: at least `(P - P*) / P`.
  """

  primal: float
  dual: float
  gap: float
  relative: float


def _softmax(scores: np.ndarray) -> np.ndarray:
  """Row softmax in a new array (the only `[n, classes]` one it makes)."""
  q = scores - scores.max(axis=1, keepdims=True)
  np.exp(q, out=q)
  q /= q.sum(axis=1, keepdims=True)
  return q


def _balanced(scores: np.ndarray, frequency: np.ndarray) -> np.ndarray:
  """Softmax rows of `scores + delta`, delta a bias shift moved by `log(frequency / mean q)` until the rows'
  mean is within `_BIAS_TOLERANCE` of `frequency` (at most `_BIAS_STEPS` times), then each row mixed with one
  shared distribution so that the mean is `frequency` exactly."""
  delta = np.zeros(scores.shape[1])
  for step in range(_BIAS_STEPS + 1):
    q = _softmax(scores + delta)
    mean = q.mean(axis=0)
    if step == _BIAS_STEPS or np.max(np.abs(mean / frequency - 1.0)) <= _BIAS_TOLERANCE:
      break
    delta += np.log(frequency / np.maximum(mean, 1e-300))
  # The mix (1 - t) q_i + t r keeps every row a distribution and makes the mean `frequency` when
  # r = (frequency - (1 - t) mean) / t >= 0, i.e. t >= 1 - frequency / mean for every class.
  t = float(np.clip(np.max(1.0 - frequency / np.maximum(mean, 1e-300)), 0.0, 1.0))
  if t > 0.0:
    shared = np.maximum((frequency - (1.0 - t) * mean) / t, 0.0)
    q *= 1.0 - t
    q += t * (shared / shared.sum())[np.newaxis, :]
  return q


def _best_scaled_dual(true_share: np.ndarray, other_terms: np.ndarray, offset: float,
                      quadratic: float) -> float:
  """The largest D(s u) over s in [0, 1], u = q - Y (concave in s: a golden-section search). The rows
  `(1 - s) e_y + s q_i` stay distributions and still sum to each class's rows, so every s gives a dual point;
  their entropy is `-s (1 - q_y) log s - s A - m log m` with `m = 1 - s + s q_y`, A = `other_terms` (each
  row's `sum_{j != y} q_j log q_j`) and q_y = `true_share`, so each value costs the rows, not the classes.
  Away from the optimum the fit's own residuals (s = 1) overshoot the penalty's quadratic term where the
  penalty is weak, and a shorter step gives a far tighter bound; at the optimum s = 1 is best."""
  def value(s: float) -> float:
    m = 1.0 - s + s * true_share
    entropy = (-s * (1.0 - true_share) * (np.log(s) if s > 0 else 0.0) - s * other_terms
               - m * np.log(np.where(m > 0, m, 1.0)))
    return float(np.mean(entropy) + s * offset - s * s * quadratic)

  ratio = (np.sqrt(5.0) - 1.0) / 2.0
  low, high = 0.0, 1.0
  left, right = high - ratio, ratio
  at_left, at_right = value(left), value(right)
  for _ in range(_SCALE_STEPS):
    if at_left < at_right:
      low, left, at_left = left, right, at_right
      right = low + ratio * (high - low)
      at_right = value(right)
    else:
      high, right, at_right = right, left, at_left
      left = high - ratio * (high - low)
      at_left = value(left)
  return max(at_left, at_right, value(1.0))


def duality_gap(scores: np.ndarray, labels: np.ndarray, penalty: float, squared_weights: float,
                transposed_squares: Callable[[np.ndarray], float], offsets: np.ndarray | None = None) -> Gap:
  """The gap of one fit.

  Args:
    scores: `[n, classes]` the fit's scores of the training rows, `W^T x_i + b + o_i`.
    labels: `[n]` class ids.
    penalty: lambda / 2, the factor of `||W||^2` (scikit-learn's `1 / (2 C n)`).
    squared_weights: `||W||^2`, every penalised weight.
    transposed_squares: Given U `[n, k]` (columns: the classes some row holds, in order), `||X^T U||^2`.
    offsets: `[n, classes]` the fixed part o_i of `scores`, or None (0).

  Returns:
    The `Gap`.
  """
  scores = np.asarray(scores, np.float64)
  labels = np.asarray(labels, np.int64)
  n, rows = len(labels), np.arange(len(labels))
  top = scores.max(axis=1)
  log_sum = top + np.log(np.sum(np.exp(scores - top[:, np.newaxis]), axis=1))
  primal = float(np.mean(log_sum - scores[rows, labels]) + penalty * squared_weights)
  present = np.flatnonzero(np.bincount(labels, minlength=scores.shape[1]))
  local = np.searchsorted(present, labels)
  q = _balanced(scores if len(present) == scores.shape[1] else scores[:, present],
                np.bincount(local, minlength=len(present)) / n)
  true_share = q[rows, local].copy()
  q_log_q = q * np.log(np.where(q > 0, q, 1.0))
  other_terms = q_log_q.sum(axis=1) - q_log_q[rows, local]
  del q_log_q
  offset = 0.0 if offsets is None else float(
      (np.sum(q * np.asarray(offsets, np.float64)[:, present]) - np.sum(offsets[rows, labels])) / n)
  q[rows, local] -= 1.0  # u = q - Y.
  quadratic = transposed_squares(q) / (4.0 * penalty * n * n)
  dual = _best_scaled_dual(true_share, other_terms, offset, quadratic)
  gap = primal - dual
  return Gap(primal, dual, gap, gap / primal if primal > 0 else 0.0)
