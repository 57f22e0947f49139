"""A training binary as a user runs it (a process) against a bare Keras `fit` of the same model, side by side.

Run: python bench/cli_vs_bare_fit.py [--binary=rank4class-train|pairwise-train] [--steps=1000]
[--eval_every=100]
         [--repeats=2] [-- extra train flags]

rank4class-train: `rank4class-train --dataset=reuters_r8 --text_mode=frozen --max_train_examples=1500
--max_test_examples=300 --train_steps=1000 --eval_every=100` on MiniLM embeddings from the embedding cache,
with `--steps_per_execution` fixed so both sides run the same executions. pairwise-train: `pairwise-train
--dataset=drug_reviews --encoder=minilm --frozen_embeddings --train_steps=1000 --eval_every=100` (the margin
Transformer on cached MiniLM embeddings); the bare fit runs at the steps_per_execution the engine chose (read
from the binary's progress.jsonl). The first repetition fills the embedding cache when it is cold and is
dropped. Rows, each a fresh process (imports and tracing included, as a user pays them):
  binary              the console script, timed from outside: the whole process (import to export), and the
                      loop (the result file's seconds of the "Trained N steps in X s" line, unrounded:
                      tracing, steps, validations, checkpoints).
  bare fit            a fresh process that builds the same compiled model from the same flags, then
                      `model.fit` on the same training stream for the same steps and steps_per_execution: no
                      callbacks, no validation, no checkpoints; timed around `fit`.
  validated bare fit  (rank4class-train) the same, with Keras' own validation (`validation_data`: the
                      validation split in batches of max(batch, 256)) and a weights checkpoint
                      (`ModelCheckpoint`) every eval_every steps (Keras validates the loss; the binary
                      computes ranking metrics).
  ranking-validated   (rank4class-train) the validated bare fit of the model compiled as its docstring shows,
  bare fit            with TF-Ranking's metrics (`metrics.get_default_metrics`: top-K error, NDCG@K, MRR,
                      accuracy): the same validations as the binary's, as a user writes them in Keras, which
                      also computes them on the training batches.
  checkpointed bare   (pairwise-train) the bare fit with a weights checkpoint every eval_every steps; no
  fit                 Keras validation, which the pairwise training model has no test step for.
The ratios are an anchor's loop seconds / the variant's loop seconds (relative throughput: 1.0 = as fast as
that fit); the spread is the slowest repetition's loop over the fastest's. Each bare side's logs are checked:
a validated fit must log validation, a ranking-validated one the ranking metrics.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

_TRAINED = re.compile(r"Trained (\d+) steps in ([\d.]+) s")
_VALIDATED = "validated bare fit"
_RANKED = "ranking-validated bare fit"
_CHECKPOINTED = "checkpointed bare fit"
_BARE_PAIRWISE = """
import json, sys, time
mode = sys.argv[3]  # Read before sys.argv becomes the binary's: "plain" or "checkpointed".
sys.argv, steps_per_execution = ["pairwise-train"] + json.loads(sys.argv[1]), int(sys.argv[2])
import pairwise  # noqa: F401  (selects Keras 2 first)
import tensorflow as tf
from pairwise.margin import item_data, pairwise_train, runs
from rank4class_cli.binaries import pairwise_main
from rank4class_engine import distribute
pairwise_main.FLAGS(sys.argv)
run = pairwise_main.config_from_flags(pairwise_main.FLAGS)
config = runs.resolve_handles(run.pairwise, pairwise_main.FLAGS.encoder)
strategy = distribute.make_strategy(run.strategy)
splits = item_data.prepare_items(config.encoder, item_data.load_ranking_data(config.data))
tf.keras.utils.set_random_seed(config.train.seed)
ranker, model = pairwise_train.training_model(config, splits["train"], strategy)
model.steps_per_execution.assign(steps_per_execution)
stream = pairwise_train.training_dataset(splits["train"], config.train, config.train.train_steps)
fit = {"steps_per_epoch": config.train.train_steps, "epochs": 1}
if mode == "checkpointed":  # A weights checkpoint every eval_every steps. No Keras validation: TrainingModel
  # has no test step, and the validation pairs index another item table than the model's.
  every = config.train.eval_every
  fit = {"steps_per_epoch": every, "epochs": config.train.train_steps // every,
         "callbacks": [tf.keras.callbacks.ModelCheckpoint(config.train.model_dir + "/weights",
                                                          save_weights_only=True)]}
start = time.perf_counter()
history = model.fit(stream, verbose=0, **fit).history
print(json.dumps({"fit_seconds": time.perf_counter() - start, "logs": sorted(history)}))
"""  # noqa: E501
_BARE = """
import json, sys, time
mode = sys.argv[3]  # Read before sys.argv becomes the binary's: "plain", "validated" or "ranked".
sys.argv = ["rank4class-train"] + json.loads(sys.argv[1])
import rank4class  # noqa: F401  (selects Keras 2 first)
import tensorflow as tf
from rank4class.training import train as train_lib, training_data as data_lib
from rank4class_cli.binaries import train_main
from rank4class_engine import distribute
train_main.FLAGS(sys.argv)
config = train_main.config_from_flags(train_main.FLAGS)
run = config.run
tf.keras.utils.set_random_seed(run.seed)
data = data_lib.prepare_data(config.data)
model = train_lib.build_compiled_model(train_lib.resolve_model_config(config.model, config.data, data), data,
                                       distribute.make_strategy(run.strategy, run.devices), run,
                                       config.optimizer, run.train_steps)
model.steps_per_execution.assign(run.steps_per_execution)
dataset = data.train.make_dataset(run.batch_size, True, True, run.seed)
fit = {"steps_per_epoch": run.train_steps, "epochs": 1}
if mode == "ranked":  # The model's own docstring: TF-Ranking's metrics compiled in (train and validation).
  from rank4class.evaluation import metrics as metrics_lib
  model.compile(optimizer=model.optimizer, loss=model.loss, steps_per_execution=run.steps_per_execution,
                metrics=metrics_lib.get_default_metrics(tuple(config.model.metric_ks)))
if mode in ("validated", "ranked"):  # Keras' own: validation and a weights checkpoint every eval_every steps.
  fit = {"steps_per_epoch": run.eval_every, "epochs": run.train_steps // run.eval_every,
         "validation_data": data.validation.make_dataset(max(run.batch_size, 256), False, False, 0),
         "callbacks": [tf.keras.callbacks.ModelCheckpoint(config.model_dir + "/weights", save_weights_only=True)]}
start = time.perf_counter()
history = model.fit(dataset, verbose=0, **fit).history
print(json.dumps({"fit_seconds": time.perf_counter() - start, "logs": sorted(history)}))
"""  # noqa: E501


def _binary(program: str, flags: list[str], model_dir: str) -> dict[str, float]:
  start = time.perf_counter()
  result = subprocess.run([os.path.join(os.path.dirname(sys.executable), program), *flags,
                           f"--model_dir={model_dir}"], capture_output=True, text=True, check=False)
  process = time.perf_counter() - start
  if result.returncode != 0:
    raise SystemExit(f"{program} failed ({result.returncode}):\n{result.stderr[-2000:]}")
  match = _TRAINED.search(result.stdout + result.stderr)
  if match is None:
    raise SystemExit(f"no 'Trained N steps in X s' line in {program}'s output:\n{result.stdout[-2000:]}")
  result_file = "train_result.json" if program == "rank4class-train" else "metrics.json"
  phases = json.load(open(os.path.join(model_dir, result_file))).get("phase_seconds", {})
  with open(os.path.join(model_dir, "progress.jsonl")) as f:
    end = [json.loads(line) for line in f][-1]
  # The result file's loop seconds; the printed line rounds them to 0.1 s.
  return {"process": process, "loop": float(phases.get("loop", match.group(2))),
          "steps_per_execution": end["steps_per_execution"], **{f"phase {k}": v for k, v in phases.items()}}


def _bare(program: str, flags: list[str], model_dir: str, steps_per_execution: int,
          mode: str) -> dict[str, float]:
  start = time.perf_counter()
  script = _BARE if program == "rank4class-train" else _BARE_PAIRWISE
  os.makedirs(model_dir, exist_ok=True)
  result = subprocess.run([sys.executable, "-c", script, json.dumps([*flags, f"--model_dir={model_dir}"]),
                           str(steps_per_execution), mode], capture_output=True, text=True, check=False)
  process = time.perf_counter() - start
  if result.returncode != 0:
    raise SystemExit(f"bare fit failed ({result.returncode}):\n{result.stderr[-2000:]}")
  fitted = json.loads(result.stdout.strip().splitlines()[-1])
  # Each side computes what it says: a validated fit logs validation, a ranked one the ranking metrics.
  expected = {"validated": {"val_loss"}, "ranked": {"val_loss", "val_ndcg_1", "ndcg_1"}}.get(mode, set())
  validated = {name for name in fitted["logs"] if name.startswith("val_")}
  if not expected <= set(fitted["logs"]) or (not expected and validated):
    raise SystemExit(f"the {mode} bare fit logged {fitted['logs']}, expected {sorted(expected)}")
  return {"process": process, "loop": fitted["fit_seconds"]}


def main() -> None:
  parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
  parser.add_argument("--binary", default="rank4class-train", choices=("rank4class-train", "pairwise-train"))
  parser.add_argument("--steps", type=int, default=1000)
  parser.add_argument("--eval_every", type=int, default=100)
  parser.add_argument("--steps_per_execution", type=int, default=50)
  parser.add_argument("--repeats", type=int, default=2, help="measured repetitions after one warm-up pair")
  options, extra = parser.parse_known_args()
  if options.binary == "rank4class-train":
    # --text_mode=frozen: the MLP on cached embeddings that text mode "auto" trains; given to both sides, so
    # the bare fit builds that model rather than the TF-IDF-beside-embeddings candidate's inputs.
    flags = ["--dataset=reuters_r8", "--text_mode=frozen", "--max_train_examples=1500",
             "--max_test_examples=300",
             f"--train_steps={options.steps}", f"--eval_every={options.eval_every}",
             f"--steps_per_execution={options.steps_per_execution}", "--verbose=0", *extra]
  else:
    flags = ["--dataset=drug_reviews", "--encoder=minilm", "--frozen_embeddings", "--learning_rate=1e-3",
             f"--train_steps={options.steps}", f"--eval_every={options.eval_every}", *extra]
  print(f"load average before: {os.getloadavg()}", flush=True)
  anchors = {"bare fit": "plain", _VALIDATED: "validated", _RANKED: "ranked"}
  if options.binary == "pairwise-train":
    anchors = {"bare fit": "plain", _CHECKPOINTED: "checkpointed"}
  rows = {"binary": [], **{name: [] for name in anchors}}
  with tempfile.TemporaryDirectory() as root:
    for repeat in range(options.repeats + 1):
      binary = _binary(options.binary, flags, os.path.join(root, f"binary{repeat}"))
      steps_per_execution = binary.pop("steps_per_execution")
      measured = {"binary": binary}
      for name, mode in anchors.items():
        measured[name] = _bare(options.binary, flags, os.path.join(root, f"{mode}{repeat}"),
                               steps_per_execution, mode)
      print(f"repeat {repeat}{' (warm-up, dropped)' if repeat == 0 else ''}: binary loop "
            f"{binary['loop']:.2f} s (process {binary['process']:.2f} s), "
            + ", ".join(f"{name} {measured[name]['loop']:.2f} s" for name in anchors), flush=True)
      if repeat:
        for name, values in measured.items():
          rows[name].append(values)
  print(f"load average after: {os.getloadavg()}")
  _print_table(rows, list(anchors))


def _print_table(rows: dict[str, list[dict[str, float]]], anchors: list[str]) -> None:
  """One row per variant: its loop's median, fastest and spread, its process, and the anchors' median loops
  over its median loop (relative throughput)."""
  # The median is what a user meets on this machine; the fastest repetition is the work itself, without the
  # 2-3 s stalls some processes meet here (docs/BENCHMARKS.md).
  anchor_loops = {name: statistics.median(r["loop"] for r in rows[name]) for name in anchors}
  print("| variant | loop s (median) | loop s (fastest) | spread (slowest / fastest) | process s (median) | "
        + " | ".join(f"vs {name} (median)" for name in anchors) + " | phases (median) |\n"
        "|---|---:|---:|---:|---:|" + "---:|" * len(anchors) + "---|")
  for name, runs in rows.items():
    loops = [r["loop"] for r in runs]
    loop = statistics.median(loops)
    process = statistics.median(r["process"] for r in runs)
    phases = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k.startswith("phase ")}
    notes = ", ".join(f"{k[6:]} {v:.2f} s" for k, v in phases.items())
    ratios = " | ".join(f"{anchor_loops[anchor] / loop:.2f}x" for anchor in anchors)
    print(f"| {name} | {loop:.2f} | {min(loops):.2f} | {max(loops) / min(loops):.2f}x | {process:.2f} | "
          f"{ratios} | {notes} |")


if __name__ == "__main__":
  main()
