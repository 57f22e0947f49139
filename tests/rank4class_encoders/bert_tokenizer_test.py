"""Tests for rank4class_encoders.bert_tokenizer: truncation, packing, normalization, WordPiece vs
transformers."""

import os

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
from absl.testing import parameterized

from rank4class_encoders import bert_conversion, bert_tokenizer
from tests.rank4class_encoders.tiny_bert import minilm_handles, real_sentences


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
    got = bert_tokenizer.longest_first_lengths(
      [tf.constant([n1], tf.int64), tf.constant([n2], tf.int64)], tf.constant(budget, tf.int64)
    )
    self.assertEqual([int(got[0][0]), int(got[1][0])], [want1, want2])

  def test_single_segment_is_cut_to_budget(self):
    got = bert_tokenizer.longest_first_lengths([tf.constant([12, 3], tf.int64)], tf.constant(10, tf.int64))
    self.assertAllEqual(got[0], [10, 3])

  def test_three_segments_raise(self):
    with self.assertRaisesRegex(ValueError, "one or two segments"):
      bert_tokenizer.longest_first_lengths([tf.constant([1], tf.int64)] * 3, tf.constant(5, tf.int64))


class PackBertInputsTest(tf.test.TestCase):
  def test_single_segment_is_wrapped_and_padded(self):
    tokens = tf.ragged.constant([[[5], [6, 7]], [[8]]], dtype=tf.int32)  # [batch, (words), (pieces)]
    packed = bert_tokenizer.pack_bert_inputs([tokens], 6, cls_id=1, sep_id=2, pad_id=0)
    self.assertAllEqual(packed["input_word_ids"], [[1, 5, 6, 7, 2, 0], [1, 8, 2, 0, 0, 0]])
    self.assertAllEqual(packed["input_mask"], [[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]])
    self.assertAllEqual(packed["input_type_ids"], tf.zeros([2, 6], tf.int32))

  def test_pair_is_truncated_longest_first_with_type_ids(self):
    first = tf.ragged.constant([[5, 6, 7, 8], [5]], dtype=tf.int32)
    second = tf.ragged.constant([[9], [9, 10, 11, 12, 13]], dtype=tf.int32)
    # seq_length 7 leaves a budget of 4: (4, 1) -> (3, 1); (1, 5) -> (1, 3).
    packed = bert_tokenizer.pack_bert_inputs([first, second], 7, cls_id=1, sep_id=2, pad_id=0)
    self.assertAllEqual(packed["input_word_ids"], [[1, 5, 6, 7, 2, 9, 2], [1, 5, 2, 9, 10, 11, 2]])
    self.assertAllEqual(packed["input_type_ids"], [[0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 1, 1]])
    self.assertAllEqual(packed["input_mask"], tf.ones([2, 7], tf.int32))


class NormalizeBertTextTest(tf.test.TestCase):
  def test_uncased_normalization_matches_hugging_face_rules(self):
    got = bert_tokenizer.normalize_bert_text(
      tf.constant(["Café ΣΟΦΟΣ Straße…\u200b!\u00a0x\x07"]), lower_case=True, strip_accents=True
    )
    # Accents stripped, final sigma kept as "σ", "ß" and "…" kept (no NFKC), zero-width and control
    # characters removed, no-break space made a space.
    self.assertEqual(got[0].numpy().decode("utf-8"), "cafe σοφοσ straße…! x")

  def test_cased_keeps_case_and_accents(self):
    got = bert_tokenizer.normalize_bert_text(tf.constant(["Café"]), lower_case=False, strip_accents=False)
    self.assertEqual(got[0].numpy().decode("utf-8"), "Café")


class MiniLMTokenizationTest(tf.test.TestCase, parameterized.TestCase):
  """The converted preprocessor against the `transformers` fast (Rust `tokenizers`) WordPiece tokenizer."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    import transformers  # pylint: disable=g-import-not-at-top

    cls.reference = transformers.AutoTokenizer.from_pretrained(bert_conversion.minilm_checkpoint_dir())
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

    vocab_path = os.path.join(bert_conversion.minilm_checkpoint_dir(), "vocab.txt")
    reference = transformers.BertTokenizerFast(
      vocab_file=vocab_path, do_lower_case=lower_case, strip_accents=strip_accents
    )
    settings = bert_tokenizer.TokenizerSettings(lower_case=lower_case, strip_accents=strip_accents)
    preprocessor = bert_tokenizer.build_preprocess_module(vocab_path, settings, 64)
    texts = list(real_sentences())
    want = reference(texts, truncation=True, max_length=64, padding="max_length", return_tensors="np")
    # Not saved, so the functions are called through their attributes.
    tokens = preprocessor.tokenize.__call__(tf.constant(texts))
    got = preprocessor.bert_pack_inputs.__call__([tokens], seq_length=64)
    self.assertAllEqual(got["input_word_ids"], want["input_ids"])


class SpecialTokenIdsTest(tf.test.TestCase):
  def test_ids_are_line_numbers_and_mask_is_optional(self):
    settings = bert_tokenizer.TokenizerSettings()
    ids = bert_tokenizer.special_token_ids(["[UNK]", "[SEP]", "[PAD]", "[CLS]", "x"], settings, "vocab.txt")
    self.assertEqual(ids, {"cls_token": 3, "sep_token": 1, "pad_token": 2, "unk_token": 0})

  def test_duplicate_word_piece_raises(self):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "a"]
    with self.assertRaisesRegex(ValueError, r"vocab.txt has duplicate word pieces, e.g. \['a'\]"):
      bert_tokenizer.special_token_ids(vocab, bert_tokenizer.TokenizerSettings(), "vocab.txt")


if __name__ == "__main__":
  tf.test.main()
