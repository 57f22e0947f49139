"""Tests for rank4class_data.datasets.newsgroups: grades, list composition, determinism, the split and the
item view."""

import collections

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_data.datasets import newsgroups
from rank4class_data.ranking.grouped_items import QUERY_PASSAGE_SEPARATOR

CLASS_NAMES = ["comp.graphics", "comp.windows.x", "misc.forsale", "rec.autos", "sci.med", "sci.space"]


def _synthetic_texts(docs_per_class: int = 12):
  texts, labels = [], []
  for label, name in enumerate(CLASS_NAMES):
    for i in range(docs_per_class):
      texts.append(f"re {name.replace('.', ' ')} topic {i} in article someone writes " + " ".join(
          f"word{(label * 7 + i + k) % 50}" for k in range(30)))
      labels.append(label)
  return texts, np.array(labels)


SMALL = newsgroups.NewsgroupsQrelsConfig(num_queries=6, list_size=8, num_grade2=3, num_grade1=2,
                                         query_num_words=6, doc_num_words=12, min_doc_words=5, seed=3)


class GradesTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(
      ("sci.med", "sci.med", 2), ("sci.med", "sci.space", 1), ("alt.atheism", "talk.religion.misc", 1),
      ("talk.politics.guns", "talk.religion.misc", 0), ("misc.forsale", "rec.autos", 0))
  def test_relevance_grade(self, query_group, doc_group, grade):
    self.assertEqual(newsgroups.relevance_grade(query_group, doc_group), grade)

  def test_hierarchies_cover_the_twenty_newsgroups(self):
    groups = [g for groups in newsgroups.HIERARCHIES.values() for g in groups]
    self.assertLen(set(groups), 20)

  def test_unknown_newsgroup_raises(self):
    with self.assertRaisesRegex(ValueError, r"`newsgroup` must be one of \[.*\], got 'alt.tv'"):
      newsgroups.hierarchy_of("alt.tv")

  def test_subject_words_cut_before_in_article(self):
    words = "re ide vs scsi in article foo writes".split()
    self.assertEqual(newsgroups.subject_words(words, 10), ["ide", "vs", "scsi"])
    self.assertEqual(newsgroups.subject_words("a b c d".split(), 3), ["a", "b", "c"])


class BuildTest(tf.test.TestCase):

  def _build(self, config=SMALL):
    texts, labels = _synthetic_texts()
    return newsgroups.build_newsgroups_qrels(config, texts, labels, CLASS_NAMES), texts, labels

  def test_grades_and_list_composition(self):
    qrels, _, labels = self._build()
    corpus = qrels.corpus
    self.assertLen(corpus.query_ids, 6)
    for q, query_id in enumerate(corpus.query_ids):
      query_group = qrels.query_newsgroups[query_id]
      rows = np.nonzero(corpus.judgment_query == q)[0]
      self.assertLen(rows, 8)
      for r in rows:
        doc_group = CLASS_NAMES[labels[int(corpus.doc_ids[corpus.judgment_doc[r]].split("-")[1])]]
        self.assertEqual(corpus.relevance[r], newsgroups.relevance_grade(query_group, doc_group))
      counts = collections.Counter(corpus.relevance[rows].tolist())
      has_sibling = len([g for g in CLASS_NAMES
                         if newsgroups.hierarchy_of(g) == newsgroups.hierarchy_of(query_group)]) > 1
      self.assertEqual(counts[2.0], 3)
      self.assertEqual(counts[1.0], 2 if has_sibling else 0)
      self.assertEqual(counts[0.0], 3 if has_sibling else 5)

  def test_queries_round_robin_and_never_candidates(self):
    qrels, _, _ = self._build()
    self.assertEqual(sorted(qrels.query_newsgroups.values()), sorted(CLASS_NAMES))
    self.assertRegex(qrels.corpus.query_texts[0], r"^comp graphics topic \d+$")  # Cut before "in article".
    self.assertLen(qrels.corpus.doc_fields["text"][0].split(), 12)
    self.assertRegex(qrels.corpus.doc_fields["subject"][0], r"^\w+ \w+ topic \d+$")
    self.assertEmpty(set(qrels.query_source_ids.values()) & set(qrels.corpus.doc_ids))

  def test_deterministic_and_seed_dependent(self):
    first, _, _ = self._build()
    second, _, _ = self._build()
    self.assertEqual(first.corpus.doc_ids, second.corpus.doc_ids)
    self.assertAllEqual(first.corpus.judgment_doc, second.corpus.judgment_doc)
    self.assertEqual(first.heldout_query_ids, second.heldout_query_ids)
    other, _, _ = self._build(newsgroups.NewsgroupsQrelsConfig(**{**SMALL.__dict__, "seed": 4}))
    self.assertNotEqual(list(first.corpus.judgment_doc), list(other.corpus.judgment_doc))

  def test_split_is_disjoint_and_complete(self):
    qrels, _, _ = self._build()
    self.assertEqual(sorted(qrels.train_query_ids + qrels.heldout_query_ids), qrels.corpus.query_ids)
    self.assertLen(qrels.heldout_query_ids, 3)

  def test_too_few_documents_raises(self):
    config = newsgroups.NewsgroupsQrelsConfig(**{**SMALL.__dict__, "num_grade2": 12, "list_size": 20})
    with self.assertRaisesRegex(ValueError, "needs 12 grade-2 documents"):
      self._build(config)

  def test_unknown_class_name_raises(self):
    with self.assertRaisesRegex(ValueError, "`newsgroup` must be one of"):
      newsgroups.build_newsgroups_qrels(SMALL, ["a b c"], [0], ["news.misc"])

  def test_config_validation(self):
    for kwargs, message in (({"num_queries": 1}, "num_queries"),
                            ({"num_grade2": 20, "num_grade1": 20}, "exceeds"),
                            ({"heldout_fraction": 1.0}, "heldout_fraction")):
      with self.assertRaisesRegex(ValueError, message):
        newsgroups.NewsgroupsQrelsConfig(**kwargs)

  def test_real_twenty_newsgroups_set(self):
    qrels = newsgroups.build_newsgroups_qrels(newsgroups.NewsgroupsQrelsConfig(num_queries=20))
    self.assertLen(set(qrels.query_newsgroups.values()), 20)
    self.assertLen(qrels.corpus.relevance, 20 * 30)
    self.assertEqual(collections.Counter(qrels.corpus.relevance.tolist())[2.0], 200)


class QueryPassageItemsTest(tf.test.TestCase):

  def test_items_are_the_qrels_judgments_as_query_bar_passage(self):
    texts, labels = _synthetic_texts()
    qrels = newsgroups.build_newsgroups_qrels(SMALL, texts, labels, CLASS_NAMES)
    items = newsgroups.query_passage_items(qrels, first_group_id=100)
    corpus = qrels.corpus
    self.assertLen(items, len(corpus.relevance))
    self.assertAllEqual(items.labels, corpus.relevance)
    self.assertAllEqual(items.class_labels, corpus.relevance.astype(np.int64))
    self.assertAllEqual(items.group_ids, 100 + corpus.judgment_query)
    self.assertEqual(items.group_names, corpus.query_texts)
    for row in (0, len(items) - 1):
      query, passage = items.features[row].split(QUERY_PASSAGE_SEPARATOR)
      self.assertEqual(query, corpus.query_texts[corpus.judgment_query[row]])
      self.assertEqual(passage, corpus.doc_fields[newsgroups.TEXT_FIELD][corpus.judgment_doc[row]])


if __name__ == "__main__":
  tf.test.main()
