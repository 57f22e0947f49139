"""Query-document ranking data: raw corpora (docs/queries/judgments CSVs), feature lists, LibSVM and ELWC I/O.

Two levels:
- `RankingCorpus`: documents with named raw fields, queries with text, and per-query judgments: the layout of
  the RankingSVM paper's LOINC sample (docs.csv / queries.csv / query_doc.csv, §3.2).
- `FeatureLists`: Φ(q, d) feature rows grouped by query, with relevance: what the pairwise transform and the
  metrics consume, and what LibSVM/SVMlight `qid` files and ELWC TFRecords hold.

Labels are stored as relevance, higher = better. A file of ranks (1 = best) is converted when read:
relevance = (largest rank in the query) - rank, so rank 1 gets the largest relevance, the worst rank 0, and
equal ranks stay equal; writing ranks back gives competition ranks (1 + number of strictly better documents).
"""

import collections
import csv
import dataclasses
import json
import os
import re

import numpy as np
from tensorflow_serving.apis import input_pb2

from rank4class_data import elwc as elwc_io
from rank4class_data import libsvm
from rank4class_data.validation import DataError, atomic_output, atomic_paths, require_file

LABEL_KINDS = ("relevance", "rank")
DOCS_FILE = "docs.csv"
QUERIES_FILE = "queries.csv"
QUERY_DOC_FILE = "query_doc.csv"

# ELWC keys (context: query id, query text, feature order; examples: document id and label).
ELWC_QUERY_ID = "query_id"
ELWC_QUERY_TEXT = "query"
ELWC_FEATURE_NAMES = "feature_names"
ELWC_DOC_ID = "doc_id"
ELWC_LABEL = elwc_io.LABEL_KEY
_LIBSVM_NAMES_PREFIX = "# feature_names:"
_DOCID_PATTERN = re.compile(r"docid\s*=\s*(\S+)")


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
    if self.label_kind not in LABEL_KINDS:
      raise ValueError(f"`label_kind` must be one of {list(LABEL_KINDS)}, got {self.label_kind!r}.")
    _require_unique("document id", self.doc_ids)
    _require_unique("query id", self.query_ids)
    if len(self.query_texts) != len(self.query_ids):
      raise ValueError(f"{len(self.query_texts)} query texts for {len(self.query_ids)} query ids.")
    for name, values in self.doc_fields.items():
      if len(values) != len(self.doc_ids):
        raise ValueError(f"Document field {name!r} has {len(values)} values for {len(self.doc_ids)} documents.")
    n = len(self.relevance)
    if self.judgment_query.shape != (n,) or self.judgment_doc.shape != (n,):
      raise ValueError(f"judgment_query {self.judgment_query.shape}, judgment_doc {self.judgment_doc.shape} and "
                       f"relevance {self.relevance.shape} must all be [num_judgments].")
    if n and (self.judgment_query.min() < 0 or self.judgment_query.max() >= len(self.query_ids)):
      raise ValueError(f"judgment_query must index {len(self.query_ids)} queries.")
    if n and (self.judgment_doc.min() < 0 or self.judgment_doc.max() >= len(self.doc_ids)):
      raise ValueError(f"judgment_doc must index {len(self.doc_ids)} documents.")
    bad = ~np.isfinite(self.relevance) | (self.relevance < 0)
    if bad.any():
      k = int(np.argmax(bad))
      raise ValueError(f"Relevance must be finite and >= 0; got {self.relevance[k]} for query "
                       f"{self.query_ids[self.judgment_query[k]]!r}, document {self.doc_ids[self.judgment_doc[k]]!r}.")
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


def _require_unique(what: str, values: list[str]) -> None:
  counts = collections.Counter(values)
  duplicates = [value for value, count in counts.items() if count > 1]
  if duplicates:
    raise ValueError(f"Duplicate {what}(s) {duplicates[:5]}; every {what} must be unique.")


@dataclasses.dataclass
class CsvLayout:
  """Column names of the docs/queries/query_doc CSV layout (defaults: the LOINC sample).

  Attributes:
    doc_id_column: Document id column in docs.csv and query_doc.csv.
    query_id_column: Query id column in queries.csv and query_doc.csv.
    query_text_column: Query text column in queries.csv.
    label_column: Label column in query_doc.csv.
    label_kind: "rank" (1 = best) or "relevance" (higher = better).
  """

  doc_id_column: str = "loinc_num"
  query_id_column: str = "id_query"
  query_text_column: str = "query"
  label_column: str = "rank"
  label_kind: str = "rank"

  def __post_init__(self):
    if self.label_kind not in LABEL_KINDS:
      raise ValueError(f"`label_kind` must be one of {list(LABEL_KINDS)}, got {self.label_kind!r}.")


def _read_table(path: str, required: list[str]) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
  """Rows of a CSV as (physical line, row dict), checking the header has `required` columns."""
  require_file(path)
  with open(path, encoding="utf-8-sig", newline="") as f:
    reader = csv.DictReader(f)
    header = list(reader.fieldnames or [])
    missing = [name for name in required if name not in header]
    if missing:
      raise DataError(path, f"missing column(s) {missing} in header {header}", row=0, field=missing[0],
                      expected=f"columns {required}")
    rows = []
    for row in reader:
      if None in row or any(value is None for value in row.values()):
        raise DataError(path, "wrong number of fields", row=len(rows) + 1, line=reader.line_num,
                        expected=f"{len(header)} fields {header}")
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


def read_corpus_csv(directory: str, layout: CsvLayout | None = None) -> RankingCorpus:
  """Reads docs.csv, queries.csv and query_doc.csv from `directory`.

  Args:
    directory: Folder holding the three files.
    layout: Column names and label kind; defaults to the LOINC sample's.

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
  _, query_rows = _read_table(queries_path, [layout.query_id_column, layout.query_text_column])
  query_ids, query_texts, query_index = [], [], {}
  for row_number, (line, row) in enumerate(query_rows, start=1):
    query_id = row[layout.query_id_column].strip()
    text = row[layout.query_text_column].strip()
    if not query_id or query_id in query_index:
      raise DataError(queries_path, "empty query id" if not query_id else f"duplicate query id {query_id!r}",
                      row=row_number, line=line, field=layout.query_id_column, expected="a unique, non-empty id")
    if not text:
      raise DataError(queries_path, "empty query text", row=row_number, line=line,
                      field=layout.query_text_column, expected="a non-empty string")
    query_index[query_id] = len(query_ids)
    query_ids.append(query_id)
    query_texts.append(text)
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
  relevance = np.asarray(labels, dtype=np.float64)
  if layout.label_kind == "rank":
    relevance = rank_to_relevance(relevance, np.asarray(judgment_query, dtype=np.int64))
  return RankingCorpus(doc_ids=doc_ids, doc_fields=doc_fields, query_ids=query_ids, query_texts=query_texts,
                       judgment_query=np.asarray(judgment_query, dtype=np.int64),
                       judgment_doc=np.asarray(judgment_doc, dtype=np.int64), relevance=relevance,
                       label_kind=layout.label_kind)


def _format_number(value: float) -> str:
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
        writer.writerow([corpus.query_ids[q], corpus.doc_ids[d], _format_number(label)])


@dataclasses.dataclass
class FeatureLists:
  """Φ(q, d) feature rows grouped by query (one list per query).

  Attributes:
    features: float32 [num_rows, num_features]; the rows of query q are `list_offsets[q]:list_offsets[q + 1]`.
    relevance: float32 [num_rows] relevance >= 0, higher = better.
    list_offsets: int64 [num_queries + 1], rising from 0 to num_rows.
    query_ids: [num_queries].
    doc_ids: [num_rows] document id of each row.
    feature_names: [num_features].
    query_texts: Optional [num_queries] query text.
  """

  features: np.ndarray
  relevance: np.ndarray
  list_offsets: np.ndarray
  query_ids: list[str]
  doc_ids: list[str]
  feature_names: list[str]
  query_texts: list[str] | None = None

  def __post_init__(self):
    self.features = np.asarray(self.features, dtype=np.float32)
    self.relevance = np.asarray(self.relevance, dtype=np.float32)
    self.list_offsets = np.asarray(self.list_offsets, dtype=np.int64)
    num_rows = self.relevance.shape[0]
    if self.features.ndim != 2 or self.features.shape != (num_rows, len(self.feature_names)):
      raise ValueError(f"`features` must be [num_rows={num_rows}, num_features={len(self.feature_names)}], got "
                       f"{self.features.shape}.")
    if len(self.doc_ids) != num_rows:
      raise ValueError(f"{len(self.doc_ids)} doc ids for {num_rows} rows.")
    offsets = self.list_offsets
    if (offsets.ndim != 1 or offsets.size != len(self.query_ids) + 1 or offsets[0] != 0 or offsets[-1] != num_rows
        or np.any(np.diff(offsets) < 0)):
      raise ValueError(f"`list_offsets` must rise from 0 to {num_rows} with one entry per query plus one; got "
                       f"{offsets.tolist()[:10]} for {len(self.query_ids)} queries.")
    if self.query_texts is not None and len(self.query_texts) != len(self.query_ids):
      raise ValueError(f"{len(self.query_texts)} query texts for {len(self.query_ids)} queries.")
    _require_unique("query id", self.query_ids)
    if not np.all(np.isfinite(self.features)):
      row, col = np.argwhere(~np.isfinite(self.features))[0]
      raise ValueError(f"Feature {self.feature_names[col]!r} of document {self.doc_ids[row]!r} is not finite.")
    bad = ~np.isfinite(self.relevance) | (self.relevance < 0)
    if bad.any():
      raise ValueError(f"Relevance must be finite and >= 0; got {self.relevance[bad][0]} for document "
                       f"{self.doc_ids[int(np.argmax(bad))]!r}.")

  @property
  def num_queries(self) -> int:
    return len(self.query_ids)

  @property
  def num_features(self) -> int:
    return len(self.feature_names)

  def query_rows(self, q: int) -> slice:
    """Row slice of list `q`."""
    return slice(int(self.list_offsets[q]), int(self.list_offsets[q + 1]))

  def select(self, query_indices) -> "FeatureLists":
    """The lists at `query_indices`, in that order."""
    rows = [np.arange(self.list_offsets[q], self.list_offsets[q + 1]) for q in query_indices]
    rows = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    sizes = [int(self.list_offsets[q + 1] - self.list_offsets[q]) for q in query_indices]
    return FeatureLists(
        features=self.features[rows], relevance=self.relevance[rows],
        list_offsets=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]),
        query_ids=[self.query_ids[q] for q in query_indices], doc_ids=[self.doc_ids[r] for r in rows],
        feature_names=list(self.feature_names),
        query_texts=None if self.query_texts is None else [self.query_texts[q] for q in query_indices])

  def select_ids(self, query_ids: list[str]) -> "FeatureLists":
    """The lists of the named queries. Raises ValueError naming an unknown id."""
    index = {query_id: q for q, query_id in enumerate(self.query_ids)}
    unknown = [query_id for query_id in query_ids if query_id not in index]
    if unknown:
      raise ValueError(f"Unknown query id(s) {unknown}; known: {self.query_ids[:20]}.")
    return self.select([index[query_id] for query_id in query_ids])

  def padded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features [num_queries, list_size, num_features], relevance [num_queries, list_size] with -1 padding,
    mask bool [num_queries, list_size])."""
    sizes = np.diff(self.list_offsets)
    width = int(sizes.max()) if sizes.size else 0
    mask = np.arange(width)[None, :] < sizes[:, None]
    features = np.zeros((len(sizes), width, self.num_features), dtype=np.float32)
    relevance = np.full((len(sizes), width), -1.0, dtype=np.float32)
    features[mask] = self.features
    relevance[mask] = self.relevance
    return features, relevance, mask


def write_libsvm(lists: FeatureLists, path: str) -> None:
  """Writes SVMlight ranking format: `<relevance> qid:<n> <index>:<value> ... # docid = <id>`.

  Feature indices are 1-based and only non-zero values are written. Query ids are written as 1-based integers
  in list order; the first line is a comment holding the feature names as JSON (other readers skip it). Query
  ids and texts other than the order are not kept (use ELWC for those).
  """
  for doc_id in lists.doc_ids:
    if not doc_id or any(c.isspace() for c in doc_id):
      raise ValueError(f"Document id {doc_id!r} cannot be written to SVMlight: ids must be non-empty without "
                       "whitespace.")
  with atomic_output(path) as f:
    f.write(f"{_LIBSVM_NAMES_PREFIX} {json.dumps(lists.feature_names)}\n")
    for q in range(lists.num_queries):
      for row in range(int(lists.list_offsets[q]), int(lists.list_offsets[q + 1])):
        values = " ".join(f"{j + 1}:{format(float(v), '.9g')}" for j, v in enumerate(lists.features[row]) if v != 0)
        label = _format_number(lists.relevance[row])
        f.write(f"{label} qid:{q + 1}{' ' + values if values else ''} # docid = {lists.doc_ids[row]}\n")


def read_libsvm(path: str, num_features: int | None = None, duplicates: str = "error") -> FeatureLists:
  """Reads an SVMlight/LibSVM ranking file with `qid` (lines parsed by `rank4class_data.libsvm`).

  Lines: `<relevance> qid:<id> <index>:<value> ... [# comment]`; indices 1-based; a `docid = X` in the comment
  names the document (else `line<N>`). Lines of one qid need not be contiguous: rows are grouped by qid in
  order of first appearance, keeping file order within a query.

  Args:
    path: File to read.
    num_features: Feature count; defaults to the largest index seen (or the `# feature_names:` header).
    duplicates: A feature index given twice in a line: "error" (default), "last" value wins, or "sum".

  Raises:
    DataError: naming the line for a non-numeric or negative label, a missing qid, a bad `index:value`, a
      repeated index (with "error"), or an index above `num_features`.
  """
  require_file(path)
  libsvm.check_duplicates_policy(duplicates)
  names = None
  rows = collections.OrderedDict()
  max_index = 0
  with open(path, encoding="utf-8") as f:
    for line_number, line in enumerate(f, start=1):
      if line.startswith(_LIBSVM_NAMES_PREFIX):
        names = json.loads(line[len(_LIBSVM_NAMES_PREFIX):])
        continue
      parsed = libsvm.parse_line(line, path, line_number, line_number, duplicates)
      if parsed is None:
        continue
      try:
        label = float(parsed.label)
      except ValueError:
        label = float("nan")
      if not np.isfinite(label) or label < 0:
        raise DataError(path, f"bad label {parsed.label!r}", row=line_number, field="label",
                        expected="a relevance grade >= 0")
      if not parsed.qid:
        raise DataError(path, "missing qid", row=line_number, field="qid",
                        expected="a `qid:<id>` token (ranking lists need a query id)")
      values = parsed.features
      match = _DOCID_PATTERN.search(parsed.comment)
      doc_id = match.group(1) if match else f"line{line_number}"
      max_index = max(max_index, *values.keys()) if values else max_index
      rows.setdefault(parsed.qid, []).append((doc_id, label, values, line_number))
  if num_features is None:
    num_features = len(names) if names is not None else max_index
  if max_index > num_features:
    for qid_rows in rows.values():
      for _, _, values, line_number in qid_rows:
        if values and max(values) > num_features:
          raise DataError(path, f"feature index {max(values)} above num_features={num_features}",
                          row=line_number, field=str(max(values)), expected=f"indices 1..{num_features}")
  if names is None or len(names) != num_features:
    names = [f"f{j}" for j in range(1, num_features + 1)]
  flat = [row for qid_rows in rows.values() for row in qid_rows]
  features = np.zeros((len(flat), num_features), dtype=np.float32)
  for r, (_, _, values, _) in enumerate(flat):
    for index, value in values.items():
      features[r, index - 1] = value
  return FeatureLists(
      features=features, relevance=np.array([row[1] for row in flat], dtype=np.float32),
      list_offsets=np.concatenate([[0], np.cumsum([len(v) for v in rows.values()], dtype=np.int64)]),
      query_ids=list(rows), doc_ids=[row[0] for row in flat], feature_names=names)


def to_elwc(lists: FeatureLists) -> list[input_pb2.ExampleListWithContext]:
  """One ExampleListWithContext per query, built with `rank4class_data.elwc.make_elwc`.

  Context: `query_id` (bytes), `query` (bytes, when texts are known), `feature_names` (bytes list, the feature
  order). Examples: `doc_id` (bytes), `label` (float relevance, `rank4class_data.elwc.LABEL_KEY`) and one float
  feature per feature name, so `tfr.data.parse_from_example_list` reads them with a per-name feature spec.
  """
  reserved = {ELWC_DOC_ID, ELWC_LABEL} & set(lists.feature_names)
  if reserved:
    raise ValueError(f"Feature names {sorted(reserved)} clash with the ELWC keys {ELWC_DOC_ID!r}/{ELWC_LABEL!r}.")
  protos = []
  for q in range(lists.num_queries):
    context = {ELWC_QUERY_ID: lists.query_ids[q], ELWC_FEATURE_NAMES: list(lists.feature_names)}
    if lists.query_texts is not None:
      context[ELWC_QUERY_TEXT] = lists.query_texts[q]
    examples = []
    for row in range(int(lists.list_offsets[q]), int(lists.list_offsets[q + 1])):
      example = {ELWC_DOC_ID: lists.doc_ids[row], ELWC_LABEL: float(lists.relevance[row])}
      example.update((name, float(value)) for name, value in zip(lists.feature_names, lists.features[row],
                                                                  strict=True))
      examples.append(example)
    protos.append(elwc_io.make_elwc(examples, context=context))
  return protos


def write_elwc(lists: FeatureLists, path: str) -> None:
  """Writes `to_elwc(lists)` as a TFRecord of serialized ExampleListWithContext protos (all or nothing)."""
  elwc_io.write_elwc(path, to_elwc(lists))


def _numeric_keys(example, label_key: str) -> set[str]:
  return {key for key, value in example.features.feature.items()
          if key not in (label_key, ELWC_DOC_ID) and value.WhichOneof("kind") in ("float_list", "int64_list")}


def read_elwc(path: str, feature_names: list[str] | None = None, label_key: str = ELWC_LABEL,
              missing_value: float = 0.0) -> FeatureLists:
  """Reads a TFRecord of ExampleListWithContext protos: `write_elwc`'s, or TF-Ranking-style files.

  Each record is one query's list. Per example: the relevance under `label_key` (one number; TF-Ranking's
  examples use "relevance" or "utility"), numeric features, and optionally `doc_id` (bytes). Examples may carry
  only the features they have (TF-Ranking's numerical ELWC stores ~19 of 136 per example): an absent feature
  takes `missing_value`. The context may hold `query_id` and `query` (bytes) and `feature_names`.

  Args:
    path: TFRecord file.
    feature_names: Feature order; defaults to the context's `feature_names`, else every numeric example feature
      seen in the file other than the label and `doc_id`, sorted by name.
    label_key: Example feature holding the relevance label.
    missing_value: Value of a feature an example does not carry.

  Raises:
    DataError: naming file, record (row), example and feature, for an example without a label, a label or
      feature that is not one number, or a file without numeric example features (a text ELWC: its features
      are bytes, which RankSVM cannot use as they are).
  """
  records = list(elwc_io.read_elwc(path))
  names = feature_names
  if names is None and records and ELWC_FEATURE_NAMES in records[0].context.features.feature:
    names = [v.decode("utf-8") for v in records[0].context.features.feature[ELWC_FEATURE_NAMES].bytes_list.value]
  if names is None:
    names = sorted(set().union(*(_numeric_keys(e, label_key) for r in records for e in r.examples)))
  if not names and records:
    example = next((e for r in records for e in r.examples), None)
    kinds = {} if example is None else {key: value.WhichOneof("kind") for key, value in
                                        example.features.feature.items() if key != label_key}
    raise DataError(path, f"no numeric example features (the first example has {kinds or 'none'})",
                    field="example features", expected="float or int64 features per example (a text ELWC needs "
                    "features computed from its text first, e.g. pairwise-ranksvm on CSV with --text_fields)")
  features, relevance, offsets, query_ids, doc_ids, texts = [], [], [0], [], [], []
  column = {name: j for j, name in enumerate(names)}
  for record_number, elwc in enumerate(records, start=1):
    context = elwc.context.features.feature
    query_id = (context[ELWC_QUERY_ID].bytes_list.value[0].decode("utf-8") if ELWC_QUERY_ID in context
                else str(record_number))
    if feature_names is None and ELWC_FEATURE_NAMES in context:
      own = [v.decode("utf-8") for v in context[ELWC_FEATURE_NAMES].bytes_list.value]
      if own != names:
        raise DataError(path, "feature names differ from the first record's", row=record_number,
                        field=ELWC_FEATURE_NAMES, expected=str(names))
    for position, example in enumerate(elwc.examples, start=1):
      values = example.features.feature
      where = f"example {position}"
      if label_key not in values:
        present = sorted(values)
        raise DataError(path, f"{where} has no label {label_key!r} (its features: {present[:10]})",
                        row=record_number, field=label_key,
                        expected="one relevance number per example; name the label feature with --label_key")
      relevance.append(elwc_io.one_number(values[label_key], path, record_number, label_key, where))
      row = [missing_value] * len(names)
      for key in values:
        if key in column:
          row[column[key]] = elwc_io.one_number(values[key], path, record_number, key, where)
      features.append(row)
      doc_ids.append(values[ELWC_DOC_ID].bytes_list.value[0].decode("utf-8") if ELWC_DOC_ID in values
                     else f"{query_id}-{position}")
    offsets.append(len(relevance))
    query_ids.append(query_id)
    texts.append(context[ELWC_QUERY_TEXT].bytes_list.value[0].decode("utf-8") if ELWC_QUERY_TEXT in context
                 else None)
  return FeatureLists(
      features=np.asarray(features, dtype=np.float32).reshape(len(relevance), len(names)),
      relevance=np.asarray(relevance, dtype=np.float32), list_offsets=np.asarray(offsets, dtype=np.int64),
      query_ids=query_ids, doc_ids=doc_ids, feature_names=list(names),
      query_texts=texts if all(t is not None for t in texts) and texts else None)
