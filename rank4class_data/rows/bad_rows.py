"""What to do with bad input rows: fail on the first (the default), or skip them into a rejects file.

Under "skip" every rejected row is kept with its file, row, physical line, field and reason, and written as
one JSON object per line next to the output, so a user can fix the rows and convert them again; a limit stops
a conversion that rejects too much (a wrong column name rejects every row).
"""

import dataclasses
import json
import os
from typing import Any

from rank4class_data.validation import DataError, check_choice, check_range

FAIL = "fail"
SKIP = "skip"
POLICIES = (FAIL, SKIP)
REJECTS_SUFFIX = ".rejects.jsonl"


@dataclasses.dataclass
class BadRowPolicy:
  """How bad rows are handled.

  Attributes:
    policy: "fail" (stop at the first bad row, nothing written) or "skip" (leave it out, list it in the
      rejects file).
    max_bad_rows: "skip": the most rows that may be rejected; one more stops the conversion with an error
      (nothing written). None: no limit.
    rejects_path: "skip": the JSONL file listing rejected rows; None for `<output stem>.rejects.jsonl`.
  """

  policy: str = FAIL
  max_bad_rows: int | None = None
  rejects_path: str | None = None

  def __post_init__(self):
    check_choice("policy", self.policy, POLICIES)
    if self.max_bad_rows is not None:
      check_range("max_bad_rows", self.max_bad_rows, 0, integer=True)

  def rejects_file(self, output_path: str) -> str:
    return self.rejects_path or os.path.splitext(output_path)[0] + REJECTS_SUFFIX


class RejectedRows:
  """Applies a policy to located row errors: raises under "fail", collects under "skip" (up to the limit).

  Call it with each `DataError` of a row (it is a `row_tables.read_table` `on_bad_row` handler).
  """

  def __init__(self, policy: BadRowPolicy):
    self.policy = policy
    self.rows: list[dict[str, Any]] = []

  def __call__(self, error: DataError) -> None:
    if self.policy.policy == FAIL:
      raise error
    self.rows.append({"file": error.path, "row": error.row, "line": error.line or error.row,
                      "field": error.field, "reason": error.problem, "expected": error.expected})
    limit = self.policy.max_bad_rows
    if limit is not None and len(self.rows) > limit:
      raise DataError(error.path,
                      f"{error.problem}: bad row {len(self.rows)}, more than max_bad_rows={limit}",
                      row=error.row, line=error.line, field=error.field,
                      expected="fewer bad rows (check the column names and the format), or a higher limit")

  def __len__(self) -> int:
    return len(self.rows)

  def write(self, path: str) -> None:
    """Writes the rejected rows as JSON lines to `path` (an empty file when none was rejected)."""
    # backslashreplace: a file name that is not UTF-8 (kept as surrogates by the OS) is listed, not fatal.
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
      for row in self.rows:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")
