"""Tests for rank4class_data.records.elwc: ELWC ranking lists written with TF-Ranking's protos, read via
tfr.data."""

import os
import re
from typing import Any

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from tensorflow_serving.apis import input_pb2

from rank4class_data.records import elwc, tfrecords
from rank4class_data.records.elwc import ElwcSchema, FeatureSpec
from rank4class_data.records.tfrecords import InputConfig
from rank4class_data.tf_ranking import tfr
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


_GOOD_EXAMPLE = _proto_example(doc=("bytes", [b"x"]), label=("float", [1.0]), score=("float", [0.0, 0.0]))

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
    config = InputConfig(self.path, batch_size=2, shuffle=False)
    schema = ElwcSchema(**{**_SCHEMA.__dict__, "list_size": 3})
    features, labels = next(iter(strategy.distribute_datasets_from_function(
        lambda context: elwc.make_dataset(config, schema, context))))
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
      ("missing_label", [_GOOD_EXAMPLE, _proto_example(doc=("bytes", [b"x"]), score=("float", [0.0, 0.0]))],
       r"example 2, field label: missing feature; expected label \(float_list\) in every example\."),
      ("negative_label", [
          _proto_example(doc=("bytes", [b"x"]), label=("float", [-2.0]), score=("float", [0.0, 0.0]))
      ], r"example 1, field label: negative label; expected a relevance label >= 0\."),
      ("nan_label", [
          _proto_example(doc=("bytes", [b"x"]), label=("float", [float("nan")]), score=("float", [0.0, 0.0]))
      ], r"example 1, field label: NaN label; expected a finite relevance label\."),
      ("missing_feature",
       [_GOOD_EXAMPLE, _GOOD_EXAMPLE, _proto_example(doc=("bytes", [b"x"]), label=("float", [1.0]))],
       r"example 3, field score: missing feature; expected score \(float_list\) in every example\."),
      ("string_label",
       [_proto_example(doc=("bytes", [b"x"]), label=("bytes", [b"good"]), score=("float", [0.0, 0.0]))],
       r"example 1, field label: bytes_list values; expected float_list values\."),
      ("short_vector",
       [_proto_example(doc=("bytes", [b"x"]), label=("float", [1.0]), score=("float", [0.0]))],
       r"example 1, field score: 1 values; expected 2 values\."),
  )
  def test_bad_list_fails_naming_file_row_example_field(self, examples, message):
    bad = input_pb2.ExampleListWithContext(
        context=_proto_example(query=("bytes", [b"q"]), query_id=("int64", [1])), examples=examples)
    path = _write_raw(os.path.join(self.create_tempdir().full_path, "bad.tfrecord"),
                      _tf_ranking_lists() + [bad])
    with self.assertRaises(tf.errors.InvalidArgumentError) as caught:
      list(elwc.make_dataset(InputConfig(path, batch_size=3, shuffle=False), _SCHEMA))
    # The one line a binary prints (`rank4class_cli.cli.guard`).
    self.assertRegex(tfrecords.located_data_problem(caught.exception),
                     f"^{re.escape(path)}, row 3, {message}$")

  def test_empty_list_fails_naming_file_and_row(self):
    bad = input_pb2.ExampleListWithContext(context=_proto_example(query=("bytes", [b"q"]),
                                                                  query_id=("int64", [1])))
    path = _write_raw(os.path.join(self.create_tempdir().full_path, "bad.tfrecord"),
                      _tf_ranking_lists() + [bad])
    with self.assertRaises(tf.errors.InvalidArgumentError) as caught:
      list(elwc.make_dataset(InputConfig(path, batch_size=3, shuffle=False), _SCHEMA))
    self.assertEqual(tfrecords.located_data_problem(caught.exception), f"{path}, row 3, field examples: "
                     "empty list (no examples); expected at least one example per list.")

  def test_record_that_is_no_list_is_located(self):
    path = _write_raw(os.path.join(self.create_tempdir().full_path, "bad.tfrecord"), _tf_ranking_lists())
    with tf.io.TFRecordWriter(path + ".tmp") as writer:
      for record in tfrecords.read_tfrecord(path):
        writer.write(record)
      writer.write(b"\x0a\xff\xff\xffgarbage")
    os.replace(path + ".tmp", path)
    with self.assertRaises(tf.errors.DataLossError) as caught:  # tf.io.decode_proto names no file and no row.
      list(elwc.make_dataset(InputConfig(path, batch_size=3, shuffle=False), _SCHEMA))
    self.assertEqual(elwc.located_undecodable_list(caught.exception),
                     f"{path}, row 3: not an ExampleListWithContext record (it does not parse); expected "
                     "ELWC ranking lists (is the input format right?).")
    self.assertIsNone(elwc.located_undecodable_list(tf.errors.DataLossError(None, None,
                                                                            "truncated record at 5")))

  def test_missing_context_feature_fails_naming_the_list(self):
    bad = input_pb2.ExampleListWithContext(context=_proto_example(query=("bytes", [b"q"])),
                                           examples=[_GOOD_EXAMPLE])
    path = _write_raw(os.path.join(self.create_tempdir().full_path, "bad.tfrecord"),
                      _tf_ranking_lists() + [bad])
    with self.assertRaises(tf.errors.InvalidArgumentError) as caught:
      list(elwc.make_dataset(InputConfig(path, batch_size=3, shuffle=False), _SCHEMA))
    self.assertEqual(tfrecords.located_data_problem(caught.exception), f"{path}, row 3, context, field "
                     "query_id: missing feature; expected query_id (int64_list) in every list's context.")


def _class_list(instance: str | None, candidates: list[tuple[Any, Any]], text_key: str = "text",
                class_id_key: str = "class_id") -> input_pb2.ExampleListWithContext:
  """One list as `rank4class-evaluate --input_format=elwc` reads it: the instance text in the context, one
  (class id, relevance) per candidate, each stored as the kind its Python type gives (None: left out)."""
  kinds = {str: "bytes", bytes: "bytes", int: "int64", float: "float"}
  context = {text_key: ("bytes", [instance.encode()])} if instance is not None else {"other": ("bytes",
                                                                                               [b"x"])}
  examples = []
  for class_id, relevance in candidates:
    features = {"relevance": (kinds[type(relevance)], [relevance])}
    if class_id is not None:
      features[class_id_key] = (kinds[type(class_id)], [class_id])
    examples.append(_proto_example(**features))
  return input_pb2.ExampleListWithContext(context=_proto_example(**context), examples=examples)


# The schema `rank4class_data.labelled_records.elwc_schema` builds for a text model: both features required.
_CLASS_LIST_SCHEMA = ElwcSchema(example_features={"class_id": FeatureSpec("int64", (1,))},
                                context_features={"text": FeatureSpec("string", (1,))}, label_key="relevance",
                                list_size=3)


class RequiredFeaturesTest(tf.test.TestCase, parameterized.TestCase):
  """Lists lacking what the model reads fail with one located message instead of reading as zeros."""

  def _read(self, lists, schema=_CLASS_LIST_SCHEMA):
    path = _write_raw(os.path.join(self.create_tempdir().full_path, "lists.tfrecord"), lists)
    batches = list(elwc.make_dataset(InputConfig(path, batch_size=2, shuffle=False), schema))
    return path, batches

  def _error(self, lists, schema=_CLASS_LIST_SCHEMA) -> tuple[str, str]:
    path = _write_raw(os.path.join(self.create_tempdir().full_path, "lists.tfrecord"), lists)
    with self.assertRaises(tf.errors.InvalidArgumentError) as caught:
      list(elwc.make_dataset(InputConfig(path, batch_size=2, shuffle=False), schema))
    return path, tfrecords.located_data_problem(caught.exception)

  def test_lists_with_the_keys_read_as_written(self):
    _, batches = self._read([_class_list("a b", [(0, 1.0), (2, 0.0)]), _class_list("c", [(1, 1.0)])])
    features, labels = batches[0]
    self.assertAllEqual(features["text"], [[b"a b"], [b"c"]])
    # Padded positions keep their padding defaults: class id 0, label -1, mask False.
    self.assertAllEqual(features["class_id"][..., 0], [[0, 2, 0], [1, 0, 0]])
    self.assertAllClose(labels, [[1.0, 0.0, -1.0], [1.0, -1.0, -1.0]])
    self.assertAllEqual(features["example_list_mask"], [[True, True, False], [True, False, False]])

  def test_examples_without_the_class_id_key_fail(self):
    path, message = self._error([_class_list("a", [(0, 1.0), (1, 0.0)]),
                                 _class_list("b", [(0, 1.0), (None, 0.0)])])
    self.assertEqual(message, f"{path}, row 2, example 2, field class_id: missing feature; expected class_id "
                     "(int64_list) in every example.")

  def test_lists_without_the_feature_key_fail(self):
    path, message = self._error([_class_list("a", [(0, 1.0)]), _class_list("b", [(1, 1.0)]),
                                 _class_list(None, [(0, 1.0)])])
    self.assertEqual(message, f"{path}, row 3, context, field text: missing feature; expected text "
                     "(bytes_list) in every list's context.")

  def test_optional_feature_reads_its_default(self):
    schema = ElwcSchema(example_features={"class_id": FeatureSpec("int64")},
                        context_features={"text": FeatureSpec("string"),
                                          "weight": FeatureSpec("float32", default_value=0.5,
                                                                required=False)},
                        label_key="relevance")
    _, batches = self._read([_class_list("a", [(0, 1.0)])], schema)
    self.assertAllClose(batches[0][0]["weight"], [[0.5]])

  def test_int64_labels_and_whole_float_class_ids_read_as_training_reads_them(self):
    # TF-Ranking's ANTIQUE writes int64 relevance; `class_lists` (training) accepts it and whole-float class
    # ids.
    _, batches = self._read([_class_list("a", [(2.0, 3), (0.0, 0)]), _class_list("b", [(1.0, 1)])])
    features, labels = batches[0]
    self.assertEqual(features["class_id"].dtype, tf.int64)
    self.assertAllEqual(features["class_id"][..., 0], [[2, 0, 0], [1, 0, 0]])
    self.assertEqual(labels.dtype, tf.float32)
    self.assertAllClose(labels, [[3.0, 0.0, -1.0], [1.0, -1.0, -1.0]])

  @parameterized.named_parameters(
      ("fractional_class_id", [_class_list("a", [(2.0, 1.0)]), _class_list("b", [(1.0, 1.0), (0.5, 0.0)])],
       "row 2, example 2, field class_id: a fractional value; expected whole numbers (int64_list, or "
       "float_list holding integers)."),
      ("class_name_for_an_id", [_class_list("a", [(1, 1.0)]), _class_list("b", [(b"sports", 1.0)])],
       "row 2, example 1, field class_id: bytes_list values; expected int64_list values."),
      ("float_id_after_int_ids", [_class_list("a", [(1, 1.0)]), _class_list("b", [(0, 1.0), (3.0, 0.0)])],
       "row 2, example 2, field class_id: float_list values; expected int64_list values."),
  )
  def test_class_ids_of_another_type_fail(self, lists, message):
    path, located = self._error(lists)
    self.assertEqual(located, f"{path}, {message}")

  def test_a_tf_example_file_is_no_elwc(self):
    path = os.path.join(self.create_tempdir().full_path, "examples.tfrecord")
    tfrecords.write_tfrecord(path, [_proto_example(label=("int64", [1]), text=("bytes", [b"a"]))])
    with self.assertRaisesRegex(DataError, re.escape(f"{path}, row 1: not an ExampleListWithContext record "
                                                     "(it does not parse); expected ELWC ranking lists (is "
                                                     "the input format right?).")):
      elwc.make_dataset(InputConfig(path, batch_size=2, shuffle=False), _CLASS_LIST_SCHEMA)


class SchemaTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("bad_dtype", lambda: FeatureSpec("float64"), r"`dtype` must be one of \[.*\], got 'float64'"),
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

  def test_required_features_are_checked_without_a_default(self):
    self.assertTrue(FeatureSpec("int64").required)
    self.assertEqual(FeatureSpec("int64").check_spec(), tf.io.FixedLenFeature([1], tf.int64))
    optional = FeatureSpec("int64", default_value=7, required=False)
    self.assertEqual(optional.check_spec(), tf.io.FixedLenFeature([1], tf.int64, default_value=[7]))
    # Stored as floats: parsed as floats, the padding default too.
    self.assertEqual(FeatureSpec("int64").to_tf("float32"),
                     tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0]))



def _antique_style_list(
  query_tokens: list[bytes], docs: list[tuple[list[bytes], int]]
) -> input_pb2.ExampleListWithContext:
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
        _antique_style_list([b"why", b"sky", b"blue"],
                            [([b"rayleigh", b"scattering"], 4), ([b"no", b"idea"], 1)]),
        _antique_style_list([b"tea"], [([b"green", b"tea"], 3)])])
    lists = elwc.read_text_lists(path, label_key="relevance")
    self.assertEqual([(t.row, t.query, t.texts, t.labels) for t in lists],
                     [(1, "why sky blue", ["rayleigh scattering", "no idea"], [4.0, 1.0]),
                      (2, "tea", ["green tea"], [3.0])])
    self.assertEqual([t.query for t in elwc.read_text_lists(path, "relevance", query_key=None)], [None, None])

  def test_default_label_key_names_what_the_example_has(self):
    path = _write_raw(os.path.join(self.create_tempdir().full_path, "antique.tfrecord"),
                      [_antique_style_list([b"tea"], [([b"green"], 3)])])
    with self.assertRaisesRegex(DataError, r"antique.tfrecord, row 1, field 'label': example 1 has no "
                                r"'label' \(its features: \{'document_tokens': 'bytes_list', 'relevance': "
                                r"'int64_list'\}\); expected the label of every example; name it "
                                r"with `label_key`\."):
      elwc.read_text_lists(path)

  def test_numeric_elwc_given_to_a_text_reader_is_one_clear_error(self):
    path = _write_raw(os.path.join(self.create_tempdir().full_path, "mslr.tfrecord"), _tf_ranking_lists())
    with self.assertRaisesRegex(DataError, r"row 1, field 'score': example 1 has 'score' as float_list; "
                                r"expected text"):
      elwc.read_text_lists(path, label_key="label", text_key="score", query_key="query")

  def test_no_matching_file_names_the_pattern(self):
    with self.assertRaisesRegex(FileNotFoundError, "nothing-\\*.tfrecord: no TFRecord file matches"):
      elwc.read_text_lists(os.path.join(self.create_tempdir().full_path, "nothing-*.tfrecord"))

if __name__ == "__main__":
  tf.test.main()
