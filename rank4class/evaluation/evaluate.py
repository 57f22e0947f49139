"""The evaluation of a trained Rank4Class export (`rank4class-evaluate`): its records or rows streamed in
batches through the model of any export kind, and the report written beside the run.

The metric accumulators live in `rank4class.evaluation.evaluators`, the labelled records read for them
(schemas, labels rewritten as the model's class ids) in `rank4class_data.labelled_records`, the report's files
and table in `rank4class.evaluation.evaluation_report`; their names are importable from here too
(`evaluate.ClassificationEvaluator`, `evaluate.class_id`, `evaluate.format_table`).
"""

import dataclasses
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class.evaluation import full_class_evaluation
from rank4class.evaluation.evaluation_report import (  # noqa: F401  Re-exported: callers use `evaluate.<name>`.
  PER_CLASS_SHOWN,
  format_table,
  per_class_csv_path,
  write_report,
)
from rank4class.evaluation.evaluators import (  # noqa: F401  Re-exported: callers use `evaluate.<name>`.
  DENSE_CONFUSION_CLASSES,
  ClassificationEvaluator,
  ListEvaluator,
  evaluate_dataset,
  evaluate_lists,
  get_evaluator,
)
from rank4class.inference import calibration as calibration_lib
from rank4class.inference import full_class_scoring, served
from rank4class_data import labelled_records
from rank4class_data.conversion import row_cache
from rank4class_data.labelled_records import (  # noqa: F401  Re-exported: callers use `evaluate.<name>`.
  ELWC_CLASS_ID_KEY,
  class_id,
  elwc_schema,
  example_schema,
  example_with_class_id,
  listed_classes,
)
from rank4class_data.messages import say
from rank4class_data.records import tfrecords
from rank4class_data.validation import check_choice, check_range

EXAMPLE = "example"
ELWC = "elwc"
ROWS = "rows"  # Row files (CSV, TSV, JSONL, .tab) or an image folder, converted as training converts them.
INPUT_FORMATS = (EXAMPLE, ELWC, ROWS)
REPORT_FILE = "eval_report.json"


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
      `full_class_evaluation`; no confusion matrix in the report); None: chunks of 4,096 from 2,048 classes
      on, else full score matrices; 0: always full score matrices.
    embedding_cache_dir: Frozen-text models (evaluated on text records): where text embeddings are cached;
      None for the shared cache.
    rows: "rows": the columns, format and bad-row policy of the row files (as training's), whose labels are
      the model's class names.
    row_cache_dir: "rows": where converted row files are cached; None for `row_cache.DEFAULT_CACHE_DIR`.
    class_texts: Zero-shot exports: a class-texts file (columns class, text) whose classes are ranked instead
      of the training ones; the records' labels are its class names.
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
    check_choice("input_format", self.input_format, INPUT_FORMATS)
    check_range("batch_size", self.batch_size, 1, integer=True)
    if self.chunk_size is not None:  # 0: full score matrices.
      check_range("chunk_size", self.chunk_size, 0, integer=True)

  def chunked(self, num_classes: int) -> int:
    """The chunk size to rank `num_classes` classes with, or 0 for full score matrices."""
    if self.chunk_size is None:
      return full_class_scoring.DEFAULT_CHUNK_SIZE if num_classes >= full_class_scoring.CHUNKED_CLASSES else 0
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
  say(f"Rows: {converted.describe()}")
  return dataclasses.replace(config, data_files=converted.tfrecord, input_format=EXAMPLE,
                             label_vocab=converted.vocab_path)


def _embedded(batches: Iterable, model: served.ServedModel) -> Iterator:
  """`batches` with their first element, raw texts, replaced by what the model takes of them
  (`ServedModel.model_inputs`: a frozen-text model's embeddings, a hybrid one's texts beside theirs, read from
  the embedding cache; only texts it lacks run through the encoder)."""
  for inputs, *rest in batches:
    yield (model.model_inputs(inputs), *rest)



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



def _evaluate_served(config: EvaluateConfig, model: served.ServedModel) -> dict[str, Any]:
  """A two-stage or zero-shot export on classification records or rows: exact ranks of the true class over the
  export's classes (two-stage: a class the first stage misses ranks below every candidate); a zero-shot export
  also on ELWC lists (its class set's ids)."""
  data_spec = tf.TensorSpec([None], tf.string) if model.input_kind == served.TEXT else model.input_spec
  ks = tuple(config.metric_ks)
  if config.input_format == ELWC:
    if model.kind == served.TWO_STAGE:
      raise ValueError(f"{config.data_files}: a two-stage export scores only the first stage's candidates, "
                       "not every class an ELWC list names; evaluate it on classification records or rows (a "
                       "class it misses then ranks below its candidates), or the ranker's own "
                       "export on the lists")

    def list_run(rewrite: bool) -> dict[str, Any]:
      batches = labelled_records.elwc_batches(config, data_spec, model.class_names, rewrite)
      return evaluate_lists(lambda x: tf.constant(model.scores(model.model_inputs(x))), batches, ks,
                            config.progress)

    report = labelled_records.with_rewriting(list_run, (config.class_id_key, config.label_key))
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
    batches = labelled_records.example_batches(config, schema, key, model.class_names, rewrite)
    return full_class_evaluation.evaluate_ranks(ranks_of, batches, model.class_names, ks, config.progress)

  report = labelled_records.with_rewriting(run, (schema.label_key,))
  report["kind"] = model.kind
  if model.calibration is not None:
    report["calibration_note"] = (f"the probabilities of {model.kind} exports are not evaluated here; "
                                  "evaluate the ranker's own export for its calibration")
  if model.kind == served.TWO_STAGE:
    report["num_candidates"] = model.max_k
    report["recall_at_m"] = float(np.concatenate(reached).mean()) if reached else None
  return report


def _evaluate_model(config: EvaluateConfig, export_dir: str) -> dict[str, Any]:
  """A training run's export (the Keras model) on "example", "elwc" or row records."""
  served_model = served.OneStage(export_dir, served.read_inputs(export_dir), config.embedding_cache_dir)
  model, spec = served_model.model, served_model.input_spec
  if config.input_format == ROWS:
    config = converted_rows(config, model.class_names)
  score_fn = served_model.scores
  ks = tuple(config.metric_ks)
  # A model trained on frozen text embeddings reads text records; their texts are embedded on the way in. So
  # are a hybrid text model's (`served.reads_cached_embeddings`), beside the texts.
  embeds = served_model.inputs.frozen_text_encoder is not None or served_model.hybrid_text_encoder is not None
  calibration = served_model.calibration
  meter = None
  data_spec = tf.TensorSpec([None], tf.string) if embeds else spec

  def model_inputs(batches: Iterable) -> Iterable:
    return _embedded(batches, served_model) if embeds else batches

  if config.input_format == EXAMPLE:
    schema, key = example_schema(config, data_spec, model.class_names)
    chunk_size = config.chunked(model.num_classes)

    def run(rewrite: bool) -> dict[str, Any]:
      nonlocal meter
      batches = model_inputs(labelled_records.example_batches(config, schema, key,
                                                              model.class_names, rewrite))
      if chunk_size:
        return full_class_evaluation.evaluate_full_classes(model, batches, ks, chunk_size, config.progress)
      meter = calibration_lib.CalibrationMetrics(calibration) if calibration is not None else None
      return evaluate_dataset(score_fn, batches, model.class_names, ks, progress=config.progress,
                              observe=None if meter is None else lambda s,
                              y: meter.update(s.numpy(), y.numpy()))

    keys = (schema.label_key,)
  else:

    def run(rewrite: bool) -> dict[str, Any]:
      batches = model_inputs(labelled_records.elwc_batches(config, data_spec, model.class_names, rewrite))
      return evaluate_lists(score_fn, batches, ks, config.progress)

    keys = (config.class_id_key, config.label_key)
  report = labelled_records.with_rewriting(run, keys)
  if meter is not None:
    report["calibration"] = meter.result()
  elif calibration is None:
    report["calibration_note"] = served.NOT_CALIBRATED_NOTE.format(file=served.CALIBRATION_FILE)
  else:
    report["calibration_note"] = ("probabilities are evaluated on classification records with full "
                                  "score matrices only")
  return report

