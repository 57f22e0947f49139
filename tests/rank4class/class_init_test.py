"""Tests for what a training run computes from its training split when it builds the model: the class embeddings
started at the class centroids (`ClassEncoderConfig.init`: `class_encoders.class_centroids`, the one-hot encoder's
initial embeddings, a model that starts as the nearest class centroid classifier, `train.with_class_centroids`) and
the class priors of the logit adjustment (`train.training_class_priors`)."""

import dataclasses
import os
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class import (
  class_encoders,
  encoders,
  interactions,
  serving,
  study_main,
  train,
  train_main,
  training_data,
)
from rank4class import model as model_lib
from rank4class_data import tfrecords
from rank4class_engine import configs, losses
from tests.rank4class_engine.cli_runner import parse_error, parsed_config

# Four classes in 2-D; class 3 has no training row. Validation and test rows are far from every training row:
# a centroid computed from them would move.
_TRAIN_X = np.array([[3., 0.], [1., 2.], [0., 5.], [-1., 1.], [-3., 1.]], np.float32)
_TRAIN_Y = np.array([0, 0, 1, 2, 2], np.int64)
_OTHER_X = np.array([[2., 1.], [1., 3.], [-2., -1.], [1., -4.]], np.float32)
_OTHER_Y = np.array([0, 1, 2, 3], np.int64)
# Unit-length mean rows: class 0 sums to [4, 2], class 1 [0, 5], class 2 [-4, 2]; class 3 none.
_CENTROIDS = np.array([[2., 1.], [0., 1.], [-2., 1.], [0., 0.]]) / np.array([[5 ** .5], [1.], [5 ** .5], [1.]])


def _data(input_kind: str = training_data.EMBEDDING_INPUT, labels: np.ndarray | None = None
          ) -> training_data.PreparedData:
  train_split = training_data.ArraySplit(_TRAIN_X, _TRAIN_Y if labels is None else labels)
  other = training_data.ArraySplit(_OTHER_X, _OTHER_Y)
  return training_data.PreparedData(["a", "b", "c", "d"], input_kind, train_split, other, other)


def _config(init: str = class_encoders.CENTROID_INIT, interaction: str = interactions.DOT,
            encoder: str = "auto", class_encoder: str = class_encoders.ONE_HOT,
            embedding_dim: int | None = None) -> train.TrainConfig:
  return train.TrainConfig(
      model_dir="/x", data=training_data.DataConfig(dataset="digits"),
      model=model_lib.Rank4ClassConfig(
          instance_encoder=encoders.InstanceEncoderConfig(type=encoder, mlp=encoders.MlpEncoderConfig((8,))),
          class_encoder=class_encoders.ClassEncoderConfig(
              type=class_encoder, init=init, one_hot=class_encoders.OneHotClassEncoderConfig(embedding_dim)),
          interaction=interactions.InteractionConfig(type=interaction), loss=losses.LossConfig(type="softmax")))


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

  def test_record_split_is_read_batch_by_batch_to_the_same_centroids(self):
    schema = tfrecords.ExampleSchema(text_key=None, dense_key="x", dense_dim=2, num_classes=4)
    path = os.path.join(self.create_tempdir().full_path, "train.tfrecord")
    tfrecords.write_instances(path, [tfrecords.ClassificationInstance(label=int(y), dense=x)
                                     for x, y in zip(_TRAIN_X, _TRAIN_Y, strict=True)], schema)
    batches = list(train._split_batches(training_data.RecordSplit(path, schema, "x"), batch_size=2))
    self.assertEqual([len(y) for _, y in batches], [2, 2, 1])
    self.assertAllClose(class_encoders.class_centroids(batches, 4)[0], _CENTROIDS)

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
    encoder = class_encoders.OneHotClassEncoder(num_classes=4, embedding_dim=2, initial_bias=[0., 1., 2., -3.])
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


class ClassCentroidsApplyTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("latent_cross", dict(interaction=interactions.LATENT_CROSS), {}, "the dot interaction"),
      ("embedding_dim", dict(embedding_dim=4), {}, "class embeddings of the input's size"),
      ("images", {}, dict(input_kind=training_data.IMAGE_INPUT), "fixed vectors as inputs"),
      ("graded_lists", {}, dict(labels=np.eye(4, dtype=np.float32)[[0, 0, 1, 2, 2]]), "class ids as labels"),
  )
  def test_centroids_where_they_cannot_apply_raise_and_auto_falls_back(self, config_args, data_args, need):
    data = _data(**data_args)
    with self.assertRaisesRegex(ValueError, "Class embeddings started at the class centroids need .*" + need):
      train.resolve_model_config(_config(**config_args), data)
    resolved = train.resolve_model_config(_config(init=class_encoders.AUTO_INIT, **config_args), data)
    self.assertIsNone(resolved.class_encoder.one_hot.initial_embeddings)
    self.assertFalse(resolved.instance_encoder.mlp.residual)

  def test_metadata_class_encoder_needs_the_one_hot_one(self):
    config = _config(class_encoder=class_encoders.METADATA)
    self.assertFalse(train.class_centroids_apply(dataclasses.replace(
        config.model, class_encoder=dataclasses.replace(config.model.class_encoder, init="auto")), _data()))
    with self.assertRaisesRegex(ValueError, "the one_hot class encoder"):
      train.class_centroids_apply(config.model, _data())

  def test_without_class_bias_a_class_without_rows_starts_at_zero(self):
    config = _config()
    config.model.class_encoder.one_hot.use_bias = False
    one_hot = train.resolve_model_config(config, _data()).class_encoder.one_hot
    self.assertAllClose(one_hot.initial_embeddings, _CENTROIDS * 20)
    self.assertIsNone(one_hot.initial_bias)

  def test_random_init_keeps_the_model(self):
    resolved = train.resolve_model_config(_config(init=class_encoders.RANDOM_INIT), _data())
    self.assertIsNone(resolved.class_encoder.one_hot.initial_embeddings)
    self.assertEqual(resolved.interaction.temperature, 1.0)

  def test_auto_applies_from_the_class_count_on(self):
    self.assertEqual(train.AUTO_CENTROID_CLASSES, 500)
    # The data has 4 classes; dense features only on request (`init="centroids"`).
    for threshold, kind, applies in ((4, training_data.EMBEDDING_INPUT, True), (5, training_data.EMBEDDING_INPUT, False),
                                     (4, training_data.DENSE_INPUT, False)):
      with mock.patch.object(train, "AUTO_CENTROID_CLASSES", threshold):
        resolved = train.resolve_model_config(_config(init=class_encoders.AUTO_INIT), _data(kind))
      self.assertEqual(resolved.class_encoder.one_hot.initial_embeddings is not None, applies)
      self.assertEqual(resolved.instance_encoder.mlp.residual, applies)


class StartsAtTheCentroidClassifierTest(tf.test.TestCase):

  def test_step_0_scores_are_cosines_to_the_training_centroids_and_export_predicts_the_trained_scores(self):
    data = _data(training_data.DENSE_INPUT)
    config = _config()
    resolved = train.resolve_model_config(config, data)
    self.assertIsNone(config.model.class_encoder.one_hot.initial_embeddings)  # config.json keeps None.
    configs.to_dict(config)  # JSON-ready.
    self.assertEqual(resolved.interaction.temperature, 1.0)
    tf.keras.utils.set_random_seed(0)
    model = model_lib.build_model(resolved, data.class_names)
    scores = model(_OTHER_X, training=False).numpy()
    # NumPy reference: the nearest class centroid classifier, cosine to each class's mean training row x 20 (the
    # centroids' length); the class without training rows ranked last (bias -2 x 20 = -40, below every cosine).
    unit = _OTHER_X / np.linalg.norm(_OTHER_X, axis=1, keepdims=True)
    expected = unit @ _CENTROIDS.T * 20 + np.array([0, 0, 0, -40])
    self.assertAllClose(scores, expected, atol=1e-4)
    # Row 3, [1, -4], has a negative cosine to every centroid (best: class 0, -0.22); the class without rows
    # (zero vector, 0 without its bias) would win there, and the baseline ranks it last.
    self.assertAllEqual(np.argmax(scores, axis=1), [0, 1, 2, 0])
    self.assertAllEqual(np.argmax(scores, axis=1), np.argmax(unit @ _CENTROIDS[:3].T, axis=1))

    model.compile(tf.keras.optimizers.Adam(0.05), loss=losses.get("softmax"))
    model.fit(_TRAIN_X, _TRAIN_Y, epochs=3, batch_size=5, verbose=0)
    trained = model(_OTHER_X, training=False).numpy()
    self.assertGreater(np.abs(trained - scores).max(), 0.1)  # Training moved it.
    export_dir = serving.export_saved_model(model, os.path.join(self.create_tempdir().full_path, "export"),
                                            top_k=2)
    loaded = tf.keras.models.load_model(export_dir)
    self.assertAllClose(loaded(_OTHER_X, training=False), trained, atol=1e-5)


class TrainingClassPriorsTest(tf.test.TestCase):

  def test_shares_of_the_training_rows_only_a_class_without_rows_counting_one(self):
    config = _config(init=class_encoders.RANDOM_INIT)
    config.model.logit_adjustment = 1.0
    resolved = train.resolve_model_config(config, _data())
    self.assertAllClose(resolved.class_priors, np.array([2, 1, 2, 1]) / 6)  # Not the validation rows' [1, 1, 1, 1].
    self.assertIsNone(config.model.class_priors)  # config.json keeps None.
    model = model_lib.build_model(resolved, _data().class_names)
    self.assertAllClose(model(_OTHER_X, training=True) - model(_OTHER_X, training=False),
                        np.tile(np.log([2, 1, 2, 1]) - np.log(6), [4, 1]), atol=1e-5)

  def test_graded_class_lists_raise(self):
    with self.assertRaisesRegex(ValueError, "one class id per training row"):
      train.training_class_priors(_data(labels=np.eye(4, dtype=np.float32)[[0, 0, 1, 2, 2]]))


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
    self.assertEqual(parse_error(train_main, [*self._REQUIRED, "--class_init=centroids", "--class_encoder=metadata"]),
                     (2, "rank4class-train: error: --class_init=centroids applies to --class_encoder=one_hot (a "
                         "learned class embedding table), got --class_encoder=metadata\n"))
    self.assertEqual(parse_error(train_main, [*self._REQUIRED, "--logit_adjustment=-1"]),
                     (2, "rank4class-train: error: --logit_adjustment=-1 must be >= 0 (0: off)\n"))
    code, stderr = parse_error(study_main, ["--class_init=zero"])
    self.assertEqual(code, 2)
    self.assertIn("--class_init", stderr)


if __name__ == "__main__":
  tf.test.main()
