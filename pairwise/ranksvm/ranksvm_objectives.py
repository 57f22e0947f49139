"""RankSVM's objectives (NumPy): the losses of the slacks, the primal J(w) and dual D(α), the Huber-smoothed
hinge Newton minimizes, and the scale of the duality gap the solver certifies (`ranksvm_solver`'s docstring
states the problem)."""

import numpy as np

from rank4class_data.validation import check_choice

LOSS_NAMES = ("hinge", "squared_hinge")


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


def squared_hinge_terms(slack: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  positive = np.maximum(slack, 0.0)
  return positive * positive, 2.0 * positive, 2.0 * (slack > 0.0)


def loss_terms(slack: np.ndarray, loss: str, smoothing: float | None):
  """(value, first, second derivative in z) of the loss Newton minimizes: Huber for hinge, else squared."""
  return huber_hinge(slack, smoothing) if loss == "hinge" else squared_hinge_terms(slack)


def gap_scale(weights: np.ndarray, c: float, num_pairs: int) -> float:
  """1/2 ||w||^2, the yardstick of the gap; the floor (1e-12 of J(0) = C num_pairs) only matters when w* =
  0."""
  return max(0.5 * float(weights @ weights), 1e-12 * c * max(num_pairs, 1))


def relative_gap(gap: float, weights: np.ndarray, c: float, num_pairs: int) -> float:
  """The gap in units of `gap_scale`: the solver stops when it is at most the tolerance."""
  return gap / gap_scale(weights, c, num_pairs)
