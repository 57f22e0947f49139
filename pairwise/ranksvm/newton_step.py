"""RankSVM's Newton step: the direction -H^{-1} g of the (smoothed) loss's quadratic model, and the exact line
search along it on the piecewise-quadratic objective (Chapelle 2007, §3-4)."""

import math
from collections.abc import Callable, Iterable

import numpy as np
import scipy.linalg
import scipy.sparse.linalg

from pairwise.ranksvm.pair_passes import PairPasses

# Features above which Newton directions come from conjugate gradients on Hessian-vector products instead of
# a dense [num_features, num_features] Cholesky factorization.
DIRECT_SOLVE_MAX_FEATURES = 1000
# Most passes over the pairs of one exact line search (a handful is usual).
MAX_LINE_SEARCH_PASSES = 100


def _pieces(slack: np.ndarray, loss: str, smoothing: float | None) -> np.ndarray:
  """Which piece of the loss each slack is on: 0 (z <= 0, no loss), 1 (quadratic), 2 (hinge's linear zone)."""
  pieces = (slack > 0.0).astype(np.int8)
  if loss == "hinge":
    pieces[slack >= smoothing] = 2
  return pieces


def _slope_model(t: float, reference: list[np.ndarray] | None, segments: list[tuple[np.ndarray, np.ndarray]],
                 base_a: float, base_b: float, quadratic_scale: float, c: float, loss: str,
                 smoothing: float | None) -> tuple[float, float, int, list[np.ndarray]]:
  """`exact_step`'s model: (a, b) of φ' = a + b t on t's pieces, how many pairs sit on other pieces than in
  `reference`, and the pieces.

  A pair's term -C ℓ'(z - t q) q of φ' is 0 for z - t q <= 0; (-κ z q) + (κ q^2) t on the quadratic piece,
  κ = C/δ (Huber) or 2C (squared hinge, `quadratic_scale`); -C q on the hinge's linear zone z - t q >= δ.
  """
  a, b, moved, all_pieces = base_a, base_b, 0, []
  for index, (z, q) in enumerate(segments):
    pieces = _pieces(z - t * q, loss, smoothing)
    quadratic = pieces == 1
    a -= quadratic_scale * float(np.sum(z * q, where=quadratic))
    b += quadratic_scale * float(np.sum(q * q, where=quadratic))
    if loss == "hinge":
      a -= c * float(np.sum(q, where=pieces == 2))
    if reference is not None:
      moved += int(np.count_nonzero(pieces != reference[index]))
    all_pieces.append(pieces)
  return a, b, moved, all_pieces


def exact_step(base_a: float, base_b: float, chunks: Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]],
                c: float, loss: str, smoothing: float | None) -> float:
  """The exact minimizer t >= 0 of φ(t) = 1/2 ||w + t p||^2 + C Σ_k ℓ(z_k - t q_k), in passes over the pairs.

  φ' is continuous, increasing and piecewise linear. A pass at t puts every pair on its piece of ℓ at
  z_k - t q_k (`_pieces`) and sums its affine terms: φ' = a + b t on t's pieces, with a, b
  starting from the regularizer's w·p (`base_a`) and p·p (`base_b`). The next t is that model's root
  -a / b, kept inside the bracket [lower, upper] of the signs of φ' seen so far (bisection otherwise); it is
  exact as soon as a pass finds the model's root on the same pieces as the model, since then φ'(t) = a + b t
  = 0. This is Newton's method on φ' (a handful of passes at 697k pairs; `MAX_LINE_SEARCH_PASSES` at most,
  then the bracket's lower end, a decrease); each pass holds one chunk's temporaries.

  Args:
    base_a: w·p.
    base_b: p·p > 0.
    chunks: Called once per pass; yields (z, q) chunk pairs of slacks and direction margins q = X p.
    c: C > 0.
    loss: One of `LOSS_NAMES`.
    smoothing: Huber width δ (hinge only).

  Returns:
    The minimizing t; 0 when p is not a descent direction.
  """

  quadratic_scale = c / smoothing if loss == "hinge" else 2.0 * c
  # Pairs with z <= 0 that do not rise (q >= 0) stay on the zero piece for every t >= 0: only the others are
  # kept, compactly, for the passes (at most two floats per pair, usually a fraction).
  segments = []
  for z, q in chunks():
    keep = (z > 0.0) | (q < 0.0)
    segments.append((z[keep], q[keep]))

  def model(t: float, reference: list[np.ndarray] | None) -> tuple[float, float, int, list[np.ndarray]]:
    return _slope_model(t, reference, segments, base_a, base_b, quadratic_scale, c, loss, smoothing)

  a, b, _, pieces = model(0.0, None)
  if a >= 0.0 or b <= 0.0:
    return 0.0
  lower, upper = 0.0, math.inf
  t, reference = -a / b, pieces
  for _ in range(MAX_LINE_SEARCH_PASSES):
    a, b, moved, pieces = model(t, reference)
    if reference is not None and moved == 0:
      return t  # The root of the previous pass's model lies on its pieces: φ'(t) = 0 exactly.
    slope = a + b * t
    if slope == 0.0:
      return t
    if slope < 0.0:
      lower = t
    else:
      upper = t
    if upper < math.inf and upper - lower <= 4.0 * np.finfo(float).eps * upper:
      break
    root = -a / b
    if lower < root < upper:
      t, reference = root, pieces
    else:
      t, reference = 0.5 * (lower + upper), None
  return lower  # φ' < 0 up to lower: a decrease, within rounding of the minimizer.


def curved_pairs(slack: np.ndarray, loss: str, band_width: float | None) -> np.ndarray:
  """The pairs on the quadratic piece of the Newton model: 0 < z < band width (hinge), z > 0 (squared
  hinge)."""
  return (slack > 0.0) & (slack < band_width) if loss == "hinge" else slack > 0.0


def newton_direction(pairs: PairPasses, weights: np.ndarray, scores: np.ndarray, c: float, loss: str,
                      smoothing: float | None, band_width: float | None,
                      max_direct_features: int) -> np.ndarray:
  """The Newton direction p = -H^{-1} g of the model whose quadratic band is (0, band_width) at width δ.

  The model's derivative is ℓ'(z) = z_+ / δ below `band_width` and 1 from it on (hinge; band_width = δ is the
  Huber loss itself, band_width > δ the predictor model after δ shrank), or 2 z_+ (squared hinge); its
  curvature κ = 1/δ (or 2) on the curved pairs (`_curved`). So g = w - C X^T ℓ'(z) and H = I + C κ Σ_curved
  x_k x_k^T, gathered in one pass. Up to `max_direct_features` features H is formed and factorized (Cholesky),
  else conjugate gradients run on Hessian-vector products (a pass each).
  """
  curvature = 1.0 / smoothing if loss == "hinge" else 2.0
  coefficients = np.zeros(pairs.num_rows)
  direct = pairs.num_features <= max_direct_features
  gram = np.zeros((pairs.num_features, pairs.num_features)) if direct else None
  for part in pairs.parts:
    slack = 1.0 - pairs.margins(scores, part)
    if loss == "hinge":
      derivative = np.where(slack >= band_width, 1.0, np.maximum(slack, 0.0) / smoothing)
    else:
      derivative = 2.0 * np.maximum(slack, 0.0)
    pairs.add_scattered(coefficients, part, c * derivative)
    if direct:
      pairs.add_gram(gram, part, np.flatnonzero(curved_pairs(slack, loss, band_width)))
  gradient = weights - pairs.combine(coefficients)
  if direct:
    gram *= c * curvature
    gram[np.diag_indices(pairs.num_features)] += 1.0
    return -scipy.linalg.cho_solve(scipy.linalg.cho_factor(gram), gradient)

  def hessian_vector(v):
    v = np.asarray(v, dtype=np.float64).reshape(-1)
    row_v, product = pairs.row_scores(v), np.zeros(pairs.num_rows)
    for part in pairs.parts:
      curved = curved_pairs(1.0 - pairs.margins(scores, part), loss, band_width)
      pairs.add_scattered(product, part, np.where(curved, pairs.margins(row_v, part), 0.0))
    return v + c * curvature * pairs.combine(product)

  num_features = pairs.num_features
  hessian = scipy.sparse.linalg.LinearOperator((num_features, num_features), matvec=hessian_vector,
                                               dtype=np.float64)
  direction, _ = scipy.sparse.linalg.cg(hessian, -gradient, rtol=1e-10, maxiter=10 * num_features)
  return direction
