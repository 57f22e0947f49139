"""Tests for rank4class_engine.optimization.duality_gap: 0 at scikit-learn's and SciPy's optima, and never
below a fit's true distance above them (with offsets, and with a class no row holds)."""

import numpy as np
import tensorflow as tf
from scipy import optimize
from sklearn import linear_model

from rank4class_engine.optimization import duality_gap


def _rows(seed: int, rows: int = 120, width: int = 4, classes: int = 3) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, classes, rows)
  x = rng.normal(size=(rows, width))
  x[:, :classes] += 1.5 * np.eye(classes)[labels]
  return x, labels


def _gap(x, labels, weights, bias, c, offsets=None) -> duality_gap.Gap:
  scores = x @ weights.T + bias + (0.0 if offsets is None else offsets)
  return duality_gap.duality_gap(scores, labels, 1.0 / (2.0 * c * len(labels)), float(np.sum(weights ** 2)),
                                 lambda u: float(np.sum((x.T @ u) ** 2)), offsets)


def _optimum(x, labels, c, offsets, classes) -> tuple[np.ndarray, np.ndarray, float]:
  """The offset problem's optimum by SciPy's L-BFGS (mean log-loss of `xW^T + b + o` + ||W||^2 / (2 C n))."""
  n, width = x.shape

  def objective(theta):
    weights, bias = theta[:classes * width].reshape(classes, width), theta[classes * width:]
    scores = x @ weights.T + bias + offsets
    shifted = scores - scores.max(axis=1, keepdims=True)
    p = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    log_p = np.log(p)
    residual = (p - np.eye(classes)[labels]) / n
    value = -np.mean(log_p[np.arange(n), labels]) + np.sum(weights ** 2) / (2 * c * n)
    gradient = np.concatenate([(residual.T @ x + weights / (c * n)).ravel(), residual.sum(axis=0)])
    return value, gradient

  found = optimize.minimize(objective, np.zeros(classes * (width + 1)), jac=True, method="L-BFGS-B",
                            options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10000})
  return found.x[:classes * width].reshape(classes, width), found.x[classes * width:], float(found.fun)


class DualityGapTest(tf.test.TestCase):

  def test_is_zero_at_scikit_learns_optimum_and_bounds_every_fit_above_it(self):
    x, labels = _rows(0)
    c = 0.5
    fitted = linear_model.LogisticRegression(C=c, tol=1e-12, max_iter=10000).fit(x, labels)
    at_optimum = _gap(x, labels, fitted.coef_, fitted.intercept_, c)
    self.assertLess(at_optimum.relative, 1e-9)
    self.assertAllClose(at_optimum.primal, at_optimum.dual, atol=1e-9)
    rng = np.random.default_rng(1)
    for scale in (0.0, 0.5, 0.9, 1.1, 2.0):
      weights = fitted.coef_ * scale
      bias = fitted.intercept_ + rng.normal(0.0, 0.3, 3)
      gap = _gap(x, labels, weights, bias, c)
      above = gap.primal - at_optimum.primal
      self.assertGreater(above, 1e-4, scale)
      self.assertGreaterEqual(gap.gap, above, scale)
      self.assertAllClose(gap.relative, gap.gap / gap.primal)

  def test_a_weak_penalty_far_from_its_optimum_keeps_a_useful_bound(self):
    # C = 100 and half the optimum's weights: the fit's own residuals as the dual point overshoot its penalty
    # term by thousands of times the true distance; the best step along them keeps the bound within 10 times.
    x, labels = _rows(5, rows=300)
    fitted = linear_model.LogisticRegression(C=100.0, tol=1e-12, max_iter=100_000).fit(x, labels)
    best = _gap(x, labels, fitted.coef_, fitted.intercept_, 100.0).primal
    half = _gap(x, labels, fitted.coef_ * 0.5, fitted.intercept_, 100.0)
    self.assertBetween(half.gap, half.primal - best, 10.0 * (half.primal - best))

  def test_holds_with_offsets_and_a_class_that_no_row_holds(self):
    x, labels = _rows(2, classes=3)
    rng = np.random.default_rng(3)
    offsets = rng.normal(0.0, 1.0, (len(labels), 4))  # 4 classes: class 3 has no row.
    weights, bias, best = _optimum(x, labels, 2.0, offsets, classes=4)
    self.assertLess(bias[3], bias[:3].min() - 5.0)  # Its bias runs off towards minus infinity.
    at_optimum = _gap(x, labels, weights, bias, 2.0, offsets)
    self.assertAllClose(at_optimum.primal, best, atol=1e-9)
    self.assertLess(at_optimum.gap, 1e-4)
    for scale in (0.3, 0.8, 1.3):
      gap = _gap(x, labels, weights * scale, bias, 2.0, offsets)
      self.assertGreaterEqual(gap.gap, gap.primal - best, scale)
      self.assertGreater(gap.gap, 0.0)

  def test_the_bias_need_not_be_balanced(self):
    # The weights at their optimum, the biases off by a constant per class: the bound balances them itself.
    x, labels = _rows(4, rows=200)
    fitted = linear_model.LogisticRegression(C=1.0, tol=1e-12, max_iter=10000).fit(x, labels)
    best = _gap(x, labels, fitted.coef_, fitted.intercept_, 1.0).primal
    shifted = _gap(x, labels, fitted.coef_, fitted.intercept_ + np.array([0.5, -0.5, 0.0]), 1.0)
    self.assertGreater(shifted.primal - best, 1e-3)
    self.assertGreaterEqual(shifted.gap, shifted.primal - best)
    # W at its optimum: the bound is tight.
    self.assertLess(shifted.gap, 2.0 * (shifted.primal - best) + 1e-6)


if __name__ == "__main__":
  tf.test.main()
