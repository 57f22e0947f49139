"""Tests for pairwise.ranksvm.pair_transform: pairs only within queries, balanced signs, lazy tf.data
differences, and the never-materialized operator."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from pairwise.ranksvm import pair_transform

# Two queries: rows 0-2 (labels 2, 0, 1) and rows 3-4 (labels 1, 0).
RELEVANCE = np.array([2.0, 0.0, 1.0, 1.0, 0.0])
OFFSETS = np.array([0, 3, 5])


class PreferencePairsTest(tf.test.TestCase, parameterized.TestCase):

  def test_pairs_are_within_queries_and_better_first(self):
    better, worse, skipped = pair_transform.preference_pairs(RELEVANCE, OFFSETS)
    # Query 1: 0>1, 0>2, 2>1; query 2: 3>4. Nothing crosses queries.
    self.assertEqual(sorted(zip(better.tolist(), worse.tolist(), strict=False)),
                     [(0, 1), (0, 2), (2, 1), (3, 4)])
    self.assertEqual(skipped, 0)

  def test_equal_labels_form_no_pair_and_such_query_is_skipped(self):
    better, _, skipped = pair_transform.preference_pairs([1.0, 1.0, 2.0, 0.0], [0, 2, 4])
    self.assertEqual(better.tolist(), [2])
    self.assertEqual(skipped, 1)

  def test_single_document_query_raises_naming_it(self):
    with self.assertRaisesRegex(ValueError, "Query 'lonely' has 1 document"):
      pair_transform.preference_pairs([1.0, 1.0, 0.0], [0, 1, 3], query_ids=["lonely", "ok"])

  def test_single_document_query_can_be_skipped(self):
    better, worse, skipped = pair_transform.preference_pairs([1.0, 1.0, 0.0], [0, 1, 3], unpairable="skip")
    self.assertEqual((better.tolist(), worse.tolist(), skipped), ([1], [2], 1))

  def test_no_pair_at_all_raises(self):
    with self.assertRaisesRegex(ValueError, "No query has two documents with different labels"):
      pair_transform.preference_pairs([1.0, 1.0], [0, 2])

  def test_max_pairs_per_query_subsamples(self):
    relevance = np.arange(10, dtype=np.float64)  # 45 pairs in one query.
    better, worse, _ = pair_transform.preference_pairs(relevance, [0, 10], max_pairs_per_query=7, seed=3)
    self.assertLen(better, 7)
    self.assertTrue(np.all(relevance[better] > relevance[worse]))
    again, _, _ = pair_transform.preference_pairs(relevance, [0, 10], max_pairs_per_query=7, seed=3)
    self.assertAllEqual(better, again)

  @parameterized.named_parameters(
      ("bad_policy", {"unpairable": "drop"}, "unpairable"),
      ("bad_max_pairs", {"max_pairs_per_query": 0}, "max_pairs_per_query"),
  )
  def test_bad_arguments_raise(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      pair_transform.preference_pairs(RELEVANCE, OFFSETS, **kwargs)

  def test_bad_offsets_raise(self):
    with self.assertRaisesRegex(ValueError, "list_offsets"):
      pair_transform.preference_pairs(RELEVANCE, [0, 3, 4])


class SignFlipTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(1, 2, 7, 100)
  def test_flips_exactly_half_and_signs_agree_with_labels(self, num_pairs):
    rng = np.random.default_rng(num_pairs)
    relevance = rng.permutation(num_pairs + 1).astype(np.float64)
    better = np.argsort(-relevance)[:num_pairs]
    worse = np.full(num_pairs, int(np.argmin(relevance)))
    keep = better != worse
    pairs = pair_transform.balance_by_sign_flips(better[keep], worse[keep], seed=0)
    self.assertEqual(int(np.sum(pairs.signs < 0)), pairs.num_pairs // 2)
    # sign(y_first - y_second) is the pair's sign.
    self.assertAllEqual(np.sign(relevance[pairs.first] - relevance[pairs.second]), pairs.signs)

  def test_pairwise_differences(self):
    features = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    pairs = pair_transform.PairIndices(first=np.array([0, 2]), second=np.array([1, 0]),
                                       signs=np.array([1.0, -1.0], np.float32))
    x, y = pair_transform.pairwise_differences(features, pairs)
    self.assertAllEqual(x, [[1.0, -1.0], [1.0, 2.0]])
    self.assertAllEqual(y, [1.0, -1.0])

  def test_pairs_within_queries_is_deterministic_and_balanced(self):
    first = pair_transform.pairs_within_queries(RELEVANCE, OFFSETS, seed=5)
    second = pair_transform.pairs_within_queries(RELEVANCE, OFFSETS, seed=5)
    self.assertAllEqual(first.first, second.first)
    self.assertAllEqual(first.signs, second.signs)
    self.assertEqual(int(np.sum(first.signs > 0)), 2)
    self.assertEqual(int(np.sum(first.signs < 0)), 2)


class PairDatasetTest(tf.test.TestCase):

  def test_batches_hold_the_same_differences_as_the_materialized_set(self):
    rng = np.random.default_rng(0)
    features = rng.normal(size=(5, 3)).astype(np.float32)
    pairs = pair_transform.pairs_within_queries(RELEVANCE, OFFSETS, seed=1)
    x, y = pair_transform.pairwise_differences(features, pairs)
    batches = list(pair_transform.pair_dataset(features, pairs, batch_size=3, shuffle_seed=7))
    self.assertEqual([int(b[0].shape[0]) for b in batches], [3, 1])
    got_x = np.concatenate([b[0].numpy() for b in batches])
    got_y = np.concatenate([b[1].numpy() for b in batches])
    def key(xs, ys):
      return sorted(map(tuple, np.round(np.column_stack([xs, ys]), 5)))
    self.assertEqual(key(got_x, got_y), key(x, y))

  def test_dataset_order_is_kept_without_seed_and_reshuffled_each_pass_with_one(self):
    features = np.arange(40, dtype=np.float32).reshape(40, 1)  # Row r has the single feature r.
    pairs = pair_transform.PairIndices(first=np.arange(1, 40), second=np.zeros(39, np.int64),
                                       signs=np.ones(39, np.float32), num_skipped_queries=0)

    def passes(dataset, count):
      return [np.concatenate([x.numpy()[:, 0] for x, _ in dataset]).tolist() for _ in range(count)]

    ordered = passes(pair_transform.pair_dataset(features, pairs, batch_size=8, shuffle_seed=None), 1)[0]
    self.assertEqual(ordered, list(range(1, 40)))
    first, second = passes(pair_transform.pair_dataset(features, pairs, batch_size=8, shuffle_seed=3), 2)
    self.assertCountEqual(first, ordered)
    self.assertCountEqual(second, ordered)
    self.assertNotEqual(first, ordered)
    self.assertNotEqual(first, second)  # A new permutation every pass.
    again = passes(pair_transform.pair_dataset(features, pairs, batch_size=8, shuffle_seed=3), 1)[0]
    self.assertEqual(again, first)  # Reproducible from the seed.

  def test_bad_batch_size_raises(self):
    pairs = pair_transform.pairs_within_queries(RELEVANCE, OFFSETS)
    with self.assertRaisesRegex(ValueError, "`batch_size` must be >= 1, got 0"):
      pair_transform.pair_dataset(np.zeros((5, 1)), pairs, batch_size=0)


class PairDifferencesTest(tf.test.TestCase, parameterized.TestCase):

  def _hand_example(self, **kwargs):
    # Rows [1, 0], [0, 2], [3, 3]; pairs 0 - 1 (+1) and 2 - 0 (-1): X = [[1, -2], [-(3 - 1), -(3 - 0)]].
    return pair_transform.PairDifferences(
        [[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]],
        pair_transform.PairIndices(np.array([0, 2]), np.array([1, 0]), np.array([1.0, -1.0])), **kwargs)

  def test_hand_computed_products(self):
    ops = self._hand_example()
    self.assertAllClose(ops.rows([0, 1]), [[1.0, -2.0], [-2.0, -3.0]])
    self.assertAllClose(ops.matvec([1.0, 1.0]), [1 - 2, -2 - 3])
    self.assertAllClose(ops.rmatvec([1.0, 2.0]), [1 - 4, -2 - 6])
    # X^T diag(1, 2) X = [[1 + 8, -2 + 12], [-2 + 12, 4 + 18]].
    self.assertAllClose(ops.gram([1.0, 2.0]), [[9.0, 10.0], [10.0, 22.0]])
    self.assertAllClose(ops.gram([0.0, 0.0]), np.zeros((2, 2)))

  @parameterized.parameters(1, 7, 1 << 15)
  def test_matches_the_materialized_differences_whatever_the_chunk(self, chunk_pairs):
    rng = np.random.default_rng(0)
    features = rng.normal(size=(30, 4))
    relevance = rng.integers(0, 3, 30)
    pairs = pair_transform.pairs_within_queries(relevance, [0, 10, 20, 30], seed=1)
    x, y = pair_transform.pairwise_differences(features, pairs)
    ops = pair_transform.PairDifferences(features, pairs, chunk_pairs=chunk_pairs)
    signed = y[:, None] * x  # Rows of the operator: the sign folded in.
    w, c = rng.normal(size=4), rng.normal(size=pairs.num_pairs)
    h = rng.uniform(size=pairs.num_pairs) * (rng.random(pairs.num_pairs) < 0.5)
    self.assertAllClose(ops.matvec(w), signed @ w)
    self.assertAllClose(ops.rmatvec(c), signed.T @ c)
    self.assertAllClose(ops.gram(h), signed.T @ (h[:, None] * signed))
    self.assertEqual((ops.num_pairs, ops.num_features), (pairs.num_pairs, 4))

  @parameterized.named_parameters(
      ("index_out_of_range", {"first": [0, 3]}, r"`first` must lie in \[0, 3\)"),
      ("bad_sign", {"signs": [1.0, 0.5]}, "must be \\+1 or -1"),
      ("length_mismatch", {"second": [1]}, "1-D of one length"),
  )
  def test_bad_pairs_raise(self, override, message):
    arrays = {"first": [0, 2], "second": [1, 0], "signs": [1.0, -1.0], **override}
    with self.assertRaisesRegex(ValueError, message):
      pair_transform.PairDifferences(np.zeros((3, 2)), pair_transform.PairIndices(
          np.array(arrays["first"]), np.array(arrays["second"]), np.array(arrays["signs"])))

  def test_negative_weight_and_bad_chunk_raise(self):
    with self.assertRaisesRegex(ValueError, ">= 0"):
      self._hand_example().gram([1.0, -1.0])
    with self.assertRaisesRegex(ValueError, "`chunk_pairs` must be an integer >= 1, got 0"):
      self._hand_example(chunk_pairs=0)


if __name__ == "__main__":
  tf.test.main()
