"""Raw query-document ranking data: documents, queries and judgments (the docs/queries/query_doc CSV layout).

`RankingCorpus` holds documents with named raw fields, queries with text, and per-query judgments: the layout
of the RankingSVM paper's LOINC sample (docs.csv / queries.csv / query_doc.csv, §3.2). Featurized rows grouped
by query are `rank4class_data.ranking.feature_lists.FeatureLists`.

Labels are stored as relevance, higher = better, and a label column is read as relevance unless the layout
says it holds ranks (`label_kind="rank"`, opt-in: the LOINC sample's layout is `LOINC_LAYOUT`). A file of
ranks (1 = best) is converted when read: relevance = (largest rank in the query) - rank, so rank 1 gets the
largest relevance, the worst rank 0, and equal ranks stay equal; writing ranks back gives competition ranks (1
+ number of strictly better documents).
"""

import collections
import csv
import dataclasses
import os

import numpy as np

from rank4class_data.rows import row_tables
from rank4class_data.validation import DataError, atomic_paths, check_choice, require_file

LABEL_KINDS = ("relevance", "rank")
DEFAULT_LABEL_COLUMN = "label"
DOCS_FILE = "docs.csv"
QUERIES_FILE = "queries.csv"
QUERY_DOC_FILE = "query_doc.csv"


def rank_to_relevance(ranks, query_index) -> np.ndarray:
  """Converts ranks (1 = best) to relevance: max rank within the query minus the rank.

  Args:
    ranks: [num_judgments] ranks >= 1.
    query_index: int [num_judgments] query of each judgment.

  Returns:
    float64 [num_judgments] relevance >= 0, higher = better.

  Raises:
    ValueError: if a rank is below 1 or not finite.
  """
  ranks = np.asarray(ranks, dtype=np.float64)
  query_index = np.asarray(query_index, dtype=np.int64)
  bad = ~np.isfinite(ranks) | (ranks < 1)
  if bad.any():
    raise ValueError(f"Ranks must be finite and >= 1 (1 = best); got {ranks[bad][0]} at judgment "
                     f"{int(np.argmax(bad))}.")
  if ranks.size == 0:
    return ranks
  max_rank = np.zeros(int(query_index.max()) + 1)
  np.maximum.at(max_rank, query_index, ranks)
  return max_rank[query_index] - ranks


def relevance_to_rank(relevance, query_index) -> np.ndarray:
  """Competition ranks within each query: 1 + number of documents with strictly greater relevance.

  Returns:
    int64 [num_judgments].
  """
  relevance = np.asarray(relevance, dtype=np.float64)
  query_index = np.asarray(query_index, dtype=np.int64)
  ranks = np.ones(relevance.shape, dtype=np.int64)
  for q in np.unique(query_index):
    rows = np.nonzero(query_index == q)[0]
    ranks[rows] = 1 + np.sum(relevance[rows][None, :] > relevance[rows][:, None], axis=1)
  return ranks


@dataclasses.dataclass
class RankingCorpus:
  """Documents, queries and judgments (the docs/queries/query_doc layout).

  Attributes:
    doc_ids: [num_docs] unique document ids.
    doc_fields: Field name -> [num_docs] raw string values (every document column except the id).
    query_ids: [num_queries] unique query ids.
    query_texts: [num_queries] query text.
    judgment_query: int64 [num_judgments] index into `query_ids`.
    judgment_doc: int64 [num_judgments] index into `doc_ids`.
    relevance: float64 [num_judgments] relevance >= 0, higher = better.
    label_kind: What the source held: "relevance" or "rank" (already converted to relevance).
  """

  doc_ids: list[str]
  doc_fields: dict[str, list[str]]
  query_ids: list[str]
  query_texts: list[str]
  judgment_query: np.ndarray
  judgment_doc: np.ndarray
  relevance: np.ndarray
  label_kind: str = "relevance"

  def __post_init__(self):
    self.judgment_query = np.asarray(self.judgment_query, dtype=np.int64)
    self.judgment_doc = np.asarray(self.judgment_doc, dtype=np.int64)
    self.relevance = np.asarray(self.relevance, dtype=np.float64)
    check_choice("label_kind", self.label_kind, LABEL_KINDS)
    require_unique("document id", self.doc_ids)
    require_unique("query id", self.query_ids)
    if len(self.query_texts) != len(self.query_ids):
      raise ValueError(f"{len(self.query_texts)} query texts for {len(self.query_ids)} query ids.")
    for name, values in self.doc_fields.items():
      if len(values) != len(self.doc_ids):
        raise ValueError(f"Document field {name!r} has {len(values)} values for "
                         f"{len(self.doc_ids)} documents.")
    n = len(self.relevance)
    if self.judgment_query.shape != (n,) or self.judgment_doc.shape != (n,):
      raise ValueError(f"judgment_query {self.judgment_query.shape}, judgment_doc {self.judgment_doc.shape} "
                       f"and relevance {self.relevance.shape} must all be [num_judgments].")
    if n and (self.judgment_query.min() < 0 or self.judgment_query.max() >= len(self.query_ids)):
      raise ValueError(f"judgment_query must index {len(self.query_ids)} queries.")
    if n and (self.judgment_doc.min() < 0 or self.judgment_doc.max() >= len(self.doc_ids)):
      raise ValueError(f"judgment_doc must index {len(self.doc_ids)} documents.")
    bad = ~np.isfinite(self.relevance) | (self.relevance < 0)
    if bad.any():
      k = int(np.argmax(bad))
      raise ValueError(f"Relevance must be finite and >= 0; got {self.relevance[k]} for query "
                       f"{self.query_ids[self.judgment_query[k]]!r}, document "
                       f"{self.doc_ids[self.judgment_doc[k]]!r}.")
    pairs = self.judgment_query * max(len(self.doc_ids), 1) + self.judgment_doc
    unique, counts = np.unique(pairs, return_counts=True)
    if np.any(counts > 1):
      dup = unique[np.argmax(counts > 1)]
      q, d = divmod(int(dup), max(len(self.doc_ids), 1))
      raise ValueError(f"Query {self.query_ids[q]!r} judges document {self.doc_ids[d]!r} more than once.")

  @property
  def num_docs(self) -> int:
    return len(self.doc_ids)

  def doc_index(self) -> dict[str, int]:
    """Document id -> row."""
    return {doc_id: i for i, doc_id in enumerate(self.doc_ids)}

  def judged_queries(self) -> list[int]:
    """Indices of queries with at least one judgment, in query order."""
    return sorted(set(self.judgment_query.tolist()))

  def select_queries(self, query_ids: list[str]) -> "RankingCorpus":
    """The same documents with only the named queries and their judgments.

    Raises:
      ValueError: naming an unknown query id.
    """
    index = {query_id: i for i, query_id in enumerate(self.query_ids)}
    unknown = [query_id for query_id in query_ids if query_id not in index]
    if unknown:
      raise ValueError(f"Unknown query id(s) {unknown}; known: {self.query_ids[:20]}.")
    chosen = [index[query_id] for query_id in query_ids]
    remap = np.full(len(self.query_ids), -1, dtype=np.int64)
    remap[chosen] = np.arange(len(chosen))
    keep = remap[self.judgment_query] >= 0
    return RankingCorpus(
        doc_ids=self.doc_ids, doc_fields=self.doc_fields, query_ids=[self.query_ids[i] for i in chosen],
        query_texts=[self.query_texts[i] for i in chosen], judgment_query=remap[self.judgment_query[keep]],
        judgment_doc=self.judgment_doc[keep], relevance=self.relevance[keep], label_kind=self.label_kind)


def require_unique(what: str, values: list[str]) -> None:
  """Raises ValueError naming up to five values that occur more than once (`what`: e.g. "query id")."""
  counts = collections.Counter(values)
  duplicates = [value for value, count in counts.items() if count > 1]
  if duplicates:
    raise ValueError(f"Duplicate {what}(s) {duplicates[:5]}; every {what} must be unique.")


def describe_labels(label_column: str, label_kind: str) -> str:
  """The one terminal line saying how a label column is read, naming the setting that changes it."""
  if label_kind == "rank":
    return (f"Labels: {label_column!r} read as ranks (1 = best within the query), turned into relevance; "
            "`label_kind`=relevance reads higher = better.")
  return (f"Labels: {label_column!r} read as relevance (higher = better); `label_kind`=rank reads 1 = best.")


@dataclasses.dataclass
class CsvLayout:
  """Column names of the docs/queries/query_doc CSV layout (id defaults: the LOINC sample's; labels:
  relevance).

  Attributes:
    doc_id_column: Document id column in docs.csv and query_doc.csv.
    query_id_column: Query id column in queries.csv and query_doc.csv.
    query_text_column: Query text column in queries.csv.
    label_column: Label column in query_doc.csv.
    label_kind: "relevance" (higher = better, the default) or "rank" (1 = best), which data sets labelled by
      rank, such as the LOINC sample (`LOINC_LAYOUT`), must state.
  """

  doc_id_column: str = "loinc_num"
  query_id_column: str = "id_query"
  query_text_column: str = "query"
  label_column: str = DEFAULT_LABEL_COLUMN
  label_kind: str = "relevance"

  def __post_init__(self):
    check_choice("label_kind", self.label_kind, LABEL_KINDS)


# The RankingSVM paper's LOINC sample (shared/loinc): its query_doc.csv ranks documents in column "rank". The
# one reader of the sample: `read_corpus_csv(directory, LOINC_LAYOUT)`.
LOINC_LAYOUT = CsvLayout(label_column="rank", label_kind="rank")


def _read_table(path: str, required: list[str]) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
  """Rows of a CSV as (physical line, row dict), checking the header has `required` columns.

  UTF-8 with or without a byte order mark; a byte that is not UTF-8 is a DataError naming its row and line. A
  table cut short is refused as the row readers refuse one (`rank4class_data.rows.row_tables`): a file that
  ends inside a quoted field, or a last line without a line end that holds fewer fields than the header.
  """
  require_file(path)
  row_tables.allow_long_csv_fields()
  with row_tables.open_text(path, newline="") as f:
    lines = row_tables.TrackedLines(f)
    reader = csv.DictReader(lines)
    header = list(reader.fieldnames or [])
    byte = row_tables.undecodable_byte("".join(header))
    if byte is not None:
      raise row_tables.undecodable_error(path, byte, 0, 1)
    missing = [name for name in required if name not in header]
    if missing:
      raise DataError(path, f"missing column(s) {missing} in header {header}", row=0, field=missing[0],
                      expected=f"columns {required}")
    rows = []
    first_line = reader.line_num + 1  # The line where the next row starts.
    for row in reader:
      if lines.ended:
        raise row_tables.open_quote_error(path, len(rows) + 1, reader.line_num, first_line)
      first_line = reader.line_num + 1
      if None in row or any(value is None for value in row.values()):
        error = DataError(path, "wrong number of fields", row=len(rows) + 1, line=reader.line_num,
                          expected=f"{len(header)} fields {header}")
        if None not in row and lines.ends_unterminated():
          raise row_tables.cut_last_line_error(error)
        raise error
      byte = row_tables.undecodable_byte("".join(row.values()))
      if byte is not None:
        raise row_tables.undecodable_error(path, byte, len(rows) + 1, reader.line_num)
      rows.append((reader.line_num, row))
  return header, rows


def read_documents_csv(path: str, doc_id_column: str = "loinc_num") -> RankingCorpus:
  """Reads a docs.csv alone (for ranking new queries): a corpus with documents and no queries.

  Raises:
    FileNotFoundError: naming a missing file.
    DataError: for a missing id column or an empty or duplicate document id.
  """
  doc_header, doc_rows = _read_table(path, [doc_id_column])
  doc_ids, seen = [], set()
  field_names = [name for name in doc_header if name != doc_id_column]
  doc_fields = {name: [] for name in field_names}
  for row_number, (line, row) in enumerate(doc_rows, start=1):
    doc_id = row[doc_id_column].strip()
    if not doc_id or doc_id in seen:
      raise DataError(path, "empty document id" if not doc_id else f"duplicate document id {doc_id!r}",
                      row=row_number, line=line, field=doc_id_column, expected="a unique, non-empty id")
    seen.add(doc_id)
    doc_ids.append(doc_id)
    for name in field_names:
      doc_fields[name].append(row[name])
  return RankingCorpus(doc_ids=doc_ids, doc_fields=doc_fields, query_ids=[], query_texts=[],
                       judgment_query=np.zeros(0, np.int64), judgment_doc=np.zeros(0, np.int64),
                       relevance=np.zeros(0))


def _read_queries(queries_path: str, layout: CsvLayout) -> tuple[list[str], list[str], dict[str, int]]:
  """queries.csv's ids, texts and each id's position; raises DataError for an empty or repeated id or an
  empty text."""
  _, query_rows = _read_table(queries_path, [layout.query_id_column, layout.query_text_column])
  query_ids, query_texts, query_index = [], [], {}
  for row_number, (line, row) in enumerate(query_rows, start=1):
    query_id = row[layout.query_id_column].strip()
    text = row[layout.query_text_column].strip()
    if not query_id or query_id in query_index:
      raise DataError(queries_path, "empty query id" if not query_id else f"duplicate query id {query_id!r}",
                      row=row_number, line=line, field=layout.query_id_column,
                      expected="a unique, non-empty id")
    if not text:
      raise DataError(queries_path, "empty query text", row=row_number, line=line,
                      field=layout.query_text_column, expected="a non-empty string")
    query_index[query_id] = len(query_ids)
    query_ids.append(query_id)
    query_texts.append(text)
  return query_ids, query_texts, query_index


def _read_judgments(judgments_path: str, layout: CsvLayout, query_index: dict[str, int],
                    doc_index: dict[str, int]) -> tuple[list[int], list[int], list[float]]:
  """query_doc.csv's judgments: query positions, document positions and labels as written (ranks or grades);
  raises DataError for an unknown id, a repeated judgment or a bad label."""
  _, judgment_rows = _read_table(judgments_path,
                                 [layout.query_id_column, layout.doc_id_column, layout.label_column])
  judgment_query, judgment_doc, labels, seen = [], [], [], {}
  for row_number, (line, row) in enumerate(judgment_rows, start=1):
    query_id = row[layout.query_id_column].strip()
    doc_id = row[layout.doc_id_column].strip()
    if query_id not in query_index:
      raise DataError(judgments_path, f"unknown query id {query_id!r}", row=row_number, line=line,
                      field=layout.query_id_column, expected=f"an {layout.query_id_column} of {QUERIES_FILE}")
    if doc_id not in doc_index:
      raise DataError(judgments_path, f"unknown document id {doc_id!r}", row=row_number, line=line,
                      field=layout.doc_id_column, expected=f"a {layout.doc_id_column} of {DOCS_FILE}")
    if (query_id, doc_id) in seen:
      raise DataError(judgments_path, f"query {query_id!r} judges document {doc_id!r} again (first on row "
                      f"{seen[(query_id, doc_id)]})", row=row_number, line=line, field=layout.doc_id_column,
                      expected="one judgment per query and document")
    seen[(query_id, doc_id)] = row_number
    raw = row[layout.label_column].strip()
    try:
      value = float(raw)
    except ValueError:
      value = float("nan")
    lowest = 1.0 if layout.label_kind == "rank" else 0.0
    if not np.isfinite(value) or value < lowest:
      expected = "a rank >= 1 (1 = best)" if layout.label_kind == "rank" else "a relevance grade >= 0"
      raise DataError(judgments_path, f"bad {layout.label_kind} {raw!r}", row=row_number, line=line,
                      field=layout.label_column, expected=expected)
    judgment_query.append(query_index[query_id])
    judgment_doc.append(doc_index[doc_id])
    labels.append(value)
  return judgment_query, judgment_doc, labels


def read_corpus_csv(directory: str, layout: CsvLayout | None = None) -> RankingCorpus:
  """Reads docs.csv, queries.csv and query_doc.csv from `directory`.

  Args:
    directory: Folder holding the three files.
    layout: Column names and label kind; defaults to `CsvLayout()` (relevance labels in column "label"; the
      LOINC sample needs `LOINC_LAYOUT`).

  Returns:
    The corpus; ranks are converted to relevance with `rank_to_relevance`.

  Raises:
    FileNotFoundError: naming a missing file.
    DataError: naming file, row, line and field for a missing column, duplicate or unknown id, empty query
      text, or non-numeric / out-of-range label.
  """
  layout = layout or CsvLayout()
  docs = read_documents_csv(os.path.join(directory, DOCS_FILE), layout.doc_id_column)
  doc_ids, doc_fields = docs.doc_ids, docs.doc_fields
  doc_index = docs.doc_index()
  queries_path = os.path.join(directory, QUERIES_FILE)
  judgments_path = os.path.join(directory, QUERY_DOC_FILE)
  query_ids, query_texts, query_index = _read_queries(queries_path, layout)
  judgment_query, judgment_doc, labels = _read_judgments(judgments_path, layout, query_index, doc_index)
  relevance = np.asarray(labels, dtype=np.float64)
  if layout.label_kind == "rank":
    relevance = rank_to_relevance(relevance, np.asarray(judgment_query, dtype=np.int64))
  return RankingCorpus(doc_ids=doc_ids, doc_fields=doc_fields, query_ids=query_ids, query_texts=query_texts,
                       judgment_query=np.asarray(judgment_query, dtype=np.int64),
                       judgment_doc=np.asarray(judgment_doc, dtype=np.int64), relevance=relevance,
                       label_kind=layout.label_kind)


def format_label(value: float) -> str:
  """A label as written to text files: an integer without a decimal point, else the shortest exact float."""
  return str(int(value)) if float(value).is_integer() else format(float(value), ".17g")


def write_corpus_csv(corpus: RankingCorpus, directory: str, layout: CsvLayout | None = None) -> None:
  """Writes docs.csv, queries.csv and query_doc.csv into `directory` (all three or none).

  With `layout.label_kind == "rank"` the labels are written as competition ranks (1 = best).
  """
  layout = layout or CsvLayout()
  os.makedirs(directory, exist_ok=True)
  paths = [os.path.join(directory, name) for name in (DOCS_FILE, QUERIES_FILE, QUERY_DOC_FILE)]
  if layout.label_kind == "rank":
    labels = relevance_to_rank(corpus.relevance, corpus.judgment_query).astype(np.float64)
  else:
    labels = corpus.relevance
  with atomic_paths(*paths) as temp_paths:
    with open(temp_paths[0], "w", encoding="utf-8", newline="") as f:
      writer = csv.writer(f)
      writer.writerow([layout.doc_id_column, *corpus.doc_fields])
      for i, doc_id in enumerate(corpus.doc_ids):
        writer.writerow([doc_id, *(values[i] for values in corpus.doc_fields.values())])
    with open(temp_paths[1], "w", encoding="utf-8", newline="") as f:
      writer = csv.writer(f)
      writer.writerow([layout.query_id_column, layout.query_text_column])
      writer.writerows(zip(corpus.query_ids, corpus.query_texts, strict=True))
    with open(temp_paths[2], "w", encoding="utf-8", newline="") as f:
      writer = csv.writer(f)
      writer.writerow([layout.query_id_column, layout.doc_id_column, layout.label_column])
      for q, d, label in zip(corpus.judgment_query, corpus.judgment_doc, labels, strict=True):
        writer.writerow([corpus.query_ids[q], corpus.doc_ids[d], format_label(label)])
