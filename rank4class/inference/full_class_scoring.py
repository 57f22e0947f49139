"""Exact ranking over all C classes in bounded memory: the classes are scored in chunks, and each instance
keeps only its running top K and the count of classes scored above its true class (see
`rank4class.evaluation.full_class_evaluation` for the metrics and memory bound); the scoring half, which the
served kinds, two-stage and zero-shot exports use.
"""

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class.modeling import model as model_lib
from rank4class.modeling import ranking_math
from rank4class_engine.statistics import ranking_metrics

DEFAULT_CHUNK_SIZE = model_lib.DEFAULT_CHUNK_SIZE
# From this many classes on, validation, test reports and `rank4class-evaluate` rank in chunks: no `[batch,
# C]` score matrices, no C x C confusion matrix (1.8 GB at 15,000 classes).
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
  """The paper's metrics from 0-based ranks of the one true class
  (`rank4class_engine.statistics.ranking_metrics`' definitions, meaned over instances): top_K_error, ndcg_K,
  mrr, accuracy."""
  metrics = {f"top_{k}_error": float(np.mean(ranking_metrics.top_k_error_of_ranks(ranks, k))) for k in ks}
  metrics.update({f"ndcg_{k}": float(np.mean(ranking_metrics.ndcg_of_ranks(ranks, k))) for k in ks})
  metrics.update(mrr=float(np.mean(ranking_metrics.reciprocal_rank_of_ranks(ranks))),
                 accuracy=float(np.mean(1.0 - ranking_metrics.top_k_error_of_ranks(ranks, 1))))
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
