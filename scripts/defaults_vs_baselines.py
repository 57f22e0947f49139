"""Runs `rank4class-train` as a user would (one process per data set, text mode and seed, nothing tuned) and
tabulates its test top-1 error against the baselines it prints, as mean +- sample standard deviation over
seeds.

  .venv/bin/python scripts/defaults_vs_baselines.py --datasets=reuters_r8,election_tweets --seeds=0,1,2 \
      --output_dir=out/defaults [--text_modes=default,hybrid] [--extra="--loss=approx_ndcg"]

Each run is `rank4class-train --dataset=D --seed=S --model_dir=<output_dir>/<D>/<mode>/seed<S> [--text_mode=M]
[extra flags]`; a finished run directory is read back, not trained again. The table (Markdown) goes to stdout
and to <output_dir>/table.md, every run's numbers to <output_dir>/runs.json. "default" runs with no
--text_mode flag.
"""

import argparse
import json
import os
import pathlib
import shlex
import subprocess
import sys
import time

from rank4class_engine.statistics.seed_statistics import SeedStatistics

ROOT = pathlib.Path(__file__).resolve().parents[1]
METRICS = ("top_1_error", "top_5_error", "ndcg_5")


def _binary() -> str:
  found = pathlib.Path(sys.executable).parent / "rank4class-train"
  return str(found) if found.exists() else "rank4class-train"


def run_one(dataset: str, mode: str, seed: int, output_dir: str, extra: list[str]) -> dict:
  """Trains (or reads back) one run; returns its test metrics, its baselines and its best step."""
  model_dir = os.path.join(output_dir, dataset, mode, f"seed{seed}")
  result_path = os.path.join(model_dir, "train_result.json")
  if not os.path.exists(result_path):
    command = [_binary(), f"--dataset={dataset}", f"--seed={seed}", f"--model_dir={model_dir}", "--verbose=1",
               *([] if mode == "default" else [f"--text_mode={mode}"]), *extra]
    started = time.perf_counter()
    log_path = os.path.join(output_dir, f"{dataset}.{mode}.seed{seed}.log")
    os.makedirs(output_dir, exist_ok=True)
    with open(log_path, "w", encoding="utf-8") as log:
      log.write(shlex.join(command) + "\n")
      log.flush()
      code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
      raise SystemExit(f"{shlex.join(command)} exited {code}; see {log_path}")
    print(f"{dataset} {mode} seed {seed}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
  with open(result_path, encoding="utf-8") as f:
    result = json.load(f)
  baselines = {row["name"]: {"label": row["label"], **{m: row["metrics"].get(m) for m in METRICS},
                             "fit": row.get("fit")}
               for row in (result.get("baselines") or {}).get("rows", [])}
  phases = result.get("phase_seconds", {})
  return {"dataset": dataset, "mode": mode, "seed": seed, "best_step": result["best_step"],
          "steps": result["steps"], "seconds": result["seconds"],
          "seconds_without_embedding": result["seconds"] - phases.get("embedding", 0.0), "phases": phases,
          "kept": (result.get("choice") or {}).get("chosen", "trained"),
          **{m: result["test_report"]["metrics"].get(m) for m in METRICS}, "baselines": baselines}


def _mean_std(values: list[float]) -> str:
  """Mean ± sample std over seeds, x100 (the mean alone for one seed)."""
  return SeedStatistics.of([100 * v for v in values]).format()


_SHORT = {"trained": "trained", "logistic_regression": "LR", "tfidf_logistic_regression": "TF-IDF+emb LR"}


def table(runs: list[dict], modes: list[str]) -> str:
  """One row per data set: each mode's test top-1 error (mean ± sample std over seeds, x100), what each seed
  kept, every baseline (deterministic: one fit each) and the best one's margin, and the median run time apart
  from embedding."""
  names = list(dict.fromkeys(name for run in runs for name in run["baselines"] if name != "majority"))
  labels = {name: next(run["baselines"][name]["label"] for run in runs if name in run["baselines"])
            for name in names}
  lines = ["| set | " + " | ".join(f"`{m}`" for m in modes) + " | kept | "
           + " | ".join(labels[n] for n in names) + " | against the best baseline | s without embedding |",
           "|---|" + "---:|" * len(modes) + "---|" + "---:|" * len(names) + "---|---:|"]
  for dataset in dict.fromkeys(run["dataset"] for run in runs):
    cells, kept = [], []
    for mode in modes:
      chosen = [run for run in runs if run["dataset"] == dataset and run["mode"] == mode]
      cells.append(_mean_std([run["top_1_error"] for run in chosen]) if chosen else "–")
      kept.append(", ".join(_SHORT.get(run["kept"], run["kept"]) for run in chosen))
    first = [run for run in runs if run["dataset"] == dataset]
    baselines = first[0]["baselines"]
    values = {n: baselines[n]["top_1_error"] for n in names if n in baselines}
    best = min(values.values()) if values else None
    mean = sum(run["top_1_error"] for run in first if run["mode"] == modes[0]) / max(
        1, sum(run["mode"] == modes[0] for run in first))
    margin = "–" if best is None else (f"beaten by {100 * (best - mean):.2f}" if mean <= best
                                         else f"short by {100 * (mean - best):.2f}")
    seconds = sorted(run["seconds_without_embedding"] for run in first if "seconds_without_embedding" in run)
    lines.append(f"| {dataset} | " + " | ".join(cells) + f" | {' / '.join(kept)} | "
                 + " | ".join(f"{100 * values[n]:.2f}" if n in values else "–" for n in names)
                 + f" | {margin} | {seconds[len(seconds) // 2]:.0f} |")
  return "\n".join(lines) + "\n"


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--datasets", required=True)
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--text_modes", default="default")
  parser.add_argument("--output_dir", required=True)
  parser.add_argument("--extra", default="", help="More rank4class-train flags, as one shell-quoted string.")
  args = parser.parse_args()
  modes = args.text_modes.split(",")
  runs = [run_one(dataset, mode, int(seed), args.output_dir, shlex.split(args.extra))
          for dataset in args.datasets.split(",") for seed in args.seeds.split(",") for mode in modes]
  with open(os.path.join(args.output_dir, "runs.json"), "w", encoding="utf-8") as f:
    json.dump(runs, f, indent=1)
  text = table(runs, modes)
  with open(os.path.join(args.output_dir, "table.md"), "w", encoding="utf-8") as f:
    f.write(text)
  sys.stdout.write(text)


if __name__ == "__main__":
  main()
