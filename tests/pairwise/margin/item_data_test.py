"""Tests for pairwise.margin.item_data: group-wise splits of the real data sets and frozen-embedding
preparation."""

import numpy as np
import tensorflow as tf

from pairwise.margin import configs, item_data, pairwise_train
from rank4class_data.ranking.grouped_items import QUERY_PASSAGE_SEPARATOR
from rank4class_encoders import bert_conversion
from tests.pairwise import toy_items


class LoadRankingDataTest(tf.test.TestCase):

  def test_drug_reviews_split_by_group(self):
    splits = item_data.load_ranking_data(configs.ItemDataConfig(dataset="drug_reviews", pivot="drug_name",
                                                                split_seed=3))
    groups = {name: set(items.group_ids) for name, items in splits.items()}
    self.assertEmpty(groups["train"] & groups["test"])
    self.assertEmpty(groups["train"] & groups["validation"])
    self.assertEqual(sum(len(items) for items in splits.values()), 979)

  def test_newsgroups_queries_are_graded_query_passage_lists(self):
    config = configs.ItemDataConfig(dataset="newsgroups_queries", num_queries=20, num_test_queries=10,
                                    passages_per_grade=(3, 2, 1), validation_fraction=0.2, split_seed=1)
    splits = item_data.load_ranking_data(config)
    train_groups = set(splits["train"].group_ids) | set(splits["validation"].group_ids)
    self.assertEqual(train_groups, set(range(20)))
    self.assertEmpty(set(splits["train"].group_ids) & set(splits["validation"].group_ids))
    self.assertEqual(set(splits["test"].group_ids), set(range(20, 30)))
    self.assertLen(splits["test"], 10 * 6)
    # Per query: 1 passage of grade 2, 2 of grade 1 (grade 0 instead for misc.forsale), the rest grade 0.
    for items in splits.values():
      for group in np.unique(items.group_ids):
        rows = np.flatnonzero(items.group_ids == group)
        self.assertEqual(np.sum(items.labels[rows] == 2), 1)
        queries = {items.features[r].split(QUERY_PASSAGE_SEPARATOR)[0] for r in rows}
        self.assertLen(queries, 1)
        self.assertLessEqual(len(queries.pop().split()), config.query_words)

  def test_newsgroups_config_maps_grades_and_seeds(self):
    config = configs.ItemDataConfig(passages_per_grade=(7, 6, 5), query_words=4,
                                    passage_words=9, split_seed=2)
    train, test = item_data.newsgroups_config(config, "train"), item_data.newsgroups_config(config, "test")
    self.assertEqual((train.list_size, train.num_grade2, train.num_grade1), (18, 5, 6))
    self.assertEqual((train.query_num_words, train.doc_num_words), (4, 9))
    self.assertEqual((train.seed, test.seed), (2, 3))
    self.assertEqual((train.num_queries, test.num_queries), (config.num_queries, config.num_test_queries))


class PrepareItemsTest(tf.test.TestCase):

  def test_frozen_embeddings_equal_the_text_encoder(self):
    vocab = (
      ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + toy_items.GOOD + toy_items.MID + toy_items.BAD + toy_items.FILLER
    )
    handles = bert_conversion.export_random_bert(self.create_tempdir().full_path, vocab, hidden_size=16,
                                                 num_layers=1, num_heads=2, intermediate_size=32)
    config = configs.EncoderConfig(preprocess_handle=handles.preprocess, encoder_handle=handles.encoder,
                                   max_seq_length=8, trainable=False, precompute=True,
                                   embedding_cache_dir=self.create_tempdir().full_path)
    items = toy_items.text_items(4, 6, 0)
    prepared = item_data.prepare_items(config, {"train": items})["train"]
    self.assertEqual(prepared.features.shape, (24, 16))
    self.assertAllEqual(prepared.labels, items.labels)
    encoder = pairwise_train.make_encoder(configs.EncoderConfig(**{**config.__dict__, "precompute": False}))
    self.assertAllClose(prepared.features, encoder(tf.constant(items.features)), atol=1e-5)

  def test_without_precompute_items_are_unchanged(self):
    items = toy_items.text_items(2, 3, 0)
    splits = {"train": items}
    self.assertIs(item_data.prepare_items(configs.EncoderConfig(kind="hashed_bow"), splits), splits)


if __name__ == "__main__":
  tf.test.main()
