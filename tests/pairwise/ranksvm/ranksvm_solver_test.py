"""Tests for pairwise.ranksvm.ranksvm_solver: the Newton solver against hand-computed optima, NumPy and
LinearSVC."""

import tracemalloc
from unittest import mock

import numpy as np
import scipy.optimize
import tensorflow as tf
from absl.testing import parameterized
from sklearn.datasets import load_breast_cancer
from sklearn.svm import LinearSVC

from pairwise.ranksvm import pair_passes, pair_transform, ranksvm_solver


def _operator(rows, first, second, signs=None) -> pair_transform.PairDifferences:
  signs = np.ones(len(first)) if signs is None else np.asarray(signs, dtype=np.float64)
  return pair_transform.PairDifferences(np.asarray(rows, dtype=np.float64), pair_transform.PairIndices(
      np.asarray(first), np.asarray(second), signs))


def _single_feature_pairs(differences) -> pair_transform.PairDifferences:
  """Pairs whose differences are the given scalars: row 0 is 0, row k + 1 is differences[k], x_k = row - 0."""
  rows = np.concatenate([[0.0], differences])[:, None]
  return _operator(rows, np.arange(1, len(differences) + 1), np.zeros(len(differences), np.int64))


def _random_operator(seed: int, num_rows: int = 40, num_features: int = 5, num_pairs: int = 120):
  rng = np.random.default_rng(seed)
  rows = rng.normal(size=(num_rows, num_features)) * rng.uniform(0.5, 2.0, num_features)
  first, second = rng.integers(0, num_rows, num_pairs), rng.integers(0, num_rows, num_pairs)
  keep = first != second
  signs = np.where(rng.random(num_pairs) < 0.5, -1.0, 1.0)
  return _operator(rows, first[keep], second[keep], signs[keep])


def breast_cancer_pair_sets(query_size: int = 25, seed: int = 0):
  """scikit-learn's breast-cancer rows, standardized, shuffled into queries of `query_size`, relevance = the
  target (benign = 1); returns (operator, materialized x, y) of the within-query pairs."""
  data = load_breast_cancer()
  rows = (data.data - data.data.mean(axis=0)) / data.data.std(axis=0)
  order = np.random.default_rng(seed).permutation(len(rows))
  rows, relevance = rows[order], data.target[order].astype(np.float64)
  offsets = np.append(np.arange(0, len(rows), query_size), len(rows))
  pairs = pair_transform.pairs_within_queries(relevance, offsets, seed=seed)
  x, y = pair_transform.pairwise_differences(rows, pairs)
  return pair_transform.PairDifferences(rows, pairs), x, y


def _numpy_objective(weights, x, y, c, loss):
  slack = np.maximum(0.0, 1.0 - y * (x @ weights))
  return 0.5 * weights @ weights + c * np.sum(slack if loss == "hinge" else slack**2)


def _cosine(a, b):
  return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


class ObjectivesTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters("hinge", "squared_hinge")
  def test_primal_matches_numpy(self, loss):
    operator = _random_operator(0)
    rows = operator.rows(np.arange(operator.num_pairs))
    weights = np.random.default_rng(1).normal(size=operator.num_features)
    self.assertAllClose(ranksvm_solver.primal_objective(weights, operator.matvec(weights), 0.3, loss),
                        _numpy_objective(weights, rows, np.ones(len(rows)), 0.3, loss))

  def test_hand_computed_dual(self):
    # Pairs x = 1 and 2, C = 0.25, α = (0.25, 0.125): Σα = 0.375, u = 0.25 + 0.25 = 0.5, D = 0.375 - 0.125.
    operator = _single_feature_pairs([1.0, 2.0])
    alpha = np.array([0.25, 0.125])
    self.assertAllClose(operator.rmatvec(alpha), [0.5])
    self.assertAllClose(ranksvm_solver.dual_objective(alpha, [0.5], 0.25, "hinge"), 0.25)
    # Squared hinge subtracts Σα² / (4C) = 0.078125 / 1.
    self.assertAllClose(ranksvm_solver.dual_objective(alpha, [0.5], 0.25, "squared_hinge"), 0.25 - 0.078125)

  def test_huber_hinge_pieces(self):
    value, first, second = ranksvm_solver.huber_hinge(np.array([-1.0, 0.0, 0.05, 0.1, 0.5]), 0.1)
    # 0 below 0; z² / (2δ) = 0.0025 / 0.2 inside; z - δ/2 from δ on.
    self.assertAllClose(value, [0.0, 0.0, 0.0125, 0.05, 0.45])
    self.assertAllClose(first, [0.0, 0.0, 0.5, 1.0, 1.0])
    self.assertAllClose(second, [0.0, 0.0, 10.0, 0.0, 0.0])

  def test_unknown_loss_raises(self):
    with self.assertRaisesRegex(ValueError, "`loss` must be one of"):
      ranksvm_solver.primal_objective([1.0], [1.0], 1.0, "logistic")


class LineSearchTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(loss=["hinge", "squared_hinge"], seed=[0, 1, 2])
  def test_exact_minimum_along_the_direction(self, loss, seed):
    operator = _random_operator(seed)
    rng = np.random.default_rng(seed + 10)
    weights = rng.normal(size=operator.num_features) * 0.3
    slack = 1.0 - operator.matvec(weights)
    smoothing = 0.05 if loss == "hinge" else None
    values, first, _ = ranksvm_solver.huber_hinge(slack, smoothing) if loss == "hinge" else (
        None, 2 * np.maximum(slack, 0), None)
    direction = -(weights - 0.7 * operator.rmatvec(first))  # A descent direction: minus the gradient.
    margins = operator.matvec(direction)

    def phi(t):
      z = slack - t * margins
      loss_values = (ranksvm_solver.huber_hinge(z, smoothing)[0] if loss == "hinge" else np.maximum(z,
                                                                                                    0) ** 2)
      moved = weights + t * direction
      return 0.5 * moved @ moved + 0.7 * loss_values.sum()

    step = ranksvm_solver.exact_step(weights @ direction, direction @ direction, lambda: [(slack, margins)],
                                     0.7, loss, smoothing)
    reference = scipy.optimize.minimize_scalar(phi, bounds=(0.0, 10.0), method="bounded",
                                               options={"xatol": 1e-12}).x
    self.assertGreater(step, 0.0)
    self.assertAllClose(step, reference, rtol=1e-5, atol=1e-8)
    self.assertLessEqual(phi(step), phi(reference) + 1e-12)

  def test_ascent_direction_gives_zero(self):
    # One pair x = 1. At w = 2 the hinge is 0 and the gradient is w = 2 > 0: moving along +1 only increases J.
    # w·p = 2, p·p = 1; the pair's slack -1 and direction margin 1.
    self.assertEqual(ranksvm_solver.exact_step(2.0, 1.0, lambda: [(np.array([-1.0]), np.array([1.0]))], 1.0,
                                               "hinge", 0.1), 0.0)


class SolveTest(tf.test.TestCase, parameterized.TestCase):

  def test_hand_computed_hinge_optimum_with_a_free_pair(self):
    # J(w) = w²/2 + 0.25 (max(0, 1 - w) + max(0, 1 - 2w)): for w in (0.5, 1) J' = w - 0.25 > 0, for w < 0.5
    # J' = w - 0.75 < 0, so w* = 0.5 (the second pair's margin is exactly 1), J* = 0.125 + 0.125 = 0.25.
    result = ranksvm_solver.solve(_single_feature_pairs([1.0, 2.0]), 0.25, "hinge")
    self.assertTrue(result.converged)
    self.assertAllClose(result.weights, [0.5], atol=1e-6)
    self.assertAllClose(result.primal_objective, 0.25, atol=1e-6)
    self.assertLessEqual(result.duality_gap, 1e-6 * 0.5 * 0.25)

  def test_hand_computed_squared_hinge_optimum(self):
    # J(w) = w²/2 + (1 - w)² for w < 1: J' = 3w - 2 = 0 at w* = 2/3, J* = 2/9 + 1/9 = 1/3.
    result = ranksvm_solver.solve(_single_feature_pairs([1.0]), 1.0, "squared_hinge")
    self.assertTrue(result.converged)
    self.assertAllClose(result.weights, [2.0 / 3.0])
    self.assertAllClose(result.primal_objective, 1.0 / 3.0)

  @parameterized.product(loss=["hinge", "squared_hinge"], c=[0.1, 1.0, 10.0])
  def test_matches_linear_svc_on_breast_cancer_pairs(self, loss, c):
    operator, x, y = breast_cancer_pair_sets()
    svc = LinearSVC(loss=loss, C=c, fit_intercept=False, dual=True, tol=1e-10, max_iter=1_000_000,
                    random_state=0).fit(x, y)
    result = ranksvm_solver.solve(operator, c, loss)
    self.assertTrue(result.converged, result.summary())
    self.assertGreaterEqual(_cosine(result.weights, svc.coef_[0]), 0.999)
    svc_objective = _numpy_objective(svc.coef_[0], x, y, c, loss)
    self.assertAllClose(result.primal_objective, _numpy_objective(result.weights, x, y, c, loss))
    self.assertLessEqual(result.primal_objective, svc_objective * (1 + 1e-6))
    # The certificate holds: no weights, LinearSVC's included, beat J(w) - gap.
    self.assertGreaterEqual(svc_objective, result.primal_objective - result.duality_gap - 1e-9)

  def test_weak_duality_for_any_weights(self):
    operator = _random_operator(3)
    best = ranksvm_solver.solve(operator, 1.0, "hinge", tolerance=1e-10)
    rng = np.random.default_rng(4)
    for scale in (0.01, 0.3, 3.0):
      weights = best.weights + scale * rng.normal(size=operator.num_features)
      check = ranksvm_solver.certificate(operator, weights, 1.0, "hinge")
      suboptimality = check.primal_objective - best.primal_objective
      self.assertGreaterEqual(check.duality_gap, suboptimality - 1e-9)
      # 1-strong convexity: 1/2 ||w - w*||² <= J(w) - J(w*) <= gap.
      self.assertLessEqual(0.5 * np.sum((weights - best.weights) ** 2), check.duality_gap + 1e-9)

  def test_certificate_of_nearly_optimal_weights_is_small(self):
    operator, x, y = breast_cancer_pair_sets()
    svc = LinearSVC(loss="hinge", C=1.0, fit_intercept=False, dual=True, tol=1e-10, max_iter=1_000_000,
                    random_state=0).fit(x, y)
    self.assertLess(ranksvm_solver.certificate(operator, svc.coef_[0], 1.0, "hinge").relative_gap, 1e-4)

  def test_one_iteration_is_reported_unconverged(self):
    operator, _, _ = breast_cancer_pair_sets()
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
    operator = _random_operator(5, num_features=8)
    direct = ranksvm_solver.solve(operator, 2.0, loss)
    iterative = ranksvm_solver.solve(operator, 2.0, loss, max_direct_features=0)
    self.assertTrue(iterative.converged)
    self.assertAllClose(iterative.weights, direct.weights, rtol=2e-3, atol=1e-5)

  def test_constant_zero_features_keep_weight_zero_and_zero_data_converges(self):
    rows = np.zeros((4, 2))
    rows[:, 0] = [0.0, 1.0, 2.0, 3.0]  # Feature 1 is 0 everywhere: its differences are 0.
    result = ranksvm_solver.solve(_operator(rows, [1, 2, 3], [0, 1, 2]), 1.0, "hinge")
    self.assertTrue(result.converged)
    self.assertEqual(result.weights[1], 0.0)
    empty = ranksvm_solver.solve(_operator(np.zeros((2, 1)), [1], [0]), 1.0, "hinge")
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
      ranksvm_solver.solve(_single_feature_pairs([1.0]), **kwargs)


class PairChunksTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(loss=["hinge", "squared_hinge"], chunk=[1, 7, 1000])
  def test_chunking_does_not_change_the_solution(self, loss, chunk):
    # The breast-cancer pairs (about 6,900) in chunks of 1, 7 and 1,000 pairs: the same iterates up to
    # rounding.
    operator, _, _ = breast_cancer_pair_sets()
    whole = ranksvm_solver.solve(operator, 1.0, loss)
    with mock.patch.object(pair_passes, "PAIR_CHUNK", chunk):
      chunked = ranksvm_solver.solve(operator, 1.0, loss)
    self.assertTrue(chunked.converged)
    self.assertEqual(chunked.iterations, whole.iterations)
    self.assertAllClose(chunked.weights, whole.weights, rtol=1e-8, atol=1e-10)

  def test_memory_is_a_few_floats_per_pair_not_a_pair_matrix(self):
    # 200 queries x 20 documents x 32 features, graded 0..3: 22,754 pairs. The materialized differences
    # would take 32 x 8 = 256 bytes per pair; the solver may hold the row scores, chunks of 512 pairs and the
    # line search's z and X p (16 bytes per pair at most), so its peak stays below 40 bytes per pair + 1 MiB.
    # (Measured: 25 bytes per pair; the solver before chunking took 229.)
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(4000, 32))
    relevance = np.digitize(rows @ rng.normal(size=32) + rng.normal(size=4000), [-1.0, 0.0, 1.0])
    pairs = pair_transform.pairs_within_queries(relevance, np.arange(0, 4001, 20))
    operator = pair_transform.PairDifferences(rows, pairs)
    with mock.patch.object(pair_passes, "PAIR_CHUNK", 512):
      tracemalloc.start()
      try:
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = ranksvm_solver.solve(operator, 1.0, "hinge")
        peak = tracemalloc.get_traced_memory()[1] - start
      finally:
        tracemalloc.stop()
    self.assertTrue(result.converged)
    self.assertGreater(pairs.num_pairs, 20_000)
    self.assertLess(peak, 40 * pairs.num_pairs + (1 << 20))


class WorkingSetTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((12, 4), (30, 4), (6, 10))  # More rows than features: Q = R R^T is singular.
  def test_box_constrained_dual_matches_a_generic_solver(self, num_rows, num_features):
    rng = np.random.default_rng(num_rows)
    rows, linear = rng.normal(size=(num_rows, num_features)), rng.normal(size=num_rows) - 1.0
    exact = ranksvm_solver.box_constrained_dual(rows, linear, 0.5)

    def objective(a):
      return 0.5 * np.sum((rows.T @ a) ** 2) + linear @ a

    reference = scipy.optimize.minimize(
        objective, np.full(num_rows, 0.25), bounds=[(0.0, 0.5)] * num_rows, method="L-BFGS-B",
        jac=lambda a: rows @ (rows.T @ a) + linear,
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000}).x
    self.assertTrue(np.all((exact >= 0.0) & (exact <= 0.5)))
    self.assertLessEqual(objective(exact), objective(reference) + 1e-8)

  def test_candidate_is_primal_dual_feasible(self):
    operator = _random_operator(7)
    smoothed = ranksvm_solver.solve(operator, 1.0, "hinge", tolerance=1e-3)
    slack = 1.0 - operator.matvec(smoothed.weights)
    candidate = ranksvm_solver.hinge_working_set_candidate(operator, slack, 1e-2, 1.0, max_free_pairs=100)
    self.assertIsNotNone(candidate)
    weights, alpha, candidate_slack = candidate
    self.assertTrue(np.all((alpha >= 0.0) & (alpha <= 1.0)))
    self.assertAllClose(candidate_slack, 1.0 - operator.matvec(weights))
    self.assertAllClose(weights, operator.rmatvec(alpha))
    primal = ranksvm_solver.primal_objective(weights, 1.0 - candidate_slack, 1.0, "hinge")
    self.assertGreaterEqual(primal, ranksvm_solver.dual_objective(alpha, weights, 1.0, "hinge") - 1e-9)

  def test_too_many_free_pairs_gives_none(self):
    operator = _random_operator(8)
    self.assertIsNone(ranksvm_solver.hinge_working_set_candidate(
        operator, np.full(operator.num_pairs, 0.5), 1.0, 1.0, max_free_pairs=3))


if __name__ == "__main__":
  tf.test.main()
