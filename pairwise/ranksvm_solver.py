"""RankSVM's primal solver: Newton's method with a duality-gap certificate (NumPy/SciPy math, no TensorFlow).

The problem, over the pairwise-transformed set x_k (`pair_transform.PairDifferences`, margins m_k = w·x_k with
the sign folded in, slack z_k = 1 - m_k):

    minimize_w  J(w) = 1/2 ||w||^2 + C Σ_k loss(z_k),   loss = hinge max(0, z) or squared hinge max(0, z)^2,

scikit-learn's `LinearSVC(loss=..., fit_intercept=False, C=C)` objective. Following Chapelle (2007), "Training
a support vector machine in the primal", Neural Computation 19(5), §3-4:

- squared hinge: Newton steps with the exact generalized Hessian I + 2C Σ_{z_k > 0} x_k x_k^T and an exact line
  search (the objective is piecewise quadratic, so this terminates in few steps);
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

Costs per Newton step, never forming the [num_pairs, num_features] matrix: X w and X^T α through the rows
(O(num_pairs + num_rows num_features)), the Hessian from the curved pairs only, in chunks, and a line search
that sorts only the breakpoints inside its bracket.
"""

import dataclasses
import math
import time

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse.linalg
from absl import logging

from pairwise.pair_transform import PairDifferences

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


def check_loss(loss: str) -> str:
  """Returns `loss` if it is one of `LOSS_NAMES`, else raises ValueError naming it."""
  if loss not in LOSS_NAMES:
    raise ValueError(f"`loss` must be one of {list(LOSS_NAMES)}, got {loss!r}.")
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
  value = np.where(slack >= smoothing, slack - 0.5 * smoothing, np.where(inside, 0.5 * slack * slack / smoothing,
                                                                          0.0))
  return value, np.clip(slack / smoothing, 0.0, 1.0), inside / smoothing


def _squared_hinge(slack: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  positive = np.maximum(slack, 0.0)
  return positive * positive, 2.0 * positive, 2.0 * (slack > 0.0)


def _loss_terms(slack: np.ndarray, loss: str, smoothing: float | None):
  """(value, first, second derivative in z) of the loss Newton minimizes: Huber for hinge, else squared."""
  return huber_hinge(slack, smoothing) if loss == "hinge" else _squared_hinge(slack)


def _loss_derivative(slack: np.ndarray, loss: str, smoothing: float | None) -> np.ndarray:
  """The first output of `_loss_terms` alone."""
  return np.clip(slack / smoothing, 0.0, 1.0) if loss == "hinge" else 2.0 * np.maximum(slack, 0.0)


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
  """1/2 ||w||^2, the yardstick of the gap; the floor (1e-12 of J(0) = C num_pairs) only matters when w* = 0."""
  return max(0.5 * float(weights @ weights), 1e-12 * c * max(num_pairs, 1))


def _relative(gap: float, weights: np.ndarray, c: float, num_pairs: int) -> float:
  return gap / _scale(weights, c, num_pairs)


def _max_working_set(operator: PairDifferences) -> int:
  """Largest working set of `hinge_working_set_candidate`: free pairs number about the features at the optimum;
  the cap keeps its dense [n, n] least squares cheap."""
  return min(2 * operator.num_features + 32, 512)


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


def _piece_terms(pieces: np.ndarray, slack: np.ndarray, q: np.ndarray, c: float, loss: str,
                 smoothing: float | None) -> tuple[np.ndarray, np.ndarray]:
  """Each pair's term -C ℓ'(z - t q) q of φ'(t) on its piece, as a + b t: ([n] a, [n] b).

  Hinge (Huber δ): 0 for z <= 0, (-C z q / δ) + (C q^2 / δ) t in the band, -C q in the linear zone. Squared
  hinge: 0 for z <= 0, (-2C z q) + (2C q^2) t above.
  """
  scale = c / smoothing if loss == "hinge" else 2.0 * c
  quadratic = pieces == 1
  a = np.where(quadratic, -scale * slack * q, 0.0)
  b = np.where(quadratic, scale * q * q, 0.0)
  if loss == "hinge":
    a = np.where(pieces == 2, -c * q, a)
  return a, b


def line_search(weights: np.ndarray, direction: np.ndarray, slack: np.ndarray, direction_margins: np.ndarray,
                c: float, loss: str, smoothing: float | None) -> float:
  """The exact step t >= 0 minimizing φ(t) = 1/2 ||w + t p||^2 + C Σ_k ℓ(z_k - t q_k).

  φ is convex and piecewise quadratic (ℓ: the squared hinge, or the Huber-smoothed hinge of width
  `smoothing`), so φ' is continuous, increasing and piecewise linear. Doubling from t = 1 (the Newton step)
  brackets the root in [0, T]; the pairs that change piece within [0, T] give the breakpoints, and sweeping
  them in order finds the segment where φ' crosses 0, and the root in it, exactly. Pairs whose slack stays
  at or below 0 along the whole ray never enter; pairs that keep their piece add a fixed affine term.

  Args:
    weights: [num_features] w.
    direction: [num_features] p.
    slack: [num_pairs] z = 1 - X w.
    direction_margins: [num_pairs] q = X p.
    c: C > 0.
    loss: One of `LOSS_NAMES`.
    smoothing: Huber width δ (hinge only).

  Returns:
    The minimizing t; 0 when p is not a descent direction.
  """
  relevant = (slack > 0.0) | (direction_margins < 0.0)
  z, q = slack[relevant], direction_margins[relevant]
  start = _pieces(z, loss, smoothing)
  a, b = _piece_terms(start, z, q, c, loss, smoothing)
  base_a, base_b = float(weights @ direction), float(direction @ direction)  # The regularizer's part.
  slope_a, slope_b = base_a + float(a.sum()), base_b + float(b.sum())
  if slope_a >= 0.0:
    return 0.0

  def slope(t: float) -> float:  # φ'(t)
    return base_a + t * base_b - c * float(_loss_derivative(z - t * q, loss, smoothing) @ q)

  bound = 1.0
  while slope(bound) < 0.0 and bound < 1e30:
    bound *= 2.0
  end = _pieces(z - bound * q, loss, smoothing)
  changing = np.nonzero(start != end)[0]
  z, q, piece = z[changing], q[changing], start[changing]
  # Each changing pair crosses one or two boundaries (hinge: 0 and δ) in order; list every crossing in [0, T].
  times, delta_a, delta_b = [], [], []
  old_a, old_b = a[changing], b[changing]
  for _ in range(2):
    moving = piece != end[changing]
    if not moving.any():
      break
    upward = q < 0.0  # The slack rises along the ray.
    new_piece = np.where(moving, piece + np.where(upward, 1, -1), piece).astype(np.int8)
    if loss != "hinge":
      new_piece = np.minimum(new_piece, 1)
    boundary = np.where(np.maximum(piece, new_piece) == 2, smoothing or 0.0, 0.0)
    new_a, new_b = _piece_terms(new_piece, z, q, c, loss, smoothing)
    times.append(((z - boundary) / q)[moving])
    delta_a.append((new_a - old_a)[moving])
    delta_b.append((new_b - old_b)[moving])
    piece, old_a, old_b = new_piece, new_a, new_b
  if not times:
    return float(-slope_a / slope_b) if slope_b > 0.0 else 0.0
  times, delta_a, delta_b = np.concatenate(times), np.concatenate(delta_a), np.concatenate(delta_b)
  order = np.argsort(times)
  times, delta_a, delta_b = times[order], delta_a[order], delta_b[order]
  # φ' just before crossing i is a_i + b_i t, (a_i, b_i) = the start plus the earlier crossings' changes.
  before_a = slope_a + np.concatenate([[0.0], np.cumsum(delta_a)[:-1]])
  before_b = slope_b + np.concatenate([[0.0], np.cumsum(delta_b)[:-1]])
  crossed = np.nonzero(before_a + before_b * times >= 0.0)[0]
  if crossed.size:
    slope_a, slope_b = before_a[crossed[0]], before_b[crossed[0]]
  else:
    slope_a, slope_b = slope_a + delta_a.sum(), slope_b + delta_b.sum()
  return float(-slope_a / slope_b) if slope_b > 0.0 else 0.0


def newton_direction(operator: PairDifferences, gradient: np.ndarray, curvature: np.ndarray, c: float,
                     max_direct_features: int = DIRECT_SOLVE_MAX_FEATURES) -> np.ndarray:
  """p = -H^{-1} g for H = I + C X^T diag(curvature) X (positive definite).

  Direct (Cholesky of the Gram matrix) up to `max_direct_features` features, else conjugate gradients on
  Hessian-vector products (each O(num_pairs + num_rows num_features)).
  """
  num_features = operator.num_features
  if num_features <= max_direct_features:
    hessian = c * operator.gram(curvature)
    hessian[np.diag_indices(num_features)] += 1.0
    return -scipy.linalg.cho_solve(scipy.linalg.cho_factor(hessian), gradient)
  active = curvature != 0.0

  def hessian_vector(v):
    v = np.asarray(v, dtype=np.float64).reshape(-1)
    return v + c * operator.gram_matvec(np.where(active, curvature, 0.0), v)

  hessian = scipy.sparse.linalg.LinearOperator((num_features, num_features), matvec=hessian_vector,
                                               dtype=np.float64)
  direction, _ = scipy.sparse.linalg.cg(hessian, -gradient, rtol=1e-10, maxiter=10 * num_features)
  return direction


def box_constrained_dual(rows: np.ndarray, linear: np.ndarray, upper: float, max_steps: int = 30) -> np.ndarray:
  """argmin over a in [0, upper]^n of 1/2 ||R^T a||^2 + l^T a + μ/2 ||a||^2, with a tiny ridge μ (best effort).

  This is the hinge dual restricted to the rows r_i of a working set (R^T a = Σ_i a_i r_i). The ridge (1e-10 of
  the mean squared row norm; it moves the value by at most μ/2 n upper^2) makes the problem strictly convex.
  Primal-dual active sets (Hintermüller, Ito & Kunisch 2003): guess which coordinates sit at 0 and at `upper`
  from a - ρ (Q a + l), solve for the others, repeat until the guess holds, usually in a few steps. If it has
  not settled after `max_steps`, BVLS finishes exactly when the problem is small (`BVLS_MAX_FLOPS`); else the
  last point clipped into the box is returned: still feasible, so still a valid (if looser) dual point. The
  callers measure its gap rather than trust it.

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
  bound = slack >= smoothing
  working = (slack > -below) & ~bound
  for _ in range(max_rounds):
    working_ids = np.nonzero(working)[0]
    if working_ids.size > max_free_pairs:
      return None
    alpha = np.where(bound, c, 0.0)
    weights = operator.rmatvec(alpha)
    if working_ids.size:
      rows = operator.rows(working_ids)
      # -D restricted to F: 1/2 a^T (X_F X_F^T) a + (X_F b - 1)^T a + const, b = X^T α outside F.
      alpha[working_ids] = box_constrained_dual(rows, rows @ weights - 1.0, c)
      weights = weights + rows.T @ alpha[working_ids]
    new_slack = 1.0 - operator.matvec(weights)
    wrong_bound = bound & (new_slack < -1e-10)  # α = C although the margin exceeds 1.
    wrong_inactive = ~bound & ~working & (new_slack > 1e-10)  # α = 0 although the margin is below 1.
    if not (wrong_bound.any() or wrong_inactive.any()):
      break
    working |= wrong_bound | wrong_inactive
    bound &= ~wrong_bound
  return weights, alpha, new_slack


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


def solve(operator: PairDifferences, c: float, loss: str = "hinge", tolerance: float = 1e-6,
          max_iterations: int = 200, initial_weights=None,
          max_direct_features: int = DIRECT_SOLVE_MAX_FEATURES) -> SolverResult:
  """Minimizes J(w) by Newton's method until the relative duality gap is at most `tolerance`.

  Logs the primal objective and the gap of every iterate at INFO (absl), and a summary at the end.

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
  check_loss(loss)
  if not c > 0:
    raise ValueError(f"`c` must be positive, got {c}.")
  if not tolerance > 0:
    raise ValueError(f"`tolerance` must be positive, got {tolerance}.")
  if max_iterations < 1:
    raise ValueError(f"`max_iterations` must be >= 1, got {max_iterations}.")
  if operator.num_pairs == 0:
    raise ValueError("No pairs to train on.")
  start = time.perf_counter()
  num_pairs = operator.num_pairs
  weights = (np.zeros(operator.num_features) if initial_weights is None
             else np.array(initial_weights, dtype=np.float64).reshape(operator.num_features))
  smoothing = INITIAL_SMOOTHING if loss == "hinge" else None
  history: list[dict] = []
  step = 0.0
  iteration = 0
  slack = 1.0 - operator.matvec(weights)
  while True:
    primal = primal_objective(weights, 1.0 - slack, c, loss)
    previous_band = None
    while True:
      values, first, second = _loss_terms(slack, loss, smoothing)
      alpha = c * first  # Hinge: C clip(z / δ, 0, 1) in [0, C]; squared hinge: 2C max(0, z) >= 0.
      u = operator.rmatvec(alpha)  # X^T α; the gradient is w - u.
      dual = dual_objective(alpha, u, c, loss)
      gap = max(primal - dual, 0.0)
      if loss != "hinge" or smoothing <= MIN_SMOOTHING:
        break
      # The Huber problem's own gap: P_δ(w) - D_δ(α), D_δ = D - δ/(2C) Σ α^2. When the smoothing part of the
      # hinge gap dominates, only a smaller δ can close it.
      smoothed_gap = 0.5 * weights @ weights + c * values.sum() - (dual - 0.5 * smoothing / c * alpha @ alpha)
      if smoothed_gap > SMOOTHING_DOMINANCE * gap or gap <= tolerance * _scale(weights, c, num_pairs):
        break
      if previous_band is None:
        previous_band = second > 0.0
        # The stage's solution usually shows the hinge optimum's partition: try the working-set solution.
        candidate = hinge_working_set_candidate(operator, slack, smoothing, c, _max_working_set(operator))
        if candidate is not None:
          candidate_weights, candidate_alpha, candidate_slack = candidate
          candidate_primal = primal_objective(candidate_weights, 1.0 - candidate_slack, c, loss)
          candidate_dual = max(dual, dual_objective(candidate_alpha, operator.rmatvec(candidate_alpha), c, loss))
          candidate_gap = max(candidate_primal - candidate_dual, 0.0)
          if candidate_gap <= tolerance * _scale(candidate_weights, c, num_pairs):
            weights, slack, primal, dual, gap = (candidate_weights, candidate_slack, candidate_primal,
                                                 candidate_dual, candidate_gap)
            values, first, second = _loss_terms(slack, loss, smoothing)
            break
      smoothing = max(smoothing * SMOOTHING_SHRINK, MIN_SMOOTHING)
    relative = _relative(gap, weights, c, num_pairs)
    active = int(np.count_nonzero(second))
    history.append({"iteration": iteration, "primal_objective": primal, "duality_gap": gap,
                    "relative_gap": relative, "smoothing": smoothing, "step": step, "active_pairs": active})
    logging.info("RankSVM Newton iteration %d: primal objective %.10g, duality gap %.3g (relative %.3g), "
                 "smoothing %s, step %.3g, %d curved pairs.", iteration, primal, gap, relative, smoothing, step,
                 active)
    converged = relative <= tolerance
    if converged or iteration >= max_iterations:
      break
    gradient = weights - u
    if previous_band is not None:
      # Right after δ shrank, most pairs of the old band sit in the new linear zone, where the Newton model does
      # not see them, although the solution for the smaller δ keeps them in the band (z_k / δ = α_k / C varies
      # little with δ). So the step minimizes the model that keeps the old band quadratic at the new width, a
      # predictor step along the solution path; the line search then measures the true smoothed objective.
      model_first = np.where(previous_band, slack / smoothing, first)
      gradient = weights - c * operator.rmatvec(model_first)
      second = np.where(previous_band | (second > 0.0), 1.0 / smoothing, 0.0)
    direction = newton_direction(operator, gradient, second, c, max_direct_features)
    direction_margins = operator.matvec(direction)
    step = line_search(weights, direction, slack, direction_margins, c, loss, smoothing)
    if step <= 0.0:  # No descent left along the Newton direction: rounding has the last word.
      break
    weights = weights + step * direction
    iteration += 1
    # X (w + t p) = X w + t X p; recomputed from scratch now and then so rounding cannot accumulate.
    slack = 1.0 - operator.matvec(weights) if iteration % 10 == 0 else slack - step * direction_margins
  result = SolverResult(
      weights=weights, converged=converged, iterations=iteration, primal_objective=primal, dual_objective=dual,
      duality_gap=gap, relative_gap=relative, tolerance=tolerance, smoothing=smoothing,
      seconds=time.perf_counter() - start, history=history)
  logging.info("RankSVM Newton (%s, C=%g): %s after %d iterations, primal objective %.10g, duality gap %.3g "
               "(relative %.3g, tolerance %.3g), %.2f s.", loss, c, "converged" if converged else "NOT converged",
               iteration, primal, gap, relative, tolerance, result.seconds)
  return result
