"""Tests for pairwise.ranksvm.newton_step: the exact line search against a generic minimizer."""

import numpy as np
import scipy.optimize
import tensorflow as tf
from absl.testing import parameterized

from pairwise.ranksvm import newton_step, ranksvm_objectives
from tests.pairwise.ranksvm import pair_sets


class LineSearchTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(loss=["hinge", "squared_hinge"], seed=[0, 1, 2])
  def test_exact_minimum_along_the_direction(self, loss, seed):
    operator = pair_sets.random_operator(seed)
    rng = np.random.default_rng(seed + 10)
    weights = rng.normal(size=operator.num_features) * 0.3
    slack = 1.0 - operator.matvec(weights)
    smoothing = 0.05 if loss == "hinge" else None
    values, first, _ = ranksvm_objectives.huber_hinge(slack, smoothing) if loss == "hinge" else (
        None, 2 * np.maximum(slack, 0), None)
    direction = -(weights - 0.7 * operator.rmatvec(first))  # A descent direction: minus the gradient.
    margins = operator.matvec(direction)

    def phi(t):
      z = slack - t * margins
      loss_values = (ranksvm_objectives.huber_hinge(z, smoothing)[0] if loss == "hinge" else np.maximum(z,
                                                                                                    0) ** 2)
      moved = weights + t * direction
      return 0.5 * moved @ moved + 0.7 * loss_values.sum()

    step = newton_step.exact_step(weights @ direction, direction @ direction, lambda: [(slack, margins)],
                                     0.7, loss, smoothing)
    reference = scipy.optimize.minimize_scalar(phi, bounds=(0.0, 10.0), method="bounded",
                                               options={"xatol": 1e-12}).x
    self.assertGreater(step, 0.0)
    self.assertAllClose(step, reference, rtol=1e-5, atol=1e-8)
    self.assertLessEqual(phi(step), phi(reference) + 1e-12)

  def test_ascent_direction_gives_zero(self):
    # One pair x = 1. At w = 2 the hinge is 0 and the gradient is w = 2 > 0: moving along +1 only increases J.
    # w·p = 2, p·p = 1; the pair's slack -1 and direction margin 1.
    self.assertEqual(newton_step.exact_step(2.0, 1.0, lambda: [(np.array([-1.0]), np.array([1.0]))], 1.0,
                                               "hinge", 0.1), 0.0)


if __name__ == "__main__":
  tf.test.main()
