"""What `rank4class.inference.predict` writes: the predictions file, one row per instance (CSV or JSONL),
and the summary of a run."""

import csv
import dataclasses
import io
import json

import numpy as np

# Joins the class names of a conformal class set in a CSV cell (JSONL writes a list).
CLASS_SET_SEPARATOR = "|"


@dataclasses.dataclass
class PredictionSummary:
  """What `predict` wrote.

  Attributes:
    output_path: The predictions file.
    rows: Instances predicted.
    rejected: Rows left out (skip policy).
    rejects_path: The rejects file (skip policy), else None.
    labelled: Rows with a true label.
    top_k_accuracy: Share of the labelled rows whose label is in the top K (None without labels).
    seconds: Wall time.
    top_1_accuracy: Share of the labelled rows whose label is the best class (None without labels).
    k: The K of `top_k_accuracy`: the asked top K, at most the model's number of classes.
    calibration_note: Why there are no probabilities (an uncalibrated export), else None.
    coverage: The class sets' coverage, or None without sets.
    set_coverage: Share of the labelled rows whose class set holds the label (None without sets or labels).
    mean_set_size: Mean classes per set (None without sets).
    coverage_warning: `calibration.coverage_shortfall`'s note when the labelled rows' sets hold their labels
      less often than the coverage allows by chance (rows unlike the calibration rows), else None.
  """

  output_path: str
  rows: int
  rejected: int
  rejects_path: str | None
  labelled: int
  top_k_accuracy: float | None
  seconds: float
  top_1_accuracy: float | None = None
  k: int = 5
  calibration_note: str | None = None
  coverage: float | None = None
  set_coverage: float | None = None
  mean_set_size: float | None = None
  coverage_warning: str | None = None

  def format(self) -> str:
    lines = [f"Wrote {self.rows} predictions to {self.output_path} in {self.seconds:.1f}s "
             f"({rate(self.rows, self.seconds)} rows/s)."]
    if self.top_1_accuracy is not None:
      lines.append(f"Top-1 accuracy: {100 * self.top_1_accuracy:.2f}% of {self.labelled} labelled rows.")
    if self.top_k_accuracy is not None and self.k > 1:
      lines.append(f"True label in the top {self.k}: {100 * self.top_k_accuracy:.2f}% of {self.labelled} "
                   "labelled rows.")
    if self.mean_set_size is not None:
      held = (f"; the label in the set for {100 * self.set_coverage:.2f}% of {self.labelled} labelled rows"
              if self.set_coverage is not None else "")
      lines.append(f"{100 * self.coverage:g}% class sets: {self.mean_set_size:.2f} classes on average{held}.")
    if self.coverage_warning is not None:
      lines.append(f"Warning: {self.coverage_warning}.")
    if self.calibration_note is not None:
      lines.append(f"Scores only: {self.calibration_note}.")
    if self.rejects_path is not None:
      lines.append(f"Rejected rows: {self.rejected} (listed in {self.rejects_path}).")
    return "\n".join(lines)


def rate(count: int, seconds: float) -> str:
  """Items per second as the summary and the progress line write it."""
  rate = count / max(seconds, 1e-9)
  return f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"


class PredictionWriter:
  """CSV: id, [label, in_top_k,] class_1, score_1, [probability_1,] ..., class_K, score_K, [probability_K,]
  [class_set]. JSONL: one object per instance ("probabilities" and "class_set" lists when given)."""

  def __init__(self, out: io.TextIOBase, output_format: str, k: int):
    self._out, self._format, self._k = out, output_format, k
    self._csv = csv.writer(out) if output_format == "csv" else None
    self._header_written = False

  def write(self, item_id: str, label: str | None, names: np.ndarray, scores: np.ndarray,
            probabilities: np.ndarray | None, hit: bool | None, class_set: list[str] | None = None) -> None:
    """One instance's row: its id, true label (written with `hit` when `hit` is not None), top-K names and
    scores, their probabilities (calibrated exports) and its class set (with a coverage)."""
    scores = [round(float(s), 6) for s in scores]
    columns = [list(names), scores]
    if probabilities is not None:
      columns.append([round(float(p), 6) for p in probabilities])
    if self._csv is None:
      record = {"id": item_id, "classes": list(names), "scores": scores}
      if probabilities is not None:
        record["probabilities"] = columns[2]
      if class_set is not None:
        record["class_set"] = list(class_set)
      if hit is not None:
        record.update(label=label, in_top_k=hit)
      self._out.write(json.dumps(record, ensure_ascii=False) + "\n")
      return
    if not self._header_written:
      kinds = ("class", "score", "probability")[:len(columns)]
      header = ["id"] + (["label", "in_top_k"] if hit is not None else [])
      header += [f"{kind}_{i}" for i in range(1, len(names) + 1) for kind in kinds]
      header += ["class_set"] if class_set is not None else []
      self._csv.writerow(header)
      self._header_written = True
    row = [item_id] + ([label, int(hit)] if hit is not None else [])
    row += [value for values in zip(*columns, strict=True) for value in values]
    row += [CLASS_SET_SEPARATOR.join(class_set)] if class_set is not None else []
    self._csv.writerow(row)
