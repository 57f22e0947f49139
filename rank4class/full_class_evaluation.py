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
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class import model as model_lib

DEFAULT_CHUNK_SIZE = model_lib.DEFAULT_CHUNK_SIZE


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


def evaluate_full_classes(model: model_lib.Rank4ClassModel, dataset: tf.data.Dataset, ks: tuple[int, ...] = (1, 5),
                          chunk_size: int = DEFAULT_CHUNK_SIZE) -> dict[str, Any]:
  """Exact top-K error, NDCG@K, MRR and accuracy over all classes of `(inputs, class ids)` batches.

  Returns:
    {"metrics": {...}, "n": instances, "timing": {"seconds", "instances_per_second"}, "chunk_size"}.
  """
  k = min(max(ks), model.num_classes)
  step = tf.function(lambda x, y: chunked_top_k(model, x, k, chunk_size, tf.reshape(y, [-1]))[2])
  ranks, start = [], time.perf_counter()
  for inputs, labels in dataset:
    ranks.append(step(inputs, labels).numpy())
  seconds = time.perf_counter() - start
  ranks = np.concatenate(ranks) if ranks else np.zeros([0])
  return {"metrics": rank_metrics(ranks, ks), "n": int(len(ranks)), "chunk_size": chunk_size,
          "timing": {"seconds": seconds, "instances_per_second": len(ranks) / max(seconds, 1e-9)}}
