"""The mean ± standard deviation of a metric over seeds: the one summary of repeated runs that every report
shows (the Rank4Class study's and the many-class study's tables, `pairwise-train`'s summary.json, the tables
of `scripts/`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy as np


@dataclasses.dataclass(frozen=True)
class SeedStatistics:
  """Mean and sample standard deviation (ddof=1) of one metric's values over seeds.

  A NaN (a seed that diverged, or did not report the metric) makes the mean and std NaN, so a failed seed
  shows in the table instead of vanishing from it; `skip_nan=True` leaves NaNs out for summaries that report
  the count of seeds each mean is over (`pairwise-train`'s summary.json).

  Example:
    SeedStatistics.of([0.5, 0.6])          # mean 0.55, std sqrt(0.005) = 0.0707, count 2
    SeedStatistics.of([12.3, 13.1]).format()  # "12.70 ± 0.57"
    SeedStatistics.of([0.5])               # std 0.0: one seed has no spread to estimate; format() "0.50"

  Attributes:
    mean: Mean of the values (with `skip_nan`, of those that are not NaN; NaN when none is left).
    std: Their sample standard deviation (ddof=1); 0.0 for one value, NaN for none.
    count: How many values the mean is over.
  """

  mean: float
  std: float
  count: int

  @classmethod
  def of(cls, values: Iterable[float], skip_nan: bool = False) -> SeedStatistics:
    """The statistics of `values` (one per seed); NaNs propagate unless `skip_nan`.

    Raises:
      ValueError: For no values at all.
    """
    array = np.asarray(list(values), np.float64).reshape(-1)
    if array.size == 0:
      raise ValueError("No values to summarize over seeds.")
    kept = array[~np.isnan(array)] if skip_nan else array
    if kept.size == 0:
      return cls(math.nan, math.nan, 0)
    std = float(kept.std(ddof=1)) if kept.size > 1 else (0.0 if not np.isnan(kept[0]) else math.nan)
    return cls(float(kept.mean()), std, int(kept.size))

  def format(self, digits: int = 2) -> str:
    """The text "mean ± std" with `digits` decimals, e.g. "12.34 ± 0.56"; the mean alone ("12.34") for one
    seed, which has no spread to show. Every report's mean ± std cell is this text."""
    if self.count == 1:
      return f"{self.mean:.{digits}f}"
    return f"{self.mean:.{digits}f} ± {self.std:.{digits}f}"
