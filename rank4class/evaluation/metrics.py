"""Evaluation metrics for Rank4Class (§2, §5): top-K error, NDCG@K and MRR from TF-Ranking, and accuracy.

Every metric takes one-hot relevance labels `[batch_size, num_classes]` and scores `[batch_size, num_classes]`
(`Rank4ClassModel` converts integer class ids before its compiled metrics see them). Values are fractions;
the paper's tables multiply them by 100.
"""

from typing import Any

import tensorflow as tf

from rank4class_data.tf_ranking import tfr
from rank4class_data.validation import check_choice, check_range

TOP_K_ERROR = "top_k_error"
TOP_K_ACCURACY = "top_k_accuracy"
NDCG = "ndcg"
MRR = "mrr"
ACCURACY = "accuracy"
METRIC_NAMES = (TOP_K_ERROR, TOP_K_ACCURACY, NDCG, MRR, ACCURACY)


def _check_topn(topn: Any) -> int:
  check_range("topn", topn, 1, integer=True)
  return topn


@tf.keras.utils.register_keras_serializable(package="rank4class")
class TopKError(tfr.keras.metrics.HitsMetric):
  """Top-K error = 1 - top-K accuracy: the fraction of instances whose true class is not among the K
  best-scored classes (§2.1; the paper reports it x100).

  With one relevant class per list, TF-Ranking's Hits@K is exactly top-K accuracy; this metric is
  `1 - HitsMetric(topn=K)`. Ties in the scores are broken at random, as in TF-Ranking. With graded relevance
  (ELWC class lists), a hit is any class with relevance > 0 among the K best.

  Example:
    TopKError(topn=1)([[0., 1., 0.]], [[3., 1., 2.]])  # 1.0: class 0 is ranked first, class 1 is true.

  Args:
    topn: K >= 1.
    name: Metric name (default "top_{K}_error").
  """

  def __init__(self, topn: int = 1, name: str | None = None, dtype=None, ragged: bool = False, **kwargs):
    topn = _check_topn(topn)
    super().__init__(name=name or f"top_{topn}_error", topn=topn, dtype=dtype, ragged=ragged, **kwargs)

  def result(self) -> tf.Tensor:
    return 1.0 - super().result()


@tf.keras.utils.register_keras_serializable(package="rank4class")
class NDCGMetric(tfr.keras.metrics.NDCGMetric):
  """NDCG@K with the paper's gain `2^y - 1` and discount `1 / log2(1 + rank)` (Eq. 2), saved by name only.

  For one relevant class at position r this is `1 / log2(1 + r)` when r <= K, else 0. It is
  `tfr.keras.metrics.NDCGMetric` with its default gain and discount fixed: TF-Ranking's own config stores
  those two functions as objects, which the `.keras` format restores as plain dicts (a model saved with it
  then fails in `evaluate`), so this subclass leaves them out of its config.

  Example:
    NDCGMetric(topn=5)([[0., 1., 0.]], [[3., 2., 1.]])  # 1 / log2(3) = 0.63

  Args:
    topn: K >= 1, or None for all classes.
    name: Metric name (default "ndcg_{K}", or "ndcg").
  """

  def __init__(
    self, topn: int | None = None, name: str | None = None, dtype=None, ragged: bool = False, **kwargs
  ):
    if topn is not None:
      _check_topn(topn)
    kwargs.pop("gain_fn", None)
    kwargs.pop("rank_discount_fn", None)
    super().__init__(
      name=name or (f"ndcg_{topn}" if topn is not None else "ndcg"),
      topn=topn,
      dtype=dtype,
      ragged=ragged,
      **kwargs,
    )

  def get_config(self) -> dict[str, Any]:
    config = super().get_config()
    del config["gain_fn"], config["rank_discount_fn"]
    return config


def get(name: str, topn: int | None = None) -> tf.keras.metrics.Metric:
  """Builds one metric by name.

  Args:
    name: One of `METRIC_NAMES`: "top_k_error" (`TopKError`), "top_k_accuracy" (`tfr` Hits@K), "ndcg"
      (`NDCGMetric`, TF-Ranking's NDCG@K; all classes when `topn` is None), "mrr" (`tfr` MRR), "accuracy"
      (top-1 accuracy, `tf.keras.metrics.CategoricalAccuracy` on the one-hot labels).
    topn: K, required by "top_k_error"/"top_k_accuracy", optional for "ndcg"/"mrr".

  Raises:
    ValueError: If `name` is unknown (the message lists the allowed names) or `topn` is missing/invalid.
  """
  check_choice("metric", name, METRIC_NAMES)
  if name in (TOP_K_ERROR, TOP_K_ACCURACY) and topn is None:
    raise ValueError(f"Metric {name!r} needs `topn`.")
  if topn is not None:
    _check_topn(topn)
  suffix = f"_{topn}" if topn is not None else ""
  if name == TOP_K_ERROR:
    return TopKError(topn=topn)
  if name == TOP_K_ACCURACY:
    return tfr.keras.metrics.HitsMetric(name=f"top_{topn}_accuracy", topn=topn)
  if name == NDCG:
    return NDCGMetric(name=f"ndcg{suffix}", topn=topn)
  if name == MRR:
    return tfr.keras.metrics.MRRMetric(name=f"mrr{suffix}", topn=topn)
  return tf.keras.metrics.CategoricalAccuracy(name=ACCURACY)


def get_default_metrics(ks: tuple[int, ...] = (1, 5)) -> list[tf.keras.metrics.Metric]:
  """The paper's metrics: top-K error and NDCG@K for each K in `ks`, plus MRR and plain accuracy.

  Args:
    ks: Cutoffs K (the paper: 1 and 5).

  Returns:
    Metrics named "top_{K}_error", "ndcg_{K}", "mrr" and "accuracy".

  Raises:
    ValueError: If a K is not a positive integer or `ks` has duplicates.
  """
  ks = tuple(ks)
  if len(set(ks)) != len(ks):
    raise ValueError(f"`ks` must not repeat a cutoff, got {ks}.")
  for k in ks:
    _check_topn(k)
  return [get(TOP_K_ERROR, topn=k) for k in ks] + [get(NDCG, topn=k) for k in ks] + [get(MRR), get(ACCURACY)]
