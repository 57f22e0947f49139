"""Tests for the class embeddings a run can start from (`--class_init`): the class centroids of a training
split (`class_encoders.class_centroids`), the one-hot class encoder started at given embeddings and biases,
and the `--class_init` / `--logit_adjustment` flags of rank4class-train and rank4class-study. What a run
computes from its training split with them (`model_setup.with_class_centroids`,
`model_setup.training_class_priors`) is tested in model_setup_test.py."""

import numpy as np
import tensorflow as tf

from rank4class.modeling import class_encoders
from rank4class_cli.binaries import study_main, train_main
from tests.rank4class_cli.cli_runner import parse_error, parsed_config

# Four classes in 2-D; class 3 has no training row.
_TRAIN_X = np.array([[3., 0.], [1., 2.], [0., 5.], [-1., 1.], [-3., 1.]], np.float32)
_TRAIN_Y = np.array([0, 0, 1, 2, 2], np.int64)
# Unit-length mean rows: class 0 sums to [4, 2], class 1 [0, 5], class 2 [-4, 2]; class 3 none.
_CENTROIDS = np.array([[2., 1.], [0., 1.], [-2., 1.], [0., 0.]]) / np.array([[5 ** .5], [1.],
                                                                             [5 ** .5], [1.]])


class ClassCentroidsTest(tf.test.TestCase):

  def test_unit_length_mean_rows_and_zero_for_a_class_without_rows(self):
    centroids, counts = class_encoders.class_centroids([(_TRAIN_X, _TRAIN_Y)], 4)
    self.assertAllClose(centroids, _CENTROIDS)
    self.assertAllEqual(counts, [2, 1, 2, 0])
    self.assertEqual(centroids.dtype, np.float32)

  def test_batches_give_the_centroids_of_the_whole_split(self):
    batches = [(_TRAIN_X[:2], _TRAIN_Y[:2]), (_TRAIN_X[2:3], _TRAIN_Y[2:3]), (_TRAIN_X[3:], _TRAIN_Y[3:])]
    self.assertAllClose(class_encoders.class_centroids(batches, 4)[0], _CENTROIDS)

  def test_feature_axes_are_flattened(self):
    centroids, _ = class_encoders.class_centroids([(_TRAIN_X.reshape([5, 2, 1]), _TRAIN_Y)], 4)
    self.assertAllClose(centroids, _CENTROIDS)

  def test_bad_labels_and_no_rows_raise(self):
    with self.assertRaisesRegex(ValueError, r"Class ids must lie in \[0, 2\); got 0..2"):
      class_encoders.class_centroids([(_TRAIN_X, _TRAIN_Y)], 2)
    with self.assertRaisesRegex(ValueError, "one integer class id per row"):
      class_encoders.class_centroids([(_TRAIN_X, np.ones([5, 4], np.float32))], 4)
    with self.assertRaisesRegex(ValueError, "at least one training row"):
      class_encoders.class_centroids([], 4)


class OneHotInitialEmbeddingsTest(tf.test.TestCase):

  def test_embeddings_start_at_the_given_values(self):
    encoder = class_encoders.OneHotClassEncoder(num_classes=4, initial_embeddings=_CENTROIDS)
    embeddings, bias = encoder(None)
    self.assertEqual(encoder.embedding_dim, 2)
    self.assertAllClose(embeddings, _CENTROIDS)
    self.assertAllEqual(bias, np.zeros(4))

  def test_bias_starts_at_the_given_values(self):
    encoder = class_encoders.OneHotClassEncoder(num_classes=4, embedding_dim=2,
                                                initial_bias=[0., 1., 2., -3.])
    self.assertAllClose(encoder(None)[1], [0., 1., 2., -3.])
    with self.assertRaisesRegex(ValueError, "needs `use_bias=True`"):
      class_encoders.OneHotClassEncoder(num_classes=4, use_bias=False, initial_bias=np.zeros(4))

  def test_initial_embeddings_of_another_shape_or_not_finite_raise(self):
    with self.assertRaisesRegex(ValueError, r"shape \[num_classes=3, embedding_dim\], got \[4, 2\]"):
      class_encoders.OneHotClassEncoder(num_classes=3, initial_embeddings=_CENTROIDS)
    with self.assertRaisesRegex(ValueError, r"shape \[num_classes=4, 5\], got \[4, 2\]"):
      class_encoders.OneHotClassEncoder(num_classes=4, embedding_dim=5, initial_embeddings=_CENTROIDS)
    with self.assertRaisesRegex(ValueError, "finite"):
      class_encoders.OneHotClassEncoder(num_classes=4, initial_embeddings=_CENTROIDS * np.nan)

  def test_config_holds_the_size_not_the_values(self):
    config = class_encoders.OneHotClassEncoder(num_classes=4, initial_embeddings=_CENTROIDS).get_config()
    self.assertNotIn("initial_embeddings", config)
    self.assertEqual(config["embedding_dim"], 2)
    self.assertEqual(class_encoders.OneHotClassEncoder.from_config(config)(None)[0].shape, [4, 2])


class FlagsTest(tf.test.TestCase):
  """`--class_init` and `--logit_adjustment` of rank4class-train and rank4class-study."""

  _REQUIRED = ["--dataset=digits", "--model_dir=/tmp/unused"]

  def test_flags_reach_the_model_config(self):
    config = parsed_config(train_main, [*self._REQUIRED, "--class_init=centroids", "--logit_adjustment=0.5"])
    self.assertEqual((config.model.class_encoder.init, config.model.logit_adjustment), ("centroids", 0.5))
    default = parsed_config(train_main, self._REQUIRED).model
    self.assertEqual((default.class_encoder.init, default.logit_adjustment), ("auto", 0.0))
    study = parsed_config(study_main, ["--class_init=random", "--logit_adjustment=1"])
    self.assertEqual((study.class_init, study.logit_adjustment), ("random", 1.0))

  def test_bad_flags_are_one_line_errors(self):
    self.assertEqual(parse_error(train_main,
                                 [*self._REQUIRED, "--class_init=centroids", "--class_encoder=metadata"]),
                     (2, "rank4class-train: error: --class_init=centroids applies to --class_encoder=one_hot "
                         "(a learned class embedding table), got --class_encoder=metadata\n"))
    self.assertEqual(parse_error(train_main, [*self._REQUIRED, "--logit_adjustment=-1"]),
                     (2, "rank4class-train: error: --logit_adjustment=-1 must be >= 0 (0: off)\n"))
    code, stderr = parse_error(study_main, ["--class_init=zero"])
    self.assertEqual(code, 2)
    self.assertIn("--class_init", stderr)


if __name__ == "__main__":
  tf.test.main()
