"""Tests for pairwise.ranksvm.pair_passes: chunks of any size give the solver the same iterates, and its
memory is a few floats per pair, not a pair matrix."""

import tracemalloc
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from pairwise.ranksvm import pair_passes, pair_transform, ranksvm_solver
from tests.pairwise.ranksvm import pair_sets


class PairChunksTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(loss=["hinge", "squared_hinge"], chunk=[1, 7, 1000])
  def test_chunking_does_not_change_the_solution(self, loss, chunk):
    # The breast-cancer pairs (about 6,900) in chunks of 1, 7 and 1,000 pairs: the same iterates up to
    # rounding.
    operator, _, _ = pair_sets.breast_cancer_pair_sets()
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


if __name__ == "__main__":
  tf.test.main()
