"""The pairwise models' data: train/validation/test `GroupedItems` of a real data set, texts or frozen
embeddings."""

from __future__ import annotations

import dataclasses
import os

from pairwise.margin import pairs
from pairwise.margin.configs import EncoderConfig, ItemDataConfig
from rank4class_data import datasets
from rank4class_data.datasets import drug_reviews, newsgroups
from rank4class_data.messages import say
from rank4class_data.ranking import grouped_rows
from rank4class_data.ranking.grouped_items import QUERY_PASSAGE_SEPARATOR, GroupedItems
from rank4class_data.records import elwc
from rank4class_data.rows import bad_rows
from rank4class_encoders import text_embeddings, text_encoder


def elwc_items(config: ItemDataConfig) -> GroupedItems:
  """The user's ELWC text lists as items, one group per list
  (`rank4class_data.records.elwc.read_text_lists`)."""
  lists = elwc.read_text_lists(config.data_files, config.label_key, config.text_key, config.query_key or None)
  texts, labels, group_ids, names = [], [], [], []
  for group, text_list in enumerate(lists):
    prefix = "" if text_list.query is None else text_list.query + QUERY_PASSAGE_SEPARATOR
    texts += [prefix + text for text in text_list.texts]
    labels += text_list.labels
    group_ids += [group] * len(text_list.texts)
    names.append(f"{os.path.basename(text_list.path)}:{text_list.row}")
  return GroupedItems(texts, labels, group_ids, group_names=names)


def row_items(config: ItemDataConfig) -> GroupedItems:
  """The user's grouped rows as items (`rank4class_data.ranking.grouped_rows`); under "skip" the bad rows are
  listed in `config.rejects_path`, and a line on stderr says how many rows and groups were read."""
  policy = bad_rows.BadRowPolicy(config.bad_rows, config.max_bad_rows)
  rows = grouped_rows.read_grouped_rows(grouped_rows.GroupedRowsConfig(
      config.data_files, config.group_column, config.label_column, text_column=config.text_column,
      label_order=config.label_order, input_format=config.rows_format, bad_rows=policy))
  rejects = config.rejects_path if policy.policy == bad_rows.SKIP else None
  grouped_rows.write_rejects(rows, rejects)
  say(f"Rows: {rows.summary(config.data_files, rejects)}.")
  return rows.to_grouped_items()


def newsgroups_config(config: ItemDataConfig, split: str) -> newsgroups.NewsgroupsQrelsConfig:
  """The graded 20 Newsgroups draw of `split` ("train": `num_queries`, seed `split_seed`; "test":
  `num_test_queries`, seed `split_seed + 1`) with `config`'s list composition and word counts."""
  grade0, grade1, grade2 = config.passages_per_grade
  train = split == "train"
  return newsgroups.NewsgroupsQrelsConfig(
      split=split, num_queries=config.num_queries if train else config.num_test_queries,
      list_size=grade0 + grade1 + grade2, num_grade2=grade2, num_grade1=grade1,
      query_num_words=config.query_words, doc_num_words=config.passage_words,
      seed=config.split_seed if train else config.split_seed + 1)


def load_ranking_data(config: ItemDataConfig) -> dict[str, GroupedItems]:
  """Train/validation/test `GroupedItems` of a real data set, split by group (never by pair)."""
  if config.dataset in ("drug_reviews", "elwc", "rows"):
    if config.dataset == "drug_reviews":
      items = drug_reviews.drug_review_items(config.pivot, config.label,
                                             max_items_per_group=config.max_items_per_group,
                                             seed=config.split_seed)
    else:
      items = elwc_items(config) if config.dataset == "elwc" else row_items(config)
    split = pairs.split_by_group(items.group_ids, config.validation_fraction, config.test_fraction,
                                 config.split_seed)
    return {"train": items.subset(split.train), "validation": items.subset(split.validation),
            "test": items.subset(split.test)}
  sets = {}
  for name in ("train", "test"):
    data = datasets.load_text_classification("20newsgroups", name)
    qrels = newsgroups.build_newsgroups_qrels(newsgroups_config(config, name), data.texts, data.labels,
                                              data.class_names)
    sets[name] = newsgroups.query_passage_items(qrels,
                                                first_group_id=0 if name == "train" else config.num_queries)
  split = pairs.split_by_group(sets["train"].group_ids, config.validation_fraction, 0.0, config.split_seed)
  return {"train": sets["train"].subset(split.train), "validation": sets["train"].subset(split.validation),
          "test": sets["test"]}


def text_encoder_config(
  config: EncoderConfig, trainable: bool | None = None
) -> text_encoder.TextEncoderConfig:
  """The `rank4class_encoders` config of a "text_encoder" `EncoderConfig` (`trainable` overrides its own)."""
  return text_encoder.TextEncoderConfig(
      preprocess_handle=config.preprocess_handle, encoder_handle=config.encoder_handle,
      trainable=config.trainable if trainable is None else trainable, pooling=config.pooling,
      max_seq_length=config.max_seq_length)


def prepare_items(config: EncoderConfig, splits: dict[str, GroupedItems]) -> dict[str, GroupedItems]:
  """Replaces texts by frozen embeddings when `config.precompute`; otherwise returns `splits` unchanged.

  The distinct texts of all splits are embedded together in sorted order (`text_embeddings.embed_texts`:
  cached on disk and per process), so every split seed hits the same cache entry.
  """
  if not config.precompute:
    return splits
  unique = sorted({t for items in splits.values() for t in items.features})
  embeddings = text_embeddings.embed_texts(unique, text_encoder_config(config, trainable=False),
                                           cache_dir=config.embedding_cache_dir)
  row = {t: i for i, t in enumerate(unique)}
  return {name: dataclasses.replace(items, features=embeddings[[row[t] for t in items.features]])
          for name, items in splits.items()}
