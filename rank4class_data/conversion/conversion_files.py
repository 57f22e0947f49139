"""A conversion's outputs: the TFRecord of `tf.Example`s with its vocabulary JSON beside it (where that lives,
both written together with the rejects list, read back) and the summary of what was written."""

import dataclasses
import json
import math
import os
from typing import Any

from rank4class_data.label_vocabulary import LabelVocabulary
from rank4class_data.records import tfrecords
from rank4class_data.rows import bad_rows as bad_rows_lib
from rank4class_data.validation import DataError, atomic_paths, require_file

VOCAB_SUFFIX = ".labels.json"


def default_vocab_path(tfrecord_path: str) -> str:
  """`data/train.tfrecord` -> `data/train.labels.json`: where the vocabulary of a TFRecord lives."""
  return os.path.splitext(tfrecord_path)[0] + VOCAB_SUFFIX


@dataclasses.dataclass
class ConversionSummary:
  """What a conversion wrote.

  Attributes:
    input_path: File read.
    output_path: File written.
    rows: Rows converted.
    class_counts: Rows per class name, in id order.
    rejected: Rows left out under the "skip" policy.
    rejects_path: The JSONL file listing them ("skip" policy), else None.
  """

  input_path: str
  output_path: str
  rows: int
  class_counts: dict[str, int]
  rejected: int = 0
  rejects_path: str | None = None

  @property
  def num_classes(self) -> int:
    return len(self.class_counts)

  @property
  def skew(self) -> float:
    """Largest over smallest class count (inf when a vocabulary class has no rows)."""
    counts = list(self.class_counts.values())
    return math.inf if min(counts) == 0 else max(counts) / min(counts)

  def format(self) -> str:
    width = max(len(name) for name in self.class_counts)
    lines = [
        f"{self.input_path} -> {self.output_path}",
        f"rows: {self.rows}  classes: {self.num_classes}  skew (max/min class count): {self.skew:.2f}"
    ]
    lines += [f"  {name:<{width}}  {count}" for name, count in self.class_counts.items()]
    if self.rejects_path is not None:
      lines.append(f"rejected rows: {self.rejected} (listed in {self.rejects_path})")
    return "\n".join(lines)


def write_conversion(input_path: str, output_path: str, vocab_path: str,
                     instances: list[tfrecords.ClassificationInstance], schema: tfrecords.ExampleSchema,
                     metadata: dict[str, Any], vocabulary: LabelVocabulary,
                     rejected: bad_rows_lib.RejectedRows) -> ConversionSummary:
  """Writes a conversion's TFRecord, vocabulary JSON and (under "skip") rejects list: all of them, or none."""
  skipping = rejected.policy.policy == bad_rows_lib.SKIP
  rejects_path = rejected.policy.rejects_file(output_path) if skipping else None
  outputs = [output_path, vocab_path] + ([rejects_path] if skipping else [])
  with atomic_paths(*outputs) as temp_paths:
    tfrecords.write_instances(temp_paths[0], instances, schema)
    with open(temp_paths[1], "w", encoding="utf-8") as f:
      json.dump(metadata, f, indent=2, ensure_ascii=False)
      f.write("\n")
    if skipping:  # Written even when empty, so no stale list of an earlier run stays beside the output.
      rejected.write(temp_paths[2])
  return ConversionSummary(input_path, output_path, len(instances),
                           dict(zip(vocabulary.classes, vocabulary.counts, strict=True)), len(rejected),
                           rejects_path)


def read_metadata(vocab_path: str) -> dict[str, Any]:
  """The vocabulary JSON a conversion wrote (classes, counts, schema, columns, config)."""
  require_file(vocab_path)
  with open(vocab_path, encoding="utf-8") as f:
    try:
      metadata = json.load(f)
    except json.JSONDecodeError as e:
      raise DataError(vocab_path, f"invalid JSON ({e.msg})", line=e.lineno,
                      expected="the label vocabulary JSON written by convert_to_tfrecord") from None
  for key in ("classes", "schema"):
    if key not in metadata:
      raise DataError(vocab_path, f"no '{key}' entry", field=key,
                      expected="the label vocabulary JSON written by convert_to_tfrecord")
  return metadata


def load_schema(vocab_path: str) -> tfrecords.ExampleSchema:
  """The `ExampleSchema` to parse the TFRecord that `vocab_path` describes (for `tfrecords.make_dataset`)."""
  return tfrecords.ExampleSchema.from_dict(read_metadata(vocab_path)["schema"])
