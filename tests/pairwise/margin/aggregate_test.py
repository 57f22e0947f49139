"""Tests for pairwise.margin.aggregate: list ranking from pair scores and ranked list -> classes."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import pairwise  # noqa: F401  (registers the Keras objects for loading)
from pairwise.margin import aggregate, margin_model


def _numpy_list_scores(model, embeddings, mask, symmetrize, method):
  """Reference: score each ordered pair (i, j) separately with the model, then aggregate in NumPy."""
  n = embeddings.shape[0]
  prefs = np.zeros([n, n])
  for i in range(n):
    for j in range(n):
      s = model.score_embeddings(embeddings[i:i + 1], embeddings[j:j + 1], training=False).numpy()[0]
      prefs[i, j] = s[0] - s[1]
  if symmetrize:
    prefs = (prefs - prefs.T) / 2
  else:
    prefs = np.triu(prefs, 1) - np.triu(prefs, 1).T
  out = np.full(n, aggregate.PADDING_SCORE)
  for i in range(n):
    if not mask[i]:
      continue
    others = [j for j in range(n) if j != i and mask[j]]
    if method == "win_count":
      out[i] = sum(1.0 if prefs[i, j] > 0 else 0.5 if prefs[i, j] == 0 else 0.0 for j in others)
    else:
      out[i] = sum(prefs[i, j] for j in others) / max(len(others), 1)
  return out


class PreferencesTest(tf.test.TestCase):

  def test_symmetrize_averages_both_orientations(self):
    # f(a,b) says +2, f(b,a) says -1 (i.e. a above b by 1): symmetrized P[a,b] = (2 - (-1)) / 2 = 1.5.
    out = aggregate.orient_preferences([[0.0, 2.0], [-1.0, 0.0]], symmetrize=True)
    self.assertAllClose(out, [[0.0, 1.5], [-1.5, 0.0]])

  def test_without_symmetrize_upper_triangle_decides(self):
    out = aggregate.orient_preferences([[0.0, 2.0], [5.0, 0.0]], symmetrize=False)
    self.assertAllClose(out, [[0.0, 2.0], [-2.0, 0.0]])


class AggregatePreferencesTest(tf.test.TestCase):

  def test_win_count_with_tie_and_padding(self):
    # Items a, b, c real, d padding. a beats b, ties c; b loses to c.
    p = np.array([[0, 1, 0, 9], [-1, 0, -2, 9], [0, 2, 0, 9], [-9, -9, -9, 0]], np.float32)
    mask = [[True, True, True, False]]
    out = aggregate.aggregate_preferences(p[None], mask, "win_count")
    self.assertAllClose(out, [[1.5, 0.0, 1.5, aggregate.PADDING_SCORE]])

  def test_mean_preference(self):
    p = np.array([[0, 1, 0], [-1, 0, -2], [0, 2, 0]], np.float32)
    out = aggregate.aggregate_preferences(p[None], [[True, True, True]], "mean_preference")
    self.assertAllClose(out, [[0.5, -1.5, 1.0]])

  def test_unknown_method_raises_listing_allowed(self):
    with self.assertRaisesRegex(ValueError, r"`aggregation` must be one of \['win_count', "
                                r"'mean_preference'\], got 'elo'"):
      aggregate.aggregate_preferences(np.zeros([1, 2, 2]), [[True, True]], "elo")


class ScoreListsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(symmetrize=[True, False], method=["win_count", "mean_preference"])
  def test_one_encoding_per_item_matches_pair_by_pair(self, symmetrize, method):
    tf.keras.utils.set_random_seed(1)
    model = margin_model.PairwiseRanker(None)
    embeddings = np.random.default_rng(0).normal(size=(5, 6)).astype(np.float32)
    mask = np.array([True, True, True, True, False])
    model((embeddings, embeddings), training=False)
    got = aggregate.score_lists(model, embeddings[None], mask[None], method, symmetrize, training=False)
    expected = _numpy_list_scores(model, embeddings, mask, symmetrize, method)
    self.assertAllClose(got[0], expected, atol=1e-5)

  def test_pointwise_ranker_sorts_by_its_scores(self):
    model = margin_model.PairwiseRanker(None, head="linear")
    z = tf.constant([[[1.0], [3.0], [2.0]]])
    model((z[0], z[0]))
    model._head._linear.set_weights([np.array([[2.0]]), np.array([0.0])])
    out = aggregate.score_lists(model, z, tf.constant([[True, True, True]]))
    self.assertAllClose(out, [[2.0, 6.0, 4.0]])

  def test_separate_encoders_use_right_encoder_for_right_items(self):
    model = margin_model.PairwiseRanker(margin_model.HashedBagOfWordsEncoder(40, 4), separate_encoders=True)
    items = tf.constant([["good", "bad", "meh"]])
    model((items[0], items[0]), training=False)
    got = aggregate.score_lists(model, items, tf.constant([[True, True, True]]), "mean_preference", False)
    pair = model((tf.constant(["good"]), tf.constant(["bad"])), training=False)[0]
    pair_meh = model((tf.constant(["good"]), tf.constant(["meh"])), training=False)[0]
    expected_good = ((pair[0] - pair[1]) + (pair_meh[0] - pair_meh[1])) / 2
    self.assertAllClose(got[0, 0], expected_good, atol=1e-5)


class PairwiseListScorerTest(tf.test.TestCase):

  def test_empty_strings_are_padding(self):
    scorer = aggregate.PairwiseListScorer(margin_model.PairwiseRanker(margin_model.HashedBagOfWordsEncoder(40,
                                                                                                           4)))
    out = scorer(tf.constant([["good", "bad", ""]]))
    self.assertEqual(out[0, 2], aggregate.PADDING_SCORE)

  def test_embeddings_need_a_mask(self):
    scorer = aggregate.PairwiseListScorer(margin_model.PairwiseRanker(None))
    with self.assertRaisesRegex(ValueError, "mask"):
      scorer(tf.ones([1, 2, 4]))

  def test_unknown_aggregation_raises(self):
    with self.assertRaisesRegex(ValueError, "aggregation"):
      aggregate.PairwiseListScorer(margin_model.PairwiseRanker(None), aggregation="elo")

  def test_config_and_save_load_round_trip(self):
    scorer = aggregate.PairwiseListScorer(
        margin_model.PairwiseRanker(margin_model.HashedBagOfWordsEncoder(40, 4)), "win_count", False)
    inputs = tf.constant([["good pill", "bad", "meh"], ["a", "b", ""]])
    expected = scorer(inputs, training=False)
    clone = aggregate.PairwiseListScorer.from_config(scorer.get_config())
    self.assertEqual(clone.get_config()["aggregation"], "win_count")
    path = self.create_tempdir().full_path
    scorer.save(path, save_traces=False)
    loaded = tf.keras.models.load_model(path)
    self.assertAllClose(loaded(inputs, training=False), expected)


class ClassConversionTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((10, 3, [3, 3, 4]), (9, 3, [3, 3, 3]), (11, 3, [3, 4, 4]), (1, 2, [0, 1]))
  def test_equal_segments_put_extra_items_on_top(self, n, k, expected):
    self.assertAllEqual(aggregate.segment_sizes(n, k), expected)

  def test_proportions_largest_remainder_ties_to_higher_class(self):
    # 10 · [0.15, 0.25, 0.6] = [1.5, 2.5, 6]: floors [1, 2, 6], one item left, remainders tie 0.5/0.5 -> class
    # 1.
    self.assertAllEqual(aggregate.segment_sizes(10, 3, [0.15, 0.25, 0.6]), [1, 3, 6])

  def test_bad_proportions_raise(self):
    with self.assertRaisesRegex(ValueError, "sum to 1"):
      aggregate.segment_sizes(10, 2, [0.5, 0.6])
    with self.assertRaisesRegex(ValueError, "2 entries"):
      aggregate.segment_sizes(10, 2, [1.0])
    with self.assertRaisesRegex(ValueError, "num_classes"):
      aggregate.segment_sizes(10, 1)

  def test_ranking_to_classes_hand_example(self):
    # Order by score: idx 1, 4 | 2, 3 | 5, 0 -> classes 2, 2 | 1, 1 | 0, 0.
    classes = aggregate.ranking_to_classes([0.1, 0.9, 0.5, 0.3, 0.7, 0.2], num_classes=3)
    self.assertAllEqual(classes, [0, 2, 1, 1, 2, 0])

  def test_ties_keep_input_order(self):
    self.assertAllEqual(aggregate.ranking_to_classes([1.0, 1.0, 1.0, 1.0], num_classes=2), [1, 1, 0, 0])

  def test_with_proportions(self):
    classes = aggregate.ranking_to_classes([5.0, 4.0, 3.0, 2.0, 1.0], 2, proportions=[0.8, 0.2])
    self.assertAllEqual(classes, [1, 0, 0, 0, 0])


if __name__ == "__main__":
  tf.test.main()
