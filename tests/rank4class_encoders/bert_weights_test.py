"""Tests for rank4class_encoders.bert_weights: Hugging Face <-> encoder weight mapping and random
initialisation."""

import json
import os

import numpy as np
import tensorflow as tf
from safetensors import numpy as safetensors_numpy

from rank4class_encoders import bert_encoder, bert_weights
from tests.rank4class_encoders.tiny_bert import TINY_VOCAB, tiny_architecture


class HuggingFaceMappingTest(tf.test.TestCase):
  def setUp(self):
    super().setUp()
    self.config = tiny_architecture()
    self.weights = bert_weights.random_bert_weights(self.config, seed=2)

  def test_round_trip_is_exact(self):
    state = bert_weights.bert_weights_to_hugging_face(self.weights, self.config)
    back = bert_weights.hugging_face_to_bert_weights(state, self.config)
    self.assertSameElements(back, self.weights)
    for name, value in self.weights.items():
      self.assertAllEqual(back[name], value)

  def test_pytorch_layout_is_transposed_and_split(self):
    state = bert_weights.bert_weights_to_hugging_face(self.weights, self.config)
    qkv = self.weights["layer_0/attention/qkv/kernel"]  # [16, 48]: query | key | value columns.
    self.assertAllEqual(state["encoder.layer.0.attention.self.key.weight"], qkv[:, 16:32].T)
    self.assertAllEqual(state["encoder.layer.1.intermediate.dense.weight"].shape, (32, 16))  # [out, in]

  def test_bert_prefix_and_tensorflow_layer_norm_names_are_accepted(self):
    state = bert_weights.bert_weights_to_hugging_face(self.weights, self.config)
    renamed = {
      "bert." + name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                            "LayerNorm.beta"): v
      for name, v in state.items()
    }
    renamed["cls.predictions.bias"] = np.zeros([len(TINY_VOCAB)], np.float32)  # A head: ignored.
    back = bert_weights.hugging_face_to_bert_weights(renamed, self.config)
    self.assertAllEqual(back["embeddings/layer_norm/gamma"], self.weights["embeddings/layer_norm/gamma"])

  def test_missing_pooler_becomes_identity(self):
    state = bert_weights.bert_weights_to_hugging_face(self.weights, self.config)
    del state["pooler.dense.weight"], state["pooler.dense.bias"]
    back = bert_weights.hugging_face_to_bert_weights(state, self.config)
    self.assertAllEqual(back["pooler/kernel"], np.eye(16))
    self.assertAllEqual(back["pooler/bias"], np.zeros([16]))

  def test_missing_layer_raises(self):
    state = bert_weights.bert_weights_to_hugging_face(self.weights, self.config)
    with self.assertRaisesRegex(ValueError, "my.safetensors lacks 16 BERT tensors.*encoder.layer.2"):
      bert_weights.hugging_face_to_bert_weights(state, tiny_architecture(num_layers=3),
                                                source="my.safetensors")

  def test_wrong_shape_raises(self):
    state = bert_weights.bert_weights_to_hugging_face(self.weights, self.config)
    with self.assertRaisesRegex(ValueError,
                                "'embeddings/position_embeddings' has shape \\(64, 16\\).*\\(32, 16\\)"):
      bert_weights.hugging_face_to_bert_weights(state, tiny_architecture(max_position_embeddings=32))


class RandomBertWeightsTest(tf.test.TestCase):
  def test_bert_initialisation(self):
    config = tiny_architecture()
    weights = bert_weights.random_bert_weights(config, seed=0)
    self.assertEqual({n: w.shape for n, w in weights.items()}, bert_encoder.bert_weight_shapes(config))
    self.assertAllEqual(weights["layer_0/output/layer_norm/gamma"], np.ones([16]))
    self.assertAllEqual(weights["layer_0/output/bias"], np.zeros([16]))
    kernel = weights["layer_0/intermediate/kernel"]  # 16 * 32 = 512 draws of normal(0, 0.02).
    self.assertAllClose(kernel.std(), 0.02, atol=0.002)
    self.assertAllClose(kernel.mean(), 0.0, atol=0.003)

  def test_seed_decides_the_weights(self):
    config = tiny_architecture()
    first, again, other = (bert_weights.random_bert_weights(config, seed) for seed in (5, 5, 6))
    self.assertAllEqual(first["pooler/kernel"], again["pooler/kernel"])
    self.assertNotAllClose(first["pooler/kernel"], other["pooler/kernel"])


class WriteHuggingFaceBertTest(tf.test.TestCase):
  def test_directory_reads_back(self):
    directory = os.path.join(self.create_tempdir().full_path, "bert")
    config = tiny_architecture(hidden_activation="relu")
    weights = bert_weights.random_bert_weights(config, seed=1)
    bert_weights.write_hugging_face_bert(directory, config, weights, TINY_VOCAB, lower_case=False)
    self.assertCountEqual(
      os.listdir(directory), ["config.json", "tokenizer_config.json", "vocab.txt", "model.safetensors"]
    )
    self.assertEqual(
      bert_encoder.BertArchitecture.from_hugging_face_config(os.path.join(directory, "config.json")), config
    )
    with open(os.path.join(directory, "tokenizer_config.json")) as f:
      self.assertFalse(json.load(f)["do_lower_case"])
    with open(os.path.join(directory, "vocab.txt"), encoding="utf-8") as f:
      self.assertEqual(f.read().splitlines(), TINY_VOCAB)
    state = safetensors_numpy.load_file(os.path.join(directory, "model.safetensors"))
    back = bert_weights.hugging_face_to_bert_weights(state, config)
    self.assertAllEqual(back["layer_1/attention/qkv/bias"], weights["layer_1/attention/qkv/bias"])


if __name__ == "__main__":
  tf.test.main()
