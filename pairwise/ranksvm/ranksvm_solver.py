"""RankSVM's primal solver: Newton's method with a duality-gap certificate (NumPy/SciPy math, no TensorFlow).

The problem, over the pairwise-transformed set x_k (`pair_transform.PairDifferences`, margins m_k = w·x_k with
the sign folded in, slack z_k = 1 - m_k):

    minimize_w  J(w) = 1/2 ||w||^2 + C Σ_k loss(z_k),   loss = hinge max(0, z) or squared hinge max(0, z)^2,

scikit-learn's `LinearSVC(loss=..., fit_intercept=False, C=C)` objective. Following Chapelle (2007), "Training
a support vector machine in the primal", Neural Computation 19(5), §3-4:

- squared hinge: Newton steps with the exact generalized Hessian I + 2C Σ_{z_k > 0} x_k x_k^T and an exact
  line search (the objective is piecewise quadratic, so this terminates in few steps);
- hinge: Newton on the Huber-smoothed hinge (z^2 / (2δ) for 0 < z < δ, z - δ/2 above) with Hessian
  I + (C/δ) Σ_{0 < z_k < δ} x_k x_k^T, and continuation: δ shrinks tenfold (warm start, first step along the
  solution path) whenever the smoothing, not the optimization, dominates the hinge problem's duality gap. At
  each such point the smoothed solution's zones also suggest the hinge optimum's partition into bound, free
  and inactive pairs; the dual restricted to the few free pairs is a small box-constrained quadratic program
  (`hinge_working_set_candidate`), whose solution is taken when its own gap certifies it.

Convergence is certified, not assumed. Each iterate w yields a dual-feasible point α (hinge: α_k = C
clip(z_k / δ, 0, 1) ∈ [0, C], the smoothed loss's derivative; squared hinge: α_k = 2C max(0, z_k)), and the
duality gap G = J(w) - D(α) of the *unsmoothed* problem, with

    hinge:          D(α) = Σ α_k - 1/2 ||X^T α||^2,                       0 <= α <= C,
    squared hinge:  D(α) = Σ α_k - 1/2 ||X^T α||^2 - Σ α_k^2 / (4C),      α >= 0,

bounds J(w) - J(w*) <= G. J is 1-strongly convex, so 1/2 ||w - w*||^2 <= J(w) - J(w*) <= G: the solver stops
when G <= tolerance · 1/2 ||w||^2, which guarantees ||w - w*|| <= sqrt(tolerance) ||w|| (the weights, not just
the objective, are close; tolerance 1e-6 gives 0.1 %). With the Huber α, the hinge gap is exactly the
smoothed problem's own gap plus C Σ_{0 < z_k < δ} z_k (1 - z_k / δ) <= C δ / 4 per pair inside the smoothing
band, which is what tells the solver when to shrink δ.

Costs per Newton step, never forming the [num_pairs, num_features] matrix nor keeping any per-pair vector
(`_PairPasses`): the solver holds the row scores Φ w (and Φ p), and every margin, slack, α and sum is rebuilt
from them inside chunks of `PAIR_CHUNK` pairs, each pass O(num_pairs + num_rows num_features). A step takes
a pass for the sums of the objectives and the gap (one more per shrink of δ), one for the gradient and the
Hessian (gathered from the curved pairs only, `GRAM_CHUNK_BYTES` at a time), and a few for the exact line
search (Newton's method on the piecewise-linear φ'(t), `exact_step`), which keeps z and X p of the pairs that
can still move (at most two floats per pair). At 100k rows × 50 features and 697k pairs the solver's peak
allocation is 0.42x the float64 rows (bench/ranksvm_vs_lightgbm.py, docs/BENCHMARKS.md).
"""

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse.linalg

from pairwise.ranksvm.pair_transform import PairDifferences
from rank4class_data.validation import check_choice, check_range

_logger = logging.getLogger(__name__)

LOSS_NAMES = ("hinge", "squared_hinge")
# Continuation of the hinge's Huber smoothing: first width, shrink factor, smallest width.
INITIAL_SMOOTHING = 1.0
SMOOTHING_SHRINK = 0.1
MIN_SMOOTHING = 1e-12
# δ shrinks once the smoothed problem's own gap is below this fraction of the hinge gap.
SMOOTHING_DOMINANCE = 0.25
# Features above which Newton directions come from conjugate gradients on Hessian-vector products instead of
# a dense [num_features, num_features] Cholesky factorization.
DIRECT_SOLVE_MAX_FEATURES = 1000
# Working-set duals fall back on BVLS only below this estimated cost (n^3 (n + num_features) flops).
BVLS_MAX_FLOPS = 2e8
# Pairs per chunk of the solver's passes over the pairs: no per-pair vector is longer.
PAIR_CHUNK = 1 << 16
# Bytes of gathered pair differences the Hessian's accumulation holds at once.
GRAM_CHUNK_BYTES = 1 << 22
# Most passes over the pairs of one exact line search (a handful is usual).
MAX_LINE_SEARCH_PASSES = 100


def check_loss(loss: str) -> str:
  """Returns `loss` if it is one of `LOSS_NAMES`, else raises ValueError naming it."""
  check_choice("loss", loss, LOSS_NAMES)
  return loss


def slack_losses(slack: np.ndarray, loss: str) -> np.ndarray:
  """Per-pair loss of the slacks z = 1 - m: max(0, z) (hinge) or max(0, z)^2 (squared hinge)."""
  positive = np.maximum(slack, 0.0)
  return positive if check_loss(loss) == "hinge" else positive * positive


def primal_objective(weights, margins, c: float, loss: str) -> float:
  """J(w) = 1/2 ||w||^2 + C Σ_k loss(1 - m_k).

  Args:
    weights: [num_features] w.
    margins: [num_pairs] m_k = w·x_k (sign folded in).
    c: C > 0.
    loss: One of `LOSS_NAMES`.

  Returns:
    J(w) as a float.
  """
  weights = np.asarray(weights, dtype=np.float64)
  slack = 1.0 - np.asarray(margins, dtype=np.float64)
  return float(0.5 * weights @ weights + c * slack_losses(slack, loss).sum())


def dual_objective(alpha, weights_of_alpha, c: float, loss: str) -> float:
  """D(α) = Σ α_k - 1/2 ||u||^2 (- Σ α_k^2 / (4C) for the squared hinge), with u = X^T α.

  Args:
    alpha: [num_pairs] dual variables, feasible: 0 <= α <= C (hinge) or α >= 0 (squared hinge).
    weights_of_alpha: [num_features] u = X^T α = Σ_k α_k x_k.
    c: C > 0.
    loss: One of `LOSS_NAMES`.

  Returns:
    D(α), a lower bound on min_w J(w).
  """
  alpha = np.asarray(alpha, dtype=np.float64)
  u = np.asarray(weights_of_alpha, dtype=np.float64)
  value = alpha.sum() - 0.5 * u @ u
  if check_loss(loss) == "squared_hinge":
    value -= alpha @ alpha / (4.0 * c)
  return float(value)


def huber_hinge(slack: np.ndarray, smoothing: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """The Huber-smoothed hinge of slacks z with width δ: (value, dvalue/dz in [0, 1], d²value/dz²).

  value = 0 for z <= 0, z^2 / (2δ) for 0 < z < δ, z - δ/2 for z >= δ; it lies within δ/2 of max(0, z).
  """
  inside = (slack > 0.0) & (slack < smoothing)
  value = np.where(slack >= smoothing, slack - 0.5 * smoothing,
                   np.where(inside, 0.5 * slack * slack / smoothing,
                                                                          0.0))
  return value, np.clip(slack / smoothing, 0.0, 1.0), inside / smoothing


def _squared_hinge(slack: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  positive = np.maximum(slack, 0.0)
  return positive * positive, 2.0 * positive, 2.0 * (slack > 0.0)


def _loss_terms(slack: np.ndarray, loss: str, smoothing: float | None):
  """(value, first, second derivative in z) of the loss Newton minimizes: Huber for hinge, else squared."""
  return huber_hinge(slack, smoothing) if loss == "hinge" else _squared_hinge(slack)


@dataclasses.dataclass
class Certificate:
  """How far weights are from the optimum, by weak duality.

  Attributes:
    primal_objective: J(w).
    dual_objective: D(α) of the dual-feasible α derived from w; min J >= D(α).
    duality_gap: J(w) - D(α) >= J(w) - min J >= 1/2 ||w - w*||^2.
    relative_gap: duality_gap / max(1/2 ||w||^2, tiny): ||w - w*|| <= sqrt(relative_gap) ||w||.
  """

  primal_objective: float
  dual_objective: float
  duality_gap: float
  relative_gap: float


def _scale(weights: np.ndarray, c: float, num_pairs: int) -> float:
  """1/2 ||w||^2, the yardstick of the gap; the floor (1e-12 of J(0) = C num_pairs) only matters when w* =
  0."""
  return max(0.5 * float(weights @ weights), 1e-12 * c * max(num_pairs, 1))


def _relative(gap: float, weights: np.ndarray, c: float, num_pairs: int) -> float:
  return gap / _scale(weights, c, num_pairs)


def _max_working_set(operator: PairDifferences) -> int:
  """Largest working set of `hinge_working_set_candidate`: free pairs number about the features at the
  optimum; the cap keeps its dense [n, n] least squares cheap."""
  return min(2 * operator.num_features + 32, 512)


class _PairPasses:
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


def certificate(operator: PairDifferences, weights, c: float, loss: str) -> Certificate:
  """The duality gap of any weights (e.g. from a stochastic optimizer), with the best of a few dual points.

  Squared hinge: α = 2C max(0, z). Hinge: α = C clip(z / δ, 0, 1) for δ in 1, 0.1, ..., 1e-8, the
  subgradient choice α = C [z > 0], and the working-set duals (`hinge_working_set_candidate`) of the pairs
  with |z| < δ for δ = 1e-2, 1e-4, 1e-6, and each of them rescaled by its best factor in [0, 1] (hinge) or
  [0, ∞) (squared hinge), keeping the largest D(α): near the optimum the working-set duals are close to
  the optimal dual, so the gap of a nearly optimal w is small.

  Args:
    operator: The pairwise-transformed set.
    weights: [num_features] w.
    c: C > 0.
    loss: One of `LOSS_NAMES`.

  Returns:
    The `Certificate` of w.
  """
  weights = np.asarray(weights, dtype=np.float64)
  slack = 1.0 - operator.matvec(weights)
  primal = primal_objective(weights, 1.0 - slack, c, loss)
  if check_loss(loss) == "squared_hinge":
    candidates = [2.0 * c * np.maximum(slack, 0.0)]
  else:
    candidates = [c * np.clip(slack / delta, 0.0, 1.0) for delta in 10.0 ** -np.arange(9.0)]
    candidates.append(c * (slack > 0.0))
    for delta in (1e-2, 1e-4, 1e-6):
      working_set = hinge_working_set_candidate(operator, slack, delta, c, _max_working_set(operator),
                                                below=delta)
      if working_set is not None:
        candidates.append(working_set[1])
  dual = -math.inf
  for alpha in candidates:
    u = operator.rmatvec(alpha)
    # s α stays feasible for 0 <= s <= 1 (hinge; any s >= 0 for the squared hinge), and D(s α) is a concave
    # parabola in s: its best s rescues a dual point whose X^T α overshoots.
    curvature = u @ u + (alpha @ alpha / (2.0 * c) if loss == "squared_hinge" else 0.0)
    best = alpha.sum() / curvature if curvature > 0.0 else 1.0
    best = min(best, 1.0) if loss == "hinge" else best
    dual = max(dual, dual_objective(alpha, u, c, loss), dual_objective(best * alpha, best * u, c, loss))
  gap = max(primal - dual, 0.0)
  return Certificate(primal, dual, gap, _relative(gap, weights, c, operator.num_pairs))


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


def _curved(slack: np.ndarray, loss: str, band_width: float | None) -> np.ndarray:
  """The pairs on the quadratic piece of the Newton model: 0 < z < band width (hinge), z > 0 (squared
  hinge)."""
  return (slack > 0.0) & (slack < band_width) if loss == "hinge" else slack > 0.0


def _newton_direction(pairs: _PairPasses, weights: np.ndarray, scores: np.ndarray, c: float, loss: str,
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
      pairs.add_gram(gram, part, np.flatnonzero(_curved(slack, loss, band_width)))
  gradient = weights - pairs.combine(coefficients)
  if direct:
    gram *= c * curvature
    gram[np.diag_indices(pairs.num_features)] += 1.0
    return -scipy.linalg.cho_solve(scipy.linalg.cho_factor(gram), gradient)

  def hessian_vector(v):
    v = np.asarray(v, dtype=np.float64).reshape(-1)
    row_v, product = pairs.row_scores(v), np.zeros(pairs.num_rows)
    for part in pairs.parts:
      curved = _curved(1.0 - pairs.margins(scores, part), loss, band_width)
      pairs.add_scattered(product, part, np.where(curved, pairs.margins(row_v, part), 0.0))
    return v + c * curvature * pairs.combine(product)

  num_features = pairs.num_features
  hessian = scipy.sparse.linalg.LinearOperator((num_features, num_features), matvec=hessian_vector,
                                               dtype=np.float64)
  direction, _ = scipy.sparse.linalg.cg(hessian, -gradient, rtol=1e-10, maxiter=10 * num_features)
  return direction


def box_constrained_dual(rows: np.ndarray, linear: np.ndarray, upper: float,
                         max_steps: int = 30) -> np.ndarray:
  """argmin over a in [0, upper]^n of 1/2 ||R^T a||^2 + l^T a + μ/2 ||a||^2, with a tiny ridge μ (best
  effort).

  This is the hinge dual restricted to the rows r_i of a working set (R^T a = Σ_i a_i r_i). The ridge (1e-10
  of the mean squared row norm; it moves the value by at most μ/2 n upper^2) makes the problem strictly
  convex. Primal-dual active sets (Hintermüller, Ito & Kunisch 2003): guess which coordinates sit at 0 and at
  `upper` from a - ρ (Q a + l), solve for the others, repeat until the guess holds, usually in a few steps. If
  it has not settled after `max_steps`, BVLS finishes exactly when the problem is small (`BVLS_MAX_FLOPS`);
  else the last point clipped into the box is returned: still feasible, so still a valid (if looser) dual
  point. The callers measure its gap rather than trust it.

  Args:
    rows: [n, num_features] R.
    linear: [n] l.
    upper: Upper bound > 0.
    max_steps: Most active-set guesses.

  Returns:
    float64 [n] in [0, upper]: the minimizer when the active sets settled.
  """
  n = linear.size
  ridge = 1e-10 * max(float(np.mean(np.sum(rows * rows, axis=1))), 1e-300)
  quadratic = rows @ rows.T
  quadratic[np.diag_indices(n)] += ridge
  step = 1.0 / max(float(np.mean(np.diag(quadratic))), 1e-300)
  a = np.zeros(n)
  gradient = linear.copy()
  previous = None
  for _ in range(max_steps):
    trial = a - step * gradient
    at_lower, at_upper = trial <= 0.0, trial >= upper
    free = ~at_lower & ~at_upper
    guess = (at_lower.tobytes(), at_upper.tobytes())
    if guess == previous:
      break
    previous = guess
    a = np.where(at_upper, upper, 0.0)
    if free.any():
      rhs = -(linear[free] + quadratic[np.ix_(free, at_upper)].sum(axis=1) * upper)
      a[free] = scipy.linalg.solve(quadratic[np.ix_(free, free)], rhs, assume_a="pos")
    gradient = quadratic @ a + linear
    feasible = np.all((a[free] >= 0.0) & (a[free] <= upper))
    if feasible and np.all(gradient[at_lower] >= 0.0) and np.all(gradient[at_upper] <= 0.0):
      return a  # The KKT conditions hold: feasible, and no coordinate at a bound wants to move inside.
  if n * (n + rows.shape[1]) * n * n <= BVLS_MAX_FLOPS:
    # Unsettled (active sets can cycle when Q is singular but for the ridge): BVLS (Stark & Parker 1995)
    # solves the same problem exactly as bounded least squares ||M a + y||^2 / 2, M = [R^T; √μ I] and y the
    # least-norm solution of M^T y = l (so the constant 1/2 ||y||^2 does not swamp its stopping test), at
    # about n least-squares solves of M's columns: done only while that is cheap.
    design = np.concatenate([rows.T, math.sqrt(ridge) * np.eye(n)])
    offset = np.linalg.lstsq(design.T, linear, rcond=None)[0]
    a = scipy.optimize.lsq_linear(design, -offset, bounds=(0.0, upper), method="bvls", tol=1e-15,
                                  max_iter=10 * n + 100).x
  return np.clip(a, 0.0, upper)


BOUND, WORKING, INACTIVE = 2, 1, 0  # Pair states of the working-set step.


@dataclasses.dataclass
class _WorkingSetSolution:
  """A hinge primal-dual pair from `_working_set_solution`: α = C on the bound pairs, `working_alpha` on
  `working_ids`, 0 elsewhere; weights = X^T α.

  Attributes:
    weights: [num_features] w = X^T α.
    row_scores: [num_rows] Φ w.
    working_ids: Pair ids of the working set.
    working_alpha: Their α, in [0, C].
    dual_objective: D(α) = Σ α - 1/2 ||w||^2.
    primal_objective: J(w).
  """

  weights: np.ndarray
  row_scores: np.ndarray
  working_ids: np.ndarray
  working_alpha: np.ndarray
  dual_objective: float
  primal_objective: float


def _working_set_solution(pairs: _PairPasses, state: np.ndarray, c: float, max_free_pairs: int,
                          max_rounds: int = 5) -> _WorkingSetSolution | None:
  """The working-set step of `hinge_working_set_candidate` on int8 pair states (`BOUND`, `WORKING`,
  `INACTIVE`), updated in place while rounds remain; None when the working set outgrows `max_free_pairs`."""
  for last in [False] * (max_rounds - 1) + [True]:
    if np.count_nonzero(state == WORKING) > max_free_pairs:
      return None
    working_ids = np.flatnonzero(state == WORKING)
    coefficients = np.zeros(pairs.num_rows)
    for part in pairs.parts:
      pairs.add_scattered(coefficients, part, np.where(state[part] == BOUND, c, 0.0))
    weights = pairs.combine(coefficients)
    alpha_sum = c * np.count_nonzero(state == BOUND)
    working_alpha = np.zeros(0)
    if working_ids.size:
      rows = pairs.rows(working_ids)
      # -D restricted to F: 1/2 a^T (X_F X_F^T) a + (X_F b - 1)^T a + const, b = X^T α outside F.
      working_alpha = box_constrained_dual(rows, rows @ weights - 1.0, c)
      weights = weights + rows.T @ working_alpha
      alpha_sum += float(working_alpha.sum())
    scores = pairs.row_scores(weights)
    hinge_sum, wrong = 0.0, 0
    for part in pairs.parts:
      slack = 1.0 - pairs.margins(scores, part)
      hinge_sum += float(np.maximum(slack, 0.0).sum())
      states = state[part]  # A view: writes reach `state`.
      # α = C although the margin exceeds 1, or α = 0 although it is below 1: such pairs join the working set.
      contradicted = ((states == BOUND) & (slack < -1e-10)) | ((states == INACTIVE) & (slack > 1e-10))
      wrong += int(np.count_nonzero(contradicted))
      if not last:
        states[contradicted] = WORKING
    if not wrong:
      break
  half_norm = 0.5 * float(weights @ weights)
  return _WorkingSetSolution(weights, scores, working_ids, working_alpha, alpha_sum - half_norm,
                             half_norm + c * hinge_sum)


def _initial_states(slack: np.ndarray, smoothing: float, below: float) -> np.ndarray:
  """int8 states of a smoothed iterate's zones: z >= δ bound, -below < z < δ working, the rest inactive."""
  return np.where(slack >= smoothing, BOUND, np.where(slack > -below, WORKING, INACTIVE)).astype(np.int8)


def hinge_working_set_candidate(operator: PairDifferences, slack: np.ndarray, smoothing: float, c: float,
                                max_free_pairs: int, max_rounds: int = 5, below: float = 0.0
                                ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
  """A hinge primal-dual pair from the partition a smoothed solution suggests (a working-set dual step).

  At the hinge optimum every pair is bound (α = C, margin <= 1), free (0 <= α <= C, margin 1) or inactive
  (α = 0, margin >= 1); free pairs are few (about as many as features). The smoothed iterate's zones give the
  partition (linear zone z >= δ -> bound, the band -> working set, the rest -> inactive). With those α
  fixed, the dual restricted to the working set F (-below < z < δ) is a small box-constrained
  quadratic program, max over α_F in [0, C]^F of Σ α - 1/2 ||X^T α||^2 (`box_constrained_dual`), solved
  directly; pairs outside F whose margin then
  contradicts their α join F and it is solved again, a few rounds at most. Whatever the partition, w = X^T α
  is a primal point and α is dual-feasible, so their gap is a valid certificate.

  Args:
    operator: The pairwise-transformed set.
    slack: [num_pairs] z = 1 - X w of the smoothed iterate.
    smoothing: Its Huber width δ.
    c: C > 0.
    max_free_pairs: Give up (None) when the working set grows beyond this many pairs.
    max_rounds: Most working-set updates.
    below: The working set also takes pairs with -below < z <= 0: 0 for a smoothed iterate (whose band is
      (0, δ)), δ for weights from elsewhere, whose free pairs may sit on either side of the margin.

  Returns:
    (w [num_features], α [num_pairs] in [0, C], slack of w [num_pairs]), or None.
  """
  state = _initial_states(np.asarray(slack, dtype=np.float64), smoothing, below)
  solution = _working_set_solution(_PairPasses(operator), state, c, max_free_pairs, max_rounds)
  if solution is None:
    return None
  alpha = np.where(state == BOUND, c, 0.0)
  alpha[solution.working_ids] = solution.working_alpha
  return solution.weights, alpha, 1.0 - operator.matvec(solution.weights)


@dataclasses.dataclass
class _PassSums:
  """Sums over the pairs at one iterate and Huber width (`_pass_sums`).

  Attributes:
    loss: Σ_k loss(z_k), the unsmoothed loss.
    model_loss: Σ_k of the loss Newton minimizes (Huber of width δ for the hinge, else the squared hinge).
    alpha_sum: Σ α_k, α = C times that loss's derivative (dual feasible).
    alpha_squares: Σ α_k^2.
    alpha_rows: [num_rows] row coefficients of X^T α.
    curved: Pairs on the quadratic piece.
  """

  loss: float
  model_loss: float
  alpha_sum: float
  alpha_squares: float
  alpha_rows: np.ndarray
  curved: int


def _pass_sums(pairs: _PairPasses, scores: np.ndarray, c: float, loss: str,
               smoothing: float | None) -> _PassSums:
  """One pass over the pairs at row scores Φ w: the sums the objectives, the dual point and the gap need."""
  sums = _PassSums(0.0, 0.0, 0.0, 0.0, np.zeros(pairs.num_rows), 0)
  for part in pairs.parts:
    slack = 1.0 - pairs.margins(scores, part)
    values, first, second = _loss_terms(slack, loss, smoothing)
    alpha = c * first  # Hinge: C clip(z / δ, 0, 1) in [0, C]; squared hinge: 2C max(0, z) >= 0.
    pairs.add_scattered(sums.alpha_rows, part, alpha)
    sums.loss += float(slack_losses(slack, loss).sum())
    sums.model_loss += float(values.sum())
    sums.alpha_sum += float(alpha.sum())
    sums.alpha_squares += float(np.einsum("i,i->", alpha, alpha))
    sums.curved += int(np.count_nonzero(second))
  return sums


def _dual(sums: _PassSums, pairs: _PairPasses, c: float, loss: str) -> float:
  """D(α) of the pass's α (`dual_objective` from its sums)."""
  u = pairs.combine(sums.alpha_rows)
  value = sums.alpha_sum - 0.5 * float(u @ u)
  return value - sums.alpha_squares / (4.0 * c) if loss == "squared_hinge" else value


@dataclasses.dataclass
class SolverResult:
  """What the solver reached.

  Attributes:
    weights: float64 [num_features], the last iterate.
    converged: Whether relative_gap <= tolerance.
    iterations: Newton steps taken.
    primal_objective: J(weights).
    dual_objective: D(α) of the final dual-feasible α.
    duality_gap: J - D >= J(weights) - min J.
    relative_gap: duality_gap / (1/2 ||weights||^2); ||w - w*|| <= sqrt(relative_gap) ||w||.
    tolerance: The relative gap asked for.
    smoothing: Final Huber width δ (hinge), None for the squared hinge.
    seconds: Wall-clock seconds of the solve.
    history: Per iteration (from 0, the start): {"iteration", "primal_objective", "duality_gap",
      "relative_gap", "smoothing", "step", "active_pairs"}.
  """

  weights: np.ndarray
  converged: bool
  iterations: int
  primal_objective: float
  dual_objective: float
  duality_gap: float
  relative_gap: float
  tolerance: float
  smoothing: float | None
  seconds: float
  history: list[dict] = dataclasses.field(default_factory=list)

  def summary(self) -> dict:
    """JSON-ready report (everything but the weights and the history)."""
    return {"method": "newton", "converged": self.converged, "iterations": self.iterations,
            "primal_objective": self.primal_objective, "dual_objective": self.dual_objective,
            "duality_gap": self.duality_gap, "relative_gap": self.relative_gap, "tolerance": self.tolerance,
            "smoothing": self.smoothing, "seconds": self.seconds}


def _check_solve_arguments(operator: PairDifferences, c: float, loss: str, tolerance: float,
                           max_iterations: int) -> None:
  """Raises ValueError for the arguments `solve` refuses."""
  check_loss(loss)
  check_range("c", c, 0.0, low_inclusive=False)
  check_range("tolerance", tolerance, 0.0, low_inclusive=False)
  check_range("max_iterations", max_iterations, 1)
  if operator.num_pairs == 0:
    raise ValueError("No pairs to train on.")


def _continue_smoothing(pairs: _PairPasses, operator: PairDifferences, weights: np.ndarray,
                        scores: np.ndarray, sums: _PassSums, primal: float, c: float, loss: str,
                        smoothing: float | None, tolerance: float):
  """The dual objective and gap at `weights`, shrinking the Huber width δ while the smoothing dominates the
  gap (after trying the working-set solution once, which replaces the iterate when it closes the gap).

  Returns:
    (weights, scores, sums, primal, dual, gap, smoothing, band_width): `band_width` is the width before δ
    shrank in this call, if it did, else None.
  """
  num_pairs = operator.num_pairs
  band_width = None  # The Huber width before δ shrank in this iteration, if it did.
  while True:
    dual = _dual(sums, pairs, c, loss)
    gap = max(primal - dual, 0.0)
    if loss != "hinge" or smoothing <= MIN_SMOOTHING:
      break
    # The Huber problem's own gap: P_δ(w) - D_δ(α), D_δ = D - δ/(2C) Σ α^2. When the smoothing part of the
    # hinge gap dominates, only a smaller δ can close it.
    smoothed_gap = (0.5 * float(weights @ weights) + c * sums.model_loss
                    - (dual - 0.5 * smoothing / c * sums.alpha_squares))
    if smoothed_gap > SMOOTHING_DOMINANCE * gap or gap <= tolerance * _scale(weights, c, num_pairs):
      break
    if band_width is None:
      band_width = smoothing
      # The stage's solution usually shows the hinge optimum's partition: try the working-set solution.
      state = np.empty(num_pairs, dtype=np.int8)
      for part in pairs.parts:
        state[part] = _initial_states(1.0 - pairs.margins(scores, part), smoothing, 0.0)
      candidate = _working_set_solution(pairs, state, c, _max_working_set(operator))
      del state
      if candidate is not None:
        candidate_dual = max(dual, candidate.dual_objective)
        candidate_gap = max(candidate.primal_objective - candidate_dual, 0.0)
        if candidate_gap <= tolerance * _scale(candidate.weights, c, num_pairs):
          weights, scores, primal, dual, gap = (candidate.weights, candidate.row_scores,
                                                candidate.primal_objective, candidate_dual, candidate_gap)
          sums = _pass_sums(pairs, scores, c, loss, smoothing)
          break
    smoothing = max(smoothing * SMOOTHING_SHRINK, MIN_SMOOTHING)
    sums = _pass_sums(pairs, scores, c, loss, smoothing)
  return weights, scores, sums, primal, dual, gap, smoothing, band_width


def _log_iteration(iteration: int, primal: float, gap: float, relative: float, smoothing: float | None,
                   step: float, active: int) -> dict:
  """Logs one Newton iteration at INFO; returns its history record."""
  _logger.info("RankSVM Newton iteration %d: primal objective %.10g, duality gap %.3g (relative %.3g), "
               "smoothing %s, step %.3g, %d curved pairs.", iteration, primal, gap, relative, smoothing,
               step, active)
  return {"iteration": iteration, "primal_objective": primal, "duality_gap": gap,
          "relative_gap": relative, "smoothing": smoothing, "step": step, "active_pairs": active}


def _log_result(result: SolverResult, loss: str, c: float) -> None:
  _logger.info("RankSVM Newton (%s, C=%g): %s after %d iterations, primal objective %.10g, duality gap %.3g "
               "(relative %.3g, tolerance %.3g), %.2f s.", loss, c,
               "converged" if result.converged else "NOT converged",
               result.iterations, result.primal_objective, result.duality_gap, result.relative_gap,
               result.tolerance, result.seconds)


def solve(operator: PairDifferences, c: float, loss: str = "hinge", tolerance: float = 1e-6,
          max_iterations: int = 200, initial_weights=None,
          max_direct_features: int = DIRECT_SOLVE_MAX_FEATURES) -> SolverResult:
  """Minimizes J(w) by Newton's method until the relative duality gap is at most `tolerance`.

  Logs the primal objective and the gap of every iterate at INFO (stdlib logging), and a summary at the end.

  Args:
    operator: The pairwise-transformed set (`pair_transform.PairDifferences`).
    c: C > 0.
    loss: "hinge" (Huber continuation) or "squared_hinge".
    tolerance: Relative duality gap to reach, > 0: G <= tolerance · 1/2 ||w||^2.
    max_iterations: Most Newton steps; the result says whether the gap was reached.
    initial_weights: Optional [num_features] warm start (default zeros).
    max_direct_features: Above this many features, Newton directions come from conjugate gradients.

  Returns:
    `SolverResult`; `converged` is False when `max_iterations` ran out first.

  Raises:
    ValueError: for C <= 0, an unknown loss, tolerance <= 0, max_iterations < 1 or an empty pair set.
  """
  _check_solve_arguments(operator, c, loss, tolerance, max_iterations)
  start = time.perf_counter()
  num_pairs, pairs = operator.num_pairs, _PairPasses(operator)
  weights = (np.zeros(operator.num_features) if initial_weights is None
             else np.array(initial_weights, dtype=np.float64).reshape(operator.num_features))
  smoothing = INITIAL_SMOOTHING if loss == "hinge" else None
  history: list[dict] = []
  step, iteration = 0.0, 0
  scores = pairs.row_scores(weights)  # Φ w: every margin, slack and sum is rebuilt from it chunk by chunk.
  while True:
    sums = _pass_sums(pairs, scores, c, loss, smoothing)
    primal = 0.5 * float(weights @ weights) + c * sums.loss
    weights, scores, sums, primal, dual, gap, smoothing, band_width = _continue_smoothing(
        pairs, operator, weights, scores, sums, primal, c, loss, smoothing, tolerance)
    relative = _relative(gap, weights, c, num_pairs)
    history.append(_log_iteration(iteration, primal, gap, relative, smoothing, step, sums.curved))
    converged = relative <= tolerance
    if converged or iteration >= max_iterations:
      break
    # Right after δ shrank, most pairs of the old band sit in the new linear zone, where the Newton model does
    # not see them, although the solution for the smaller δ keeps them in the band (z_k / δ = α_k / C varies
    # little with δ). So the step minimizes the model that keeps the old band quadratic at the new width, a
    # predictor step along the solution path; the line search then measures the true smoothed objective.
    direction = _newton_direction(pairs, weights, scores, c, loss, smoothing,
                                  band_width if band_width is not None else smoothing, max_direct_features)
    step = exact_step(float(weights @ direction), float(direction @ direction),
                       pairs.ray(scores, pairs.row_scores(direction)), c, loss, smoothing)
    if step <= 0.0:  # No descent left along the Newton direction: rounding has the last word.
      break
    weights = weights + step * direction
    scores = pairs.row_scores(weights)
    iteration += 1
  result = SolverResult(
      weights=weights, converged=converged, iterations=iteration, primal_objective=primal,
      dual_objective=dual, duality_gap=gap, relative_gap=relative, tolerance=tolerance, smoothing=smoothing,
      seconds=time.perf_counter() - start, history=history)
  _log_result(result, loss, c)
  return result
