"""Labelled records read for evaluation: the `tf.Example` / ELWC schemas a model's input and labels are read
with, and the records' labels (int64 ids, integral floats or class names, as training reads them) rewritten as
the model's class ids, located errors for bad ones, then batched as (model inputs, labels).

`rank4class.evaluation.evaluate` reads its "example" and "elwc" records through these;
`rank4class.inference.predict` rewrites the labels of the records it is given the same way
(`example_with_class_id`).
"""

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import tensorflow as tf

from rank4class_data.conversion import convert
from rank4class_data.label_vocabulary import LabelVocabulary
from rank4class_data.records import elwc, tfrecords
from rank4class_data.validation import DataError

ELWC_CLASS_ID_KEY = "class_id"


class RecordSettings(Protocol):
  """What reading labelled records takes from a config (`evaluate.EvaluateConfig` has these attributes).

  Attributes:
    data_files: TFRecord file pattern(s) (comma-separated globs).
    label_vocab: The converter's vocabulary JSON (classes + schema) of "example" records; None uses the one
      beside the first file when it exists, else the default feature keys.
    feature_key: The feature holding the model input; None for the vocabulary's, else the default by input
      type.
    label_key: Label feature (class id of "example" records, relevance of ELWC candidates).
    class_id_key: Per-candidate class id feature of ELWC lists.
    batch_size: Instances (or lists) per batch.
  """

  data_files: str
  label_vocab: str | None
  feature_key: str | None
  label_key: str
  class_id_key: str
  batch_size: int


def _default_feature(spec: tf.TensorSpec) -> tuple[str, str]:
  """(kind, default key) of the model input: "text", "dense" or "image"."""
  if spec.dtype == tf.string:
    return "text", tfrecords.TEXT_KEY
  if spec.shape.rank == 2:
    return "dense", tfrecords.DENSE_KEY
  return "image", tfrecords.IMAGE_KEY


def example_schema(config: RecordSettings, spec: tf.TensorSpec, class_names: list[str]) -> tuple[
    tfrecords.ExampleSchema, str]:
  """The `tf.Example` schema of the records and the feature key feeding the model.

  Raises:
    ValueError: If the records' vocabulary names other classes than the model, or the feature does not match
      the model's input.
  """
  files = tfrecords.InputConfig(config.data_files).files()
  vocab_path = config.label_vocab or convert.default_vocab_path(files[0])
  kind, key = _default_feature(spec)
  if config.label_vocab is not None or os.path.exists(vocab_path):
    metadata = convert.read_metadata(vocab_path)
    if list(metadata["classes"]) != list(class_names):
      raise ValueError(f"{vocab_path}: the records' classes {metadata['classes']} differ from the model's "
                       f"{class_names}; class ids would mean different things.")
    schema = tfrecords.ExampleSchema.from_dict(metadata["schema"])
    key = config.feature_key or {"text": schema.text_key, "dense": schema.dense_key,
                                 "image": schema.image_key}[kind]
    if key is None:
      raise ValueError(f"{vocab_path}: the records have no {kind} feature, but the model reads {kind} input.")
  else:
    key = config.feature_key or key
    shape = spec.shape.as_list()[1:]
    schema = tfrecords.ExampleSchema(
        label_key=config.label_key, text_key=key if kind == "text" else None,
        dense_key=key if kind == "dense" else None, dense_dim=shape[0] if kind == "dense" else 0,
        image_key=key if kind == "image" else None,
        image_shape=tuple(shape + [1] * (3 - len(shape))) if kind == "image" else (0, 0, 0))
  schema.num_classes = len(class_names)  # Labels out of range are errors, never masked.
  return schema, key


def elwc_schema(config: RecordSettings, spec: tf.TensorSpec) -> tuple[elwc.ElwcSchema, str, str]:
  """The ELWC schema: the model input in the context, a class id per candidate; (schema, key, kind).

  A candidate without a class id parses to -1, which `_elwc_parse_fn` reports (never class 0)."""
  kind, key = _default_feature(spec)
  key = config.feature_key or key
  shape = spec.shape.as_list()[1:]
  if kind == "text" or kind == "image":
    context = elwc.FeatureSpec("string", (1,))
  else:
    context = elwc.FeatureSpec("float32", tuple(shape))
  schema = elwc.ElwcSchema(example_features={config.class_id_key: elwc.FeatureSpec("int64", (1,), -1)},
                           context_features={key: context}, label_key=config.label_key)
  return schema, key, kind


# Class names an error about an unknown one lists.
_LISTED_CLASSES = 5


def listed_classes(class_names: list[str]) -> str:
  """A few class names for an error message: `'a', 'b', 'c', ... (1,000 in all)`."""
  shown = ", ".join(repr(name) for name in class_names[:_LISTED_CLASSES])
  return shown + (f", ... ({len(class_names):,} in all)" if len(class_names) > _LISTED_CLASSES else "")


def class_id(feature: tf.train.Feature, label_to_id: Mapping[str, int], path: str, row: int, key: str,
             where: str = "the record") -> int:
  """The class id a label feature holds, in the forms training accepts: an int64 id, a float with an integral
  value (`rank4class_data.records.elwc.one_number`, as ELWC class lists are read), or a class name (bytes),
  mapped through `label_to_id` (the model's class names -> ids).

  Raises:
    DataError: naming `path`, `row`, `where` and `key`, for an unknown class name (listing a few known ones),
      a float that is not an integer, an id outside [0, number of classes), or not exactly one value.
  """
  num_classes = len(label_to_id)
  if feature.WhichOneof("kind") == "bytes_list":
    names = [value.decode("utf-8", "replace").strip() for value in feature.bytes_list.value]
    if len(names) != 1:
      raise DataError(path, f"{where} has {len(names)} values for {key!r}", row=row, field=key,
                      expected="exactly one class id or class name")
    if names[0] not in label_to_id:
      known = listed_classes(list(label_to_id))
      raise DataError(path, f"{where} has unknown class name {names[0]!r}", row=row, field=key,
                      expected=f"one of the model's {num_classes:,} classes ({known})")
    return label_to_id[names[0]]
  number = elwc.one_number(feature, path, row, key, where)
  if not number.is_integer():
    raise DataError(path, f"{where} has class id {number:g}, not an integer", row=row, field=key,
                    expected=f"an integral class id in [0, {num_classes}) or a class name")
  if not 0 <= number < num_classes:
    raise DataError(path, f"{where} has class id {int(number)}", row=row, field=key,
                    expected=f"a class id in [0, {num_classes}) or a class name")
  return int(number)


def _int64_feature(value: int) -> tf.train.Feature:
  return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))


def example_with_class_id(record: bytes, label_key: str, label_to_id: Mapping[str, int], path: str,
                          row: int) -> bytes:
  """A serialized classification `tf.Example` with its label (any form `class_id` reads) rewritten as the
  int64 class id the `tfrecords` readers parse.

  Raises:
    DataError: naming `path` and `row`, for a record that is no `tf.Example`, a missing label or a bad one.
  """
  try:
    example = tf.train.Example.FromString(record)
  except tfrecords.PROTO_PARSE_ERRORS:
    raise DataError(path, "not a tf.Example record (it does not parse)", row=row,
                    expected="classification tf.Examples (is the input format right?)") from None
  features = example.features.feature
  if label_key not in features:
    raise DataError(path, "missing feature", row=row, field=label_key,
                    expected="a class id or class name in every record")
  label = class_id(features[label_key], label_to_id, path, row, label_key)
  features[label_key].CopyFrom(_int64_feature(label))
  return example.SerializeToString()


def _elwc_with_class_ids(elwc_list, class_id_key: str, label_key: str, label_to_id: Mapping[str, int],
                         path: str, row: int) -> bytes:
  """A serialized ELWC list whose candidates' class ids (any form `class_id` reads) are int64 ids and whose
  relevance labels (int64 or float) are floats, as `elwc_schema` parses them."""
  for position, example in enumerate(elwc_list.examples, start=1):
    values = example.features.feature
    where = f"example {position}"
    if class_id_key in values:
      values[class_id_key].CopyFrom(_int64_feature(class_id(values[class_id_key], label_to_id, path, row,
                                                            class_id_key, where)))
    if label_key in values:
      label = elwc.one_number(values[label_key], path, row, label_key, where)
      values[label_key].CopyFrom(tf.train.Feature(float_list=tf.train.FloatList(value=[label])))
  return elwc_list.SerializeToString()


# Feature kinds of a class stored otherwise than as an int64 id: an integral float, a class name.
_NOT_INT64 = ("float_list", "bytes_list")


def _feature_kind(features, key: str) -> str | None:
  return features[key].WhichOneof("kind") if key in features else None


def _example_labels_need_rewriting(files: list[str], label_key: str) -> bool:
  """Whether the first record of a file holds its label as a float or a class name rather than an int64 id."""
  for path in files:
    record = next(tfrecords.read_tfrecord(path), None)
    try:
      example = tf.train.Example.FromString(record) if record is not None else None
    except tfrecords.PROTO_PARSE_ERRORS:
      continue  # The pipeline names the record.
    if example is not None and _feature_kind(example.features.feature, label_key) in _NOT_INT64:
      return True
  return False


def _elwc_labels_need_rewriting(files: list[str], class_id_key: str, label_key: str) -> bool:
  """Whether the first list of a file holds a class id as a float or a class name, or a relevance label as an
  int64, rather than as `elwc_schema` parses them."""
  for path in files:
    first = next(elwc.read_elwc(path), None)
    for example in first.examples if first is not None else ():
      features = example.features.feature
      class_kind, label_kind = _feature_kind(features, class_id_key), _feature_kind(features, label_key)
      if class_kind in _NOT_INT64 or label_kind == "int64_list":
        return True
  return False


def _rewritten_batches(files: list[str], read: Callable[[str], Iterable],
                       rewrite: Callable[[Any, str, int], bytes], parse: tfrecords.ParseBatchFn,
                       batch_size: int) -> Iterator:
  """`parse`d batches of the records of `files` (`read(path)` yields them), each rewritten in Python by
  `rewrite(record, path, row)` first: a bad record raises its own located DataError here, before any batch
  holds it."""
  dtypes = (tf.string, tf.int64, tf.string)  # Paths, rows, serialized records: `tfrecords.build_pipeline`'s.
  parse = tf.function(parse, input_signature=[tf.TensorSpec([None], dtype) for dtype in dtypes])

  def parsed(batch):
    return parse(*(tf.constant(column, dtype) for column, dtype in zip(zip(*batch, strict=True), dtypes,
                                                                       strict=True)))

  batch = []
  for path in files:
    for row, record in enumerate(read(path), start=1):
      batch.append((path, row, rewrite(record, path, row)))
      if len(batch) == batch_size:
        yield parsed(batch)
        batch = []
  if batch:
    yield parsed(batch)


def example_batches(config: RecordSettings, schema: tfrecords.ExampleSchema, key: str,
                     class_names: list[str], rewrite: bool = False) -> Iterable:
  """(model inputs, int64 class ids) batches of "example" records. Labels stored as int64 ids stream through
  the tf.data pipeline; labels stored as integral floats or class names (as training reads them), in the first
  record of a file or when `rewrite`, are rewritten record by record first."""
  input_config = tfrecords.InputConfig(config.data_files, batch_size=config.batch_size, shuffle=False,
                                       num_epochs=1)
  files = input_config.files()
  if not rewrite and not _example_labels_need_rewriting(files, schema.label_key):
    return tfrecords.make_dataset(input_config, schema).map(lambda f, y: (f[key], y))
  label_to_id = LabelVocabulary(list(class_names)).label_to_id
  batches = _rewritten_batches(
      files, tfrecords.read_tfrecord,
      lambda record, path, row: example_with_class_id(record, schema.label_key, label_to_id, path, row),
      tfrecords.parse_batch_fn(schema), config.batch_size)
  return ((features[key], labels) for features, labels in batches)


def _elwc_parse_fn(schema: elwc.ElwcSchema, class_id_key: str, num_classes: int) -> tfrecords.ParseBatchFn:
  """`elwc.parse_batch_fn`, failing with the file and row of a real candidate whose class id is missing or
  outside [0, num_classes)."""
  parse = elwc.parse_batch_fn(schema)

  def parse_checked(paths, rows, serialized):
    features, labels = parse(paths, rows, serialized)
    class_ids = features[class_id_key]
    padding = tf.logical_not(features[schema.mask_key])[..., None]
    known = padding | ((class_ids >= 0) & (class_ids < num_classes))
    problem = (f"missing class id, or one outside [0, {num_classes}); expected a class id of the model or a "
               "class name")
    check = tfrecords.assert_valid(known, paths, rows, class_id_key, problem)
    with tf.control_dependencies([check]):
      class_ids = tf.identity(class_ids)
    return {**features, class_id_key: class_ids}, labels

  return parse_checked


def elwc_batches(config: RecordSettings, spec: tf.TensorSpec, class_names: list[str],
                  rewrite: bool = False) -> Iterable:
  """(model inputs, class ids, relevance labels, mask) batches of ELWC lists. Class ids stored as int64 and
  labels as floats stream through the tf.data pipeline; other forms training accepts (integral float or
  class-name ids, int64 labels), in the first list of a file or when `rewrite`, are rewritten list by list
  first."""
  schema, key, kind = elwc_schema(config, spec)
  input_config = tfrecords.InputConfig(config.data_files, batch_size=config.batch_size, shuffle=False,
                                       num_epochs=1)
  image_shape = spec.shape.as_list()[1:]
  parse = _elwc_parse_fn(schema, config.class_id_key, len(class_names))

  def to_inputs(features, labels):
    inputs = features[key]
    if kind == "text":
      inputs = tf.reshape(inputs, [-1])
    elif kind == "image":
      inputs = tf.reshape(tf.io.decode_raw(tf.reshape(inputs, [-1]), tf.uint8), [-1, *image_shape])
    class_ids = tf.squeeze(features[config.class_id_key], axis=2)
    return inputs, class_ids, labels, features[schema.mask_key]

  files = input_config.files()
  if not rewrite and not _elwc_labels_need_rewriting(files, config.class_id_key, config.label_key):
    return tfrecords.build_pipeline(input_config, parse).map(to_inputs)
  label_to_id = LabelVocabulary(list(class_names)).label_to_id
  batches = _rewritten_batches(
      files, elwc.read_elwc,
      lambda elwc_list, path, row: _elwc_with_class_ids(elwc_list, config.class_id_key, config.label_key,
                                                        label_to_id, path, row),
      parse, config.batch_size)
  return (to_inputs(*batch) for batch in batches)



def stored_in_another_type(error: tf.errors.InvalidArgumentError, keys: tuple[str, ...]) -> bool:
  """Whether `error` is TensorFlow's parse error for one of `keys` holding another type than the pipeline
  parses."""
  return "Data types don't match" in str(error) and any(f"Key: {key}," in str(error) for key in keys)



def with_rewriting(run: Callable[[bool], dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
  """`run(rewrite=False)`; again with each record's labels read one by one when a later record stores its
  class in another form than the first."""
  try:
    return run(False)
  except tf.errors.InvalidArgumentError as e:
    if not stored_in_another_type(e, keys):
      raise
    return run(True)
