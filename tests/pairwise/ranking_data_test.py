"""Tests for pairwise.ranking_data: the CSV layout (LOINC), rank conversion, LibSVM and ELWC round trips."""

import os
import pathlib

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from sklearn import datasets as sk_datasets
from tensorflow_serving.apis import input_pb2

from pairwise import ranking_data
from rank4class_data.tf_ranking import tfr
from rank4class_data.validation import DataError

LOINC_DIR = pathlib.Path(__file__).resolve().parents[3] / "shared" / "loinc"


def _write_layout(directory, docs, queries, judgments):
  for name, text in ((ranking_data.DOCS_FILE, docs), (ranking_data.QUERIES_FILE, queries),
                     (ranking_data.QUERY_DOC_FILE, judgments)):
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      f.write(text)


DOCS = "doc,title,kind\nd1,apple pie,food\nd2,apple computer,tech\nd3,banana,food\n"
QUERIES = "qid,text\nq1,apple\nq2,fruit\n"
JUDGMENTS = "qid,doc,rank\nq1,d1,2\nq1,d2,1\nq1,d3,3\nq2,d3,1\nq2,d1,2\n"
LAYOUT = ranking_data.CsvLayout(doc_id_column="doc", query_id_column="qid", query_text_column="text",
                                label_column="rank", label_kind="rank")


def _lists():
  return ranking_data.FeatureLists(
      features=np.array([[1.0, 0.0, 0.5], [0.0, 2.0, 0.0], [0.25, 0.0, -1.0], [0.0, 0.0, 0.0]]),
      relevance=np.array([2.0, 0.0, 1.0, 0.0]), list_offsets=np.array([0, 2, 4]), query_ids=["a", "b"],
      doc_ids=["x1", "x2", "x3", "x4"], feature_names=["bm25(text)", "f two", "system=Ser/Plas"],
      query_texts=["first query", "second query"])


class RankConversionTest(tf.test.TestCase):

  def test_rank_one_gets_the_highest_relevance_per_query(self):
    relevance = ranking_data.rank_to_relevance([2, 1, 3, 1, 2], [0, 0, 0, 1, 1])
    self.assertAllEqual(relevance, [1.0, 2.0, 0.0, 1.0, 0.0])

  def test_ties_and_gaps(self):
    # Ranks 1, 1, 5: max 5 -> relevance 4, 4, 0; back to competition ranks 1, 1, 3.
    relevance = ranking_data.rank_to_relevance([1, 1, 5], [0, 0, 0])
    self.assertAllEqual(relevance, [4.0, 4.0, 0.0])
    self.assertAllEqual(ranking_data.relevance_to_rank(relevance, [0, 0, 0]), [1, 1, 3])

  def test_rank_below_one_raises(self):
    with self.assertRaisesRegex(ValueError, "Ranks must be finite and >= 1"):
      ranking_data.rank_to_relevance([0, 1], [0, 0])


class CorpusCsvTest(tf.test.TestCase, parameterized.TestCase):

  def test_loinc_sample_reads_with_rank_one_best(self):
    if not LOINC_DIR.is_dir():
      self.skipTest(f"LOINC sample not found at {LOINC_DIR} (the shared/loinc folder beside the repository).")
    corpus = ranking_data.read_corpus_csv(str(LOINC_DIR))
    self.assertLen(corpus.doc_ids, 67)
    self.assertEqual(corpus.query_texts, ["GLUCOSE IN BLOOD", "BILIRUBIN IN PLASMA", "WHITE BLOOD CELLS COUNT"])
    self.assertEqual(corpus.label_kind, "rank")
    first = np.nonzero(corpus.judgment_query == 0)[0]
    self.assertLen(first, 67)
    # query_doc.csv lists query 1's rank 1 first (1988-5): it gets the top relevance 66.
    self.assertEqual(corpus.doc_ids[corpus.judgment_doc[first[0]]], "1988-5")
    self.assertEqual(corpus.relevance[first[0]], 66.0)
    self.assertEqual(corpus.relevance[first].min(), 0.0)
    self.assertIn("system", corpus.doc_fields)

  def test_round_trip_with_ranks_and_with_relevance(self):
    directory = self.create_tempdir().full_path
    _write_layout(directory, DOCS, QUERIES, JUDGMENTS)
    corpus = ranking_data.read_corpus_csv(directory, LAYOUT)
    self.assertAllEqual(corpus.relevance, [1.0, 2.0, 0.0, 1.0, 0.0])
    for layout in (LAYOUT, ranking_data.CsvLayout("doc", "qid", "text", "grade", "relevance")):
      out = self.create_tempdir().full_path
      ranking_data.write_corpus_csv(corpus, out, layout)
      again = ranking_data.read_corpus_csv(out, layout)
      self.assertEqual(again.doc_ids, corpus.doc_ids)
      self.assertEqual(again.doc_fields, corpus.doc_fields)
      self.assertEqual(again.query_texts, corpus.query_texts)
      self.assertAllEqual(again.relevance, corpus.relevance)
    self.assertEqual(sorted(os.listdir(out)), ["docs.csv", "queries.csv", "query_doc.csv"])

  @parameterized.named_parameters(
      ("unknown_doc", DOCS, QUERIES, JUDGMENTS + "q2,d9,3\n", r"query_doc.csv, row 6.*unknown document id 'd9'"),
      ("unknown_query", DOCS, QUERIES, JUDGMENTS + "q7,d1,3\n", r"row 6.*unknown query id 'q7'"),
      ("non_numeric_rank", DOCS, QUERIES, "qid,doc,rank\nq1,d1,first\n", r"row 1.*field 'rank': bad rank 'first'"),
      ("rank_zero", DOCS, QUERIES, "qid,doc,rank\nq1,d1,0\n", r"expected a rank >= 1"),
      ("duplicate_judgment", DOCS, QUERIES, "qid,doc,rank\nq1,d1,1\nq1,d1,2\n", "judges document 'd1' again"),
      ("duplicate_doc", DOCS + "d1,again,food\n", QUERIES, JUDGMENTS, "duplicate document id 'd1'"),
      ("empty_query", DOCS, "qid,text\nq1,\n", "qid,doc,rank\n", "empty query text"),
      ("missing_column", DOCS, QUERIES, "qid,doc\nq1,d1\n", r"missing column\(s\) \['rank'\]"),
  )
  def test_bad_input_raises_naming_file_row_and_field(self, docs, queries, judgments, message):
    directory = self.create_tempdir().full_path
    _write_layout(directory, docs, queries, judgments)
    with self.assertRaisesRegex(DataError, message):
      ranking_data.read_corpus_csv(directory, LAYOUT)

  def test_missing_file_raises(self):
    with self.assertRaisesRegex(FileNotFoundError, "docs.csv"):
      ranking_data.read_corpus_csv(self.create_tempdir().full_path, LAYOUT)

  def test_select_queries_and_documents_only(self):
    directory = self.create_tempdir().full_path
    _write_layout(directory, DOCS, QUERIES, JUDGMENTS)
    corpus = ranking_data.read_corpus_csv(directory, LAYOUT)
    second = corpus.select_queries(["q2"])
    self.assertEqual(second.query_ids, ["q2"])
    self.assertAllEqual(second.judgment_doc, [2, 0])
    with self.assertRaisesRegex(ValueError, "Unknown query id"):
      corpus.select_queries(["q9"])
    docs = ranking_data.read_documents_csv(os.path.join(directory, "docs.csv"), "doc")
    self.assertEqual((docs.doc_ids, docs.query_ids), (["d1", "d2", "d3"], []))

  def test_corpus_validation(self):
    with self.assertRaisesRegex(ValueError, "Relevance must be finite and >= 0"):
      ranking_data.RankingCorpus(["d"], {}, ["q"], ["t"], [0], [0], [-1.0])


class FeatureListsTest(tf.test.TestCase):

  def test_padded_and_select(self):
    lists = _lists()
    features, relevance, mask = lists.select([1]).padded()
    self.assertEqual(features.shape, (1, 2, 3))
    self.assertAllEqual(relevance, [[1.0, 0.0]])
    features, relevance, mask = ranking_data.FeatureLists(
        features=np.ones((3, 1)), relevance=[1, 0, 2], list_offsets=[0, 1, 3], query_ids=["a", "b"],
        doc_ids=["1", "2", "3"], feature_names=["f"]).padded()
    self.assertAllEqual(relevance, [[1.0, -1.0], [0.0, 2.0]])
    self.assertAllEqual(mask, [[True, False], [True, True]])

  def test_validation(self):
    with self.assertRaisesRegex(ValueError, "list_offsets"):
      ranking_data.FeatureLists(np.ones((2, 1)), [0, 1], [0, 1], ["a"], ["1", "2"], ["f"])
    with self.assertRaisesRegex(ValueError, "not finite"):
      ranking_data.FeatureLists(np.array([[np.nan], [0]]), [0, 1], [0, 2], ["a"], ["1", "2"], ["f"])


class LibsvmTest(tf.test.TestCase, parameterized.TestCase):

  def test_round_trip_keeps_names_ids_and_values(self):
    path = os.path.join(self.create_tempdir().full_path, "lists.txt")
    ranking_data.write_libsvm(_lists(), path)
    again = ranking_data.read_libsvm(path)
    self.assertAllEqual(again.features, _lists().features)
    self.assertAllEqual(again.relevance, _lists().relevance)
    self.assertEqual(again.feature_names, _lists().feature_names)
    self.assertEqual(again.doc_ids, _lists().doc_ids)
    self.assertAllEqual(again.list_offsets, [0, 2, 4])

  def test_written_file_reads_in_scikit_learn(self):
    path = os.path.join(self.create_tempdir().full_path, "lists.txt")
    ranking_data.write_libsvm(_lists(), path)
    x, y, qid = sk_datasets.load_svmlight_file(path, n_features=3, query_id=True)
    self.assertAllClose(x.toarray(), _lists().features)
    self.assertAllEqual(y, _lists().relevance)
    self.assertAllEqual(qid, [1, 1, 2, 2])

  def test_reads_scikit_learn_output_grouping_by_qid(self):
    path = os.path.join(self.create_tempdir().full_path, "sk.txt")
    x = np.array([[1.0, 0.0], [0.0, 3.0], [2.0, 0.0]])
    sk_datasets.dump_svmlight_file(x, [1, 0, 2], path, query_id=[7, 8, 7], zero_based=False)
    lists = ranking_data.read_libsvm(path)
    self.assertEqual(lists.query_ids, ["7", "8"])
    self.assertAllEqual(lists.features, [[1.0, 0.0], [2.0, 0.0], [0.0, 3.0]])
    self.assertAllEqual(lists.relevance, [1.0, 2.0, 0.0])
    self.assertEqual(lists.feature_names, ["f1", "f2"])

  @parameterized.named_parameters(
      ("bad_label", "x qid:1 1:1\n", r"row 1, field 'label': bad label 'x'"),
      ("negative_label", "-1 qid:1 1:1\n", "bad label '-1'"),
      ("missing_qid", "1 1:1\n", "missing qid"),
      ("bad_feature", "1 qid:1 1:abc\n", r"row 1, field 'feature 1': feature 1 value 'abc'; expected a finite"),
      ("zero_index", "1 qid:1 0:1\n", "feature index '0'; expected a 1-based integer index"),
      ("repeated_index", "1 qid:1 1:1 1:2\n", r"row 1, field 'feature 1': feature 1 given twice; expected each "
       r"index at most once per line \(or a duplicate-index policy: last, sum\)"),
  )
  def test_bad_lines_raise_naming_the_line(self, text, message):
    path = os.path.join(self.create_tempdir().full_path, "bad.txt")
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
    with self.assertRaisesRegex(DataError, message):
      ranking_data.read_libsvm(path)

  def test_duplicate_index_policies(self):
    path = os.path.join(self.create_tempdir().full_path, "dup.txt")
    with open(path, "w", encoding="utf-8") as f:
      f.write("1 qid:1 1:1 2:5 1:2\n0 qid:1 2:1\n")
    self.assertAllEqual(ranking_data.read_libsvm(path, duplicates="last").features, [[2.0, 5.0], [0.0, 1.0]])
    self.assertAllEqual(ranking_data.read_libsvm(path, duplicates="sum").features, [[3.0, 5.0], [0.0, 1.0]])
    with self.assertRaisesRegex(ValueError, "'first' is not one of error, last, sum"):
      ranking_data.read_libsvm(path, duplicates="first")

  def test_index_above_num_features_raises(self):
    path = os.path.join(self.create_tempdir().full_path, "wide.txt")
    with open(path, "w", encoding="utf-8") as f:
      f.write("1 qid:1 5:1\n")
    with self.assertRaisesRegex(DataError, "above num_features=3"):
      ranking_data.read_libsvm(path, num_features=3)


class ElwcTest(tf.test.TestCase):

  def test_round_trip(self):
    path = os.path.join(self.create_tempdir().full_path, "lists.tfrecord")
    ranking_data.write_elwc(_lists(), path)
    again = ranking_data.read_elwc(path)
    self.assertAllEqual(again.features, _lists().features)
    self.assertAllEqual(again.relevance, _lists().relevance)
    self.assertEqual(again.feature_names, _lists().feature_names)
    self.assertEqual(again.query_ids, ["a", "b"])
    self.assertEqual(again.query_texts, ["first query", "second query"])
    self.assertEqual(again.doc_ids, _lists().doc_ids)

  def test_tf_ranking_parses_the_written_lists(self):
    path = os.path.join(self.create_tempdir().full_path, "lists.tfrecord")
    ranking_data.write_elwc(_lists(), path)
    serialized = next(iter(tf.data.TFRecordDataset(path).batch(2)))
    example_spec = {name: tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0])
                    for name in _lists().feature_names}
    example_spec[ranking_data.ELWC_LABEL] = tf.io.FixedLenFeature([1], tf.float32, default_value=[-1.0])
    parsed = tfr.data.parse_from_example_list(
        serialized, context_feature_spec={"query_id": tf.io.FixedLenFeature([1], tf.string)},
        example_feature_spec=example_spec)
    self.assertAllEqual(parsed[ranking_data.ELWC_LABEL][..., 0], [[2.0, 0.0], [1.0, 0.0]])
    self.assertAllEqual(parsed["f two"][..., 0], [[0.0, 2.0], [0.0, 0.0]])
    self.assertAllEqual(parsed["query_id"][:, 0], [b"a", b"b"])

  def test_missing_label_raises(self):
    from rank4class_data import elwc as elwc_io

    path = os.path.join(self.create_tempdir().full_path, "nolabel.tfrecord")
    elwc_io.write_elwc(path, [elwc_io.make_elwc([{"f": 1.0}], context={"feature_names": ["f"]})])
    with self.assertRaisesRegex(DataError, "has no label"):
      ranking_data.read_elwc(path)

  def test_reserved_feature_name_raises(self):
    lists = _lists()
    lists.feature_names = ["label", "f two", "x"]
    with self.assertRaisesRegex(ValueError, "clash"):
      ranking_data.write_elwc(lists, os.path.join(self.create_tempdir().full_path, "x.tfrecord"))



def _tfr_style_elwc(path: str, examples_per_list: list[list[dict]], context: dict | None = None,
                    label_key: str = "utility") -> None:
  """Writes ELWC the way TF-Ranking's examples do: input_pb2 protos, sparse float features, a custom label key."""
  with tf.io.TFRecordWriter(path) as writer:
    for examples in examples_per_list:
      elwc = input_pb2.ExampleListWithContext()
      for key, value in (context or {}).items():
        elwc.context.features.feature[key].bytes_list.value.append(value.encode("utf-8"))
      for values in examples:
        example = elwc.examples.add()
        for key, value in values.items():
          feature = example.features.feature[key]
          if isinstance(value, str):
            feature.bytes_list.value.append(value.encode("utf-8"))
          elif isinstance(value, int) and key != label_key:
            feature.int64_list.value.append(value)
          else:
            feature.float_list.value.append(float(value))
      writer.write(elwc.SerializeToString())


class TfRankingStyleElwcTest(tf.test.TestCase):
  """ELWC as TF-Ranking's example tooling writes it: label under its own key, sparse numeric features."""

  def test_sparse_features_take_zero_and_the_label_key_is_a_setting(self):
    path = os.path.join(self.create_tempdir().full_path, "mslr.tfrecord")
    _tfr_style_elwc(path, [[{"utility": 2, "1": 0.5, "7": 3.0}, {"utility": 0, "2": 1.0}],
                           [{"utility": 1, "7": -1.0, "10": 4}]], context={"query_tokens": "cheap flights"})
    lists = ranking_data.read_elwc(path, label_key="utility")
    self.assertEqual(lists.feature_names, ["1", "10", "2", "7"])  # Every numeric feature seen, sorted by name.
    self.assertAllEqual(lists.features, [[0.5, 0, 0, 3.0], [0, 0, 1.0, 0], [0, 4.0, 0, -1.0]])
    self.assertAllEqual(lists.relevance, [2.0, 0.0, 1.0])
    self.assertAllEqual(lists.list_offsets, [0, 2, 3])
    self.assertEqual(lists.query_ids, ["1", "2"])
    self.assertAllEqual(ranking_data.read_elwc(path, ["7", "1"], label_key="utility").features,
                        [[3.0, 0.5], [0, 0], [-1.0, 0]])

  def test_missing_label_names_the_key_and_what_the_example_has(self):
    path = os.path.join(self.create_tempdir().full_path, "mslr.tfrecord")
    _tfr_style_elwc(path, [[{"utility": 2, "1": 0.5}]])
    with self.assertRaisesRegex(DataError, r"row 1, field 'label': example 1 has no label 'label' \(its features: "
                                r"\['1', 'utility'\]\); expected one relevance number per example; name the label "
                                r"feature with --label_key"):
      ranking_data.read_elwc(path)

  def test_feature_of_the_wrong_kind_or_length_names_list_example_and_feature(self):
    path = os.path.join(self.create_tempdir().full_path, "bad.tfrecord")
    _tfr_style_elwc(path, [[{"utility": 1, "1": 0.5}], [{"utility": 0, "1": 0.5}, {"utility": 1, "1": "high"}]])
    with self.assertRaisesRegex(DataError, r"row 2, field '1': example 2 has '1' as bytes_list; expected numbers"):
      ranking_data.read_elwc(path, ["1"], label_key="utility")

  def test_text_elwc_fails_with_one_clear_message(self):
    path = os.path.join(self.create_tempdir().full_path, "antique.tfrecord")
    _tfr_style_elwc(path, [[{"relevance": 2, "document_tokens": "the cat sat"}]], context={"query_tokens": "cat"},
                    label_key="relevance")
    with self.assertRaisesRegex(DataError, r"no numeric example features \(the first example has "
                                r"\{'document_tokens': 'bytes_list'\}\)"):
      ranking_data.read_elwc(path, label_key="relevance")

if __name__ == "__main__":
  tf.test.main()
