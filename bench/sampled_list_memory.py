"""Peak memory of `rank4class-train` on sampled class lists, per loss, with the validation loss on and "auto".

The goal: sampled-list training with any ranking loss stays <= 1.5x the peak resident memory of SoftmaxCE
at the same settings. The lists are sampled, but validation ranks all C classes; its loss over all classes
costs O(C^2) memory per instance for pairwise_logistic, approx_ndcg and gumbel_approx_ndcg (pairs, approximate
ranks), which `--validation_loss=auto` skips above `train.QUADRATIC_LOSS_CLASSES` classes and
`--validation_loss=on` computes (the behaviour before 2026-11-26, with TensorBoard on by default).

Data: a synthetic CSV of 8,000 rows, 16 numeric columns (noisy class centres) and --num_classes classes,
written to a temporary folder; each row of the table is the binary as a user runs it (its own process, peak
resident set from `os.wait4`, TensorFlow's ~0.8 GB included).

Run: python bench/sampled_list_memory.py [--num_classes=1100] [--train_steps=300]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

LOSSES = ("softmax", "pairwise_logistic", "approx_ndcg", "gumbel_approx_ndcg", "mse")
BINARY = os.path.join(os.path.dirname(sys.executable), "rank4class-train")


def write_csv(path: str, num_classes: int, rows: int = 8000, dim: int = 16) -> list[str]:
  rng = np.random.default_rng(0)
  centres = rng.normal(size=(num_classes, dim))
  labels = rng.integers(0, num_classes, size=rows)
  features = centres[labels] + 0.5 * rng.normal(size=(rows, dim))
  columns = [f"f{i}" for i in range(dim)]
  with open(path, "w", encoding="utf-8") as f:
    f.write(",".join([*columns, "label"]) + "\n")
    for x, y in zip(features, labels, strict=True):
      f.write(",".join(f"{v:.4f}" for v in x) + f",c{y:05d}\n")
  return columns


def peak_rss(command: list[str]) -> tuple[float, float, int]:
  """(peak resident MB, seconds, exit status) of one process."""
  start = time.perf_counter()
  process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  _, status, usage = os.wait4(process.pid, 0)
  return usage.ru_maxrss / 1024, time.perf_counter() - start, os.waitstatus_to_exitcode(status)


def main() -> None:
  parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
  parser.add_argument("--num_classes", type=int, default=1100)
  parser.add_argument("--train_steps", type=int, default=300)
  parser.add_argument("--losses", default=",".join(LOSSES))
  parser.add_argument("--validation_loss", default="auto,on", help="the settings to compare")
  options = parser.parse_args()
  print(f"load average before: {os.getloadavg()}", flush=True)
  rows = []
  with tempfile.TemporaryDirectory() as root:
    data = os.path.join(root, "train.csv")
    columns = write_csv(data, options.num_classes)
    for loss in options.losses.split(","):
      for setting in options.validation_loss.split(","):
        command = [BINARY, f"--train_files={data}", f"--feature_columns={','.join(columns)}",
                   f"--loss={loss}",
                   f"--validation_loss={setting}", "--class_sampler=uniform", "--batch_size=64",
                   f"--train_steps={options.train_steps}", "--eval_every=100", "--export=false",
                   f"--model_dir={root}/{loss}-{setting}"]
        megabytes, seconds, code = peak_rss(command)
        rows.append((loss, setting, megabytes, seconds, code))  # A failure (out of memory) is a result too.
        print(f"{loss} --validation_loss={setting}: {megabytes:,.0f} MB, {seconds:.1f} s, exit {code}",
              flush=True)
  print(f"load average after: {os.getloadavg()}")
  softmax = {setting: mb for loss, setting, mb, _, _ in rows if loss == "softmax"}
  print(f"\n{options.num_classes:,} classes, sampled lists (uniform, K=64), batch 64, "
        f"{options.train_steps} steps")
  print("| loss | --validation_loss | peak MB | vs softmax (same setting) | seconds | exit |\n"
        "|---|---|---:|---:|---:|---:|")
  for loss, setting, megabytes, seconds, code in rows:
    ratio = f"{megabytes / softmax[setting]:.2f}x" if setting in softmax else "-"
    print(f"| {loss} | {setting} | {megabytes:,.0f} | {ratio} | {seconds:.1f} | {code} |")


if __name__ == "__main__":
  main()
