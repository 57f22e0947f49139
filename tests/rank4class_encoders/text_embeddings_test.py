"""Tests for rank4class_encoders.text_embeddings: handles, and frozen embeddings through the shared cache."""

import os
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub

from rank4class_encoders import (
  bert_conversion,
  bert_encoder,
  bert_weights,
  embedding_cache,
  text_embeddings,
  text_encoder,
)
from tests.rank4class_encoders.tiny_bert import VOCAB, tiny_handles

TEXTS = ["the cat sat on a mat .", "a dog ran", "the dog is happy !", "cats", ""]


def tiny_config(**kwargs) -> text_encoder.TextEncoderConfig:
  handles = tiny_handles()
  return text_encoder.TextEncoderConfig(handles.preprocess, handles.encoder,
                                        **{"max_seq_length": 16, **kwargs})


def _cached_texts(directory: str) -> int:
  """Rows (texts) in the embedding store of `directory`, 0 when there is none."""
  if not os.path.exists(os.path.join(directory, embedding_cache.STORE_FILE)):
    return 0
  return embedding_cache.open_store(directory).stats()["rows"]


class EmbedTextsTest(tf.test.TestCase):
  def test_equals_the_frozen_encoder(self):
    got = text_embeddings.embed_texts(TEXTS, tiny_config(), self.create_tempdir().full_path)
    want = text_encoder.make_text_encoder(tiny_config())(tf.constant(TEXTS), training=False)
    self.assertEqual(got.dtype, np.float32)
    self.assertEqual(got.shape, (len(TEXTS), 16))
    self.assertAllClose(got, want, atol=1e-5)

  def test_trainable_config_is_embedded_frozen(self):
    # Dropout (rate 0.1 in the tiny BERT) would make two trainable passes differ; frozen ones are equal.
    cache = self.create_tempdir().full_path
    frozen = text_embeddings.embed_texts(TEXTS, tiny_config(), cache)
    with mock.patch.object(embedding_cache, "compute_embeddings", side_effect=AssertionError("recomputed")):
      tuned = text_embeddings.embed_texts(TEXTS, tiny_config(trainable=True), cache)
    self.assertAllEqual(tuned, frozen)
    self.assertEqual(_cached_texts(cache), len(TEXTS))

  def test_new_process_reads_the_disk_cache(self):
    cache = self.create_tempdir().full_path
    first = np.array(text_embeddings.embed_texts(TEXTS, tiny_config(), cache))
    self.assertEqual(_cached_texts(cache), len(TEXTS))
    embedding_cache.open_store(cache).close()  # As in a new process: the store file is opened again.
    with (
      mock.patch.object(text_encoder, "make_text_encoder", side_effect=AssertionError("built")),
      mock.patch.object(embedding_cache, "compute_embeddings", side_effect=AssertionError("recomputed")),
    ):
      second = text_embeddings.embed_texts(TEXTS, tiny_config(), cache)
    self.assertAllEqual(second, first)

  def test_other_orders_hit_and_other_settings_are_embedded_anew(self):
    cache = self.create_tempdir().full_path
    first = text_embeddings.embed_texts(TEXTS, tiny_config(), cache)
    with mock.patch.object(embedding_cache, "compute_embeddings", side_effect=AssertionError("recomputed")):
      reordered = text_embeddings.embed_texts(TEXTS[::-1], tiny_config(), cache)
    self.assertAllEqual(reordered, first[::-1])
    cls = text_embeddings.embed_texts(TEXTS, tiny_config(pooling="cls"), cache)
    self.assertNotAllClose(cls, first)
    self.assertEqual(_cached_texts(cache), 2 * len(TEXTS))

  def test_default_cache_dir_is_under_the_home_folder(self):
    home = self.create_tempdir().full_path
    with mock.patch.dict(os.environ, {"HOME": home}):
      text_embeddings.embed_texts(TEXTS[:2], tiny_config())
    self.assertEqual(_cached_texts(os.path.join(home, ".cache", "rank4class", "embeddings")), 2)

  def test_non_string_text_raises(self):
    with self.assertRaisesRegex(ValueError, "row 1 is int"):
      text_embeddings.embed_texts(["a cat", 3], tiny_config(), self.create_tempdir().full_path)


class HandlesTest(tf.test.TestCase):
  """The MiniLM package is replaced by a tiny Hugging Face BERT directory with the same files."""

  def setUp(self):
    super().setUp()
    self.checkpoint = self.create_tempdir().full_path
    self.architecture = bert_encoder.BertArchitecture(
      vocab_size=len(VOCAB), hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16,
      max_position_embeddings=32,
    )
    bert_weights.write_hugging_face_bert(
      self.checkpoint, self.architecture, bert_weights.random_bert_weights(self.architecture, seed=1), VOCAB
    )
    patcher = mock.patch.object(bert_conversion, "minilm_checkpoint_dir", return_value=self.checkpoint)
    patcher.start()
    self.addCleanup(patcher.stop)

  def test_minilm_handles_are_converted_once_into_the_cache(self):
    cache = self.create_tempdir().full_path
    handles = text_embeddings.minilm_handles(cache)
    key = bert_conversion.conversion_cache_key(self.checkpoint)
    self.assertEqual(handles.encoder, os.path.join(cache, key, bert_conversion.ENCODER_SUBDIR))
    with mock.patch.object(bert_conversion, "convert_bert_checkpoint", side_effect=AssertionError("again")):
      self.assertEqual(text_embeddings.minilm_handles(cache), handles)
    # "the cat" -> [CLS]=2, the=5, cat=6, [SEP]=3 with MiniLM's (here: the tiny) vocabulary.
    packed = hub.load(handles.preprocess)(tf.constant(["The cat"]))
    self.assertAllEqual(packed["input_word_ids"][0, :5], [2, 5, 6, 3, 0])

  def test_random_bert_handles_use_the_minilm_vocabulary(self):
    export_dir = self.create_tempdir().full_path
    handles = text_embeddings.random_bert_handles(export_dir)
    self.assertEqual(handles.preprocess, os.path.join(export_dir, bert_conversion.PREPROCESS_SUBDIR))
    packed = hub.load(handles.preprocess)(tf.constant(["a dog sat"]))
    self.assertAllEqual(packed["input_word_ids"][0, :6], [2, 12, 7, 8, 3, 0])
    encoder = text_encoder.TextEncoder(handles.preprocess, handles.encoder, max_seq_length=8)
    self.assertEqual(encoder.output_dim, 32)  # export_random_bert's default width, not the checkpoint's 8.


if __name__ == "__main__":
  tf.test.main()
