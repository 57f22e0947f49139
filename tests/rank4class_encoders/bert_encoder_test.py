"""Tests for rank4class_encoders.bert_encoder: architecture, dropout, the saved encoder, numerics vs
PyTorch."""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
from absl.testing import parameterized

from rank4class_data import stack
from rank4class_encoders import bert_conversion, bert_encoder, bert_weights
from tests.rank4class_encoders.tiny_bert import minilm_handles, real_sentences, tiny_architecture

_TORCH_REFERENCE = textwrap.dedent("""
    import sys
    import numpy as np
    import torch
    import transformers
    torch.set_num_threads(2)
    inputs = np.load(sys.argv[2])
    model = transformers.BertModel.from_pretrained(sys.argv[1], attn_implementation="eager").eval()
    with torch.no_grad():
      out = model(input_ids=torch.from_numpy(inputs["input_word_ids"].astype(np.int64)),
                  attention_mask=torch.from_numpy(inputs["input_mask"].astype(np.int64)),
                  token_type_ids=torch.from_numpy(inputs["input_type_ids"].astype(np.int64)),
                  output_hidden_states=True)
    np.savez(sys.argv[3], sequence_output=out.last_hidden_state.numpy(), pooled_output=out.pooler_output.numpy(),
             hidden_states=np.stack([h.numpy() for h in out.hidden_states[1:]]))
""")  # noqa: E501



class BertArchitectureTest(tf.test.TestCase, parameterized.TestCase):
  @parameterized.named_parameters(
    ("zero_layers", {"num_layers": 0}, "`num_layers` must be an integer >= 1, got 0"),
    ("heads_do_not_divide", {"hidden_size": 10, "num_heads": 3}, "not divisible by `num_heads` 3"),
    ("float_heads", {"num_heads": 2.0}, "`num_heads` must be an integer >= 1, got 2.0"),
    ("unknown_activation", {"hidden_activation": "swish"},
     r"`hidden_activation` must be one of \['gelu', .*\], got 'swish'"),
    ("dropout_one", {"hidden_dropout": 1.0}, "`hidden_dropout` must be in \\[0, 1\\), got 1.0"),
    ("attention_dropout_negative", {"attention_dropout": -0.1},
     "`attention_dropout` must be in \\[0, 1\\), got -0.1"),
  )
  def test_bad_value_raises(self, overrides, message):
    with self.assertRaisesRegex(ValueError, message):
      tiny_architecture(**overrides)

  def test_numpy_integer_sizes_are_kept_as_ints(self):
    config = tiny_architecture(num_layers=np.int64(2))
    self.assertIs(type(config.num_layers), int)

  def test_weight_shapes_count(self):
    # 5 embedding tensors, 12 per layer, 2 pooler tensors.
    shapes = bert_encoder.bert_weight_shapes(tiny_architecture())
    self.assertLen(shapes, 5 + 12 * 2 + 2)
    self.assertEqual(shapes["layer_1/attention/qkv/kernel"], (16, 48))


class InvertedDropoutTest(tf.test.TestCase):
  def test_keeps_the_expected_fraction_unbiased(self):
    x = tf.ones([400, 500])
    y = bert_encoder.inverted_dropout(x, 0.1, training=True)
    kept = float(tf.reduce_mean(tf.cast(y > 0, tf.float32)))
    self.assertAllClose(kept, 0.9, atol=0.005)
    self.assertAllClose(float(tf.reduce_mean(y)), 1.0, atol=0.005)  # Kept values are scaled by 1 / 0.9.
    self.assertAllClose(float(tf.reduce_max(y)), 65536 / (65536 - 6554))

  def test_draws_a_new_mask_on_every_call_and_handles_odd_sizes(self):
    x = tf.ones([3, 5])
    first, second = (bert_encoder.inverted_dropout(x, 0.5, training=True) for _ in range(2))
    self.assertEqual(first.shape, [3, 5])
    self.assertNotAllEqual(first, second)

  def test_inference_is_identity(self):
    x = tf.random.normal([4, 3])
    self.assertAllEqual(bert_encoder.inverted_dropout(x, 0.1, training=False), x)


class MiniLMEncoderTest(tf.test.TestCase):
  """The converted encoder against the reference PyTorch model, on CPU.

  PyTorch runs on the reference stack only: the one CPU wheel here (torch 2.13.0) is for Python 3.11, and on
  3.12+ the registry serves a CUDA build of several GB. On the reference stack a missing torch is a failure.
  """

  def setUp(self):
    super().setUp()
    if stack.check_tensorflow_stack().name == stack.CURRENT and importlib.util.find_spec("torch") is None:
      self.skipTest("PyTorch reference: reference stack only (no CPU torch wheel for Python 3.12+ here)")

  def test_outputs_match_pytorch_within_1e_4(self):
    handles = minilm_handles()
    preprocessor, encoder = hub.load(handles.preprocess), hub.load(handles.encoder)
    texts = list(real_sentences()[::23])  # 16 real sentences of all sources.
    inputs = preprocessor.bert_pack_inputs([preprocessor.tokenize(tf.constant(texts))], seq_length=64)
    temp = self.create_tempdir().full_path
    np.savez(os.path.join(temp, "inputs.npz"), **{k: v.numpy() for k, v in inputs.items()})
    subprocess.run(
      [
        sys.executable,
        "-c",
        _TORCH_REFERENCE,
        bert_conversion.minilm_checkpoint_dir(),
        os.path.join(temp, "inputs.npz"),
        os.path.join(temp, "reference.npz"),
      ],
      check=True,
    )
    reference = np.load(os.path.join(temp, "reference.npz"))
    outputs = encoder(inputs, training=False)
    # Real tokens only: padding positions are never used (pooling and attention mask them out) and drift more.
    real = inputs["input_mask"].numpy().astype(bool)
    self.assertFalse(real.all())  # Padding is present, so the masking below is exercised.
    self.assertAllClose(
      outputs["sequence_output"].numpy()[real], reference["sequence_output"][real], atol=1e-4, rtol=0
    )
    self.assertAllClose(outputs["pooled_output"], reference["pooled_output"], atol=1e-4, rtol=0)
    self.assertLen(outputs["encoder_outputs"], 6)
    for layer, layer_output in enumerate(outputs["encoder_outputs"]):
      self.assertAllClose(
        layer_output.numpy()[real], reference["hidden_states"][layer][real], atol=1e-4, rtol=0
      )
    mask = real[..., None].astype(np.float32)
    mean_pooled = (reference["sequence_output"] * mask).sum(1) / mask.sum(1)
    self.assertAllClose(
      (outputs["sequence_output"].numpy() * mask).sum(1) / mask.sum(1), mean_pooled, atol=1e-4, rtol=0
    )
    self.assertAllEqual(outputs["default"], outputs["pooled_output"])
    # The check is not vacuous: the outputs are far from zero.
    self.assertGreater(float(tf.reduce_max(tf.abs(outputs["sequence_output"]))), 0.5)


class SavedEncoderTest(tf.test.TestCase):
  """An encoder SavedModel written by `save_bert_encoder` from random weights, loaded with TF Hub."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.temp = tempfile.mkdtemp()
    cls.config = tiny_architecture()
    cls.weights = bert_weights.random_bert_weights(cls.config, seed=3)
    cls.path = os.path.join(cls.temp, "encoder")
    bert_encoder.save_bert_encoder(cls.config, cls.weights, cls.path)
    cls.encoder = hub.load(cls.path)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.temp, ignore_errors=True)
    super().tearDownClass()

  def inputs(self):
    ones = tf.ones([2, 5], tf.int32)
    return {"input_word_ids": ones * 6, "input_mask": ones, "input_type_ids": tf.zeros_like(ones)}

  def test_saved_variables_are_the_weights(self):
    got = {v.name.split(":")[0]: v.numpy() for v in self.encoder.variables}
    self.assertSameElements(got, self.weights)
    for name, value in self.weights.items():
      self.assertAllEqual(got[name], value)

  def test_call_equals_the_graph_function(self):
    want = bert_encoder.bert_encoder_outputs(
      {name: tf.constant(value) for name, value in self.weights.items()}, self.config, **self.inputs()
    )
    got = self.encoder(self.inputs())
    self.assertAllClose(got["sequence_output"], want["sequence_output"], atol=1e-6)
    self.assertAllClose(got["pooled_output"], want["pooled_output"], atol=1e-6)
    self.assertEqual(got["sequence_output"].shape, [2, 5, 16])

  def test_bfloat16_compute_stays_close_and_returns_float32(self):
    weights = {name: tf.constant(value) for name, value in self.weights.items()}
    ids = tf.constant([[2, 6, 7, 8, 3, 0], [2, 9, 3, 0, 0, 0]])
    inputs = {"input_word_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32),
              "input_type_ids": tf.zeros_like(ids)}
    full = bert_encoder.bert_encoder_outputs(weights, self.config, **inputs)
    half = bert_encoder.bert_encoder_outputs(weights, self.config, **inputs, compute_dtype=tf.bfloat16)
    for key in ("sequence_output", "pooled_output"):
      self.assertEqual(half[key].dtype, tf.float32)
      a = tf.reshape(full[key], [-1, 16]).numpy()
      b = tf.reshape(half[key], [-1, 16]).numpy()
      self.assertNotAllEqual(a, b)  # bfloat16 ran.
      cosine = np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
      self.assertGreater(cosine.min(), 0.999, key)
    with self.assertRaisesRegex(ValueError, "compute_dtype"):
      bert_encoder.bert_encoder_outputs(weights, self.config, **inputs, compute_dtype=tf.float16)

  def test_encoder_is_trainable_through_hub_keras_layer(self):
    layer = hub.KerasLayer(self.path, trainable=True)
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(layer(self.inputs(), training=True)["pooled_output"] ** 2)
    gradients = tape.gradient(loss, layer.trainable_variables)
    self.assertLen(layer.trainable_variables, len(bert_encoder.bert_weight_shapes(self.config)))
    self.assertTrue(all(g is not None for g in gradients))

  def test_serving_signature_matches_call(self):
    served = self.encoder.signatures["serving_default"](**self.inputs())
    outputs = self.encoder(self.inputs())
    self.assertAllClose(served["pooled_output"], outputs["pooled_output"])
    self.assertAllClose(served["encoder_output_1"], outputs["sequence_output"])

  def test_training_mode_applies_dropout(self):
    inference = self.encoder(self.inputs(), training=False)["sequence_output"]
    self.assertAllClose(self.encoder(self.inputs(), training=False)["sequence_output"], inference)
    self.assertNotAllClose(self.encoder(self.inputs(), training=True)["sequence_output"], inference)


if __name__ == "__main__":
  tf.test.main()
