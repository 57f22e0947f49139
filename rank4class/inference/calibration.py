"""Probabilities from ranking scores: temperature scaling, calibration error, split-conformal class sets
(NumPy).

A ranking loss (ApproxNDCG, pairwise logistic, MSE) orders classes but its scores are no probabilities. Here
the softmax of `scores / T` is made one: the temperature T is fitted on held-out rows (the validation split)
by minimising their negative log-likelihood (Guo et al. 2017, "On Calibration of Modern Neural Networks",
§4.2; the labels smoothed by one uniform pseudo-row, so that a small split ranked all right keeps T > 0), and
split-conformal prediction (Angelopoulos & Bates 2021, "A Gentle Introduction to Conformal Prediction", §1;
the "LAC" score 1 - p_true of Sadinle et al. 2019) turns those probabilities into class sets that hold the
true class for a stated share of new rows exchangeable with the calibration rows.

  calibration = Calibration.fit(validation_scores, validation_labels)     # scores [n, C], labels [n]
  probabilities = calibration.probabilities(new_scores)                   # [m, C], rows sum to 1
  sets = calibration.prediction_sets(probabilities, coverage=0.9)         # bool [m, C]
"""

import dataclasses
import math
from typing import Any

import numpy as np

from rank4class_data.validation import check_range

DEFAULT_COVERAGE = 0.9
DEFAULT_BINS = 15
# The temperature is searched on log T within this many nats either side of log(typical score range): at the
# low end the softmax is one-hot, at the high end uniform, for any score scale.
_LOG_T_HALF_WIDTH = 12.0
_GRID_POINTS = 97  # A coarse scan first (steps of 0.25 in log T), then golden section around its best point.
_GOLDEN_TOLERANCE = 1e-7
# `Calibration.fit` keeps at most this many scores (rows x classes; a seeded random subset of rows beyond it):
# the fit holds a few float64 copies of them.
MAX_FIT_SCORES = 2**23
_INVERSE_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


# --- Pure math ----------------------------------------------------------------------------------------------


def _check_scores(scores) -> np.ndarray:
  scores = np.asarray(scores, dtype=np.float64)
  if scores.ndim != 2 or scores.shape[1] < 1:
    raise ValueError("scores must be [num_rows, num_classes] with at least one class, got shape "
                     f"{scores.shape}.")
  if not np.all(np.isfinite(scores)):
    bad = np.argwhere(~np.isfinite(scores))[0]
    raise ValueError(f"scores must be finite; row {bad[0]}, class {bad[1]} is {scores[bad[0], bad[1]]}.")
  return scores


def _check_labels(labels, num_rows: int, num_classes: int) -> np.ndarray:
  labels = np.asarray(labels)
  if labels.ndim == 2 and labels.shape[1] == 1:
    labels = labels[:, 0]
  if labels.ndim != 1 or len(labels) != num_rows:
    raise ValueError(f"labels must be class ids [{num_rows}], got shape {labels.shape}.")
  if not np.issubdtype(labels.dtype, np.integer):
    if not np.all(np.equal(np.mod(labels, 1), 0)):
      raise ValueError("labels must be integral class ids.")
    labels = labels.astype(np.int64)
  if num_rows and (labels.min() < 0 or labels.max() >= num_classes):
    raise ValueError(f"labels must be class ids in [0, {num_classes}), got {labels.min()}..{labels.max()}.")
  return labels.astype(np.int64)


def log_softmax(scores, temperature: float = 1.0) -> np.ndarray:
  """log softmax(scores / temperature) over the last axis, float64, stable for huge scores (the row maximum is
  subtracted first)."""
  check_range("temperature", temperature, 0, low_inclusive=False)
  scaled = np.asarray(scores, dtype=np.float64) / temperature
  shifted = scaled - scaled.max(axis=-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax(scores, temperature: float = 1.0) -> np.ndarray:
  """softmax(scores / temperature) over the last axis, float64 (rows sum to 1)."""
  return np.exp(log_softmax(scores, temperature))


def negative_log_likelihood(scores, labels, temperature: float = 1.0) -> float:
  """Mean over rows of -log softmax(scores / temperature)[label] (nats)."""
  scores = _check_scores(scores)
  labels = _check_labels(labels, len(scores), scores.shape[1])
  return float(-log_softmax(scores, temperature)[np.arange(len(labels)), labels].mean())


def _nll_of_log_temperature(shifted: np.ndarray, target_shifted: np.ndarray):
  """The cross-entropy as a function of u = log T, from scores minus their row maximum (`shifted` [n, C], <=
  0) and the target's expected score (`target_shifted` [n]): mean(log sum exp(shifted / T) - target_shifted /
     T).
  Convex in 1/T, so unimodal in u."""

  def nll(u: float) -> float:
    inverse = math.exp(-u)
    return float(np.mean(np.log(np.exp(shifted * inverse).sum(axis=1)) - target_shifted * inverse))

  return nll


def _fit_log_temperature(scores: np.ndarray, labels: np.ndarray) -> tuple[float, bool]:
  """(log T minimising the smoothed NLL (`fit_temperature`), whether it lies at the edge of the searched
  range); (0.0, False) when every temperature gives the same NLL (one class, or rows whose classes all score
  the same)."""
  ranges = scores.max(axis=1) - scores.min(axis=1)
  spread = ranges[ranges > 0]
  if spread.size == 0:  # C = 1 or all scores of each row equal: softmax is uniform (or 1) for any T.
    return 0.0, False
  shifted = scores - scores.max(axis=1, keepdims=True)
  # Labels smoothed by one uniform pseudo-row (weight 1 / (n + 1)): a handful of rows all ranked right (a
  # small validation split) would otherwise drive T to 0 and the probabilities to 0 / 1 (test NLL in the
  # hundreds).
  smoothing = 1.0 / (len(labels) + 1)
  target = (1.0 - smoothing) * shifted[np.arange(len(labels)), labels] + smoothing * shifted.mean(axis=1)
  nll = _nll_of_log_temperature(shifted, target)
  center = math.log(float(np.median(spread)))
  low_end, high_end = center - _LOG_T_HALF_WIDTH, center + _LOG_T_HALF_WIDTH
  grid = np.linspace(low_end, high_end, _GRID_POINTS)
  values = np.array([nll(u) for u in grid])
  best = int(np.argmin(values))
  if values.max() - values.min() <= 1e-12 * max(1.0, abs(values.min())):
    return 0.0, False
  # The minimum of a unimodal function on the grid brackets the true minimum between its neighbours.
  low, high = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
  a, b = high - _INVERSE_GOLDEN * (high - low), low + _INVERSE_GOLDEN * (high - low)
  fa, fb = nll(a), nll(b)
  while high - low > _GOLDEN_TOLERANCE:
    if fa <= fb:
      high, b, fb = b, a, fa
      a = high - _INVERSE_GOLDEN * (high - low)
      fa = nll(a)
    else:
      low, a, fa = a, b, fb
      b = low + _INVERSE_GOLDEN * (high - low)
      fb = nll(b)
  u = (low + high) / 2.0
  if nll(u) > values[best]:  # Never worse than the grid's best point.
    u = float(grid[best])
  at_bound = best in (0, len(grid) - 1)
  return float(u), at_bound


def fit_temperature(scores, labels) -> float:
  """The temperature T > 0 minimising the mean negative log-likelihood of softmax(scores / T) on labelled
  rows.

  The labels are smoothed by one pseudo-row of uniform label (weight 1 / (n + 1), so it fades as rows grow):
  without it, rows that the scores all rank right (common on a small validation split) make ever sharper
  probabilities better and T would fall to 0. The objective stays convex in 1/T, hence unimodal in log T: a
  coarse scan over log T within +-12 of the log of the median row score range (whatever the scores' scale),
  then golden-section search around the scan's best point. An optimum at the end of that range is returned as
  it is (`Calibration.temperature_at_bound` says so). With one class, or rows whose scores are all equal,
  every T gives the same probabilities and 1.0 is returned.

  Args:
    scores: float `[num_rows, num_classes]`, finite.
    labels: int class ids `[num_rows]`.

  Returns:
    The temperature.

  Raises:
    ValueError: for scores that are not a finite `[n, C]` matrix, labels outside [0, C), or no rows.
  """
  scores = _check_scores(scores)
  labels = _check_labels(labels, len(scores), scores.shape[1])
  if not len(scores):
    raise ValueError("fit_temperature needs at least one labelled row.")
  return math.exp(_fit_log_temperature(scores, labels)[0])


def _bin_sums(probabilities: np.ndarray, labels: np.ndarray, bins: int) -> np.ndarray:
  """[3, bins]: per equal-width confidence bin ((i/bins, (i+1)/bins], the first closed at 0) the row count,
  the sum of top-1 confidences and the number of correct top-1 classes."""
  predicted = np.argmax(probabilities, axis=1)
  confidence = probabilities[np.arange(len(labels)), predicted]
  index = np.clip(np.ceil(confidence * bins).astype(np.int64) - 1, 0, bins - 1)
  return np.stack([np.bincount(index, minlength=bins).astype(np.float64),
                   np.bincount(index, weights=confidence, minlength=bins),
                   np.bincount(index, weights=(predicted == labels).astype(np.float64), minlength=bins)])


def _ece_of_bin_sums(sums: np.ndarray) -> float:
  counts, confidence, correct = sums
  total = counts.sum()
  return float(np.abs(correct - confidence).sum() / total) if total else math.nan


def expected_calibration_error(probabilities, labels, bins: int = DEFAULT_BINS) -> float:
  """Expected calibration error of the top-1 class: sum over `bins` equal-width confidence bins of
  (rows in the bin / rows) x |accuracy in the bin - mean confidence in the bin| (Guo et al. 2017, eq. 3).

  Args:
    probabilities: float `[num_rows, num_classes]`, rows summing to 1.
    labels: int class ids `[num_rows]`.
    bins: Number of bins.
  """
  check_range("bins", bins, 1, integer=True)
  probabilities = np.asarray(probabilities, dtype=np.float64)
  labels = _check_labels(labels, len(probabilities), probabilities.shape[1])
  return _ece_of_bin_sums(_bin_sums(probabilities, labels, bins))


def check_coverage(coverage: float) -> float:
  """`coverage` (e.g. 0.9 for sets that hold the true class 90% of the time) as a float in (0, 1); ValueError
  naming it otherwise."""
  check_range("coverage", coverage, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
  return float(coverage)


def conformal_rank(coverage: float, n: int) -> int:
  """The 1-based rank ceil((n + 1) * coverage) of the calibration score that is the split-conformal threshold
  (the finite-sample quantile at level 1 - alpha, alpha = 1 - coverage).

  Raises:
    ValueError: naming the coverage when it is outside (0, 1) or needs more than the `n` calibration rows.
  """
  coverage = check_coverage(coverage)
  rank = math.ceil((n + 1) * coverage - 1e-9)  # 1e-9: (n + 1) * 0.9 is 90.00000000000001 for n = 99.
  if rank > n:
    needed = math.ceil(coverage / (1.0 - coverage) - 1e-9)
    raise ValueError(f"coverage {coverage} is out of reach with {n} calibration rows: it needs at least "
                     f"{needed} (ceil((n + 1) * {coverage}) <= n); choose a lower coverage or "
                     "calibrate on more rows.")
  return rank


def nonconformity(probabilities, labels) -> np.ndarray:
  """The "LAC" nonconformity 1 - p(true class) of each row, float64 `[num_rows]`."""
  probabilities = np.asarray(probabilities, dtype=np.float64)
  labels = _check_labels(labels, len(probabilities), probabilities.shape[1])
  return 1.0 - probabilities[np.arange(len(labels)), labels]


def class_sets(probabilities, threshold: float) -> np.ndarray:
  """bool `[num_rows, num_classes]`: the classes whose nonconformity 1 - p is at most `threshold`, and always
  each row's top class (a set is never empty, even where no class reaches the threshold)."""
  probabilities = np.asarray(probabilities, dtype=np.float64)
  sets = (1.0 - probabilities) <= threshold
  sets[np.arange(len(probabilities)), np.argmax(probabilities, axis=1)] = True
  return sets


# --- The fitted calibration ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Calibration:
  """A temperature and the conformal scores fitted on held-out labelled rows, and how calibrated they made
  them.

  Example:
    calibration = Calibration.fit(scores, labels)     # e.g. the validation split's scores [n, C]
    calibration.probabilities([[2.0, 0.0]])           # softmax([2, 0] / T)
    calibration.prediction_sets(p, coverage=0.8)      # bool [m, C]: the 80% class sets

  Attributes:
    temperature: T of softmax(scores / T).
    n: Calibration rows.
    nonconformity: The calibration rows' nonconformity 1 - p(true class) under T, sorted ascending (any
      coverage can be chosen later: its threshold is one of them).
    ece_before: Expected calibration error of softmax(scores) (T = 1) on the calibration rows.
    ece_after: The same under T.
    nll_before: Mean negative log-likelihood (nats) of softmax(scores).
    nll_after: The same under T.
    coverage: The default coverage of `threshold` and `prediction_sets`.
    bins: Confidence bins of the ECE.
    temperature_at_bound: The objective fell all the way to the end of the searched range (e.g. scores
      anti-correlated with the labels: uniform probabilities are best): T is that end, not an interior
      optimum.
  """

  temperature: float
  n: int
  nonconformity: list[float]
  ece_before: float
  ece_after: float
  nll_before: float
  nll_after: float
  coverage: float = DEFAULT_COVERAGE
  bins: int = DEFAULT_BINS
  temperature_at_bound: bool = False

  def __post_init__(self):
    check_range("temperature", self.temperature, 0, low_inclusive=False)
    self.coverage = check_coverage(self.coverage)
    self.nonconformity = sorted(float(s) for s in self.nonconformity)
    if len(self.nonconformity) != self.n:
      raise ValueError(f"{self.n} calibration rows but {len(self.nonconformity)} nonconformity scores.")

  @classmethod
  def fit(cls, scores, labels, coverage: float = DEFAULT_COVERAGE, bins: int = DEFAULT_BINS,
          max_scores: int = MAX_FIT_SCORES, seed: int = 0) -> "Calibration":
    """Fits the temperature (`fit_temperature`) and keeps the rows' nonconformity under it.

    Args:
      scores: float `[n, C]` of held-out rows (not the rows the model trained on).
      labels: int class ids `[n]`.
      coverage: The default coverage of the class sets (may be out of reach for few rows: `threshold` then
        raises, `summary` says so).
      bins: Confidence bins of the ECE.
      max_scores: Beyond this many scores, a random subset of max(1, max_scores // C) rows (seeded by `seed`)
        is used; `n` counts the rows used.
    """
    scores = np.asarray(scores)
    labels = _check_labels(labels, len(scores), scores.shape[1] if scores.ndim == 2 else 0)
    if scores.ndim == 2 and scores.size > max_scores:
      rows = np.sort(np.random.default_rng(seed).choice(len(scores), max(1, max_scores // scores.shape[1]),
                                                        replace=False))
      scores, labels = scores[rows], labels[rows]
    scores = _check_scores(scores)
    if not len(scores):
      raise ValueError("Calibration.fit needs at least one labelled row.")
    log_temperature, at_bound = _fit_log_temperature(scores, labels)
    temperature = math.exp(log_temperature)
    before, after = softmax(scores), softmax(scores, temperature)
    return cls(temperature=temperature, n=len(labels), nonconformity=nonconformity(after, labels).tolist(),
               ece_before=expected_calibration_error(before, labels, bins),
               ece_after=expected_calibration_error(after, labels, bins),
               nll_before=negative_log_likelihood(scores, labels), nll_after=negative_log_likelihood(
                   scores, labels, temperature), coverage=coverage, bins=bins, temperature_at_bound=at_bound)

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> "Calibration":
    known = {field.name for field in dataclasses.fields(cls)}
    return cls(**{key: value for key, value in values.items() if key in known})

  def summary(self) -> dict[str, Any]:
    """`to_dict` without the long score list, plus the threshold at the default coverage (None when out of
    reach with n rows)."""
    out = {key: value for key, value in self.to_dict().items() if key != "nonconformity"}
    out["threshold"] = self.threshold() if self.reachable() else None
    return out

  def reachable(self, coverage: float | None = None) -> bool:
    """Whether n calibration rows give sets of this coverage (default: `self.coverage`)."""
    try:
      conformal_rank(self.coverage if coverage is None else coverage, self.n)
    except ValueError:
      return False
    return True

  def probabilities(self, scores) -> np.ndarray:
    """softmax(scores / temperature) over the last axis (the classes scored), float64 `[n, C]`."""
    return softmax(scores, self.temperature)

  def threshold(self, coverage: float | None = None) -> float:
    """The split-conformal threshold on 1 - p for `coverage` (default `self.coverage`): the
    ceil((n + 1) * coverage)-th smallest calibration nonconformity.

    Raises:
      ValueError: naming the coverage when outside (0, 1) or out of reach with n rows.
    """
    return self.nonconformity[conformal_rank(self.coverage if coverage is None else coverage, self.n) - 1]

  def prediction_sets(self, probabilities, coverage: float | None = None) -> np.ndarray:
    """bool `[m, C]`: each row's class set at `coverage` (default `self.coverage`): the classes with 1 - p at
    most the threshold, and always the row's top class, so no set is empty. For rows exchangeable with the
    calibration rows, the true class is in the set with probability at least `coverage` (over rows and
    calibration draws).

    Raises:
      ValueError: naming the coverage when outside (0, 1) or out of reach with n rows.
    """
    return class_sets(probabilities, self.threshold(coverage))

  def evaluate(self, scores, labels, coverage: float | None = None) -> dict[str, Any]:
    """How calibrated the probabilities are on other labelled rows (`CalibrationMetrics.result`)."""
    metrics = CalibrationMetrics(self, coverage)
    metrics.update(scores, labels)
    return metrics.result()


class CalibrationMetrics:
  """Accumulates, batch by batch, a `Calibration`'s ECE and NLL before (T = 1) and after (T), and the
  empirical coverage and mean size of its class sets at `coverage` (skipped when out of reach with its n
  rows).

  Args:
    calibration: The fitted calibration.
    coverage: The sets' coverage; None for the calibration's default.
  """

  def __init__(self, calibration: Calibration, coverage: float | None = None):
    self._calibration = calibration
    self._coverage = calibration.coverage if coverage is None else check_coverage(coverage)
    self._threshold = calibration.threshold(self._coverage) if calibration.reachable(self._coverage) else None
    self._bins = {"before": np.zeros([3, calibration.bins]), "after": np.zeros([3, calibration.bins])}
    self._nll = {"before": 0.0, "after": 0.0}
    self._n, self._covered, self._set_sizes = 0, 0, 0

  def update(self, scores, labels) -> None:
    """`scores` float `[batch_size, C]`; `labels` int class ids `[batch_size]`."""
    scores = _check_scores(scores)
    labels = _check_labels(labels, len(scores), scores.shape[1])
    rows = np.arange(len(labels))
    for name, temperature in (("before", 1.0), ("after", self._calibration.temperature)):
      log_p = log_softmax(scores, temperature)
      self._bins[name] += _bin_sums(np.exp(log_p), labels, self._calibration.bins)
      self._nll[name] += float(-log_p[rows, labels].sum())
    if self._threshold is not None:
      sets = class_sets(np.exp(log_p), self._threshold)  # `log_p`: the calibrated ones, the loop's last.
      self._covered += int(sets[rows, labels].sum())
      self._set_sizes += int(sets.sum())
    self._n += len(labels)

  def result(self) -> dict[str, Any]:
    """{"n", "temperature", "ece_before", "ece_after", "nll_before", "nll_after", "coverage", "set_coverage"
    (share of rows whose set holds the true class; None when the coverage is out of reach), "mean_set_size",
    "coverage_warning" (`coverage_shortfall`'s note, or None)}."""
    n = max(self._n, 1)
    sets = self._threshold is not None and self._n > 0
    set_coverage = self._covered / n if sets else None
    return {"n": self._n, "temperature": self._calibration.temperature,
            "ece_before": _ece_of_bin_sums(self._bins["before"]),
            "ece_after": _ece_of_bin_sums(self._bins["after"]),
            "nll_before": self._nll["before"] / n, "nll_after": self._nll["after"] / n,
            "coverage": self._coverage,
            "set_coverage": set_coverage, "mean_set_size": self._set_sizes / n if sets else None,
            "coverage_warning": coverage_shortfall(self._coverage, set_coverage, self._n,
                                                   self._calibration.n)}


# How many standard deviations of chance a measured coverage may fall below its target before it is reported.
SHORTFALL_DEVIATIONS = 3.0


def coverage_shortfall(coverage: float, set_coverage: float | None, n: int,
                       calibration_rows: int) -> str | None:
  """A note when class sets cover fewer of `n` labelled rows than their `coverage` by more than chance, else
  None.

  Split-conformal sets hold the true class for `coverage` of the rows exchangeable with the `calibration_rows`
  they were calibrated on, up to chance: over the calibration draw the coverage has a standard deviation of
  about sqrt(c (1 - c) / (n_cal + 2)), and measured on n rows sqrt(c (1 - c) / n) more. A shortfall beyond
  `SHORTFALL_DEVIATIONS` of their combined deviation says the rows differ from the calibration rows (later in
  time, another source, other labels): the stated coverage does not hold for them. Surplus coverage is no
  error (the guarantee is a lower bound)."""
  if set_coverage is None or n < 1 or calibration_rows < 1:
    return None
  deviation = math.sqrt(coverage * (1 - coverage) * (1 / n + 1 / (calibration_rows + 2)))
  if coverage - set_coverage <= SHORTFALL_DEVIATIONS * deviation:
    return None
  return (f"the {100 * coverage:g}% class sets hold the true class for {100 * set_coverage:.2f}% of these "
          f"{n:,} rows, below the {100 * (coverage - SHORTFALL_DEVIATIONS * deviation):.1f}% chance allows: "
          f"these rows differ from the {calibration_rows:,} validation rows the sets were calibrated on, and "
          f"{100 * coverage:g}% does not hold for rows like them; calibrate on rows like those you will "
          "predict (rank4class-train --validation_files)")


def _percent(value: float | None) -> str:
  return "-" if value is None or math.isnan(value) else f"{100 * value:.2f}%"


def metrics_line(result: dict[str, Any]) -> str:
  """A `CalibrationMetrics.result` in one line: the temperature, ECE and NLL before -> after, and the class
  sets' empirical coverage and mean size."""
  line = (f"calibrated probabilities (temperature {result['temperature']:.3g}): ECE "
          f"{_percent(result['ece_before'])} -> {_percent(result['ece_after'])}, NLL "
          f"{result['nll_before']:.3f} -> {result['nll_after']:.3f}")
  if result.get("mean_set_size") is not None:
    line += (f"; {100 * result['coverage']:g}% class sets: coverage {_percent(result['set_coverage'])}, mean "
             f"size {result['mean_set_size']:.2f}")
  if result.get("coverage_warning"):
    line += f"\nWarning: {result['coverage_warning']}."
  return line


def summary_line(summary: dict[str, Any]) -> str:
  """A training run's calibration (`Calibration.summary`, with the test split's `CalibrationMetrics.result`
  under "test" when there is one) in one line: the temperature fitted on the validation rows, the ECE before
  -> after (on the test split, else on the validation rows), and on the test split the class sets' empirical
  coverage and mean size."""
  test = summary.get("test")
  stats, where = (test, "test") if test else (summary, "validation")
  bound = " (the end of the searched range)" if summary.get("temperature_at_bound") else ""
  fitted_on = summary.get("fitted_on", "validation")
  line = (f"Calibration ({fitted_on}, {summary['n']:,} rows): temperature "
          f"{summary['temperature']:.3g}{bound}; ECE {_percent(stats['ece_before'])} -> "
          f"{_percent(stats['ece_after'])} on {where}")
  coverage = 100 * summary["coverage"]
  if summary.get("threshold") is None:
    line += f"; too few {'validation ' if fitted_on == 'validation' else ''}rows for {coverage:g}% class sets"
  elif test and test.get("mean_set_size") is not None:
    line += (f"; {coverage:g}% class sets: coverage {_percent(test['set_coverage'])}, mean size "
             f"{test['mean_set_size']:.2f}")
  return line


def warning_line(summary: dict[str, Any]) -> str | None:
  """The coverage warning of a training run's calibration summary (on its test split), as a terminal line."""
  test = summary.get("test") or {}
  return f"Warning: the test split: {test['coverage_warning']}." if test.get("coverage_warning") else None
