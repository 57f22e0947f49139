"""Tests for rank4class_data.elwc: ELWC ranking lists written with TF-Ranking's protos, read via tfr.data."""

import os

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from tensorflow_serving.apis import input_pb2

from rank4class_data import elwc
from rank4class_data.elwc import ElwcSchema, FeatureSpec
from rank4class_data.tf_ranking import tfr
from rank4class_data.tfrecords import InputConfig
from rank4class_data.validation import DataError, FieldError
from rank4class_engine import distribute


def _feature(kind: str, values: list) -> tf.train.Feature:
  if kind == "bytes":
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
  if kind == "int64":
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
  return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def _proto_example(**features) -> tf.train.Example:
  return tf.train.Example(features=tf.train.Features(feature={
      key: _feature(kind, values) for key, (kind, values) in features.items()
  }))


def _tf_ranking_lists() -> list[input_pb2.ExampleListWithContext]:
  """Two lists built directly with TF-Ranking's proto, as a TF-Ranking user would (sizes 3 and 1)."""
  first = input_pb2.ExampleListWithContext()
  first.context.CopyFrom(_proto_example(query=("bytes", [b"glucose blood"]), query_id=("int64", [7])))
  for doc, label, score in ((b"glucose", 2.0, [0.5, 1.0]), (b"chloride", 0.0, [0.25, 0.0]),
                            (b"bilirubin", 1.0, [1.0, 2.0])):
    first.examples.add().CopyFrom(
        _proto_example(doc=("bytes", [doc]), label=("float", [label]), score=("float", score)))
  second = input_pb2.ExampleListWithContext()
  second.context.CopyFrom(_proto_example(query=("bytes", [b"wbc count"]), query_id=("int64", [9])))
  second.examples.add().CopyFrom(
      _proto_example(doc=("bytes", [b"leukocytes"]), label=("float", [1.0]), score=("float", [3.0, 4.0])))
  return [first, second]


_SCHEMA = ElwcSchema(example_features={
    "doc": FeatureSpec("string"),
    "score": FeatureSpec("float32", (2,))
}, context_features={
    "query": FeatureSpec("string"),
    "query_id": FeatureSpec("int64")
})


def _write_raw(path: str, lists) -> str:
  """Writes ELWC protos with a plain TFRecordWriter, bypassing this module's checks."""
  with tf.io.TFRecordWriter(path) as writer:
    for elwc_proto in lists:
      writer.write(elwc_proto.SerializeToString())
  return path


class TfRankingFilesTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.path = _write_raw(os.path.join(self.create_tempdir().full_path, "lists.tfrecord"),
                           _tf_ranking_lists())

  def test_parsed_tensors_equal_what_was_written_with_padding_and_mask(self):
    schema = ElwcSchema(**{**_SCHEMA.__dict__, "list_size": 4})
    features, labels = next(
        iter(elwc.make_dataset(InputConfig(self.path, batch_size=2, shuffle=False), schema)))
    self.assertAllEqual(features["doc"][..., 0],
                        [[b"glucose", b"chloride", b"bilirubin", b""], [b"leukocytes", b"", b"", b""]])
    self.assertAllClose(
        features["score"],
        [[[0.5, 1.0], [0.25, 0.0], [1.0, 2.0], [0.0, 0.0]], [[3.0, 4.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]])
    # Padded examples get TF-Ranking's padding label -1 and a False mask.
    self.assertAllClose(labels, [[2.0, 0.0, 1.0, -1.0], [1.0, -1.0, -1.0, -1.0]])
    self.assertAllEqual(features["example_list_mask"],
                        [[True, True, True, False], [True, False, False, False]])
    self.assertAllEqual(features["query"], [[b"glucose blood"], [b"wbc count"]])
    self.assertAllEqual(features["query_id"], [[7], [9]])
    self.assertEqual(features["query_id"].dtype, tf.int64)

  def test_dynamic_list_size_pads_to_longest_list(self):
    features, labels = next(
        iter(elwc.make_dataset(InputConfig(self.path, batch_size=2, shuffle=False), _SCHEMA)))
    self.assertEqual(labels.shape, [2, 3])
    self.assertAllEqual(features["example_list_mask"], [[True, True, True], [True, False, False]])

  def test_list_size_truncates_long_lists(self):
    schema = ElwcSchema(**{**_SCHEMA.__dict__, "list_size": 2})
    _, labels = next(iter(elwc.make_dataset(InputConfig(self.path, batch_size=2, shuffle=False), schema)))
    self.assertAllClose(labels, [[2.0, 0.0], [1.0, -1.0]])

  def test_matches_tf_ranking_build_ranking_dataset(self):
    ours, labels = next(iter(elwc.make_dataset(InputConfig(self.path, batch_size=2, shuffle=False), _SCHEMA)))
    theirs = next(
        iter(
            tfr.data.build_ranking_dataset(self.path, tfr.data.ELWC, batch_size=2,
                                           context_feature_spec=_SCHEMA.context_feature_spec(),
                                           example_feature_spec=_SCHEMA.example_feature_spec(),
                                           mask_feature_name="example_list_mask", shuffle=False,
                                           num_epochs=1)))
    for key in ("doc", "score", "query", "query_id", "example_list_mask"):
      self.assertAllEqual(ours[key], theirs[key])
    self.assertAllClose(labels, tf.squeeze(theirs["label"], 2))

  def test_unsupervised_keeps_labels_in_dict(self):
    config = InputConfig(self.path, batch_size=2, shuffle=False, as_supervised=False)
    batch = next(iter(elwc.make_dataset(config, _SCHEMA)))
    self.assertAllClose(batch["label"], [[2.0, 0.0, 1.0], [1.0, -1.0, -1.0]])

  def test_read_elwc_returns_protos(self):
    self.assertEqual(list(elwc.read_elwc(self.path)), _tf_ranking_lists())

  def test_distribute_datasets_from_function_on_two_replicas(self):
    strategy = distribute.make_strategy("mirrored", ["/cpu:0", "/cpu:1"])
    dataset_fn = elwc.make_dataset_fn(InputConfig(self.path, batch_size=2, shuffle=False),
                                      ElwcSchema(**{
                                          **_SCHEMA.__dict__, "list_size": 3
                                      }))
    features, labels = next(iter(strategy.distribute_datasets_from_function(dataset_fn)))
    per_replica = strategy.experimental_local_results(labels)
    self.assertLen(per_replica, 2)
    self.assertAllClose(tf.concat(per_replica, 0), [[2.0, 0.0, 1.0], [1.0, -1.0, -1.0]])


class MakeWriteTest(tf.test.TestCase):

  def test_make_elwc_builds_tf_ranking_proto(self):
    built = elwc.make_elwc([{
        "doc": "glucose",
        "label": 2.0,
        "score": [0.5, 1.0]
    }, {
        "doc": "chloride",
        "label": 0.0,
        "score": np.array([0.25, 0.0])
    }, {
        "doc": "bilirubin",
        "label": 1.0,
        "score": (1.0, 2.0)
    }], context={
        "query": "glucose blood",
        "query_id": 7
    })
    self.assertIsInstance(built, input_pb2.ExampleListWithContext)
    self.assertEqual(built, _tf_ranking_lists()[0])

  def test_write_then_read_round_trip(self):
    path = os.path.join(self.create_tempdir().full_path, "a.tfrecord")
    self.assertEqual(elwc.write_elwc(path, _tf_ranking_lists()), 2)
    self.assertEqual(list(elwc.read_elwc(path)), _tf_ranking_lists())

  def test_make_empty_list_raises(self):
    with self.assertRaisesRegex(FieldError, "field 'examples': empty list"):
      elwc.make_elwc([], context={"query": "q"})

  def test_make_nan_label_raises(self):
    with self.assertRaisesRegex(FieldError, "field 'label'"):
      elwc.make_elwc([{"label": float("nan")}])

  def test_write_empty_list_raises_naming_file_row_field_and_leaves_no_file(self):
    folder = self.create_tempdir().full_path
    path = os.path.join(folder, "a.tfrecord")
    lists = _tf_ranking_lists() + [input_pb2.ExampleListWithContext(context=_proto_example(q=("int64", [1])))]
    with self.assertRaisesRegex(DataError, f"{path}, row 3, field 'examples': empty list"):
      elwc.write_elwc(path, lists)
    self.assertEmpty(os.listdir(folder))

  def test_to_feature_kinds(self):
    self.assertEqual(elwc.to_feature("a").bytes_list.value, [b"a"])
    self.assertEqual(elwc.to_feature([1, 2]).int64_list.value, [1, 2])
    self.assertEqual(elwc.to_feature(np.array([[0.5], [1.5]])).float_list.value, [0.5, 1.5])
    with self.assertRaisesRegex(TypeError, "Cannot store"):
      elwc.to_feature({"a": 1})


class BadListsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("empty_list", [], "field examples: empty list"),
      ("missing_label", [_proto_example(doc=("bytes", [b"x"]), score=("float", [0.0, 0.0]))
                        ], "field label: missing or negative label"),
      ("negative_label", [
          _proto_example(doc=("bytes", [b"x"]), label=("float", [-2.0]), score=("float", [0.0, 0.0]))
      ], "field label: missing or negative label"),
      ("nan_label", [
          _proto_example(doc=("bytes", [b"x"]), label=("float", [float("nan")]), score=("float", [0.0, 0.0]))
      ], "field label: NaN label"),
  )
  def test_bad_list_fails_naming_file_row_field(self, examples, message):
    bad = input_pb2.ExampleListWithContext(
        context=_proto_example(query=("bytes", [b"q"]), query_id=("int64", [1])), examples=examples)
    path = _write_raw(os.path.join(self.create_tempdir().full_path, "bad.tfrecord"),
                      _tf_ranking_lists() + [bad])
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, f"{path}, row 3, {message}"):
      list(elwc.make_dataset(InputConfig(path, batch_size=3, shuffle=False), _SCHEMA))


class SchemaTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("bad_dtype", lambda: FeatureSpec("float64"), "Unknown dtype 'float64'"),
      ("bad_shape", lambda: FeatureSpec("float32", (0,)), "positive dimensions"),
      ("bad_list_size", lambda: ElwcSchema({"a": FeatureSpec("string")}, list_size=0), "list_size"),
      ("shared_name", lambda: ElwcSchema({"a": FeatureSpec("string")}, {"a": FeatureSpec("string")}),
       "differ"),
      ("label_as_feature", lambda: ElwcSchema({"label": FeatureSpec("float32")}), "label_key"),
  )
  def test_invalid_schema_raises(self, make, message):
    with self.assertRaisesRegex(ValueError, message):
      make()

  def test_feature_spec_defaults(self):
    spec = FeatureSpec("float32", (2,)).to_tf()
    self.assertEqual(spec, tf.io.FixedLenFeature([2], tf.float32, default_value=[0.0, 0.0]))
    label_spec = _SCHEMA.example_feature_spec()["label"]
    self.assertEqual(label_spec.default_value, [elwc.PADDING_LABEL])



def _antique_style_list(query_tokens: list[bytes], docs: list[tuple[list[bytes], int]]) -> input_pb2.ExampleListWithContext:
  """A list as TF-Ranking's ANTIQUE example writes it: token lists, an int64 `relevance` label."""
  elwc_proto = input_pb2.ExampleListWithContext()
  elwc_proto.context.CopyFrom(_proto_example(query_tokens=("bytes", query_tokens)))
  for tokens, relevance in docs:
    elwc_proto.examples.add().CopyFrom(
        _proto_example(document_tokens=("bytes", tokens), relevance=("int64", [relevance])))
  return elwc_proto


class ReadTextListsTest(tf.test.TestCase):

  def test_reads_token_lists_queries_and_a_custom_label_key(self):
    path = _write_raw(os.path.join(self.create_tempdir().full_path, "antique.tfrecord"), [
        _antique_style_list([b"why", b"sky", b"blue"], [([b"rayleigh", b"scattering"], 4), ([b"no", b"idea"], 1)]),
        _antique_style_list([b"tea"], [([b"green", b"tea"], 3)])])
    lists = elwc.read_text_lists(path, label_key="relevance")
    self.assertEqual([(t.row, t.query, t.texts, t.labels) for t in lists],
                     [(1, "why sky blue", ["rayleigh scattering", "no idea"], [4.0, 1.0]),
                      (2, "tea", ["green tea"], [3.0])])
    self.assertEqual([t.query for t in elwc.read_text_lists(path, "relevance", query_key=None)], [None, None])

  def test_default_label_key_names_what_the_example_has(self):
    path = _write_raw(os.path.join(self.create_tempdir().full_path, "antique.tfrecord"),
                      [_antique_style_list([b"tea"], [([b"green"], 3)])])
    with self.assertRaisesRegex(DataError, r"antique.tfrecord, row 1, field 'label': example 1 has no 'label' \(its "
                                r"features: \{'document_tokens': 'bytes_list', 'relevance': 'int64_list'\}\); "
                                r"expected the label of every example; name it with --label_key\."):
      elwc.read_text_lists(path)

  def test_numeric_elwc_given_to_a_text_reader_is_one_clear_error(self):
    path = _write_raw(os.path.join(self.create_tempdir().full_path, "mslr.tfrecord"), _tf_ranking_lists())
    with self.assertRaisesRegex(DataError, r"row 1, field 'score': example 1 has 'score' as float_list; expected "
                                r"text"):
      elwc.read_text_lists(path, label_key="label", text_key="score", query_key="query")

  def test_no_matching_file_names_the_pattern(self):
    with self.assertRaisesRegex(FileNotFoundError, "nothing-\\*.tfrecord: no TFRecord file matches"):
      elwc.read_text_lists(os.path.join(self.create_tempdir().full_path, "nothing-*.tfrecord"))

if __name__ == "__main__":
  tf.test.main()
