"""Tests for pairwise.ranksvm.duality_gap: the certificate of any weights (weak duality, nearly optimal
weights), the box-constrained dual against a generic solver and the hinge's working-set candidate."""

import numpy as np
import scipy.optimize
import tensorflow as tf
from absl.testing import parameterized
from sklearn.svm import LinearSVC

from pairwise.ranksvm import duality_gap, ranksvm_objectives, ranksvm_solver
from tests.pairwise.ranksvm import pair_sets


class DualityGapTest(tf.test.TestCase, parameterized.TestCase):

  def test_weak_duality_for_any_weights(self):
    operator = pair_sets.random_operator(3)
    best = ranksvm_solver.solve(operator, 1.0, "hinge", tolerance=1e-10)
    rng = np.random.default_rng(4)
    for scale in (0.01, 0.3, 3.0):
      weights = best.weights + scale * rng.normal(size=operator.num_features)
      check = duality_gap.certificate(operator, weights, 1.0, "hinge")
      suboptimality = check.primal_objective - best.primal_objective
      self.assertGreaterEqual(check.duality_gap, suboptimality - 1e-9)
      # 1-strong convexity: 1/2 ||w - w*||² <= J(w) - J(w*) <= gap.
      self.assertLessEqual(0.5 * np.sum((weights - best.weights) ** 2), check.duality_gap + 1e-9)

  def test_certificate_of_nearly_optimal_weights_is_small(self):
    operator, x, y = pair_sets.breast_cancer_pair_sets()
    svc = LinearSVC(loss="hinge", C=1.0, fit_intercept=False, dual=True, tol=1e-10, max_iter=1_000_000,
                    random_state=0).fit(x, y)
    self.assertLess(duality_gap.certificate(operator, svc.coef_[0], 1.0, "hinge").relative_gap, 1e-4)

  @parameterized.parameters((12, 4), (30, 4), (6, 10))  # More rows than features: Q = R R^T is singular.
  def test_box_constrained_dual_matches_a_generic_solver(self, num_rows, num_features):
    rng = np.random.default_rng(num_rows)
    rows, linear = rng.normal(size=(num_rows, num_features)), rng.normal(size=num_rows) - 1.0
    exact = duality_gap.box_constrained_dual(rows, linear, 0.5)

    def objective(a):
      return 0.5 * np.sum((rows.T @ a) ** 2) + linear @ a

    reference = scipy.optimize.minimize(
        objective, np.full(num_rows, 0.25), bounds=[(0.0, 0.5)] * num_rows, method="L-BFGS-B",
        jac=lambda a: rows @ (rows.T @ a) + linear,
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000}).x
    self.assertTrue(np.all((exact >= 0.0) & (exact <= 0.5)))
    self.assertLessEqual(objective(exact), objective(reference) + 1e-8)

  def test_candidate_is_primal_dual_feasible(self):
    operator = pair_sets.random_operator(7)
    smoothed = ranksvm_solver.solve(operator, 1.0, "hinge", tolerance=1e-3)
    slack = 1.0 - operator.matvec(smoothed.weights)
    candidate = duality_gap.hinge_working_set_candidate(operator, slack, 1e-2, 1.0, max_free_pairs=100)
    self.assertIsNotNone(candidate)
    weights, alpha, candidate_slack = candidate
    self.assertTrue(np.all((alpha >= 0.0) & (alpha <= 1.0)))
    self.assertAllClose(candidate_slack, 1.0 - operator.matvec(weights))
    self.assertAllClose(weights, operator.rmatvec(alpha))
    primal = ranksvm_objectives.primal_objective(weights, 1.0 - candidate_slack, 1.0, "hinge")
    self.assertGreaterEqual(primal, ranksvm_objectives.dual_objective(alpha, weights, 1.0, "hinge") - 1e-9)

  def test_too_many_free_pairs_gives_none(self):
    operator = pair_sets.random_operator(8)
    self.assertIsNone(duality_gap.hinge_working_set_candidate(
        operator, np.full(operator.num_pairs, 0.5), 1.0, 1.0, max_free_pairs=3))


if __name__ == "__main__":
  tf.test.main()
