"""Ranking lists as TF-Ranking's ExampleListWithContext (ELWC) TFRecords, read through `tfr.data`."""

import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import input_pb2

from rank4class_data import tfrecords
from rank4class_data.tf_ranking import tfr
from rank4class_data.validation import DataError, FieldError, require_file

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

  Attributes:
    dtype: "string", "int64" or "float32".
    shape: Feature shape, e.g. [1] for a scalar, [dim] for a vector.
    default_value: Value of padded examples (and of examples lacking the feature); None for "" / 0 / 0.0.
  """

  dtype: str
  shape: tuple[int, ...] = (1,)
  default_value: Any = None

  def __post_init__(self):
    if self.dtype not in DTYPES:
      raise ValueError(f"Unknown dtype {self.dtype!r}; expected one of {list(DTYPES)}.")
    self.shape = tuple(int(d) for d in self.shape)
    if any(d < 1 for d in self.shape):
      raise ValueError(f"`shape` must have positive dimensions, got {self.shape}.")

  def to_tf(self) -> tf.io.FixedLenFeature:
    default = self.default_value
    if default is None:
      default = {"string": "", "int64": 0, "float32": 0.0}[self.dtype]
    size = math.prod(self.shape)
    if np.ndim(default) == 0:
      default = [default] * size
    return tf.io.FixedLenFeature(list(self.shape), DTYPES[self.dtype], default_value=default)


@dataclasses.dataclass
class ElwcSchema:
  """The features of ELWC ranking lists and how `tfr.data` pads them.

  Attributes:
    example_features: Per-example features (besides the label), parsed to [batch_size, list_size, *shape].
    context_features: Per-list features, parsed to [batch_size, *shape].
    label_key: Per-example float relevance label; padded examples get PADDING_LABEL (-1).
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
    if self.list_size is not None and self.list_size < 1:
      raise ValueError(f"`list_size` must be positive or None, got {self.list_size}.")
    overlap = set(self.example_features) & set(self.context_features)
    if overlap or self.label_key in self.context_features:
      raise ValueError(f"Context and example feature names must differ, both have {sorted(overlap)}.")
    if self.label_key in self.example_features:
      raise ValueError(f"Give the label only as `label_key` ({self.label_key!r}), not in `example_features`.")

  def example_feature_spec(self) -> dict[str, tf.io.FixedLenFeature]:
    spec = {name: feature.to_tf() for name, feature in self.example_features.items()}
    spec[self.label_key] = tf.io.FixedLenFeature([1], tf.float32, default_value=[PADDING_LABEL])
    return spec

  def context_feature_spec(self) -> dict[str, tf.io.FixedLenFeature]:
    return {name: feature.to_tf() for name, feature in self.context_features.items()}


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

  return tfrecords.write_tfrecord(path, checked())


def read_elwc(path: str) -> Iterator[input_pb2.ExampleListWithContext]:
  """Yields the ELWC lists of a TFRecord file, in order."""
  require_file(path)
  for record in tfrecords.read_tfrecord(path):
    yield input_pb2.ExampleListWithContext.FromString(record)


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
    raise DataError(path, f"{where} has {key!r} as {feature.WhichOneof('kind') or 'an empty feature'}", row=row,
                    field=key, expected="text (bytes_list: one string, or tokens joined by spaces)")
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
  for path in tfrecords.InputConfig(file_pattern).files():
    for row, elwc in enumerate(read_elwc(path), start=1):
      if not elwc.examples:
        raise DataError(path, "empty list (no examples)", row=row, field="examples", expected="at least one example")
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
                            expected=f"the {'label' if key == label_key else 'text'} of every example; name it "
                            f"with --{'label_key' if key == label_key else 'text_key'}")
        label = one_number(values[label_key], path, row, label_key, where)
        if not math.isfinite(label) or label < 0:
          raise DataError(path, f"{where} has label {label}", row=row, field=label_key,
                          expected="one relevance number >= 0")
        labels.append(label)
        texts.append(_text(values[text_key], path, row, text_key, where))
      lists.append(TextList(path, row, query, texts, labels))
  return lists


def parse_batch_fn(schema: ElwcSchema, as_supervised: bool = True) -> tfrecords.ParseBatchFn:
  """Returns the function that parses a batch of serialized ELWCs with `tfr.data` and validates it.

  Parsing is `tfr.data.make_parsing_fn(tfr.data.ELWC, ...)`, so files written by TF-Ranking users read the
  same.
  The result has example features [batch_size, list_size, *shape], context features [batch_size, *shape], the
  mask bool [batch_size, list_size] under `schema.mask_key`, and labels float32 [batch_size, list_size] with
  PADDING_LABEL at padded positions: (features, labels) when `as_supervised`, else labels join the dict.
  A list without examples, or a real example with a missing, negative or NaN label, fails the pipeline with
  tf.errors.InvalidArgumentError naming the file, row (list) and field.
  """
  parse_elwc = tfr.data.make_parsing_fn(tfr.data.ELWC, list_size=schema.list_size,
                                        context_feature_spec=schema.context_feature_spec(),
                                        example_feature_spec=schema.example_feature_spec(),
                                        size_feature_name=_SIZE_KEY, mask_feature_name=schema.mask_key,
                                        shuffle_examples=schema.shuffle_examples, seed=schema.seed)

  def parse(paths, rows, serialized):
    features = parse_elwc(serialized)
    sizes = features.pop(_SIZE_KEY)
    labels = tf.squeeze(features.pop(schema.label_key), axis=2)
    mask = features[schema.mask_key]
    checks = [
        tfrecords.assert_valid(sizes > 0, paths, rows, "examples",
                               "empty list (no examples); expected at least one example per list"),
        tfrecords.assert_valid(
            tf.logical_not(mask) | (labels >= 0) | tf.math.is_nan(labels), paths, rows, schema.label_key,
            "missing or negative label of a real example; expected a relevance label >= 0"),
        tfrecords.assert_valid(tf.math.is_finite(labels), paths, rows, schema.label_key,
                               "NaN label; expected a finite relevance label"),
    ]
    with tf.control_dependencies(checks):
      labels = tf.identity(labels)
    if not as_supervised:
      return {**features, schema.label_key: labels}
    return features, labels

  return parse


def make_dataset(config: tfrecords.InputConfig, schema: ElwcSchema,
                 input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
  """ELWC lists as a sharded, shuffled, batched, parsed, prefetched dataset (`tfrecords.build_pipeline`)."""
  return tfrecords.build_pipeline(config, parse_batch_fn(schema, config.as_supervised), input_context)


def make_dataset_fn(config: tfrecords.InputConfig,
                    schema: ElwcSchema) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
  """A dataset function for `strategy.distribute_datasets_from_function`."""
  config.files()  # Fail fast, before the strategy calls the function on its workers.
  return lambda input_context: make_dataset(config, schema, input_context)
