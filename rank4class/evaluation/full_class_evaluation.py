"""Exact ranking over all C classes in bounded memory: the classes are scored in chunks, and each instance
keeps only its running top K and the count of classes scored above its true class.

For one true class per instance, that count is the true class's 0-based rank r over all C classes, which gives
the paper's metrics exactly: top-K error = [r >= K], NDCG@K = 1 / log2(r + 2) when r < K (else 0; the ideal
DCG is 1), MRR = 1 / (r + 1), accuracy = [r = 0]. (TF-Ranking's metrics need the whole `[batch, C]` score
matrix and sort it: at C = 100,000 that is what this module avoids;
`tests/rank4class/evaluation/full_class_evaluation_test.py` checks the numbers against them on small C.) Ties
count for the true class: only strictly higher scores push it down.

Memory per batch: the `[batch, chunk]` scores (and for MLP interactions `[batch, chunk, width]` activations)
of one chunk at a time plus `[batch, K]`, instead of `[batch, C]`: the bound is set by `chunk_size`, not by C.
"""

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class.inference import full_class_scoring
from rank4class.modeling import model as model_lib
from rank4class_data import progress_line


def rank_report(ranks: np.ndarray, labels: np.ndarray, class_names: list[str],
                ks: tuple[int, ...] = (1, 5)) -> dict[str, Any]:
  """{"n", "metrics" (`full_class_scoring.rank_metrics`), "per_class_recall" (top-1; None for a class without
  instances), "class_counts"}: `evaluators.ClassificationEvaluator`'s report without its C x C confusion
  matrix."""
  counts = np.bincount(labels, minlength=len(class_names))
  correct = np.bincount(labels, weights=(ranks == 0).astype(np.float64), minlength=len(class_names))
  return {"n": int(len(ranks)), "metrics": full_class_scoring.rank_metrics(ranks, ks),
          **per_class_report(class_names, correct, counts)}


def per_class_report(class_names: list[str], correct: np.ndarray, counts: np.ndarray) -> dict[str, Any]:
  """{"per_class_recall": top-1 correct / instances per class (None for a class without instances),
  "class_counts": instances per class}, keyed by class name."""
  return {"per_class_recall": {name: (float(correct[i] / counts[i]) if counts[i] else None)
                               for i, name in enumerate(class_names)},
          "class_counts": {name: int(c) for name, c in zip(class_names, counts, strict=True)}}


def evaluate_full_classes(model: model_lib.Rank4ClassModel, dataset: tf.data.Dataset,
                          ks: tuple[int, ...] = (1, 5),
                          chunk_size: int = full_class_scoring.DEFAULT_CHUNK_SIZE,
                          progress: bool = False) -> dict[str, Any]:
  """Exact top-K error, NDCG@K, MRR, accuracy and per-class recall over all classes of `(inputs, class ids)`
  batches, in one pass; with `progress`, a long pass shows a line on stderr.

  Returns:
    `rank_report`'s report plus "chunk_size" and "timing": {"seconds", "instances_per_second"}.
  """
  report = evaluate_ranks(full_class_scoring.rank_function(model, ks, chunk_size), dataset,
                          model.class_names, ks, progress)
  report["chunk_size"] = chunk_size
  return report


def evaluate_ranks(ranks_of: Callable[[Any, Any], Any], batches, class_names: list[str],
                   ks: tuple[int, ...] = (1, 5), progress: bool = False) -> dict[str, Any]:
  """`rank_report` of the ranks `ranks_of(inputs, class ids)` gives for each `(inputs, class ids)` batch
  (0-based ranks of the true class, infinity for a class out of reach), with "timing": {"seconds",
  "instances_per_second"}; with `progress`, a long pass shows a line on stderr."""
  line = progress_line.ProgressLine(progress_line.DEFAULT_EVERY_SECONDS) if progress else None
  ranks, labels, start = [], [], time.perf_counter()
  for inputs, class_ids in batches:
    ranks.append(np.asarray(ranks_of(inputs, class_ids), np.float64))
    labels.append(np.reshape(class_ids, [-1]).astype(np.int64))
    if line is not None and line.due():
      done = sum(len(r) for r in ranks)
      line.show(f"ranked {done:,} instances over {len(class_names):,} classes ({done / line.elapsed:,.0f} "
                "instances/s)")
  if line is not None:
    line.close()
  seconds = time.perf_counter() - start
  ranks = np.concatenate(ranks) if ranks else np.zeros([0], np.float64)
  labels = np.concatenate(labels) if labels else np.zeros([0], np.int64)
  report = rank_report(ranks, labels, class_names, ks)
  report["timing"] = {"seconds": seconds, "instances_per_second": len(ranks) / max(seconds, 1e-9)}
  return report
