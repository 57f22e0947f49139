"""Predictions of an exported Rank4Class model on new raw inputs, in batches, to a CSV or JSONL file.

Inputs: text lines (one instance a line), rows (CSV/TSV/JSONL/Orange `.tab`: a text column or feature columns,
an optional id column, an optional label column), or the converter's TFRecords. Outputs: one row per instance
with its id, the top-K class names and scores and, when the input has a label, the label and whether it is in
the top K. Bad rows follow the converter's policy (`rank4class_data.rows.bad_rows`).

A calibrated export (`served.CALIBRATION_FILE`, fitted by `rank4class-train` on the validation split) also
gives each top-K class its probability (softmax of the scores / T; `rank4class.inference.calibration`) and,
with `coverage`, each instance's conformal class set: the classes that together hold the true class for that
share of instances (CSV: the names joined by `CLASS_SET_SEPARATOR`, most probable first; JSONL: a list).

Every export kind is served (`served.KINDS`): a training run's export, a two-stage export (the retriever's top
M re-ranked) and a zero-shot export (the training classes, or those of a class-texts file given here). A model
trained on frozen text embeddings takes vectors; its export's inputs description (`served.INPUTS_FILE`) names
the text encoder, so raw texts are embedded the same way (through the embedding cache) before scoring. A
hybrid text model's export (TF-IDF beside the MiniLM embedding) names its text encoder too: the model is built
without MiniLM and its embedding branch reads the embedding cache, so texts seen in training are not embedded
again (hybrid exports of 0.8 and earlier run MiniLM in their graph).

From Python (other TF projects):
  predictor = predict.Predictor("/tmp/run")               # a training model_dir or an export
  names, scores = predictor.rank(["some text", "another"], k=3)
"""

import dataclasses
import itertools
import math
import os
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from rank4class.inference import calibration as calibration_lib
from rank4class.inference import prediction_output, served
from rank4class.inference.prediction_output import (  # noqa: F401  Re-exported: predict.X as before.
  CLASS_SET_SEPARATOR,
  PredictionSummary,
  PredictionWriter,
)
from rank4class_data import file_formats, labelled_records, progress_line
from rank4class_data.conversion import convert, image_folders
from rank4class_data.label_vocabulary import LabelVocabulary
from rank4class_data.records import tfrecords
from rank4class_data.rows import bad_rows as bad_rows_lib
from rank4class_data.rows import row_tables
from rank4class_data.validation import DataError, FieldError, atomic_paths, check_choice, check_range

LINES = "lines"
TFRECORD = "tfrecord"
IMAGES = "images"  # A folder: images in it (unlabelled) and in class-named subfolders (labelled).
INPUT_FORMATS = (LINES, *row_tables.INPUT_FORMATS, TFRECORD, IMAGES)
OUTPUT_FORMATS = ("csv", "jsonl")
AUTO = "auto"


@dataclasses.dataclass
class Ranking:
  """One batch's predictions (`Predictor.predict`).

  Attributes:
    names: The top-K class names, best first, str `[n, k]`.
    scores: Their scores float32 `[n, k]`.
    probabilities: Their calibrated probabilities float `[n, k]`, or None for an uncalibrated export.
    class_sets: With a coverage: each instance's conformal class set (names, most probable first), else None.
  """

  names: np.ndarray
  scores: np.ndarray
  probabilities: np.ndarray | None = None
  class_sets: list[list[str]] | None = None


class Predictor:
  """An export of any kind (`served.KINDS`), loaded once, ranking raw inputs.

  Args:
    model_path: A training model_dir (its export/ is used) or an exported SavedModel (one-stage, two-stage or
      zero-shot).
    embedding_cache_dir: Where frozen text embeddings (and zero-shot class vectors) are cached; None for the
      default.
    class_texts: Zero-shot exports: a class-texts file (columns class, text) whose classes are ranked instead
      of the training ones.
  """

  def __init__(self, model_path: str, embedding_cache_dir: str | None = None, class_texts: str | None = None):
    self.served = served.load(model_path, class_texts, embedding_cache_dir)
    self.export_dir = self.served.export_dir
    self.frozen_text_encoder = self.served.inputs.frozen_text_encoder
    self.input_kind = self.served.input_kind
    self.input_shape = self.served.input_shape

  @property
  def model(self):
    """The Keras `Rank4ClassModel` of a one-stage export (None for the other kinds); a hybrid text model built
    without MiniLM takes `served.embedding_input_spec`'s dict (`self.served.model_inputs` makes it)."""
    return getattr(self.served, "model", None)

  @property
  def class_names(self) -> list[str]:
    return self.served.class_names

  @property
  def max_k(self) -> int:
    """The most classes a prediction holds (two-stage: the first stage's M)."""
    return self.served.max_k

  def rank(self, inputs, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """The `k` best classes of each input, best first: (class names str `[n, k]`, scores float32 `[n, k]`).

    `inputs`: texts (text models), float vectors `[n, d]` (dense) or uint8 images `[n, h, w, c]`.
    """
    ids, scores = self.served.top_k(self.served.model_inputs(inputs), k)
    return np.asarray(self.class_names, dtype=object)[ids], scores

  @property
  def calibrated(self) -> bool:
    """Whether the export gives probabilities (it carries a calibration)."""
    return self.served.calibration is not None

  def class_set_threshold(self, coverage: float) -> float:
    """The threshold on 1 - p of class sets at `coverage`.

    Raises:
      ValueError: for an uncalibrated export, or a coverage outside (0, 1) or out of reach with the export's
        calibration rows (naming the value).
    """
    if self.served.calibration is None:
      raise ValueError(f"a coverage ({coverage}) needs class probabilities, but "
                       f"{self.served.calibration_note}")
    return self.served.calibration.threshold(coverage)

  def predict(self, inputs, k: int = 5, coverage: float | None = None) -> Ranking:
    """`rank`, plus the top-K classes' calibrated probabilities (calibrated exports) and, with `coverage`, the
    conformal class sets; each instance is scored once.

    Raises:
      ValueError: a coverage for an uncalibrated export, outside (0, 1), or out of reach with the export's
        calibration rows (naming the value).
    """
    threshold = self.class_set_threshold(coverage) if coverage is not None else None
    calibration = self.served.calibration
    if calibration is None:
      return Ranking(*self.rank(inputs, k))
    ids, scores = self.served.scored_classes(self.served.model_inputs(inputs))
    positions, top_scores = served.top_k_positions(scores, k)
    probabilities = calibration.probabilities(scores)
    names = np.asarray(self.class_names, dtype=object)
    ranking = Ranking(names[np.take_along_axis(ids, positions, axis=1)], top_scores,
                      np.take_along_axis(probabilities, positions, axis=1))
    if threshold is not None:
      sets = calibration_lib.class_sets(probabilities, threshold)
      order = np.argsort(-probabilities, axis=1, kind="stable")
      ranking.class_sets = [list(names[row_ids[row_order][row_sets[row_order]]])
                            for row_ids, row_order, row_sets in zip(ids, order, sets, strict=True)]
    return ranking


@dataclasses.dataclass
class PredictConfig:
  """What `predict` reads and writes.

  Attributes:
    model_path: A training model_dir (its export/ is used) or an exported SavedModel.
    input_path: Text lines (`.txt`), rows (`.csv`, `.tsv`, `.jsonl`, `.tab`), the converter's TFRecord, or a
      folder of images (those in it, and those in subfolders named by their true class; each resized to the
      model's input size, the id is the path inside the folder).
    output_path: Predictions file (`.csv` or `.jsonl`).
    input_format: One of INPUT_FORMATS, or "auto" for the extension's (`.txt` and unknown: lines;
      `.tfrecord`: TFRecord; a folder: images).
    output_format: "csv", "jsonl", or "auto" for the extension's.
    text_column: Rows: the text column (text models); "auto": `.tab`'s string column, else "text".
    feature_columns: Rows: the numeric columns of a dense model's input, in the model's order.
    id_column: Rows: an id column copied to the output; None numbers the rows.
    label_column: Rows: an optional true-label column (class names); the output then says whether it is in
      the top K.
    top_k: Classes per prediction.
    batch_size: Instances scored per call.
    bad_rows: The bad-row policy (fail, or skip into `<output stem>.rejects.jsonl`).
    embedding_cache_dir: Frozen-text models: where text embeddings are cached; None for the default.
    progress: Print a progress line (rows, rows/s) on stderr.
    class_texts: Zero-shot exports: a class-texts file (CSV/TSV/JSONL, columns class and text) whose classes
      are ranked instead of the training ones (classes never seen in training).
    coverage: Calibrated exports: also write each instance's conformal class set at this coverage (e.g. 0.9:
      the set holds the true class for 90% of instances like the validation split's); None for none.
  """

  model_path: str
  input_path: str
  output_path: str
  input_format: str = AUTO
  output_format: str = AUTO
  text_column: str = AUTO
  feature_columns: tuple[str, ...] = ()
  id_column: str | None = None
  label_column: str | None = None
  top_k: int = 5
  batch_size: int = 256
  bad_rows: bad_rows_lib.BadRowPolicy = dataclasses.field(default_factory=bad_rows_lib.BadRowPolicy)
  embedding_cache_dir: str | None = None
  progress: bool = True
  class_texts: str | None = None
  coverage: float | None = None

  def __post_init__(self):
    self.feature_columns = tuple(self.feature_columns)
    if self.coverage is not None:
      self.coverage = calibration_lib.check_coverage(self.coverage)
    check_choice("input_format", self.input_format, (AUTO, *INPUT_FORMATS))
    check_choice("output_format", self.output_format, (AUTO, *OUTPUT_FORMATS))
    if self.resolved_output_format() not in OUTPUT_FORMATS:
      raise ValueError(f"{self.output_path}: cannot tell the output format from the extension; use .csv or "
                       ".jsonl, or give output_format.")
    check_range("top_k", self.top_k, 1, integer=True)
    check_range("batch_size", self.batch_size, 1, integer=True)

  def resolved_input_format(self) -> str:
    if self.input_format != AUTO:
      return self.input_format
    if image_folders.is_image_folder(self.input_path):
      return IMAGES
    extension = os.path.splitext(self.input_path)[1].lower()
    if extension in file_formats.TFRECORD_EXTENSIONS:
      return TFRECORD
    try:
      return row_tables.infer_format(self.input_path)
    except ValueError:
      return LINES

  def resolved_output_format(self) -> str:
    if self.output_format != AUTO:
      return self.output_format
    return os.path.splitext(self.output_path)[1].lower().lstrip(".")


@dataclasses.dataclass
class _Item:
  id: str
  value: Any
  label: str | None
  row: int
  line: int | None



def _items(config: PredictConfig, predictor: Predictor,
           rejected: bad_rows_lib.RejectedRows) -> Iterator[_Item]:
  """The input's instances; bad rows go to `rejected` (which raises under the fail policy)."""
  input_format = config.resolved_input_format()
  if input_format == LINES:
    yield from _line_items(config, predictor, rejected)
  elif input_format == TFRECORD:
    yield from _tfrecord_items(config, predictor, rejected)
  elif input_format == IMAGES:
    yield from _images(config, predictor, rejected)
  else:
    yield from _table_items(config, predictor, rejected, input_format)


def _line_items(config: PredictConfig, predictor: Predictor,
                rejected: bad_rows_lib.RejectedRows) -> Iterator[_Item]:
  """Text lines, one instance each."""
  if predictor.input_kind != "text":
    raise ValueError(f"{config.input_path}: text lines need a text model; this model reads "
                     f"{predictor.input_kind} inputs (give rows with feature_columns, or a TFRecord).")
  # A byte order mark is dropped; a line that is not UTF-8 is a bad row (located, or skipped into the
  # rejects).
  for record in row_tables.read_lines(config.input_path, on_bad_row=rejected).records:
    yield _Item(str(record.row), record.fields["text"], None, record.row, record.line)


def _tfrecord_items(config: PredictConfig, predictor: Predictor,
                    rejected: bad_rows_lib.RejectedRows) -> Iterator[_Item]:
  """The converter's TFRecord, read with the label vocabulary beside it."""
  records = tfrecords.read_tfrecord(config.input_path)
  # The file is checked (a TFRecord, with records) before its vocabulary is looked for.
  first = next(records, None)
  vocab_path = convert.default_vocab_path(config.input_path)
  if not os.path.isfile(vocab_path):
    raise DataError(config.input_path, f"no label vocabulary {vocab_path} beside it",
                    expected="the converter's TFRecord with the .labels.json it writes beside it "
                    "(rank4class-convert)")
  metadata = convert.read_metadata(vocab_path)
  schema, classes = tfrecords.ExampleSchema.from_dict(metadata["schema"]), metadata["classes"]
  if list(classes) != predictor.class_names:
    raise ValueError(f"{vocab_path}: the records' classes {classes} differ from the model's "
                     f"{predictor.class_names}; their labels would be misread.")
  label_to_id = LabelVocabulary(list(classes)).label_to_id
  for row, record in enumerate(itertools.chain([first] if first is not None else [], records), start=1):
    try:  # Labels as int64 ids, integral floats or class names, as `rank4class-evaluate` reads them.
      record = labelled_records.example_with_class_id(record, schema.label_key, label_to_id,
                                                      config.input_path, row)
      instance = tfrecords.decode_instance(record, schema)
    except FieldError as e:
      rejected(e.at(config.input_path, row))
      continue
    except DataError as e:
      rejected(e)
      continue
    value = {"text": instance.text, "dense": instance.dense, "image": instance.image}[predictor.input_kind]
    if value is None:
      raise ValueError(f"{config.input_path}: the records have no {predictor.input_kind} feature, but the "
                       f"model reads {predictor.input_kind} inputs.")
    yield _Item(str(row), value, classes[instance.label], row, None)


def _table_items(config: PredictConfig, predictor: Predictor, rejected: bad_rows_lib.RejectedRows,
                 input_format: str) -> Iterator[_Item]:
  """A table's rows: the text column or the feature columns, with the id and label columns when named."""
  table = row_tables.read_table(config.input_path, input_format, on_bad_row=rejected)
  text_column = (table.text_column or "text") if config.text_column == AUTO else config.text_column
  needed = [text_column] if predictor.input_kind == "text" else list(config.feature_columns)
  if predictor.input_kind == "image":
    raise ValueError(f"{config.input_path}: this model reads images; give a folder of images or the "
                     "converter's TFRecord of them.")
  if not needed:
    raise ValueError("This model reads dense features: name their columns (feature_columns), in "
                     "training order.")
  known = set(predictor.class_names)
  for name in needed + [c for c in (config.id_column, config.label_column) if c]:
    if name not in table.columns:
      raise DataError(table.path, f"missing column '{name}'", row=0, line=1, field=name,
                      expected=f"one of the header's columns {table.columns}")
  for record in table.records:
    try:
      yield _Item(str(record.value(config.id_column)) if config.id_column else str(record.row),
                  _value(record, predictor, needed),
                  _label(record, config.label_column, known, predictor.class_names), record.row, record.line)
    except FieldError as e:
      rejected(e.at(table.path, record.row, record.line))


def _images(config: PredictConfig, predictor: Predictor,
            rejected: bad_rows_lib.RejectedRows) -> Iterator[_Item]:
  """A folder's images, resized to the model's input; a subfolder's name is its images' true class."""
  if predictor.input_kind != "image":
    raise ValueError(f"{config.input_path}: a folder of images needs an image model; this model reads "
                     f"{predictor.input_kind} inputs.")
  height, width, channels = predictor.input_shape
  images = image_folders.list_images(config.input_path, unlabelled=True)
  for row, (label, path) in enumerate(images, start=1):
    try:
      if label is not None and label not in predictor.class_names:
        raise FieldError("class", f"class folder {label!r} is not one of the model's classes",
                         f"one of {predictor.class_names[:20]}, or the image directly in the folder")
      image = image_folders.read_image(path, (height, width), channels)
    except FieldError as e:
      rejected(e.at(path, None))
      continue
    yield _Item(os.path.relpath(path, config.input_path), image, label, row, None)


def _value(record: row_tables.Record, predictor: Predictor, columns: list[str]) -> Any:
  if predictor.input_kind == "text":
    return record.text(columns[0])
  values = [record.number(name) for name in columns]
  if len(values) != predictor.input_shape[0]:
    raise ValueError(f"{len(values)} feature columns given, but the model reads {predictor.input_shape[0]} "
                     "features.")
  return np.asarray(values, np.float32)


def _label(record: row_tables.Record, column: str | None, known: set[str],
           class_names: list[str]) -> str | None:
  """The row's true class name; a number written as a float (JSON 2.0, a "2.0" cell) names class "2"."""
  if column is None:
    return None
  label = str(record.value(column)).strip()
  if label in known:
    return label
  try:
    number = float(label)
  except ValueError:
    number = math.nan
  if number.is_integer() and str(int(number)) in known:
    return str(int(number))
  raise FieldError(column, f"unknown label {label!r}", f"one of the model's {len(class_names):,} classes "
                   f"({labelled_records.listed_classes(class_names)})")


def _summary(config: PredictConfig, predictor: Predictor, rows: int, rejected: int,
             rejects_path: str | None, counts: tuple[int, int, int], set_counts: tuple[int, int], k: int,
             seconds: float) -> PredictionSummary:
  """`predict`'s summary from its counts: (labelled rows, top-k hits, top-1 hits) and (class-set hits, summed
  class-set sizes)."""
  labelled, hits, top_1_hits = counts
  set_hits, set_sizes = set_counts
  sets = config.coverage is not None
  set_coverage = set_hits / labelled if sets and labelled else None
  warning = (calibration_lib.coverage_shortfall(config.coverage, set_coverage, labelled,
                                                predictor.served.calibration.n)
             if set_coverage is not None else None)
  return PredictionSummary(config.output_path, rows, rejected, rejects_path, labelled,
                           hits / labelled if labelled else None, seconds,
                           top_1_hits / labelled if labelled else None,
                           k, predictor.served.calibration_note, config.coverage,
                           set_coverage, set_sizes / rows if sets else None, warning)


def predict(config: PredictConfig, predictor: Predictor | None = None, stream=None) -> PredictionSummary:
  """Predicts every instance of `config.input_path` and writes the predictions (and rejects) atomically.

  Raises:
    FileNotFoundError: for a missing model or input.
    DataError / ValueError: for bad input (the first bad row under the fail policy), a model that cannot read
      the input, or too many bad rows.
  """
  start = time.time()
  predictor = predictor or Predictor(config.model_path, config.embedding_cache_dir, config.class_texts)
  k = min(config.top_k, predictor.max_k)
  # Rows per second of predicting, not of loading the model.
  progress = progress_line.ProgressLine(stream=stream)
  rejected = bad_rows_lib.RejectedRows(config.bad_rows)
  skipping = config.bad_rows.policy == bad_rows_lib.SKIP
  rejects_path = config.bad_rows.rejects_file(config.output_path) if skipping else None
  rows, labelled, hits, top_1_hits, set_hits, set_sizes = 0, 0, 0, 0, 0, 0
  if config.coverage is not None:  # Refused before anything is read or written.
    predictor.class_set_threshold(config.coverage)
  with atomic_paths(config.output_path, *([rejects_path] if skipping else [])) as temp_paths:
    with open(temp_paths[0], "w", encoding="utf-8", newline="") as out:
      writer = prediction_output.PredictionWriter(out, config.resolved_output_format(), k)
      batch: list[_Item] = []
      for item in itertools.chain(_items(config, predictor, rejected), [None]):
        if item is not None:
          batch.append(item)
        if batch and (item is None or len(batch) == config.batch_size):
          ranking = predictor.predict(np.stack([b.value for b in batch]) if predictor.input_kind != "text"
                                      else [b.value for b in batch], k, config.coverage)
          for i, (b, top_names) in enumerate(zip(batch, ranking.names, strict=True)):
            hit = None if b.label is None else b.label in top_names
            labelled += hit is not None
            hits += bool(hit)
            top_1_hits += b.label is not None and b.label == top_names[0]
            class_set = None if ranking.class_sets is None else ranking.class_sets[i]
            if class_set is not None:
              set_sizes += len(class_set)
              set_hits += b.label is not None and b.label in class_set
            writer.write(b.id, b.label, top_names, ranking.scores[i],
                         None if ranking.probabilities is None else ranking.probabilities[i], hit, class_set)
          rows += len(batch)
          batch = []
          if config.progress and progress.due():
            progress.show(f"predicted {rows} rows ({prediction_output.rate(rows, progress.elapsed)} rows/s)")
    progress.close()
    if rows == 0:
      raise DataError(config.input_path, "no instances to predict" + (f" ({len(rejected)} rejected)"
                                                                       if len(rejected) else ""),
                      expected="at least one row")
    if skipping:
      rejected.write(temp_paths[1])
  return _summary(config, predictor, rows, len(rejected), rejects_path, (labelled, hits, top_1_hits),
                  (set_hits, set_sizes), k, time.time() - start)
