"""Class names in id order (a label vocabulary): built from labels, or read from the converter's vocabulary
JSON or a file with one class name per line. Every reader of class-name files goes through
`LabelVocabulary.from_file`.
"""

import collections
import dataclasses
import json
from typing import Any

from rank4class_data.validation import DataError, require_file


def _sort_key(label: str) -> tuple:
  """Numbers in numeric order ("2" < "10"), then other labels alphabetically."""
  try:
    return (0, float(label), label)
  except ValueError:
    return (1, 0.0, label)


def _names_by_line(path: str, text: str) -> list[str]:
  """One class name per line, ids in line order; blank lines only at the end (one inside would shift every
  later id), each name once (naming both lines)."""
  lines = text.splitlines()
  while lines and not lines[-1].strip():
    lines.pop()
  first_line: dict[str, int] = {}
  for number, name in enumerate(lines, start=1):
    if not name.strip():
      raise DataError(path, "an empty class name", row=number,
                      expected="one unique, non-empty class name per line (id order)")
    if name in first_line:
      raise DataError(path, f"Duplicate class {name!r} on lines {first_line[name]} and {number}",
                      field="classes", expected="distinct class names")
    first_line[name] = number
  return lines


@dataclasses.dataclass
class LabelVocabulary:
  """Class names in id order, with their row counts in the data they were built from.

  Attributes:
    classes: Class name per id.
    counts: Rows per class (same order), or None when unknown.
  """

  classes: list[str]
  counts: list[int] | None = None

  def __post_init__(self):
    if not self.classes:
      raise ValueError("A label vocabulary needs at least one class.")
    if len(set(self.classes)) != len(self.classes):
      raise ValueError(f"Duplicate class names in {self.classes}.")
    if self.counts is not None and len(self.counts) != len(self.classes):
      raise ValueError(f"{len(self.counts)} counts for {len(self.classes)} classes.")

  @property
  def label_to_id(self) -> dict[str, int]:
    return {label: i for i, label in enumerate(self.classes)}

  @classmethod
  def from_labels(cls, labels: list[str]) -> "LabelVocabulary":
    """Sorted vocabulary (numbers numerically) of `labels`, with counts."""
    counts = collections.Counter(labels)
    classes = sorted(counts, key=_sort_key)
    return cls(classes, [counts[c] for c in classes])

  def to_json(self) -> dict[str, Any]:
    json_dict = {"num_classes": len(self.classes), "classes": self.classes, "label_to_id": self.label_to_id}
    if self.counts is not None:
      json_dict["counts"] = dict(zip(self.classes, self.counts, strict=True))
    return json_dict

  @classmethod
  def from_file(cls, path: str) -> "LabelVocabulary":
    """Reads a vocabulary JSON written by the converter ("classes" or a "label_to_id" map), or a text file
    with one class name per line (ids in line order)."""
    require_file(path)
    with open(path, encoding="utf-8") as f:
      text = f.read()
    if path.endswith(".json"):
      try:
        data = json.loads(text)
      except json.JSONDecodeError as e:
        raise DataError(path, f"invalid JSON ({e.msg})", line=e.lineno,
                        expected="a label vocabulary JSON written by the converter") from None
      if isinstance(data, dict) and "classes" in data:
        classes = data["classes"]
      elif isinstance(data, dict) and all(isinstance(v, int) for v in data.get("label_to_id", data).values()):
        mapping = data.get("label_to_id", data)
        classes = sorted(mapping, key=mapping.get)
        if [mapping[c] for c in classes] != list(range(len(classes))):
          raise DataError(path, f"ids {sorted(mapping.values())}", field="label_to_id", expected="ids 0..n-1")
      else:
        raise DataError(path, "no 'classes' list or 'label_to_id' map", field="classes",
                        expected="a label vocabulary JSON written by the converter")
      counts = data.get("counts") if isinstance(data, dict) else None
      counts = [counts.get(c, 0) for c in classes] if isinstance(counts, dict) else None
    else:
      classes, counts = _names_by_line(path, text), None
    try:
      return cls([str(c) for c in classes], counts)
    except ValueError as e:
      raise DataError(path, str(e).rstrip("."), field="classes", expected="distinct class names") from None
