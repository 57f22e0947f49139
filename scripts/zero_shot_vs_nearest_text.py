"""Runs the zero-shot path as a user would, on classes never seen in training, and tabulates it against the
nearest class text (the untrained cosine of the frozen embeddings), as mean +- sample standard deviation over
seeds.

  .venv/bin/python scripts/zero_shot_vs_nearest_text.py --sets=wordnet_nouns,newsgroups --seeds=0,1,2 \
      --output_dir=out/zero_shot

Per set the user's files are written once (`wordnet.write_task_files`: WordNet noun glosses by hypernym, 10%
of the classes held out; `newsgroup_classes.write_zero_shot_files`: 20 Newsgroups with one description per
group, 5 groups held out). Per seed and setting:

  rank4class-train --train_files=train.csv --test_files=test.csv --class_encoder=metadata \
      --class_texts=classes.csv --seed=S --model_dir=DIR [--zero_shot_holdout=0]
  rank4class-export --kind=zero_shot --model_dir=DIR --export_dir=DIR/zs
  rank4class-evaluate --model_dir=DIR/zs --class_texts=new_classes.csv --input=new.csv --report_path=...

"default" runs with no --zero_shot_holdout flag (the zero-shot model chosen on held-out training classes),
"no_holdout" with --zero_shot_holdout=0 (the run's one model). The table (Markdown) goes to stdout and to
<output_dir>/table.md, every run's numbers to <output_dir>/runs.json; finished steps are read back.
"""

import argparse
import csv
import json
import os
import pathlib
import shlex
import subprocess
import sys

import numpy as np

from rank4class_engine.statistics.seed_statistics import SeedStatistics

ROOT = pathlib.Path(__file__).resolve().parents[1]
METRICS = ("top_1_error", "top_5_error", "ndcg_5", "mrr")
SETTINGS = {"default": [], "no_holdout": ["--zero_shot_holdout=0"]}


def _binary(name: str) -> str:
  found = pathlib.Path(sys.executable).parent / name
  return str(found) if found.exists() else name


def write_files(name: str, folder: str) -> None:
  if os.path.exists(os.path.join(folder, "new_classes.csv")):
    return
  if name == "wordnet_nouns":
    from rank4class_data.datasets import wordnet
    wordnet.write_task_files(wordnet.build_hypernym_task(wordnet.WordNetConfig(min_members=10)), folder)
  elif name == "newsgroups":
    from rank4class_data.datasets import newsgroup_classes
    newsgroup_classes.write_zero_shot_files(folder)
  else:
    raise SystemExit(f"unknown set {name!r}: wordnet_nouns or newsgroups")


def _run(command: list[str], log_path: str) -> None:
  with open(log_path, "a", encoding="utf-8") as log:
    log.write(shlex.join(command) + "\n")
    log.flush()
    code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
  if code != 0:
    raise SystemExit(f"{shlex.join(command)} exited {code}; see {log_path}")


def run_one(folder: str, setting: str, seed: int, output_dir: str) -> dict:
  model_dir = os.path.join(output_dir, os.path.basename(folder), setting, f"seed{seed}")
  report = os.path.join(model_dir, "unseen_report.json")
  log_path = model_dir + ".log"
  if not os.path.exists(report):
    os.makedirs(os.path.dirname(model_dir), exist_ok=True)
    _run([_binary("rank4class-train"), f"--train_files={folder}/train.csv", f"--test_files={folder}/test.csv",
          "--class_encoder=metadata", f"--class_texts={folder}/classes.csv", f"--seed={seed}",
          f"--model_dir={model_dir}", "--verbose=1", *SETTINGS[setting]], log_path)
    _run([_binary("rank4class-export"), "--kind=zero_shot", f"--model_dir={model_dir}",
          f"--export_dir={model_dir}/zs"], log_path)
    _run([_binary("rank4class-evaluate"), f"--model_dir={model_dir}/zs",
          f"--class_texts={folder}/new_classes.csv",
          f"--input={folder}/new.csv", f"--report_path={report}"], log_path)
  with open(report, encoding="utf-8") as f:
    metrics = json.load(f)["metrics"]
  with open(os.path.join(model_dir, "train_result.json"), encoding="utf-8") as f:
    result = json.load(f)
  return {"set": os.path.basename(folder), "setting": setting, "seed": seed,
          **{m: metrics[m] for m in METRICS}, "zero_shot": result.get("zero_shot"),
          "seconds": result["seconds"]}


def nearest_text(folder: str) -> dict:
  """The untrained reference: each new row's classes ranked by the cosine of frozen MiniLM embeddings."""
  from rank4class.inference import zero_shot
  from rank4class.training import training_data as data_lib
  from rank4class_encoders import text_embeddings
  with open(os.path.join(folder, "new.csv"), encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  with open(os.path.join(folder, "new_classes.csv"), encoding="utf-8") as f:
    classes = list(csv.DictReader(f))
  config = data_lib.DataConfig(train_files=os.path.join(folder, "train.csv"))
  frozen = data_lib.frozen_text_encoder(config, data_lib.text_handles(config))
  names = [c["class"] for c in classes]
  labels = np.asarray([names.index(r["label"]) for r in rows])
  return zero_shot.nearest_text_baseline(text_embeddings.embed_texts([r["text"] for r in rows], frozen),
                                         text_embeddings.embed_texts([c["text"] for c in classes], frozen),
                                         labels)["metrics"]


def _mean_std(values: list[float]) -> str:
  """Mean ± sample std over seeds, x100 (the mean alone for one seed)."""
  return SeedStatistics.of([100 * v for v in values]).format()


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--sets", default="wordnet_nouns,newsgroups")
  parser.add_argument("--seeds", default="0,1,2")
  parser.add_argument("--output_dir", default="out/zero_shot")
  args = parser.parse_args()
  seeds = [int(s) for s in args.seeds.split(",")]
  runs, lines = [], ["| set | model | " + " | ".join(METRICS) + " |", "|---|---|" + "---:|" * len(METRICS)]
  for name in args.sets.split(","):
    folder = os.path.join(args.output_dir, "files", name)
    write_files(name, folder)
    reference = nearest_text(folder)
    lines.append(f"| {name} | nearest class text (untrained) | "
                 + " | ".join(f"{100 * reference[m]:.2f}" for m in METRICS) + " |")
    for setting in SETTINGS:
      rows = [run_one(folder, setting, seed, args.output_dir) for seed in seeds]
      runs.extend(rows)
      lines.append(f"| {name} | {setting} | "
                   + " | ".join(_mean_std([r[m] for r in rows]) for m in METRICS) + " |")
  table = "\n".join(lines) + "\n"
  sys.stdout.write(table)
  with open(os.path.join(args.output_dir, "table.md"), "w", encoding="utf-8") as f:
    f.write(table)
  with open(os.path.join(args.output_dir, "runs.json"), "w", encoding="utf-8") as f:
    json.dump(runs, f, indent=2)


if __name__ == "__main__":
  main()
