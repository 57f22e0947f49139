"""Exact ranking over all C classes in bounded memory: the classes are scored in chunks, and each instance keeps
only its running top K and the count of classes scored above its true class.

For one true class per instance, that count is the true class's 0-based rank r over all C classes, which gives
the paper's metrics exactly: top-K error = [r >= K], NDCG@K = 1 / log2(r + 2) when r < K (else 0; the ideal DCG
is 1), MRR = 1 / (r + 1), accuracy = [r = 0]. (TF-Ranking's metrics need the whole `[batch, C]` score matrix and
sort it: at C = 100,000 that is what this module avoids; `tests/rank4class/full_class_evaluation_test.py`
checks the numbers against them on small C.) Ties count for the true class: only strictly higher scores
push it down.

Memory per batch: the `[batch, chunk]` scores (and for MLP interactions `[batch, chunk, width]` activations) of
one chunk at a time plus `[batch, K]`, instead of `[batch, C]`: the bound is set by `chunk_size`, not by C.
"""

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class import model as model_lib
from rank4class import ranking_math
from rank4class_data import progress_line

DEFAULT_CHUNK_SIZE = model_lib.DEFAULT_CHUNK_SIZE
# From this many classes on, validation, test reports and `rank4class-evaluate` rank in chunks: no `[batch, C]`
# score matrices, no C x C confusion matrix (1.8 GB at 15,000 classes).
CHUNKED_CLASSES = 2048


def chunked_top_k(model: model_lib.Rank4ClassModel, inputs, k: int, chunk_size: int = DEFAULT_CHUNK_SIZE,
                  class_ids: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor | None]:
  """The top `k` classes of each instance over all classes, scored `chunk_size` classes at a time.

  Args:
    model: A built Rank4Class model.
    inputs: A batch of raw instance inputs.
    k: Classes to keep, <= num_classes.
    chunk_size: Classes scored at once (the memory bound).
    class_ids: Optional true class ids `[batch]`: then also the true class's 0-based rank over all classes.

  Returns:
    (class ids int32 `[batch, k]`, float32 scores `[batch, k]`, best first; ranks int32 `[batch]` or None).
  """
  return model.encoded_top_k(model.instance_encoder(inputs, training=False), k, chunk_size, class_ids)


def rank_metrics(ranks: np.ndarray, ks: tuple[int, ...] = (1, 5)) -> dict[str, float]:
  """The paper's metrics from 0-based ranks of the one true class: top_K_error, ndcg_K, mrr, accuracy."""
  ranks = np.asarray(ranks, np.float64)
  metrics = {f"top_{k}_error": float(np.mean(ranks >= k)) for k in ks}
  metrics.update({f"ndcg_{k}": float(np.mean(np.where(ranks < k, 1.0 / np.log2(ranks + 2.0), 0.0))) for k in ks})
  metrics.update(mrr=float(np.mean(1.0 / (ranks + 1.0))), accuracy=float(np.mean(ranks == 0)))
  return metrics


def rank_function(model: model_lib.Rank4ClassModel, ks: tuple[int, ...] = (1, 5),
                  chunk_size: int = DEFAULT_CHUNK_SIZE) -> Callable[[Any, Any], tf.Tensor]:
  """A `tf.function` `(inputs, class ids)` -> each instance's 0-based rank of its true class over all classes
  (int32 `[batch]`); ids outside [0, num_classes) raise, never masked."""
  k = min(max(ks), model.num_classes)

  @tf.function
  def ranks(inputs, class_ids):
    class_ids = ranking_math.validate_class_ids(class_ids, model.num_classes)
    return chunked_top_k(model, inputs, k, chunk_size, class_ids)[2]

  return ranks


def rank_report(ranks: np.ndarray, labels: np.ndarray, class_names: list[str],
                ks: tuple[int, ...] = (1, 5)) -> dict[str, Any]:
  """{"n", "metrics" (`rank_metrics`), "per_class_recall" (top-1; None for a class without instances),
  "class_counts"}: `evaluators.ClassificationEvaluator`'s report without its C x C confusion matrix."""
  counts = np.bincount(labels, minlength=len(class_names))
  correct = np.bincount(labels, weights=(ranks == 0).astype(np.float64), minlength=len(class_names))
  return {"n": int(len(ranks)), "metrics": rank_metrics(ranks, ks), **per_class_report(class_names, correct, counts)}


def per_class_report(class_names: list[str], correct: np.ndarray, counts: np.ndarray) -> dict[str, Any]:
  """{"per_class_recall": top-1 correct / instances per class (None for a class without instances),
  "class_counts": instances per class}, keyed by class name."""
  return {"per_class_recall": {name: (float(correct[i] / counts[i]) if counts[i] else None)
                               for i, name in enumerate(class_names)},
          "class_counts": {name: int(c) for name, c in zip(class_names, counts, strict=True)}}


def evaluate_full_classes(model: model_lib.Rank4ClassModel, dataset: tf.data.Dataset, ks: tuple[int, ...] = (1, 5),
                          chunk_size: int = DEFAULT_CHUNK_SIZE, progress: bool = False) -> dict[str, Any]:
  """Exact top-K error, NDCG@K, MRR, accuracy and per-class recall over all classes of `(inputs, class ids)`
  batches, in one pass; with `progress`, a long pass shows a line on stderr.

  Returns:
    `rank_report`'s report plus "chunk_size" and "timing": {"seconds", "instances_per_second"}.
  """
  report = evaluate_ranks(rank_function(model, ks, chunk_size), dataset, model.class_names, ks, progress)
  report["chunk_size"] = chunk_size
  return report


def evaluate_ranks(ranks_of: Callable[[Any, Any], Any], batches, class_names: list[str],
                   ks: tuple[int, ...] = (1, 5), progress: bool = False) -> dict[str, Any]:
  """`rank_report` of the ranks `ranks_of(inputs, class ids)` gives for each `(inputs, class ids)` batch (0-based
  ranks of the true class, infinity for a class out of reach), with "timing": {"seconds",
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
