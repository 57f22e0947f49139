"""Batch evaluation of a trained Rank4Class model on TFRecords: metrics, per-class recall, confusion counts."""

import contextlib
import csv
import dataclasses
import functools
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class import calibration as calibration_lib
from rank4class import full_class_evaluation, ranking_math, served
from rank4class import metrics as metrics_lib
from rank4class_data import convert, elwc, progress_line, row_cache, tfrecords
from rank4class_data.label_vocabulary import LabelVocabulary
from rank4class_data.validation import DataError, atomic_output, write_json
from rank4class_encoders import text_encoder

EXAMPLE = "example"
ELWC = "elwc"
ROWS = "rows"  # Row files (CSV, TSV, JSONL, .tab) or an image folder, converted as training converts them.
INPUT_FORMATS = (EXAMPLE, ELWC, ROWS)
REPORT_FILE = "eval_report.json"
ELWC_CLASS_ID_KEY = "class_id"


@dataclasses.dataclass
class EvaluateConfig:
  """What to evaluate on which records.

  Attributes:
    model_path: A SavedModel exported by training, or a training `model_dir` (its `export/` is used).
    data_files: TFRecord file pattern(s) (comma-separated globs).
    input_format: "example" (one classification `tf.Example` per instance) or "elwc" (one ranking list per
      instance: the instance in the context, one example per candidate class with its class id and a graded
      relevance label).
    label_vocab: The converter's vocabulary JSON (classes + schema) of "example" records; None uses the one
      beside the first file when it exists, else the default feature keys.
    feature_key: The feature holding the model input; None for the vocabulary's, else "text", "features" or
      "image" by the model's input type.
    label_key: Label feature (class id for "example", relevance for "elwc").
    class_id_key: Per-candidate class id feature of "elwc" lists.
    batch_size: Instances (or lists) per batch.
    metric_ks: Cutoffs K of top-K error and NDCG@K.
    report_path: Where to write the JSON report; None for `eval_report.json` in the model_dir (or beside the
      SavedModel); "" for no file.
    progress: Show a progress line (instances, instances/s) on stderr once the pass takes a while.
    chunk_size: "example" records: rank all classes `chunk_size` at a time (exact ranks in bounded memory,
      `full_class_evaluation`; no confusion matrix in the report); None: chunks of 4,096 from 2,048 classes on,
      else full score matrices; 0: always full score matrices.
    embedding_cache_dir: Frozen-text models (evaluated on text records): where text embeddings are cached;
      None for the shared cache.
    rows: "rows": the columns, format and bad-row policy of the row files (as training's), whose labels are
      the model's class names.
    row_cache_dir: "rows": where converted row files are cached; None for `row_cache.DEFAULT_CACHE_DIR`.
    class_texts: Zero-shot exports: a class-texts file (columns class, text) whose classes are ranked instead of
      the training ones; the records' labels are its class names.
  """

  model_path: str
  data_files: str
  input_format: str = EXAMPLE
  label_vocab: str | None = None
  feature_key: str | None = None
  label_key: str = tfrecords.LABEL_KEY
  class_id_key: str = ELWC_CLASS_ID_KEY
  batch_size: int = 1024
  metric_ks: tuple[int, ...] = (1, 5)
  report_path: str | None = None
  progress: bool = True
  chunk_size: int | None = None
  embedding_cache_dir: str | None = None
  rows: row_cache.RowConversion = dataclasses.field(default_factory=row_cache.RowConversion)
  row_cache_dir: str | None = None
  class_texts: str | None = None

  def __post_init__(self):
    if isinstance(self.rows, dict):
      self.rows = row_cache.RowConversion(**self.rows)
    if not self.model_path:
      raise ValueError("`model_path` is required (a SavedModel or a training model_dir).")
    if not self.data_files:
      raise ValueError("`data_files` is required (a TFRecord file pattern).")
    if self.input_format not in INPUT_FORMATS:
      raise ValueError(f"Unknown input_format {self.input_format!r}; allowed: {', '.join(INPUT_FORMATS)}.")
    if self.batch_size < 1:
      raise ValueError(f"`batch_size` must be positive, got {self.batch_size}.")
    if self.chunk_size is not None and self.chunk_size < 0:
      raise ValueError(f"`chunk_size` must be >= 0, got {self.chunk_size}.")

  def chunked(self, num_classes: int) -> int:
    """The chunk size to rank `num_classes` classes with, or 0 for full score matrices."""
    if self.chunk_size is None:
      return full_class_evaluation.DEFAULT_CHUNK_SIZE if num_classes >= full_class_evaluation.CHUNKED_CLASSES else 0
    return self.chunk_size


def converted_rows(config: EvaluateConfig, class_names: list[str]) -> EvaluateConfig:
  """The config of "example" records converted from `config`'s row files (or image folder), as training
  converts them (`row_cache.convert_split`, cached), their labels numbered by the model's classes.

  Raises:
    DataError: naming the file and row of a label that is not one of the model's classes (unless
      `config.rows.bad_rows` is "skip"), or of any other bad row.
  """
  with tempfile.TemporaryDirectory() as folder:
    vocab = os.path.join(folder, "model_classes.json")
    with open(vocab, "w", encoding="utf-8") as f:
      json.dump({"classes": list(class_names)}, f, ensure_ascii=False)
    converted = row_cache.convert_split(config.data_files, config.rows, vocab, cache_dir=config.row_cache_dir)
  sys.stderr.write(f"Rows: {converted.describe()}\n")
  return dataclasses.replace(config, data_files=converted.tfrecord, input_format=EXAMPLE,
                             label_vocab=converted.vocab_path)


def _embedded(batches: Iterable, encoder: text_encoder.TextEncoderConfig, cache_dir: str | None) -> Iterator:
  """`batches` with their first element, raw texts, replaced by the frozen embeddings of those texts
  (`served.text_inputs`: read from the embedding cache; only texts it lacks run through the encoder)."""
  for inputs, *rest in batches:
    yield (served.text_inputs(inputs, encoder, cache_dir), *rest)


@contextlib.contextmanager
def _graph_optimizer_off() -> Iterator[None]:
  """TensorFlow's graph optimizer (Grappler) off for the functions called inside. The evaluators' metric graphs
  (TF-Ranking's sorts and sums, ~1,500 ops) gain nothing from it per call, and it costs their first call
  0.15-0.3 s (docs/BENCHMARKS.md, the binary against a bare fit). Every call is made with it off: the setting is
  part of the function's instantiation key, so switching it back on would instantiate the function again."""
  before = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False)
  tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
  try:
    yield
  finally:
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": before})


def _unoptimized(function: Callable[..., Any]) -> Callable[..., Any]:
  """`function` (a `tf.function`) called with the graph optimizer off (`_graph_optimizer_off`)."""

  @functools.wraps(function)
  def call(*args):
    with _graph_optimizer_off():
      return function(*args)

  return call


class ClassificationEvaluator:
  """Accumulates the paper's metrics (TF-Ranking), per-class counts and the top-1 confusion matrix.

  The update is traced once (batch axis unknown) and does not depend on the model, so one evaluator can be
  `reset()` and reused for many models (see `get_evaluator`).

  Args:
    class_names: Class names in id order.
    ks: Cutoffs K of top-K error and NDCG@K.
  """

  def __init__(self, class_names: list[str], ks: tuple[int, ...] = (1, 5)):
    if tf.distribute.has_strategy():
      raise ValueError("Create ClassificationEvaluator outside `strategy.scope()`: its metric variables must be "
                       "plain local variables, updated outside the replicas.")
    self._class_names = list(class_names)
    self._num_classes = len(class_names)
    with tf.init_scope():
      self._metrics = metrics_lib.get_default_metrics(tuple(ks))
      self._confusion = tf.Variable(tf.zeros([self._num_classes] * 2, tf.int64), trainable=False)
    scores_spec = tf.TensorSpec([None, self._num_classes], tf.float32)
    self._update = _unoptimized(tf.function(
        self._update_impl, input_signature=[scores_spec, tf.TensorSpec([None], tf.int64)], autograph=False))
    self._update_relevance = _unoptimized(tf.function(self._update_relevance_impl, input_signature=[
        scores_spec, tf.TensorSpec([None, self._num_classes], tf.float32)], autograph=False))
    # One traced call for every metric's result and reset (eagerly, ~7 small ops each per validation).
    self._results = _unoptimized(tf.function(self._results_impl, autograph=False))
    self._reset = _unoptimized(tf.function(self._reset_impl, autograph=False))

  def _results_impl(self) -> dict[str, tf.Tensor]:
    return {metric.name: metric.result() for metric in self._metrics}

  def _reset_impl(self) -> None:
    for metric in self._metrics:
      for variable in metric.variables:
        variable.assign(tf.zeros_like(variable))
    self._confusion.assign(tf.zeros_like(self._confusion))

  def _update_impl(self, scores: tf.Tensor, labels: tf.Tensor) -> None:
    """`scores` float `[batch_size, num_classes]`, `labels` int64 class ids `[batch_size]` (validated)."""
    self._update_relevance_impl(scores, ranking_math.class_ids_to_relevance(labels, self._num_classes), labels)

  def _update_relevance_impl(self, scores: tf.Tensor, relevance: tf.Tensor,
                             labels: tf.Tensor | None = None) -> None:
    """`relevance` float `[batch_size, num_classes]` (-1: not judged); the confusion matrix's true class is
    `labels`, or the most relevant class."""
    for metric in self._metrics:
      metric.update_state(relevance, scores)
    if labels is None:
      labels = tf.argmax(relevance, axis=1, output_type=tf.int64)
    predicted = tf.argmax(scores, axis=1, output_type=tf.int64)
    self._confusion.assign_add(tf.math.confusion_matrix(labels, predicted, self._num_classes, dtype=tf.int64))

  def reset(self) -> None:
    self._reset()

  def update(self, scores: tf.Tensor, labels: tf.Tensor) -> None:
    """`scores` `[batch_size, num_classes]`; `labels` class ids `[batch_size]` or `[batch_size, 1]`, or graded
    relevance over all classes `[batch_size, num_classes]` (ELWC class lists; the confusion matrix then counts
    the most relevant class as the true one)."""
    scores, labels = tf.cast(scores, tf.float32), tf.convert_to_tensor(labels)
    if labels.shape.rank == 2 and labels.shape[1] == self._num_classes and self._num_classes > 1:
      self._update_relevance(scores, tf.cast(labels, tf.float32))
    else:
      self._update(scores, tf.reshape(tf.cast(labels, tf.int64), [-1]))

  def result(self) -> dict[str, Any]:
    """{"n", "metrics", "per_class_recall", "class_counts", "confusion": {"classes", "counts" or "nonzero"}}.

    Confusion rows are true classes, columns the top-1 predicted class: the whole matrix ("counts") up to
    `DENSE_CONFUSION_CLASSES` classes, above that its non-zero cells as [true, predicted, count] ("nonzero"; a
    report of 1,100 classes is then kilobytes instead of 14 MB). A class without instances has recall None.
    """
    confusion = self._confusion.numpy()
    support = confusion.sum(axis=1)
    if len(self._class_names) <= DENSE_CONFUSION_CLASSES:
      cells: dict[str, Any] = {"counts": confusion.tolist()}
    else:
      true, predicted = np.nonzero(confusion)
      cells = {"nonzero": [[int(t), int(p), int(confusion[t, p])] for t, p in zip(true, predicted, strict=True)]}
    return {"n": int(support.sum()),
            "metrics": {name: float(value) for name, value in self._results().items()},
            **full_class_evaluation.per_class_report(self._class_names, np.diag(confusion), support),
            "confusion": {"classes": list(self._class_names), **cells}}


@functools.lru_cache(maxsize=16)
def _cached_evaluator(class_names: tuple[str, ...], ks: tuple[int, ...]) -> ClassificationEvaluator:
  return ClassificationEvaluator(list(class_names), ks)


def get_evaluator(class_names: list[str], ks: tuple[int, ...] = (1, 5)) -> ClassificationEvaluator:
  """A reset evaluator, shared per (classes, ks) in this process: tracing TF-Ranking's metrics costs seconds,
  so validation runs and the many runs of a study reuse one traced update. Call it outside any
  `strategy.scope()` (e.g. before `fit`) the first time."""
  evaluator = _cached_evaluator(tuple(class_names), tuple(ks))
  evaluator.reset()
  return evaluator


class ListEvaluator:
  """Ranking metrics (TF-Ranking) over given candidate lists: each list's candidate classes are scored by the
  model's class scores and ranked against their graded relevance labels (padding: label -1).

  Args:
    ks: Cutoffs K of top-K error and NDCG@K.
  """

  def __init__(self, ks: tuple[int, ...] = (1, 5)):
    self._metrics = [m for m in metrics_lib.get_default_metrics(tuple(ks)) if m.name != metrics_lib.ACCURACY]
    self._lists = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._items = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._update = _unoptimized(tf.function(self._update_impl, input_signature=[
        tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None, None], tf.int64),
        tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None, None], tf.bool)], autograph=False))

  def _update_impl(self, scores: tf.Tensor, class_ids: tf.Tensor, labels: tf.Tensor, mask: tf.Tensor) -> None:
    """`scores` `[batch_size, num_classes]`; `class_ids` int `[batch_size, list_size]`; `labels` float
    `[batch_size, list_size]` (-1 at padding); `mask` bool `[batch_size, list_size]`."""
    num_classes = tf.shape(scores, out_type=tf.int64)[1]
    class_ids = tf.cast(class_ids, tf.int64)
    in_range = tf.logical_or(tf.logical_not(mask), (class_ids >= 0) & (class_ids < num_classes))
    tf.debugging.assert_equal(tf.reduce_all(in_range), True,
                              message=f"ELWC feature '{ELWC_CLASS_ID_KEY}': class id outside [0, num_classes)")
    item_scores = tf.gather(scores, tf.where(mask, class_ids, 0), batch_dims=1)
    labels = tf.where(mask, labels, -tf.ones_like(labels))
    for metric in self._metrics:
      metric.update_state(labels, item_scores)
    self._lists.assign_add(tf.shape(scores, out_type=tf.int64)[0])
    self._items.assign_add(tf.reduce_sum(tf.cast(mask, tf.int64)))

  def update(self, scores, class_ids, labels, mask) -> None:
    self._update(tf.cast(scores, tf.float32), tf.cast(class_ids, tf.int64), tf.cast(labels, tf.float32),
                 tf.cast(mask, tf.bool))

  def result(self) -> dict[str, Any]:
    return {"n": int(self._lists.numpy()), "num_items": int(self._items.numpy()),
            "metrics": {m.name: float(m.result()) for m in self._metrics}}


def _timed(batches: Iterable, consume: Callable[..., None], progress: bool = False) -> dict[str, float]:
  """Runs `consume` over `batches`; returns wall seconds, the seconds spent waiting for input, and the seconds,
  size and input wait of the first batch (which include tracing and the pipeline's start-up). With `progress`,
  a long pass shows a line on stderr (instances, instances/s)."""
  iterator = iter(batches)
  line = progress_line.ProgressLine(progress_line.DEFAULT_EVERY_SECONDS) if progress else None
  done = 0
  input_seconds = 0.0
  first_seconds, first_size, first_input_seconds = 0.0, 0, 0.0
  start = time.perf_counter()
  try:
    while True:
      before = time.perf_counter()
      try:
        batch = next(iterator)
      except StopIteration:
        break
      input_seconds += time.perf_counter() - before
      consume(*batch)
      size = int(tf.shape(batch[1])[0])  # The labels': inputs may be a dict (hybrid text).
      if not first_size:
        first_seconds, first_size = time.perf_counter() - start, size
        first_input_seconds = input_seconds
      if line is not None:
        done += size
        if line.due():
          line.show(f"evaluated {done:,} instances ({done / line.elapsed:,.0f} instances/s)")
  finally:  # A bad record met mid-pass is reported on a line of its own.
    if line is not None:
      line.close()
  return {"seconds": time.perf_counter() - start, "input_seconds": input_seconds, "first_batch_seconds": first_seconds,
          "first_batch_size": first_size, "first_batch_input_seconds": first_input_seconds}


def _with_throughput(report: dict[str, Any], timing: dict[str, float]) -> dict[str, Any]:
  seconds = max(timing["seconds"], 1e-9)
  steady_seconds = max(timing["seconds"] - timing["first_batch_seconds"], 1e-9)
  report["timing"] = {"seconds": timing["seconds"], "input_seconds": timing["input_seconds"],
                      "input_fraction": timing["input_seconds"] / seconds,
                      "instances_per_second": report["n"] / seconds,
                      "first_batch_seconds": timing["first_batch_seconds"],
                      "steady_instances_per_second": (report["n"] - timing["first_batch_size"]) / steady_seconds,
                      "steady_input_fraction": (timing["input_seconds"] - timing["first_batch_input_seconds"])
                                               / steady_seconds}
  return report


def evaluate_dataset(score_fn: served.ScoreFn, dataset: tf.data.Dataset, class_names: list[str],
                     ks: tuple[int, ...] = (1, 5),
                     evaluator: ClassificationEvaluator | None = None,
                     loss_fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor] | None = None,
                     progress: bool = False,
                     observe: Callable[[tf.Tensor, tf.Tensor], None] | None = None) -> dict[str, Any]:
  """Evaluates classification batches `(inputs, class ids [batch_size])` in one streaming pass.

  Args:
    score_fn: Raw inputs -> class scores `[batch_size, num_classes]` (`served.make_score_fn`).
    dataset: Finite dataset of (inputs, labels) batches.
    class_names: Class names in id order.
    ks: Cutoffs K.
    evaluator: The (reset) evaluator to accumulate into; None for `get_evaluator(class_names, ks)`.
    loss_fn: Optional (scores, class ids) -> mean loss of the batch; its mean over instances (batch means
      weighted by batch size, as Keras' `evaluate`) is added to the metrics as "loss", in the same pass.
    progress: Show a progress line on stderr once the pass takes a while.
    observe: Optional (scores, labels) -> None called on every batch (e.g. `calibration.CalibrationMetrics`).

  Returns:
    The report of `ClassificationEvaluator.result`, plus "timing": seconds, input_seconds, input_fraction,
    instances_per_second (whole pass), first_batch_seconds (tracing included), and steady_instances_per_second
    and steady_input_fraction (both without the first batch, whose wait includes the pipeline's start-up).
  """
  if evaluator is None:
    evaluator = get_evaluator(class_names, ks)
  else:
    evaluator.reset()
  loss_total, count = 0.0, 0

  def consume(inputs, labels):
    nonlocal loss_total, count
    scores = score_fn(inputs)
    evaluator.update(scores, labels)
    if observe is not None:
      observe(scores, labels)
    if loss_fn is not None:
      size = int(tf.shape(labels)[0])
      loss_total += float(loss_fn(scores, labels)) * size
      count += size

  timing = _timed(dataset, consume, progress)
  report = evaluator.result()
  if loss_fn is not None:
    report["metrics"]["loss"] = loss_total / max(count, 1)
  return _with_throughput(report, timing)


def evaluate_lists(score_fn: served.ScoreFn, dataset: tf.data.Dataset, ks: tuple[int, ...] = (1, 5),
                   progress: bool = False) -> dict[str, Any]:
  """Evaluates ELWC batches `(inputs, class ids [b, l], labels [b, l], mask [b, l])` in one streaming pass."""
  evaluator = ListEvaluator(ks)
  timing = _timed(dataset, lambda inputs, ids, labels, mask: evaluator.update(score_fn(inputs), ids, labels, mask),
                  progress)
  return _with_throughput(evaluator.result(), timing)


def _default_feature(spec: tf.TensorSpec) -> tuple[str, str]:
  """(kind, default key) of the model input: "text", "dense" or "image"."""
  if spec.dtype == tf.string:
    return "text", tfrecords.TEXT_KEY
  if spec.shape.rank == 2:
    return "dense", tfrecords.DENSE_KEY
  return "image", tfrecords.IMAGE_KEY


def example_schema(config: EvaluateConfig, spec: tf.TensorSpec, class_names: list[str]) -> tuple[
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


def elwc_schema(config: EvaluateConfig, spec: tf.TensorSpec) -> tuple[elwc.ElwcSchema, str, str]:
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
  value (`rank4class_data.elwc.one_number`, as ELWC class lists are read), or a class name (bytes), mapped
  through `label_to_id` (the model's class names -> ids).

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


def _example_batches(config: EvaluateConfig, schema: tfrecords.ExampleSchema, key: str,
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


def _elwc_batches(config: EvaluateConfig, spec: tf.TensorSpec, class_names: list[str],
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


def _stored_in_another_type(error: tf.errors.InvalidArgumentError, keys: tuple[str, ...]) -> bool:
  """Whether `error` is TensorFlow's parse error for one of `keys` holding another type than the pipeline
  parses."""
  return "Data types don't match" in str(error) and any(f"Key: {key}," in str(error) for key in keys)


def resolved_report_path(config: EvaluateConfig, export_dir: str) -> str:
  """Where `evaluate` writes the report of the model in `export_dir`: `config.report_path`; by default
  `eval_report.json` in the training model_dir (given as the model_dir, or as its `export/` folder), else
  `<SavedModel folder>.eval_report.json` beside it (two exports in one folder keep their own reports); "" for
  none."""
  if config.report_path is not None:
    return config.report_path
  folder = export_dir.rstrip("/")
  if export_dir != config.model_path:
    return os.path.join(config.model_path, REPORT_FILE)
  if os.path.basename(folder) == "export":
    return os.path.join(os.path.dirname(folder), REPORT_FILE)
  return f"{folder}.{REPORT_FILE}"


def evaluate(config: EvaluateConfig) -> dict[str, Any]:
  """Loads the model, streams the records in batches, writes the JSON report (atomically) and returns it.

  Raises:
    FileNotFoundError: For a missing model or no file matching `data_files`.
    ValueError: For records whose classes or features do not match the model.
    DataError: For a bad class id, class name or relevance label (naming its file, row and field).
    tf.errors.InvalidArgumentError: For a bad record (naming its file, row and field).
  """
  export_dir = served.resolve_export_dir(config.model_path)
  kind = served.read_inputs(export_dir).kind
  if kind != served.ONE_STAGE or config.class_texts:
    report = _evaluate_served(config, served.load(export_dir, config.class_texts, config.embedding_cache_dir))
  else:
    report = _evaluate_model(config, export_dir)
  report.update(model=export_dir, data_files=config.data_files, input_format=config.input_format)
  report_path = resolved_report_path(config, export_dir)
  if report_path:
    write_report(report_path, report)
  return report


def _with_rewriting(run: Callable[[bool], dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
  """`run(rewrite=False)`; again with each record's labels read one by one when a later record stores its class in
  another form than the first."""
  try:
    return run(False)
  except tf.errors.InvalidArgumentError as e:
    if not _stored_in_another_type(e, keys):
      raise
    return run(True)


def _evaluate_served(config: EvaluateConfig, model: served.ServedModel) -> dict[str, Any]:
  """A two-stage or zero-shot export on classification records or rows: exact ranks of the true class over the
  export's classes (two-stage: a class the first stage misses ranks below every candidate); a zero-shot export
  also on ELWC lists (its class set's ids)."""
  data_spec = tf.TensorSpec([None], tf.string) if model.input_kind == served.TEXT else model.input_spec
  ks = tuple(config.metric_ks)
  if config.input_format == ELWC:
    if model.kind == served.TWO_STAGE:
      raise ValueError(f"{config.data_files}: a two-stage export scores only the first stage's candidates, not "
                       "every class an ELWC list names; evaluate it on classification records or rows (a class "
                       "it misses then ranks below its candidates), or the ranker's own export on the lists")

    def list_run(rewrite: bool) -> dict[str, Any]:
      batches = _elwc_batches(config, data_spec, model.class_names, rewrite)
      return evaluate_lists(lambda x: tf.constant(model.scores(model.model_inputs(x))), batches, ks,
                            config.progress)

    report = _with_rewriting(list_run, (config.class_id_key, config.label_key))
    report["kind"] = model.kind
    return report
  if config.input_format == ROWS:
    config = converted_rows(config, model.class_names)
  schema, key = example_schema(config, data_spec, model.class_names)
  reached = []

  def ranks_of(inputs, class_ids) -> np.ndarray:
    ranks = model.ranks(model.model_inputs(inputs), np.asarray(class_ids))
    reached.append(np.isfinite(ranks))
    return ranks

  def run(rewrite: bool) -> dict[str, Any]:
    reached.clear()
    batches = _example_batches(config, schema, key, model.class_names, rewrite)
    return full_class_evaluation.evaluate_ranks(ranks_of, batches, model.class_names, ks, config.progress)

  report = _with_rewriting(run, (schema.label_key,))
  report["kind"] = model.kind
  if model.calibration is not None:
    report["calibration_note"] = (f"the probabilities of {model.kind} exports are not evaluated here; evaluate the "
                                  "ranker's own export for its calibration")
  if model.kind == served.TWO_STAGE:
    report["num_candidates"] = model.max_k
    report["recall_at_m"] = float(np.concatenate(reached).mean()) if reached else None
  return report


def _evaluate_model(config: EvaluateConfig, export_dir: str) -> dict[str, Any]:
  """A training run's export (the Keras model) on "example", "elwc" or row records."""
  spec = served.serving_input_spec(export_dir)
  model = served.load_keras_model(export_dir)
  if config.input_format == ROWS:
    config = converted_rows(config, model.class_names)
  score_fn = served.make_score_fn(model, spec)
  ks = tuple(config.metric_ks)
  # A model trained on frozen text embeddings reads text records; their texts are embedded on the way in.
  frozen = served.frozen_text_encoder(export_dir)
  calibration = served.read_calibration(export_dir)
  meter = None
  data_spec = spec if frozen is None else tf.TensorSpec([None], tf.string)

  def model_inputs(batches: Iterable) -> Iterable:
    return batches if frozen is None else _embedded(batches, frozen, config.embedding_cache_dir)

  if config.input_format == EXAMPLE:
    schema, key = example_schema(config, data_spec, model.class_names)
    chunk_size = config.chunked(model.num_classes)

    def run(rewrite: bool) -> dict[str, Any]:
      nonlocal meter
      batches = model_inputs(_example_batches(config, schema, key, model.class_names, rewrite))
      if chunk_size:
        return full_class_evaluation.evaluate_full_classes(model, batches, ks, chunk_size, config.progress)
      meter = calibration_lib.CalibrationMetrics(calibration) if calibration is not None else None
      return evaluate_dataset(score_fn, batches, model.class_names, ks, progress=config.progress,
                              observe=None if meter is None else lambda s, y: meter.update(s.numpy(), y.numpy()))

    keys = (schema.label_key,)
  else:

    def run(rewrite: bool) -> dict[str, Any]:
      batches = model_inputs(_elwc_batches(config, data_spec, model.class_names, rewrite))
      return evaluate_lists(score_fn, batches, ks, config.progress)

    keys = (config.class_id_key, config.label_key)
  report = _with_rewriting(run, keys)
  if meter is not None:
    report["calibration"] = meter.result()
  elif calibration is None:
    report["calibration_note"] = served.NOT_CALIBRATED_NOTE.format(file=served.CALIBRATION_FILE)
  else:
    report["calibration_note"] = "probabilities are evaluated on classification records with full score matrices only"
  return report


def per_class_csv_path(report_path: str) -> str:
  """Where the per-class table of the report at `report_path` goes: `<report>.per_class.csv` beside it."""
  return os.path.splitext(report_path)[0] + ".per_class.csv"


def write_report(report_path: str, report: dict[str, Any]) -> None:
  """Writes the JSON report and, when it has per-class recall, the whole per-class table as CSV beside it
  (class, recall, instances; sorted by recall, worst first); each file whole or not at all. Records both paths in
  `report` ("report_path", "per_class_csv")."""
  if "per_class_recall" in report:
    csv_path = per_class_csv_path(report_path)
    with atomic_output(csv_path) as f:
      writer = csv.writer(f)
      writer.writerow(["class", "recall", "instances"])
      for name in _classes_by_recall(report):
        recall = report["per_class_recall"][name]
        writer.writerow([name, "" if recall is None else f"{recall:.6f}", report["class_counts"][name]])
    report["per_class_csv"] = csv_path
  write_json(report_path, report)
  report["report_path"] = report_path


def _classes_by_recall(report: dict[str, Any]) -> list[str]:
  """Classes with instances by recall, worst first (ties: more instances first), then those without instances."""
  recall, counts = report["per_class_recall"], report["class_counts"]
  scored = sorted((name for name in recall if recall[name] is not None), key=lambda n: (recall[n], -counts[n], n))
  return scored + [name for name in recall if recall[name] is None]


# The terminal's per-class table lists the best and worst this many classes when there are more than twice as many.
PER_CLASS_SHOWN = 10
# Up to this many classes the report holds the whole confusion matrix; above, its non-zero cells.
DENSE_CONFUSION_CLASSES = 100


def _format(value: float | None, scale: float = 100.0) -> str:
  return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value * scale:.2f}"


def format_table(report: dict[str, Any]) -> str:
  """A plain-text table of a report: the metrics (x100, as in the paper) and the per-class recall: every class up
  to 2 x `PER_CLASS_SHOWN` classes, else the `PER_CLASS_SHOWN` best and worst (the whole table: the report's
  per-class CSV)."""
  lines = [f"{'metric':<24}{'value (x100)':>14}", "-" * 38]
  lines += [f"{name:<24}{_format(value):>14}" for name, value in report["metrics"].items()]
  lines.append(f"{'instances':<24}{report['n']:>14d}")
  if "num_items" in report:
    lines.append(f"{'candidates':<24}{report['num_items']:>14d}")
  if "per_class_recall" in report:
    recall = report["per_class_recall"]
    if len(recall) <= 2 * PER_CLASS_SHOWN:
      sections = [("", list(recall))]
    else:
      counts = report["class_counts"]
      scored = [name for name in recall if recall[name] is not None]
      best = sorted(scored, key=lambda n: (-recall[n], -counts[n], n))[:PER_CLASS_SHOWN]
      sections = [(f"the {PER_CLASS_SHOWN} best of {len(recall):,} classes", best),
                  (f"the {PER_CLASS_SHOWN} worst", _classes_by_recall(report)[:PER_CLASS_SHOWN])]
    width = max([24, *(len(name) + 2 for _, names in sections for name in names)])
    for title, names in sections:
      lines += ["", f"{'class':<{width}}{'recall (x100)':>14}{'count':>9}" + (f"   ({title})" if title else ""),
                "-" * (width + 23)]
      lines += [f"{name:<{width}}{_format(recall[name]):>14}{report['class_counts'][name]:>9d}" for name in names]
    if len(sections) > 1:
      where = f": {report['per_class_csv']}" if report.get("per_class_csv") else " in the report"
      lines.append(f"All {len(recall):,} classes{where}")
  if report.get("calibration") is not None:
    lines += ["", calibration_lib.metrics_line(report["calibration"])]
  if report.get("kind") == served.TWO_STAGE:
    recall = report["recall_at_m"]
    lines += ["", f"two-stage export: the true class among the first stage's {report['num_candidates']:,} "
              f"candidates for {_format(recall)}% of the instances (recall@M); a class it misses counts as ranked "
              f"below them: {report['timing']['instances_per_second']:.0f} instances/s"]
  elif report.get("kind") == served.ZERO_SHOT and "class_counts" in report:
    lines += ["", f"zero-shot export: exact ranks over the {len(report['class_counts']):,} classes given as texts: "
              f"{report['timing']['instances_per_second']:.0f} instances/s"]
  elif "chunk_size" in report:
    lines += ["", f"exact ranks over all {len(report['class_counts']):,} classes, {report['chunk_size']:,} at a "
              f"time: {report['timing']['instances_per_second']:.0f} instances/s"]
  elif "timing" in report:
    timing = report["timing"]
    lines += ["", f"{timing['instances_per_second']:.0f} instances/s ({timing['steady_instances_per_second']:.0f} "
              f"after the first batch), input pipeline {100 * timing['input_fraction']:.1f}% of "
              f"{timing['seconds']:.2f}s ({100 * timing['steady_input_fraction']:.1f}% after the first batch)"]
  return "\n".join(lines)
