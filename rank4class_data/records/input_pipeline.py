"""The tf.data input pipeline of record files: which files (`InputConfig`), and reading them sharded,
shuffled, batched, parsed and prefetched, each record keeping its file and row so a bad one is named."""

import dataclasses
import math
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import tensorflow as tf

from rank4class_data.records.tfrecord_files import check_record_file, located_data_loss_in, read_tfrecord
from rank4class_data.validation import DataError, check_range


@dataclasses.dataclass
class InputConfig:
  """How a tf.data pipeline reads TFRecord files.

  Attributes:
    file_pattern: A glob, a comma-separated list of globs, or a list of them.
    batch_size: Global batch size; under a tf.distribute strategy each replica gets
      `input_context.get_per_replica_batch_size(batch_size)`.
    shuffle: Shuffle files and records (training); False keeps the file order (evaluation).
    shuffle_buffer_size: Records held by the shuffle buffer.
    seed: Seed for shuffling; None for a different order every run.
    num_epochs: Passes over the data; None repeats forever.
    drop_remainder: Drop the last partial batch (static batch shapes).
    as_supervised: Yield (features, labels) pairs for `Model.fit`; otherwise one feature dict with the labels.
  """

  file_pattern: str | Sequence[str]
  batch_size: int = 32
  shuffle: bool = True
  shuffle_buffer_size: int = 10_000
  seed: int | None = None
  num_epochs: int | None = 1
  drop_remainder: bool = False
  as_supervised: bool = True

  def __post_init__(self):
    check_range("batch_size", self.batch_size, 1, integer=True)
    check_range("shuffle_buffer_size", self.shuffle_buffer_size, 1, integer=True)
    if self.num_epochs is not None:
      check_range("num_epochs", self.num_epochs, 1, integer=True)

  def files(self) -> list[str]:
    """The sorted files the pattern matches; FileNotFoundError naming the pattern when there are none,
    DataError naming a folder or a file that is no whole TFRecord (`check_record_file`; an empty one may be a
    shard)."""
    patterns = self.file_pattern.split(",") if isinstance(self.file_pattern, str) else list(self.file_pattern)
    files = sorted({f for pattern in patterns for f in tf.io.gfile.glob(pattern.strip())})
    if not files:
      raise FileNotFoundError(f"{self.file_pattern}: no TFRecord file matches the file pattern")
    for path in files:
      if tf.io.gfile.isdir(path):
        raise DataError(path, "a directory", expected="TFRecord files (a file, or a pattern such as "
                        f"{os.path.join(path, '*.tfrecord')})")
      check_record_file(path, empty_ok=True)
    return files


# Records per provenance block (see `build_pipeline`).
_TAG_BLOCK = 1024

# (paths [batch_size] string, rows [batch_size] int64, serialized [batch_size] string) -> dataset element.
ParseBatchFn = Callable[[tf.Tensor, tf.Tensor, tf.Tensor], Any]

# The TFRecord files this process's pipelines read (`build_pipeline`). A DataLossError met inside a pipeline
# names no file; `located_data_loss` looks for the broken one among these.
_PIPELINE_FILES: dict[str, None] = {}


class RecordSchema(Protocol):
  """What the records of a pipeline hold: `tfrecords.ExampleSchema` (classification tf.Examples) or
  `elwc.ElwcSchema` (ranking lists)."""

  def batch_parser(self, config: "InputConfig") -> ParseBatchFn:
    """The function that parses (and validates) a batch of these records read with `config`."""


def build_pipeline(config: InputConfig, parse_batch: ParseBatchFn,
                   input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
  """Reads, shards, shuffles, repeats, batches, parses and prefetches TFRecord files.

  Each input pipeline reads its own share: whole files when there are at least as many files as pipelines,
  else every `num_input_pipelines`-th record. Records keep their file path and 1-based row through shuffling
  so `parse_batch` can name a bad one. Without shuffling or record sharding (evaluation) records flow in
  blocks of `_TAG_BLOCK` re-cut into batches, so nothing runs per record; files are interleaved block-wise.

  Args:
    config: Files, batch size, shuffling and epochs.
    parse_batch: Turns a batch of (paths, rows, serialized records) into the dataset element.
    input_context: From `strategy.distribute_datasets_from_function`; None for a single pipeline.

  Returns:
    The batched, parsed, prefetched dataset.
  """
  files = config.files()
  for path in files:  # Newest last: a failure is looked for in the files read last first.
    _PIPELINE_FILES.pop(path, None)
    _PIPELINE_FILES[path] = None
  num_pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  batch_size = input_context.get_per_replica_batch_size(
      config.batch_size) if input_context else config.batch_size
  shard_files = len(files) >= num_pipelines
  dataset = tf.data.Dataset.from_tensor_slices(files)
  if num_pipelines > 1 and shard_files:
    dataset = dataset.shard(num_pipelines, pipeline_id)
  if config.shuffle:
    dataset = dataset.shuffle(len(files), seed=config.seed, reshuffle_each_iteration=True)

  # Provenance is attached per block of records, not per record: a per-record map costs more than parsing.
  def read_file(path):
    def tag(block_index, records):
      size = tf.shape(records, out_type=tf.int64)[0]
      rows = block_index * _TAG_BLOCK + 1 + tf.range(size, dtype=tf.int64)
      return tf.fill([size], path), rows, records

    return tf.data.TFRecordDataset(path).batch(_TAG_BLOCK).enumerate().map(tag)

  dataset = dataset.interleave(read_file, cycle_length=min(len(files), 4), block_length=1,
                               num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  per_record = config.shuffle or (num_pipelines > 1 and not shard_files)
  if per_record:
    dataset = dataset.unbatch()
    if num_pipelines > 1 and not shard_files:
      dataset = dataset.shard(num_pipelines, pipeline_id)
    if config.shuffle:
      dataset = dataset.shuffle(config.shuffle_buffer_size, seed=config.seed, reshuffle_each_iteration=True)
  if config.num_epochs != 1:
    dataset = dataset.repeat(config.num_epochs)
  if per_record:
    dataset = dataset.batch(batch_size, drop_remainder=config.drop_remainder)
  else:  # Evaluation order: re-cut the tagged blocks into batches with batch-level slicing.
    dataset = dataset.rebatch(batch_size, drop_remainder=config.drop_remainder)
  dataset = dataset.map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE)
  return dataset.prefetch(tf.data.AUTOTUNE)


def assert_valid(ok: tf.Tensor, paths: tf.Tensor, rows: tf.Tensor, field: str, problem: str,
                 positions: tf.Tensor | None = None) -> tf.Operation:
  """An op failing with `<path>, row <row>[, example <position>], field <field>: <problem>.` for the first
  record not `ok`.

  Args:
    ok: bool [batch_size], or [batch_size, ...] reduced over the trailing axes; batch_size may be 0.
    paths: string [batch_size] record files.
    rows: int64 [batch_size] 1-based rows within the files.
    field: Feature name for the message.
    problem: What is wrong and what was expected.
    positions: int64 [batch_size] 1-based positions of ELWC examples within their lists, or None.
  """
  ok = tf.reduce_all(ok, axis=tf.range(1, tf.rank(ok)))
  # One always-failing entry at the end, so the first bad one is found even in an empty or all-good batch.
  first_bad = tf.argmin(tf.cast(tf.concat([ok, [False]], 0), tf.int32), output_type=tf.int32)

  def at(values: tf.Tensor, padding: Any) -> tf.Tensor:
    return tf.gather(tf.concat([values, tf.fill([1], tf.cast(padding, values.dtype))], 0), first_bad)

  parts = [at(paths, ""), ", row ", tf.strings.as_string(at(rows, 0))]
  if positions is not None:
    parts += [", example ", tf.strings.as_string(at(positions, 0))]
  message = tf.strings.join(parts + [f", field {field}: {problem}."])
  return tf.debugging.Assert(tf.reduce_all(ok), [message])


def record_names(paths: tf.Tensor, rows: tf.Tensor, suffix: str = "") -> tf.Tensor:
  """`<path>, row <row><suffix>` per record: the `example_names` of `tf.io.parse_example`, which its errors (a
  missing required feature, another value type, another length) quote, so `located_data_problem` can name the
  record."""
  return tf.strings.join([paths, ", row ", tf.strings.as_string(rows), suffix])


_ASSERTION = re.compile(r"assertion failed: \[(.+?, row \d+(?:, example \d+|, context)?, field [^\]]*?\.)\]",
                        re.DOTALL)
# `tf.io.parse_example`'s errors for a record named by `record_names` (ELWC adds ", example <i>" or ",
# context").
_NAME = r"Name: (?P<name>.+?, row \d+(?:, example \d+|, context)?), "
_MISSING = re.compile(_NAME + r"Feature: (?P<key>.+?) \(data type: (?P<want>\w+)\) is required but could not "
                      r"be found")
_OTHER_TYPE = re.compile(_NAME + r"Key: (?P<key>.+?), Index: \d+\.\s+Data types don't match\. Data type: "
                         r"(?P<got>\w+) but expected type: (?P<want>\w+)")
_OTHER_LENGTH = re.compile(_NAME + r"Key: (?P<key>.+?), Index: \d+\.\s+Number of \w+ values != expected\.\s+"
                           r"Values size: (?P<got>\d+) but output shape: \[(?P<shape>[^\]]*)\]")
# TensorFlow's dtype names in those errors -> the tf.train.Feature kinds users write.
_KINDS = {"float": "float_list", "int64": "int64_list", "string": "bytes_list"}


def _parse_problem(text: str) -> str | None:
  """The located message of a `tf.io.parse_example` error on records named by `record_names`, or None."""
  match = _MISSING.search(text)
  if match:
    name, key, want = match["name"], match["key"], _KINDS.get(match["want"], match["want"])
    where = "example" if ", example " in name else "list's context" if name.endswith(", "
                                                                                     "context") else "record"
    return f"{name}, field {key}: missing feature; expected {key} ({want}) in every {where}."
  match = _OTHER_TYPE.search(text)
  if match:
    return (f"{match['name']}, field {match['key']}: {_KINDS.get(match['got'], match['got'])} values; "
            f"expected {_KINDS.get(match['want'], match['want'])} values.")
  match = _OTHER_LENGTH.search(text)
  if match:
    dims = [int(d) for d in match["shape"].replace(" ", "").split(",") if d]
    size = math.prod(dims)
    expected = f"{size} value" + ("s" if size != 1 else "") + (f" (shape {dims})" if len(dims) > 1 else "")
    return f"{match['name']}, field {match['key']}: {match['got']} values; expected {expected}."
  return None


def located_data_problem(error: BaseException) -> str | None:
  """The `<path>, row <row>, field <field>: <problem>.` message of a bad record inside `error`.

  A bad record fails the tf.data pipeline with TensorFlow's InvalidArgumentError, whose text buries the
  located message among op names: an `assert_valid` failure, or a `tf.io.parse_example` error on records named
  by `record_names` (a missing required feature, a value of another type or length). Binaries report just the
  message. None when `error` holds no such message.
  """
  if not isinstance(error, tf.errors.InvalidArgumentError):
    return None
  text = str(error)
  match = _ASSERTION.search(text)
  return match.group(1) if match else _parse_problem(text)


def make_dataset(config: InputConfig, schema: RecordSchema,
                 input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
  """The records `config` names, parsed as `schema` says, through `build_pipeline`.

  Example:
    dataset = make_dataset(InputConfig("train-*.tfrecord", batch_size=64), tfrecords.ExampleSchema())
    # Under a strategy, each worker's shard:
    strategy.distribute_datasets_from_function(lambda context: make_dataset(config, schema, context))
  """
  return build_pipeline(config, schema.batch_parser(config), input_context)


def located_data_loss(error: BaseException) -> str | None:
  """`<path>, row <row>: <problem>; expected ...` for a DataLossError a pipeline raised, or None.

  Only the files that pipelines of this process read (the files read last first) and that are long enough to
  hold the error's byte offset are read again, until the broken one is found; so this costs nothing unless
  reading failed.
  """
  return located_data_loss_in(error, list(reversed(list(_PIPELINE_FILES))))


def first_unparsable_record(parses: Callable[[bytes], bool], quoted: bytes | None = None
                            ) -> tuple[str, int] | None:
  """(file, 1-based row) of a record of this process's pipelines (the files read last first) that `parses`
  refuses; with `quoted` (the record as a TensorFlow error quotes it: up to its first NUL byte), the first
  record quoted so (one that `parses` refuses, if any), else None."""
  quoted_so = None
  for path in reversed(list(_PIPELINE_FILES)):
    try:
      for row, record in enumerate(read_tfrecord(path), start=1):
        if quoted is not None and record.partition(b"\x00")[0] != quoted:
          continue
        if not parses(record):
          return path, row
        quoted_so = quoted_so or (path, row)
    except (OSError, DataError):
      continue
  return quoted_so if quoted is not None else None
