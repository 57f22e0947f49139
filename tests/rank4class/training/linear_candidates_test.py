"""Tests for rank4class.training.linear_candidates: the path's chosen regression folded into a Rank4Class
model scores exactly its logits (fixed vectors and hybrid text), classes without training rows rank last,
and an end-to-end path on real digits lands near scikit-learn's regression."""

import dataclasses
from unittest import mock

import numpy as np
import tensorflow as tf
from sklearn import datasets as sklearn_datasets
from sklearn import linear_model

from rank4class.modeling import class_encoders, encoders
from rank4class.modeling import model as model_lib
from rank4class.training import linear_candidates, linear_path, training_data


def _model_config(**encoder) -> model_lib.Rank4ClassConfig:
  return model_lib.Rank4ClassConfig(
      instance_encoder=encoders.InstanceEncoderConfig(**{"type": encoders.MLP,
                                                         "mlp": encoders.MlpEncoderConfig((4,)), **encoder}),
      class_encoder=class_encoders.ClassEncoderConfig(init=class_encoders.RANDOM_INIT))


def _scores(config: model_lib.Rank4ClassConfig, names: list[str], inputs) -> np.ndarray:
  tf.keras.utils.set_random_seed(0)
  return model_lib.build_model(config, names)(inputs, training=False).numpy().astype(np.float64)


class FoldTest(tf.test.TestCase):

  def test_the_model_scores_the_chosen_regressions_logits_of_the_standardised_inputs(self):
    train_x = np.array([[0., 10.], [1., 30.], [2., 20.], [3., 40.]], np.float32)
    data = training_data.PreparedData(
        ["a", "b", "c"], training_data.DENSE_INPUT,
        training_data.ArraySplit(train_x, np.array([0, 1, 0, 1])),  # Class "c" has no training row.
        training_data.ArraySplit(train_x[:2], np.array([0, 1])), None)
    weights = np.array([[1.0, -2.0], [0.5, 0.25], [0.0, 0.0]])
    bias = np.array([0.1, -0.3, 0.0])
    fitted = linear_path.PathResult(linear_path.Head(1.0), weights, bias, {"inverse_regularization": 1.0})
    with mock.patch.object(linear_path, "fit_path", return_value=fitted):
      config, fit = linear_candidates.logistic_regression_model(_model_config(), data, "/unused")
    self.assertEqual(fit["inverse_regularization"], 1.0)
    rows = np.array([[1.5, 25.0], [-3.0, 80.0]], np.float32)
    standardised = (rows - train_x.mean(0)) / train_x.std(0)
    scores = _scores(config, data.class_names, rows)
    self.assertAllClose(scores[:, :2], standardised @ weights[:2].T + bias[:2], atol=1e-4)
    self.assertAllLess(scores[:, 2] - scores[:, :2].min(axis=1), -100)  # No training row: ranked last.

  def test_hybrid_text_folds_tfidf_into_the_projection_and_the_embedding_into_the_classes(self):
    texts = np.array(["good film", "great film", "bad film", "awful plot"], dtype=object)
    labels = np.array([1, 1, 0, 0])
    embeddings = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    tfidf = encoders.TfidfEncoderConfig(output_dim=1, ngrams=1)
    vocabulary, idf = encoders.tfidf_vocabulary(texts, tfidf.max_tokens, tfidf.ngrams)
    tfidf = dataclasses.replace(tfidf, vocabulary=vocabulary, idf_weights=idf)
    split = training_data.ArraySplit({encoders.TEXT_KEY: texts, encoders.EMBEDDING_KEY: embeddings}, labels)
    data = training_data.PreparedData(["neg", "pos"], training_data.TEXT_AND_EMBEDDING_INPUT, split, split,
                                      None)
    width = len(vocabulary)
    rng = np.random.default_rng(2)
    weights, bias = rng.normal(size=(2, width + 3)), rng.normal(size=2)
    head = linear_path.Head(10.0, 0.25 / np.sqrt(3))
    fitted = linear_path.PathResult(head, weights, bias, {"inverse_regularization": 10.0})
    with mock.patch.object(linear_path, "fit_path", return_value=fitted) as fit_path:
      config, fit = linear_candidates.logistic_regression_model(
          _model_config(type=encoders.HYBRID, tfidf=tfidf), data, "/unused")
    heads = fit_path.call_args.args[1]
    self.assertLen(heads, len(linear_candidates.HYBRID_EMBEDDING_WEIGHTS)
                   * len(linear_candidates.HYBRID_INVERSE_REGULARIZATION))
    self.assertAllClose(fit["embedding_weight"], 0.25)
    self.assertEqual(config.instance_encoder.tfidf.output_dim, 2)  # Raised to the class count.
    self.assertTrue(config.instance_encoder.mlp.residual)
    tfidf_rows = tf.sparse.to_dense(linear_candidates.tfidf_rows(tfidf, texts)).numpy()
    standardised = (embeddings - embeddings.mean(0)) / embeddings.std(0)
    expected = np.concatenate([tfidf_rows, standardised], axis=1) @ weights.T + bias
    # The model's scores [t(x) K ; e(x)] . c_i + b_i, read off the config (building the hybrid encoder needs
    # the frozen text encoder, which the dot product of its embedding branch does not).
    one_hot = config.class_encoder.one_hot
    instance = np.concatenate([tfidf_rows @ config.instance_encoder.tfidf.initial_kernel, embeddings], axis=1)
    self.assertAllClose(instance @ one_hot.initial_embeddings.T + one_hot.initial_bias, expected, atol=1e-4)


class DigitsPathTest(tf.test.TestCase):

  def test_the_engines_regression_predicts_as_scikit_learns_on_real_digits(self):
    x, y = sklearn_datasets.load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    x, y = x[order].astype(np.float32), y[order]
    data = training_data.PreparedData([str(c) for c in range(10)], training_data.DENSE_INPUT,
                                      training_data.ArraySplit(x[:1000], y[:1000]),
                                      training_data.ArraySplit(x[1000:1400], y[1000:1400]), None)
    config, fit = linear_candidates.logistic_regression_model(_model_config(), data,
                                                              self.create_tempdir().full_path + "/path")
    scores = _scores(config, data.class_names, x[1400:])
    mean, scale = x[:1000].mean(0), x[:1000].std(0)
    scale[scale == 0] = 1
    reference = linear_model.LogisticRegression(C=fit["inverse_regularization"], max_iter=2000).fit(
        (x[:1000] - mean) / scale, y[:1000])
    agreement = np.mean(np.argmax(scores, 1) == reference.predict((x[1400:] - mean) / scale))
    self.assertGreater(agreement, 0.97)
    self.assertLess(np.mean(np.argmax(scores, 1) != y[1400:]), 0.06)  # Chance: 0.9.


if __name__ == "__main__":
  tf.test.main()
