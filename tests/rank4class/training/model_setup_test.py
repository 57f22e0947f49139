"""Tests for rank4class.training.model_setup: the model config fitted to the data (the instance encoder
chosen, the TF-IDF vocabulary, the metadata class encoder and its size, the cosine class-text towers, the
class embeddings started at the class centroids, the logit adjustment's priors), all from the training split
only."""

import dataclasses
import os
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.inference import serving
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class.training import model_setup, train_config, training_data
from rank4class_data.records import tfrecords
from rank4class_encoders import text_encoder
from rank4class_engine.optimization import losses
from rank4class_engine.runs import configs
from tests.rank4class.digits_config import digits_config
from tests.rank4class.tiny_text_encoder import TinyTextEncoderTestCase

# Four classes in 2-D; class 3 has no training row. Validation and test rows are far from every training row:
# a centroid computed from them would move.
_TRAIN_X = np.array([[3., 0.], [1., 2.], [0., 5.], [-1., 1.], [-3., 1.]], np.float32)
_TRAIN_Y = np.array([0, 0, 1, 2, 2], np.int64)
_OTHER_X = np.array([[2., 1.], [1., 3.], [-2., -1.], [1., -4.]], np.float32)
_OTHER_Y = np.array([0, 1, 2, 3], np.int64)
# Unit-length mean rows: class 0 sums to [4, 2], class 1 [0, 5], class 2 [-4, 2]; class 3 none.
_CENTROIDS = np.array([[2., 1.], [0., 1.], [-2., 1.], [0., 0.]]) / np.array([[5 ** .5], [1.],
                                                                             [5 ** .5], [1.]])


def _resolved_model_setup(config, data):
  return model_setup.resolve_model_setup(config.model, config.data, data)


def _resolved_model_config(config, data):
  return model_setup.resolve_model_config(config.model, config.data, data)


def _data(input_kind: str = training_data.EMBEDDING_INPUT, labels: np.ndarray | None = None
          ) -> training_data.PreparedData:
  train_split = training_data.ArraySplit(_TRAIN_X, _TRAIN_Y if labels is None else labels)
  other = training_data.ArraySplit(_OTHER_X, _OTHER_Y)
  return training_data.PreparedData(["a", "b", "c", "d"], input_kind, train_split, other, other)


def _config(init: str = class_encoders.CENTROID_INIT, interaction: str = interactions.DOT,
            encoder: str = "auto", class_encoder: str = class_encoders.ONE_HOT,
            embedding_dim: int | None = None) -> train_config.Rank4ClassTrainConfig:
  return train_config.Rank4ClassTrainConfig(
      model_dir="/x", data=training_data.DataConfig(dataset="digits"),
      model=model_lib.Rank4ClassConfig(
          instance_encoder=encoders.InstanceEncoderConfig(type=encoder, mlp=encoders.MlpEncoderConfig((8,))),
          class_encoder=class_encoders.ClassEncoderConfig(
              type=class_encoder, init=init, one_hot=class_encoders.OneHotClassEncoderConfig(embedding_dim)),
          interaction=interactions.InteractionConfig(type=interaction),
          loss=losses.LossConfig(type="softmax")))


class ResolveModelConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_auto_encoder_on_text_records_is_the_text_encoder_with_the_data_handles(self):
    data = training_data.PreparedData(["a", "b"], training_data.TEXT_INPUT, None, None, None,
                                      ("/hub/preprocess", "/hub/encoder"))
    model_config = _resolved_model_config(digits_config("/x"), data)
    self.assertEqual(model_config.instance_encoder.type, encoders.TEXT)
    self.assertEqual(model_config.instance_encoder.text.text.preprocess_handle, "/hub/preprocess")
    self.assertEqual(model_config.instance_encoder.text.text.encoder_handle, "/hub/encoder")

  def test_tfidf_vocabulary_comes_from_the_training_texts_only(self):
    def split(texts: list[str]) -> training_data.ArraySplit:
      return training_data.ArraySplit(np.asarray(texts, dtype=object), np.zeros([len(texts)], np.int64))

    data = training_data.PreparedData(["a"], training_data.TEXT_INPUT, split(["alpha beta", "alpha"]),
                                      split(["omega"]), split(["psi"]))
    config = digits_config("/x", data=training_data.DataConfig(dataset="reuters_r8", text_mode="tfidf"))
    encoder = _resolved_model_config(config, data).instance_encoder
    self.assertEqual(encoder.type, encoders.TFIDF)
    self.assertEqual(encoder.tfidf.vocabulary, ["[UNK]", "alpha", "beta", "alpha beta"])
    self.assertAllClose(encoder.tfidf.idf_weights[1:], np.log(1 + 2 / np.array([3, 2, 2])))
    # The run's config (config.json) keeps None.
    self.assertIsNone(config.model.instance_encoder.tfidf.vocabulary)

  @parameterized.parameters(("tfidf", "text", "needs the 'tfidf' instance encoder, got 'text'"),
                            ("finetune", "tfidf", "needs the 'text' instance encoder, got 'tfidf'"))
  def test_raw_text_encoder_other_than_the_text_mode_names_raises(self, text_mode, encoder, message):
    data = training_data.PreparedData(["a"], training_data.TEXT_INPUT, None, None, None)
    config = digits_config("/x", data=training_data.DataConfig(dataset="reuters_r8", text_mode=text_mode))
    config.model.instance_encoder.type = encoder
    with self.assertRaisesRegex(ValueError, message):
      _resolved_model_config(config, data)

  def test_text_encoder_on_image_data_raises(self):
    data = training_data.PreparedData(["a"], training_data.IMAGE_INPUT, None, None, None)
    config = digits_config("/x")
    config.model.instance_encoder.type = encoders.TEXT
    with self.assertRaisesRegex(ValueError, "reads raw strings"):
      _resolved_model_config(config, data)


class MetadataClassTextsTest(tf.test.TestCase, parameterized.TestCase):
  """The metadata class encoder filled in for a run that gives none: class texts, frozen encoder, output
  size."""

  _DATA_HANDLES = ("/hub/minilm_preprocess", "/hub/minilm_encoder")
  _CONFIG_HANDLES = ["/hub/config_preprocess", "/hub/config_encoder"]

  def _resolved(self, input_kind: str, instance_encoder: encoders.InstanceEncoderConfig,
                interaction: str = "dot", class_texts: list[str] | None = None, metadata=None,
                towers: str = class_encoders.PROJECTION_TOWERS) -> model_lib.Rank4ClassConfig:
    handles = self._DATA_HANDLES if input_kind in (training_data.TEXT_INPUT,
                                                   training_data.EMBEDDING_INPUT) else None
    data = training_data.PreparedData(["a", "b"], input_kind, None, None, None, handles,
                                      class_texts=class_texts)
    config = digits_config("/x", data=training_data.DataConfig(
        dataset="digits", max_seq_length=16, text_encoder_handles=self._CONFIG_HANDLES),
                           model=model_lib.Rank4ClassConfig(
            instance_encoder=instance_encoder, interaction=interactions.InteractionConfig(type=interaction),
            class_encoder=class_encoders.ClassEncoderConfig(type="metadata", metadata=metadata,
                                                            towers=towers)))
    resolved = _resolved_model_config(config, data)
    self.assertIs(config.model.class_encoder.metadata, metadata)  # The run's config is left as given.
    return resolved

  def test_class_texts_of_the_data_in_the_frozen_text_encoder_of_the_data(self):
    metadata = self._resolved(training_data.EMBEDDING_INPUT, encoders.InstanceEncoderConfig(type="auto"),
                              class_texts=["Alpha text", "Beta text"]).class_encoder.metadata
    self.assertEqual(metadata.class_texts, ["Alpha text", "Beta text"])
    self.assertEqual(metadata.text, training_data.frozen_text_encoder(training_data.DataConfig(
        dataset="digits", max_seq_length=16), self._DATA_HANDLES))
    self.assertFalse(metadata.text.trainable)
    self.assertTrue(metadata.precompute)

  def test_without_class_texts_the_class_names_are_embedded_by_the_configured_encoder(self):
    metadata = self._resolved(training_data.IMAGE_INPUT, encoders.InstanceEncoderConfig(type="auto")
                              ).class_encoder.metadata
    self.assertIsNone(metadata.class_texts)  # `make_class_encoder` embeds the class names then.
    self.assertEqual([metadata.text.preprocess_handle, metadata.text.encoder_handle], self._CONFIG_HANDLES)

  @parameterized.named_parameters(
      ("mlp_dot", training_data.EMBEDDING_INPUT, dict(type="auto", mlp=encoders.MlpEncoderConfig((64, 16))),
       "dot", 16),
      ("mlp_latent_cross", training_data.DENSE_INPUT, dict(type="mlp", mlp=encoders.MlpEncoderConfig((32,))),
       "latent_cross", 32),
      ("mlp_concat", training_data.DENSE_INPUT, dict(type="mlp"), "concat", None),
      ("residual_mlp", training_data.EMBEDDING_INPUT, dict(type="mlp", mlp=encoders.MlpEncoderConfig(
          (32,), residual=True)), "dot", None),
      ("small_cnn", training_data.IMAGE_INPUT,
       dict(type="auto", image=encoders.ImageEncoderConfig(filters=(16, 24))), "dot", 24),
      ("image_projection", training_data.IMAGE_INPUT, dict(type="image", image=encoders.ImageEncoderConfig(
          output_dim=40)), "latent_cross", 40),
      ("application_backbone", training_data.IMAGE_INPUT,
       dict(type="image", image=encoders.ImageEncoderConfig(
          backbone="mobilenet_v2")), "dot", None),
      ("text", training_data.TEXT_INPUT, dict(type="auto"), "dot", None),
      ("text_projection", training_data.TEXT_INPUT, dict(type="text", text=encoders.TextInstanceEncoderConfig(
          text=None, output_dim=48)), "dot", 48),
  )
  def test_class_embeddings_take_the_instance_embedding_size(self, input_kind, instance_encoder, interaction,
                                                             output_dim):
    metadata = self._resolved(input_kind, encoders.InstanceEncoderConfig(**instance_encoder),
                              interaction).class_encoder.metadata
    self.assertEqual(metadata.output_dim, output_dim)

  def test_metadata_settings_given_are_kept(self):
    given = class_encoders.MetadataClassEncoderConfig(
        text=training_data.frozen_text_encoder(training_data.DataConfig(dataset="digits"), ("/p", "/e")),
        class_texts=["x", "y"], output_dim=7)
    for towers in class_encoders.TOWERS:
      resolved = self._resolved(training_data.EMBEDDING_INPUT, encoders.InstanceEncoderConfig(type="auto"),
                                metadata=given, towers=towers)
      self.assertIs(resolved.class_encoder.metadata, given)
      self.assertEqual((resolved.interaction.temperature, resolved.instance_encoder.mlp.residual),
                       (1.0, False))
    with self.assertRaisesRegex(ValueError, "class texts of .* differ from those the model config gives"):
      self._resolved(training_data.EMBEDDING_INPUT, encoders.InstanceEncoderConfig(type="auto"),
                     class_texts=["Alpha text", "Beta text"], metadata=given)

  def test_cosine_towers_where_they_apply(self):
    for towers in (class_encoders.AUTO_TOWERS, class_encoders.COSINE_TOWERS):
      resolved = self._resolved(training_data.EMBEDDING_INPUT, encoders.InstanceEncoderConfig(type="auto"),
                                class_texts=["Alpha text", "Beta text"], towers=towers)
      metadata, mlp = resolved.class_encoder.metadata, resolved.instance_encoder.mlp
      self.assertEqual((metadata.class_texts, metadata.output_dim, metadata.use_bias,
                        metadata.residual_projection,
                        metadata.normalize_output, metadata.text.l2_normalize, metadata.text.trainable),
                       (["Alpha text", "Beta text"], None, False, True, True, True, False))
      self.assertEqual((resolved.instance_encoder.type, mlp.residual, mlp.l2_normalize), ("mlp", True, True))
      self.assertEqual(resolved.interaction.temperature, model_setup.COSINE_TOWERS_TEMPERATURE)
    # Auto falls back to the projection towers where cosine ones cannot apply; asking for them there raises.
    auto = self._resolved(training_data.DENSE_INPUT, encoders.InstanceEncoderConfig(type="mlp"),
                          towers=class_encoders.AUTO_TOWERS)
    self.assertEqual((auto.class_encoder.metadata.residual_projection, auto.interaction.temperature),
                     (False, 1.0))
    auto = self._resolved(training_data.EMBEDDING_INPUT, encoders.InstanceEncoderConfig(type="mlp"),
                          "latent_cross", towers=class_encoders.AUTO_TOWERS)
    self.assertFalse(auto.instance_encoder.mlp.residual)
    with self.assertRaisesRegex(ValueError, r"Cosine class-text towers need the dot interaction; use the "
                                r"projection towers \(`class_encoder.towers`=projection\) otherwise\."):
      self._resolved(training_data.EMBEDDING_INPUT, encoders.InstanceEncoderConfig(type="mlp"),
                     "latent_cross", towers=class_encoders.COSINE_TOWERS)


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
      _resolved_model_config(_config(**config_args), data)
    resolved = _resolved_model_config(_config(init=class_encoders.AUTO_INIT, **config_args), data)
    self.assertIsNone(resolved.class_encoder.one_hot.initial_embeddings)
    self.assertFalse(resolved.instance_encoder.mlp.residual)

  def test_metadata_class_encoder_needs_the_one_hot_one(self):
    config = _config(class_encoder=class_encoders.METADATA)
    self.assertFalse(model_setup.class_centroids_apply(dataclasses.replace(
        config.model, class_encoder=dataclasses.replace(config.model.class_encoder, init="auto")), _data()))
    with self.assertRaisesRegex(ValueError, "the one_hot class encoder"):
      model_setup.class_centroids_apply(config.model, _data())

  def test_without_class_bias_a_class_without_rows_starts_at_zero(self):
    config = _config()
    config.model.class_encoder.one_hot.use_bias = False
    one_hot = _resolved_model_config(config, _data()).class_encoder.one_hot
    self.assertAllClose(one_hot.initial_embeddings, _CENTROIDS * 20)
    self.assertIsNone(one_hot.initial_bias)

  def test_random_init_keeps_the_model(self):
    resolved = _resolved_model_config(_config(init=class_encoders.RANDOM_INIT), _data())
    self.assertIsNone(resolved.class_encoder.one_hot.initial_embeddings)
    self.assertEqual(resolved.interaction.temperature, 1.0)

  def test_auto_applies_from_the_class_count_on(self):
    self.assertEqual(model_setup.AUTO_CENTROID_CLASSES, 500)
    # The data has 4 classes; dense features only on request (`init="centroids"`).
    for threshold, kind, applies in ((4, training_data.EMBEDDING_INPUT, True),
                                     (5, training_data.EMBEDDING_INPUT, False),
                                     (4, training_data.DENSE_INPUT, False)):
      with mock.patch.object(model_setup, "AUTO_CENTROID_CLASSES", threshold):
        setup = _resolved_model_setup(_config(init=class_encoders.AUTO_INIT), _data(kind))
      resolved = setup.model_config
      self.assertEqual(resolved.class_encoder.one_hot.initial_embeddings is not None, applies)
      self.assertEqual(resolved.instance_encoder.mlp.residual, applies)
      self.assertEqual(setup.starts_fitted, applies)
      self.assertEqual(setup.start_line() is not None, applies)


class LogisticRegressionAppliesTest(tf.test.TestCase, parameterized.TestCase):

  def test_applies_to_fixed_vectors_below_the_centroid_class_count(self):
    for kind in (training_data.EMBEDDING_INPUT, training_data.DENSE_INPUT):
      resolved = _resolved_model_config(_config(init=class_encoders.RANDOM_INIT), _data(kind))
      self.assertEqual(model_setup.logistic_regression_applies(resolved, _data(kind)), [])
    with mock.patch.object(model_setup, "AUTO_CENTROID_CLASSES", 4):
      self.assertRegex(" ".join(model_setup.logistic_regression_applies(resolved, _data())),
                       "fewer than 4 classes")

  @parameterized.named_parameters(
      ("no_bias", dict(use_bias=False), {}, "class biases"),
      ("logit_adjustment", dict(logit_adjustment=1.0), {}, "no logit adjustment"),
      ("latent_cross", dict(interaction=interactions.LATENT_CROSS), {}, "the dot interaction"),
      ("images", {}, dict(input_kind=training_data.IMAGE_INPUT), "fixed vectors as inputs"),
      ("graded_lists", {}, dict(labels=np.eye(4, dtype=np.float32)[[0, 0, 1, 2, 2]]), "class ids as labels"),
  )
  def test_names_what_it_lacks(self, args, data_args, need):
    config = _config(init=class_encoders.RANDOM_INIT, interaction=args.get("interaction", interactions.DOT),
                     encoder=encoders.MLP)
    config.model.class_encoder.one_hot.use_bias = args.get("use_bias", True)
    config.model.logit_adjustment = args.get("logit_adjustment", 0.0)
    self.assertRegex(" ".join(model_setup.logistic_regression_applies(config.model, _data(**data_args))),
                     need)


class StartsAtTheCentroidClassifierTest(tf.test.TestCase):

  def test_step_0_scores_are_cosines_to_the_training_centroids_and_export_predicts_the_trained_scores(self):
    data = _data(training_data.DENSE_INPUT)
    config = _config()
    resolved = _resolved_model_config(config, data)
    self.assertIsNone(config.model.class_encoder.one_hot.initial_embeddings)  # config.json keeps None.
    configs.to_dict(config)  # JSON-ready.
    self.assertEqual(resolved.interaction.temperature, 1.0)
    tf.keras.utils.set_random_seed(0)
    model = model_lib.build_model(resolved, data.class_names)
    scores = model(_OTHER_X, training=False).numpy()
    # NumPy reference: the nearest class centroid classifier, cosine to each class's mean training row x 20
    # (the centroids' length); the class without training rows ranked last (bias -2 x 20 = -40, below every
    # cosine).
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
    resolved = _resolved_model_config(config, _data())
    # Not the validation rows' [1, 1, 1, 1].
    self.assertAllClose(resolved.class_priors, np.array([2, 1, 2, 1]) / 6)
    self.assertIsNone(config.model.class_priors)  # config.json keeps None.
    model = model_lib.build_model(resolved, _data().class_names)
    self.assertAllClose(model(_OTHER_X, training=True) - model(_OTHER_X, training=False),
                        np.tile(np.log([2, 1, 2, 1]) - np.log(6), [4, 1]), atol=1e-5)

  def test_graded_class_lists_raise(self):
    with self.assertRaisesRegex(ValueError, "one class id per training row"):
      model_setup.training_class_priors(_data(labels=np.eye(4, dtype=np.float32)[[0, 0, 1, 2, 2]]))


class SplitBatchesTest(tf.test.TestCase):

  def test_record_split_is_read_batch_by_batch_to_the_same_centroids(self):
    schema = tfrecords.ExampleSchema(text_key=None, dense_key="x", dense_dim=2, num_classes=4)
    path = os.path.join(self.create_tempdir().full_path, "train.tfrecord")
    tfrecords.write_instances(path, [tfrecords.ClassificationInstance(label=int(y), dense=x)
                                     for x, y in zip(_TRAIN_X, _TRAIN_Y, strict=True)], schema)
    batches = list(model_setup._split_batches(training_data.RecordSplit(path, schema, "x"), batch_size=2))
    self.assertEqual([len(y) for _, y in batches], [2, 2, 1])
    self.assertAllClose(class_encoders.class_centroids(batches, 4)[0], _CENTROIDS)

  def test_has_class_ids_is_false_for_graded_class_lists_only(self):
    self.assertTrue(model_setup.has_class_ids(_data().train))
    self.assertFalse(model_setup.has_class_ids(_data(labels=np.eye(4,
                                                                   dtype=np.float32)[[0, 0, 1, 2, 2]]).train))
    schema = tfrecords.ExampleSchema(text_key=None, dense_key="x", dense_dim=2, num_classes=4)
    self.assertTrue(model_setup.has_class_ids(training_data.RecordSplit("/unread.tfrecord", schema, "x")))


class ClassTextEmbeddingsTest(TinyTextEncoderTestCase, parameterized.TestCase):
  """A run's frozen class-text encoder reads its class texts' embeddings from the embedding cache."""

  @parameterized.named_parameters(("float32", {}), ("bfloat16_unit_length", dict(
      precision=text_encoder.BFLOAT16, l2_normalize=True)))
  def test_the_cache_gives_the_vectors_the_layer_computes_bit_for_bit(self, settings):
    text = dataclasses.replace(self.text, **settings)
    texts = ["a big dog", "a small cat", "bird", "a fish in a tree"]
    config = model_lib.Rank4ClassConfig(class_encoder=class_encoders.ClassEncoderConfig(
        type="metadata", metadata=class_encoders.MetadataClassEncoderConfig(text=text, class_texts=texts)))
    cache = self.create_tempdir().full_path
    given = model_setup.with_class_text_embeddings(config, cache, ["w", "x", "y", "z"])
    self.assertIsNone(config.class_encoder.metadata.text_embeddings)  # The config given is left as it was.
    vectors = given.class_encoder.metadata.text_embeddings
    computed = class_encoders.MetadataClassEncoder(texts, text)
    computed(None)
    weight, = (w for w in computed.weights if "text_embeddings" in w.name)
    self.assertAllEqual(vectors, weight.numpy())  # To the bit.
    # Without class texts the class names are embedded; a second run reads the same vectors from the cache.
    by_names = dataclasses.replace(config, class_encoder=dataclasses.replace(
        config.class_encoder, metadata=dataclasses.replace(config.class_encoder.metadata, class_texts=None)))
    again = model_setup.with_class_text_embeddings(by_names, cache, texts)
    self.assertAllEqual(again.class_encoder.metadata.text_embeddings, vectors)

  def test_other_class_encoders_and_fine_tuned_ones_are_left_alone(self):
    cache = self.create_tempdir().full_path
    one_hot = model_lib.Rank4ClassConfig()
    self.assertIs(model_setup.with_class_text_embeddings(one_hot, cache, ["a", "b"]), one_hot)
    for metadata in (class_encoders.MetadataClassEncoderConfig(text=dataclasses.replace(self.text,
                                                                                        trainable=True)),
                     class_encoders.MetadataClassEncoderConfig(text=self.text, precompute=False)):
      config = model_lib.Rank4ClassConfig(class_encoder=class_encoders.ClassEncoderConfig(
          type="metadata", metadata=metadata))
      self.assertIs(model_setup.with_class_text_embeddings(config, cache, ["a", "b"]), config)
    self.assertEqual(os.listdir(cache), [])  # Nothing was embedded.


if __name__ == "__main__":
  tf.test.main()
