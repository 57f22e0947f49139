"""Tests for pairwise.ranksvm.ranksvm_solver: the Newton solver against hand-computed optima, NumPy and
LinearSVC."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from sklearn.svm import LinearSVC

from pairwise.ranksvm import ranksvm_solver
from tests.pairwise.ranksvm import pair_sets


def _cosine(a, b):
  return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


class SolveTest(tf.test.TestCase, parameterized.TestCase):

  def test_hand_computed_hinge_optimum_with_a_free_pair(self):
    # J(w) = w²/2 + 0.25 (max(0, 1 - w) + max(0, 1 - 2w)): for w in (0.5, 1) J' = w - 0.25 > 0, for w < 0.5
    # J' = w - 0.75 < 0, so w* = 0.5 (the second pair's margin is exactly 1), J* = 0.125 + 0.125 = 0.25.
    result = ranksvm_solver.solve(pair_sets.single_feature_pairs([1.0, 2.0]), 0.25, "hinge")
    self.assertTrue(result.converged)
    self.assertAllClose(result.weights, [0.5], atol=1e-6)
    self.assertAllClose(result.primal_objective, 0.25, atol=1e-6)
    self.assertLessEqual(result.duality_gap, 1e-6 * 0.5 * 0.25)

  def test_hand_computed_squared_hinge_optimum(self):
    # J(w) = w²/2 + (1 - w)² for w < 1: J' = 3w - 2 = 0 at w* = 2/3, J* = 2/9 + 1/9 = 1/3.
    result = ranksvm_solver.solve(pair_sets.single_feature_pairs([1.0]), 1.0, "squared_hinge")
    self.assertTrue(result.converged)
    self.assertAllClose(result.weights, [2.0 / 3.0])
    self.assertAllClose(result.primal_objective, 1.0 / 3.0)

  @parameterized.product(loss=["hinge", "squared_hinge"], c=[0.1, 1.0, 10.0])
  def test_matches_linear_svc_on_breast_cancer_pairs(self, loss, c):
    operator, x, y = pair_sets.breast_cancer_pair_sets()
    svc = LinearSVC(loss=loss, C=c, fit_intercept=False, dual=True, tol=1e-10, max_iter=1_000_000,
                    random_state=0).fit(x, y)
    result = ranksvm_solver.solve(operator, c, loss)
    self.assertTrue(result.converged, result.summary())
    self.assertGreaterEqual(_cosine(result.weights, svc.coef_[0]), 0.999)
    svc_objective = pair_sets.numpy_objective(svc.coef_[0], x, y, c, loss)
    self.assertAllClose(result.primal_objective, pair_sets.numpy_objective(result.weights, x, y, c, loss))
    self.assertLessEqual(result.primal_objective, svc_objective * (1 + 1e-6))
    # The certificate holds: no weights, LinearSVC's included, beat J(w) - gap.
    self.assertGreaterEqual(svc_objective, result.primal_objective - result.duality_gap - 1e-9)

  def test_one_iteration_is_reported_unconverged(self):
    operator, _, _ = pair_sets.breast_cancer_pair_sets()
    result = ranksvm_solver.solve(operator, 1.0, "hinge", max_iterations=1)
    self.assertFalse(result.converged)
    self.assertEqual(result.iterations, 1)
    self.assertGreater(result.relative_gap, result.tolerance)
    summary = result.summary()
    self.assertEqual((summary["method"], summary["converged"], summary["iterations"]), ("newton", False, 1))
    self.assertLen(result.history, 2)  # The start and the one step, each with its objective and gap.
    self.assertLess(result.history[1]["primal_objective"], result.history[0]["primal_objective"])

  @parameterized.parameters("hinge", "squared_hinge")
  def test_conjugate_gradient_directions_agree_with_direct(self, loss):
    operator = pair_sets.random_operator(5, num_features=8)
    direct = ranksvm_solver.solve(operator, 2.0, loss)
    iterative = ranksvm_solver.solve(operator, 2.0, loss, max_direct_features=0)
    self.assertTrue(iterative.converged)
    self.assertAllClose(iterative.weights, direct.weights, rtol=2e-3, atol=1e-5)

  def test_constant_zero_features_keep_weight_zero_and_zero_data_converges(self):
    rows = np.zeros((4, 2))
    rows[:, 0] = [0.0, 1.0, 2.0, 3.0]  # Feature 1 is 0 everywhere: its differences are 0.
    result = ranksvm_solver.solve(pair_sets.operator_of(rows, [1, 2, 3], [0, 1, 2]), 1.0, "hinge")
    self.assertTrue(result.converged)
    self.assertEqual(result.weights[1], 0.0)
    empty = ranksvm_solver.solve(pair_sets.operator_of(np.zeros((2, 1)), [1], [0]), 1.0, "hinge")
    self.assertTrue(empty.converged)  # w* = 0 and the gap is exactly 0.
    self.assertAllEqual(empty.weights, [0.0])

  @parameterized.named_parameters(
      ("zero_c", {"c": 0.0}, "`c` must be > 0, got 0.0"),
      ("bad_tolerance", {"c": 1.0, "tolerance": 0.0}, "`tolerance` must be > 0, got 0.0"),
      ("bad_iterations", {"c": 1.0, "max_iterations": 0}, "`max_iterations` must be >= 1"),
      ("bad_loss", {"c": 1.0, "loss": "log"}, "`loss` must be one of"),
  )
  def test_bad_arguments_raise(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      ranksvm_solver.solve(pair_sets.single_feature_pairs([1.0]), **kwargs)


if __name__ == "__main__":
  tf.test.main()
