"""Fixed costs of the toolkit's processes: start-up against TensorFlow's import alone, and a warm 2,000-row
run.

Run: python bench/process_fixed_costs.py [--repeats=3] [--dataset=election_tweets] [--rows=2000]
         [--programs=rank4class-train,pairwise-train] [--norun]

Every figure is a fresh process, timed from outside (wall seconds from start to exit, and its user + system
CPU seconds from the operating system), median of `--repeats` (min and max beside it). Rows:
  import tensorflow     `python -c "import tensorflow"`: the floor every binary pays.
  <console script>      the script's import-and-parse path: `<script> --process_fixed_costs_probe` imports the
                        binary (its package, TensorFlow, the stack check), parses its flags and exits with its
                        usage error (exit 2). "beyond TF" is its median minus TensorFlow's. (`--help` is
                        answered from stored texts without TensorFlow in ~0.05 s: not a start-up.)
  warm run              `rank4class-train --train_files=<CSV of the first --rows training rows of --dataset>`
                        with the defaults (baselines, calibration and export included), after one run that is
                        not counted and fills the row and embedding caches; its own timing lines (read, embed,
                        loop, export, each baseline) are shown as medians below the table.
The machine's load average (os.getloadavg) is printed before and after.
"""

import csv
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app, flags

_REPEATS = flags.DEFINE_integer("repeats", 3, "Processes per row; the median is reported.")
_DATASET = flags.DEFINE_string("dataset", "election_tweets", "Named text data set whose training rows the "
                               "warm run reads (its embeddings are cached once the set has been run).")
_ROWS = flags.DEFINE_integer("rows", 2000,
                             "Rows of the warm run's CSV (the first rows of the training split).")
_PROGRAMS = flags.DEFINE_list("programs", ["rank4class-train", "rank4class-evaluate", "rank4class-predict",
                                           "pairwise-train", "pairwise-ranksvm"],
                              "Console scripts whose start-up is timed.")
_RUN = flags.DEFINE_boolean("run", True, "Time the warm run (--norun: start-up rows only).")

_PHASES = {
    "read": re.compile(r"Read the data in ([\d.]+) s"),
    "embed": re.compile(r"Embedded [\d,]+ texts in ([\d.]+) s"),
    "loop": re.compile(r"Trained \d+ steps in ([\d.]+) s"),
    "export": re.compile(r"Exported the best model to \S+ in ([\d.]+) s"),
    "TF-IDF + LR": re.compile(r"TF-IDF \+ LR .* ([\d.]+) s$", re.M),
    "LR on the embeddings": re.compile(r"LR on the frozen embeddings .* ([\d.]+) s$", re.M),
}


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float, str, int]:
  """(wall s, user + system CPU s, output, exit status) of one process."""
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.perf_counter()
  result = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, check=False)
  wall = time.perf_counter() - start
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
  return wall, cpu, result.stdout + result.stderr, result.returncode


def _load() -> str:
  return "/".join(f"{x:.2f}" for x in os.getloadavg())


def _write_rows(path: str, env: dict[str, str]) -> None:
  """The first --rows training rows of --dataset as a CSV (text, label), written by a child process."""
  script = ("import csv, sys\n"
            "import rank4class_data\n"
            "from rank4class_data import datasets\n"
            "d = datasets.load_text_classification(sys.argv[1], 'train')\n"
            "with open(sys.argv[2], 'w', newline='', encoding='utf-8') as f:\n"
            "  w = csv.writer(f)\n"
            "  w.writerow(['text', 'label'])\n"
            "  for t, y in list(zip(d.texts, d.labels))[:int(sys.argv[3])]:\n"
            "    w.writerow([t, d.class_names[y]])\n")
  subprocess.run([sys.executable, "-c", script, _DATASET.value, path, str(_ROWS.value)], env=env, check=True,
                 capture_output=True)
  with open(path, encoding="utf-8") as f:
    rows = sum(1 for _ in csv.reader(f)) - 1
  if rows != _ROWS.value:
    raise SystemExit(f"{_DATASET.value} has {rows} training rows, fewer than --rows={_ROWS.value}.")


def _row(name: str, times: list[tuple[float, float]], floor: float | None) -> str:
  walls, cpus = [w for w, _ in times], [c for _, c in times]
  median = statistics.median(walls)
  beyond = f"{median - floor:.2f}" if floor is not None else "-"
  return (f"| {name} | {median:.2f} | {min(walls):.2f} | {max(walls):.2f} | {statistics.median(cpus):.2f} | "
          f"{beyond} |")


def main(argv: list[str]) -> None:
  del argv
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  scripts = os.path.dirname(sys.executable)
  print(f"{sys.executable}; {os.cpu_count()} CPUs; load average before {_load()}")
  lines = ["| process | wall s (median) | min | max | CPU s (median) | beyond TF import s |",
           "|---|---:|---:|---:|---:|---:|"]
  commands = [("import tensorflow", [sys.executable, "-c", "import tensorflow"])]
  commands += [(f"{p} (import, parse flags)", [os.path.join(scripts, p), "--process_fixed_costs_probe"])
               for p in _PROGRAMS.value]
  times = {name: [] for name, _ in commands}
  for _ in range(_REPEATS.value):  # Interleaved, so drifting load hits every row alike.
    for name, command in commands:
      wall, cpu, output, status = _timed(command, env)
      # A binary that parsed its flags refuses them with a usage error (exit 2), never a traceback.
      if name != "import tensorflow" and (status != 2 or "Traceback" in output):
        raise SystemExit(f"{name} did not reach flag parsing (exit {status}):\n{output[-2000:]}")
      times[name].append((wall, cpu))
  floor = statistics.median(w for w, _ in times["import tensorflow"])
  for name, _ in commands:
    lines.append(_row(name, times[name], None if name == "import tensorflow" else floor))
  if _RUN.value:
    folder = tempfile.mkdtemp(prefix="process_fixed_costs_")
    try:
      rows_file = os.path.join(folder, f"{_DATASET.value}_{_ROWS.value}.csv")
      _write_rows(rows_file, env)
      command = [os.path.join(scripts, "rank4class-train"), f"--train_files={rows_file}"]
      runs, phases = [], {name: [] for name in _PHASES}
      for repeat in range(_REPEATS.value + 1):  # The first run fills the caches and is not counted.
        model_dir = os.path.join(folder, "run")
        shutil.rmtree(model_dir, ignore_errors=True)
        wall, cpu, output, _ = _timed(command + [f"--model_dir={model_dir}"], env)
        if "Exported the best model" not in output:
          raise SystemExit(f"The warm run failed:\n{output[-3000:]}")
        if repeat:
          runs.append((wall, cpu))
          for name, pattern in _PHASES.items():
            match = pattern.search(output)
            if match:
              phases[name].append(float(match.group(1)))
      lines.append(_row(f"rank4class-train, {_ROWS.value:,} rows of {_DATASET.value}, warm", runs, None))
    finally:
      shutil.rmtree(folder, ignore_errors=True)
  print("\n".join(lines))
  if _RUN.value:
    print("warm run's own timings (median s): " + ", ".join(
        f"{name} {statistics.median(values):.2f}" for name, values in phases.items() if values))
  print(f"load average after {_load()}; {_REPEATS.value} process(es) per row")


if __name__ == "__main__":
  app.run(main)
