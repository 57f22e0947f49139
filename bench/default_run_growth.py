"""How the default `rank4class-train` run grows with its training rows, apart from embedding: the binary as a
process (one device) and the same run under MirroredStrategy over 2 logical CPU devices, beside TF-IDF
1-2-grams + LinearSVC (or LinearSVC on the pixels) fitted on as many rows of the same set; peak memory; the
fitted exponent of time in rows.

  python bench/default_run_growth.py --dataset=20newsgroups --rows=2000,5000,10000 [--replicas=1,2]
  python bench/default_run_growth.py --dataset=fashion_mnist --rows=2000,10000,50000

Each run is a fresh process with a fresh model folder and no fitted model kept anywhere (the default run keeps
none); the frozen embeddings come from the embedding cache, so embed the set once first (the first size
does), and the time reported is the run's wall time less its embedding phase. Prints a Markdown table and the
least-squares slope of log(time) on log(rows).
"""

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import rank4class_data  # noqa: F401  The stack check, before TensorFlow.
from rank4class_cli.binaries import train_main

import tensorflow as tf  # noqa: E402  isort: skip


def _binary(name: str) -> str:
  return os.path.join(os.path.dirname(sys.executable), name)


def _timed_run(command: list[str], what: str, model_dir: str) -> dict:
  """Runs `command` (a training run into `model_dir`) as a process: its wall time less its embedding phase,
  its phases (train_result.json), its peak RSS (wait4), what it kept and its test top-1 error. Its stderr goes
  to a file, so a long log cannot fill a pipe and stall it."""
  with tempfile.TemporaryFile() as log:
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
      log.seek(0)
      raise RuntimeError(f"{what} failed: {log.read().decode()[-2000:]}")
  with open(os.path.join(model_dir, "train_result.json")) as f:
    result = json.load(f)
  return {"seconds": wall - result["phase_seconds"].get("embedding", 0.0), "phases": result["phase_seconds"],
          "peak_mib": usage.ru_maxrss / 1024, "chosen": (result.get("choice") or {}).get("chosen"),
          "top_1_error": result["test_report"]["metrics"]["top_1_error"]}


def _one_device(dataset: str, rows: int, model_dir: str) -> dict:
  """The binary as a process."""
  return _timed_run([_binary("rank4class-train"), f"--dataset={dataset}", f"--max_train_examples={rows}",
                     f"--model_dir={model_dir}"], f"rank4class-train on {rows} rows", model_dir)


def _two_replicas(dataset: str, rows: int, model_dir: str) -> dict:
  """The same run in a process of its own under MirroredStrategy over 2 logical CPU devices."""
  return _timed_run([sys.executable, os.path.abspath(__file__), "--mirrored_run", f"--dataset={dataset}",
                     f"--rows={rows}", f"--model_dir={model_dir}"], f"the mirrored run on {rows} rows",
                    model_dir)


def _mirrored_run(dataset: str, rows: int, model_dir: str) -> None:
  """The binary's default config from its flags, trained under MirroredStrategy over /cpu:0 and /cpu:1."""
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  flags = train_main.FLAGS
  flags(["rank4class-train", f"--dataset={dataset}", f"--max_train_examples={rows}",
         f"--model_dir={model_dir}", "--verbose=0"])
  config = train_main.config_from_flags(flags)
  config = dataclasses.replace(config, run=dataclasses.replace(config.run, strategy="mirrored",
                                                               devices=["/cpu:0", "/cpu:1"]))
  train_main.train_lib.train(config)


def _linear_svc_seconds(dataset: str, rows: int) -> float:
  """TF-IDF 1-2-grams (sublinear, min_df=2) + LinearSVC on `rows` random training texts, or LinearSVC on as
  many images' pixels / 255, fitted in a process of its own (the data read before the clock starts)."""
  code = f"""
import time, numpy as np
from sklearn import svm
from sklearn.feature_extraction import text
from rank4class_data import datasets
if {dataset!r} in datasets.IMAGE_CLASSIFICATION_DATASETS:
  data = datasets.load_image_classification({dataset!r}, "train")
  x = data.images.reshape(len(data.images), -1)
else:
  data = datasets.load_text_classification({dataset!r}, "train")
  x = np.asarray(data.texts, dtype=object)
order = np.random.default_rng(0).permutation(len(data.labels))[:{rows}]
x, y = x[order], data.labels[order]
start = time.perf_counter()
if x.dtype == object:
  x = text.TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2).fit_transform(list(x))
else:
  x = x / 255.0
svm.LinearSVC().fit(x, y)
print(time.perf_counter() - start)
"""
  return float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                              text=True).stdout.split()[-1])


def _slope(rows: list[int], seconds: list[float]) -> float:
  return float(np.polyfit(np.log(rows), np.log(seconds), 1)[0]) if len(rows) > 1 else float("nan")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--dataset", default="20newsgroups")
  parser.add_argument("--rows", default="2000,5000,10000")
  parser.add_argument("--replicas", default="1,2")
  parser.add_argument("--mirrored_run", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--model_dir", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.mirrored_run:
    _mirrored_run(args.dataset, int(args.rows), args.model_dir)
    return
  sizes = [int(r) for r in args.rows.split(",")]
  replicas = [int(r) for r in args.replicas.split(",")]
  table = {}
  with tempfile.TemporaryDirectory() as root:
    for rows in sizes:
      for count in replicas:
        run = _one_device if count == 1 else _two_replicas
        table[rows, count] = run(args.dataset, rows, os.path.join(root, f"{rows}-{count}"))
        print(f"{rows} rows, {count} replica(s): {json.dumps(table[rows, count])}", file=sys.stderr,
              flush=True)
      table[rows, "svc"] = _linear_svc_seconds(args.dataset, rows)
  heads = [f"{c} replica(s): s apart from embedding (peak MiB; chosen; top-1 error)" for c in replicas]
  print(f"| rows | {' | '.join(heads)} | LinearSVC s |")
  print("|---:|" + "---|" * len(replicas) + "---:|")
  for rows in sizes:
    cells = [f"{table[rows, c]['seconds']:.1f} ({table[rows, c]['peak_mib']:,.0f}; "
             f"{table[rows, c]['chosen']}; {100 * table[rows, c]['top_1_error']:.2f})" for c in replicas]
    print(f"| {rows:,} | " + " | ".join(cells) + f" | {table[rows, 'svc']:.1f} |")
  for count in replicas:
    print(f"exponent, {count} replica(s): {_slope(sizes, [table[r, count]['seconds'] for r in sizes]):.2f}")
  print(f"exponent, LinearSVC: {_slope(sizes, [table[r, 'svc'] for r in sizes]):.2f}")


if __name__ == "__main__":
  main()
