"""RankSVM's duality-gap certificates: the gap of any weights (`certificate`, the best of a few dual-feasible
points), and the hinge's working-set dual step, which supplies the best of them near the optimum and lets the
solver jump to the hinge optimum once the smoothed solution shows its partition."""

import dataclasses
import math

import numpy as np
import scipy.linalg
import scipy.optimize

from pairwise.ranksvm.pair_passes import PairPasses
from pairwise.ranksvm.pair_transform import PairDifferences
from pairwise.ranksvm.ranksvm_objectives import check_loss, dual_objective, primal_objective, relative_gap

# Working-set duals fall back on BVLS only below this estimated cost (n^3 (n + num_features) flops).
BVLS_MAX_FLOPS = 2e8


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


def max_working_set(operator: PairDifferences) -> int:
  """Largest working set of `hinge_working_set_candidate`: free pairs number about the features at the
  optimum; the cap keeps its dense [n, n] least squares cheap."""
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
      working_set = hinge_working_set_candidate(operator, slack, delta, c, max_working_set(operator),
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
  return Certificate(primal, dual, gap, relative_gap(gap, weights, c, operator.num_pairs))


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
class WorkingSetSolution:
  """A hinge primal-dual pair from `working_set_solution`: α = C on the bound pairs, `working_alpha` on
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


def working_set_solution(pairs: PairPasses, state: np.ndarray, c: float, max_free_pairs: int,
                          max_rounds: int = 5) -> WorkingSetSolution | None:
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
  return WorkingSetSolution(weights, scores, working_ids, working_alpha, alpha_sum - half_norm,
                             half_norm + c * hinge_sum)


def initial_states(slack: np.ndarray, smoothing: float, below: float) -> np.ndarray:
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
  state = initial_states(np.asarray(slack, dtype=np.float64), smoothing, below)
  solution = working_set_solution(PairPasses(operator), state, c, max_free_pairs, max_rounds)
  if solution is None:
    return None
  alpha = np.where(state == BOUND, c, 0.0)
  alpha[solution.working_ids] = solution.working_alpha
  return solution.weights, alpha, 1.0 - operator.matvec(solution.weights)
