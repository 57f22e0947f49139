"""Ranking lists as TF-Ranking's ExampleListWithContext (ELWC) TFRecords, read through `tfr.data`."""

import dataclasses
import functools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from google.protobuf import descriptor_pb2
from tensorflow_serving.apis import input_pb2

# `elwc.make_dataset`: the one pipeline (`input_pipeline`), which `ElwcSchema.batch_parser` parses.
from rank4class_data.records.input_pipeline import (  # noqa: F401
  InputConfig,
  ParseBatchFn,
  assert_valid,
  first_unparsable_record,
  make_dataset,
  record_names,
)
from rank4class_data.records.tfrecord_files import PROTO_PARSE_ERRORS, read_tfrecord, write_tfrecord
from rank4class_data.tf_ranking import tfr
from rank4class_data.validation import DataError, FieldError, check_choice, check_range

LABEL_KEY = "label"
MASK_KEY = "example_list_mask"
# TF-Ranking ignores examples whose label is negative: padded examples get this label.
PADDING_LABEL = -1.0
DTYPES = {"string": tf.string, "int64": tf.int64, "float32": tf.float32}
_SIZE_KEY = "__list_size__"

# A feature value: one scalar, or a list or 1-D array of them (str/bytes, int, float).
FeatureValue = str | bytes | int | float | Sequence[Any] | np.ndarray


@dataclasses.dataclass
class FeatureSpec:
  """A fixed-length context or example feature.

  Example:
    FeatureSpec("int64")  # Required: a real example without it fails reading, naming file, list and example.
    FeatureSpec("float32", (3,), default_value=0.0, required=False)  # Optional: missing reads as 0.0.

  Attributes:
    dtype: "string", "int64" or "float32".
    shape: Feature shape, e.g. [1] for a scalar, [dim] for a vector.
    default_value: Value of padded examples (and, when the feature is optional, of real examples or contexts
      lacking it); None for "" / 0 / 0.0.
    required: Every real example (for a context feature: every list's context) must hold the feature; a
      missing one fails reading with the file, list (row), example and key. False declares the feature
      optional.
  """

  dtype: str
  shape: tuple[int, ...] = (1,)
  default_value: Any = None
  required: bool = True

  def __post_init__(self):
    check_choice("dtype", self.dtype, DTYPES)
    self.shape = tuple(int(d) for d in self.shape)
    if any(d < 1 for d in self.shape):
      raise ValueError(f"`shape` must have positive dimensions, got {self.shape}.")

  def to_tf(self, stored_dtype: str | None = None) -> tf.io.FixedLenFeature:
    """The parsing spec with `default_value` (padded positions get it).

    Args:
      stored_dtype: "int64" or "float32" when the files store this numeric feature as the other numeric type
        (see `make_dataset`); None for `dtype`.
    """
    dtype = stored_dtype or self.dtype
    default = self.default_value
    if default is None:
      default = {"string": "", "int64": 0, "float32": 0.0}[self.dtype]
    size = math.prod(self.shape)
    if np.ndim(default) == 0:
      default = [default] * size
    if dtype != self.dtype:
      default = np.asarray(default).astype(DTYPES[dtype].as_numpy_dtype).tolist()
    return tf.io.FixedLenFeature(list(self.shape), DTYPES[dtype], default_value=default)

  def check_spec(self, stored_dtype: str | None = None) -> tf.io.FixedLenFeature:
    """The spec that checks real examples (or contexts): without a default when the feature is required, so a
    missing one fails parsing; a value of another type or length fails either way."""
    if not self.required:
      return self.to_tf(stored_dtype)
    return tf.io.FixedLenFeature(list(self.shape), DTYPES[stored_dtype or self.dtype])


@dataclasses.dataclass
class ElwcSchema:
  """The features of ELWC ranking lists and how `tfr.data` pads them.

  Attributes:
    example_features: Per-example features (besides the label), parsed to [batch_size, list_size, *shape].
    context_features: Per-list features, parsed to [batch_size, *shape].
    label_key: Per-example relevance label (float, or int64 as TF-Ranking's ANTIQUE writes it), required in
      every real example; padded examples get PADDING_LABEL (-1).
    list_size: Pad or truncate every list to this size; None for the longest list in the batch.
    mask_key: Name of the bool [batch_size, list_size] mask of real (not padded) examples.
    shuffle_examples: Shuffle examples within a list before truncating to `list_size`.
    seed: Seed for `shuffle_examples`.
  """

  example_features: dict[str, FeatureSpec]
  context_features: dict[str, FeatureSpec] = dataclasses.field(default_factory=dict)
  label_key: str = LABEL_KEY
  list_size: int | None = None
  mask_key: str = MASK_KEY
  shuffle_examples: bool = False
  seed: int | None = None

  def __post_init__(self):
    if self.list_size is not None:
      check_range("list_size", self.list_size, 1, integer=True)
    overlap = set(self.example_features) & set(self.context_features)
    if overlap or self.label_key in self.context_features:
      raise ValueError(f"Context and example feature names must differ, both have {sorted(overlap)}.")
    if self.label_key in self.example_features:
      raise ValueError(f"Give the label only as `label_key` ({self.label_key!r}), not in `example_features`.")

  def label_feature(self) -> FeatureSpec:
    """The label as a feature: one float32, required in every real example, PADDING_LABEL when padded."""
    return FeatureSpec("float32", (1,), default_value=PADDING_LABEL)

  def example_feature_spec(self, stored: Mapping[str, str] | None = None) -> dict[str, tf.io.FixedLenFeature]:
    """`tfr.data`'s example spec (the label included); `stored`: key -> the numeric type the files hold."""
    stored = stored or {}
    features = {**self.example_features, self.label_key: self.label_feature()}
    return {name: feature.to_tf(stored.get(name)) for name, feature in features.items()}

  def context_feature_spec(self, stored: Mapping[str, str] | None = None) -> dict[str, tf.io.FixedLenFeature]:
    """`tfr.data`'s context spec; `stored` as in `example_feature_spec`."""
    stored = stored or {}
    return {name: feature.to_tf(stored.get(name)) for name, feature in self.context_features.items()}

  def batch_parser(self, config: InputConfig) -> ParseBatchFn:
    """The parser `input_pipeline.make_dataset` uses: `parse_batch_fn` with the numeric types the first file
    stores (`stored_numeric_types`), read as stored, then cast."""
    return parse_batch_fn(self, config.as_supervised, stored_numeric_types(self, config.files()[0]))


def to_feature(value: FeatureValue) -> tf.train.Feature:
  """A `tf.train.Feature` from a scalar or a list/array of str, bytes, int or float."""
  values = np.asarray(value).reshape([-1]).tolist() if isinstance(
      value, np.ndarray) else (list(value) if isinstance(value, (list, tuple)) else [value])
  if all(isinstance(v, (str, bytes)) for v in values):
    return tf.train.Feature(bytes_list=tf.train.BytesList(
        value=[v.encode("utf-8") if isinstance(v, str) else v for v in values]))
  if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
  if all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))
  raise TypeError(f"Cannot store {value!r} as a feature; expected str, bytes, int or float values.")


def _example(features: Mapping[str, FeatureValue]) -> tf.train.Example:
  return tf.train.Example(features=tf.train.Features(feature={k: to_feature(v) for k, v in features.items()}))


def make_elwc(examples: Sequence[Mapping[str, FeatureValue]],
              context: Mapping[str, FeatureValue] | None = None) -> input_pb2.ExampleListWithContext:
  """Builds one ranking list: a context `tf.Example` and one `tf.Example` per candidate.

  Example:
    make_elwc([{"doc": "a b", "label": 2.0}, {"doc": "c", "label": 0.0}], context={"query": "a"})

  Raises:
    FieldError: for an empty list (no examples), or a NaN label.
  """
  if not examples:
    raise FieldError("examples", "empty list (no examples)", "at least one example per list")
  for i, example in enumerate(examples):
    label = example.get(LABEL_KEY)
    if label is not None and np.any(~np.isfinite(np.asarray(label, np.float64))):
      raise FieldError(LABEL_KEY, f"example {i} has label {label}", "a finite relevance label >= 0")
  return input_pb2.ExampleListWithContext(context=_example(context or {}),
                                          examples=[_example(example) for example in examples])


def write_elwc(path: str, lists: Iterable[input_pb2.ExampleListWithContext]) -> int:
  """Writes ELWC lists to a TFRecord, all or nothing; an empty list raises DataError (row = its index).

  Returns:
    The number of lists written.
  """

  def checked():
    for row, elwc in enumerate(lists, start=1):
      if not elwc.examples:
        raise DataError(path, "empty list (no examples)", row=row, field="examples",
                        expected="at least one example per list")
      yield elwc

  return write_tfrecord(path, checked())


def read_elwc(path: str) -> Iterator[input_pb2.ExampleListWithContext]:
  """Yields the ELWC lists of a TFRecord file, in order.

  Raises:
    FileNotFoundError / DataError: as `tfrecord_files.read_tfrecord`; DataError naming the row of a record
      that is not an ELWC proto.
  """
  for row, record in enumerate(read_tfrecord(path), start=1):
    try:
      elwc = input_pb2.ExampleListWithContext.FromString(record)
    except PROTO_PARSE_ERRORS:
      raise DataError(path, _NOT_AN_ELWC[0], row=row, expected=_NOT_AN_ELWC[1]) from None
    yield elwc


_NOT_AN_ELWC = ("not an ExampleListWithContext record (it does not parse)",
                "ELWC ranking lists (is the input format right?)")


def _parses_as_elwc(record: bytes) -> bool:
  try:
    input_pb2.ExampleListWithContext.FromString(record)
  except PROTO_PARSE_ERRORS:
    return False
  return True


def located_undecodable_list(error: BaseException) -> str | None:
  """`<path>, row <row>: not an ExampleListWithContext record ...` for the error of `tf.io.decode_proto` (an
  ELWC pipeline's parse, which names neither file nor record) on a record that is no ELWC, or None."""
  if not isinstance(error, tf.errors.DataLossError) or "DecodeProto" not in str(error):
    return None
  found = first_unparsable_record(_parses_as_elwc)
  if found is None:
    return None
  return str(DataError(found[0], _NOT_AN_ELWC[0], row=found[1], expected=_NOT_AN_ELWC[1]))


@dataclasses.dataclass
class TextList:
  """One ranking list of texts read from ELWC.

  Attributes:
    path, row: Where the list is (row = 1-based record number in the file).
    query: The context's query text, or None when the context has no `query_key`.
    texts: One text per example.
    labels: One relevance number per example.
  """

  path: str
  row: int
  query: str | None
  texts: list[str]
  labels: list[float]


def feature_numbers(feature: tf.train.Feature, path: str, row: int, key: str, where: str) -> list[float]:
  """The values of a float or int64 feature; DataError naming file, list (row), `where` and key otherwise."""
  kind = feature.WhichOneof("kind")
  if kind not in ("float_list", "int64_list"):
    raise DataError(path, f"{where} has {key!r} as {kind or 'an empty feature'}", row=row, field=key,
                    expected="numbers (float_list or int64_list)")
  return [float(v) for v in getattr(feature, kind).value]


def one_number(feature: tf.train.Feature, path: str, row: int, key: str, where: str) -> float:
  """The single number of a float or int64 feature; DataError for another kind or count."""
  values = feature_numbers(feature, path, row, key, where)
  if len(values) != 1:
    raise DataError(path, f"{where} has {len(values)} values for {key!r}", row=row, field=key,
                    expected="exactly one number")
  return values[0]


def _text(feature, path: str, row: int, key: str, where: str) -> str:
  if feature.WhichOneof("kind") != "bytes_list" or not feature.bytes_list.value:
    raise DataError(path, f"{where} has {key!r} as {feature.WhichOneof('kind') or 'an empty feature'}",
                    row=row, field=key, expected="text (bytes_list: one string, or tokens joined by spaces)")
  return " ".join(v.decode("utf-8") for v in feature.bytes_list.value)


def read_text_lists(file_pattern: str, label_key: str = LABEL_KEY, text_key: str = "document_tokens",
                    query_key: str | None = "query_tokens") -> list[TextList]:
  """Reads text ranking lists from ELWC files, as TF-Ranking's text examples write them (e.g. ANTIQUE: context
  `query_tokens`, examples `document_tokens` and a `relevance` label).

  Args:
    file_pattern: Comma-separated globs of ELWC TFRecord files.
    label_key: Example feature holding the relevance (one number >= 0).
    text_key: Example feature holding the text (one string, or a token list joined by spaces).
    query_key: Context feature holding the query text; None, or a key the context lacks, gives lists without a
      query.

  Raises:
    FileNotFoundError: naming the pattern when no file matches.
    DataError: naming file, list (row), example and key for an example without the label or text, a label that
      is not one number >= 0, a text feature that is not text (a numeric-feature ELWC), or an empty list.
  """
  lists = []
  for path in InputConfig(file_pattern).files():
    for row, elwc in enumerate(read_elwc(path), start=1):
      if not elwc.examples:
        raise DataError(path, "empty list (no examples)", row=row, field="examples",
                        expected="at least one example")
      context = elwc.context.features.feature
      query = _text(context[query_key], path, row, query_key, "the context") \
          if query_key and query_key in context else None
      texts, labels = [], []
      for position, example in enumerate(elwc.examples, start=1):
        values = example.features.feature
        where = f"example {position}"
        for key in (label_key, text_key):
          if key not in values:
            kinds = {k: v.WhichOneof("kind") for k, v in sorted(values.items())}
            raise DataError(path, f"{where} has no {key!r} (its features: {kinds})", row=row, field=key,
                            expected=f"the {'label' if key == label_key else 'text'} of every example; name "
                            f"it with `{'label_key' if key == label_key else 'text_key'}`")
        label = one_number(values[label_key], path, row, label_key, where)
        if not math.isfinite(label) or label < 0:
          raise DataError(path, f"{where} has label {label}", row=row, field=label_key,
                          expected="one relevance number >= 0")
        labels.append(label)
        texts.append(_text(values[text_key], path, row, text_key, where))
      lists.append(TextList(path, row, query, texts, labels))
  return lists


@functools.cache
def _elwc_descriptors() -> bytes:
  """`tf.io.decode_proto`'s descriptor source for TF-Ranking's ExampleListWithContext (and its imports)."""
  files = descriptor_pb2.FileDescriptorSet()
  added = set()

  def add(file):
    if file.name not in added:
      added.add(file.name)
      for dependency in file.dependencies:
        add(dependency)
      file.CopyToProto(files.file.add())

  add(input_pb2.DESCRIPTOR)
  return b"bytes://" + files.SerializeToString()


def _lists(serialized: tf.Tensor, paths: tf.Tensor,
           rows: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
  """The parts of serialized ELWCs [batch_size]: contexts [batch_size], and per real (not padded) example
  [num_examples] its serialized `tf.Example`, its name `<path>, row <row>, example <position>` (for
  `tf.io.parse_example`'s errors), file, row (list) and 1-based position in the list."""
  sizes, (contexts, examples) = tf.io.decode_proto(
      serialized, input_pb2.ExampleListWithContext.DESCRIPTOR.full_name, ["context", "examples"],
      [tf.string, tf.string], descriptor_source=_elwc_descriptors())
  examples = tf.RaggedTensor.from_tensor(examples, lengths=sizes[:, 1])
  lists = examples.value_rowids()
  positions = tf.range(tf.size(examples.flat_values, out_type=tf.int64)) - tf.gather(examples.row_starts(),
                                                                                     lists) + 1
  # One prefix per list, not per example: names are built for every batch, and used only when one is bad.
  prefixes = record_names(paths, rows, ", example ")
  names = tf.strings.join([tf.gather(prefixes, lists), tf.strings.as_string(positions)])
  return (tf.reshape(contexts, [-1]), examples.flat_values, names, tf.gather(paths, lists),
          tf.gather(rows, lists), positions)


def _whole_numbers(values: tf.Tensor, paths: tf.Tensor, rows: tf.Tensor, key: str,
                   positions: tf.Tensor | None = None) -> tf.Operation:
  """Fails naming the first record whose float `values` (int64 features stored as floats) are fractional."""
  return assert_valid(tf.equal(values, tf.round(values)), paths, rows, key,
                                "a fractional value; expected whole numbers (int64_list, or float_list "
                                "holding integers)", positions)


def _check_specs(schema: ElwcSchema,
                 stored: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
  """`parse_batch_fn`'s parse specs of the example checks and of the contexts, and the int64 features the
  files hold as floats (their values must be whole numbers)."""
  example_checks = {name: feature.check_spec(stored.get(name))
                    for name, feature in {**schema.example_features,
                                          schema.label_key: schema.label_feature()}.items()}
  context_spec = {name: feature.check_spec(stored.get(name))
                  for name, feature in schema.context_features.items()}
  # int64 features the files hold as floats: their values must be whole numbers.
  fractional = [key for key, dtype in stored.items()
                if dtype == "float32" and key in {**schema.example_features, **schema.context_features}]
  return example_checks, context_spec, fractional


def _example_checks(schema: ElwcSchema, example_checks: dict[str, Any], fractional: list[str],
                    examples: tf.Tensor, names: tf.Tensor, example_paths: tf.Tensor, example_rows: tf.Tensor,
                    where: tf.Tensor) -> list[tf.Operation]:
  """The checks of every real example: required features present, labels >= 0 and finite, whole numbers."""
  # The checks use the parsed values, so TensorFlow cannot prune the parse that reports missing features.
  checked = tf.io.parse_example(examples, example_checks, example_names=names)
  real_labels = tf.cast(checked[schema.label_key], tf.float32)
  checks = [
      assert_valid((real_labels >= 0) | tf.math.is_nan(real_labels), example_paths, example_rows,
                             schema.label_key, "negative label; expected a relevance label >= 0", where),
      assert_valid(tf.math.is_finite(real_labels), example_paths, example_rows, schema.label_key,
                             "NaN label; expected a finite relevance label", where),
  ]
  checks += [_whole_numbers(checked[key], example_paths, example_rows, key, where)
             for key in fractional if key in schema.example_features]
  return checks


def parse_batch_fn(schema: ElwcSchema, as_supervised: bool = True,
                   stored: Mapping[str, str] | None = None) -> ParseBatchFn:
  """Returns the function that parses a batch of serialized ELWCs with `tfr.data` and validates it.

  Example features are parsed by `tfr.data.make_parsing_fn(tfr.data.ELWC, ...)`, so files written by
  TF-Ranking users read the same; contexts by `tf.io.parse_example` with the same spec, naming the list in its
  errors. The result has example features [batch_size, list_size, *shape], context features [batch_size,
  *shape], the mask bool [batch_size, list_size] under `schema.mask_key`, and labels float32 [batch_size,
  list_size] with PADDING_LABEL at padded positions: (features, labels) when `as_supervised`, else labels join
  the dict.

  Every real example is checked before `tfr.data` parses the lists (padded positions never are): a list
  without examples; a real example without the label or a required example feature, or a context without a
  required context feature; a feature of another type or length; a negative or NaN label; or a fractional
  value where whole numbers are stored as floats fails the pipeline with tf.errors.InvalidArgumentError naming
  the file, row (list), example and field (`input_pipeline.located_data_problem` reads it).

  Args:
    schema: The features.
    as_supervised: Return (features, labels); else one dict.
    stored: Numeric features (or the label) that the files hold as the other numeric type than declared (key
      -> "int64" or "float32", from `stored_numeric_types`): parsed as stored, then cast to the declared type.
  """
  stored = dict(stored or {})
  parse_elwc = tfr.data.make_parsing_fn(tfr.data.ELWC, list_size=schema.list_size,
                                        example_feature_spec=schema.example_feature_spec(stored),
                                        size_feature_name=_SIZE_KEY, mask_feature_name=schema.mask_key,
                                        shuffle_examples=schema.shuffle_examples, seed=schema.seed)
  example_checks, context_spec, fractional = _check_specs(schema, stored)

  def parse(paths, rows, serialized):
    contexts, examples, names, example_paths, example_rows, where = _lists(serialized, paths, rows)
    checks = _example_checks(schema, example_checks, fractional, examples, names, example_paths, example_rows,
                             where)
    with tf.control_dependencies(checks):
      serialized = tf.identity(serialized)
    features = parse_elwc(serialized)
    if context_spec:
      features.update(tf.io.parse_example(contexts, context_spec,
                                          example_names=record_names(paths, rows, ", context")))
    checks = [assert_valid(features.pop(_SIZE_KEY) > 0, paths, rows, "examples",
                                     "empty list (no examples); expected at least one example per list")]
    checks += [_whole_numbers(features[key], paths, rows, key) for key in fractional if key in context_spec]
    for key in stored:
      if key != schema.label_key:
        feature = schema.example_features.get(key) or schema.context_features[key]
        features[key] = tf.cast(features[key], DTYPES[feature.dtype])
    with tf.control_dependencies(checks):
      labels = tf.cast(tf.squeeze(features.pop(schema.label_key), axis=2), tf.float32)
    if not as_supervised:
      return {**features, schema.label_key: labels}
    return features, labels

  return parse


_NUMERIC_KINDS = {"float_list": "float32", "int64_list": "int64"}


def stored_numeric_types(schema: ElwcSchema, path: str) -> dict[str, str]:
  """The numeric features (and the label) that the first list of `path` holds as the other numeric type than
  `schema` declares: key -> "int64" or "float32".

  Training reads int64 and float relevance labels, and class ids as int64 or whole floats, alike
  (`rank4class_data.records.class_lists`); `make_dataset` reads them as the files store them, then casts.
  Reading the first list also fails early, naming the file, for a file that is no TFRecord of ELWC lists.
  """
  first = next(read_elwc(path), None)
  if first is None:
    return {}
  declared = [([first.context], {name: f.dtype for name, f in schema.context_features.items()}),
              (first.examples, {**{name: f.dtype for name, f in schema.example_features.items()},
                                schema.label_key: "float32"})]
  stored = {}
  for protos, dtypes in declared:
    for key, dtype in dtypes.items():
      kind = next((p.features.feature[key].WhichOneof("kind") for p in protos if key in p.features.feature),
                  None)
      if dtype != "string" and _NUMERIC_KINDS.get(kind, dtype) != dtype:
        stored[key] = _NUMERIC_KINDS[kind]
  return stored
