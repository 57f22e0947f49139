"""Baselines beside every result: what a user would write with scikit-learn's defaults, fitted on the
training split and scored with the model's metrics on the split the model is reported on: the majority class,
TF-IDF + logistic regression, TF-IDF of word 1-2-grams + a linear SVM, and logistic regression on the model's
own inputs (frozen embeddings, dense features, pixels); nearest class centroids from many classes on.

The question a user asks first is whether the model beats what ten lines of scikit-learn would give; this
module answers it in every report, with each baseline's fit time. The baselines are not tuned: they are
scikit-learn's defaults, as a user runs them first (the run's own logistic regressions, trained along a
regularisation path and chosen on validation, are its candidates: `rank4class.training.linear_candidates`).
An optimiser that stops before converging is reported as such, never silently.

Example:
  reports = baselines.compute(baselines.BaselineConfig(), data, ks=(1, 5))
  print(baselines.format_lines(reports, model_metrics))
"""

import dataclasses
import time
import warnings
from typing import Any

import numpy as np
from scipy import sparse
from sklearn import exceptions as sklearn_exceptions
from sklearn import linear_model, preprocessing, svm
from sklearn.feature_extraction import text as sklearn_text
from threadpoolctl import threadpool_limits

from rank4class.inference import full_class_scoring, served
from rank4class_data import classification_data as data_lib
from rank4class_data.validation import check_range

MAJORITY = "majority"
TFIDF_LR = "tfidf_lr"
TFIDF_SVM = "tfidf_svm"
TFIDF_CENTROID = "tfidf_centroid"
EMBEDDING_LR = "embedding_lr"
EMBEDDING_CENTROID = "embedding_centroid"
FEATURES_LR = "features_lr"
FEATURES_CENTROID = "features_centroid"
PIXELS_LR = "pixels_lr"
PIXELS_CENTROID = "pixels_centroid"
LABELS = {
    MAJORITY: "majority class",
    TFIDF_LR: "TF-IDF + LR",
    TFIDF_SVM: "TF-IDF 1-2-grams + LinearSVC",
    TFIDF_CENTROID: "TF-IDF nearest centroid",
    EMBEDDING_LR: "LR on the frozen embeddings",
    EMBEDDING_CENTROID: "nearest centroid, frozen embeddings",
    FEATURES_LR: "LR on the features",
    FEATURES_CENTROID: "nearest centroid, features",
    PIXELS_LR: "LR on pixels",
    PIXELS_CENTROID: "nearest centroid, pixels",
}
# The reported metric that names the best baseline (lower is better).
HEADLINE_METRIC = "top_1_error"
# The linear SVM's TF-IDF: word 1-2-grams, sublinear term frequency, terms in at least two training texts
# (what a practitioner tries next after the defaults).
SVM_TFIDF = {"ngram_range": (1, 2), "sublinear_tf": True, "min_df": 2}


@dataclasses.dataclass
class BaselineConfig:
  """Which baselines are fitted, and on how many rows.

  Attributes:
    max_classes: From this many classes on, the logistic regressions and the SVM (C x features weights,
      C x n x features work per iteration) are replaced by the nearest class centroid (cosine) on the same
      features.
    max_train_rows: Rows the baselines are fitted on at most: a random subset of the training split beyond it,
      stated in the report.
  """

  max_classes: int = 500
  max_train_rows: int = 200_000

  def __post_init__(self):
    for name in ("max_classes", "max_train_rows"):
      check_range(name, getattr(self, name), 1, integer=True)


@dataclasses.dataclass
class _Features:
  """One kind of baseline input on the training and evaluated splits, and how it is fitted."""

  name: str  # the baseline's name; the centroid's comes from `_CENTROID_OF`
  train: Any
  evaluated: Any


_CENTROID_OF = {TFIDF_LR: TFIDF_CENTROID, EMBEDDING_LR: EMBEDDING_CENTROID, FEATURES_LR: FEATURES_CENTROID,
                PIXELS_LR: PIXELS_CENTROID}


def _tfidf(texts: tuple[np.ndarray, np.ndarray], **settings) -> tuple:
  """TF-IDF matrices of (train, evaluated) texts by scikit-learn's `TfidfVectorizer(**settings)`, the
  vocabulary from the training texts alone; texts without a single word (e.g. digits only) count single
  characters as words."""
  train = [str(t) for t in texts[0]]
  vectorizer = sklearn_text.TfidfVectorizer(dtype=np.float32, **settings)
  try:
    matrix = vectorizer.fit_transform(train)
  except ValueError:
    vectorizer.set_params(token_pattern=r"(?u)\b\w+\b", min_df=1)
    matrix = vectorizer.fit_transform(train)
  return matrix, vectorizer.transform([str(t) for t in texts[1]])


def _dense(arrays: tuple[np.ndarray, ...], scale: float | None) -> tuple:
  """Flattened float32 features; pixels scaled by `scale`, other features standardised on the training split
  (scikit-learn's StandardScaler, as a user puts it before LogisticRegression)."""
  flat = [np.asarray(a, np.float32).reshape(len(a), -1) for a in arrays]
  if scale is not None:
    return tuple(f / scale for f in flat)
  scaler = preprocessing.StandardScaler().fit(flat[0])
  return tuple(scaler.transform(f).astype(np.float32) for f in flat)


def baseline_features(data: data_lib.PreparedData, splits: dict[str, tuple[np.ndarray, np.ndarray]]
                      ) -> tuple[list[_Features], list[str]]:
  """The inputs the baselines are fitted on, by the data's input kind, and notes on what is left out.

  Args:
    data: The prepared data (its input kind and, for frozen text, the raw texts).
    splits: "train", "evaluated" -> (features, class ids) as the model reads them.
  """
  kind, notes, found = data.input_kind, [], []
  if kind == data_lib.EMBEDDING_INPUT and data.raw_texts is not None:
    raw = data.raw_texts
    texts = (raw[0], raw[2] if data.test is not None else raw[1])
    if all(t is not None for t in texts):
      found.append(_Features(TFIDF_LR, *_tfidf(texts)))
      found.append(_Features(TFIDF_SVM, *_tfidf(texts, **SVM_TFIDF)))
    found.append(_Features(EMBEDDING_LR, *_dense((splits["train"][0], splits["evaluated"][0]), None)))
  elif kind == data_lib.TEXT_INPUT:
    texts = (splits["train"][0], splits["evaluated"][0])
    found += [_Features(TFIDF_LR, *_tfidf(texts)), _Features(TFIDF_SVM, *_tfidf(texts, **SVM_TFIDF))]
    notes.append("LR on frozen embeddings: not computed for raw-text models (`text_mode`=frozen "
                 "embeds the texts)")
  elif kind == data_lib.IMAGE_INPUT:
    found.append(_Features(PIXELS_LR, *_dense((splits["train"][0], splits["evaluated"][0]), 255.0)))
  else:
    found.append(_Features(FEATURES_LR, *_dense((splits["train"][0], splits["evaluated"][0]), None)))
  return found, notes


def _majority_ranks(train_labels: np.ndarray, labels: np.ndarray, num_classes: int) -> np.ndarray:
  """Ranks of the true classes when every row ranks the classes by their training frequency, classes of equal
  frequency by class id (one fixed order, as a classifier predicting the majority class gives: a tie never
  counts as a hit for every class at once)."""
  counts = np.bincount(train_labels, minlength=num_classes)
  order = np.lexsort((np.arange(num_classes), -counts))  # Most frequent first, then by id.
  rank_of = np.empty(num_classes, np.float64)
  rank_of[order] = np.arange(num_classes)
  return rank_of[labels]


def one_blas_thread():
  """A context in which NumPy's and SciPy's BLAS run on one thread.

  lbfgs' vector updates and the [rows, features] x [features, classes] products of a logistic regression are
  too small to share: on 2 cores the second BLAS thread spins against TensorFlow's threads and the fits take
  5-30x longer (Reuters R8, 1,800 rows: 36 s of fits against 3 s on one thread; 10,000 x 784 dense rows:
  4.5x).
  """
  return threadpool_limits(limits=1, user_api="blas")


def _fit(name: str, features, labels: np.ndarray) -> tuple[Any, dict[str, Any]]:
  """scikit-learn's default model of baseline `name` (LinearSVC for `TFIDF_SVM`, else LogisticRegression),
  fitted, and whether its solver converged (its ConvergenceWarning caught)."""
  model = svm.LinearSVC() if name == TFIDF_SVM else linear_model.LogisticRegression()
  with one_blas_thread(), warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", sklearn_exceptions.ConvergenceWarning)
    model.fit(features, labels)
  converged = not any(issubclass(w.category, sklearn_exceptions.ConvergenceWarning) for w in caught)
  return model, {"inverse_regularization": float(model.C), "converged": converged,
                 "iterations": int(np.max(model.n_iter_)), "max_iter": int(model.max_iter),
                 "solver": "liblinear" if name == TFIDF_SVM else model.solver}


def _all_class_scores(model: Any, features, num_classes: int) -> np.ndarray:
  """Scores over every class id (log-probabilities of a logistic regression, decision values of an SVM);
  classes the training split lacks score -inf (ranked last)."""
  scores = np.full((features.shape[0], num_classes), -np.inf)
  if len(model.classes_) == 1:
    scores[:, model.classes_[0]] = 0.0
    return scores
  with one_blas_thread(), np.errstate(divide="ignore"):  # Underflow to probability 0 ranks last: log 0.
    if hasattr(model, "predict_log_proba"):
      scores[:, model.classes_] = model.predict_log_proba(features)
    else:
      decision = model.decision_function(features)
      scores[:, model.classes_] = np.stack([-decision, decision], 1) if decision.ndim == 1 else decision
  return scores


_CENTROID_ROWS = 1024  # Evaluated rows scored at a time: [rows, classes] scores stay small at many classes.


def _centroid_ranks(features: _Features, train_labels: np.ndarray, labels: np.ndarray,
                    num_classes: int) -> np.ndarray:
  """Ranks of the true classes by cosine similarity to each class's mean training row (a class without
  training rows is ranked last)."""
  members = sparse.csr_matrix((np.ones(len(train_labels)), (train_labels, np.arange(len(train_labels)))),
                              shape=(num_classes, len(train_labels)))
  centroids = preprocessing.normalize(members @ features.train)
  absent = np.bincount(train_labels, minlength=num_classes) == 0
  ranks = []
  for begin in range(0, len(labels), _CENTROID_ROWS):
    rows = preprocessing.normalize(features.evaluated[begin:begin + _CENTROID_ROWS])
    scores = rows @ centroids.T
    scores = scores.toarray() if sparse.issparse(scores) else np.asarray(scores)
    scores[:, absent] = -np.inf
    ranks.append(served.strictly_higher_ranks(scores, labels[begin:begin + _CENTROID_ROWS]))
  return np.concatenate(ranks)


def _subsample_training_rows(config: BaselineConfig, data: data_lib.PreparedData, read: dict[str, tuple],
                             notes: list[str]) -> data_lib.PreparedData:
  """Keeps `config.max_train_rows` random training rows (seed 0) in `read["train"]` and the data's raw texts
  when there are more, saying so in `notes`; returns the data."""
  train_x, train_y = read["train"]
  if len(train_y) > config.max_train_rows:
    keep = np.sort(np.random.default_rng(0).choice(len(train_y), config.max_train_rows, replace=False))
    notes.append(f"fitted on {config.max_train_rows:,} random rows of the {len(train_y):,} training rows")
    read["train"] = (train_x[keep], train_y[keep])
    if data.raw_texts is not None:
      data = dataclasses.replace(data, raw_texts=(data.raw_texts[0][keep], *data.raw_texts[1:]))
  return data


def compute(config: BaselineConfig, data: data_lib.PreparedData, ks: tuple[int, ...] = (1, 5),
            progress=None) -> dict[str, Any]:
  """The baselines' reports on the split the model is reported on: the test split when there is one, else the
  validation split.

  Args:
    config: Baseline settings.
    data: The run's prepared data.
    ks: Cutoffs K of top-K error and NDCG@K (the model's).
    progress: Optional callable taking one line of text, told as each baseline starts.

  Returns:
    {"split": "test" or "validation", "n": rows scored, "train_rows": rows fitted on, "rows": [{"name",
    "label", "metrics" (`full_class_scoring.rank_metrics`), "seconds", and for LR "fit": C, validation error,
    converged, iterations}], "notes": [lines]}; {"skipped": reason} when baselines do not apply (graded class
    lists).
  """
  split_name = "test" if data.test is not None else "validation"
  read = {"train": data_lib.read_split(data.train, data.input_kind)}
  read["evaluated"] = data_lib.read_split(data.test if data.test is not None else data.validation,
                                          data.input_kind)
  if any(np.asarray(y).ndim != 1 for _, y in read.values()):
    return {"skipped": "graded class lists (ELWC): a baseline would score the most relevant class only"}
  num_classes, notes = len(data.class_names), []
  data = _subsample_training_rows(config, data, read, notes)
  labels = {name: np.asarray(y, np.int64) for name, (_, y) in read.items()}
  rows = []
  start = time.perf_counter()
  rows.append(_row(MAJORITY, _majority_ranks(labels["train"], labels["evaluated"], num_classes), ks, start))
  if len(np.unique(labels["train"])) < 2:
    notes.append("one class in the training rows: only the majority class applies")
    return {"split": split_name, "n": int(len(labels["evaluated"])), "train_rows": int(len(labels["train"])),
            "rows": rows, "notes": notes}
  features, feature_notes = baseline_features(data, read)
  notes += feature_notes
  many = num_classes >= config.max_classes
  for found in features:
    if many and found.name not in _CENTROID_OF:
      continue
    name = _CENTROID_OF[found.name] if many else found.name
    if progress:
      progress(f"Baseline: {LABELS[name]}")
    start = time.perf_counter()
    if many:
      rows.append(_row(name, _centroid_ranks(found, labels["train"], labels["evaluated"], num_classes), ks,
                       start))
      continue
    model, fit = _fit(name, found.train, labels["train"])
    ranks = served.strictly_higher_ranks(_all_class_scores(model, found.evaluated, num_classes),
                                         labels["evaluated"])
    rows.append({**_row(name, ranks, ks, start), "fit": fit})
  if many and features:
    notes.append(f"{num_classes:,} classes: nearest class centroids instead of logistic regression and the "
                 f"SVM (from {config.max_classes:,} classes on)")
  return {"split": split_name, "n": int(len(labels["evaluated"])), "train_rows": int(len(labels["train"])),
          "rows": rows, "notes": notes}


def compute_or_note(config: BaselineConfig, data: data_lib.PreparedData, ks: tuple[int, ...] = (1, 5),
                    progress=None) -> dict[str, Any]:
  """`compute`, or {"skipped": "failed: <error>"} when a baseline fails (texts without a single term, a solver
  error): the baselines are a report beside a finished run, so their failure is said, never lets the run end
  without its result."""
  try:
    return compute(config, data, ks, progress)
  except (ValueError, ArithmeticError, MemoryError) as error:
    return {"skipped": f"failed: {type(error).__name__}: {error}"}


def _row(name: str, ranks: np.ndarray, ks: tuple[int, ...], start: float) -> dict[str, Any]:
  return {"name": name, "label": LABELS[name], "metrics": full_class_scoring.rank_metrics(ranks, ks),
          "seconds": time.perf_counter() - start}


def best_row(report: dict[str, Any], metric: str = HEADLINE_METRIC) -> dict[str, Any] | None:
  """The baseline with the lowest `metric` (an error), None when there is none."""
  rows = [row for row in report.get("rows", []) if metric in row["metrics"]]
  return min(rows, key=lambda row: row["metrics"][metric]) if rows else None


def _c_note(report: dict[str, Any]) -> str:
  return "; scikit-learn's defaults" if any("fit" in row for row in report["rows"]) else ""


def fit_note(row: dict[str, Any]) -> str:
  """"NOT CONVERGED after N iterations" when the baseline's solver stopped short; "" otherwise."""
  fit = row.get("fit")
  if fit is None or fit["converged"]:
    return ""
  return f"NOT CONVERGED after {fit['max_iter']} iterations"


def format_lines(report: dict[str, Any], model_metrics: dict[str, float] | None,
                 metric: str = HEADLINE_METRIC) -> str:
  """The baselines' table beside the model (x100, as the model's table), and the "model X vs best baseline Y"
  line."""
  if "skipped" in report:
    return f"Baselines: skipped ({report['skipped']}).\n"
  names = [m for m in ("top_1_error", "top_5_error", "mrr") if m in report["rows"][0]["metrics"]]
  width = max(len(row["label"]) for row in report["rows"]) + 2
  lines = [f"Baselines on the {report['split']} split ({report['n']:,} rows; fitted on the "
           f"{report['train_rows']:,} training rows{_c_note(report)}):",
           f"{'':<{width}}" + "".join(f"{n:>14}" for n in names) + "   fit"]
  if model_metrics is not None:
    lines.append(f"{'model':<{width}}" + "".join(f"{_percent(model_metrics.get(n)):>14}" for n in names))
  for row in report["rows"]:
    note = fit_note(row)
    lines.append(f"{row['label']:<{width}}" + "".join(f"{_percent(row['metrics'][n]):>14}" for n in names)
                 + f"   {row['seconds']:.1f} s" + (f", {note}" if note else ""))
  lines += [f"  note: {note}" for note in report["notes"]]
  best = best_row(report, metric)
  if model_metrics is not None and best is not None and metric in model_metrics:
    lines.append(versus_line(model_metrics[metric], best, metric))
  return "\n".join(lines) + "\n"


def markdown_table(report: dict[str, Any], metrics: tuple[tuple[str, str], ...]) -> list[str]:
  """Markdown lines of the baselines' `metrics` ((name, label) pairs; x100; one deterministic fit each, so no
  spread), their fits and notes; one line when they were skipped."""
  if "skipped" in report:
    return [f"Baselines: skipped ({report['skipped']})."]
  lines = [f"Baselines outside Rank4Class, same {report['split']} split (fitted on the "
           f"{report['train_rows']:,} training rows{_c_note(report)}):", "",
           "| Baseline | " + " | ".join(label for _, label in metrics) + " | Fit |",
           "|---|" + "---:|" * len(metrics) + "---|"]
  for row in report["rows"]:
    values = " | ".join(f"{100 * row['metrics'][name]:.2f}" for name, _ in metrics)
    lines.append(f"| {row['label']} | {values} | {fit_note(row) or '–'} |")
  return lines + [f"Note: {note}." for note in report["notes"]]


def versus_line(model_value: float, best: dict[str, Any], metric: str = HEADLINE_METRIC) -> str:
  """"Model top-1 error 5.21 vs best baseline (TF-IDF + LR) 3.15: worse by 2.06 points." (x100)."""
  difference = 100 * (model_value - best["metrics"][metric])
  verdict = ("better by" if difference < 0 else "worse by") + f" {abs(difference):.2f} points"
  if abs(difference) < 0.005:
    verdict = "equal"
  label = metric.replace("_error", " error").replace("_", "-")
  return (f"Model {label} {_percent(model_value)} vs best baseline ({best['label']}) "
          f"{_percent(best['metrics'][metric])}: {verdict}.")


def _percent(value: float | None) -> str:
  return "-" if value is None else f"{100 * value:.2f}"
