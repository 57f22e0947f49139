"""Tests for rank4class_data.ranking.feature_lists: FeatureLists, and their LibSVM and ELWC round trips."""

import os
import re

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from sklearn import datasets as sk_datasets
from tensorflow_serving.apis import input_pb2

from rank4class_data.ranking import feature_lists
from rank4class_data.records import elwc
from rank4class_data.tf_ranking import tfr
from rank4class_data.validation import DataError


def _lists():
  return feature_lists.FeatureLists(
      features=np.array([[1.0, 0.0, 0.5], [0.0, 2.0, 0.0], [0.25, 0.0, -1.0], [0.0, 0.0, 0.0]]),
      relevance=np.array([2.0, 0.0, 1.0, 0.0]), list_offsets=np.array([0, 2, 4]), query_ids=["a", "b"],
      doc_ids=["x1", "x2", "x3", "x4"], feature_names=["bm25(text)", "f two", "system=Ser/Plas"],
      query_texts=["first query", "second query"])


class FeatureListsTest(tf.test.TestCase):

  def test_padded_and_select(self):
    lists = _lists()
    features, relevance, mask = lists.select([1]).padded()
    self.assertEqual(features.shape, (1, 2, 3))
    self.assertAllEqual(relevance, [[1.0, 0.0]])
    features, relevance, mask = feature_lists.FeatureLists(
        features=np.ones((3, 1)), relevance=[1, 0, 2], list_offsets=[0, 1, 3], query_ids=["a", "b"],
        doc_ids=["1", "2", "3"], feature_names=["f"]).padded()
    self.assertAllEqual(relevance, [[1.0, -1.0], [0.0, 2.0]])
    self.assertAllEqual(mask, [[True, False], [True, True]])

  def test_validation(self):
    with self.assertRaisesRegex(ValueError, "list_offsets"):
      feature_lists.FeatureLists(np.ones((2, 1)), [0, 1], [0, 1], ["a"], ["1", "2"], ["f"])
    with self.assertRaisesRegex(ValueError, "not finite"):
      feature_lists.FeatureLists(np.array([[np.nan], [0]]), [0, 1], [0, 2], ["a"], ["1", "2"], ["f"])


class LibsvmTest(tf.test.TestCase, parameterized.TestCase):

  def test_round_trip_keeps_names_ids_and_values(self):
    path = os.path.join(self.create_tempdir().full_path, "lists.txt")
    feature_lists.write_libsvm(_lists(), path)
    again = feature_lists.read_libsvm(path)
    self.assertAllEqual(again.features, _lists().features)
    self.assertAllEqual(again.relevance, _lists().relevance)
    self.assertEqual(again.feature_names, _lists().feature_names)
    self.assertEqual(again.doc_ids, _lists().doc_ids)
    self.assertAllEqual(again.list_offsets, [0, 2, 4])

  def test_written_file_reads_in_scikit_learn(self):
    path = os.path.join(self.create_tempdir().full_path, "lists.txt")
    feature_lists.write_libsvm(_lists(), path)
    x, y, qid = sk_datasets.load_svmlight_file(path, n_features=3, query_id=True)
    self.assertAllClose(x.toarray(), _lists().features)
    self.assertAllEqual(y, _lists().relevance)
    self.assertAllEqual(qid, [1, 1, 2, 2])

  def test_reads_scikit_learn_output_grouping_by_qid(self):
    path = os.path.join(self.create_tempdir().full_path, "sk.txt")
    x = np.array([[1.0, 0.0], [0.0, 3.0], [2.0, 0.0]])
    sk_datasets.dump_svmlight_file(x, [1, 0, 2], path, query_id=[7, 8, 7], zero_based=False)
    lists = feature_lists.read_libsvm(path)
    self.assertEqual(lists.query_ids, ["7", "8"])
    self.assertAllEqual(lists.features, [[1.0, 0.0], [2.0, 0.0], [0.0, 3.0]])
    self.assertAllEqual(lists.relevance, [1.0, 2.0, 0.0])
    self.assertEqual(lists.feature_names, ["f1", "f2"])

  @parameterized.named_parameters(
      ("bad_label", "x qid:1 1:1\n", r"row 1, field 'label': bad label 'x'"),
      ("negative_label", "-1 qid:1 1:1\n", "bad label '-1'"),
      ("missing_qid", "1 1:1\n", "missing qid"),
      ("bad_feature", "1 qid:1 1:abc\n",
       r"row 1, field 'feature 1': feature 1 value 'abc'; expected a finite"),
      ("zero_index", "1 qid:1 0:1\n", "feature index '0'; expected a 1-based integer index"),
      ("repeated_index", "1 qid:1 1:1 1:2\n", r"row 1, field 'feature 1': feature 1 given twice; expected "
       r"each index at most once per line \(or a duplicate-index policy: last, sum\)"),
  )
  def test_bad_lines_raise_naming_the_line(self, text, message):
    path = os.path.join(self.create_tempdir().full_path, "bad.txt")
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
    with self.assertRaisesRegex(DataError, message):
      feature_lists.read_libsvm(path)

  def test_bytes_that_are_not_utf8_and_a_bad_header_name_file_and_line(self):
    root = self.create_tempdir().full_path
    bad_bytes = os.path.join(root, "latin1.txt")
    with open(bad_bytes, "wb") as f:
      f.write(b"1 qid:1 1:0.5 # docid = caf\xe9\n")  # A Latin-1 document id.
    with self.assertRaisesRegex(DataError,
                                r"latin1\.txt, row 1: byte 0xe9 is not UTF-8; expected UTF-8 text"):
      feature_lists.read_libsvm(bad_bytes)
    for name, header, problem in (("json.txt", "[oops", "feature-name header is not JSON"),
                                  ("kind.txt", '{"a": 1}', "feature-name header holds dict")):
      path = os.path.join(root, name)
      with open(path, "w", encoding="utf-8") as f:
        f.write(f"1 qid:1 1:1\n# feature_names: {header}\n")
      with self.assertRaisesRegex(DataError, rf"{name.replace('.', '[.]')}, row 2: {problem}"):
        feature_lists.read_libsvm(path)

  def test_byte_order_mark_is_no_label(self):
    path = os.path.join(self.create_tempdir().full_path, "bom.txt")
    with open(path, "wb") as f:
      f.write(b"\xef\xbb\xbf2 qid:1 1:1\n0 qid:1 1:0\n")
    self.assertAllEqual(feature_lists.read_libsvm(path).relevance, [2.0, 0.0])

  def test_duplicate_index_policies(self):
    path = os.path.join(self.create_tempdir().full_path, "dup.txt")
    with open(path, "w", encoding="utf-8") as f:
      f.write("1 qid:1 1:1 2:5 1:2\n0 qid:1 2:1\n")
    self.assertAllEqual(feature_lists.read_libsvm(path, duplicates="last").features, [[2.0, 5.0], [0.0, 1.0]])
    self.assertAllEqual(feature_lists.read_libsvm(path, duplicates="sum").features, [[3.0, 5.0], [0.0, 1.0]])
    with self.assertRaisesRegex(ValueError, r"`libsvm_duplicates` must be one of \['error', 'last', "
                                r"'sum'\], got 'first'"):
      feature_lists.read_libsvm(path, duplicates="first")

  def test_every_cut_in_the_last_two_lines_is_refused_or_reads_the_lines_before(self):
    # Undetectable cuts leave a well-formed last line: inside a number ("0.25" read as "0.2"), a qid ("qid:12"
    # as "qid:1"), or the comment ("# docid = d2" as "# doc": the document is then named by its line). Every
    # other cut of a line is refused, naming the file and the line; one at a line end reads the lines before.
    lines = ["1 qid:1 1:0.5 # docid = d1\n", "2 qid:1 1:0.25 3:2 # docid = d2\n",
             "0 qid:12 2:1.5 # docid = d3\n"]
    data = "".join(lines).encode("utf-8")
    ends = [len("".join(lines[:i])) for i in range(len(lines) + 1)]
    path = os.path.join(self.create_tempdir().full_path, "cut.txt")
    refused = 0
    for end in range(ends[-3], len(data) + 1):
      with open(path, "wb") as f:
        f.write(data[:end])
      complete = max(i for i, line_end in enumerate(ends) if line_end <= end)  # Lines whole before the cut.
      try:
        lists = feature_lists.read_libsvm(path)
      except DataError as e:
        refused += 1
        self.assertNotIn(end, ends, msg=f"cut at byte {end}, a line end, refused: {e}")
        self.assertStartsWith(str(e), f"{path}, row {complete + 1}")
        continue
      expected_ids = ["d1", "d2", "d3"][:complete]
      self.assertEqual(lists.doc_ids[:complete], expected_ids, msg=f"cut at byte {end}")
      self.assertLen(lists.doc_ids, complete + (end not in ends), msg=f"cut at byte {end}")
    self.assertGreater(refused, 0)
    with open(path, "wb") as f:
      f.write(data[:data.rindex(b" 2:") + 2])  # "0 qid:12 2", no line end.
    with self.assertRaisesRegex(DataError, "^" + re.escape(
        f"{path}, row 3, field 'features': the last line is cut (token '2', no line end); expected a "
        "complete file (write or copy it again).")):
      feature_lists.read_libsvm(path)

  def test_index_above_num_features_raises(self):
    path = os.path.join(self.create_tempdir().full_path, "wide.txt")
    with open(path, "w", encoding="utf-8") as f:
      f.write("1 qid:1 5:1\n")
    with self.assertRaisesRegex(DataError, "above num_features=3"):
      feature_lists.read_libsvm(path, num_features=3)


class AlignFeaturesTest(tf.test.TestCase):

  def test_permuted_columns_come_back_in_the_wanted_order_and_extras_are_named(self):
    lists = _lists()  # Features "bm25(text)", "f two", "system=Ser/Plas".
    aligned, extra = feature_lists.align_features(lists, ["system=Ser/Plas", "bm25(text)"], "new.txt")
    self.assertEqual(aligned.feature_names, ["system=Ser/Plas", "bm25(text)"])
    self.assertAllEqual(aligned.features, lists.features[:, [2, 0]])
    self.assertEqual(extra, ["f two"])
    self.assertEqual(aligned.doc_ids, lists.doc_ids)

  def test_missing_features_name_the_file_and_every_missing_one(self):
    with self.assertRaisesRegex(DataError, r"^new\.txt, field 'features': 2 of the model's 3 features "
                                r"missing: \['utility', 'z'\]; expected every feature the model was trained "
                                r"on \(the file has \['bm25\(text\)', 'f two', 'system=Ser/Plas'\]\)\.$"):
      feature_lists.align_features(_lists(), ["utility", "bm25(text)", "z"], "new.txt")

  def test_libsvm_index_names_beyond_the_file_are_zero(self):
    lists = feature_lists.FeatureLists(np.ones((2, 2)), [1, 0], [0, 2], ["q"], ["a", "b"], ["f1", "f2"])
    aligned, extra = feature_lists.align_features(lists, ["f1", "f2", "f3"], "x.svm", sparse_index_names=True)
    self.assertAllEqual(aligned.features, [[1, 1, 0], [1, 1, 0]])
    self.assertEqual(extra, [])
    with self.assertRaisesRegex(DataError, r"\['f3'\].*it has no `# feature_names:` header, so its features "
                                r"are its indices f1\.\.f2"):
      feature_lists.align_features(lists, ["f1", "f3"], "x.svm")
    with self.assertRaisesRegex(DataError, r"\['bm25'\]"):
      feature_lists.align_features(lists, ["bm25"], "x.svm", sparse_index_names=True)

  def test_names_for_message_lists_all_or_the_closest_first(self):
    self.assertEqual(feature_lists.names_for_message(["b", "a"], "x"), "['a', 'b']")
    names = [f"feature_{i:03d}" for i in range(200)] + ["utility"]
    message = feature_lists.names_for_message(names, "utlity", limit=5)
    self.assertTrue(message.startswith("['utility', "), message)
    self.assertTrue(message.endswith("and 196 more, closest to 'utlity' first"), message)


class ElwcTest(tf.test.TestCase):

  def test_round_trip(self):
    path = os.path.join(self.create_tempdir().full_path, "lists.tfrecord")
    elwc.write_elwc(path, feature_lists.to_elwc(_lists()))
    again = feature_lists.read_elwc(path)
    self.assertAllEqual(again.features, _lists().features)
    self.assertAllEqual(again.relevance, _lists().relevance)
    self.assertEqual(again.feature_names, _lists().feature_names)
    self.assertEqual(again.query_ids, ["a", "b"])
    self.assertEqual(again.query_texts, ["first query", "second query"])
    self.assertEqual(again.doc_ids, _lists().doc_ids)

  def test_tf_ranking_parses_the_written_lists(self):
    path = os.path.join(self.create_tempdir().full_path, "lists.tfrecord")
    elwc.write_elwc(path, feature_lists.to_elwc(_lists()))
    serialized = next(iter(tf.data.TFRecordDataset(path).batch(2)))
    example_spec = {name: tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0])
                    for name in _lists().feature_names}
    example_spec[feature_lists.ELWC_LABEL] = tf.io.FixedLenFeature([1], tf.float32, default_value=[-1.0])
    parsed = tfr.data.parse_from_example_list(
        serialized, context_feature_spec={"query_id": tf.io.FixedLenFeature([1], tf.string)},
        example_feature_spec=example_spec)
    self.assertAllEqual(parsed[feature_lists.ELWC_LABEL][..., 0], [[2.0, 0.0], [1.0, 0.0]])
    self.assertAllEqual(parsed["f two"][..., 0], [[0.0, 2.0], [0.0, 0.0]])
    self.assertAllEqual(parsed["query_id"][:, 0], [b"a", b"b"])

  def test_missing_label_raises(self):
    path = os.path.join(self.create_tempdir().full_path, "nolabel.tfrecord")
    elwc.write_elwc(path, [elwc.make_elwc([{"f": 1.0}], context={"feature_names": ["f"]})])
    with self.assertRaisesRegex(DataError, "has no label"):
      feature_lists.read_elwc(path)

  def test_reserved_feature_name_raises(self):
    lists = _lists()
    lists.feature_names = ["label", "f two", "x"]
    with self.assertRaisesRegex(ValueError, "clash"):
      feature_lists.to_elwc(lists)


def _tfr_style_elwc(path: str, examples_per_list: list[list[dict]], context: dict | None = None,
                    label_key: str = "utility") -> None:
  """Writes ELWC the way TF-Ranking's examples do: input_pb2 protos, sparse float features, a custom label
  key."""
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
    lists = feature_lists.read_elwc(path, label_key="utility")
    # Every numeric feature seen, sorted by name.
    self.assertEqual(lists.feature_names, ["1", "10", "2", "7"])
    self.assertAllEqual(lists.features, [[0.5, 0, 0, 3.0], [0, 0, 1.0, 0], [0, 4.0, 0, -1.0]])
    self.assertAllEqual(lists.relevance, [2.0, 0.0, 1.0])
    self.assertAllEqual(lists.list_offsets, [0, 2, 3])
    self.assertEqual(lists.query_ids, ["1", "2"])
    self.assertAllEqual(feature_lists.read_elwc(path, ["7", "1"], label_key="utility").features,
                        [[3.0, 0.5], [0, 0], [-1.0, 0]])

  def test_missing_label_names_the_key_and_what_the_example_has(self):
    path = os.path.join(self.create_tempdir().full_path, "mslr.tfrecord")
    _tfr_style_elwc(path, [[{"utility": 2, "1": 0.5}]])
    with self.assertRaisesRegex(DataError, r"row 1, field 'label': example 1 has no label 'label' \(its "
                                r"features: \['1', 'utility'\]\); expected one relevance number per example; "
                                r"name the label feature with `label_key`"):
      feature_lists.read_elwc(path)

  def test_missing_label_among_many_features_still_shows_the_likely_one(self):
    path = os.path.join(self.create_tempdir().full_path, "wide.tfrecord")
    _tfr_style_elwc(path, [[{"utility": 2, **{str(j): 0.5 for j in range(1, 137)}}]], label_key="utility")
    with self.assertRaisesRegex(DataError, r"example 1 has no label 'utilty' \(its features: \['utility', "
                                r"[^\]]*\] and 107 more, closest to 'utilty' first\)"):
      feature_lists.read_elwc(path, label_key="utilty")

  def test_feature_of_the_wrong_kind_or_length_names_list_example_and_feature(self):
    path = os.path.join(self.create_tempdir().full_path, "bad.tfrecord")
    _tfr_style_elwc(path,
                    [[{"utility": 1, "1": 0.5}], [{"utility": 0, "1": 0.5}, {"utility": 1, "1": "high"}]])
    with self.assertRaisesRegex(DataError,
                                r"row 2, field '1': example 2 has '1' as bytes_list; expected numbers"):
      feature_lists.read_elwc(path, ["1"], label_key="utility")

  def test_text_elwc_fails_with_one_clear_message(self):
    path = os.path.join(self.create_tempdir().full_path, "antique.tfrecord")
    _tfr_style_elwc(path, [[{"relevance": 2, "document_tokens": "the cat sat"}]],
                    context={"query_tokens": "cat"}, label_key="relevance")
    with self.assertRaisesRegex(DataError, r"no numeric example features \(the first example has "
                                r"\{'document_tokens': 'bytes_list'\}\)"):
      feature_lists.read_elwc(path, label_key="relevance")


if __name__ == "__main__":
  tf.test.main()
