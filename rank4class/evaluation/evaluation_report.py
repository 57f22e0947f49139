"""The evaluation report's files and table: the JSON report with the whole per-class table as CSV beside it,
and the plain-text table a terminal shows (metrics x100, the best and worst classes, calibration,
throughput)."""

import csv
import math
import os
from typing import Any

from rank4class.inference import calibration as calibration_lib
from rank4class.inference import served
from rank4class_data.validation import atomic_output, write_json

# The terminal's per-class table lists the best and worst this many classes when there are more than twice as
# many.
PER_CLASS_SHOWN = 10


def per_class_csv_path(report_path: str) -> str:
  """Where the per-class table of the report at `report_path` goes: `<report>.per_class.csv` beside it."""
  return os.path.splitext(report_path)[0] + ".per_class.csv"


def write_report(report_path: str, report: dict[str, Any]) -> None:
  """Writes the JSON report and, when it has per-class recall, the whole per-class table as CSV beside it
  (class, recall, instances; sorted by recall, worst first); each file whole or not at all. Records both paths
  in `report` ("report_path", "per_class_csv")."""
  if "per_class_recall" in report:
    csv_path = per_class_csv_path(report_path)
    with atomic_output(csv_path) as f:
      writer = csv.writer(f)
      writer.writerow(["class", "recall", "instances"])
      for name in _classes_by_recall(report):
        recall = report["per_class_recall"][name]
        writer.writerow([name, "" if recall is None else f"{recall:.6f}", report["class_counts"][name]])
    report["per_class_csv"] = csv_path
  write_json(report_path, report)
  report["report_path"] = report_path


def _classes_by_recall(report: dict[str, Any]) -> list[str]:
  """Classes with instances by recall, worst first (ties: more instances first), then those without
  instances."""
  recall, counts = report["per_class_recall"], report["class_counts"]
  scored = sorted((name for name in recall if recall[name] is not None),
                  key=lambda n: (recall[n], -counts[n], n))
  return scored + [name for name in recall if recall[name] is None]



def _format(value: float | None, scale: float = 100.0) -> str:
  return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value * scale:.2f}"


def format_table(report: dict[str, Any]) -> str:
  """A plain-text table of a report: the metrics (x100, as in the paper) and the per-class recall: every class
  up to 2 x `PER_CLASS_SHOWN` classes, else the `PER_CLASS_SHOWN` best and worst (the whole table: the
  report's per-class CSV)."""
  lines = [f"{'metric':<24}{'value (x100)':>14}", "-" * 38]
  lines += [f"{name:<24}{_format(value):>14}" for name, value in report["metrics"].items()]
  lines.append(f"{'instances':<24}{report['n']:>14d}")
  if "num_items" in report:
    lines.append(f"{'candidates':<24}{report['num_items']:>14d}")
  if "per_class_recall" in report:
    recall = report["per_class_recall"]
    if len(recall) <= 2 * PER_CLASS_SHOWN:
      sections = [("", list(recall))]
    else:
      counts = report["class_counts"]
      scored = [name for name in recall if recall[name] is not None]
      best = sorted(scored, key=lambda n: (-recall[n], -counts[n], n))[:PER_CLASS_SHOWN]
      sections = [(f"the {PER_CLASS_SHOWN} best of {len(recall):,} classes", best),
                  (f"the {PER_CLASS_SHOWN} worst", _classes_by_recall(report)[:PER_CLASS_SHOWN])]
    width = max([24, *(len(name) + 2 for _, names in sections for name in names)])
    for title, names in sections:
      lines += ["",
                f"{'class':<{width}}{'recall (x100)':>14}{'count':>9}" + (f"   ({title})" if title else ""),
                "-" * (width + 23)]
      lines += [f"{name:<{width}}{_format(recall[name]):>14}{report['class_counts'][name]:>9d}"
                for name in names]
    if len(sections) > 1:
      where = f": {report['per_class_csv']}" if report.get("per_class_csv") else " in the report"
      lines.append(f"All {len(recall):,} classes{where}")
  if report.get("calibration") is not None:
    lines += ["", calibration_lib.metrics_line(report["calibration"])]
  if report.get("kind") == served.TWO_STAGE:
    recall = report["recall_at_m"]
    lines += ["", f"two-stage export: the true class among the first stage's {report['num_candidates']:,} "
              f"candidates for {_format(recall)}% of the instances (recall@M); a class it misses counts as "
              f"ranked below them: {report['timing']['instances_per_second']:.0f} instances/s"]
  elif report.get("kind") == served.ZERO_SHOT and "class_counts" in report:
    lines += ["", f"zero-shot export: exact ranks over the {len(report['class_counts']):,} classes given as "
              f"texts: {report['timing']['instances_per_second']:.0f} instances/s"]
  elif "chunk_size" in report:
    lines += ["", f"exact ranks over all {len(report['class_counts']):,} classes, {report['chunk_size']:,} "
              f"at a time: {report['timing']['instances_per_second']:.0f} instances/s"]
  elif "timing" in report:
    timing = report["timing"]
    lines += ["", f"{timing['instances_per_second']:.0f} instances/s "
              f"({timing['steady_instances_per_second']:.0f} after the first batch), input pipeline "
              f"{100 * timing['input_fraction']:.1f}% of {timing['seconds']:.2f}s "
              f"({100 * timing['steady_input_fraction']:.1f}% after the first batch)"]
  return "\n".join(lines)
