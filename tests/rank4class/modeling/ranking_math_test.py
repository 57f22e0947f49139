"""Tests of rank4class.modeling.ranking_math against hand computations and NumPy."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.modeling import ranking_math


class ValidateClassIdsTest(tf.test.TestCase, parameterized.TestCase):
  def test_valid_ids_pass_through_as_int32(self):
    ids = ranking_math.validate_class_ids(tf.constant([0, 2, 1], tf.int64), num_classes=3)
    self.assertEqual(ids.dtype, tf.int32)
    self.assertAllEqual(ids, [0, 2, 1])

  def test_column_of_ids_is_squeezed(self):
    self.assertAllEqual(ranking_math.validate_class_ids(tf.constant([[1], [0]]), num_classes=2), [1, 0])

  def test_whole_number_floats_are_accepted(self):
    self.assertAllEqual(ranking_math.validate_class_ids(tf.constant([[2.0], [0.0]]), num_classes=3), [2, 0])

  def test_negative_label_raises_naming_num_classes(self):
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, r"num_classes=3.*negative"):
      ranking_math.validate_class_ids(tf.constant([0, -1]), num_classes=3)

  def test_label_at_num_classes_raises_naming_value(self):
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, r"num_classes=3\)[^\n]*>= num_classes"):
      ranking_math.validate_class_ids(tf.constant([0, 3]), num_classes=3)

  def test_error_message_shows_the_bad_value(self):
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, r"17"):
      ranking_math.validate_class_ids(tf.constant([1, 17]), num_classes=5)

  def test_fractional_float_label_raises(self):
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "whole numbers"):
      ranking_math.validate_class_ids(tf.constant([0.5]), num_classes=3)

  def test_out_of_range_label_raises_inside_tf_function(self):
    fn = tf.function(lambda ids: ranking_math.validate_class_ids(ids, num_classes=4))
    with self.assertRaises(tf.errors.InvalidArgumentError):
      fn(tf.constant([4]))

  @parameterized.parameters(([[0, 1]],), ([[[0]]],))
  def test_bad_shape_raises(self, ids):
    with self.assertRaisesRegex(ValueError, "shape"):
      ranking_math.validate_class_ids(tf.constant(ids), num_classes=3)

  def test_string_ids_raise(self):
    with self.assertRaisesRegex(ValueError, "integers"):
      ranking_math.validate_class_ids(tf.constant(["a"]), num_classes=3)

  def test_zero_classes_raises(self):
    with self.assertRaisesRegex(ValueError, "`num_classes` must be an integer >= 1, got 0."):
      ranking_math.validate_class_ids(tf.constant([0]), num_classes=0)


class ClassIdsToRelevanceTest(tf.test.TestCase):
  def test_one_hot_over_classes(self):
    relevance = ranking_math.class_ids_to_relevance(tf.constant([2, 0]), num_classes=3)
    self.assertAllEqual(relevance, [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    self.assertEqual(relevance.dtype, tf.float32)

  def test_out_of_range_raises_rather_than_zero_row(self):
    # tf.one_hot alone would silently give an all-zero row for id 3.
    with self.assertRaises(tf.errors.InvalidArgumentError):
      ranking_math.class_ids_to_relevance(tf.constant([3]), num_classes=3)


class AllClassInteractionMathTest(tf.test.TestCase, parameterized.TestCase):
  def test_per_instance_lists_match_numpy(self):
    rng = np.random.default_rng(2)
    h = rng.normal(size=[3, 4]).astype(np.float32)
    lists = rng.normal(size=[3, 2, 5]).astype(np.float32)  # Each instance's own 2 classes, dim 5.
    kernel = rng.normal(size=[9, 6]).astype(np.float32)
    bias = rng.normal(size=[6]).astype(np.float32)
    expected = np.stack([[np.concatenate([h[b], lists[b, k]]) @ kernel + bias for k in range(2)]
                         for b in range(3)])
    self.assertAllClose(ranking_math.concat_dense(h, lists, kernel, bias), expected, atol=1e-5)
    self.assertAllClose(ranking_math.latent_cross(h, lists[:, :, :4]), h[:, None, :] * lists[:, :, :4])

  def test_latent_cross_matches_numpy(self):
    rng = np.random.default_rng(1)
    h = rng.normal(size=[3, 4]).astype(np.float32)
    c = rng.normal(size=[5, 4]).astype(np.float32)
    expected = np.stack([[h[b] * c[i] for i in range(5)] for b in range(3)])
    self.assertAllClose(ranking_math.latent_cross(h, c), expected)

  def test_concat_dense_equals_dense_on_materialized_concat(self):
    rng = np.random.default_rng(2)
    h = rng.normal(size=[3, 4]).astype(np.float32)
    c = rng.normal(size=[5, 2]).astype(np.float32)
    kernel = rng.normal(size=[6, 7]).astype(np.float32)
    bias = rng.normal(size=[7]).astype(np.float32)
    pairs = np.concatenate([np.repeat(h[:, None], 5, axis=1), np.repeat(c[None], 3, axis=0)], axis=-1)
    expected = pairs @ kernel + bias  # [3, 5, 7]
    self.assertAllClose(ranking_math.concat_dense(h, c, kernel, bias), expected, atol=1e-5)

  def test_top_k_classes_best_first(self):
    ids, scores = ranking_math.top_k_classes(tf.constant([[0.1, 0.9, 0.5], [3.0, 1.0, 2.0]]), k=2)
    self.assertAllEqual(ids, [[1, 2], [0, 2]])
    self.assertAllClose(scores, [[0.9, 0.5], [3.0, 2.0]])

  @parameterized.parameters(0, 4)
  def test_top_k_out_of_range_raises(self, k):
    with self.assertRaisesRegex(ValueError, "num_classes=3"):
      ranking_math.top_k_classes(tf.zeros([1, 3]), k=k)


if __name__ == "__main__":
  tf.test.main()
