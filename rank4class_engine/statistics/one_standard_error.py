"""The one-standard-error rule: among models scored row by row on the same validation rows, the simplest one
whose mean loss is within one standard error of the best's, so that a small validation split does not choose
noise (Hastie, Tibshirani & Friedman, *The Elements of Statistical Learning*, §7.10).

The standard error is that of the paired per-row differences to the best model: two models scored on the same
rows differ by much less than either's own spread, and the paired error measures that difference. A tie keeps
the simpler model.

Example:
  losses = np.array([[1.0, 0.9], [0.0, 0.1], [1.0, 0.8]])  # 3 rows x 2 models, simplest first
  choose(losses).index  # 0: model 1's mean is 0.067 lower, within the differences' standard error 0.088
"""

import dataclasses

import numpy as np


@dataclasses.dataclass
class Choice:
  """What `choose` chose.

  Attributes:
    index: The chosen column (model), simplest first.
    best: The column with the lowest mean loss.
    means: Each column's mean loss.
    standard_errors: The standard error of each column's paired differences to the best column (0 for the
      best, and for every column with fewer than 2 rows).
    rows: The rows the means are over.
  """

  index: int
  best: int
  means: list[float]
  standard_errors: list[float]
  rows: int

  @property
  def within_noise(self) -> bool:
    """Whether a simpler model than the best was kept because the best is not better beyond the noise."""
    return self.index != self.best


def choose(per_row_losses: np.ndarray) -> Choice:
  """The simplest model whose mean loss is within one paired standard error of the lowest.

  Args:
    per_row_losses: float `[rows, models]`, lower is better, the models' columns ordered simplest first (an
      error for "higher is better" metrics: negate them). Columns that are NaN anywhere are never chosen.

  Returns:
    The `Choice`.

  Raises:
    ValueError: for a matrix without rows or columns, or whose every column holds a NaN.
  """
  losses = np.asarray(per_row_losses, np.float64)
  if losses.ndim != 2 or losses.shape[0] == 0 or losses.shape[1] == 0:
    raise ValueError(f"`per_row_losses` must be [rows, models] with at least one of each, got shape "
                     f"{losses.shape}.")
  finite = ~np.any(np.isnan(losses), axis=0)
  if not np.any(finite):
    raise ValueError("Every model's validation losses hold a NaN: there is nothing to choose.")
  means = np.where(finite, np.mean(losses, axis=0), np.inf)
  best = int(np.argmin(means))
  rows = losses.shape[0]
  if rows > 1:
    differences = losses - losses[:, [best]]
    errors = np.where(finite, np.std(differences, axis=0, ddof=1) / np.sqrt(rows), 0.0)
  else:
    errors = np.zeros(losses.shape[1])
  within = finite & (means - means[best] <= errors + 1e-12)
  return Choice(index=int(np.flatnonzero(within)[0]), best=best,
                means=[float(m) for m in means], standard_errors=[float(e) for e in errors], rows=rows)


def per_row_metric_losses(ranks: np.ndarray, metric: str) -> np.ndarray:
  """Per-row losses (lower is better) of a ranking metric from the 0-based rank of each row's true class: a
  top-K error is 1 at rank K or below, NDCG@K is `1 / log2(rank + 2)` within the top K (one relevant class,
  so the ideal DCG is 1) and MRR is `1 / (rank + 1)`, both negated.

  Raises:
    ValueError: for another metric name.
  """
  ranks = np.asarray(ranks, np.float64)
  if metric.startswith("top_") and metric.endswith("_error"):
    return (ranks >= int(metric[len("top_"):-len("_error")])).astype(np.float64)
  if metric.startswith("ndcg_"):
    k = int(metric[len("ndcg_"):])
    return -np.where(ranks < k, 1.0 / np.log2(ranks + 2.0), 0.0)
  if metric == "mrr":
    return -1.0 / (ranks + 1.0)
  raise ValueError(f"No per-row form of the metric {metric!r}: top_K_error, ndcg_K or mrr.")
