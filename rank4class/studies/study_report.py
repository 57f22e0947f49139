"""The Rank4Class study's report: per-cell mean ± std over seeds with Welch's significance marks against the
SoftmaxCE + dot baseline, the markdown tables in the layout of the paper's Tables 7-12 with the baselines
outside Rank4Class, one plot per data set, and results.md."""

import dataclasses
import math
import os
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from rank4class.evaluation import baselines as baselines_lib
from rank4class.modeling import interactions as interactions_lib
from rank4class.studies.study_config import BASELINE, RunRecord, StudyConfig
from rank4class_data.validation import atomic_output
from rank4class_engine.optimization import losses as losses_lib
from rank4class_engine.statistics.seed_statistics import SeedStatistics

LOSS_LABELS = {losses_lib.SOFTMAX: "SoftmaxCE", losses_lib.PAIRWISE_LOGISTIC: "PairLogLoss",
               losses_lib.APPROX_NDCG: "ApproxNDCG", losses_lib.GUMBEL_APPROX_NDCG: "Gumbel-ApproxNDCG",
               losses_lib.MSE: "MSE", losses_lib.RESCALED_MSE: "MSE (rescaled)"}
INTERACTION_LABELS = {interactions_lib.DOT: "dot product", interactions_lib.LATENT_CROSS: "LC+MLP",
                      interactions_lib.CONCAT: "Concat+MLP"}
# The paper's metrics, reported x100: (metric name, label, lower is better).
REPORTED_METRICS = (("top_1_error", "Top-1 Error", True), ("top_5_error", "Top-5 Error", True),
                    ("ndcg_5", "NDCG@5", False))
RESULTS_MD = "results.md"


@dataclasses.dataclass
class CellSummary:
  """Mean and sample standard deviation (x100) of one metric of one cell over seeds.

  Attributes:
    values: Per-seed values x100.
    mean: Mean.
    std: Sample standard deviation (ddof=1; 0 for one seed).
  """

  values: list[float]
  mean: float
  std: float

  @classmethod
  def of(cls, values: list[float]) -> "CellSummary":
    array = np.asarray(values, np.float64) * 100.0
    statistics = SeedStatistics.of(array)
    return cls(array.tolist(), statistics.mean, statistics.std)


def welch_significant(a: CellSummary, b: CellSummary) -> bool | None:
  """Whether means differ by more than 2 standard errors of the difference (Welch): |m_a - m_b| >
  2 * sqrt(s_a^2 / n_a + s_b^2 / n_b). None when either side has fewer than two seeds."""
  if len(a.values) < 2 or len(b.values) < 2:
    return None
  standard_error = math.sqrt(a.std ** 2 / len(a.values) + b.std ** 2 / len(b.values))
  return abs(a.mean - b.mean) > 2.0 * standard_error


def summarize(records: list[RunRecord]) -> dict[tuple[str, str, str],
                                                dict[tuple[str, str], dict[str, CellSummary]]]:
  """{(dataset, mode): {(loss, interaction): {metric: CellSummary}}} of the test metrics."""
  grouped: dict[tuple, dict[tuple, list[RunRecord]]] = {}
  for r in records:
    grouped.setdefault((r.dataset, r.mode), {}).setdefault((r.loss, r.interaction), []).append(r)
  return {key: {cell: {m: CellSummary.of([r.test[m] for r in runs]) for m, _, _ in REPORTED_METRICS}
                for cell, runs in cells.items()}
          for key, cells in grouped.items()}


def _cell_text(summary: CellSummary, baseline: CellSummary | None, lower_is_better: bool, best: bool) -> str:
  text = SeedStatistics(summary.mean, summary.std, len(summary.values)).format()
  if best:
    text = f"**{text}**"
  if baseline is not None and summary is not baseline:
    significant = welch_significant(summary, baseline)
    if significant:
      improved = summary.mean < baseline.mean if lower_is_better else summary.mean > baseline.mean
      text += " ▲" if improved else " ▼"
  return text


def markdown_tables(records: list[RunRecord], losses: tuple[str, ...], interactions: tuple[str, ...],
                    baselines: dict[str, dict[str, Any]] | None = None) -> str:
  """One table per (data set, mode) in the layout of the paper's Tables 7-12 (mean ± std over seeds, x100),
  each followed by the data set's baselines outside Rank4Class (`baselines`, by data set name) and the line
  "best cell X vs best baseline Y"."""
  parts = []
  for (dataset, mode), cells in summarize(records).items():
    cell_losses = [name for name in losses if any(c[0] == name for c in cells)]
    cell_interactions = [i for i in interactions if any(c[1] == i for c in cells)]
    seeds = sorted({r.seed for r in records if (r.dataset, r.mode) == (dataset, mode)})
    parts.append(f"#### {dataset} ({mode}), {len(seeds)} seed(s)\n")
    header = "| Metric | Interaction | " + " | ".join(LOSS_LABELS[name] for name in cell_losses) + " |"
    parts += [header, "|" + "---|" * (2 + len(cell_losses))]
    baseline = cells.get(BASELINE)
    for metric, label, lower in REPORTED_METRICS:
      means = [s[metric].mean for s in cells.values()]
      best_mean = min(means) if lower else max(means)
      for i, interaction in enumerate(cell_interactions):
        row = [label if i == 0 else "", INTERACTION_LABELS[interaction]]
        for loss in cell_losses:
          summary = cells.get((loss, interaction), {}).get(metric)
          if summary is None:
            row.append("–")
          else:
            row.append(_cell_text(summary, baseline[metric] if baseline else None, lower,
                                  summary.mean == best_mean))
        parts.append("| " + " | ".join(row) + " |")
    parts.append("")
    if baselines and dataset in baselines:
      parts += baseline_table(baselines[dataset], cells)
  return "\n".join(parts)


def baseline_table(report: dict[str, Any], cells: dict[tuple[str, str], dict[str, CellSummary]]) -> list[str]:
  """Markdown lines: the baselines' test metrics (x100; one fit each, deterministic, so no spread) and the
  best Rank4Class cell (by mean test top-1 error) against the best baseline."""
  lines = baselines_lib.markdown_table(report, tuple((m, label) for m, label, _ in REPORTED_METRICS))
  if "skipped" in report:
    return [*lines, ""]
  best = baselines_lib.best_row(report)
  if best is not None and cells:
    cell, summary = min(cells.items(), key=lambda item: item[1]["top_1_error"].mean)
    difference = summary["top_1_error"].mean - 100 * best["metrics"]["top_1_error"]
    lines.append(f"Best Rank4Class cell ({LOSS_LABELS[cell[0]]} + {INTERACTION_LABELS[cell[1]]}) top-1 error "
                 f"{summary['top_1_error'].mean:.2f} vs best baseline ({best['label']}) "
                 f"{100 * best['metrics']['top_1_error']:.2f}: {'better' if difference < 0 else 'worse'} by "
                 f"{abs(difference):.2f} points.")
  lines.append("")
  return lines


def significance_rule() -> str:
  return ("Cells show mean ± sample std over seeds of the test metric x100, each seed's model chosen on the "
          "validation split. **Bold**: best mean in the block. ▲/▼: better/worse than the SoftmaxCE + dot "
          "baseline by more than 2 standard errors of the difference (Welch: |Δ| > 2·sqrt(s₁²/n₁ + s₂²/n₂)); "
          "no mark: within noise.")


def plot(records: list[RunRecord], losses: tuple[str, ...], interactions: tuple[str, ...],
         output_dir: str, baselines: dict[str, dict[str, Any]] | None = None) -> list[str]:
  """One PNG per (data set, mode): grouped bars (mean ± std over seeds) per metric, the data set's baselines
  outside Rank4Class as horizontal lines; returns the paths."""
  paths = []
  for (dataset, mode), cells in summarize(records).items():
    cell_losses = [name for name in losses if any(c[0] == name for c in cells)]
    cell_interactions = [i for i in interactions if any(c[1] == i for c in cells)]
    # Matplotlib's object API: no pyplot, so no backend to choose and no global figure to close.
    figure = Figure(figsize=(5 * len(REPORTED_METRICS), 4))
    axes = figure.subplots(1, len(REPORTED_METRICS))
    width = 0.8 / max(len(cell_interactions), 1)
    for axis, (metric, label, lower) in zip(axes, REPORTED_METRICS, strict=True):
      for j, interaction in enumerate(cell_interactions):
        xs, means, stds = [], [], []
        for i, loss in enumerate(cell_losses):
          summary = cells.get((loss, interaction), {}).get(metric)
          if summary is not None:
            xs.append(i + (j - (len(cell_interactions) - 1) / 2) * width)
            means.append(summary.mean)
            stds.append(summary.std)
        axis.bar(xs, means, width, yerr=stds, capsize=2, label=INTERACTION_LABELS[interaction])
      axis.set_xticks(range(len(cell_losses)))
      axis.set_xticklabels([LOSS_LABELS[name] for name in cell_losses], rotation=30, ha="right", fontsize=8)
      axis.set_title(f"{label} ({'lower' if lower else 'higher'} is better)")
      values = [s[metric].mean for s in cells.values()]
      for k, row in enumerate((baselines or {}).get(dataset, {}).get("rows", [])):
        axis.axhline(100 * row["metrics"][metric], color=f"C{len(cell_interactions) + k}", linestyle="--",
                     linewidth=1, label=row["label"])
        # The axis spans the learned baselines; the majority may be off.
        if row["name"] != baselines_lib.MAJORITY:
          values.append(100 * row["metrics"][metric])
      spread = max(values) - min(values)
      axis.set_ylim(max(0.0, min(values) - 2 * spread - 0.5), max(values) + 2 * spread + 0.5)
    axes[0].legend(fontsize=8)
    figure.suptitle(f"Rank4Class study: {dataset} ({mode}), test metrics x100, mean ± std over seeds")
    figure.tight_layout()
    path = os.path.join(output_dir, f"study_{dataset}_{mode}.png")
    with atomic_output(path, "wb") as f:
      figure.savefig(f, format="png", dpi=110)
    paths.append(path)
  return paths


def write_outputs(config: StudyConfig, chosen: list[RunRecord], all_records: list[RunRecord] | None = None,
                  failures: list[dict[str, str]] | None = None,
                  baselines: dict[str, dict[str, Any]] | None = None) -> tuple[str, list[str]]:
  """Writes results.md (tables with their baselines, the significance rule, the chosen hyper-parameters) and
  the plots."""
  os.makedirs(config.output_dir, exist_ok=True)
  tables = markdown_tables(chosen, config.losses, config.interactions, baselines)
  plots = plot(chosen, config.losses, config.interactions, config.output_dir, baselines)
  lines = [tables, significance_rule(), "",
           "Chosen hyper-parameters (tuned on validation with the first seed):",
           "", "| Data set | Mode | Loss | Interaction | Width | Learning rate | Mean run time (s) |",
           "|---|---|---|---|---|---|---|"]
  seen = set()
  for r in chosen:
    key = (r.dataset, r.mode, r.loss, r.interaction)
    if key in seen:
      continue
    seen.add(key)
    times = [x.seconds for x in chosen if (x.dataset, x.mode, x.loss, x.interaction) == key]
    lines.append(f"| {r.dataset} | {r.mode} | {LOSS_LABELS[r.loss]} | {INTERACTION_LABELS[r.interaction]} | "
                 f"{r.hidden_width} | {r.learning_rate:g} | {np.mean(times):.0f} |")
  if all_records is not None:
    lines += ["", f"Runs trained (tuning included): {len(all_records)}; total training time "
              f"{sum(r.seconds for r in all_records):.0f}s."]
  for failure in failures or []:
    lines.append(f"FAILED run {failure['model_dir']}: {failure['error']}")
  lines += ["", "Plots: " + ", ".join(os.path.basename(p) for p in plots), ""]
  path = os.path.join(config.output_dir, RESULTS_MD)
  with atomic_output(path) as f:
    f.write("\n".join(lines))
  return path, plots

