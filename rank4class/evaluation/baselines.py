"""Baselines beside every result: the majority class, TF-IDF + logistic regression on the raw texts, and
logistic regression on the model's own inputs (frozen embeddings, dense features, pixels), each fitted on the
training split and scored with the model's metrics on the split the model is reported on.

The question a user asks first is whether the model beats what ten lines of scikit-learn would give; this
module answers it in every report. The baselines are not tuned less than the model: logistic regression's
inverse regularisation C is chosen on the validation split (as the model's best step is), fitted on the
training split alone. An optimiser that stops before converging is reported as such, never silently.

Example:
  reports = baselines.compute(baselines.BaselineConfig(), data, ks=(1, 5))
  print(baselines.format_lines(reports, model_metrics))
"""

import dataclasses
import json
import math
import os
import sys
import time
import warnings
from typing import Any

import numpy as np

from rank4class.inference import full_class_scoring, served
from rank4class.modeling.tfidf_encoder import min_document_frequency
from rank4class_data import classification_data as data_lib
from rank4class_data import datasets
from rank4class_data.validation import atomic_output, check_range

MAJORITY = "majority"
TFIDF_LR = "tfidf_lr"
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


@dataclasses.dataclass
class BaselineConfig:
  """How the baselines are fitted.

  Attributes:
    inverse_regularization: Logistic regression's C values, the one with the lowest validation log-loss kept
      (`choose_logistic_regression`).
    max_iter: lbfgs iterations per fit; a fit that needs more is reported as not converged.
    max_classes: From this many classes on, logistic regression (C x features weights, C x n x features work
      per iteration) is replaced by the nearest class centroid (cosine) on the same features.
    max_train_rows: Rows the baselines are fitted on at most: a random subset of the training split beyond it,
      stated in the report (none of the data sets shipped here reaches it).
    select_rows: Training rows of the fits that choose C: a stratified subset beyond it, the chosen C then
      fitted on every row (Fashion-MNIST's 54,000 rows x 784 pixels take minutes per fit).
    tfidf_max_features: Vocabulary size of the TF-IDF vectorizer (words and word pairs, sublinear term
      frequency, terms in at least two training texts).
  """

  inverse_regularization: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0)
  max_iter: int = 1000
  max_classes: int = 500
  max_train_rows: int = 200_000
  select_rows: int = 10_000
  tfidf_max_features: int = 100_000

  def __post_init__(self):
    self.inverse_regularization = tuple(float(c) for c in self.inverse_regularization)
    if not self.inverse_regularization:
      raise ValueError("`inverse_regularization` must list at least one C value, got "
                       f"{self.inverse_regularization}.")
    for c in self.inverse_regularization:
      check_range("inverse_regularization", c, 0, low_inclusive=False)
    for name in ("max_iter", "max_classes", "max_train_rows", "select_rows", "tfidf_max_features"):
      check_range(name, getattr(self, name), 1, integer=True)


@dataclasses.dataclass
class _Features:
  """One kind of baseline input on the three splits (train, validation, evaluated)."""

  name: str  # the LR baseline's name; the centroid's comes from `_CENTROID_OF`
  train: Any
  validation: Any
  evaluated: Any


_CENTROID_OF = {TFIDF_LR: TFIDF_CENTROID, EMBEDDING_LR: EMBEDDING_CENTROID, FEATURES_LR: FEATURES_CENTROID,
                PIXELS_LR: PIXELS_CENTROID}


# scikit-learn and SciPy are imported where they are used: about 1 s at start-up that `rank4class-train
# --nobaselines`, a killed and resumed run's unfinished processes, and every importer of this module never
# pay.


def _tfidf(texts: tuple[np.ndarray, np.ndarray, np.ndarray], max_features: int) -> tuple:
  """TF-IDF matrices of (train, validation, evaluated) texts, the vocabulary from the training texts alone."""
  from sklearn.feature_extraction import text as sklearn_text  # pylint: disable=g-import-not-at-top
  train = [str(t) for t in texts[0]]
  vectorizer = sklearn_text.TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), max_features=max_features,
                                            min_df=min_document_frequency(len(train)), dtype=np.float32)
  try:
    matrix = vectorizer.fit_transform(train)
  except ValueError:  # Texts without a single word (e.g. digits only): single characters count as terms.
    vectorizer.set_params(token_pattern=r"(?u)\b\w+\b", min_df=1)
    matrix = vectorizer.fit_transform(train)
  return matrix, *(vectorizer.transform([str(t) for t in split]) for split in texts[1:])


def standardize(arrays: tuple[np.ndarray, ...]) -> tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
  """Flattened float32 features standardized on the first (training) array, and the mean and scale used (a
  constant feature has scale 1: centred, not scaled), as scikit-learn's StandardScaler computes them."""
  from sklearn import preprocessing  # pylint: disable=g-import-not-at-top
  flat = [np.asarray(a, np.float32).reshape(len(a), -1) for a in arrays]
  scaler = preprocessing.StandardScaler().fit(flat[0])
  return tuple(scaler.transform(f).astype(np.float32) for f in flat), scaler.mean_, scaler.scale_


def _dense(arrays: tuple[np.ndarray, ...], scale: float | None) -> tuple:
  """Flattened float32 features; pixels scaled by `scale`, other features standardized on the training
  split."""
  if scale is not None:
    return tuple(np.asarray(a, np.float32).reshape(len(a), -1) / scale for a in arrays)
  return standardize(arrays)[0]


def baseline_features(data: data_lib.PreparedData, splits: dict[str, tuple[np.ndarray, np.ndarray]],
                      config: BaselineConfig) -> tuple[list[_Features], list[str]]:
  """The inputs the baselines are fitted on, by the data's input kind, and notes on what is left out.

  Args:
    data: The prepared data (its input kind and, for frozen text, the raw texts).
    splits: "train", "validation", "evaluated" -> (features, class ids) as the model reads them.
    config: Baseline settings.
  """
  kind, notes, found = data.input_kind, [], []
  names = ("train", "validation", "evaluated")
  if kind == data_lib.EMBEDDING_INPUT and data.raw_texts is not None:
    raw = data.raw_texts
    texts = (raw[0], raw[1], raw[2] if splits["evaluated"] is not splits["validation"] else raw[1])
    if all(t is not None for t in texts):
      found.append(_Features(TFIDF_LR, *_tfidf(texts, config.tfidf_max_features)))
    found.append(_Features(EMBEDDING_LR, *_dense(tuple(splits[n][0] for n in names), None)))
  elif kind == data_lib.TEXT_INPUT:
    found.append(_Features(TFIDF_LR, *_tfidf(tuple(splits[n][0] for n in names), config.tfidf_max_features)))
    notes.append("LR on frozen embeddings: not computed for raw-text models (`text_mode`=frozen "
                 "embeds the texts)")
  elif kind == data_lib.IMAGE_INPUT:
    found.append(_Features(PIXELS_LR, *_dense(tuple(splits[n][0] for n in names), 255.0)))
  else:
    found.append(_Features(FEATURES_LR, *_dense(tuple(splits[n][0] for n in names), None)))
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


def _lr_scores(features: _Features, labels: tuple[np.ndarray, np.ndarray], num_classes: int,
               config: BaselineConfig) -> tuple[np.ndarray, dict[str, Any]]:
  """Scores over all classes of the evaluated rows from the LR `choose_logistic_regression` picks."""
  model, fit = choose_logistic_regression(features.train, labels[0], features.validation, labels[1], config)
  return _all_class_scores(model, features.evaluated, num_classes), fit


# The fits `choose_logistic_regression` made in this process, by their inputs' fingerprint: a training run
# that validates the LR of its own inputs as a candidate
# (`rank4class.training.model_setup.logistic_regression_model`) and then reports that LR as a baseline fits it
# once.
_FITS: dict[str, tuple[Any, dict[str, Any]]] = {}
_MAX_FITS = 16


def _fingerprint(*parts: Any) -> str:
  import hashlib  # pylint: disable=g-import-not-at-top

  from scipy import sparse  # pylint: disable=g-import-not-at-top
  digest = hashlib.blake2b(digest_size=16)
  for part in parts:
    if sparse.issparse(part):
      part = part.tocsr()
      for array in (part.data, part.indices, part.indptr):
        digest.update(np.ascontiguousarray(array).tobytes())
      digest.update(repr(part.shape).encode())
    elif isinstance(part, np.ndarray):
      digest.update(np.ascontiguousarray(part).tobytes())
      digest.update(repr((part.shape, part.dtype.str)).encode())
    else:
      digest.update(repr(part).encode())
  return digest.hexdigest()


def validation_log_loss(model: Any, features, labels: np.ndarray) -> float:
  """Mean negative log-probability of the true class over the validation rows whose class the training split
  has (a class it lacks has no probability to score); inf when there is no such row."""
  known = np.isin(labels, model.classes_)
  if not np.any(known):
    return math.inf
  column = np.searchsorted(model.classes_, labels[known])
  probabilities = model.predict_proba(features[np.flatnonzero(known)])
  return float(-np.mean(np.log(np.maximum(probabilities[np.arange(len(column)), column], 1e-15))))


def choose_logistic_regression(train_x, train_y: np.ndarray, validation_x, validation_y: np.ndarray,
                               config: BaselineConfig) -> tuple[Any, dict[str, Any]]:
  """The multinomial logistic regression whose C has the lowest validation log-loss, fitted on the training
  rows.

  C is chosen by log-loss, not by top-1 error: on a validation split of a few hundred rows the error moves in
  steps of 1/n and ties or flips between C values by chance (a C of 100 chosen on 200 rows scored 6.7 points
  below scikit-learn's default C=1 on a 16-class set of headlines), while the log-loss is smooth in C and
  rewards the calibrated fit. Each C is fitted from scratch (a warm start from the last C's weights can stop
  at once: the objective is a mean over rows, so its gradient moves by ~1/(C n), under lbfgs' tolerance at
  tens of thousands of rows). Beyond `select_rows` training rows, C is chosen with fits on a stratified subset
  of that many rows and the chosen C is then fitted on every row. Fits are remembered by their inputs within
  the process and on disk (`FIT_CACHE_DIR`), so a rerun on the same data (a resumed or repeated run) refits
  nothing.

  Returns:
    (the fitted scikit-learn model, {"inverse_regularization", "validation_log_loss",
    "validation_top_1_error", "converged", "iterations", "max_iter", "train_rows", "selection_rows"}).
  """
  key = _fingerprint(train_x, train_y, validation_x, validation_y, config.inverse_regularization,
                     config.max_iter, config.select_rows, _solver_versions())
  if key in _FITS:
    return _FITS[key]
  found = _stored_fit(key)
  if found is not None:
    model, fit = found
  else:
    with one_blas_thread():
      model, fit = _choose_logistic_regression(train_x, train_y, validation_x, validation_y, config)
    _store_fit(key, model, fit)
  if len(_FITS) >= _MAX_FITS:
    _FITS.pop(next(iter(_FITS)))
  _FITS[key] = (model, fit)
  return model, fit


# The chosen fits on disk, one `<fingerprint>.npz` each (weights, intercepts, classes, the fit's summary),
# keyed by the inputs, the settings and the solver's versions: the same numbers as a refit, with no pickle to
# trust. A rerun on the same 2,000 rows of Reuters R8 skips ~7 s of fits. The least recently used files beyond
# `FIT_CACHE_BYTES` are removed; a file that does not read is refitted.
FIT_CACHE_DIR = os.path.join("~", ".cache", "rank4class", "logistic_regression")
FIT_CACHE_BYTES = 512 * 2**20
_FIT_CACHE_ENV = "RANK4CLASS_FIT_CACHE_DIR"  # Another folder, or "" for none (tests that time or count fits).


def _fit_cache_dir() -> str | None:
  folder = os.environ.get(_FIT_CACHE_ENV, FIT_CACHE_DIR)
  return os.path.expanduser(folder) if folder else None


def _solver_versions() -> str:
  """What a stored fit depends on besides its inputs: the libraries' versions and the fitting code, as the
  source of this module and of the stratified split (any change to how C is chosen makes every stored fit
  stale)."""
  import inspect  # pylint: disable=g-import-not-at-top

  import scipy  # pylint: disable=g-import-not-at-top
  import sklearn  # pylint: disable=g-import-not-at-top

  from rank4class_data import stratified_split  # pylint: disable=g-import-not-at-top
  try:
    code = inspect.getsource(sys.modules[__name__]) + inspect.getsource(stratified_split)
  except (OSError, TypeError):  # No source to read (a frozen install): the code's identity is the version's.
    from rank4class_engine.version import __version__  # pylint: disable=g-import-not-at-top
    code = __version__
  return f"sklearn {sklearn.__version__}, scipy {scipy.__version__}, numpy {np.__version__}, {code}"


def _stored_fit(key: str) -> tuple[Any, dict[str, Any]] | None:
  """The fit stored under `key`, or None when there is none (or it does not read)."""
  folder = _fit_cache_dir()
  if folder is None:
    return None
  path = os.path.join(folder, key + ".npz")
  try:
    with np.load(path, allow_pickle=False) as stored:
      arrays = {name: stored[name] for name in ("coef", "intercept", "classes", "n_iter", "fit")}
    fit = json.loads(str(arrays["fit"]))
    os.utime(path)  # Recently used: evicted last.
  except (OSError, ValueError, KeyError):
    return None
  from sklearn import linear_model  # pylint: disable=g-import-not-at-top
  model = linear_model.LogisticRegression(C=fit["inverse_regularization"], max_iter=fit["max_iter"])
  model.coef_, model.intercept_, model.classes_ = arrays["coef"], arrays["intercept"], arrays["classes"]
  model.n_iter_, model.n_features_in_ = arrays["n_iter"], arrays["coef"].shape[1]
  return model, fit


def _store_fit(key: str, model: Any, fit: dict[str, Any]) -> None:
  """Stores the fit under `key` (atomically), then trims the folder to `FIT_CACHE_BYTES`; a folder that cannot
  be written only costs the refit next time."""
  folder = _fit_cache_dir()
  if folder is None:
    return
  try:
    os.makedirs(folder, exist_ok=True)
    with atomic_output(os.path.join(folder, key + ".npz"), "wb", encoding=None) as f:
      np.savez(f, coef=np.asarray(model.coef_), intercept=np.asarray(model.intercept_),
               classes=np.asarray(model.classes_), n_iter=np.asarray(model.n_iter_),
               fit=np.asarray(json.dumps(fit)))
    files = [os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".npz")]
    files.sort(key=os.path.getmtime, reverse=True)
    total = 0
    for index, path in enumerate(files):  # The newest (this fit) is kept whatever its size.
      total += os.path.getsize(path)
      if index and total > FIT_CACHE_BYTES:
        os.remove(path)
  except OSError:
    pass


def _choose_logistic_regression(train_x, train_y: np.ndarray, validation_x, validation_y: np.ndarray,
                                config: BaselineConfig) -> tuple[Any, dict[str, Any]]:
  subset = None
  if len(train_y) > config.select_rows:
    _, subset = datasets.train_validation_split(train_y, config.select_rows / len(train_y), 0)
  best = None
  for c in config.inverse_regularization:
    model, converged = _fit_lr(train_x[subset] if subset is not None else train_x,
                               train_y[subset] if subset is not None else train_y, c, config.max_iter)
    loss = validation_log_loss(model, validation_x, validation_y)
    if best is None or loss < best[0]:
      best = (loss, c, model, converged)
  loss, c, model, converged = best
  if subset is not None:
    model, converged = _fit_lr(train_x, train_y, c, config.max_iter)
  error = (
    float(np.mean(model.classes_[np.argmax(model.predict_proba(validation_x), axis=1)] != validation_y))
    if len(model.classes_) > 1
    else float(np.mean(validation_y != model.classes_[0]))
  )
  fit = {"inverse_regularization": c, "validation_log_loss": loss, "validation_top_1_error": error,
         "converged": converged, "iterations": int(np.max(model.n_iter_)), "max_iter": config.max_iter,
         "train_rows": int(len(train_y)),
         "selection_rows": int(len(subset)) if subset is not None else int(len(train_y))}
  return model, fit


def one_blas_thread():
  """A context in which NumPy's and SciPy's BLAS run on one thread.

  lbfgs' vector updates and the [rows, features] x [features, classes] products of a logistic regression are
  too small to share: on 2 cores the second BLAS thread spins against TensorFlow's threads and the fits take
  5-30x longer (Reuters R8, 1,800 rows: 36 s of fits against 3 s on one thread; 10,000 x 784 dense rows:
  4.5x).
  """
  from threadpoolctl import threadpool_limits  # pylint: disable=g-import-not-at-top  (scikit-learn's dependency)
  return threadpool_limits(limits=1, user_api="blas")


def _fit_lr(features, labels: np.ndarray, c: float, max_iter: int) -> tuple[Any, bool]:
  """A logistic regression fitted from scratch, and whether lbfgs converged (its ConvergenceWarning
  caught)."""
  from sklearn import exceptions as sklearn_exceptions  # pylint: disable=g-import-not-at-top
  from sklearn import linear_model  # pylint: disable=g-import-not-at-top
  with one_blas_thread(), warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", sklearn_exceptions.ConvergenceWarning)
    model = linear_model.LogisticRegression(C=c, max_iter=max_iter).fit(features, labels)
  return model, not any(issubclass(w.category, sklearn_exceptions.ConvergenceWarning) for w in caught)


def _all_class_scores(model: Any, features, num_classes: int) -> np.ndarray:
  """Log-probabilities over every class id; classes the training split lacks score -inf (ranked last)."""
  scores = np.full((features.shape[0], num_classes), -np.inf)
  if len(model.classes_) == 1:
    scores[:, model.classes_[0]] = 0.0
  else:
    # Underflow to probability 0 ranks last: log 0 = -inf.
    with one_blas_thread(), np.errstate(divide="ignore"):
      scores[:, model.classes_] = model.predict_log_proba(features)
  return scores


_CENTROID_ROWS = 1024  # Evaluated rows scored at a time: [rows, classes] scores stay small at many classes.


def _centroid_ranks(features: _Features, train_labels: np.ndarray, labels: np.ndarray,
                    num_classes: int) -> np.ndarray:
  """Ranks of the true classes by cosine similarity to each class's mean training row (a class without
  training rows is ranked last)."""
  from scipy import sparse  # pylint: disable=g-import-not-at-top
  from sklearn import preprocessing  # pylint: disable=g-import-not-at-top
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
  read = {"train": data_lib.read_split(data.train, data.input_kind),
          "validation": data_lib.read_split(data.validation, data.input_kind)}
  read["evaluated"] = (
    data_lib.read_split(data.test, data.input_kind) if data.test is not None else read["validation"]
  )
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
  features, feature_notes = baseline_features(data, read, config)
  notes += feature_notes
  for found in features:
    start = time.perf_counter()
    if num_classes >= config.max_classes:
      name = _CENTROID_OF[found.name]
      if progress:
        progress(f"Baseline: {LABELS[name]}")
      ranks = _centroid_ranks(found, labels["train"], labels["evaluated"], num_classes)
      rows.append(_row(name, ranks, ks, start))
      continue
    if progress:
      progress(f"Baseline: {LABELS[found.name]}")
    scores, fit = _lr_scores(found, (labels["train"], labels["validation"]), num_classes, config)
    row = _row(found.name, served.strictly_higher_ranks(scores, labels["evaluated"]), ks, start)
    row["fit"] = fit
    rows.append(row)
  if num_classes >= config.max_classes and features:
    notes.append(f"{num_classes:,} classes: nearest class centroids instead of logistic regression (from "
                 f"{config.max_classes:,} classes on)")
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
  return "; LR's C chosen by validation log-loss" if any("fit" in row for row in report["rows"]) else ""


def fit_note(row: dict[str, Any]) -> str:
  """LR's chosen C, and "NOT CONVERGED after N iterations" when its fit stopped short; "" for other
  baselines."""
  fit = row.get("fit")
  if fit is None:
    return ""
  note = f"C={fit['inverse_regularization']:g}"
  if "selection_rows" in fit and fit["selection_rows"] < fit["train_rows"]:
    note += f" (chosen on fits of {fit['selection_rows']:,} rows)"
  if not fit["converged"]:
    note += f", NOT CONVERGED after {fit['max_iter']} iterations"
  return note


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
    lines.append(f"{row['label']:<{width}}" + "".join(f"{_percent(row['metrics'][n]):>14}" for n in names)
                 + f"   {fit_note(row)} {row['seconds']:.1f} s")
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
