"""Tests for rank4class.class_sampling: sampling distributions, sampled lists, accidental hits, log-Q."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class import class_sampling


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
    self.assertAllClose(class_sampling.sampling_probabilities("empirical", 4, counts), weights / weights.sum())
    self.assertAllClose(class_sampling.sampling_probabilities("in_batch", 4, counts), np.array([6, 2, 10, 3]) / 21)
    for sampler in class_sampling.SAMPLERS:
      self.assertAllClose(class_sampling.sampling_probabilities(sampler, 4, counts).sum(), 1.0)

  @parameterized.parameters("empirical", "in_batch")
  def test_samplers_needing_counts_say_so(self, sampler):
    with self.assertRaisesRegex(ValueError, f"'{sampler}' sampler needs the training class counts"):
      class_sampling.sampling_probabilities(sampler, 4)

  def test_bad_values_raise(self):
    with self.assertRaisesRegex(ValueError, "Unknown class sampler 'zipf'"):
      class_sampling.SamplingConfig(sampler="zipf")
    with self.assertRaisesRegex(ValueError, "`num_sampled` must be >= 1"):
      class_sampling.SamplingConfig(sampler="uniform", num_sampled=0)
    with self.assertRaisesRegex(ValueError, "4 counts >= 0"):
      class_sampling.sampling_probabilities("empirical", 4, [1, 2])


class SampleListsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters("uniform", "log_uniform", "empirical")
  def test_true_class_first_negatives_drawn_from_q_and_hits_masked(self, sampler):
    tf.keras.utils.set_random_seed(1)
    q = class_sampling.sampling_probabilities(sampler, 5, [50, 20, 10, 5, 1])
    labels = tf.constant([0, 3] * 2000)
    ids, relevance, log_q = class_sampling.sample_class_lists(labels, 7, tf.constant(q, tf.float32), sampler)
    self.assertEqual(ids.shape, [4000, 8])
    self.assertAllEqual(ids[:, 0], labels)
    self.assertAllEqual(relevance[:, 0], tf.ones([4000]))
    hits = ids[:, 1:].numpy() == labels.numpy()[:, None]
    self.assertAllEqual(relevance[:, 1:].numpy(), np.where(hits, -1.0, 0.0))
    self.assertAllClose(log_q, np.log(q[ids.numpy()]), atol=1e-6)
    frequency = np.bincount(ids[:, 1:].numpy().ravel(), minlength=5) / ids[:, 1:].numpy().size
    self.assertAllClose(frequency, q, atol=0.01)  # 28,000 draws: the empirical frequencies are q.

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


if __name__ == "__main__":
  tf.test.main()
