"""Converts CSV/TSV/JSONL/LibSVM/Orange `.tab` rows to classification TFRecords plus vocabulary, and back."""

import collections
import csv
import dataclasses
import json
import os
from typing import Any

import numpy as np

from rank4class_data import progress_line
from rank4class_data.conversion.conversion_files import (  # noqa: F401  Re-exported: callers import them from here.
  VOCAB_SUFFIX,
  ConversionSummary,
  default_vocab_path,
  load_schema,
  read_metadata,
  write_conversion,
)
from rank4class_data.label_vocabulary import LabelVocabulary
from rank4class_data.records import tfrecords
from rank4class_data.rows import bad_rows as bad_rows_lib
from rank4class_data.rows import libsvm, row_tables
from rank4class_data.validation import (
  DataError,
  FieldError,
  atomic_output,
  check_choice,
  check_range,
)

ROW_FORMATS = ("tab", "tsv", "csv", "jsonl")  # What `convert_from_tfrecord` writes.
_MAX_LISTED = 20


# Seconds between progress lines on stderr (the first one after this long).
PROGRESS_SECONDS = progress_line.DEFAULT_EVERY_SECONDS


@dataclasses.dataclass
class ConvertConfig:
  """What `convert_to_tfrecord` reads and writes.

  Attributes:
    input_path: CSV, TSV, JSONL, LibSVM or Orange `.tab` file; or several (comma-separated paths or globs,
      with the same columns), converted into one TFRecord with one vocabulary.
    output_path: TFRecord of `tf.Example`s to write (see `tfrecords.ExampleSchema` for the feature keys).
    input_format: One of INPUT_FORMATS, or "auto" for the extension's.
    text_column: Column with the text; "auto": `.tab`'s string column, "text" for CSV/TSV/JSONL (none when
      `feature_columns` are given), none for LibSVM; "" for no text.
    label_column: Column with the class; "auto": `.tab`'s class column, LibSVM's first token, else "label".
    group_column: Optional column with a group id (LibSVM: "qid").
    grade_column: Optional column with an ordinal or graded label (a number).
    feature_columns: Numeric columns forming the dense feature vector (LibSVM: all its indices).
    num_features: LibSVM feature dimension; None for the largest index seen.
    label_vocab_path: Existing vocabulary (the JSON another conversion wrote, or one class a line): fixes the
      ids, and labels outside it are errors. Use the train split's for the test split.
    labels_are_ids: Labels are integer class ids already (checked against `num_classes`), not names.
    num_classes: Number of classes when `labels_are_ids` and no vocabulary is given.
    vocab_output_path: Where to write the vocabulary JSON; None for `<output without extension>.labels.json`.
    libsvm_duplicates: LibSVM: a feature index given twice in a line is an "error" (default), or its "last"
      value wins, or the values "sum" (`rank4class_data.rows.libsvm`).
    bad_rows: What a bad row does (`rank4class_data.rows.bad_rows`): "fail" stops at the first, "skip" leaves
      it out and lists it (file, row, line, field, reason) in the rejects file.
  """

  input_path: str
  output_path: str
  input_format: str = row_tables.AUTO
  text_column: str | None = row_tables.AUTO
  label_column: str = row_tables.AUTO
  group_column: str | None = None
  grade_column: str | None = None
  feature_columns: tuple[str, ...] = ()
  num_features: int | None = None
  label_vocab_path: str | None = None
  labels_are_ids: bool = False
  num_classes: int | None = None
  vocab_output_path: str | None = None
  libsvm_duplicates: str = "error"
  bad_rows: bad_rows_lib.BadRowPolicy = dataclasses.field(default_factory=bad_rows_lib.BadRowPolicy)

  def __post_init__(self):
    self.feature_columns = tuple(self.feature_columns)
    if isinstance(self.bad_rows, dict):
      self.bad_rows = bad_rows_lib.BadRowPolicy(**self.bad_rows)
    libsvm.check_duplicates_policy(self.libsvm_duplicates)
    if self.labels_are_ids and self.num_classes is None and self.label_vocab_path is None:
      raise ValueError("`labels_are_ids` needs `num_classes` or `label_vocab_path` to check the ids against.")
    for name in ("num_classes", "num_features"):
      if getattr(self, name) is not None:
        check_range(name, getattr(self, name), 1, integer=True)

  @property
  def vocab_path(self) -> str:
    return self.vocab_output_path or default_vocab_path(self.output_path)


@dataclasses.dataclass
class _Columns:
  """Resolved input columns (None: absent)."""

  text: str | None
  label: str
  group: str | None
  grade: str | None
  features: tuple[str, ...]


def _resolve_columns(config: ConvertConfig, table: row_tables.Table) -> _Columns:
  fmt = table.input_format
  text = config.text_column
  if text == row_tables.AUTO:
    text = table.text_column if fmt == "tab" else (
        None if fmt == "libsvm" or config.feature_columns else "text")
  label = config.label_column
  if label == row_tables.AUTO:
    label = table.label_column or "label"
  group = config.group_column
  if fmt == "libsvm":
    if text:
      raise ValueError(f"{table.path}: LibSVM rows have no text column, got text_column={text!r}.")
    if group not in (None, row_tables.LIBSVM_QID) or label != row_tables.LIBSVM_LABEL:
      raise ValueError(f"{table.path}: LibSVM rows offer only label_column='{row_tables.LIBSVM_LABEL}' and "
                       f"group_column='{row_tables.LIBSVM_QID}'.")
  columns = _Columns(text or None, label, group or None, config.grade_column or None, config.feature_columns)
  if fmt in ("csv", "tsv", "tab"):
    for name in [columns.text, columns.label, columns.group, columns.grade, *columns.features]:
      if name is not None and name not in table.columns:
        raise DataError(table.path, f"missing column '{name}'", row=0, line=1, field=name,
                        expected=f"one of the header's columns {table.columns}")
  return columns


def _listed(values: list[str]) -> str:
  return str(values[:_MAX_LISTED]) + (f" ... ({len(values)} in all)" if len(values) > _MAX_LISTED else "")


def _label_id(value: Any, name: str, vocabulary: LabelVocabulary | None, config: ConvertConfig) -> int | str:
  """Class id for `value`, or the label name when the vocabulary is still being collected."""
  if config.labels_are_ids:
    num_classes = len(vocabulary.classes) if vocabulary else config.num_classes
    text = str(value).strip()
    if isinstance(value, bool) or not text.lstrip("-").isdigit():
      raise FieldError(name, f"label {value!r} is not an integer", f"a class id in [0, {num_classes})")
    label = int(text)
    if label < 0:
      raise FieldError(name, f"negative label {label}", f"a class id in [0, {num_classes})")
    if label >= num_classes:
      raise FieldError(name, f"label {label} out of range", f"a class id in [0, {num_classes})")
    return label
  label = "" if value is None else str(value).strip()
  if not label:
    raise FieldError(name, "empty label", "a class name")
  if vocabulary is None:
    return label
  if label not in vocabulary.label_to_id:
    raise FieldError(name, f"unknown label {label!r}",
                     f"one of the vocabulary's classes {_listed(vocabulary.classes)}")
  return vocabulary.label_to_id[label]


def _instance(record: row_tables.Record, columns: _Columns, vocabulary: LabelVocabulary | None,
              config: ConvertConfig) -> tfrecords.ClassificationInstance:
  """One row as an instance; LibSVM features stay a sparse {index: value} dict until the dimension is set."""
  instance = tfrecords.ClassificationInstance(
      label=_label_id(record.value(columns.label), columns.label, vocabulary, config))
  if columns.text is not None:
    instance.text = record.text(columns.text)
  if columns.group is not None:
    instance.group_id = str(record.value(columns.group))
  if columns.grade is not None:
    instance.grade = record.number(columns.grade)
  if columns.features:
    instance.dense = np.asarray([record.number(name) for name in columns.features], np.float32)
  if row_tables.LIBSVM_FEATURES in record.fields:
    instance.dense = {
        index: row_tables.number(value, f"feature {index}")
        for index, value in record.fields[row_tables.LIBSVM_FEATURES].items()
    }
    outside = [index for index in instance.dense if config.num_features and index > config.num_features]
    if outside:
      raise FieldError(f"feature {outside[0]}", f"feature index {outside[0]} out of range",
                       f"indices in [1, {config.num_features}] (num_features)")
  return instance


def _densify(instances: list, records: list[tuple[str, row_tables.Record]], num_features: int | None) -> int:
  """Turns LibSVM's sparse {index: value} features into dense vectors in place; returns the dimension.

  `records` holds each instance's (file, row), for errors."""
  dim = num_features or max((max(i.dense, default=0) for i in instances), default=0)
  if dim < 1:
    raise DataError(records[0][0], "no features in any row", field=row_tables.LIBSVM_FEATURES,
                    expected="'<index>:<value>' pairs")
  for instance, (path, record) in zip(instances, records, strict=True):
    for index in instance.dense:
      if index > dim:
        raise DataError(path, f"feature index {index} out of range", row=record.row, line=record.line,
                        field=f"feature {index}", expected=f"indices in [1, {dim}] (num_features)")
  for instance, dense in zip(instances,
                             libsvm.dense_features([i.dense for i in instances], dim), strict=True):
    instance.dense = dense
  return dim


def _open_tables(config: ConvertConfig, rejected: bad_rows_lib.RejectedRows) -> tuple[list[row_tables.Table],
                                                                                       _Columns]:
  """The input files (comma-separated paths or globs) opened, and their columns, the same in every file."""
  tables = [row_tables.read_table(path, config.input_format, config.libsvm_duplicates, rejected)
            for path in row_tables.expand_paths(config.input_path)]
  columns = _resolve_columns(config, tables[0])
  for table in tables[1:]:
    other = _resolve_columns(config, table)
    if other != columns or (table.input_format == "libsvm") != (tables[0].input_format == "libsvm"):
      raise DataError(table.path, f"its columns {dataclasses.asdict(other)} differ from those of "
                      f"{tables[0].path} {dataclasses.asdict(columns)}", row=0, line=1,
                      expected="the same columns in every input file")
  return tables, columns


def _convert_rows(config: ConvertConfig, tables: list[row_tables.Table], columns: _Columns,
                  vocabulary: LabelVocabulary | None,
                  rejected: bad_rows_lib.RejectedRows) -> tuple[list, list]:
  """Every valid row of `tables` as an instance, beside its (path, record); invalid rows go to `rejected`.
  Shows a progress line once the conversion takes a while."""
  instances, records = [], []
  progress = progress_line.ProgressLine(PROGRESS_SECONDS)
  for table, record in ((t, r) for t in tables for r in t.records):
    try:
      instances.append(_instance(record, columns, vocabulary, config))
    except FieldError as e:
      rejected(e.at(table.path, record.row, record.line))
      continue
    records.append((table.path, record))
    if progress.due():  # A progress line once a conversion takes a while.
      progress.show(f"converting: {len(records):,} rows ({len(records) / progress.elapsed:,.0f} rows/s, "
                    f"{len(rejected)} rejected)")
  progress.close()
  return instances, records


def convert_to_tfrecord(config: ConvertConfig) -> ConversionSummary:
  """Converts a table of labelled rows into a TFRecord of `tf.Example`s plus its label vocabulary JSON.

  The vocabulary JSON (`config.vocab_path`) holds classes, label -> id, counts, the `ExampleSchema` to parse
  the records with, and this config. Both files appear together, only when every row is valid.

  Args:
    config: Input, columns, vocabulary and outputs.

  Returns:
    Rows written and per-class counts.

  Raises:
    FileNotFoundError: naming a missing input or vocabulary file.
    DataError: naming the file, row, field and what was expected, for a missing column, an unknown,
      negative or out-of-range label, an empty text or a non-finite number.
  """
  rejected = bad_rows_lib.RejectedRows(config.bad_rows)
  tables, columns = _open_tables(config, rejected)
  vocabulary = LabelVocabulary.from_file(config.label_vocab_path) if config.label_vocab_path else None
  if vocabulary is None and config.labels_are_ids:
    vocabulary = LabelVocabulary([str(i) for i in range(config.num_classes)])
  instances, records = _convert_rows(config, tables, columns, vocabulary, rejected)
  if not instances:
    raise DataError(config.input_path,
                    "no data rows" + (f" ({len(rejected)} rejected)" if len(rejected) else ""),
                    expected="at least one labelled row")
  if vocabulary is None:
    vocabulary = LabelVocabulary.from_labels([i.label for i in instances])
    ids = vocabulary.label_to_id
    for instance in instances:
      instance.label = ids[instance.label]
  counts = np.bincount([i.label for i in instances], minlength=len(vocabulary.classes))
  vocabulary = LabelVocabulary(vocabulary.classes, [int(c) for c in counts])
  dense_dim = len(columns.features)
  if tables[0].input_format == "libsvm":
    dense_dim = _densify(instances, records, config.num_features)
  schema = tfrecords.ExampleSchema(text_key=tfrecords.TEXT_KEY if columns.text else None,
                                   group_key=tfrecords.GROUP_KEY if columns.group else None,
                                   grade_key=tfrecords.GRADE_KEY if columns.grade else None,
                                   dense_key=tfrecords.DENSE_KEY if dense_dim else None, dense_dim=dense_dim,
                                   num_classes=len(vocabulary.classes))
  metadata = {
      **vocabulary.to_json(), "rows": len(instances),
      "schema": schema.to_dict(),
      "columns": dataclasses.asdict(columns),
      "input_columns": tables[0].columns,
      "config": dataclasses.asdict(config)
  }
  return write_conversion(config.input_path, config.output_path, config.vocab_path, instances, schema,
                          metadata, vocabulary, rejected)


@dataclasses.dataclass
class ExportConfig:
  """What `convert_from_tfrecord` reads and writes.

  Attributes:
    input_path: TFRecord written by `convert_to_tfrecord`.
    output_path: Rows file to write.
    output_format: One of ROW_FORMATS, or "auto" for the extension's.
    vocab_path: The vocabulary JSON of the TFRecord; None for the one beside it.
  """

  input_path: str
  output_path: str
  output_format: str = row_tables.AUTO
  vocab_path: str | None = None


def _output_columns(metadata: dict[str, Any], output_format: str) -> tuple[list[str], list[str]]:
  """(column names, instance attributes) in output order, named and ordered as in the converted input."""
  schema, columns = metadata["schema"], metadata.get("columns", {})
  default_label, default_text = (
    row_tables.ORANGE_DEFAULT_COLUMNS if output_format == "tab" else ("label", "text")
  )
  names, attributes = [columns.get("label") or default_label], ["label"]
  if schema.get("text_key"):
    names.append(columns.get("text") or default_text)
    attributes.append("text")
  for attribute, key, default in (("group_id", "group_key", "group"), ("grade", "grade_key", "grade")):
    if schema.get(key):
      names.append(columns.get(attribute.split("_")[0]) or default)
      attributes.append(attribute)
  if schema.get("dense_key"):
    features = columns.get("features") or [f"feature_{i + 1}" for i in range(schema["dense_dim"])]
    names += list(features)
    attributes += [f"dense:{i}" for i in range(len(features))]
  if schema.get("image_key"):
    raise ValueError(
        "Records with images cannot be written as rows; read them with tfrecords.read_instances.")
  # Keep the input file's column order where known, so a round trip gives the same columns.
  input_columns = metadata.get("input_columns") or []
  order = sorted(
      range(len(names)), key=lambda i: input_columns.index(names[i])
      if names[i] in input_columns else len(input_columns) + i)
  return [names[i] for i in order], [attributes[i] for i in order]


def _shortest(value: float) -> int | float:
  """A float32 as the shortest number that reads back to it: 27.0 -> 27, 0.1f -> 0.1 (not 0.100000001)."""
  number = float(str(np.float32(value)))
  return int(number) if number.is_integer() else number


def _row_values(instance: tfrecords.ClassificationInstance, attributes: list[str],
                classes: list[str]) -> list:
  values = []
  for attribute in attributes:
    if attribute == "label":
      values.append(classes[instance.label])
    elif attribute == "grade":
      values.append(_shortest(instance.grade))
    elif attribute.startswith("dense:"):
      values.append(_shortest(instance.dense[int(attribute[len("dense:"):])]))
    else:
      values.append(getattr(instance, attribute))
  return values


def convert_from_tfrecord(config: ExportConfig) -> ConversionSummary:
  """Writes the rows of a converted TFRecord back as `.tab`, TSV, CSV or JSONL, with label names.

  With `.tab` output the Orange header (`Category\\tText`, `d\\tstring`, `class\\t`) is written, so converting
  an Orange file and back gives identical rows.

  Raises:
    FileNotFoundError: naming a missing TFRecord or --label_vocab.
    DataError: for a folder, an empty file or one that is no TFRecord, no vocabulary beside the TFRecord, a
      record that does not match the schema, or a text that `.tab` cannot hold.
  """
  output_format = row_tables.infer_format(config.output_path, config.output_format)
  check_choice("output_format", output_format, ROW_FORMATS)
  tfrecords.first_record(config.input_path)  # A file that is no TFRecord is named before its vocabulary.
  vocab_path = config.vocab_path or default_vocab_path(config.input_path)
  if config.vocab_path is None and not os.path.isfile(vocab_path):
    raise DataError(config.input_path, f"no label vocabulary {vocab_path} beside it",
                    expected="the converter's TFRecord with the .labels.json it writes beside it, "
                             "or `vocab_path`")
  metadata = read_metadata(vocab_path)
  schema = tfrecords.ExampleSchema.from_dict(metadata["schema"])
  classes = [str(c) for c in metadata["classes"]]
  names, attributes = _output_columns(metadata, output_format)
  counts = collections.Counter()
  rows = 0
  with atomic_output(config.output_path) as f:
    if output_format == "jsonl":

      def write(values):
        f.write(json.dumps(dict(zip(names, values, strict=True)), ensure_ascii=False) + "\n")
    elif output_format == "tab":
      types = ["d" if a == "label" else "string" if a in ("text", "group_id") else "c" for a in attributes]
      flags = ["class" if a == "label" else "" for a in attributes]
      f.write("\t".join(names) + "\n" + "\t".join(types) + "\n" + "\t".join(flags) + "\n")

      def write(values):
        values = [str(v) for v in values]
        for name, value in zip(names, values, strict=True):
          if "\t" in value or "\n" in value or "\r" in value:
            raise DataError(config.output_path, "value contains a tab or line break", row=rows, field=name,
                            expected="values without tabs or line breaks (.tab has no quoting; write TSV)")
        f.write("\t".join(values) + "\n")
    else:
      writer = csv.writer(f, delimiter="," if output_format == "csv" else "\t", lineterminator="\n")
      writer.writerow(names)

      def write(values):
        writer.writerow(values)

    for instance in tfrecords.read_instances(config.input_path, schema):
      rows += 1
      if instance.label >= len(classes):
        raise DataError(config.input_path, f"label {instance.label} out of range", row=rows,
                        field=schema.label_key, expected=f"a class id in [0, {len(classes)}) of {vocab_path}")
      counts[classes[instance.label]] += 1
      write(_row_values(instance, attributes, classes))
  return ConversionSummary(config.input_path, config.output_path, rows, {c: counts[c] for c in classes})
