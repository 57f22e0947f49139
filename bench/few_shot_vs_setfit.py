"""A few labelled rows per class: the default `rank4class-train` against SetFit, logistic regression on the
frozen MiniLM embeddings, TF-IDF + logistic regression and the nearest class text, on real sets whose class
names or texts mean something.

For each set, k (labelled rows per class, all of a class's rows where it has fewer) and seed, the k rows of
each class are drawn from the set's training split with `np.random.default_rng(seed)` and written as a user
would have them (`few.csv`: text,label; `classes.csv`: class,text where the set has class texts); every
column is tested on the same fixed subsample of the test split (`--test_rows`, drawn with seed 0).
- default: `rank4class-train --train_files=few.csv [--class_texts=classes.csv] --test_files=test.csv`, its
  flags parsed by the binary's own parser and run in this process (the MiniLM embeddings cached, as a second
  run on the same files has them); its time is the run's wall time, export, test and baselines included.
- LR on frozen MiniLM and TF-IDF + LR: the baselines that run prints (scikit-learn's defaults, fitted on the
  same rows), with their fit times.
- nearest class text: the class whose text (or name) has the highest cosine to the row's MiniLM embedding.
- few_shot_off (`--few_shot_off`): the same command with `--few_shot=off`, the run before the few-shot path
  (a 10 % validation split carved from the k rows per class).
- SetFit: `bench/few_shot_setfit_worker.py` in the bench-only environment (`--setfit_python`), its default
  recipe on the same rows and test rows, on the CPU with 2 threads; `--setfit_grid` says where it runs.

  PYTHONPATH=. .venv-reference/bin/python bench/few_shot_vs_setfit.py --output=out/few_shot \
      --ks=8,64 --seeds=0,1,2,3,4 --setfit_python=/tmp/setfit-venv/bin/python --setfit_grid=8:0,1,2

Writes `<output>/runs.jsonl` (a line per set x k x seed x column; a rerun skips what is there) and prints the
table (accuracy x100, mean +- standard deviation over the seeds, and seconds per run).
"""

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

from rank4class.training import train as train_lib
from rank4class.training import training_data as data_lib
from rank4class_cli.binaries import train_main
from rank4class_data.datasets import classification, newsgroup_classes, wordnet
from rank4class_encoders import text_embeddings

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "few_shot_setfit_worker.py")
COLUMNS = ("default", "setfit", "embedding_lr", "tfidf_lr", "nearest_class_text", "few_shot_off")
BASELINE_COLUMNS = {"embedding_lr": "embedding_lr", "tfidf_lr": "tfidf_lr"}


def _set(name: str) -> tuple[list[str], np.ndarray, list[str], np.ndarray, list[str], list[str] | None]:
  """(train texts, labels, test texts, labels, class names, class texts or None: the names serve)."""
  if name == "wordnet_10":
    task = wordnet.build_hypernym_task(wordnet.WordNetConfig(min_members=100, max_classes=10,
                                                             zero_shot_fraction=0.0))
    return (list(task.train_texts), np.asarray(task.train_labels), list(task.test_texts),
            np.asarray(task.test_labels), list(task.class_names), list(task.class_texts))
  dataset = "20newsgroups" if name == "20newsgroups_described" else name
  train, test = (classification.load_text_classification(dataset, split) for split in ("train", "test"))
  texts = ([newsgroup_classes.DESCRIPTIONS[c] for c in train.class_names]
           if name == "20newsgroups_described" else None)
  return train.texts, np.asarray(train.labels), test.texts, np.asarray(test.labels), train.class_names, texts


def _write_rows(path: str, texts: list[str], labels: list[str]) -> None:
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(["text", "label"])
    writer.writerows(zip(texts, labels, strict=True))


def write_files(folder: str, data: tuple, k: int, seed: int, test_rows: int) -> dict[str, str]:
  """few.csv (k rows per class drawn with `seed`), test.csv (the fixed test subsample) and classes.csv."""
  train_texts, train_labels, test_texts, test_labels, names, class_texts = data
  os.makedirs(folder, exist_ok=True)
  rng = np.random.default_rng(seed)
  rows = np.concatenate([rng.permutation(np.flatnonzero(train_labels == c))[:k] for c in range(len(names))])
  files = {"few": os.path.join(folder, "few.csv"), "test": os.path.join(folder, "test.csv")}
  _write_rows(files["few"], [train_texts[i] for i in rows], [names[train_labels[i]] for i in rows])
  test = np.sort(np.random.default_rng(0).permutation(len(test_labels))[:test_rows])
  _write_rows(files["test"], [test_texts[i] for i in test], [names[test_labels[i]] for i in test])
  if class_texts is not None:
    files["classes"] = os.path.join(folder, "classes.csv")
    with open(files["classes"], "w", newline="", encoding="utf-8") as f:
      writer = csv.writer(f)
      writer.writerow(["class", "text"])
      writer.writerows(zip(names, class_texts, strict=True))
  return files


def run_default(files: dict[str, str], model_dir: str,
                extra: tuple[str, ...] = ()) -> tuple[dict, train_lib.Rank4ClassTrainResult]:
  """The default command on the files (with `extra` flags), in this process; (its record, its result)."""
  argv = ["rank4class-train", f"--train_files={files['few']}", f"--test_files={files['test']}",
          f"--model_dir={model_dir}", "--verbose=0", *extra]
  if "classes" in files:
    argv.append(f"--class_texts={files['classes']}")
  train_main.FLAGS.unparse_flags()
  train_main.FLAGS(argv)
  config = train_main.train_flags.config_from_flags(train_main.FLAGS)
  cpu, wall = time.process_time(), time.perf_counter()
  result = train_lib.train(config, overwrite=True)
  record = {"accuracy": result.test_report["metrics"]["accuracy"], "seconds": time.perf_counter() - wall,
            "cpu_seconds": time.process_time() - cpu,
            "chosen": (result.choice or {}).get("chosen"), "head": (result.choice or {}).get("head")}
  return record, result


def nearest_class_text(files: dict[str, str], config: data_lib.DataConfig) -> dict:
  """Accuracy of the class whose text (or name) is nearest to each test row's MiniLM embedding."""
  started = time.perf_counter()
  encoder = data_lib.frozen_text_encoder(config, data_lib.text_handles(config))
  with open(files["test"], newline="", encoding="utf-8") as f:
    test = list(csv.DictReader(f))
  if "classes" in files:
    with open(files["classes"], newline="", encoding="utf-8") as f:
      classes = [(r["class"], r["text"]) for r in csv.DictReader(f)]
  else:
    with open(files["few"], newline="", encoding="utf-8") as f:
      classes = [(c, c) for c in sorted({r["label"] for r in csv.DictReader(f)})]
  vectors = [text_embeddings.embed_texts(texts, encoder, config.embedding_cache_dir)
             for texts in ([t for _, t in classes], [r["text"] for r in test])]
  unit = [v / np.linalg.norm(v, axis=1, keepdims=True) for v in vectors]
  predicted = np.argmax(unit[1] @ unit[0].T, axis=1)
  accuracy = float(np.mean([classes[p][0] == r["label"] for p, r in zip(predicted, test, strict=True)]))
  return {"accuracy": accuracy, "seconds": time.perf_counter() - started}


def run_setfit(python: str, files: dict[str, str], folder: str, seed: int) -> dict:
  """SetFit in its own process (the bench-only environment); its wall and CPU seconds."""
  out = os.path.join(folder, "setfit.json")
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  started = time.perf_counter()
  subprocess.run([python, WORKER, files["few"], files["test"], out, f"--seed={seed}"], check=True,
                 stdout=subprocess.DEVNULL, stderr=open(os.path.join(folder, "setfit.log"), "w"))
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  with open(out, encoding="utf-8") as f:
    record = json.load(f)
  record.update(seconds=time.perf_counter() - started,
                cpu_seconds=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
  return record


def _done(path: str) -> set[tuple]:
  if not os.path.exists(path):
    return set()
  with open(path, encoding="utf-8") as f:
    return {(r["set"], r["k"], r["seed"], r["column"]) for r in map(json.loads, f)}


def _append(path: str, record: dict) -> None:
  with open(path, "a", encoding="utf-8") as f:
    f.write(json.dumps(record) + "\n")
  print(json.dumps(record), flush=True)


def _setfit_grid(spec: str) -> dict[int, set[int]]:
  """"8:0,1,2;64:0" -> {8: {0, 1, 2}, 64: {0}}."""
  grid = {}
  for part in filter(None, spec.split(";")):
    k, seeds = part.split(":")
    grid[int(k)] = {int(s) for s in seeds.split(",") if s}
  return grid


def run_cell(args: argparse.Namespace, name: str, data: tuple, k: int, seed: int, done: set[tuple],
             log: str) -> None:
  """Every column of one set x k x seed that `log` does not hold yet."""
  folder = os.path.join(args.output, name, f"k{k}_seed{seed}")
  files = write_files(folder, data, k, seed, args.test_rows)
  base = {"set": name, "k": k, "seed": seed, "load": os.getloadavg()[0]}
  if (name, k, seed, "default") not in done:
    record, result = run_default(files, os.path.join(folder, "run"))
    _append(log, {**base, "column": "default", **record})
    for column, row_name in BASELINE_COLUMNS.items():
      row = next(r for r in result.baselines["rows"] if r["name"] == row_name)
      _append(log, {**base, "column": column, "accuracy": row["metrics"]["accuracy"],
                    "seconds": row["seconds"]})
    _append(log, {**base, "column": "nearest_class_text",
                  **nearest_class_text(files, data_lib.DataConfig(train_files=files["few"]))})
  if args.few_shot_off and (name, k, seed, "few_shot_off") not in done:  # The run before the few-shot path.
    record, _ = run_default(files, os.path.join(folder, "run_few_shot_off"), ("--few_shot=off",))
    _append(log, {**base, "column": "few_shot_off", **record})
  if (args.setfit_python and seed in _setfit_grid(args.setfit_grid).get(k, set())
      and (name, k, seed, "setfit") not in done and name in args.setfit_sets.split(",")):
    _append(log, {**base, "column": "setfit", **run_setfit(args.setfit_python, files, folder, seed)})


def verdict(records: list[dict], name: str, k: int) -> str:
  """Whether the default's accuracy is at least every other column's, or within one standard deviation of the
  per-seed paired differences (default - column, on the seeds both ran) where it is not; the columns it
  trails beyond that, named with the mean difference and its deviation."""
  def by_seed(column: str) -> dict[int, float]:
    return {r["seed"]: 100 * r["accuracy"] for r in records
            if (r["set"], r["k"], r["column"]) == (name, k, column)}

  default, trails = by_seed("default"), []
  for column in COLUMNS[1:]:
    other = by_seed(column)
    seeds = sorted(set(default) & set(other))
    if not seeds:
      continue
    d = np.array([default[s] - other[s] for s in seeds])
    spread = d.std(ddof=1) if len(d) > 1 else 0.0
    if d.mean() < 0 and d.mean() < -spread:
      trails.append(f"{column} {d.mean():+.1f} ± {spread:.1f}")
  return "yes" if not trails else "no: " + ", ".join(trails)


def table(log: str) -> str:
  """Accuracy x100 mean +- std over the seeds (n seeds) and seconds per run, per set x k x column, and
  `verdict`."""
  with open(log, encoding="utf-8") as f:
    records = [json.loads(line) for line in f]
  lines = ["| set | k | " + " | ".join(COLUMNS) + " | default >= every column (or within 1 sd) |",
           "|---|---|" + "---|" * (len(COLUMNS) + 1)]
  cells = sorted({(r["set"], r["k"]) for r in records})
  for name, k in cells:
    row = []
    for column in COLUMNS:
      runs = [r for r in records if (r["set"], r["k"], r["column"]) == (name, k, column)]
      if not runs:
        row.append("not run")
        continue
      accuracy = 100 * np.array([r["accuracy"] for r in runs])
      seconds = np.mean([r["seconds"] for r in runs])
      row.append(f"{accuracy.mean():.1f} ± {accuracy.std(ddof=1) if len(runs) > 1 else 0:.1f} "
                 f"(n={len(runs)}, {seconds:.1f} s)")
    lines.append(f"| {name} | {k} | " + " | ".join(row) + f" | {verdict(records, name, k)} |")
  return "\n".join(lines)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--output", default="out/few_shot")
  parser.add_argument("--sets", default="reuters_r8,20newsgroups_described,election_tweets,"
                      "drug_review_sentiment,wordnet_10")
  parser.add_argument("--ks", default="8,64")
  parser.add_argument("--seeds", default="0,1,2,3,4")
  parser.add_argument("--test_rows", type=int, default=500)
  parser.add_argument("--setfit_python", default=None)
  parser.add_argument("--setfit_grid", default="8:0,1,2,3,4;64:0,1,2,3,4")
  parser.add_argument("--setfit_sets", default="election_tweets,drug_review_sentiment,wordnet_10,reuters_r8")
  parser.add_argument("--few_shot_off", action="store_true", help="Also run the command with --few_shot=off.")
  parser.add_argument("--table_only", action="store_true")
  args = parser.parse_args()
  os.makedirs(args.output, exist_ok=True)
  log = os.path.join(args.output, "runs.jsonl")
  if not args.table_only:
    for name in args.sets.split(","):
      data = _set(name)
      for k in map(int, args.ks.split(",")):
        for seed in map(int, args.seeds.split(",")):
          run_cell(args, name, data, k, seed, _done(log), log)
  print(table(log))


if __name__ == "__main__":
  sys.exit(main())
