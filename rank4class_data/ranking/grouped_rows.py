"""A user's ranking rows: one item per row with a group id (query, user, condition), a text or numeric
features, and a label; from CSV, TSV, JSONL, Orange `.tab` or LibSVM (`qid` is the group), with the
converter's bad-row policy. They become the pairwise models' `GroupedItems` (texts) or RankSVM's
`FeatureLists` (features).
"""

import dataclasses
import os

import numpy as np

from rank4class_data.ranking import ranking_corpus
from rank4class_data.ranking.feature_lists import FeatureLists, index_feature_names
from rank4class_data.ranking.grouped_items import GroupedItems, dense_group_ids
from rank4class_data.rows import bad_rows as bad_rows_lib
from rank4class_data.rows import libsvm as libsvm_lib
from rank4class_data.rows import row_tables
from rank4class_data.validation import DataError, FieldError, atomic_paths, check_choice

LABEL_KINDS = ranking_corpus.LABEL_KINDS  # relevance: higher = better; rank: 1 = best within the group.


@dataclasses.dataclass
class GroupedRowsConfig:
  """Which rows and columns to read.

  Attributes:
    paths: Row files (comma-separated paths or globs, the same columns in each).
    group_column: The group id column (LibSVM: "qid").
    label_column: The label column (LibSVM: "label"): a number, or one of `label_order`.
    text_column: The item text column, or None for feature rows.
    feature_columns: Numeric feature columns (LibSVM: every index; leave empty).
    id_column: Optional item id column (default: "<file>:<row>").
    label_order: Ordinal label names from worst to best (label i has relevance i); empty: labels are numbers.
    label_kind: "relevance" (higher = better, >= 0) or "rank" (1 = best within the group; turned into
      relevance: the group's largest rank minus the rank).
    input_format: One of `row_tables.INPUT_FORMATS`, or "auto" for each file's extension.
    libsvm_duplicates: LibSVM: a repeated feature index is an "error", or "last" wins, or "sum".
    bad_rows: Fail on the first bad row, or skip bad rows (the caller writes `GroupedRows.rejected`).
  """

  paths: str
  group_column: str
  label_column: str
  text_column: str | None = None
  feature_columns: tuple[str, ...] = ()
  id_column: str | None = None
  label_order: tuple[str, ...] = ()
  label_kind: str = "relevance"
  input_format: str = row_tables.AUTO
  libsvm_duplicates: str = "error"
  bad_rows: bad_rows_lib.BadRowPolicy = dataclasses.field(default_factory=bad_rows_lib.BadRowPolicy)

  def __post_init__(self):
    self.feature_columns = tuple(self.feature_columns)
    self.label_order = tuple(self.label_order)
    if isinstance(self.bad_rows, dict):
      self.bad_rows = bad_rows_lib.BadRowPolicy(**self.bad_rows)
    if not self.paths:
      raise ValueError("Grouped rows need files (comma-separated paths or globs).")
    if not self.group_column or not self.label_column:
      raise ValueError("Grouped rows need a group column and a label column.")
    check_choice("label_kind", self.label_kind, LABEL_KINDS)
    if len(set(self.label_order)) != len(self.label_order):
      raise ValueError(f"`label_order` repeats a label: {list(self.label_order)}.")


@dataclasses.dataclass
class GroupedRows:
  """The good rows, in file order.

  Attributes:
    groups: Group key of each row.
    relevance: float64 [n] relevance >= 0 (higher = better).
    ids: Item id of each row.
    texts: Item texts, or None.
    features: float32 [n, d] features, or None.
    feature_names: The features' names.
    rejected: The bad rows ("skip"); write them with `rejected.write(path)`.
  """

  groups: list[str]
  relevance: np.ndarray
  ids: list[str]
  texts: list[str] | None
  features: np.ndarray | None
  feature_names: list[str]
  rejected: bad_rows_lib.RejectedRows

  def summary(self, paths: str, rejects_path: str | None = None) -> str:
    """One line for the terminal."""
    line = f"{paths}: {len(self.ids):,} rows in {len(set(self.groups)):,} groups"
    rejected = len(self.rejected)
    if rejected:
      line += f"; {rejected} bad row{'s' if rejected > 1 else ''} left out"
      line += f" (listed in {rejects_path})" if rejects_path else ""
    return line

  def to_grouped_items(self) -> GroupedItems:
    """The pairwise models' items (texts), groups numbered in sorted key order."""
    if self.texts is None:
      raise ValueError("These rows have no text column; the pairwise models rank texts.")
    group_ids, names = dense_group_ids(self.groups)
    return GroupedItems(list(self.texts), self.relevance, group_ids, group_names=names)

  def to_feature_lists(self) -> FeatureLists:
    """RankSVM's query-grouped feature rows: groups in order of first appearance, file order inside a
    group."""
    if self.features is None:
      raise ValueError("These rows have no feature columns; RankSVM ranks numeric features.")
    order = list(dict.fromkeys(self.groups))
    position = {g: i for i, g in enumerate(order)}
    rows = sorted(range(len(self.groups)), key=lambda r: (position[self.groups[r]], r))
    counts = np.bincount([position[g] for g in self.groups], minlength=len(order))
    return FeatureLists(self.features[rows], self.relevance[rows].astype(np.float32),
                        np.concatenate([[0], np.cumsum(counts)]), order, [self.ids[r] for r in rows],
                        list(self.feature_names))


def _label(value, column: str, order: tuple[str, ...]) -> float:
  if order:
    text = str(value).strip()
    if text not in order:
      raise FieldError(column, f"label {text!r} is not one of the label order", f"one of {list(order)}")
    return float(order.index(text))
  return row_tables.number(value, column)


def _grouped_row(config: GroupedRowsConfig, record: row_tables.Record, path: str, libsvm: bool,
                 names: list[str]) -> tuple[str, float, str | None, dict[int, float] | list[float], str]:
  """One row's group, label, text, features and id; raises FieldError naming the bad field."""
  group = str(record.value(row_tables.LIBSVM_QID if libsvm else config.group_column) or "").strip()
  if not group:
    raise FieldError(config.group_column, "empty group id", "a group id in every row")
  label = _label(record.value(row_tables.LIBSVM_LABEL if libsvm else config.label_column),
                 config.label_column, config.label_order)
  if label < (1 if config.label_kind == "rank" else 0):
    raise FieldError(config.label_column, f"label {label:g} out of range",
                     "a rank >= 1" if config.label_kind == "rank" else "a relevance >= 0")
  text = record.text(config.text_column) if config.text_column else None
  if libsvm:
    row_features = {i: row_tables.number(v, f"feature {i}")
                    for i, v in record.fields[row_tables.LIBSVM_FEATURES].items()}
  else:
    row_features = [record.number(name) for name in names]
  item_id = (
    str(record.value(config.id_column))
    if config.id_column
    else f"{os.path.basename(path)}:{record.row}"
  )
  return group, label, text, row_features, item_id


def read_grouped_rows(config: GroupedRowsConfig) -> GroupedRows:
  """Reads the rows (bad rows fail or are collected, per `config.bad_rows`).

  Raises:
    FileNotFoundError / DataError: naming the file, row and field: missing columns (all of them), an empty
      text or group, a label that is not a number >= 0 (or not in `label_order`; a rank < 1), a feature that
      is not a number; under "skip", one bad row over `max_bad_rows`; no good row at all.
  """
  rejected = bad_rows_lib.RejectedRows(config.bad_rows)
  groups, labels, ids, texts, features, names = [], [], [], [], [], list(config.feature_columns)
  libsvm = False
  for path in row_tables.expand_paths(config.paths):
    table = row_tables.read_table(path, config.input_format, config.libsvm_duplicates, rejected)
    libsvm = table.input_format == "libsvm"
    columns = [config.group_column, config.label_column, config.text_column, config.id_column, *names]
    if not libsvm and table.input_format != "jsonl":
      missing = [name for name in dict.fromkeys(c for c in columns if c) if name not in table.columns]
      if missing:
        raise DataError(path, f"missing column '{missing[0]}'" if len(missing) == 1 else
                        f"missing columns {missing}", row=0, line=1, field=missing[0],
                        expected=f"one of the header's columns {table.columns}")
    for record in table.records:
      try:
        group, label, text, row_features, item_id = _grouped_row(config, record, path, libsvm, names)
      except FieldError as e:
        rejected(e.at(path, record.row, record.line))
        continue
      groups.append(group)
      labels.append(label)
      ids.append(item_id)
      texts.append(text)
      features.append(row_features)
  if not groups:
    raise DataError(config.paths, "no data rows" + (f" ({len(rejected)} rejected)" if len(rejected) else ""),
                    expected="at least one good row")
  if libsvm:
    width = max((max(f, default=0) for f in features), default=0)
    names, matrix = index_feature_names(width), libsvm_lib.dense_features(features, width)
  else:
    matrix = np.asarray(features, np.float32).reshape([len(groups), len(names)])
  relevance = np.asarray(labels, np.float64)
  if config.label_kind == "rank":
    relevance = ranking_corpus.rank_to_relevance(relevance, dense_group_ids(groups)[0])
  return GroupedRows(groups, relevance, ids, texts if config.text_column else None,
                     matrix if names else None, names, rejected)


def write_rejects(rows: GroupedRows, path: str | None) -> None:
  """Writes the rejected rows to `path` (when given; an empty file when none was rejected)."""
  if path is not None:
    with atomic_paths(path) as (temp,):
      rows.rejected.write(temp)
