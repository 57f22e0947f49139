"""Metric accumulators over batches of scores: the paper's metrics (TF-Ranking), per-class recall and
confusion counts of classification batches (`ClassificationEvaluator`), ranking metrics over given candidate
lists (`ListEvaluator`), and one timed streaming pass of either (`evaluate_dataset`, `evaluate_lists`).

Validation, test reports, the study's runs and `rank4class-evaluate` all accumulate through these.
"""

import contextlib
import functools
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class.evaluation import full_class_evaluation
from rank4class.evaluation import metrics as metrics_lib
from rank4class.inference import served
from rank4class.modeling import ranking_math
from rank4class_data import progress_line
from rank4class_data.labelled_records import ELWC_CLASS_ID_KEY

# Up to this many classes the report holds the whole confusion matrix; above, its non-zero cells.
DENSE_CONFUSION_CLASSES = 100


@contextlib.contextmanager
def _graph_optimizer_off() -> Iterator[None]:
  """TensorFlow's graph optimizer (Grappler) off for the functions called inside. The evaluators' metric
  graphs (TF-Ranking's sorts and sums, ~1,500 ops) gain nothing from it per call, and it costs their first
  call 0.15-0.3 s (docs/BENCHMARKS.md, the binary against a bare fit). Every call is made with it off: the
  setting is part of the function's instantiation key, so switching it back on would instantiate the function
  again."""
  before = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False)
  tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
  try:
    yield
  finally:
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": before})


def _unoptimized(function: Callable[..., Any]) -> Callable[..., Any]:
  """`function` (a `tf.function`) called with the graph optimizer off (`_graph_optimizer_off`)."""

  @functools.wraps(function)
  def call(*args):
    with _graph_optimizer_off():
      return function(*args)

  return call



class ClassificationEvaluator:
  """Accumulates the paper's metrics (TF-Ranking), per-class counts and the top-1 confusion matrix.

  The update is traced once (batch axis unknown) and does not depend on the model, so one evaluator can be
  `reset()` and reused for many models (see `get_evaluator`).

  Args:
    class_names: Class names in id order.
    ks: Cutoffs K of top-K error and NDCG@K.
  """

  def __init__(self, class_names: list[str], ks: tuple[int, ...] = (1, 5)):
    if tf.distribute.has_strategy():
      raise ValueError("Create ClassificationEvaluator outside `strategy.scope()`: its metric variables must "
                       "be plain local variables, updated outside the replicas.")
    self._class_names = list(class_names)
    self._num_classes = len(class_names)
    with tf.init_scope():
      self._metrics = metrics_lib.get_default_metrics(tuple(ks))
      self._confusion = tf.Variable(tf.zeros([self._num_classes] * 2, tf.int64), trainable=False)
    scores_spec = tf.TensorSpec([None, self._num_classes], tf.float32)
    self._update = _unoptimized(tf.function(
        self._update_impl, input_signature=[scores_spec, tf.TensorSpec([None], tf.int64)], autograph=False))
    self._update_relevance = _unoptimized(tf.function(self._update_relevance_impl, input_signature=[
        scores_spec, tf.TensorSpec([None, self._num_classes], tf.float32)], autograph=False))
    # One traced call for every metric's result and reset (eagerly, ~7 small ops each per validation).
    self._results = _unoptimized(tf.function(self._results_impl, autograph=False))
    self._reset = _unoptimized(tf.function(self._reset_impl, autograph=False))

  def _results_impl(self) -> dict[str, tf.Tensor]:
    return {metric.name: metric.result() for metric in self._metrics}

  def _reset_impl(self) -> None:
    for metric in self._metrics:
      for variable in metric.variables:
        variable.assign(tf.zeros_like(variable))
    self._confusion.assign(tf.zeros_like(self._confusion))

  def _update_impl(self, scores: tf.Tensor, labels: tf.Tensor) -> None:
    """`scores` float `[batch_size, num_classes]`, `labels` int64 class ids `[batch_size]` (validated)."""
    self._update_relevance_impl(scores,
                                ranking_math.class_ids_to_relevance(labels, self._num_classes), labels)

  def _update_relevance_impl(self, scores: tf.Tensor, relevance: tf.Tensor,
                             labels: tf.Tensor | None = None) -> None:
    """`relevance` float `[batch_size, num_classes]` (-1: not judged); the confusion matrix's true class is
    `labels`, or the most relevant class."""
    for metric in self._metrics:
      metric.update_state(relevance, scores)
    if labels is None:
      labels = tf.argmax(relevance, axis=1, output_type=tf.int64)
    predicted = tf.argmax(scores, axis=1, output_type=tf.int64)
    self._confusion.assign_add(tf.math.confusion_matrix(labels, predicted, self._num_classes, dtype=tf.int64))

  def reset(self) -> None:
    self._reset()

  def update(self, scores: tf.Tensor, labels: tf.Tensor) -> None:
    """`scores` `[batch_size, num_classes]`; `labels` class ids `[batch_size]` or `[batch_size, 1]`, or graded
    relevance over all classes `[batch_size, num_classes]` (ELWC class lists; the confusion matrix then counts
    the most relevant class as the true one)."""
    scores, labels = tf.cast(scores, tf.float32), tf.convert_to_tensor(labels)
    if labels.shape.rank == 2 and labels.shape[1] == self._num_classes and self._num_classes > 1:
      self._update_relevance(scores, tf.cast(labels, tf.float32))
    else:
      self._update(scores, tf.reshape(tf.cast(labels, tf.int64), [-1]))

  def result(self) -> dict[str, Any]:
    """{"n", "metrics", "per_class_recall", "class_counts", "confusion": {"classes", "counts" or "nonzero"}}.

    Confusion rows are true classes, columns the top-1 predicted class: the whole matrix ("counts") up to
    `DENSE_CONFUSION_CLASSES` classes, above that its non-zero cells as [true, predicted, count] ("nonzero"; a
    report of 1,100 classes is then kilobytes instead of 14 MB). A class without instances has recall None.
    """
    confusion = self._confusion.numpy()
    support = confusion.sum(axis=1)
    if len(self._class_names) <= DENSE_CONFUSION_CLASSES:
      cells: dict[str, Any] = {"counts": confusion.tolist()}
    else:
      true, predicted = np.nonzero(confusion)
      cells = {"nonzero": [[int(t), int(p), int(confusion[t, p])] for t, p in zip(true,
                                                                                  predicted, strict=True)]}
    return {"n": int(support.sum()),
            "metrics": {name: float(value) for name, value in self._results().items()},
            **full_class_evaluation.per_class_report(self._class_names, np.diag(confusion), support),
            "confusion": {"classes": list(self._class_names), **cells}}


@functools.lru_cache(maxsize=16)
def _cached_evaluator(class_names: tuple[str, ...], ks: tuple[int, ...]) -> ClassificationEvaluator:
  return ClassificationEvaluator(list(class_names), ks)


def get_evaluator(class_names: list[str], ks: tuple[int, ...] = (1, 5)) -> ClassificationEvaluator:
  """A reset evaluator, shared per (classes, ks) in this process: tracing TF-Ranking's metrics costs seconds,
  so validation runs and the many runs of a study reuse one traced update. Call it outside any
  `strategy.scope()` (e.g. before `fit`) the first time."""
  evaluator = _cached_evaluator(tuple(class_names), tuple(ks))
  evaluator.reset()
  return evaluator


class ListEvaluator:
  """Ranking metrics (TF-Ranking) over given candidate lists: each list's candidate classes are scored by the
  model's class scores and ranked against their graded relevance labels (padding: label -1).

  Args:
    ks: Cutoffs K of top-K error and NDCG@K.
  """

  def __init__(self, ks: tuple[int, ...] = (1, 5)):
    self._metrics = [m for m in metrics_lib.get_default_metrics(tuple(ks)) if m.name != metrics_lib.ACCURACY]
    self._lists = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._items = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._update = _unoptimized(tf.function(self._update_impl, input_signature=[
        tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None, None], tf.int64),
        tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None, None], tf.bool)], autograph=False))

  def _update_impl(self, scores: tf.Tensor, class_ids: tf.Tensor, labels: tf.Tensor, mask: tf.Tensor) -> None:
    """`scores` `[batch_size, num_classes]`; `class_ids` int `[batch_size, list_size]`; `labels` float
    `[batch_size, list_size]` (-1 at padding); `mask` bool `[batch_size, list_size]`."""
    num_classes = tf.shape(scores, out_type=tf.int64)[1]
    class_ids = tf.cast(class_ids, tf.int64)
    in_range = tf.logical_or(tf.logical_not(mask), (class_ids >= 0) & (class_ids < num_classes))
    tf.debugging.assert_equal(tf.reduce_all(in_range), True,
                              message=f"ELWC feature '{ELWC_CLASS_ID_KEY}': class id outside "
                                      "[0, num_classes)")
    item_scores = tf.gather(scores, tf.where(mask, class_ids, 0), batch_dims=1)
    labels = tf.where(mask, labels, -tf.ones_like(labels))
    for metric in self._metrics:
      metric.update_state(labels, item_scores)
    self._lists.assign_add(tf.shape(scores, out_type=tf.int64)[0])
    self._items.assign_add(tf.reduce_sum(tf.cast(mask, tf.int64)))

  def update(self, scores, class_ids, labels, mask) -> None:
    self._update(tf.cast(scores, tf.float32), tf.cast(class_ids, tf.int64), tf.cast(labels, tf.float32),
                 tf.cast(mask, tf.bool))

  def result(self) -> dict[str, Any]:
    return {"n": int(self._lists.numpy()), "num_items": int(self._items.numpy()),
            "metrics": {m.name: float(m.result()) for m in self._metrics}}


def _timed(batches: Iterable, consume: Callable[..., None], progress: bool = False) -> dict[str, float]:
  """Runs `consume` over `batches`; returns wall seconds, the seconds spent waiting for input, and the
  seconds, size and input wait of the first batch (which include tracing and the pipeline's start-up). With
  `progress`, a long pass shows a line on stderr (instances, instances/s)."""
  iterator = iter(batches)
  line = progress_line.ProgressLine(progress_line.DEFAULT_EVERY_SECONDS) if progress else None
  done = 0
  input_seconds = 0.0
  first_seconds, first_size, first_input_seconds = 0.0, 0, 0.0
  start = time.perf_counter()
  try:
    while True:
      before = time.perf_counter()
      try:
        batch = next(iterator)
      except StopIteration:
        break
      input_seconds += time.perf_counter() - before
      consume(*batch)
      size = int(tf.shape(batch[1])[0])  # The labels': inputs may be a dict (hybrid text).
      if not first_size:
        first_seconds, first_size = time.perf_counter() - start, size
        first_input_seconds = input_seconds
      if line is not None:
        done += size
        if line.due():
          line.show(f"evaluated {done:,} instances ({done / line.elapsed:,.0f} instances/s)")
  finally:  # A bad record met mid-pass is reported on a line of its own.
    if line is not None:
      line.close()
  return {"seconds": time.perf_counter() - start, "input_seconds": input_seconds,
          "first_batch_seconds": first_seconds,
          "first_batch_size": first_size, "first_batch_input_seconds": first_input_seconds}


def _with_throughput(report: dict[str, Any], timing: dict[str, float]) -> dict[str, Any]:
  seconds = max(timing["seconds"], 1e-9)
  steady_seconds = max(timing["seconds"] - timing["first_batch_seconds"], 1e-9)
  report["timing"] = {
    "seconds": timing["seconds"],
    "input_seconds": timing["input_seconds"],
    "input_fraction": timing["input_seconds"] / seconds,
    "instances_per_second": report["n"] / seconds,
    "first_batch_seconds": timing["first_batch_seconds"],
    "steady_instances_per_second": (report["n"] - timing["first_batch_size"]) / steady_seconds,
    "steady_input_fraction": (timing["input_seconds"] - timing["first_batch_input_seconds"]) / steady_seconds,
  }
  return report


def evaluate_dataset(score_fn: served.ScoreFn, dataset: tf.data.Dataset, class_names: list[str],
                     ks: tuple[int, ...] = (1, 5),
                     evaluator: ClassificationEvaluator | None = None,
                     loss_fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor] | None = None,
                     progress: bool = False,
                     observe: Callable[[tf.Tensor, tf.Tensor], None] | None = None) -> dict[str, Any]:
  """Evaluates classification batches `(inputs, class ids [batch_size])` in one streaming pass.

  Args:
    score_fn: Raw inputs -> class scores `[batch_size, num_classes]` (`served.make_score_fn`).
    dataset: Finite dataset of (inputs, labels) batches.
    class_names: Class names in id order.
    ks: Cutoffs K.
    evaluator: The (reset) evaluator to accumulate into; None for `get_evaluator(class_names, ks)`.
    loss_fn: Optional (scores, class ids) -> mean loss of the batch; its mean over instances (batch means
      weighted by batch size, as Keras' `evaluate`) is added to the metrics as "loss", in the same pass.
    progress: Show a progress line on stderr once the pass takes a while.
    observe: Optional (scores, labels) -> None called on every batch (e.g. `calibration.CalibrationMetrics`).

  Returns:
    The report of `ClassificationEvaluator.result`, plus "timing": seconds, input_seconds, input_fraction,
    instances_per_second (whole pass), first_batch_seconds (tracing included), and steady_instances_per_second
    and steady_input_fraction (both without the first batch, whose wait includes the pipeline's start-up).
  """
  if evaluator is None:
    evaluator = get_evaluator(class_names, ks)
  else:
    evaluator.reset()
  loss_total, count = 0.0, 0

  def consume(inputs, labels):
    nonlocal loss_total, count
    scores = score_fn(inputs)
    evaluator.update(scores, labels)
    if observe is not None:
      observe(scores, labels)
    if loss_fn is not None:
      size = int(tf.shape(labels)[0])
      loss_total += float(loss_fn(scores, labels)) * size
      count += size

  timing = _timed(dataset, consume, progress)
  report = evaluator.result()
  if loss_fn is not None:
    report["metrics"]["loss"] = loss_total / max(count, 1)
  return _with_throughput(report, timing)


def evaluate_lists(score_fn: served.ScoreFn, dataset: tf.data.Dataset, ks: tuple[int, ...] = (1, 5),
                   progress: bool = False) -> dict[str, Any]:
  """Evaluates ELWC batches `(inputs, class ids [b, l], labels [b, l], mask [b, l])` in one streaming pass."""
  evaluator = ListEvaluator(ks)
  timing = _timed(dataset, lambda inputs, ids, labels,
                  mask: evaluator.update(score_fn(inputs), ids, labels, mask), progress)
  return _with_throughput(evaluator.result(), timing)

