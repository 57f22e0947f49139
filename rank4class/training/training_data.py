"""Rank4Class training data: the splits `rank4class_data.classification_data` reads, their text embedded by
the frozen encoder (and, for hybrid text, kept beside its embeddings). The reading names are re-exported, so
training code takes one module (`training_data.DataConfig`)."""

import dataclasses
import time

import numpy as np

from rank4class_data import classification_data
from rank4class_data.classification_data import (  # noqa: F401  Re-exported: training code uses `training_data.<name>`.
  AUTO,
  AUTO_TEXT,
  DATASETS,
  DENSE_INPUT,
  ELWC,
  EMBEDDING_INPUT,
  EMBEDDING_KEY,
  EXAMPLE,
  FINETUNE,
  FROZEN,
  HYBRID,
  IMAGE_DATASETS,
  IMAGE_INPUT,
  INPUT_FORMATS,
  ROWS,
  TEXT_AND_EMBEDDING_INPUT,
  TEXT_DATASETS,
  TEXT_INPUT,
  TEXT_KEY,
  TEXT_MODES,
  TFIDF,
  UNLISTED_CLASSES,
  ArraySplit,
  DataConfig,
  PreparedData,
  RecordSplit,
  Split,
  input_spec,
  read_data,
  read_split,
  resolved_input_format,
  split_texts,
)
from rank4class_data.rows import class_texts
from rank4class_encoders import embedding_cache, text_embeddings
from rank4class_encoders import text_encoder as text_encoder_lib


def text_handles(config: DataConfig) -> tuple[str, str]:
  """(preprocess, encoder) handles: `config.text_encoder_handles`, else MiniLM converted once and cached."""
  if config.text_encoder_handles is not None:
    return tuple(config.text_encoder_handles)
  handles = text_embeddings.minilm_handles(config.hub_cache_dir)
  return handles.preprocess, handles.encoder


def prepare_data(config: DataConfig) -> PreparedData:
  """Reads (`classification_data.read_data`) and for frozen text embeds the splits that `config` describes,
  with the class texts in class-id order when `config.class_texts` names a file (read before the data, so a
  bad file fails at once).

  Named data sets: the validation split is carved from the train split (stratified, `split_seed`), the
  official test split is kept for the final report. Files without `validation_files`: the same carving from
  the training files. TFRecords of `tf.Example`s are streamed from disk when validation files are given and no
  text needs embedding; otherwise (and for ELWC) the splits are read into memory.

  Raises:
    ValueError / FileNotFoundError / DataError: for missing data packages or files, bad records, or a bad
      class-texts file (one naming its row and field, or a class of the data without a text).
  """
  texts = class_texts.read_class_texts(config.class_texts) if config.class_texts else None
  data = embed_text(config, classification_data.read_data(config))
  if texts is not None:
    data.class_texts, unseen = class_texts.texts_in_class_order(texts, data.class_names, config.class_texts)
    if unseen:
      data.class_texts_note = class_texts.unseen_classes_note(config.class_texts, unseen)
  return data


def embed_text(config: DataConfig, data: PreparedData) -> PreparedData:
  """Raw-text data as the text mode trains on it: raw strings (tfidf; finetune with the encoder's handles),
  their mean-pooled frozen embeddings (frozen), or both (hybrid, auto), counting the texts embedded and the
  time taken; other data unchanged. Streamed record splits hold raw text only in the modes that need no
  embedding."""
  if data.input_kind != TEXT_INPUT:
    return data
  splits = [split for split in (data.train, data.validation, data.test) if split is not None]
  if not all(isinstance(split, ArraySplit) for split in splits):
    handles = text_handles(config) if config.text_mode == FINETUNE else None
    return dataclasses.replace(data, text_handles=handles)
  start, computed = time.perf_counter(), embedding_cache.computed_texts()
  raw = tuple(split.features for split in splits)
  kind, handles, embedded = _text_splits(config, [(split.features, split.labels) for split in splits])
  texts = sum(len(y) for _, y in embedded) if kind in (EMBEDDING_INPUT, TEXT_AND_EMBEDDING_INPUT) else 0
  arrays = [ArraySplit(x, y) for x, y in embedded]
  return dataclasses.replace(
      data, input_kind=kind, train=arrays[0], validation=arrays[1],
      test=arrays[2] if len(arrays) > 2 else None, text_handles=handles, embedded_texts=texts,
      computed_texts=embedding_cache.computed_texts() - computed if texts else 0,
      embedding_seconds=time.perf_counter() - start if texts else 0.0,
      raw_texts=(*raw, *[None] * (3 - len(raw))) if kind == EMBEDDING_INPUT else None)


def frozen_text_encoder(config: DataConfig, handles: tuple[str, str]) -> text_encoder_lib.TextEncoderConfig:
  """The frozen encoder that turns texts into the inputs of a "frozen" run (mean-pooled embeddings)."""
  return text_encoder_lib.TextEncoderConfig(preprocess_handle=handles[0], encoder_handle=handles[1],
                                            trainable=False, pooling="mean",
                                            max_seq_length=config.max_seq_length,
                                            precision=config.text_precision)


def _text_splits(config: DataConfig, splits: list[tuple[np.ndarray, np.ndarray]]):
  """(input kind, handles, splits) of text splits: raw strings to fine-tune on or to count n-grams of (tfidf:
  no handles), or (frozen) their mean-pooled embeddings, computed once (cached on disk and for the process),
  or (hybrid) both: a dict of each split's texts and their embeddings, row for row."""
  if config.text_mode == TFIDF:
    return TEXT_INPUT, None, splits
  handles = text_handles(config)
  if config.text_mode == FINETUNE:
    return TEXT_INPUT, handles, splits
  encoder = frozen_text_encoder(config, handles)
  embedded = [text_embeddings.embed_texts(list(x), encoder, config.embedding_cache_dir)
              for x, _ in splits]
  if config.text_mode in (HYBRID, AUTO_TEXT):
    return TEXT_AND_EMBEDDING_INPUT, handles, [
        ({TEXT_KEY: np.asarray(x, dtype=object), EMBEDDING_KEY: vectors}, y)
        for (x, y), vectors in zip(splits, embedded, strict=True)]
  return EMBEDDING_INPUT, handles, [(vectors, y) for (_, y), vectors in zip(splits, embedded, strict=True)]


def embedding_view(data: PreparedData) -> PreparedData:
  """Hybrid data as frozen-text data holds it: the embeddings as features, the raw texts in `raw_texts` (what
  the baselines read: TF-IDF + LR on the texts, LR on the embeddings); other data unchanged."""
  if data.input_kind != TEXT_AND_EMBEDDING_INPUT:
    return data
  splits = [None if split is None else ArraySplit(split.features[EMBEDDING_KEY], split.labels)
            for split in (data.train, data.validation, data.test)]
  raw = tuple(None if split is None else split.features[TEXT_KEY]
              for split in (data.train, data.validation, data.test))
  return dataclasses.replace(data, input_kind=EMBEDDING_INPUT, train=splits[0], validation=splits[1],
                             test=splits[2], raw_texts=raw)
