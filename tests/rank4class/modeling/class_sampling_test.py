"""Tests for rank4class.modeling.class_sampling: sampling distributions, sampled lists, accidental hits,
log-Q."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.modeling import class_sampling


class ProbabilitiesTest(tf.test.TestCase, parameterized.TestCase):

  def test_hand_computed_distributions(self):
    self.assertAllClose(class_sampling.sampling_probabilities("uniform", 4), [0.25] * 4)
    # Log-uniform over frequency ranks: class 2 is the most frequent (rank 0), then 0, 3, 1.
    counts = [5, 1, 9, 2]
    ranks = np.array([1, 3, 0, 2])
    expected = np.log((ranks + 2) / (ranks + 1)) / np.log(5)
    self.assertAllClose(class_sampling.sampling_probabilities("log_uniform", 4, counts), expected)
    self.assertAllClose(class_sampling.sampling_probabilities("log_uniform", 4),
                        np.log((np.arange(4) + 2) / (np.arange(4) + 1)) / np.log(5))  # By id without counts.
    weights = (np.array(counts) + 1.0) ** 0.75
    self.assertAllClose(class_sampling.sampling_probabilities("empirical", 4, counts),
                        weights / weights.sum())
    self.assertAllClose(class_sampling.sampling_probabilities("in_batch", 4, counts),
                        np.array([6, 2, 10, 3]) / 21)
    for sampler in class_sampling.SAMPLERS:
      self.assertAllClose(class_sampling.sampling_probabilities(sampler, 4, counts).sum(), 1.0)

  @parameterized.parameters("empirical", "in_batch")
  def test_samplers_needing_counts_say_so(self, sampler):
    with self.assertRaisesRegex(ValueError, f"'{sampler}' sampler needs the training class counts"):
      class_sampling.sampling_probabilities(sampler, 4)

  def test_bad_values_raise(self):
    with self.assertRaisesRegex(ValueError, r"`sampler` must be one of \[None, 'uniform', .*\], got 'zipf'"):
      class_sampling.SamplingConfig(sampler="zipf")
    with self.assertRaisesRegex(ValueError, r"`sampler` must be one of \['uniform', .*\], got 'zipf'"):
      class_sampling.ClassSampler(10, "zipf")  # Refused when the layer is made, not when it first draws.
    with self.assertRaisesRegex(ValueError, "`num_sampled` must be >= 1"):
      class_sampling.SamplingConfig(sampler="uniform", num_sampled=0)
    with self.assertRaisesRegex(ValueError, "4 counts >= 0"):
      class_sampling.sampling_probabilities("empirical", 4, [1, 2])


class SampleListsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters("uniform", "log_uniform", "empirical")
  def test_true_class_first_negatives_drawn_from_q_and_hits_masked(self, sampler):
    tf.keras.utils.set_random_seed(1)
    q = class_sampling.sampling_probabilities(sampler, 5, [50, 20, 10, 5, 1])
    labels = tf.constant([0, 3] * 20000)
    ids, relevance, log_q = class_sampling.sample_class_lists(labels, 7, tf.constant(q, tf.float32), sampler)
    self.assertEqual(ids.shape, [40000, 8])
    self.assertAllEqual(ids[:, 0], labels)
    self.assertAllEqual(relevance[:, 0], tf.ones([40000]))
    hits = ids[:, 1:].numpy() == labels.numpy()[:, None]
    self.assertAllEqual(relevance[:, 1:].numpy(), np.where(hits, -1.0, 0.0))
    self.assertAllClose(log_q, np.log(q[ids.numpy()]), atol=1e-6)
    frequency = np.bincount(ids[:, 1:].numpy().ravel(), minlength=5) / ids[:, 1:].numpy().size
    # 280,000 draws: the empirical frequencies are q (with 28,000 the worst of 5 seeds was 0.006 off).
    self.assertAllClose(frequency, q, atol=0.01)

  @parameterized.parameters("uniform", "log_uniform")
  def test_shared_negatives_are_one_draw_for_the_batch(self, sampler):
    tf.keras.utils.set_random_seed(2)
    q = class_sampling.sampling_probabilities(sampler, 50)
    labels = tf.constant([3, 7, 3, 9])
    ids, relevance, log_q = class_sampling.sample_class_lists(labels, 20, tf.constant(q, tf.float32), sampler,
                                                              shared=True)
    self.assertAllEqual(ids[:, 0], labels)
    for row in range(1, 4):
      self.assertAllEqual(ids[row, 1:], ids[0, 1:])
    hits = ids[:, 1:].numpy() == labels.numpy()[:, None]
    self.assertAllEqual(relevance[:, 1:].numpy(), np.where(hits, -1.0, 0.0))
    self.assertAllClose(log_q, np.log(q[ids.numpy()]), atol=1e-6)
    draws = [class_sampling.sample_class_lists(labels, 20, tf.constant(q, tf.float32),
                                               sampler, shared=True)[0]
             for _ in range(2)]
    self.assertNotAllEqual(draws[0], draws[1])  # A new draw each step.

  def test_in_batch_lists_are_the_other_instances_classes(self):
    labels = tf.constant([4, 1, 4])
    ids, relevance, log_q = class_sampling.sample_class_lists(labels, 99, tf.constant([0.2] * 5), "in_batch")
    self.assertAllEqual(ids, [[4, 1, 4], [1, 4, 4], [4, 4, 1]])
    self.assertAllEqual(relevance, [[1, 0, -1], [1, 0, 0], [1, -1, 0]])  # Another instance of class 4: a hit.
    self.assertAllClose(log_q, np.log(np.full([3, 3], 0.2)))


class ClassSamplerTest(tf.test.TestCase):

  def test_correction_and_config_round_trip(self):
    sampler = class_sampling.ClassSampler(3, "empirical", 2, class_counts=[3, 2, 1], log_q_correction=True)
    self.assertAllClose(sampler.correct(tf.constant([[1.0, 2.0]]), tf.constant([[-1.0, -0.5]])), [[2.0, 2.5]])
    restored = class_sampling.ClassSampler.from_config(sampler.get_config())
    self.assertEqual(restored.get_config(), sampler.get_config())
    self.assertEqual(tf.keras.layers.deserialize(tf.keras.layers.serialize(sampler)).sampler, "empirical")
    plain = class_sampling.ClassSampler(3, "uniform", 2, log_q_correction=False)
    self.assertAllClose(plain.correct(tf.constant([[1.0]]), tf.constant([[-1.0]])), [[1.0]])
    self.assertIsNone(class_sampling.make_class_sampler(class_sampling.SamplingConfig(), 3))


class HardNegativesTest(tf.test.TestCase):
  """Mining the model's top-scoring wrong classes into the per-class table, and drawing from it."""

  def test_mined_negatives_drop_the_true_class_and_keep_the_order(self):
    top = tf.constant([[2, 0, 3], [1, 3, 0], [4, 2, 1]])
    self.assertAllEqual(class_sampling.mined_negatives(top, tf.constant([0, 3, 9]), 2),
                        [[2, 3], [1, 0], [4, 2]])

  def test_draws_come_from_the_true_class_row_and_unmined_entries_fall_back_to_uniform(self):
    tf.keras.utils.set_random_seed(0)
    table = tf.constant([[5, 6], [-1, -1], [7, -1]])
    labels = tf.constant([0, 1, 2] * 30000)  # 90,000 draws per slot: with 9,000 one of 5 seeds was 0.011 off.
    hard = class_sampling.draw_hard_negatives(labels, table, 3, 10).numpy().reshape(30000, 3, 3)
    self.assertEqual(set(hard[:, 0].ravel()), {5, 6})
    self.assertAllClose(np.bincount(hard[:, 1].ravel(), minlength=10) / 90000, [0.1] * 10, atol=0.015)
    row2 = np.bincount(hard[:, 2].ravel(), minlength=10) / 90000  # Half 7, half uniform.
    self.assertAllClose(row2, [0.05] * 7 + [0.55] + [0.05] * 2, atol=0.015)

  def test_extra_negatives_join_the_list_and_hits_are_masked(self):
    labels = tf.constant([1, 2])
    ids, relevance, log_q = class_sampling.sample_class_lists(
        labels, 1, tf.constant([0.25] * 4), "in_batch", extra_negatives=tf.constant([[3, 1], [2, 0]]))
    self.assertAllEqual(ids, [[1, 2, 3, 1], [2, 1, 2, 0]])
    self.assertAllEqual(relevance, [[1, 0, 0, -1], [1, 0, -1, 0]])
    self.assertAllClose(log_q, np.log(np.full([2, 4], 0.25)))

  def test_prototypes_and_the_refreshed_rows_match_numpy(self):
    classes = np.random.default_rng(0).normal(size=[6, 3]).astype(np.float32)
    sampler = class_sampling.ClassSampler(6, "uniform", 3, hard_negatives=2, hard_pool=2, refresh_every=2,
                                          refresh_rows=4, prototype_decay=0.5)
    sampler.build_hard_negative_state(3)

    def top_k(queries, k):
      return tf.math.top_k(tf.matmul(queries, classes, transpose_b=True), k=k).indices

    h1 = np.array([[1.0, 0, 0], [0, 1, 0]], np.float32)
    h2 = np.array([[0.0, 0, 2], [0, 3, 0]], np.float32)
    self.assertFalse(sampler.observe(tf.constant([0, 1]), tf.constant(h1), top_k))  # Step 1: no refresh.
    self.assertAllEqual(sampler.hard_negative_table(), -np.ones([6, 2]))
    # Step 2 refreshes rows 0-3.
    self.assertTrue(sampler.observe(tf.constant([0, 4]), tf.constant(h2), top_k))
    prototypes = {0: 0.5 * h1[0] + 0.5 * h2[0], 1: h1[1], 4: h2[1]}
    self.assertAllClose(sampler._state["prototypes"].numpy()[[0, 1, 4]], [prototypes[c] for c in (0, 1, 4)])
    expected = -np.ones([6, 2], np.int64)
    for c in (0, 1):  # Rows 2 and 3 were never seen: not mined.
      order = [j for j in np.argsort(-(classes @ prototypes[c]), kind="stable") if j != c]
      expected[c] = order[:2]
    self.assertAllEqual(sampler.hard_negative_table(), expected)
    self.assertEqual(int(sampler._state["cursor"].numpy()), 4)  # Rows 4, 5, 0, 1 next.
    ids, relevance, _ = sampler(tf.constant([0] * 500))
    self.assertAllEqual(ids.shape, [500, 4])
    # The last 2 negatives: class 0's row.
    self.assertEqual(set(ids[:, 2:].numpy().ravel()), set(expected[0]))

  def test_hard_negative_settings_are_checked_and_round_trip(self):
    with self.assertRaisesRegex(ValueError, "`hard_negatives` must be in \\[0, num_sampled=3\\]"):
      class_sampling.ClassSampler(10, "uniform", 3, hard_negatives=4)
    with self.assertRaisesRegex(ValueError, "`hard_pool` must be in \\[1, num_classes - 1 = 9\\]"):
      class_sampling.ClassSampler(10, "uniform", 3, hard_negatives=3, hard_pool=12)
    with self.assertRaisesRegex(ValueError, "`refresh_every` must be >= 1, got 0"):
      class_sampling.ClassSampler(10, "uniform", 3, refresh_every=0)
    with self.assertRaisesRegex(ValueError, "`refresh_rows` must be >= 1, got 0"):
      class_sampling.ClassSampler(10, "uniform", 3, refresh_rows=0)
    with self.assertRaisesRegex(ValueError, r"`prototype_decay` must be in \[0, 1\), got 1.0"):
      class_sampling.ClassSampler(10, "uniform", 3, prototype_decay=1.0)
    with self.assertRaisesRegex(ValueError, "set a class sampler too"):
      class_sampling.SamplingConfig(sampler=None, hard_negatives=2)
    config = class_sampling.SamplingConfig("log_uniform", 7, hard_negatives=2, hard_refresh_every=5,
                                           hard_refresh_rows=3, shared_negatives=True)
    sampler = class_sampling.make_class_sampler(config, 20)
    restored = class_sampling.ClassSampler.from_config(sampler.get_config())
    self.assertEqual(restored.get_config(), sampler.get_config())
    self.assertEqual((restored.get_config()["hard_pool"], restored.get_config()["refresh_rows"],
                      restored.get_config()["shared"]), (8, 3, True))


if __name__ == "__main__":
  tf.test.main()
