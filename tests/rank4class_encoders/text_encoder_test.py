"""Tests for rank4class_encoders.text_encoder: pooling, frozen and fine-tuned modes, serialization, bad
handles."""

import dataclasses
import functools
import os
import subprocess
import sys
import textwrap
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
from absl.testing import parameterized

from rank4class_encoders import bert_conversion, bert_encoder, text_encoder
from tests.rank4class_encoders.tiny_bert import VOCAB, tiny_handles

# (anchor, paraphrase, unrelated) triples.
PARAPHRASES = [
  (
    "The stock market fell sharply today.",
    "Share prices dropped steeply today.",
    "My cat likes to sleep on the sofa.",
  ),
  (
    "How do I reset my password?",
    "What is the way to change my forgotten password?",
    "The recipe needs two cups of flour.",
  ),
  (
    "This medication gave me terrible headaches.",
    "I got awful headaches from this drug.",
    "The football team won the championship.",
  ),
  ("The weather is sunny and warm.", "It is a warm, sunny day.", "He is studying quantum physics."),
]


@functools.cache
def minilm_handles() -> bert_conversion.HubHandles:
  return bert_conversion.cached_conversion(bert_conversion.minilm_checkpoint_dir())


def tiny_encoder(**kwargs) -> text_encoder.TextEncoder:
  handles = tiny_handles()
  return text_encoder.TextEncoder(handles.preprocess, handles.encoder, **{"max_seq_length": 12, **kwargs})


class MaskedMeanTest(tf.test.TestCase):
  def test_averages_only_real_tokens(self):
    sequence = tf.constant([[[1.0, 2.0], [3.0, 4.0], [50.0, 60.0]], [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]])
    mask = tf.constant([[1, 1, 0], [0, 0, 0]])
    # Row 0: mean of the first two tokens; row 1 has no real token -> 0.
    self.assertAllClose(text_encoder.masked_mean(sequence, mask), [[2.0, 3.0], [0.0, 0.0]])

  def test_matches_numpy(self):
    rng = np.random.default_rng(0)
    sequence = rng.normal(size=[3, 5, 4]).astype(np.float32)
    mask = (rng.uniform(size=[3, 5]) > 0.3).astype(np.int32)
    mask[:, 0] = 1
    want = (sequence * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    self.assertAllClose(text_encoder.masked_mean(sequence, mask), want, atol=1e-6)


class TextEncoderValidationTest(tf.test.TestCase, parameterized.TestCase):
  def test_unknown_pooling_raises(self):
    with self.assertRaisesRegex(ValueError, r"`pooling` must be one of \['cls', 'mean'\], got 'max'"):
      tiny_encoder(pooling="max")

  @parameterized.parameters(2, 0, 12.5)
  def test_bad_max_seq_length_raises(self, max_seq_length):
    with self.assertRaisesRegex(ValueError, "`max_seq_length` must be an integer >= 3"):
      tiny_encoder(max_seq_length=max_seq_length)

  def test_missing_handle_raises(self):
    with self.assertRaisesRegex(ValueError, "`encoder_handle` '/no/such/encoder' does not exist"):
      text_encoder.TextEncoder(tiny_handles().preprocess, "/no/such/encoder")

  def test_directory_without_saved_model_raises(self):
    with self.assertRaisesRegex(ValueError, "holds no saved_model.pb"):
      text_encoder.TextEncoder(self.create_tempdir().full_path, tiny_handles().encoder)

  def test_encoder_given_as_preprocessor_raises(self):
    with self.assertRaisesRegex(ValueError, "lacks \\['tokenize', 'bert_pack_inputs'\\]"):
      text_encoder.TextEncoder(tiny_handles().encoder, tiny_handles().encoder)

  def test_non_string_input_raises(self):
    with self.assertRaisesRegex(ValueError, "takes string tensors, got dtype int32"):
      tiny_encoder()(tf.constant([1, 2]))

  def test_three_inputs_raise(self):
    texts = tf.constant(["a"])
    with self.assertRaisesRegex(ValueError, "got 3 inputs"):
      tiny_encoder()((texts, texts, texts))


class TextEncoderTest(tf.test.TestCase, parameterized.TestCase):
  def setUp(self):
    super().setUp()
    self.texts = tf.constant(["The cat sat on the mat.", "A dog ran!", "the cats is happy", "sad"])

  def reference_outputs(self, inputs):
    return hub.load(tiny_handles().encoder)(inputs)

  def test_mean_pooling_averages_sequence_output_over_mask(self):
    encoder = tiny_encoder()
    inputs = encoder.preprocess(self.texts)
    outputs = self.reference_outputs(inputs)
    mask = inputs["input_mask"].numpy()
    want = (outputs["sequence_output"].numpy() * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    self.assertEqual(encoder.output_dim, 16)
    self.assertAllClose(encoder(self.texts), want, atol=1e-6)

  def test_cls_pooling_is_pooled_output(self):
    encoder = tiny_encoder(pooling="cls")
    want = self.reference_outputs(encoder.preprocess(self.texts))["pooled_output"]
    self.assertAllClose(encoder(self.texts), want, atol=1e-6)

  def test_text_pairs_use_two_segments(self):
    encoder = tiny_encoder()
    second = tf.constant(["a park", "the mat", "dogs", "happy"])
    inputs = encoder.preprocess((self.texts, second))
    # "[CLS] sad [SEP] happy [SEP]" -> type ids 0 0 0 1 1, then padding.
    self.assertAllEqual(inputs["input_word_ids"][3], [2, 19, 3, 18, 3] + [0] * 7)
    self.assertAllEqual(inputs["input_type_ids"][3], [0, 0, 0, 1, 1] + [0] * 7)
    pair = encoder((self.texts, second))
    self.assertEqual(pair.shape, [4, 16])
    self.assertNotAllClose(pair, encoder(self.texts))

  def test_max_seq_length_truncates(self):
    inputs = tiny_encoder(max_seq_length=4).preprocess(self.texts)
    self.assertAllEqual(inputs["input_word_ids"][0], [2, 5, 6, 3])  # [CLS] the cat [SEP]

  def test_column_of_strings_is_accepted(self):
    encoder = tiny_encoder()
    self.assertAllClose(encoder(tf.reshape(self.texts, [4, 1])), encoder(self.texts))

  def test_l2_normalize_gives_unit_vectors(self):
    norms = tf.norm(tiny_encoder(l2_normalize=True)(self.texts), axis=1)
    self.assertAllClose(norms, tf.ones([4]), atol=1e-5)

  def test_config_round_trip(self):
    encoder = tiny_encoder(pooling="cls", l2_normalize=True, trainable=True)
    restored = text_encoder.TextEncoder.from_config(encoder.get_config())
    self.assertEqual(restored.get_config(), encoder.get_config())
    self.assertAllClose(restored(self.texts), encoder(self.texts))

  def test_make_text_encoder_follows_config(self):
    handles = tiny_handles()
    config = text_encoder.TextEncoderConfig(
      handles.preprocess, handles.encoder, trainable=True, pooling="cls", max_seq_length=9
    )
    encoder = text_encoder.make_text_encoder(config)
    self.assertTrue(encoder.trainable)
    self.assertEqual((encoder.pooling, encoder.max_seq_length), ("cls", 9))
    self.assertEqual(encoder.handles, (handles.preprocess, handles.encoder))
    self.assertEqual(encoder.text_encoder_config, config)
    self.assertEqual(text_encoder.TextEncoderConfig.of(dataclasses.asdict(config)), config)
    self.assertIs(text_encoder.TextEncoderConfig.of(config), config)


class LayerConfigTest(tf.test.TestCase):
  """`nest_flat_layer_config`: the configs saved up to 0.8 by the layers that hold a text encoder."""

  def test_flat_keys_are_nested_under_text(self):
    old = {"name": "encoder", "preprocess_handle": "/p", "encoder_handle": "/e", "trainable_encoder": True,
           "pooling": "cls", "max_seq_length": 16, "l2_normalize": True, "output_dim": 4}
    self.assertEqual(text_encoder.nest_flat_layer_config(old), {
      "name": "encoder", "output_dim": 4,
      "text": {"preprocess_handle": "/p", "encoder_handle": "/e", "trainable": True, "pooling": "cls",
               "max_seq_length": 16, "l2_normalize": True}})
    self.assertEqual(text_encoder.TextEncoderConfig.of(text_encoder.nest_flat_layer_config(old)["text"]),
                     text_encoder.TextEncoderConfig("/p", "/e", True, "cls", 16, True))

  def test_todays_config_is_returned_as_it_is(self):
    config = {"name": "encoder", "text": {"preprocess_handle": "/p", "encoder_handle": "/e"}, "dropout": 0.1}
    self.assertIs(text_encoder.nest_flat_layer_config(config), config)

  def test_both_forms_at_once_raise(self):
    with self.assertRaisesRegex(ValueError, r"not both; got `text` and \['pooling'\]"):
      text_encoder.nest_flat_layer_config({"text": {}, "pooling": "cls"})


def _classifier(encoder: text_encoder.TextEncoder) -> tf.keras.Model:
  texts = tf.keras.Input(shape=(), dtype=tf.string)
  logits = tf.keras.layers.Dense(2, kernel_initializer="zeros")(encoder(texts))
  model = tf.keras.Model(texts, logits)
  model.compile(
    tf.keras.optimizers.Adam(3e-3),
    tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
  )
  return model


class TrainingModeTest(tf.test.TestCase):
  """Frozen encoders keep their weights; fine-tuned ones learn end to end."""

  def setUp(self):
    super().setUp()
    # Class 1 iff the text mentions a dog; "happy"/"sad" are noise shared by both classes.
    self.texts = np.array(
      [
        "the cat sat",
        "a dog ran",
        "the cat is happy",
        "the dog is sad",
        "a cat ran",
        "the dog sat on the mat",
        "cats is sad",
        "a dog is happy",
      ]
    )
    self.labels = np.array([0, 1, 0, 1, 0, 1, 0, 1])

  def test_frozen_encoder_weights_do_not_change(self):
    encoder = tiny_encoder()
    model = _classifier(encoder)
    self.assertEmpty(encoder.trainable_weights)
    before = [w.numpy() for w in encoder.weights]
    model.fit(self.texts, self.labels, epochs=3, batch_size=8, verbose=0)
    for old, new in zip(before, encoder.weights, strict=True):
      self.assertAllEqual(old, new)
    self.assertNotAllClose(model.layers[-1].kernel, tf.zeros([16, 2]))

  def test_fine_tuning_updates_the_encoder_and_fits_the_task(self):
    tf.keras.utils.set_random_seed(0)  # Dropout, head init and fit's shuffling, whatever ran before.
    encoder = tiny_encoder(trainable=True)
    model = _classifier(encoder)
    self.assertLen(
      encoder.trainable_weights,
      len(
        bert_encoder.bert_weight_shapes(
          bert_encoder.BertArchitecture(
            vocab_size=len(VOCAB),
            hidden_size=16,
            num_layers=2,
            num_heads=2,
            intermediate_size=32,
            max_position_embeddings=32,
          )
        )
      ),
    )
    before = [w.numpy() for w in encoder.trainable_weights]
    history = model.fit(self.texts, self.labels, epochs=40, batch_size=8, verbose=0)
    changed = [
      not np.array_equal(old, new.numpy()) for old, new in zip(before, encoder.trainable_weights, strict=True)
    ]
    self.assertGreater(sum(changed), len(changed) // 2)
    # Better than the majority baseline (0.5) in inference mode too.
    accuracy = np.mean(np.argmax(model.predict(self.texts, verbose=0), axis=1) == self.labels)
    self.assertGreater(accuracy, 0.5)
    self.assertLess(history.history["loss"][-1], history.history["loss"][0])


class SaveLoadTest(tf.test.TestCase):
  def test_model_with_fine_tuned_encoder_round_trips(self):
    encoder = tiny_encoder(trainable=True)
    model = _classifier(encoder)
    texts = np.array(["the cat sat", "a dog ran"])
    untuned = model.predict(texts, verbose=0)
    for weight in encoder.trainable_weights:  # Stands in for fine-tuning: weights the handle does not have.
      weight.assign(weight * 1.5 + 0.01)
    model.layers[-1].kernel.assign(tf.ones([16, 2]))
    tuned = model.predict(texts, verbose=0)
    self.assertNotAllClose(tuned, untuned)
    path = os.path.join(self.create_tempdir().full_path, "model.keras")
    model.save(path)
    restored = tf.keras.models.load_model(path)
    self.assertIsInstance(restored.layers[1], text_encoder.TextEncoder)
    self.assertAllClose(restored.predict(texts, verbose=0), tuned, atol=1e-6)


_RELOAD_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf
    import rank4class  # noqa: F401
    import rank4class_encoders.text_encoder  # noqa: F401  Registers TextEncoder (and tensorflow_text's ops).
    model = tf.keras.models.load_model(sys.argv[1])
    texts = tf.constant([line for line in open(sys.argv[2], encoding="utf-8").read().split("\\n") if line])
    np.save(sys.argv[3], model(texts).numpy())
""")


class MiniLMTextEncoderTest(tf.test.TestCase):
  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    handles = minilm_handles()
    cls.encoder = text_encoder.TextEncoder(handles.preprocess, handles.encoder, max_seq_length=64)

  def test_paraphrases_are_closer_than_unrelated_sentences(self):
    anchors, paraphrases, unrelated = (tf.constant(list(column)) for column in zip(*PARAPHRASES, strict=True))
    anchor = tf.math.l2_normalize(self.encoder(anchors), axis=1)
    paraphrase = tf.math.l2_normalize(self.encoder(paraphrases), axis=1)
    other = tf.math.l2_normalize(self.encoder(unrelated), axis=1)
    close = tf.reduce_sum(anchor * paraphrase, axis=1).numpy()
    far = tf.reduce_sum(anchor * other, axis=1).numpy()
    self.assertEqual(self.encoder.output_dim, 384)
    self.assertTrue(np.all(close > far + 0.3), f"paraphrase cosines {close}, unrelated {far}")

  def test_saved_model_reloads_in_a_fresh_process_with_identical_outputs(self):
    texts = ["Share prices dropped steeply today.", "Café déjà vu, naïve!", "I got awful headaches."]
    inputs = tf.keras.Input(shape=(), dtype=tf.string)
    model = tf.keras.Model(
      inputs, tf.keras.layers.Dense(3, kernel_initializer="glorot_uniform")(self.encoder(inputs))
    )
    temp = self.create_tempdir().full_path
    model.save(os.path.join(temp, "model"))
    with open(os.path.join(temp, "texts.txt"), "w", encoding="utf-8") as f:
      f.write("\n".join(texts))
    subprocess.run(
      [
        sys.executable,
        "-c",
        _RELOAD_SCRIPT,
        os.path.join(temp, "model"),
        os.path.join(temp, "texts.txt"),
        os.path.join(temp, "outputs.npy"),
      ],
      check=True,
    )
    self.assertAllEqual(np.load(os.path.join(temp, "outputs.npy")), model(tf.constant(texts)).numpy())


if __name__ == "__main__":
  tf.test.main()


def _cosines(a, b) -> np.ndarray:
  a, b = np.asarray(a), np.asarray(b)
  return np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


class PrecisionTest(tf.test.TestCase, parameterized.TestCase):
  def setUp(self):
    super().setUp()
    self.texts = tf.constant(["The cat sat on the mat.", "A dog ran!", "the cats is happy", "sad"])

  @parameterized.parameters("mean", "cls")
  def test_bfloat16_vectors_stay_close_to_float32(self, pooling):
    full = tiny_encoder(pooling=pooling)(self.texts).numpy()
    encoder = tiny_encoder(pooling=pooling, precision="bfloat16")
    self.assertEqual(encoder.precision, "bfloat16")
    half = encoder(self.texts).numpy()
    self.assertEqual(half.dtype, np.float32)
    self.assertNotAllEqual(half, full)  # Another path ran.
    self.assertGreater(_cosines(half, full).min(), 0.999)

  def test_config_round_trip_keeps_precision(self):
    encoder = tiny_encoder(precision="bfloat16")
    config = encoder.get_config()
    self.assertEqual(config["precision"], "bfloat16")
    restored = text_encoder.TextEncoder.from_config(config)
    self.assertAllEqual(restored(self.texts), encoder(self.texts))
    # A layer saved before 0.9.0.
    legacy = {key: value for key, value in config.items() if key != "precision"}
    self.assertEqual(text_encoder.TextEncoder.from_config(legacy).precision, "float32")

  def test_bfloat16_refuses_fine_tuning(self):
    with self.assertRaisesRegex(ValueError, "frozen text encoder only"):
      tiny_encoder(precision="bfloat16", trainable=True)

  def test_bfloat16_refuses_an_encoder_it_did_not_convert(self):
    copy = os.path.join(self.create_tempdir().full_path, "my_encoder")
    tf.saved_model.save(hub.load(tiny_handles().encoder), copy)
    with self.assertRaisesRegex(ValueError,
                                "needs an encoder converted by rank4class.*use precision 'float32'"):
      text_encoder.TextEncoder(tiny_handles().preprocess, copy, precision="bfloat16")

  @parameterized.parameters(
    # (cpu has bfloat16, gpus, trainable, resolved)
    (True, [], False, "bfloat16"),
    (False, [], False, "float32"),
    (True, ["/gpu:0"], False, "float32"),
    (True, [], True, "float32"),
  )
  def test_auto_resolves_on_the_machine(self, cpu, gpus, trainable, want):
    with mock.patch.object(text_encoder, "cpu_has_bfloat16", return_value=cpu), \
        mock.patch.object(tf.config, "list_physical_devices", return_value=gpus):
      self.assertEqual(text_encoder.resolve_precision("auto", trainable), want)
    self.assertEqual(text_encoder.resolve_precision("float32", False), "float32")
    with self.assertRaisesRegex(ValueError, "precision"):
      text_encoder.resolve_precision("float16", False)

  def test_auto_keeps_float32_for_an_encoder_it_did_not_convert(self):
    copy = os.path.join(self.create_tempdir().full_path, "my_encoder")
    tf.saved_model.save(hub.load(tiny_handles().encoder), copy)
    with mock.patch.object(text_encoder, "cpu_has_bfloat16", return_value=True), \
        mock.patch.object(tf.config, "list_physical_devices", return_value=[]):
      self.assertEqual(text_encoder.resolve_precision("auto", False, tiny_handles().encoder), "bfloat16")
      self.assertEqual(text_encoder.resolve_precision("auto", False, copy), "float32")
      encoder = text_encoder.TextEncoder(tiny_handles().preprocess, copy, precision="auto")
    self.assertEqual(encoder.precision, "float32")

  def test_cpu_flags_are_read_from_cpuinfo(self):
    for flags, want in (("fpu avx512f avx512_bf16 sse", True), ("fpu amx_bf16", True),
                        ("fpu avx512f", False)):
      with mock.patch("builtins.open", mock.mock_open(read_data=f"processor : 0\nflags\t\t: {flags}\n")):
        self.assertEqual(text_encoder.cpu_has_bfloat16(), want, flags)
