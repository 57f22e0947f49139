"""LibSVM / SVMlight lines, one parser for every reader: `<label> [qid:<id>] <index>:<value> ... [# comment]`.

Used by the row converter (`rank4class_data.conversion.convert`) and by RankSVM's ranking reader
(`rank4class_data.ranking.feature_lists.read_libsvm`), so both read the same lines the same way.

A line that gives one feature index twice is an error by default (`duplicates="error"`): the file is ambiguous
and silently picking a value hides a bug in whatever wrote it. Other readers differ (scikit-learn's
`load_svmlight_file` and LIBSVM keep the last value), so a user can ask for `"last"` (the last value wins) or
`"sum"` (the values are added, as for bag-of-words counts written one token at a time).
"""

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from rank4class_data.validation import DataError, check_choice

QID = "qid"
DUPLICATE_POLICIES = ("error", "last", "sum")


@dataclasses.dataclass
class LibsvmLine:
  """One parsed data line.

  Attributes:
    label: The first token, as written (the caller decides what a label is: a class name or a grade).
    qid: The `qid:<id>` value, or None.
    features: 1-based feature index -> finite value.
    comment: Text after `#` (stripped), "" when none.
  """

  label: str
  qid: str | None
  features: dict[int, float]
  comment: str


def check_duplicates_policy(duplicates: str) -> str:
  check_choice("libsvm_duplicates", duplicates, DUPLICATE_POLICIES)
  return duplicates


def parse_line(text: str, path: str, row: int, line: int, duplicates: str = "error") -> LibsvmLine | None:
  """Parses one line; None for a blank or comment-only line.

  Args:
    text: The line.
    path, row, line: Where it is, for errors (`row` counts data lines, `line` physical lines).
    duplicates: What a repeated index means: "error", "last" or "sum" (see the module docstring).

  Raises:
    DataError: naming file, row, line and token for a token that is not `<index>:<value>` / `qid:<id>`, an
      index that is not a 1-based integer, a value that is not a finite number, or (with "error") a repeated
      index.
  """
  content, _, comment = text.partition("#")
  tokens = content.split()
  if not tokens:
    return None
  qid = None
  features: dict[int, float] = {}
  for token in tokens[1:]:
    key, sep, value_text = token.partition(":")
    if not sep or not key or not value_text:
      raise DataError(path, f"token {token!r}", row=row, line=line, field="features",
                      expected="'<index>:<value>' or 'qid:<id>'")
    if key == QID:
      qid = value_text
      continue
    if not key.isdigit() or int(key) < 1:
      raise DataError(path, f"feature index {key!r}", row=row, line=line, field="features",
                      expected="a 1-based integer index")
    index = int(key)
    try:
      value = float(value_text)
    except ValueError:
      value = math.nan
    if not math.isfinite(value):
      raise DataError(path, f"feature {index} value {value_text!r}", row=row, line=line,
                      field=f"feature {index}", expected="a finite number")
    if index in features:
      if duplicates == "error":
        raise DataError(path, f"feature {index} given twice", row=row, line=line, field=f"feature {index}",
                        expected="each index at most once per line (or a duplicate-index policy: last, sum)")
      if duplicates == "sum":
        value += features[index]
    features[index] = value
  return LibsvmLine(label=tokens[0], qid=qid, features=features, comment=comment.strip())


def dense_features(rows: Sequence[dict[int, float]], num_features: int) -> np.ndarray:
  """Sparse rows ({1-based index: value}, indices already checked to be <= `num_features`) as float32
  `[len(rows), num_features]`; absent features are 0."""
  dense = np.zeros([len(rows), num_features], np.float32)
  for row, values in enumerate(rows):
    for index, value in values.items():
      dense[row, index - 1] = value
  return dense
