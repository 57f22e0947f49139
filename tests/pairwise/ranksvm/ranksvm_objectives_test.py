"""Tests for pairwise.ranksvm.ranksvm_objectives: the primal against NumPy, the dual and the Huber hinge by
hand."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from pairwise.ranksvm import ranksvm_objectives
from tests.pairwise.ranksvm import pair_sets


class ObjectivesTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters("hinge", "squared_hinge")
  def test_primal_matches_numpy(self, loss):
    operator = pair_sets.random_operator(0)
    rows = operator.rows(np.arange(operator.num_pairs))
    weights = np.random.default_rng(1).normal(size=operator.num_features)
    self.assertAllClose(ranksvm_objectives.primal_objective(weights, operator.matvec(weights), 0.3, loss),
                        pair_sets.numpy_objective(weights, rows, np.ones(len(rows)), 0.3, loss))

  def test_hand_computed_dual(self):
    # Pairs x = 1 and 2, C = 0.25, α = (0.25, 0.125): Σα = 0.375, u = 0.25 + 0.25 = 0.5, D = 0.375 - 0.125.
    operator = pair_sets.single_feature_pairs([1.0, 2.0])
    alpha = np.array([0.25, 0.125])
    self.assertAllClose(operator.rmatvec(alpha), [0.5])
    self.assertAllClose(ranksvm_objectives.dual_objective(alpha, [0.5], 0.25, "hinge"), 0.25)
    # Squared hinge subtracts Σα² / (4C) = 0.078125 / 1.
    self.assertAllClose(ranksvm_objectives.dual_objective(alpha, [0.5], 0.25, "squared_hinge"),
                        0.25 - 0.078125)

  def test_huber_hinge_pieces(self):
    value, first, second = ranksvm_objectives.huber_hinge(np.array([-1.0, 0.0, 0.05, 0.1, 0.5]), 0.1)
    # 0 below 0; z² / (2δ) = 0.0025 / 0.2 inside; z - δ/2 from δ on.
    self.assertAllClose(value, [0.0, 0.0, 0.0125, 0.05, 0.45])
    self.assertAllClose(first, [0.0, 0.0, 0.5, 1.0, 1.0])
    self.assertAllClose(second, [0.0, 0.0, 10.0, 0.0, 0.0])

  def test_unknown_loss_raises(self):
    with self.assertRaisesRegex(ValueError, "`loss` must be one of"):
      ranksvm_objectives.primal_objective([1.0], [1.0], 1.0, "logistic")


if __name__ == "__main__":
  tf.test.main()
