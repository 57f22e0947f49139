"""Tests for rank4class_data.ranking.ranking_corpus: the CSV layout (LOINC) and the rank / relevance
conversion."""

import os
import pathlib
import re

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_data.ranking import ranking_corpus
from rank4class_data.validation import DataError

LOINC_DIR = pathlib.Path(__file__).resolve().parents[3] / "shared" / "loinc"


def _write_layout(directory, docs, queries, judgments):
  for name, text in ((ranking_corpus.DOCS_FILE, docs), (ranking_corpus.QUERIES_FILE, queries),
                     (ranking_corpus.QUERY_DOC_FILE, judgments)):
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      f.write(text)


DOCS = "doc,title,kind\nd1,apple pie,food\nd2,apple computer,tech\nd3,banana,food\n"
QUERIES = "qid,text\nq1,apple\nq2,fruit\n"
JUDGMENTS = "qid,doc,rank\nq1,d1,2\nq1,d2,1\nq1,d3,3\nq2,d3,1\nq2,d1,2\n"
LAYOUT = ranking_corpus.CsvLayout(doc_id_column="doc", query_id_column="qid", query_text_column="text",
                                label_column="rank", label_kind="rank")


class RankConversionTest(tf.test.TestCase):

  def test_rank_one_gets_the_highest_relevance_per_query(self):
    relevance = ranking_corpus.rank_to_relevance([2, 1, 3, 1, 2], [0, 0, 0, 1, 1])
    self.assertAllEqual(relevance, [1.0, 2.0, 0.0, 1.0, 0.0])

  def test_ties_and_gaps(self):
    # Ranks 1, 1, 5: max 5 -> relevance 4, 4, 0; back to competition ranks 1, 1, 3.
    relevance = ranking_corpus.rank_to_relevance([1, 1, 5], [0, 0, 0])
    self.assertAllEqual(relevance, [4.0, 4.0, 0.0])
    self.assertAllEqual(ranking_corpus.relevance_to_rank(relevance, [0, 0, 0]), [1, 1, 3])

  def test_rank_below_one_raises(self):
    with self.assertRaisesRegex(ValueError, "Ranks must be finite and >= 1"):
      ranking_corpus.rank_to_relevance([0, 1], [0, 0])


class CorpusCsvTest(tf.test.TestCase, parameterized.TestCase):

  def test_loinc_sample_reads_with_rank_one_best(self):
    if not LOINC_DIR.is_dir():
      self.skipTest(f"LOINC sample not found at {LOINC_DIR} (the shared/loinc folder beside the repository).")
    corpus = ranking_corpus.read_corpus_csv(str(LOINC_DIR), ranking_corpus.LOINC_LAYOUT)
    self.assertLen(corpus.doc_ids, 67)
    self.assertEqual(corpus.query_texts,
                     ["GLUCOSE IN BLOOD", "BILIRUBIN IN PLASMA", "WHITE BLOOD CELLS COUNT"])
    self.assertEqual(corpus.label_kind, "rank")
    first = np.nonzero(corpus.judgment_query == 0)[0]
    self.assertLen(first, 67)
    # query_doc.csv lists query 1's rank 1 first (1988-5): it gets the top relevance 66.
    self.assertEqual(corpus.doc_ids[corpus.judgment_doc[first[0]]], "1988-5")
    self.assertEqual(corpus.relevance[first[0]], 66.0)
    self.assertEqual(corpus.relevance[first].min(), 0.0)
    self.assertIn("system", corpus.doc_fields)

  def test_labels_are_relevance_unless_the_layout_says_ranks(self):
    self.assertEqual((ranking_corpus.CsvLayout().label_column, ranking_corpus.CsvLayout().label_kind),
                     ("label", "relevance"))
    directory = self.create_tempdir().full_path
    _write_layout(directory, DOCS, QUERIES, JUDGMENTS)
    relevance_layout = ranking_corpus.CsvLayout("doc", "qid", "text", "rank")  # The column name is no kind.
    as_relevance = ranking_corpus.read_corpus_csv(directory, relevance_layout)
    self.assertEqual(as_relevance.label_kind, "relevance")
    # Read as written: higher = better.
    self.assertAllEqual(as_relevance.relevance, [2.0, 1.0, 3.0, 1.0, 2.0])
    self.assertAllEqual(ranking_corpus.read_corpus_csv(directory, LAYOUT).relevance,
                        [1.0, 2.0, 0.0, 1.0, 0.0])
    self.assertEqual(ranking_corpus.describe_labels("grade", "relevance"),
                     "Labels: 'grade' read as relevance (higher = better); `label_kind`=rank reads 1 = best.")
    self.assertEqual(ranking_corpus.describe_labels("rank", "rank"),
                     "Labels: 'rank' read as ranks (1 = best within the query), turned into relevance; "
                     "`label_kind`=relevance reads higher = better.")

  def test_round_trip_with_ranks_and_with_relevance(self):
    directory = self.create_tempdir().full_path
    _write_layout(directory, DOCS, QUERIES, JUDGMENTS)
    corpus = ranking_corpus.read_corpus_csv(directory, LAYOUT)
    self.assertAllEqual(corpus.relevance, [1.0, 2.0, 0.0, 1.0, 0.0])
    for layout in (LAYOUT, ranking_corpus.CsvLayout("doc", "qid", "text", "grade", "relevance")):
      out = self.create_tempdir().full_path
      ranking_corpus.write_corpus_csv(corpus, out, layout)
      again = ranking_corpus.read_corpus_csv(out, layout)
      self.assertEqual(again.doc_ids, corpus.doc_ids)
      self.assertEqual(again.doc_fields, corpus.doc_fields)
      self.assertEqual(again.query_texts, corpus.query_texts)
      self.assertAllEqual(again.relevance, corpus.relevance)
    self.assertEqual(sorted(os.listdir(out)), ["docs.csv", "queries.csv", "query_doc.csv"])

  @parameterized.named_parameters(
      ("unknown_doc", DOCS, QUERIES, JUDGMENTS + "q2,d9,3\n",
       r"query_doc.csv, row 6.*unknown document id 'd9'"),
      ("unknown_query", DOCS, QUERIES, JUDGMENTS + "q7,d1,3\n", r"row 6.*unknown query id 'q7'"),
      ("non_numeric_rank", DOCS, QUERIES, "qid,doc,rank\nq1,d1,first\n",
       r"row 1.*field 'rank': bad rank 'first'"),
      ("rank_zero", DOCS, QUERIES, "qid,doc,rank\nq1,d1,0\n", r"expected a rank >= 1"),
      ("duplicate_judgment", DOCS, QUERIES, "qid,doc,rank\nq1,d1,1\nq1,d1,2\n", "judges document 'd1' again"),
      ("duplicate_doc", DOCS + "d1,again,food\n", QUERIES, JUDGMENTS, "duplicate document id 'd1'"),
      ("empty_query", DOCS, "qid,text\nq1,\n", "qid,doc,rank\n", "empty query text"),
      ("missing_column", DOCS, QUERIES, "qid,doc\nq1,d1\n", r"missing column\(s\) \['rank'\]"),
      # A table cut short: inside a quoted field (no row can end there), or a last row left with too few
      # fields.
      ("cut_in_quoted_field", DOCS, 'qid,text\nq1,apple\nq2,"fru', JUDGMENTS, r"queries\.csv, row 2 \(line "
       r"3\): the file ends inside a quoted field of this row \(which starts on line 3\): it is cut short, "
       r"or a quote is not closed; expected a complete file \(write or copy it again\)\.$"),
      ("cut_in_last_line", DOCS, QUERIES, "qid,doc,rank\nq1,d1,2\nq1,d2", r"query_doc\.csv, row 2 \(line "
       r"3\): the last line is cut \(wrong number of fields, no line end\); expected a complete file \(write "
       r"or copy it again\)\.$"),
  )
  def test_bad_input_raises_naming_file_row_and_field(self, docs, queries, judgments, message):
    directory = self.create_tempdir().full_path
    _write_layout(directory, docs, queries, judgments)
    with self.assertRaisesRegex(DataError, message):
      ranking_corpus.read_corpus_csv(directory, LAYOUT)

  def test_missing_file_raises(self):
    with self.assertRaisesRegex(FileNotFoundError, "docs.csv"):
      ranking_corpus.read_corpus_csv(self.create_tempdir().full_path, LAYOUT)

  def test_select_queries_and_documents_only(self):
    directory = self.create_tempdir().full_path
    _write_layout(directory, DOCS, QUERIES, JUDGMENTS)
    corpus = ranking_corpus.read_corpus_csv(directory, LAYOUT)
    second = corpus.select_queries(["q2"])
    self.assertEqual(second.query_ids, ["q2"])
    self.assertAllEqual(second.judgment_doc, [2, 0])
    with self.assertRaisesRegex(ValueError, "Unknown query id"):
      corpus.select_queries(["q9"])
    docs = ranking_corpus.read_documents_csv(os.path.join(directory, "docs.csv"), "doc")
    self.assertEqual((docs.doc_ids, docs.query_ids), (["d1", "d2", "d3"], []))

  def test_corpus_validation(self):
    with self.assertRaisesRegex(ValueError, "Relevance must be finite and >= 0"):
      ranking_corpus.RankingCorpus(["d"], {}, ["q"], ["t"], [0], [0], [-1.0])


class LoincSampleTest(tf.test.TestCase):
  """The LOINC sample's one reader: `read_corpus_csv(directory, LOINC_LAYOUT)`."""

  def _write(self, docs: bytes, queries: bytes, judgments: bytes) -> str:
    folder = self.create_tempdir()
    for name, content in ((ranking_corpus.DOCS_FILE, docs), (ranking_corpus.QUERIES_FILE, queries),
                          (ranking_corpus.QUERY_DOC_FILE, judgments)):
      folder.create_file(name, content=content)
    return folder.full_path

  def test_real_tables(self):
    if not LOINC_DIR.is_dir():
      self.skipTest(f"LOINC sample not found at {LOINC_DIR} (the shared/loinc folder beside the repository).")
    corpus = ranking_corpus.read_corpus_csv(str(LOINC_DIR), ranking_corpus.LOINC_LAYOUT)
    self.assertEqual((len(corpus.doc_ids), len(corpus.query_ids), len(corpus.relevance)), (67, 3, 3 * 67))
    self.assertEqual((corpus.query_ids[0], corpus.query_texts[0]), ("1", "GLUCOSE IN BLOOD"))
    for query in range(3):  # Every query ranks every document.
      self.assertCountEqual(corpus.judgment_doc[corpus.judgment_query == query], range(67))
    self.assertIn("long_common_name", corpus.doc_fields)

  def test_missing_file_raises_naming_it(self):
    with self.assertRaisesRegex(FileNotFoundError, "docs.csv: no such file"):
      ranking_corpus.read_corpus_csv(self.create_tempdir().full_path, ranking_corpus.LOINC_LAYOUT)

  def test_missing_column_raises(self):
    folder = self._write(b"loinc_num,name\n1-1,x\n", b"id_query,query\n1,q\n", b"id_query,loinc_num\n1,1-1\n")
    with self.assertRaisesRegex(DataError, r"query_doc\.csv, header row, field 'rank': missing column"):
      ranking_corpus.read_corpus_csv(folder, ranking_corpus.LOINC_LAYOUT)

  def test_unknown_document_raises(self):
    folder = self._write(b"loinc_num,long_common_name\n1-1,x\n", b"id_query,query\n1,q\n",
                         b"id_query,loinc_num,rank\n1,1-1,1\n1,9-9,2\n")
    with self.assertRaisesRegex(DataError,
                                r"query_doc\.csv, row 2 \(line 3\), field 'loinc_num': unknown "
                                r"document id '9-9'"):
      ranking_corpus.read_corpus_csv(folder, ranking_corpus.LOINC_LAYOUT)

  def test_byte_order_mark_reads_and_latin1_row_is_located(self):
    folder = self._write(b"\xef\xbb\xbfloinc_num,long_common_name\n1-1,x\n",
                         b"\xef\xbb\xbfid_query,query\n1,q\n", b"id_query,loinc_num,rank\n1,1-1,1\n")
    corpus = ranking_corpus.read_corpus_csv(folder, ranking_corpus.LOINC_LAYOUT)
    self.assertEqual((corpus.doc_ids, corpus.doc_fields, corpus.query_ids),
                     (["1-1"], {"long_common_name": ["x"]}, ["1"]))
    path = os.path.join(folder, ranking_corpus.QUERIES_FILE)
    with open(path, "wb") as f:
      f.write(b"id_query,query\n1,glucose\n2,caf\xe9ine\n")
    with self.assertRaisesRegex(DataError,
                                "^" + re.escape(f"{path}, row 2 (line 3): byte 0xe9 is not UTF-8")):
      ranking_corpus.read_corpus_csv(folder, ranking_corpus.LOINC_LAYOUT)


if __name__ == "__main__":
  tf.test.main()
