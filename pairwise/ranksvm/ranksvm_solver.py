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
(`pair_passes.PairPasses`): the solver holds the row scores Φ w (and Φ p), and every margin, slack, α and sum
is rebuilt from them inside chunks of `PAIR_CHUNK` pairs, each pass O(num_pairs + num_rows num_features). A
step takes a pass for the sums of the objectives and the gap (one more per shrink of δ), one for the gradient
and the Hessian (gathered from the curved pairs only, `GRAM_CHUNK_BYTES` at a time), and a few for the exact
line search (Newton's method on the piecewise-linear φ'(t), `exact_step`), which keeps z and X p of the pairs
that can still move (at most two floats per pair). At 100k rows × 50 features and 697k pairs the solver's peak
allocation is 0.42x the float64 rows (bench/ranksvm_vs_lightgbm.py, docs/BENCHMARKS.md).

The parts: the objectives (`ranksvm_objectives`), the chunked passes over the pairs (`pair_passes`), the
Newton direction and exact line search (`newton_step`), and the duality-gap certificate with the hinge's
working-set dual step (`duality_gap`); this module runs the continuation and the iterations (`solve`) and
re-exports their public names.
"""

import dataclasses
import logging
import time

import numpy as np

from pairwise.ranksvm import duality_gap, newton_step
from pairwise.ranksvm.duality_gap import (  # noqa: F401  Public names of the solver's parts, re-exported.
    Certificate,
    box_constrained_dual,
    certificate,
    hinge_working_set_candidate,
)
from pairwise.ranksvm.newton_step import exact_step  # noqa: F401
from pairwise.ranksvm.pair_passes import PairPasses
from pairwise.ranksvm.pair_transform import PairDifferences
from pairwise.ranksvm.ranksvm_objectives import (  # noqa: F401
    LOSS_NAMES,
    check_loss,
    dual_objective,
    gap_scale,
    huber_hinge,
    loss_terms,
    primal_objective,
    relative_gap,
    slack_losses,
)
from rank4class_data.validation import check_range

_logger = logging.getLogger(__name__)

# Continuation of the hinge's Huber smoothing: first width, shrink factor, smallest width.
INITIAL_SMOOTHING = 1.0
SMOOTHING_SHRINK = 0.1
MIN_SMOOTHING = 1e-12
# δ shrinks once the smoothed problem's own gap is below this fraction of the hinge gap.
SMOOTHING_DOMINANCE = 0.25
DIRECT_SOLVE_MAX_FEATURES = newton_step.DIRECT_SOLVE_MAX_FEATURES


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


def _pass_sums(pairs: PairPasses, scores: np.ndarray, c: float, loss: str,
               smoothing: float | None) -> _PassSums:
  """One pass over the pairs at row scores Φ w: the sums the objectives, the dual point and the gap need."""
  sums = _PassSums(0.0, 0.0, 0.0, 0.0, np.zeros(pairs.num_rows), 0)
  for part in pairs.parts:
    slack = 1.0 - pairs.margins(scores, part)
    values, first, second = loss_terms(slack, loss, smoothing)
    alpha = c * first  # Hinge: C clip(z / δ, 0, 1) in [0, C]; squared hinge: 2C max(0, z) >= 0.
    pairs.add_scattered(sums.alpha_rows, part, alpha)
    sums.loss += float(slack_losses(slack, loss).sum())
    sums.model_loss += float(values.sum())
    sums.alpha_sum += float(alpha.sum())
    sums.alpha_squares += float(np.einsum("i,i->", alpha, alpha))
    sums.curved += int(np.count_nonzero(second))
  return sums


def _dual(sums: _PassSums, pairs: PairPasses, c: float, loss: str) -> float:
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


def _continue_smoothing(pairs: PairPasses, operator: PairDifferences, weights: np.ndarray,
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
    if smoothed_gap > SMOOTHING_DOMINANCE * gap or gap <= tolerance * gap_scale(weights, c, num_pairs):
      break
    if band_width is None:
      band_width = smoothing
      # The stage's solution usually shows the hinge optimum's partition: try the working-set solution.
      state = np.empty(num_pairs, dtype=np.int8)
      for part in pairs.parts:
        state[part] = duality_gap.initial_states(1.0 - pairs.margins(scores, part), smoothing, 0.0)
      candidate = duality_gap.working_set_solution(pairs, state, c, duality_gap.max_working_set(operator))
      del state
      if candidate is not None:
        candidate_dual = max(dual, candidate.dual_objective)
        candidate_gap = max(candidate.primal_objective - candidate_dual, 0.0)
        if candidate_gap <= tolerance * gap_scale(candidate.weights, c, num_pairs):
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
  num_pairs, pairs = operator.num_pairs, PairPasses(operator)
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
    relative = relative_gap(gap, weights, c, num_pairs)
    history.append(_log_iteration(iteration, primal, gap, relative, smoothing, step, sums.curved))
    converged = relative <= tolerance
    if converged or iteration >= max_iterations:
      break
    # Right after δ shrank, most pairs of the old band sit in the new linear zone, where the Newton model does
    # not see them, although the solution for the smaller δ keeps them in the band (z_k / δ = α_k / C varies
    # little with δ). So the step minimizes the model that keeps the old band quadratic at the new width, a
    # predictor step along the solution path; the line search then measures the true smoothed objective.
    direction = newton_step.newton_direction(pairs, weights, scores, c, loss, smoothing,
                                  band_width if band_width is not None else smoothing, max_direct_features)
    step = newton_step.exact_step(float(weights @ direction), float(direction @ direction),
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
