"""Tests for rank4class_engine.statistics.ranking_metrics: hand-checked cases, ties, padding and NumPy/SciPy
references."""

import math

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from scipy import stats

from rank4class_data.ranking import ranking_corpus
from rank4class_data.tf_ranking import tfr
from rank4class_engine.statistics import ranking_metrics


def _np_order(labels, scores):
  """Tie-free reference order: indices by score descending."""
  return np.argsort(-np.asarray(scores), kind="stable")


def _np_ndcg(labels, scores, topn, gain=lambda y: 2.0**y - 1):
  labels = np.asarray(labels, np.float64)
  k = len(labels) if topn is None else min(topn, len(labels))
  discounts = 1.0 / np.log2(np.arange(2, k + 2))
  dcg = np.sum(gain(labels[_np_order(labels, scores)][:k]) * discounts)
  ideal = np.sum(gain(np.sort(labels)[::-1][:k]) * discounts)
  return dcg / ideal if ideal > 0 else 0.0


def _np_average_precision(labels, scores, topn, threshold=1.0):
  relevant = (np.asarray(labels) >= threshold)[_np_order(labels, scores)]
  k = len(relevant) if topn is None else min(topn, len(relevant))
  hits = 0
  total = 0.0
  for r in range(k):
    if relevant[r]:
      hits += 1
      total += hits / (r + 1)
  return total / relevant.sum() if relevant.sum() else 0.0


def _np_reciprocal_rank(labels, scores, topn, threshold=1.0):
  relevant = (np.asarray(labels) >= threshold)[_np_order(labels, scores)]
  k = len(relevant) if topn is None else min(topn, len(relevant))
  hits = np.nonzero(relevant[:k])[0]
  return 1.0 / (hits[0] + 1) if hits.size else 0.0


def _np_pair_accuracy(labels, scores):
  labels, scores = np.asarray(labels), np.asarray(scores)
  better = labels[:, None] > labels[None, :]
  return np.sum(better & (scores[:, None] > scores[None, :])) / np.sum(better)


class SortedPositionsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      # Scores 3, 3 tie: pessimistic puts the label-0 document first, optimistic the label-2 one.
      ("pessimistic", "pessimistic", [[3, 1, 2]]),
      ("optimistic", "optimistic", [[3, 2, 1]]),
      ("input_order", "input_order", [[3, 1, 2]]),
  )
  def test_ties_follow_the_policy(self, policy, expected):
    positions = ranking_metrics.sorted_positions([[0.0, 0.0, 2.0]], [[1.0, 3.0, 3.0]], tie_breaking=policy)
    self.assertAllEqual(positions, expected)

  def test_padding_goes_last_whatever_its_score(self):
    positions = ranking_metrics.sorted_positions([[1.0, 0.0, -1.0]], [[0.0, 1.0, 99.0]],
                                                 mask=[[True, True, False]])
    self.assertAllEqual(positions, [[2, 1, 3]])

  def test_unknown_policy_raises(self):
    with self.assertRaisesRegex(ValueError, "tie_breaking"):
      ranking_metrics.sorted_positions([[0.0]], [[0.0]], tie_breaking="random")


class HandCheckedMetricsTest(tf.test.TestCase, parameterized.TestCase):

  # Scores order the documents 1, 2, 0, 3 (labels 1, 0, 2, 0).
  LABELS = [[2.0, 1.0, 0.0, 0.0]]
  SCORES = [[0.1, 0.3, 0.2, 0.0]]

  def test_ndcg(self):
    # DCG = (2^1 - 1)/log2(2) + 0 + (2^2 - 1)/log2(4) = 1 + 1.5; ideal = 3/1 + 1/log2(3).
    expected = 2.5 / (3.0 + 1.0 / math.log2(3.0))
    self.assertAllClose(ranking_metrics.ndcg(self.LABELS, self.SCORES), [expected])

  def test_ndcg_at_1(self):
    # Top document has label 1: gain 1; ideal top has gain 3.
    self.assertAllClose(ranking_metrics.ndcg(self.LABELS, self.SCORES, topn=1), [1.0 / 3.0])

  def test_linear_gain(self):
    # DCG = 1 + 2/2 = 2; ideal = 2 + 1/log2(3).
    self.assertAllClose(ranking_metrics.ndcg(self.LABELS, self.SCORES, gain="linear"),
                        [2.0 / (2.0 + 1.0 / math.log2(3.0))])

  def test_map(self):
    # Relevant (label >= 1) at positions 1 and 3: AP = (1/1 + 2/3) / 2.
    self.assertAllClose(ranking_metrics.mean_average_precision(self.LABELS, self.SCORES), [(1 + 2 / 3) / 2])

  def test_map_threshold_two(self):
    # Only label 2 is relevant, at position 3: AP = 1/3.
    self.assertAllClose(
        ranking_metrics.mean_average_precision(self.LABELS, self.SCORES, relevance_threshold=2.0), [1 / 3])

  def test_map_at_k_divides_by_all_relevant(self):
    # topn=1: only position 1 counts: (1/1) / 2 relevant documents.
    self.assertAllClose(ranking_metrics.mean_average_precision(self.LABELS, self.SCORES, topn=1), [0.5])

  def test_mrr_and_cutoff(self):
    self.assertAllClose(ranking_metrics.reciprocal_rank(self.LABELS, self.SCORES, relevance_threshold=2.0),
                        [1 / 3])
    self.assertAllClose(
        ranking_metrics.reciprocal_rank(self.LABELS, self.SCORES, topn=2, relevance_threshold=2.0), [0.0])

  def test_pair_accuracy(self):
    # Pairs with different labels: (0,1) wrong, (0,2) wrong, (0,3) right, (1,2) right, (1,3) right -> 3/5.
    self.assertAllClose(ranking_metrics.pair_accuracy(self.LABELS, self.SCORES), [0.6])

  def test_kendall_tau(self):
    # 6 pairs: 3 concordant, 2 discordant, 1 label tie (docs 2, 3): (3 - 2) / sqrt(6 * 5).
    self.assertAllClose(ranking_metrics.kendall_tau(self.LABELS, self.SCORES), [1 / math.sqrt(30)])

  def test_perfect_and_reversed_rank_one_is_best_input(self):
    # Ranks 1..4 (1 = best) become relevance 3..0; scoring by -rank is perfect, by +rank reversed.
    ranks = np.array([3.0, 1.0, 4.0, 2.0])
    relevance = ranking_corpus.rank_to_relevance(ranks, np.zeros(4, np.int64))
    self.assertAllEqual(relevance, [1.0, 3.0, 0.0, 2.0])
    labels = relevance[None, :]
    for scores, sign in ((-ranks, 1.0), (ranks, -1.0)):
      self.assertAllClose(ranking_metrics.kendall_tau(labels, scores[None, :]), [sign])
      self.assertAllClose(ranking_metrics.pair_accuracy(labels, scores[None, :]), [(1 + sign) / 2])
    self.assertAllClose(ranking_metrics.ndcg(labels, -ranks[None, :], gain="linear"), [1.0])

  def test_constant_scores_pessimistic_is_worst_optimistic_is_best(self):
    labels, scores = [[0.0, 2.0, 1.0]], [[5.0, 5.0, 5.0]]
    best = ranking_metrics.ndcg(labels, scores, tie_breaking="optimistic")
    worst = ranking_metrics.ndcg(labels, scores, tie_breaking="pessimistic")
    reversed_order = ranking_metrics.ndcg(labels, [[3.0, 1.0, 2.0]])
    self.assertAllClose(best, [1.0])
    self.assertAllClose(worst, reversed_order)
    self.assertAllClose(ranking_metrics.kendall_tau(labels, scores), [-1.0])
    self.assertAllClose(ranking_metrics.pair_accuracy(labels, scores), [0.0])

  def test_input_order_keeps_list_order_for_ties(self):
    # Input order [0, 2, 1] for labels: DCG = 0 + 3/log2(3) + 1/2.
    value = ranking_metrics.ndcg([[0.0, 2.0, 1.0]], [[1.0, 1.0, 1.0]], tie_breaking="input_order")
    ideal = 3.0 + 1.0 / math.log2(3.0)
    self.assertAllClose(value, [(3.0 / math.log2(3.0) + 0.5) / ideal])

  def test_list_without_relevant_document_scores_zero_and_empty_list_nan(self):
    labels = [[0.0, 0.0], [0.0, 0.0]]
    mask = [[True, True], [False, False]]
    values = ranking_metrics.ndcg(labels, [[1.0, 2.0], [1.0, 2.0]], mask)
    self.assertEqual(values[0], 0.0)
    self.assertTrue(np.isnan(values[1]))
    self.assertTrue(np.all(np.isnan(ranking_metrics.kendall_tau(labels, [[1.0, 2.0], [1.0, 2.0]], mask))))


class PaddingAndReferencesTest(tf.test.TestCase, parameterized.TestCase):

  def _random_lists(self, seed, num_lists=7, list_size=9):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, size=(num_lists, list_size)).astype(np.float64)
    scores = rng.permutation(num_lists * list_size).reshape(num_lists, list_size).astype(np.float64)
    sizes = rng.integers(2, list_size + 1, size=num_lists)
    mask = np.arange(list_size)[None, :] < sizes[:, None]
    return labels, scores, mask, sizes

  @parameterized.parameters(None, 1, 3, 5)
  def test_per_list_metrics_match_numpy(self, topn):
    labels, scores, mask, sizes = self._random_lists(seed=topn or 0)
    ndcg = ranking_metrics.ndcg(labels, scores, mask, topn)
    average_precision = ranking_metrics.mean_average_precision(labels, scores, mask, topn, 2.0)
    reciprocal = ranking_metrics.reciprocal_rank(labels, scores, mask, topn)
    for i, n in enumerate(sizes):
      self.assertAllClose(ndcg[i], _np_ndcg(labels[i, :n], scores[i, :n], topn), atol=1e-6)
      self.assertAllClose(average_precision[i],
                          _np_average_precision(labels[i, :n], scores[i, :n], topn, 2.0), atol=1e-6)
      self.assertAllClose(reciprocal[i], _np_reciprocal_rank(labels[i, :n], scores[i, :n], topn), atol=1e-6)

  def test_kendall_tau_and_pair_accuracy_match_references(self):
    labels, scores, mask, sizes = self._random_lists(seed=11)
    tau = ranking_metrics.kendall_tau(labels, scores, mask)
    accuracy = ranking_metrics.pair_accuracy(labels, scores, mask)
    for i, n in enumerate(sizes):
      if np.unique(labels[i, :n]).size < 2:
        self.assertTrue(np.isnan(tau[i]))
        continue
      self.assertAllClose(tau[i], stats.kendalltau(scores[i, :n], labels[i, :n], variant="b").statistic)
      self.assertAllClose(accuracy[i], _np_pair_accuracy(labels[i, :n], scores[i, :n]))

  def test_padding_values_do_not_matter(self):
    labels, scores, mask, _ = self._random_lists(seed=3)
    garbage_labels = np.where(mask, labels, -1.0)
    garbage_scores = np.where(mask, scores, 1e9)
    first = ranking_metrics.compute_metrics(labels, scores, mask)
    second = ranking_metrics.compute_metrics(garbage_labels, garbage_scores, mask)
    self.assertAllClose(first, second)

  def test_mean_ndcg_matches_tfr_keras_metric_without_ties(self):
    labels, scores, mask, _ = self._random_lists(seed=5)
    padded_labels = np.where(mask, labels, -1.0).astype(np.float32)
    keras_metric = tfr.keras.metrics.NDCGMetric(topn=5)
    keras_metric.update_state(padded_labels, scores.astype(np.float32))
    ours = ranking_metrics.compute_metrics(labels, scores, mask, ranking_metrics.RankingMetricsConfig(topn=5))
    self.assertAllClose(ours["ndcg@5"], keras_metric.result().numpy(), atol=1e-6)

  def test_compute_metrics_names_and_nan_lists_are_ignored(self):
    labels = [[1.0, 0.0], [1.0, 1.0]]  # The second list has no label-differing pair.
    scores = [[2.0, 1.0], [1.0, 2.0]]
    result = ranking_metrics.compute_metrics(labels, scores)
    self.assertEqual(sorted(result), ["kendall_tau", "map@10", "mrr@10", "ndcg@10", "pair_accuracy"])
    self.assertAllClose(result["pair_accuracy"], 1.0)
    self.assertAllClose(result["kendall_tau"], 1.0)


class PreferencePairAccuracyTest(tf.test.TestCase):

  def test_hand_example_pools_lists_and_counts_ties_and_nan_wrong(self):
    # List 0: labels [2, 0, 1]; ordered pairs with different labels: all 6. P right on (0,1), (1,0), (0,2),
    # (2,0); tie on (1,2)/(2,1) -> 4 of 6. List 1: labels [1, 1, pad]: no pair. List 2: [0, 1], P NaN -> 0 of
    # 2.
    labels = np.array([[2.0, 0.0, 1.0], [1.0, 1.0, -1.0], [0.0, 1.0, -1.0]])
    mask = np.array([[True, True, True], [True, True, False], [True, True, False]])
    p = np.zeros([3, 3, 3])
    p[0] = [[0.0, 3.0, 1.0], [-3.0, 0.0, 0.0], [-1.0, 0.0, 0.0]]
    p[2, 0, 1] = p[2, 1, 0] = np.nan
    self.assertAllClose(ranking_metrics.preference_pair_accuracy(p, labels, mask), 4 / 8)

  def test_score_differences_agree_with_pair_accuracy_without_ties(self):
    rng = np.random.default_rng(0)
    labels, scores = rng.integers(0, 3, size=[1, 7]).astype(float), rng.normal(size=[1, 7])
    preferences = scores[:, :, None] - scores[:, None, :]
    self.assertAllClose(ranking_metrics.preference_pair_accuracy(preferences, labels),
                        ranking_metrics.pair_accuracy(labels, scores)[0])

  def test_no_pair_is_nan(self):
    self.assertTrue(np.isnan(ranking_metrics.preference_pair_accuracy(np.zeros([1, 2, 2]), np.ones([1, 2]))))

  def test_pairs_correct_on_tensors_and_arrays(self):
    self.assertAllEqual(ranking_metrics.pairs_correct(tf.constant([1.0, -1.0, 1.0]),
                                                      tf.constant([2.0, 2.0, 0.0])),
                        [True, False, False])
    self.assertAllEqual(ranking_metrics.pairs_correct(np.array([-1.0]), np.array([-0.5])), [True])


class OneRelevantDocumentTest(tf.test.TestCase, parameterized.TestCase):

  def test_hand_computed(self):
    ranks = [0, 1, 6, np.inf]  # The last is never ranked (a retriever's miss).
    # 1 / log2(0 + 2) = 1, 1 / log2(3) = 0.631; rank 6 is outside the top 5.
    self.assertAllClose(ranking_metrics.ndcg_of_ranks(ranks, 5), [1.0, 1.0 / np.log2(3.0), 0.0, 0.0])
    self.assertAllClose(ranking_metrics.ndcg_of_ranks(ranks), [1.0, 1.0 / np.log2(3.0), 1.0 / 3.0, 0.0])
    self.assertAllClose(ranking_metrics.reciprocal_rank_of_ranks(ranks), [1.0, 0.5, 1.0 / 7.0, 0.0])
    self.assertAllClose(ranking_metrics.reciprocal_rank_of_ranks(ranks, 2), [1.0, 0.5, 0.0, 0.0])
    self.assertAllEqual(ranking_metrics.top_k_error_of_ranks(ranks, 1), [0.0, 1.0, 1.0, 1.0])
    self.assertAllEqual(ranking_metrics.top_k_error_of_ranks(ranks, 5), [0.0, 0.0, 1.0, 1.0])

  @parameterized.parameters(None, 1, 3)
  def test_agree_with_the_list_metrics(self, topn):
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(20, 7))
    labels = np.zeros_like(scores)
    labels[np.arange(20), rng.integers(0, 7, size=20)] = 1.0
    ranks = np.sum(scores > np.sum(scores * labels, axis=1, keepdims=True), axis=1)
    for gain in ranking_metrics.GAINS:
      self.assertAllClose(ranking_metrics.ndcg_of_ranks(ranks, topn),
                          ranking_metrics.ndcg(labels, scores, topn=topn, gain=gain), atol=1e-6)
    self.assertAllClose(ranking_metrics.reciprocal_rank_of_ranks(ranks, topn),
                        ranking_metrics.reciprocal_rank(labels, scores, topn=topn), atol=1e-6)

  def test_bad_ranks_raise(self):
    with self.assertRaisesRegex(ValueError, "Ranks must be 0-based positions >= 0"):
      ranking_metrics.ndcg_of_ranks([0, -1])
    with self.assertRaisesRegex(ValueError, "`topn` must be an integer >= 1, got 0"):
      ranking_metrics.top_k_error_of_ranks([0], 0)


class FactoryAndValidationTest(tf.test.TestCase, parameterized.TestCase):

  def test_get_binds_arguments(self):
    metric = ranking_metrics.get("ndcg", topn=1)
    self.assertAllClose(metric([[2.0, 1.0, 0.0, 0.0]], [[0.1, 0.3, 0.2, 0.0]]), [1.0 / 3.0])

  def test_get_unknown_name_lists_allowed(self):
    with self.assertRaisesRegex(ValueError, r"`metric` must be one of \['ndcg', .*\], got 'precision'"):
      ranking_metrics.get("precision")

  @parameterized.named_parameters(
      ("negative_label", [[-1.0, 1.0]], [[0.0, 1.0]], None, "Labels must be"),
      ("nan_score", [[0.0, 1.0]], [[np.nan, 1.0]], None, "Scores must be finite"),
      ("shape_mismatch", [[0.0, 1.0]], [[0.0, 1.0, 2.0]], None, "num_lists, list_size"),
      ("mask_shape", [[0.0, 1.0]], [[0.0, 1.0]], [[True]], "mask"),
  )
  def test_bad_input_raises(self, labels, scores, mask, message):
    with self.assertRaisesRegex(ValueError, message):
      ranking_metrics.ndcg(labels, scores, mask)

  def test_bad_config_raises(self):
    with self.assertRaisesRegex(ValueError, "`topn` must be an integer >= 1, got 0"):
      ranking_metrics.RankingMetricsConfig(topn=0)
    with self.assertRaisesRegex(ValueError, "`topn` must be an integer >= 1, got 2.0"):
      ranking_metrics.RankingMetricsConfig(topn=2.0)
    with self.assertRaisesRegex(ValueError, "gain"):
      ranking_metrics.RankingMetricsConfig(gain="log")

  def test_ragged_to_padded(self):
    padded, mask = ranking_metrics.ragged_to_padded([1.0, 2.0, 3.0], [0, 2, 2, 3], pad_value=-1.0)
    self.assertAllEqual(padded, [[1.0, 2.0], [-1.0, -1.0], [3.0, -1.0]])
    self.assertAllEqual(mask, [[True, True], [False, False], [True, False]])
    with self.assertRaisesRegex(ValueError, "list_offsets"):
      ranking_metrics.ragged_to_padded([1.0], [0, 2])


if __name__ == "__main__":
  tf.test.main()
