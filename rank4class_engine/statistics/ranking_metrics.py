"""Ranking metrics over padded [num_lists, list_size] arrays with a deterministic, stated tie policy.

Definitions (graded labels are relevance grades >= 0, higher = better; padded entries are given by `mask`):

- Ordering. Each list is sorted by score, descending. Tied scores are broken by `tie_breaking`:
  "pessimistic" (default: among tied documents the lower-labelled come first, so a scorer never gains from a
  tie and a constant scorer gets the worst value), "optimistic" (higher-labelled first) or "input_order"
  (stable: earlier in the list first). Every metric below is computed on that strict order.
- NDCG@k: DCG@k / ideal DCG@k with DCG@k = sum_{r<=k} gain(label at rank r) / log2(1 + r); gain is
  "exponential" (2^label - 1, TF-Ranking's default) or "linear" (label, used for labels derived from ranks).
- MAP@k: binary relevance `label >= relevance_threshold`; AP@k = sum_{r<=k, rel(r)} precision@r / R where R is
  the number of relevant documents in the whole list (TF-Ranking's definition, not min(k, R)).
- MRR@k: 1 / (rank of the first relevant document) if it is within the top k, else 0.
- Kendall tau: tau-b between the strict order and the labels: (concordant - discordant) /
  sqrt(n0 * (n0 - label-tied pairs)), n0 = n (n - 1) / 2. NaN for lists with fewer than two documents or
  constant labels.
- Pair accuracy: among pairs with different labels, the fraction ordered correctly (TF-Ranking's ordered pair
  accuracy). NaN for lists without such a pair. `preference_pair_accuracy` is its counterpart for a pairwise
  model's own pair preferences P[i, j] (pooled over lists; a tie is wrong).
- A list with no relevant document scores 0 on NDCG, MAP and MRR (TF-Ranking's convention); a list with no
  valid entry is NaN everywhere. Means over lists ignore NaN.

NDCG, MAP, MRR and pair accuracy are TF-Ranking's implementations (`tfr.metrics_impl`) fed the tie-broken
order; Kendall tau, which TF-Ranking lacks, is NumPy.

One relevant document per list (a classification's true class among all classes) needs no list at all, only
its 0-based rank r (the count of documents ranked above it; infinity for one never ranked, e.g. missed by a
retriever): the same definitions then reduce to NDCG@k = 1 / log2(r + 2) if r < k else 0 (the ideal DCG is 1,
whatever the gain), reciprocal rank = 1 / (r + 1) if r < k else 0, and top-k error = [r >= k]
(`ndcg_of_ranks`, `reciprocal_rank_of_ranks`, `top_k_error_of_ranks`: NumPy, one value per list).
"""

import dataclasses
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from rank4class_data.tf_ranking import tfr
from rank4class_data.validation import check_choice, check_range

METRIC_NAMES = ("ndcg", "map", "mrr", "kendall_tau", "pair_accuracy")
TIE_BREAKING_POLICIES = ("pessimistic", "optimistic", "input_order")
GAINS = ("exponential", "linear")

_GAIN_FNS = {
    "exponential": lambda label: tf.pow(2.0, label) - 1.0,
    "linear": lambda label: label,
}


@dataclasses.dataclass
class RankingMetricsConfig:
  """How `compute_metrics` evaluates rankings.

  Attributes:
    topn: Cutoff k for NDCG@k, MAP@k and MRR@k; None means the whole list.
    gain: NDCG gain, one of `GAINS`.
    relevance_threshold: Labels >= this count as relevant for MAP and MRR.
    tie_breaking: One of `TIE_BREAKING_POLICIES`.
  """

  topn: int | None = 10
  gain: str = "exponential"
  relevance_threshold: float = 1.0
  tie_breaking: str = "pessimistic"

  def __post_init__(self):
    _check_topn(self.topn)
    check_choice("gain", self.gain, GAINS)
    check_choice("tie_breaking", self.tie_breaking, TIE_BREAKING_POLICIES)


def _check_topn(topn: int | None) -> None:
  """A cutoff k >= 1, or None for the whole list."""
  if topn is not None:
    check_range("topn", topn, 1, integer=True)


def _validate(labels, scores, mask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Converts to NumPy [num_lists, list_size] arrays and checks shapes and values."""
  labels = np.asarray(labels, dtype=np.float64)
  scores = np.asarray(scores, dtype=np.float64)
  if labels.ndim != 2 or scores.shape != labels.shape:
    raise ValueError(
        f"`labels` and `scores` must both be [num_lists, list_size]; got shapes {labels.shape} and "
        f"{scores.shape}.")
  mask = np.ones(labels.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
  if mask.shape != labels.shape:
    raise ValueError(f"`mask` must have the shape of `labels` {labels.shape}, got {mask.shape}.")
  bad_labels = mask & ~(np.isfinite(labels) & (labels >= 0))
  if bad_labels.any():
    row, col = np.argwhere(bad_labels)[0]
    raise ValueError(
        f"Labels must be finite relevance grades >= 0 (padding belongs in `mask`); got {labels[row, col]} "
        f"at list {row}, position {col}.")
  bad_scores = mask & ~np.isfinite(scores)
  if bad_scores.any():
    row, col = np.argwhere(bad_scores)[0]
    raise ValueError(f"Scores must be finite; got {scores[row, col]} at list {row}, position {col}.")
  return labels, scores, mask


def sorted_positions(labels, scores, mask=None, tie_breaking: str = "pessimistic") -> np.ndarray:
  """Returns the 1-based position of every entry in its list's strict order (padding last).

  Args:
    labels: Relevance [num_lists, list_size].
    scores: Scores [num_lists, list_size], higher = ranked first.
    mask: Optional bool [num_lists, list_size], True for real entries.
    tie_breaking: One of `TIE_BREAKING_POLICIES`.

  Returns:
    int64 [num_lists, list_size]: position 1 is the top of the list.

  Example: scores [[1., 3., 3.]], labels [[0., 0., 2.]] -> pessimistic [[3, 1, 2]], optimistic [[3, 2, 1]].
  """
  check_choice("tie_breaking", tie_breaking, TIE_BREAKING_POLICIES)
  labels, scores, mask = _validate(labels, scores, mask)
  index = np.broadcast_to(np.arange(labels.shape[1]), labels.shape)
  secondary = {"pessimistic": labels, "optimistic": -labels, "input_order": index}[tie_breaking]
  # np.lexsort sorts by the last key first: padding last, then score descending, then the tie key, then index.
  order = np.lexsort((index, secondary, -np.where(mask, scores, 0.0), ~mask), axis=-1)
  positions = np.empty_like(order)
  np.put_along_axis(positions, order, np.arange(1, labels.shape[1] + 1)[None, :].repeat(len(order), 0), -1)
  return positions.astype(np.int64)


def _strict_scores(labels, scores, mask, tie_breaking) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Replaces scores by distinct values encoding the tie-broken order, so TF-Ranking's sort is
  deterministic."""
  labels, scores, mask = _validate(labels, scores, mask)
  positions = sorted_positions(labels, scores, mask, tie_breaking)
  strict = (labels.shape[1] - positions).astype(np.float64)
  return labels, strict, mask


def _tfr_per_list(metric, labels: np.ndarray, strict_scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
  """Runs a `tfr.metrics_impl` metric and returns its per-list values [num_lists], NaN for empty lists."""
  if labels.shape[1] == 0:
    return np.full(labels.shape[0], np.nan)
  values, _ = metric.compute(
      tf.constant(np.where(mask, labels, 0.0), tf.float32), tf.constant(strict_scores, tf.float32),
      mask=tf.constant(mask))
  values = values.numpy()[:, 0].astype(np.float64)
  return np.where(mask.any(axis=1), values, np.nan)


def ndcg(labels, scores, mask=None, topn: int | None = None, gain: str = "exponential",
         tie_breaking: str = "pessimistic") -> np.ndarray:
  """NDCG@topn per list (see the module docstring for the definition).

  Args:
    labels: Relevance grades >= 0, [num_lists, list_size].
    scores: [num_lists, list_size].
    mask: Optional bool [num_lists, list_size]; False marks padding.
    topn: Cutoff k, or None for the whole list.
    gain: One of `GAINS`.
    tie_breaking: One of `TIE_BREAKING_POLICIES`.

  Returns:
    float64 [num_lists].
  """
  _check_topn(topn)
  check_choice("gain", gain, GAINS)
  labels, strict, mask = _strict_scores(labels, scores, mask, tie_breaking)
  metric = tfr.metrics_impl.NDCGMetric("ndcg", topn, gain_fn=_GAIN_FNS[gain])
  return _tfr_per_list(metric, labels, strict, mask)


def mean_average_precision(labels, scores, mask=None, topn: int | None = None,
                           relevance_threshold: float = 1.0,
                           tie_breaking: str = "pessimistic") -> np.ndarray:
  """MAP@topn per list with relevance `label >= relevance_threshold`; float64 [num_lists]."""
  _check_topn(topn)
  labels, strict, mask = _strict_scores(labels, scores, mask, tie_breaking)
  binary = (labels >= relevance_threshold).astype(np.float64)
  return _tfr_per_list(tfr.metrics_impl.MeanAveragePrecisionMetric("map", topn), binary, strict, mask)


def reciprocal_rank(labels, scores, mask=None, topn: int | None = None, relevance_threshold: float = 1.0,
                    tie_breaking: str = "pessimistic") -> np.ndarray:
  """Reciprocal rank of the first relevant document within topn, per list; float64 [num_lists]."""
  _check_topn(topn)
  labels, strict, mask = _strict_scores(labels, scores, mask, tie_breaking)
  binary = (labels >= relevance_threshold).astype(np.float64)
  return _tfr_per_list(tfr.metrics_impl.MRRMetric("mrr", topn), binary, strict, mask)


def pair_accuracy(labels, scores, mask=None, tie_breaking: str = "pessimistic") -> np.ndarray:
  """Fraction of differently-labelled pairs ordered correctly, per list; NaN without such pairs."""
  labels, strict, mask = _strict_scores(labels, scores, mask, tie_breaking)
  values = _tfr_per_list(tfr.metrics_impl.OPAMetric("pair_accuracy"), labels, strict, mask)
  label_diff = labels[:, :, None] > labels[:, None, :]
  has_pairs = (label_diff & mask[:, :, None] & mask[:, None, :]).any(axis=(1, 2))
  return np.where(has_pairs, values, np.nan)


def pairs_correct(pair_labels, preferences):
  """Whether each pair preference agrees with its pair label: E · P > 0, so a tie (P = 0) or NaN is wrong.

  The one pair-correctness rule of the pairwise models, on NumPy arrays or tensors alike (the training logs'
  pair accuracy and `preference_pair_accuracy` use it). `pair_labels`: E = ±1 (or a label-difference sign);
  `preferences`: P, the model's preference of the left item, same shape.
  """
  return pair_labels * preferences > 0


def preference_pair_accuracy(preferences, labels, mask=None) -> float:
  """Pair accuracy of raw pair preferences, pooled over lists (the paper's "Pair Labels Accuracy").

  Over every ordered pair (i, j) of valid entries with different labels (both orientations), the fraction with
  `pairs_correct(sign(y_i - y_j), P[i, j])`. Unlike `pair_accuracy`, which judges the order of per-item scores
  list by list, this judges the model's own pair predictions and pools the pairs of all lists.

  Args:
    preferences: [num_lists, n, n] P[l, i, j], the model's preference of item i over item j.
    labels: [num_lists, n] labels.
    mask: Optional bool [num_lists, n]; False marks padding.

  Returns:
    The fraction; NaN when no pair has different labels.
  """
  labels = np.asarray(labels, np.float64)
  mask = np.ones(labels.shape, bool) if mask is None else np.asarray(mask, bool)
  label_sign = np.sign(labels[:, :, None] - labels[:, None, :])
  valid = (label_sign != 0) & mask[:, :, None] & mask[:, None, :]
  correct = pairs_correct(label_sign, np.asarray(preferences, np.float64))
  return float(correct[valid].mean()) if valid.any() else float("nan")


def kendall_tau(labels, scores, mask=None, tie_breaking: str = "pessimistic") -> np.ndarray:
  """Kendall tau-b between the tie-broken order and the labels, per list; NaN where undefined."""
  labels, scores, mask = _validate(labels, scores, mask)
  positions = sorted_positions(labels, scores, mask, tie_breaking).astype(np.float64)
  result = np.full(labels.shape[0], np.nan)
  for row in range(labels.shape[0]):
    valid = mask[row]
    n = int(valid.sum())
    if n < 2:
      continue
    # Score ranks: position 1 is best, so the "score" of an entry is -position.
    order_sign = np.sign(positions[row, valid][None, :] - positions[row, valid][:, None])
    label_sign = np.sign(labels[row, valid][:, None] - labels[row, valid][None, :])
    upper = np.triu_indices(n, k=1)
    n0 = n * (n - 1) / 2
    label_ties = float(np.sum(label_sign[upper] == 0))
    if label_ties == n0:
      continue
    result[row] = np.sum(order_sign[upper] * label_sign[upper]) / np.sqrt(n0 * (n0 - label_ties))
  return result


def _check_ranks(ranks) -> np.ndarray:
  """0-based ranks as float64 (infinity allowed: never ranked)."""
  ranks = np.asarray(ranks, np.float64)
  if np.any(np.isnan(ranks) | (ranks < 0)):
    raise ValueError("Ranks must be 0-based positions >= 0 (or infinity), got "
                     f"{ranks[np.isnan(ranks) | (ranks < 0)][0]}.")
  return ranks


def ndcg_of_ranks(ranks, topn: int | None = None) -> np.ndarray:
  """NDCG@topn of lists with one relevant document at 0-based rank `ranks` [n]: 1 / log2(r + 2) if r < topn
  else 0 (the module docstring's NDCG, any gain); float64 [n].

  Example: ndcg_of_ranks([0, 1, 6], topn=5) -> [1, 1 / log2(3) = 0.631, 0].
  """
  _check_topn(topn)
  ranks = _check_ranks(ranks)
  inside = ranks < (np.inf if topn is None else topn)
  return np.where(inside, 1.0 / np.log2(np.where(inside, ranks, 0.0) + 2.0), 0.0)


def reciprocal_rank_of_ranks(ranks, topn: int | None = None) -> np.ndarray:
  """Reciprocal rank of the one relevant document at 0-based rank `ranks` [n]: 1 / (r + 1) if r < topn else 0
  (0 for infinity); float64 [n]."""
  _check_topn(topn)
  ranks = _check_ranks(ranks)
  return np.where(ranks < (np.inf if topn is None else topn), 1.0 / (ranks + 1.0), 0.0)


def top_k_error_of_ranks(ranks, k: int) -> np.ndarray:
  """Whether the one relevant document at 0-based rank `ranks` [n] is outside the top `k`: [r >= k] as float64
  [n] (1 - Hits@k)."""
  _check_topn(k)
  return (_check_ranks(ranks) >= k).astype(np.float64)


def get(name: str, **kwargs) -> Callable[..., np.ndarray]:
  """Returns the per-list metric function `name` (one of `METRIC_NAMES`) with `kwargs` bound.

  Raises:
    ValueError: if `name` is unknown.
  """
  functions = {"ndcg": ndcg, "map": mean_average_precision, "mrr": reciprocal_rank,
               "kendall_tau": kendall_tau, "pair_accuracy": pair_accuracy}
  check_choice("metric", name, METRIC_NAMES)
  function = functions[name]

  def bound(labels, scores, mask=None):
    return function(labels, scores, mask, **kwargs)

  return bound


def compute_metrics(labels, scores, mask=None,
                    config: RankingMetricsConfig | None = None) -> dict[str, float]:
  """Means over lists of every metric in `METRIC_NAMES`, keyed e.g. "ndcg@10", "map@10", "kendall_tau".

  Args:
    labels: Relevance grades >= 0, [num_lists, list_size].
    scores: [num_lists, list_size].
    mask: Optional bool [num_lists, list_size].
    config: Cutoff, gain, relevance threshold and tie policy; defaults to `RankingMetricsConfig()`.

  Returns:
    Metric name -> mean over lists (NaN-valued lists ignored).
  """
  config = config or RankingMetricsConfig()
  suffix = "" if config.topn is None else f"@{config.topn}"
  per_list = {
      f"ndcg{suffix}": ndcg(labels, scores, mask, config.topn, config.gain, config.tie_breaking),
      f"map{suffix}": mean_average_precision(labels, scores, mask, config.topn, config.relevance_threshold,
                                             config.tie_breaking),
      f"mrr{suffix}": reciprocal_rank(labels, scores, mask, config.topn, config.relevance_threshold,
                                      config.tie_breaking),
      "kendall_tau": kendall_tau(labels, scores, mask, config.tie_breaking),
      "pair_accuracy": pair_accuracy(labels, scores, mask, config.tie_breaking),
  }
  return {name: _nanmean(values) for name, values in per_list.items()}


def _nanmean(values: np.ndarray) -> float:
  values = values[~np.isnan(values)]
  return float(values.mean()) if values.size else float("nan")


def ragged_to_padded(values, list_offsets, pad_value: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
  """Packs row-grouped values into a padded matrix.

  Args:
    values: [num_rows] values, rows of list q at `list_offsets[q]:list_offsets[q + 1]`.
    list_offsets: int [num_lists + 1], non-decreasing, starting at 0 and ending at num_rows.
    pad_value: Fill value for padding.

  Returns:
    (padded [num_lists, max_list_size], mask bool [num_lists, max_list_size]).
  """
  values = np.asarray(values)
  offsets = np.asarray(list_offsets, dtype=np.int64)
  if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or offsets[-1] != len(values) or np.any(
      np.diff(offsets) < 0):
    raise ValueError(
        f"`list_offsets` must be non-decreasing from 0 to {len(values)} (the number of values); got "
        f"{offsets.tolist()[:10]}{'...' if offsets.size > 10 else ''}.")
  sizes = np.diff(offsets)
  width = int(sizes.max()) if sizes.size else 0
  padded = np.full((len(sizes), width), pad_value, dtype=np.result_type(values.dtype, np.float64))
  mask = np.arange(width)[None, :] < sizes[:, None]
  padded[mask] = values
  return padded, mask
