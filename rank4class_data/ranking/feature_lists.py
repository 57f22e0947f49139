"""Φ(q, d) feature rows grouped by query (`FeatureLists`), read and written as LibSVM/SVMlight and ELWC.

What the pairwise transform, RankSVM and the ranking metrics consume, and what SVMlight `qid` files and
TF-Ranking ExampleListWithContext TFRecords hold. Relevance labels are >= 0, higher = better (see
`rank4class_data.ranking.ranking_corpus` for ranks). ELWC files are written with the one writer,
`rank4class_data.records.elwc.write_elwc(path, to_elwc(lists))`.
"""

import collections
import dataclasses
import difflib
import json
import re

import numpy as np
from tensorflow_serving.apis import input_pb2

from rank4class_data.ranking.ranking_corpus import format_label, require_unique
from rank4class_data.records import elwc as elwc_io
from rank4class_data.rows import libsvm, row_tables
from rank4class_data.validation import DataError, atomic_output, require_input_file

# ELWC keys (context: query id, query text, feature order; examples: document id and label).
ELWC_QUERY_ID = "query_id"
ELWC_QUERY_TEXT = "query"
ELWC_FEATURE_NAMES = "feature_names"
ELWC_DOC_ID = "doc_id"
ELWC_LABEL = elwc_io.LABEL_KEY
_LIBSVM_NAMES_PREFIX = "# feature_names:"
_DOCID_PATTERN = re.compile(r"docid\s*=\s*(\S+)")


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
      raise ValueError(f"`features` must be [num_rows={num_rows}, num_features={len(self.feature_names)}], "
                       f"got {self.features.shape}.")
    if len(self.doc_ids) != num_rows:
      raise ValueError(f"{len(self.doc_ids)} doc ids for {num_rows} rows.")
    offsets = self.list_offsets
    if (
      offsets.ndim != 1
      or offsets.size != len(self.query_ids) + 1
      or offsets[0] != 0
      or offsets[-1] != num_rows
      or np.any(np.diff(offsets) < 0)
    ):
      raise ValueError(f"`list_offsets` must rise from 0 to {num_rows} with one entry per query plus one; "
                       f"got {offsets.tolist()[:10]} for {len(self.query_ids)} queries.")
    if self.query_texts is not None and len(self.query_texts) != len(self.query_ids):
      raise ValueError(f"{len(self.query_texts)} query texts for {len(self.query_ids)} queries.")
    require_unique("query id", self.query_ids)
    if not np.all(np.isfinite(self.features)):
      row, col = np.argwhere(~np.isfinite(self.features))[0]
      raise ValueError(f"Feature {self.feature_names[col]!r} of document "
                       f"{self.doc_ids[row]!r} is not finite.")
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


def index_feature_names(num_features: int) -> list[str]:
  """The names of LibSVM features without a `# feature_names:` header: their 1-based index, "f1", "f2", ..."""
  return [f"f{j}" for j in range(1, num_features + 1)]


def _header_names(path: str, line_number: int, text: str) -> list[str]:
  """The JSON list of a `# feature_names:` header line; DataError naming file and line if it is not one."""
  try:
    names = json.loads(text)
  except json.JSONDecodeError as e:
    raise DataError(path, f"feature-name header is not JSON ({e.msg} at column {e.colno})", row=line_number,
                    expected='`# feature_names: ["name", ...]` (a JSON list of strings)') from None
  if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
    raise DataError(path, f"feature-name header holds {type(names).__name__} {str(names)[:80]}",
                    row=line_number, expected='`# feature_names: ["name", ...]` (a JSON list of strings)')
  return names


def names_for_message(names, wanted: str | None = None, limit: int = 30) -> str:
  """Names for an error message: all of them (sorted) up to `limit`; beyond, the `limit` closest to `wanted`
  first and how many more there are, so the one the user is after is not cut off."""
  names = sorted(set(names))
  if len(names) <= limit:
    return str(names)
  if wanted:
    closest = difflib.get_close_matches(wanted, names, n=limit, cutoff=0.0)
  else:
    closest = names[:limit]
  return f"{closest} and {len(names) - len(closest)} more" + (
    f", closest to {wanted!r} first" if wanted else ""
  )


def align_features(lists: FeatureLists, feature_names: list[str], source: str,
                   sparse_index_names: bool = False) -> tuple[FeatureLists, list[str]]:
  """The lists with exactly `feature_names` as columns, in that order, each matched by name.

  A saved model scores its own features in its own order; a new file may order them differently, lack some
  or hold more. Matching by name (LibSVM: the index, as `index_feature_names`, or the header's names; ELWC:
  the feature keys; rows: the column names) makes the order irrelevant.

  Args:
    lists: What a file gave.
    feature_names: The features wanted, in order (a model's).
    source: The file, for the error message.
    sparse_index_names: The file is LibSVM without a names header (its names are f1..fK): a wanted index
      feature f<j> beyond K is all zeros there, since sparse lines do not write zeros.

  Returns:
    (lists with [num_rows, len(feature_names)] features, the file's features not wanted, in file order).

  Raises:
    DataError: naming `source` and every wanted feature the file lacks.
  """
  column = {name: j for j, name in enumerate(lists.feature_names)}
  zero = set()
  if sparse_index_names and lists.feature_names == index_feature_names(lists.num_features):
    zero = {name for name in feature_names if name not in column and re.fullmatch(r"f[1-9][0-9]*", name)}
  missing = [name for name in feature_names if name not in column and name not in zero]
  if missing:
    hint = ("; it has no `# feature_names:` header, so its features are its indices f1..f"
            f"{lists.num_features}" if lists.feature_names == index_feature_names(lists.num_features) else "")
    raise DataError(source, f"{len(missing)} of the model's {len(feature_names)} features missing: {missing}",
                    field="features", expected=f"every feature the model was trained on (the file has "
                    f"{names_for_message(lists.feature_names, missing[0])}{hint})")
  features = np.zeros((lists.features.shape[0], len(feature_names)), dtype=np.float32)
  for j, name in enumerate(feature_names):
    if name in column:
      features[:, j] = lists.features[:, column[name]]
  wanted = set(feature_names)
  extra = [name for name in lists.feature_names if name not in wanted]
  return dataclasses.replace(lists, features=features, feature_names=list(feature_names)), extra


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
        values = " ".join(f"{j + 1}:{format(float(v), '.9g')}"
                          for j, v in enumerate(lists.features[row]) if v != 0)
        label = format_label(lists.relevance[row])
        f.write(f"{label} qid:{q + 1}{' ' + values if values else ''} # docid = {lists.doc_ids[row]}\n")


def _libsvm_row(path: str, parsed, line_number: int) -> tuple[str, float, dict[int, float]]:
  """A parsed LibSVM line's document id, relevance and features; raises DataError for a label that is not a
  grade >= 0 and for a missing qid."""
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
  match = _DOCID_PATTERN.search(parsed.comment)
  doc_id = match.group(1) if match else f"line{line_number}"
  return doc_id, label, parsed.features


def _refuse_index_above(path: str, rows: dict[str, list], num_features: int) -> None:
  """Raises DataError naming the first line (in query order) with a feature index above `num_features`."""
  for qid_rows in rows.values():
    for _, _, values, line_number in qid_rows:
      if values and max(values) > num_features:
        raise DataError(path, f"feature index {max(values)} above num_features={num_features}",
                        row=line_number, field=str(max(values)), expected=f"indices 1..{num_features}")


def read_libsvm(path: str, num_features: int | None = None, duplicates: str = "error") -> FeatureLists:
  """Reads an SVMlight/LibSVM ranking file with `qid` (lines parsed by `rank4class_data.rows.libsvm`).

  Lines: `<relevance> qid:<id> <index>:<value> ... [# comment]`; indices 1-based; a `docid = X` in the comment
  names the document (else `line<N>`). Lines of one qid need not be contiguous: rows are grouped by qid in
  order of first appearance, keeping file order within a query.

  Args:
    path: File to read.
    num_features: Feature count; defaults to the largest index seen (or the `# feature_names:` header).
    duplicates: A feature index given twice in a line: "error" (default), "last" value wins, or "sum".

  Raises:
    DataError: naming the file and line for bytes that are not UTF-8, a malformed `# feature_names:` header, a
      non-numeric or negative label, a missing qid, a bad `index:value`, a repeated index (with "error"), an
      index above `num_features`, or a last line without a line end that does not parse (the file is cut
      short).
  """
  require_input_file(path, row_tables.ROW_FILE)
  libsvm.check_duplicates_policy(duplicates)
  names = None
  rows = collections.OrderedDict()
  max_index = 0
  with row_tables.open_text(path) as f:
    lines = list(enumerate(f, start=1))
  for line_number, line in lines:
    byte = row_tables.undecodable_byte(line)  # Comments too: they hold the document ids and feature names.
    if byte is not None:
      raise row_tables.undecodable_error(path, byte, line_number, None)
    if line.startswith(_LIBSVM_NAMES_PREFIX):
      names = _header_names(path, line_number, line[len(_LIBSVM_NAMES_PREFIX):])
      continue
    try:
      parsed = libsvm.parse_line(line, path, line_number, line_number, duplicates)
    except DataError as e:
      if line.endswith("\n"):
        raise
      raise row_tables.cut_last_line_error(e) from None  # The file's last line: cut short.
    if parsed is None:
      continue
    doc_id, label, values = _libsvm_row(path, parsed, line_number)
    max_index = max(max_index, *values.keys()) if values else max_index
    rows.setdefault(parsed.qid, []).append((doc_id, label, values, line_number))
  if not rows:
    if not any(line.strip() for _, line in lines):
      raise row_tables.no_rows_error(path, after_header=False)
    raise DataError(path, "no rows (only comments)",
                    expected="LibSVM lines `<relevance> qid:<id> <index>:<value>`")
  if num_features is None:
    num_features = len(names) if names is not None else max_index
  if max_index > num_features:
    _refuse_index_above(path, rows, num_features)
  if names is None or len(names) != num_features:
    names = index_feature_names(num_features)
  flat = [row for qid_rows in rows.values() for row in qid_rows]
  features = libsvm.dense_features([values for _, _, values, _ in flat], num_features)
  return FeatureLists(
      features=features, relevance=np.array([row[1] for row in flat], dtype=np.float32),
      list_offsets=np.concatenate([[0], np.cumsum([len(v) for v in rows.values()], dtype=np.int64)]),
      query_ids=list(rows), doc_ids=[row[0] for row in flat], feature_names=names)


def to_elwc(lists: FeatureLists) -> list[input_pb2.ExampleListWithContext]:
  """One ExampleListWithContext per query, built with `rank4class_data.records.elwc.make_elwc`.

  Context: `query_id` (bytes), `query` (bytes, when texts are known), `feature_names` (bytes list, the feature
  order). Examples: `doc_id` (bytes), `label` (float relevance, `rank4class_data.records.elwc.LABEL_KEY`) and
  one float feature per feature name, so `tfr.data.parse_from_example_list` reads them with a per-name feature
  spec.
  """
  reserved = {ELWC_DOC_ID, ELWC_LABEL} & set(lists.feature_names)
  if reserved:
    raise ValueError(f"Feature names {sorted(reserved)} clash with the ELWC keys "
                     f"{ELWC_DOC_ID!r}/{ELWC_LABEL!r}.")
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


def _numeric_keys(example, label_key: str) -> set[str]:
  return {key for key, value in example.features.feature.items()
          if key not in (label_key, ELWC_DOC_ID) and value.WhichOneof("kind") in ("float_list", "int64_list")}


def _elwc_feature_names(path: str, records: list, feature_names: list[str] | None,
                        label_key: str) -> list[str]:
  """`read_elwc`'s feature order: `feature_names`, else the first record's context `feature_names`, else every
  numeric example feature sorted by name; raises DataError when records have no numeric example features."""
  names = feature_names
  if names is None and records and ELWC_FEATURE_NAMES in records[0].context.features.feature:
    names = [v.decode("utf-8")
             for v in records[0].context.features.feature[ELWC_FEATURE_NAMES].bytes_list.value]
  if names is None:
    names = sorted(set().union(*(_numeric_keys(e, label_key) for r in records for e in r.examples)))
  if not names and records:
    example = next((e for r in records for e in r.examples), None)
    kinds = {} if example is None else {key: value.WhichOneof("kind") for key, value in
                                        example.features.feature.items() if key != label_key}
    raise DataError(path, f"no numeric example features (the first example has {kinds or 'none'})",
                    field="example features", expected="float or int64 features per example (a text ELWC "
                    "needs features computed from its text first, e.g. by "
                    "`pairwise-ranksvm --input_format=corpus --text_fields=<fields>`)")
  return names


def read_elwc(path: str, feature_names: list[str] | None = None, label_key: str = ELWC_LABEL,
              missing_value: float = 0.0) -> FeatureLists:
  """Reads a TFRecord of ExampleListWithContext protos: `to_elwc`'s, or TF-Ranking-style files.

  Each record is one query's list. Per example: the relevance under `label_key` (one number; TF-Ranking's
  examples use "relevance" or "utility"), numeric features, and optionally `doc_id` (bytes). Examples may
  carry only the features they have (TF-Ranking's numerical ELWC stores ~19 of 136 per example): an absent
  feature takes `missing_value`. The context may hold `query_id` and `query` (bytes) and `feature_names`.

  Args:
    path: TFRecord file.
    feature_names: Feature order; defaults to the context's `feature_names`, else every numeric example
      feature seen in the file other than the label and `doc_id`, sorted by name.
    label_key: Example feature holding the relevance label.
    missing_value: Value of a feature an example does not carry.

  Raises:
    DataError: naming file, record (row), example and feature, for an example without a label, a label or
      feature that is not one number, or a file without numeric example features (a text ELWC: its features
      are bytes, which RankSVM cannot use as they are).
  """
  records = list(elwc_io.read_elwc(path))
  names = _elwc_feature_names(path, records, feature_names, label_key)
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
        present = names_for_message(values, label_key)
        raise DataError(path, f"{where} has no label {label_key!r} (its features: {present})",
                        row=record_number, field=label_key,
                        expected="one relevance number per example; name the label feature with `label_key`")
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
