"""Side-by-side benchmark of the reference stack (TF 2.15) and the current stack (TF 2.21 + tf-keras).

The driver runs each measurement as a worker subprocess under each stack's Python, `--trials` times,
alternating which stack goes first (reference then current, then current then reference) so machine drift
hits both alike, keeps each stack's best trial (highest rate, lowest seconds), and prints both stacks'
summaries, the load average before and after, and a Markdown table with the ratio current/reference (above 1
is faster for rates, slower for seconds).

  .venv-current/bin/python bench/stack_comparison.py --trials=3 --output=/tmp/stacks.md
  .venv-current/bin/python bench/stack_comparison.py --quick --trials=1 --measurements=train,export

Rows (warm-up, i.e. imports and tracing, excluded unless said otherwise):
  convert: rows/s of `rank4class_data.conversion.convert` turning Reuters R8 train (.tab) into a TFRecord
    (after a warm-up conversion).
  train: Rank4Class (MLP 256 + one-hot classes + dot, TF-Ranking softmax loss, Adam) examples/s of
    `model.fit` on 384-d float inputs, 8 learnable classes, batch 64, steps_per_execution=1.
  evaluate: instances/s of `rank4class.evaluation.evaluate` over 20,000 384-d records at batch 4096 (as
    bench/evaluate_throughput.py; writing the records is not timed).
  minilm_forward / minilm_train: examples/s of the converted all-MiniLM-L6-v2 `TextEncoder` at batch 32 and
    64 tokens: frozen forward pass, and a training step of the encoder + a Dense head with Keras Adam.
  export: seconds to export a fresh small Rank4Class model with `serving.export_saved_model` (its tracing
    included) and to load it back with `tf.saved_model.load`, after one untimed export and load.

A worker alone: `python bench/stack_comparison.py --worker=train --quick` prints one JSON line.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TypedDict

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEASUREMENTS = ("convert", "train", "evaluate", "minilm_forward", "minilm_train", "export")
STACK_NAMES = ("reference", "current")


class Row(TypedDict):
  """One table row as a worker measured it: "s" rows are better lower, rate rows higher."""

  name: str
  unit: str
  value: float
  higher_is_better: bool


def _row(name: str, unit: str, value: float) -> Row:
  return Row(name=name, unit=unit, value=value, higher_is_better=unit != "s")


# Workers: `run_worker` imports the toolkit before any of them imports TensorFlow, which on the current stack
# sets TF_USE_LEGACY_KERAS=1 before anything resolves tf.keras. bench/ is sys.path[0] when this file runs, so
# the sibling benchmarks' helpers import.


def _convert(quick: bool) -> list[Row]:
  from rank4class_data import datasets
  from rank4class_data.conversion import convert

  source = datasets.text_classification_path("reuters_r8", "train")
  with tempfile.TemporaryDirectory() as folder:
    if quick:  # The three header lines and 200 rows.
      with open(source, encoding="utf-8", newline="\n") as f:
        lines = [line for _, line in zip(range(203), f, strict=False)]
      source = os.path.join(folder, "r8-head.tab")
      with open(source, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(lines)
    convert.convert_to_tfrecord(convert.ConvertConfig(source, os.path.join(folder, "warm-up.tfrecord")))
    start = time.perf_counter()
    summary = convert.convert_to_tfrecord(convert.ConvertConfig(source, os.path.join(folder, "r8.tfrecord")))
    seconds = time.perf_counter() - start
  return [_row("convert R8 train .tab -> TFRecord", "rows/s", summary.rows / seconds)]


def _train(quick: bool) -> list[Row]:
  import numpy as np

  from rank4class.modeling import class_encoders, encoders, interactions
  from rank4class.modeling import model as model_lib
  from rank4class_engine.optimization import losses

  # isort: split
  import tensorflow as tf  # After the toolkit, as everywhere (run_worker imported it already).

  dim, num_classes, batch_size = 384, 8, 64
  warm_up_steps, steps = (2, 10) if quick else (20, 300)
  rng = np.random.default_rng(0)
  x = rng.normal(size=[batch_size * 16, dim]).astype(np.float32)
  y = np.argmax(x @ rng.normal(size=[dim, num_classes]), axis=1).astype(np.int64)  # Learnable labels.
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch_size, drop_remainder=True)
  tf.keras.utils.set_random_seed(0)
  model = model_lib.Rank4ClassModel(
    encoders.get("mlp", hidden_units=(256,)),
    class_encoders.get("one_hot", num_classes=num_classes),
    interactions.get("dot"),
  )
  model.compile(tf.keras.optimizers.Adam(1e-3), losses.get("softmax"), steps_per_execution=1)
  model.fit(dataset.prefetch(4), steps_per_epoch=warm_up_steps, epochs=1, verbose=0)
  start = time.perf_counter()
  model.fit(dataset.prefetch(4), steps_per_epoch=steps, epochs=1, verbose=0)
  rate = steps * batch_size / (time.perf_counter() - start)
  return [_row("train Rank4Class MLP+dot, 384-d, 8 classes, batch 64", "examples/s", rate)]


def _evaluate(quick: bool) -> list[Row]:
  import evaluate_throughput

  from rank4class.evaluation import evaluate

  num_records, batch_size = (2_000, 512) if quick else (20_000, 4096)
  with tempfile.TemporaryDirectory() as root:
    pattern, _ = evaluate_throughput._write_records(root, num_records, num_files=4)
    export_dir = evaluate_throughput._export(root, "dot", width=128)
    config = evaluate.EvaluateConfig(
      model_path=export_dir, data_files=pattern, batch_size=batch_size, report_path=""
    )
    evaluate.evaluate(config)  # Loads the model and traces.
    report = evaluate.evaluate(config)
  if report["n"] != num_records:
    raise ValueError(f"Evaluated {report['n']} of {num_records} records.")
  name = f"evaluate {num_records:,} records, batch {batch_size}"
  return [_row(name, "instances/s", report["timing"]["instances_per_second"])]


def _minilm(quick: bool, train: bool) -> list[Row]:
  import numpy as np
  import text_encoder_throughput

  from rank4class_encoders import text_embeddings, text_encoder

  # isort: split
  import tensorflow as tf  # After the toolkit, as everywhere (run_worker imported it already).

  batch_size, seq_length, min_seconds = (4, 16, 0.0) if quick else (32, 64, 5.0)
  handles = text_embeddings.minilm_handles()
  texts = tf.constant(text_encoder_throughput.long_texts(batch_size))
  encoder = text_encoder.TextEncoder(
    handles.preprocess, handles.encoder, trainable=train, max_seq_length=seq_length
  )
  if train:
    head, optimizer = tf.keras.layers.Dense(8), tf.keras.optimizers.Adam(1e-5)
    labels = tf.constant(np.arange(batch_size) % 8)

    @tf.function
    def train_step() -> tf.Tensor:
      with tf.GradientTape() as tape:
        logits = head(encoder(texts, training=True))
        loss = tf.reduce_mean(
          tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        )
      variables = encoder.trainable_variables + head.trainable_variables
      optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
      return loss

    step, name = train_step, "MiniLM-L6 training step + Dense head, Adam"
  else:
    step, name = tf.function(lambda: encoder(texts, training=False)), "MiniLM-L6 forward (frozen)"
  np.asarray(step())  # Traces.
  seconds_per_step, _ = text_encoder_throughput.timed(step, min_seconds)
  return [
    _row(f"{name}, batch {batch_size}, {seq_length} tokens", "examples/s", batch_size / seconds_per_step)
  ]


def _export(quick: bool) -> list[Row]:
  del quick  # The model is small already.
  import evaluate_throughput
  import tensorflow as tf

  with tempfile.TemporaryDirectory() as root:
    tf.saved_model.load(evaluate_throughput._export(os.path.join(root, "warm-up"), "dot", width=128))
    start = time.perf_counter()
    export_dir = evaluate_throughput._export(root, "dot", width=128)
    export_seconds = time.perf_counter() - start
    start = time.perf_counter()
    tf.saved_model.load(export_dir)
    load_seconds = time.perf_counter() - start
  return [
    _row("export_saved_model (MLP 128 + dot, 384-d)", "s", export_seconds),
    _row("tf.saved_model.load of that export", "s", load_seconds),
  ]


def _stack(quick: bool) -> str:
  del quick
  from rank4class_data import stack

  return stack.check_tensorflow_stack().summary()


WORKERS: dict[str, Callable[[bool], object]] = {
  "convert": _convert,
  "train": _train,
  "evaluate": _evaluate,
  "minilm_forward": lambda quick: _minilm(quick, train=False),
  "minilm_train": lambda quick: _minilm(quick, train=True),
  "export": _export,
  "stack": _stack,
}


def run_worker(measurement: str, quick: bool) -> None:
  import rank4class  # noqa: F401  (before TensorFlow: see the note above the workers)

  print(json.dumps({"measurement": measurement, "result": WORKERS[measurement](quick)}), flush=True)


# Driver.


def _run_in(python: str, measurement: str, quick: bool) -> object:
  """Runs one worker under `python`; returns its result, or raises RuntimeError with its stderr's tail."""
  command = [python, os.path.abspath(__file__), f"--worker={measurement}", *(["--quick"] if quick else [])]
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  process = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False)
  for line in reversed(process.stdout.splitlines()):
    if process.returncode == 0 and line.startswith("{"):
      return json.loads(line)["result"]
  tail = "\n".join((process.stderr or process.stdout).strip().splitlines()[-15:])
  raise RuntimeError(f"{python} --worker={measurement} exited with {process.returncode}:\n{tail}")


def _format(value: float | None, unit: str) -> str:
  if value is None:
    return "failed"
  return f"{value:.2f}" if unit == "s" else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def compare(pythons: dict[str, str], measurements: list[str], trials: int, quick: bool) -> tuple[str, bool]:
  """Runs the workers under both stacks; returns the Markdown report and whether every worker succeeded."""
  load_before = os.getloadavg()
  summaries = {}
  for name, python in pythons.items():
    try:
      summaries[name] = _run_in(python, "stack", quick)
    except RuntimeError as error:
      summaries[name] = f"{name} stack: failed: {str(error).splitlines()[-1]}"
  # Measurement -> row name -> {"unit", "higher_is_better", and per stack its best value}.
  best: dict[str, dict[str, dict]] = {measurement: {} for measurement in measurements}
  failures = []
  for measurement in measurements:
    for trial in range(trials):
      for name in STACK_NAMES if trial % 2 == 0 else STACK_NAMES[::-1]:
        try:
          rows = _run_in(pythons[name], measurement, quick)
        except RuntimeError as error:
          print(f"failed: {measurement}, trial {trial + 1}, {name}: {error}", file=sys.stderr, flush=True)
          failures.append(f"{measurement} on the {name} stack: {str(error).splitlines()[-1]}")
          continue
        for row in rows:
          entry = best[measurement].setdefault(
            row["name"], {key: row[key] for key in ("unit", "higher_is_better")}
          )
          pick = max if row["higher_is_better"] else min
          entry[name] = pick(entry.get(name, row["value"]), row["value"])
        print(f"done: {measurement}, trial {trial + 1}, {name}", file=sys.stderr, flush=True)
  load_after = os.getloadavg()

  lines = [f"- {summaries[name]}" for name in STACK_NAMES]
  lines += [
    f"- load average before {'/'.join(f'{x:.2f}' for x in load_before)}, after "
    f"{'/'.join(f'{x:.2f}' for x in load_after)}; {os.cpu_count()} CPUs; best of {trials} trial(s)"
    f"{' at --quick sizes' if quick else ''}",
    "",
    "| measurement | unit | reference | current | current/reference |",
    "|---|---|---:|---:|---:|",
  ]
  for measurement, rows in best.items():
    for row_name, entry in (rows or {measurement: {"unit": "-"}}).items():
      reference, current = entry.get("reference"), entry.get("current")
      ratio = f"{current / reference:.2f}" if reference and current is not None else "-"
      lines.append(
        f"| {row_name} | {entry['unit']} | {_format(reference, entry['unit'])} | "
        f"{_format(current, entry['unit'])} | {ratio} |"
      )
  if failures:
    lines += ["", "Failures:", *(f"- {failure}" for failure in dict.fromkeys(failures))]
  return "\n".join(lines), not failures


def _default_reference_python() -> str:
  for venv in (".venv-reference", ".venv"):
    path = os.path.join(REPO_ROOT, venv, "bin", "python")
    if os.path.exists(path):
      return path
  return os.path.join(REPO_ROOT, ".venv", "bin", "python")


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--worker", choices=sorted(WORKERS), help="Run one measurement here and print JSON.")
  parser.add_argument(
    "--measurements", default=",".join(MEASUREMENTS), help=f"Comma-separated, of {MEASUREMENTS}."
  )
  parser.add_argument(
    "--trials", type=int, default=3, help="Runs per stack and measurement; the best is kept."
  )
  parser.add_argument("--quick", action="store_true", help="Tiny sizes, for smoke tests.")
  parser.add_argument("--reference_python", default=_default_reference_python())
  parser.add_argument("--current_python", default=os.path.join(REPO_ROOT, ".venv-current", "bin", "python"))
  parser.add_argument("--output", default="", help="Also write the report (Markdown) to this file.")
  args = parser.parse_args(argv)
  if args.worker:
    run_worker(args.worker, args.quick)
    return 0
  measurements = [m for m in args.measurements.split(",") if m]
  unknown = sorted(set(measurements) - set(MEASUREMENTS))
  if unknown or args.trials < 1:
    parser.error(f"unknown measurements {unknown} (expected {MEASUREMENTS}) or --trials < 1")
  pythons = {"reference": args.reference_python, "current": args.current_python}
  missing = [python for python in pythons.values() if not os.path.isfile(python)]
  if missing:
    parser.error(f"no Python at {missing}; pass --reference_python / --current_python")
  report, succeeded = compare(pythons, measurements, args.trials, args.quick)
  print(report)
  if args.output:
    with open(args.output, "w", encoding="utf-8") as f:
      f.write(report + "\n")
  return 0 if succeeded else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
