"""Tests for pairwise.margin.pairs: pairs inside groups, group splits, list pairs and the margin hinge."""

import itertools

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from pairwise.margin import pairs


def _numpy_pairs(labels, group_ids, min_gap):
  """Brute force: unordered pairs {a, b} inside a group with 0 < |Δ| and |Δ| >= min_gap."""
  out = set()
  for a, b in itertools.combinations(range(len(labels)), 2):
    gap = abs(labels[a] - labels[b])
    if group_ids[a] == group_ids[b] and gap > 0 and gap >= min_gap:
      out.add((a, b))
  return out


class PairsWithinGroupsTest(tf.test.TestCase, parameterized.TestCase):

  def test_hand_example(self):
    # Group 0 holds rows 0, 1, 2 with labels 2, 0, 1: pairs (0,1) Δ2, (0,2) Δ1, (1,2) Δ1. Row 3 is alone.
    result = pairs.pairs_within_groups(np.array([2.0, 0.0, 1.0, 1.0]), np.array([0, 0, 0, 1]),
                                       randomize_order=False)
    self.assertAllEqual(result.left, [0, 0, 1])
    self.assertAllEqual(result.right, [1, 2, 2])
    self.assertAllEqual(result.pair_labels, [1.0, 1.0, -1.0])

  def test_min_label_gap_drops_close_pairs(self):
    result = pairs.pairs_within_groups(np.array([2.0, 0.0, 1.0]), np.array([0, 0, 0]), min_label_gap=2.0)
    self.assertEqual({tuple(sorted(p)) for p in zip(result.left, result.right, strict=True)}, {(0, 1)})

  def test_equal_labels_never_pair(self):
    result = pairs.pairs_within_groups(np.array([1.0, 1.0, 1.0]), np.array([0, 0, 0]))
    self.assertEqual(len(result), 0)

  @parameterized.parameters(0.0, 1.0, 2.5)
  def test_matches_brute_force_with_correct_labels(self, min_gap):
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 5, size=60).astype(float)
    group_ids = rng.integers(0, 7, size=60)
    result = pairs.pairs_within_groups(labels, group_ids, min_label_gap=min_gap, seed=1)
    got = {tuple(sorted(p)) for p in zip(result.left, result.right, strict=True)}
    self.assertEqual(got, _numpy_pairs(labels, group_ids, min_gap))
    self.assertEqual(len(got), len(result))
    expected_e = np.where(labels[result.left] > labels[result.right], 1.0, -1.0)
    self.assertAllEqual(result.pair_labels, expected_e)

  def test_order_is_randomized_and_seeded(self):
    labels = np.arange(40, dtype=float)
    group_ids = np.zeros(40)
    first = pairs.pairs_within_groups(labels, group_ids, seed=7)
    again = pairs.pairs_within_groups(labels, group_ids, seed=7)
    self.assertAllEqual(first.left, again.left)
    # 780 pairs; with the reference's fixed order every E would be -1 here (lower row, lower label).
    share_positive = np.mean(first.pair_labels > 0)
    self.assertBetween(share_positive, 0.4, 0.6)

  def test_negative_gap_raises(self):
    with self.assertRaisesRegex(ValueError, "min_label_gap"):
      pairs.pairs_within_groups(np.array([0.0, 1.0]), np.array([0, 0]), min_label_gap=-1.0)


class SplitByGroupTest(tf.test.TestCase):

  def test_groups_never_cross_parts_and_rows_are_covered(self):
    rng = np.random.default_rng(0)
    group_ids = rng.integers(0, 50, size=1000)
    split = pairs.split_by_group(group_ids, 0.1, 0.2, seed=4)
    parts = [set(group_ids[p]) for p in (split.train, split.validation, split.test)]
    self.assertEmpty(parts[0] & parts[1])
    self.assertEmpty(parts[0] & parts[2])
    self.assertEmpty(parts[1] & parts[2])
    self.assertAllEqual(np.sort(np.concatenate([split.train, split.validation, split.test])), np.arange(1000))
    self.assertBetween(len(split.test) / 1000, 0.12, 0.28)

  def test_same_seed_same_split(self):
    group_ids = np.repeat(np.arange(20), 3)
    a = pairs.split_by_group(group_ids, 0.2, 0.2, seed=1)
    b = pairs.split_by_group(group_ids, 0.2, 0.2, seed=1)
    self.assertAllEqual(a.test, b.test)

  def test_fractions_summing_to_one_raise(self):
    with self.assertRaisesRegex(ValueError, "must be < 1"):
      pairs.split_by_group(np.arange(4), 0.5, 0.5, seed=0)

  def test_fraction_out_of_range_raises(self):
    with self.assertRaisesRegex(ValueError, "test_fraction"):
      pairs.split_by_group(np.arange(4), 0.1, 1.5, seed=0)


class GroupListsTest(tf.test.TestCase):

  def test_chunks_large_groups_and_pads(self):
    # Group 0 has 5 rows -> chunks of 3 and 2 with list_size 3; group 1 has one row, dropped by min_items=2.
    group_ids = np.array([0, 0, 0, 0, 0, 1])
    lists = pairs.group_lists(group_ids, list_size=3, min_items=2)
    self.assertAllEqual(lists, [[0, 1, 2], [3, 4, pairs.PADDING_INDEX]])

  def test_seeded_lists_cover_every_row_once(self):
    group_ids = np.random.default_rng(1).integers(0, 6, size=80)
    lists = pairs.group_lists(group_ids, list_size=7, seed=3)
    rows = lists[lists >= 0]
    self.assertAllEqual(np.sort(rows), np.arange(80))
    for row in lists:
      self.assertLen(set(group_ids[row[row >= 0]]), 1)

  def test_no_list_size_uses_largest_group(self):
    lists = pairs.group_lists(np.array([0, 1, 1, 1]))
    self.assertEqual(lists.shape, (2, 3))

  def test_zero_list_size_raises(self):
    with self.assertRaisesRegex(ValueError, "list_size"):
      pairs.group_lists(np.array([0]), list_size=0)


class OrientedListPairsTest(tf.test.TestCase):

  def test_hand_example_with_flip_and_padding(self):
    # List [label 2, label 0, pad]: position pairs (0,1), (0,2), (1,2); only (0,1) is valid.
    result = pairs.oriented_list_pairs([[2.0, 0.0, -1.0]], [[True, True, False]],
                                       flips=[[True, False, False]])
    self.assertAllEqual(result["left"], [[1, 0, 1]])
    self.assertAllEqual(result["right"], [[0, 2, 2]])
    self.assertAllEqual(result["valid"], [[True, False, False]])
    self.assertAllEqual(result["pair_labels"], [[-1.0, 0.0, 0.0]])  # left (label 0) is below right (label 2)

  def test_matches_pairs_within_groups(self):
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 3, size=(4, 6)).astype(np.float32)
    mask = rng.random((4, 6)) < 0.8
    result = pairs.oriented_list_pairs(labels, mask, min_label_gap=1.0)
    flat_labels = labels.reshape(-1)
    group_ids = np.repeat(np.arange(4), 6)
    keep = mask.reshape(-1)
    expected = pairs.pairs_within_groups(flat_labels[keep], group_ids[keep], 1.0, randomize_order=False)
    rows = np.flatnonzero(keep)
    expected_set = {(rows[a], rows[b], e) for a, b, e in
                    zip(expected.left, expected.right, expected.pair_labels, strict=True)}
    valid = result["valid"].numpy()
    got = set()
    for list_index, pair_index in zip(*np.nonzero(valid), strict=True):
      a = list_index * 6 + result["left"].numpy()[list_index, pair_index]
      b = list_index * 6 + result["right"].numpy()[list_index, pair_index]
      got.add((a, b, result["pair_labels"].numpy()[list_index, pair_index]))
    self.assertEqual(got, expected_set)

  def test_list_pair_positions_count(self):
    a, b = pairs.list_pair_positions(20)
    self.assertLen(a, 190)
    self.assertTrue(np.all(a < b))


class MarginRankingLossTest(tf.test.TestCase):

  def test_hand_values(self):
    # E=+1, f_i=3, f_j=0.5: max(0, -2.5 + 2) = 0;  E=-1: max(0, 2.5 + 2) = 4.5;  E=+1, equal scores: γ = 2.
    losses = pairs.margin_ranking_loss([3.0, 3.0, 1.0], [0.5, 0.5, 1.0], [1.0, -1.0, 1.0], margin=2.0)
    self.assertAllClose(losses, [0.0, 4.5, 2.0])

  def test_matches_numpy(self):
    rng = np.random.default_rng(0)
    left, right = rng.normal(size=50), rng.normal(size=50)
    labels = rng.choice([-1.0, 1.0], size=50)
    expected = np.maximum(0.0, -labels * (left - right) + 0.7)
    self.assertAllClose(pairs.margin_ranking_loss(left, right, labels, margin=0.7), expected, atol=1e-6)


if __name__ == "__main__":
  tf.test.main()
