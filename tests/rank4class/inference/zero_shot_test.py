"""Tests for rank4class.inference.zero_shot: classes given by their texts at serving time, and the untrained
baseline."""

import os

import numpy as np
import tensorflow as tf

from rank4class.inference import zero_shot
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_encoders import text_encoder
from tests.rank4class import tiny_text_encoder

_TEXTS = ["a big dog", "a small cat", "a bird", "a fish"]


class ZeroShotTest(tiny_text_encoder.TinyTextEncoderTestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    handles = cls.handles
    tf.keras.utils.set_random_seed(0)
    cls.model = model_lib.Rank4ClassModel(
        encoders.get("mlp", hidden_units=(8,)),
        class_encoders.get("metadata", class_texts=_TEXTS,
                           text=text_encoder.TextEncoderConfig(handles.preprocess, handles.encoder,
                                                               max_seq_length=8),
                           output_dim=8),
        interactions.get("dot"))
    cls.model(tf.zeros([1, 3]))
    for weight in cls.model.class_encoder.trainable_weights:  # Non-zero biases, which text scores leave out.
      weight.assign(tf.random.normal(weight.shape))
    cls.x = np.random.default_rng(0).normal(size=[5, 3]).astype(np.float32)

  def test_training_class_texts_score_like_the_trained_classes_without_bias(self):
    _, bias = self.model.class_embeddings()
    scores = self.model.text_class_scores(self.x, _TEXTS)
    self.assertAllClose(scores, self.model(self.x) - bias[tf.newaxis, :], atol=1e-5)
    self.assertEqual(self.model.text_class_scores(self.x, ["a tree", "a big fish", "cat"]).shape, [5, 3])

  def test_exported_signature_ranks_new_class_texts(self):
    path = zero_shot.export_zero_shot(self.model, os.path.join(self.create_tempdir(), "zs"), top_k=2)
    new = ["a tree", "a big fish", "a small bird"]
    served = tf.saved_model.load(path).signatures["serving_default"](inputs=tf.constant(self.x),
                                                                    class_texts=tf.constant(new))
    expected = self.model.text_class_scores(self.x, new).numpy()
    self.assertAllClose(served["scores"], expected, atol=1e-5)
    self.assertAllEqual(served["class_indices"], np.argsort(-expected, axis=1)[:, :2])
    self.assertAllEqual(served["class_texts"][:, 0],
                        np.array(new, object)[np.argmax(expected, 1)].astype(bytes))

  def test_report_and_baseline_hand_computed(self):
    labels = np.array([0, 1, 2, 3, 0])
    report = zero_shot.zero_shot_report(self.model, self.x, labels, _TEXTS, ks=(1, 2), batch_size=2)
    scores = self.model.text_class_scores(self.x, _TEXTS).numpy()
    ranks = (scores > scores[np.arange(5), labels][:, None]).sum(1)
    self.assertAllClose(report["metrics"]["mrr"], np.mean(1 / (ranks + 1)))
    self.assertEqual((report["n"], report["num_classes"]), (5, 4))
    baseline = zero_shot.nearest_text_baseline(np.array([[1.0, 0.0], [0.0, 2.0]]),
                                               np.array([[0.0, 1.0], [3.0, 0.1]]), np.array([1, 1]), ks=(1,))
    self.assertAllClose(baseline["metrics"]["top_1_error"], 0.5)  # The first is right, the second is not.
    self.assertAllClose(baseline["metrics"]["mrr"], 0.75)

  def test_one_hot_classes_cannot_be_given_as_texts(self):
    model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)),
                                      class_encoders.get("one_hot", num_classes=3), interactions.get("dot"))
    model(tf.zeros([1, 3]))
    with self.assertRaisesRegex(ValueError, "needs the metadata class encoder"):
      model.text_class_scores(self.x, ["a"])


if __name__ == "__main__":
  tf.test.main()
