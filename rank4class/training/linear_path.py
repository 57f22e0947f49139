"""Multinomial logistic regressions of a model's own inputs along a regularisation path, trained by the engine
as one multi-head Keras model: the linear candidates a run validates beside its trained model.

Each head k is the logistic regression of `[t(x) ; a_k e(x)]` (`t` a sparse TF-IDF vector, `e` a dense vector:
standardised frozen embeddings or features; either may be absent) with the L2 penalty of scikit-learn's
`LogisticRegression(C=C_k)`: head k minimises `mean_i CE_i + ||W_k||^2 / (2 C_k n)` over the n training rows.
All heads read the same batch, so the path costs one model's input pipeline and one matmul per step, trains
under any strategy, on all cores and on a GPU, and its TF-IDF stays sparse end to end. The heads are scored on
the validation rows by their log-loss, row by row, and the one-standard-error rule
(`rank4class_engine.statistics.one_standard_error`) keeps the most regularised head within noise of the best.

Example:
  path = fit_path(PathInputs(train={DENSE_KEY: x}, train_labels=y, validation={DENSE_KEY: vx},
                             validation_labels=vy, num_classes=3), dense_heads((0.1, 1.0)), PathConfig(),
                  run_dir)
  path.weights, path.bias  # [3, d] and [3] of the chosen head
"""

import dataclasses
import logging
import math
import os
import shutil
import time
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class.training.linear_path_model import (  # noqa: F401  The path's names, re-exported.
  DENSE_KEY,
  TFIDF_KEY,
  Head,
  HeadsSoftmaxLoss,
  LinearPathModel,
  dense_heads,
  hybrid_heads,
  touch_weights,
)
from rank4class_data.validation import check_range
from rank4class_engine import distribute
from rank4class_engine.loop import trainer
from rank4class_engine.optimization import duality_gap
from rank4class_engine.optimization.learning_rates import LINEAR
from rank4class_engine.optimization.optimizers import LAZY_ADAM, OptimizerConfig, make_optimizer
from rank4class_engine.statistics import one_standard_error

_logger = logging.getLogger(__name__)


@dataclasses.dataclass
class PathConfig:
  """How the path is trained (lazy Adam, the learning rate decaying linearly to 0).

  Sparse TF-IDF paths take fewer, larger steps than dense ones: a pass over sparse rows costs their n-grams x
  heads x classes, and each n-gram's weights move only in the steps whose batch holds it. Hybrid paths
  (6 heads, seed 0, 2026-12-06), the best head's validation log-loss at 5 epochs and 0.3 / 10 epochs and 0.3:
  Reuters R52 (5,294 rows) 0.148 / 0.126, 20 Newsgroups (10,164 rows) 0.300 / 0.271 (test top-1 error 6.00 /
  6.23 and 14.56 / 13.31); 10 epochs cost twice the time of 5. On the 64 standardised digit pixels (900
  training rows), 100 epochs of 128-row batches at 0.1 predicted the test rows as scikit-learn's regression of
  the same C does (1.0 agreement on two splits); 30 epochs stopped 0.02 above its validation log-loss and
  chose C one step too small. Those rows now take full batches (`full_batch_rows`).

  Attributes:
    epochs: Passes over the training rows of a dense path (at most `max_steps` steps).
    tfidf_epochs: Passes of a path with TF-IDF.
    max_steps: Steps at most (many rows: fewer passes; a regression's steps to converge do not grow with the
      rows).
    batch_size: Rows per step of a dense path over all replicas (fewer training rows: all of them).
      Batches of 128 left a dense path of many rows short of its optimum (2026-12-07, MiniLM embeddings, 384
      standardised dimensions, one head, against scikit-learn's objective at C=0.1 / C=1, test top-1 error
      beside scikit-learn's):
      - Reuters R52 (5,879 rows, 52 classes): 1,000 steps of 128 rows ended 36 % / 520 % above (7.28 / 8.84
        against 6.46 / 7.17); 1,000 steps of 1,024 rows 0.2 % / 7 % above (6.46 / 7.52), in about the same
        time (6 s: a step's cost is mostly fixed); 575 steps of 1,024 (100 epochs) 0.9 % / 24 % above.
      - 20 Newsgroups (10,164 rows, 20 classes): 43 % / 217 % above (25.32 / 27.15 against 23.65 / 26.33)
        with 128 rows, 0.2 % / 3.9 % above (23.71 / 26.73) with 1,024, in 12 s instead of 5-10.
    tfidf_batch_size: Rows per step of a path with TF-IDF. Its 10 epochs of 128 rows stop short too, and the
      choice of head held: on Reuters R8 (4,937 rows, seed 0, 2026-12-07) the chosen head (C=10, w=1) ended
      13.9 % above scikit-learn's objective on the same TF-IDF and embeddings in 386 steps of 128 (test top-1
      error 2.65, the path 7 s), 1.3 % in 1,000 steps of 128 (2.56, 12 s), 0.6 % in 386 steps of 512 (2.65,
      10 s); each kept the same head. Nearer the optimum is not better on test: 40 epochs of 512 rows against
      the default's 10 of 128, `rank4class-train --dataset=<set> --seed=0` (2026-12-07), test top-1 error
      and the TF-IDF path's seconds: 2016 tweets 6.64 / 6.52 (8.0 / 3.3 s), Drugs.com 26.91 / 26.65 (3.7 /
      2.6), R8 2.65 / 2.65 (12.0 / 6.2), R52 5.84 / 6.50 (55.5 / 22.9), Friends 75.04 / 74.54 (12.7 / 4.8),
      20 Newsgroups 13.30 / 13.19 (63.5 / 46.0). The short path regularises as early stopping does; the
      choice line gives the kept head's distance to the optimum of its C (`gap_tolerance`).
    full_batch_rows: A dense path of at most this many training rows takes all of them in each step, for
      `full_batch_steps` steps. Mini-batches leave a dense path with many classes and few rows a class short
      of its optimum: on the 135-class WordNet set of the guide (729 rows, 384 standardised dimensions,
      2026-12-07), 570 steps of 128 rows ended 1.9 % above scikit-learn's objective at the chosen C=1 (test
      top-1 error 37.53 against its 36.54); 100 full-batch steps 0.5 % above (37.04), 150 at it (36.54), in
      the same time as the 570 (about 14 s with 5-fold cross-validation). Up to this many rows 150 steps of
      all rows are fewer row passes than `epochs` of `batch_size` and no more than 1.5 times those of the 100
      epochs of 128 rows they replaced, in fewer, larger steps: a few-shot path of that shape (810 rows, 35
      heads x 6 groups x 135 classes) took 140 s instead of 219 on 2 cores; the few-shot table's 15 runs at 8
      rows a class 96 CPU-s instead of 87. 0: mini-batches always.
    full_batch_steps: See `full_batch_rows`.
    learning_rate: Adam's initial learning rate of a dense path.
    tfidf_learning_rate: ... of a path with TF-IDF.
    tolerance: A head converged when its objective's gradient norm at the end is at most this share of its
      norm at the start (all weights 0), or when its duality gap certifies it (`gap_tolerance`); a chosen
      head that did neither is said. The share catches a path that barely moved, not one that stopped near:
      R52's 128-row batches above ended at 0.0066 of the start, 20 Newsgroups' at 0.014-0.023, with 1,024
      rows at 0.0006-0.0007 and 0.002-0.004. Nor is a share above it always short: on Friends' 8,393 lines
      (seed 0, 2026-12-07) the TF-IDF path's chosen head ended at 0.10 of its start and the embeddings' at
      0.076, their duality gaps at 1.7 % and 1.5 %.
    gap_tolerance: The chosen head is certified when its duality gap (`rank4class_engine.optimization.
      duality_gap`) bounds the optimum P* within this share of its objective P, `(P - P*) / P`; the choice
      line says the bound of a head that is not. The gap is a bound, looser than the truth away from the
      optimum (2026-12-07, seed 0, the default run's heads against scikit-learn's objective, the true share
      and the bound): the embeddings' regressions at C=0.1 / 0.01 on Reuters R52 / R8 0.2 % / 1.1 % and 0.03
      % / 0.2 %; TF-IDF beside them at C=100 / 10 / 100 on R52 / R8 / 20 Newsgroups 52 % / 93 %, 12 % / 53 %
      and 10 % / 16 %.
    retry_steps: A path whose chosen head did not converge in fewer steps trains once more, for at least
      these steps (and 4 times its steps). On Drugs.com's reviews with 64 rows a class (192 rows, 2026-12-07),
      10 TF-IDF epochs were 13 steps, the chosen head's gradient still at 0.63 of its start; at 200 it is at
      0.04-0.06, and the kept model's test accuracy rose from 50.6 to 55.5 % (seeds 0-4). A path of more
      steps is not retried: on Friends' 8,400 lines, 656 TF-IDF steps end at 0.10-0.16, and 1,000 raised the
      test error from 74.88 to 75.36 % (seeds 0-2).
    folds: With fewer than `cross_validate_below` validation rows, the head is chosen by `folds`-fold
      cross-validation on the training rows instead (stratified by class; every head of every fold trained
      in the same model, beside the heads on all rows that are kept).
    cross_validate_below: See `folds`.
    choose_lowest: Keep the head of the lowest log-loss instead of the one-standard-error rule's (the most
      regularised within noise of it).
    seed: Shuffling and fold seed.
  """

  epochs: int = 200
  tfidf_epochs: int = 10
  max_steps: int = 1000
  batch_size: int = 1024
  tfidf_batch_size: int = 128
  full_batch_rows: int = 1024
  full_batch_steps: int = 150
  learning_rate: float = 0.1
  tfidf_learning_rate: float = 0.3
  tolerance: float = 0.05
  gap_tolerance: float = 0.05
  retry_steps: int = 200
  choose_lowest: bool = False
  folds: int = 5
  cross_validate_below: int = 300
  seed: int = 0

  def __post_init__(self):
    for name in ("epochs", "tfidf_epochs", "max_steps", "batch_size", "tfidf_batch_size", "full_batch_steps",
                 "folds", "cross_validate_below", "retry_steps"):
      check_range(name, getattr(self, name), 1, integer=True)
    check_range("full_batch_rows", self.full_batch_rows, 0, integer=True)
    for name in ("learning_rate", "tfidf_learning_rate", "tolerance", "gap_tolerance"):
      check_range(name, getattr(self, name), 0.0, low_inclusive=False)


@dataclasses.dataclass
class PathInputs:
  """The path's data: dicts of `TFIDF_KEY` (`tf.SparseTensor`) and/or `DENSE_KEY` (float32 arrays), and class
  ids."""

  train: dict[str, Any]
  train_labels: np.ndarray
  validation: dict[str, Any]
  validation_labels: np.ndarray
  num_classes: int
  prior: np.ndarray | None = None  # [dense_width, num_classes]: what the heads' `prior_weight` adds.


@dataclasses.dataclass
class PathResult:
  """The chosen head's fit.

  Attributes:
    head: The chosen `Head`.
    weights: Its class weights `[num_classes, tfidf_width + dense_width]` (the dense block times its
      `dense_weight`, so the logits are `[t ; e] . w + b`).
    bias: Its class biases `[num_classes]`.
    fit: The record: C (and w), each head's validation log-loss and its standard error, the rule's verdict,
      steps, seconds, the chosen head's gradient ratio and convergence, its objective, its duality gap (a
      share of the objective) and whether the gap certifies it (`PathConfig.gap_tolerance`).
    out_of_fold_scores: See the field.
  """

  head: Head
  weights: np.ndarray
  bias: np.ndarray
  fit: dict[str, Any]
  out_of_fold_scores: np.ndarray | None = None  # [rows, classes]: each training row's logits under its fold's
  # head of the chosen (C, w, p), when cross-validation chose: held-out scores to calibrate on.


def _dataset(features: dict[str, Any], labels: np.ndarray, batch_size: int, seed: int, repeat: bool,
             input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
  """(features, class ids) batches; under several input pipelines (workers) each reads its own shard."""
  dataset = tf.data.Dataset.from_tensor_slices((features, labels.astype(np.int64)))
  if input_context is not None and input_context.num_input_pipelines > 1:
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  if repeat:
    dataset = dataset.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True).repeat()
  return dataset.batch(batch_size, drop_remainder=repeat).prefetch(tf.data.AUTOTUNE)


def _widths(features: dict[str, Any]) -> tuple[int, int]:
  tfidf = features.get(TFIDF_KEY)
  dense = features.get(DENSE_KEY)
  return (int(tfidf.dense_shape[1]) if tfidf is not None else 0,
          int(dense.shape[1]) if dense is not None else 0)


def _per_row_log_loss(model: LinearPathModel, features: dict[str, Any], labels: np.ndarray,
                      batch_size: int) -> np.ndarray:
  """Each row's negative log-probability of its class under each head: `[rows, heads]`."""
  losses = []
  for x, y in _dataset(features, labels, batch_size, 0, repeat=False):
    log_p = tf.nn.log_softmax(model(x, training=False), axis=-1)
    losses.append(-tf.gather(log_p, y, axis=2, batch_dims=1).numpy())
  return np.concatenate(losses)


def _head_scores(model: LinearPathModel, inputs: PathInputs, head: int) -> np.ndarray:
  """Head `head`'s scores of the training rows, `[rows, classes]`."""
  return np.concatenate([model(x, training=False)[:, head, :].numpy()
                         for x, _ in _dataset(inputs.train, inputs.train_labels, 4096, 0, repeat=False)])


def _duality_gap(model: LinearPathModel, inputs: PathInputs, head: Head, index: int,
                 scores: np.ndarray) -> duality_gap.Gap:
  """The duality gap of head `index` (`head`, its training rows' `scores`): an upper bound on how far its
  objective (mean log-loss + its penalty) is above the optimum (`rank4class_engine.optimization.
  duality_gap`)."""
  classes = inputs.num_classes
  columns = slice(index * classes, (index + 1) * classes)
  tfidf, dense = inputs.train.get(TFIDF_KEY), inputs.train.get(DENSE_KEY)
  offsets = (None if inputs.prior is None or not head.prior_weight
             else head.prior_weight * (dense @ inputs.prior))
  kernels = [kernel.numpy()[:, columns] for kernel in (model.tfidf_kernel, model.dense_kernel)
             if kernel is not None]

  def transposed_squares(residual: np.ndarray) -> float:
    squares = 0.0
    if tfidf is not None:
      product = tf.sparse.sparse_dense_matmul(tfidf, tf.constant(residual, tf.float32), adjoint_a=True)
      squares += float(np.sum(np.square(product.numpy())))
    if dense is not None:  # The features are a e, a the head's dense weight.
      product = model.dense_weights[index] * (dense.T.astype(np.float64) @ residual)
      squares += float(np.sum(np.square(product)))
    return squares

  return duality_gap.duality_gap(scores, inputs.train_labels, model.penalties[index],
                                 sum(float(np.sum(np.square(k.astype(np.float64)))) for k in kernels),
                                 transposed_squares, offsets)


def _gradient_norm(model: LinearPathModel, inputs: PathInputs, head: int,
                   scores: np.ndarray | None = None) -> float:
  """The norm of head `head`'s objective gradient (mean log-loss over the training rows + its penalty) at its
  weights (its training rows' `scores`), or at the start (all weights 0) without `scores`: `X^T (P - Y) / n +
  2 penalty W` for each block, `sum(P - Y) / n` for the biases."""
  n, classes = len(inputs.train_labels), inputs.num_classes
  columns = slice(head * classes, (head + 1) * classes)
  start = scores is None
  if start:
    p = np.full([n, classes], 1.0 / classes, np.float32)
  else:
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
  p[np.arange(n), inputs.train_labels] -= 1.0
  residual = p / n
  squares = float(np.sum(np.square(residual.sum(axis=0))))
  penalty = 0.0 if start else 2.0 * model.penalties[head]
  if model.tfidf_kernel is not None:
    data = tf.sparse.sparse_dense_matmul(inputs.train[TFIDF_KEY], tf.constant(residual, tf.float32),
                                         adjoint_a=True).numpy()
    squares += float(np.sum(np.square(data + penalty * model.tfidf_kernel.numpy()[:, columns])))
  if model.dense_kernel is not None:
    data = model.dense_weights[head] * (inputs.train[DENSE_KEY].T @ residual)
    squares += float(np.sum(np.square(data + penalty * model.dense_kernel.numpy()[:, columns])))
  return float(np.sqrt(squares))


def _train_steps(rows: int, epochs: int, config: PathConfig, replicas: int, dense: bool) -> tuple[int, int]:
  """(batch size over all replicas, steps): `epochs` passes, at most `config.max_steps`, or a dense path's
  `config.full_batch_steps` of all its rows up to `config.full_batch_rows`; a batch holds at least one row per
  replica, and the same count on each."""
  if dense and rows <= config.full_batch_rows:
    return max(replicas, rows - rows % replicas), min(config.full_batch_steps, config.max_steps)
  wanted = config.batch_size if dense else config.tfidf_batch_size
  batch_size = max(replicas, min(wanted, rows - rows % replicas or replicas))
  return batch_size, max(1, min(config.max_steps, math.ceil(epochs * rows / batch_size)))


def _compiled_model(inputs: PathInputs, heads: list[Head], strategy: tf.distribute.Strategy, batch_size: int,
                    steps: int, learning_rate: float, folds: int) -> LinearPathModel:
  """The path's model, built and compiled under `strategy` (lazy Adam, the rate decaying linearly over
  `steps`)."""
  tfidf_width, dense_width = _widths(inputs.train)
  n = len(inputs.train_labels)
  with strategy.scope():
    replica_batch = batch_size // strategy.num_replicas_in_sync
    model = LinearPathModel(inputs.num_classes, tfidf_width, dense_width, [h.dense_weight for h in heads],
                            [1.0 / (2.0 * h.inverse_regularization * n) for h in heads],
                            touch_weights(inputs.train[TFIDF_KEY], replica_batch) if tfidf_width else None,
                            sparse_updates=strategy.num_replicas_in_sync == 1, prior=inputs.prior,
                            prior_weights=None if inputs.prior is None else [h.prior_weight for h in heads])
    sample = next(iter(_dataset(inputs.validation, inputs.validation_labels, 2, 0, repeat=False)))[0]
    strategy.run(lambda x: model(x, training=False), args=(sample,))
    optimizer = make_optimizer(OptimizerConfig(type=LAZY_ADAM, learning_rate=learning_rate,
                                               schedule=LINEAR), steps)
    model.compile(optimizer=optimizer, loss=HeadsSoftmaxLoss(inputs.num_classes, folds))
  return model


def stratified_folds(labels: np.ndarray, folds: int, seed: int) -> np.ndarray:
  """A fold id in `[0, folds)` per row: each class's rows shuffled (by `seed`) and dealt round the folds."""
  rng = np.random.default_rng(seed)
  fold = np.empty(len(labels), np.int64)
  offset = 0
  for label in np.unique(labels):
    rows = rng.permutation(np.flatnonzero(labels == label))
    fold[rows] = (offset + np.arange(len(rows))) % folds
    offset += len(rows)
  return fold


def _chosen(model: LinearPathModel, heads: list[Head], inputs: PathInputs, config: PathConfig,
            fold: np.ndarray | None, record: dict[str, Any]) -> PathResult:
  """The head the log-loss chooses (one standard error, or the lowest with `config.choose_lowest`): out of
  fold on the training rows with `fold`, else on the validation rows; its weights (the heads trained on every
  training row), its record and, with `fold`, its out-of-fold scores."""
  count = len(heads)
  kept = model.num_heads - count  # The heads on every row are the last group.
  validation = _per_row_log_loss(model, inputs.validation, inputs.validation_labels, 4096)[:, kept:]
  if fold is None:
    losses, rule = validation, "validation log-loss"
  else:
    train = _per_row_log_loss(model, inputs.train, inputs.train_labels, 4096).reshape([len(fold), -1, count])
    losses, rule = train[np.arange(len(fold)), fold], f"{model.num_heads // count - 1}-fold cross-validation"
  choice = one_standard_error.choose(losses)
  k = choice.best if config.choose_lowest else choice.index
  index = kept + k
  trained = _head_scores(model, inputs, index)  # The chosen head's, on the training rows.
  ratio = _gradient_norm(model, inputs, index, trained) / max(_gradient_norm(model, inputs, index), 1e-30)
  gap = _duality_gap(model, inputs, heads[k], index, trained)
  weights = []
  if model.tfidf_kernel is not None:
    weights.append(tf.transpose(model.head_weights(model.tfidf_kernel)[:, index, :]).numpy())
  if model.dense_kernel is not None:
    dense = tf.transpose(model.head_weights(model.dense_kernel)[:, index, :]).numpy()
    prior = 0.0 if inputs.prior is None else heads[k].prior_weight * inputs.prior.T  # Not scaled: see `call`.
    weights.append(heads[k].dense_weight * dense + prior)
  bias = tf.reshape(model.bias, [model.num_heads, inputs.num_classes])[index].numpy()
  fit = {"inverse_regularization": heads[k].inverse_regularization, "chosen_by": rule,
         "validation_log_loss": float(np.mean(validation[:, k])), "validation_rows": len(validation),
         "choice_rows": choice.rows, "choice_log_loss": float(choice.means[k]),
         "path": [{"inverse_regularization": h.inverse_regularization, "dense_weight": h.dense_weight,
                   "prior_weight": h.prior_weight, "log_loss": mean, "standard_error": error}
                  for h, mean, error in zip(heads, choice.means, choice.standard_errors, strict=True)],
         "lowest_log_loss_head": choice.best, "within_noise": choice.within_noise, **record,
         "gradient_ratio": ratio, "objective": gap.primal, "duality_gap": gap.relative,
         "certified": gap.relative <= config.gap_tolerance}
  fit["converged"] = ratio <= config.tolerance or fit["certified"]
  scores = None if fold is None else _out_of_fold_scores(model, inputs, fold, count, k)
  return PathResult(heads[k], np.concatenate(weights, axis=1).astype(np.float64), bias.astype(np.float64),
                    fit, scores)


def _out_of_fold_scores(model: LinearPathModel, inputs: PathInputs, fold: np.ndarray, count: int,
                        k: int) -> np.ndarray:
  """Each training row's logits `[rows, classes]` under head `k` of its own fold's group (the group of fold
  f trained on every row outside f), in row order."""
  scores, start = [], 0
  for x, _ in _dataset(inputs.train, inputs.train_labels, 4096, 0, repeat=False):
    groups = model(x, training=False)[:, k::count, :].numpy()  # [batch, folds + 1, classes]: the folds, all.
    scores.append(groups[np.arange(len(groups)), fold[start:start + len(groups)]])
    start += len(groups)
  return np.concatenate(scores).astype(np.float32)


def _trained_model(inputs: PathInputs, heads: list[Head], config: PathConfig, run_dir: str,
                   strategy: tf.distribute.Strategy, fold: np.ndarray | None, steps: int, batch_size: int,
                   learning_rate: float) -> LinearPathModel:
  """The path's model (every head on every fold, then on all rows) trained `steps` steps by the engine, its
  learning rate decaying over them."""
  folds = 0 if fold is None else int(fold.max()) + 1
  # Labels as the loss reads them: with folds, the row's fold too.
  codes = inputs.train_labels + (inputs.num_classes * fold if folds else 0)
  model = _compiled_model(inputs, heads * (folds + 1), strategy, batch_size, steps, learning_rate, folds)

  def train_dataset(start_step: int):
    if strategy.num_replicas_in_sync == 1:
      return _dataset(inputs.train, codes, batch_size, config.seed, repeat=True).skip(start_step)
    return strategy.distribute_datasets_from_function(lambda ctx: _dataset(
        inputs.train, codes, ctx.get_per_replica_batch_size(batch_size), config.seed, repeat=True,
        input_context=ctx).skip(start_step))

  engine = trainer.EngineConfig(run_dir=run_dir, train_steps=steps, eval_every=steps, checkpoint_every=0,
                                global_batch_size=batch_size, tensorboard=False, verbose=0)
  try:
    trainer.fit(model, train_dataset, engine, strategy)
  finally:
    if distribute.is_chief(strategy):
      shutil.rmtree(run_dir, ignore_errors=True)
  return model


def fit_path(inputs: PathInputs, heads: list[Head], config: PathConfig, run_dir: str,
             strategy: tf.distribute.Strategy | None = None) -> PathResult:
  """Trains every head of the path through the engine and keeps the one the validation log-loss chooses (the
  one-standard-error rule over the rows, the most regularised head within noise of the best; with
  `config.choose_lowest`, the best).

  A path whose chosen head did not converge in fewer than `config.retry_steps` steps (few rows: 10 TF-IDF
  epochs of 192 rows are 13 steps) is trained once more from the start, for `config.retry_steps` or 4 times
  its steps, whichever is more (at most `config.max_steps`); one that still has not says so.

  Args:
    inputs: The training and validation rows.
    heads: The path, simplest first (`dense_heads`, `hybrid_heads`).
    config: How to train it.
    run_dir: A scratch folder for the engine's run (removed afterwards).
    strategy: The run's strategy (default: the current one).

  Returns:
    The chosen head's `PathResult`.
  """
  strategy = strategy or tf.distribute.get_strategy()
  started = time.perf_counter()
  if distribute.is_chief(strategy):  # A killed run's scratch: the path is retrained whole.
    shutil.rmtree(run_dir, ignore_errors=True)
  n = len(inputs.train_labels)
  dense = TFIDF_KEY not in inputs.train
  epochs, learning_rate = ((config.epochs, config.learning_rate) if dense
                           else (config.tfidf_epochs, config.tfidf_learning_rate))
  batch_size, steps = _train_steps(n, epochs, config, strategy.num_replicas_in_sync, dense)
  folds = (config.folds if len(inputs.validation_labels) < config.cross_validate_below
           and n >= 2 * config.folds and config.folds > 1 else 0)
  fold = stratified_folds(inputs.train_labels, folds, config.seed) if folds else None
  tried = []
  while True:
    model = _trained_model(inputs, heads, config, run_dir, strategy, fold, steps, batch_size, learning_rate)
    tried.append(steps)
    path = _chosen(model, heads, inputs, config, fold, {"steps": steps, "batch_size": batch_size,
                                                        "epochs": round(steps * batch_size / n, 2)})
    # Under multi-worker, every worker trains again if one did not converge (a collective: each calls it).
    stopped_short = distribute.sum_over_workers(strategy, [0.0 if path.fit["converged"] else 1.0])[0] > 0
    if not stopped_short or len(tried) > 1 or steps >= min(config.retry_steps, config.max_steps):
      break
    steps = min(config.max_steps, max(config.retry_steps, 4 * steps))
  path.fit.update(seconds=time.perf_counter() - started, steps_tried=tried)
  _logger.info("Linear path of %d heads, %d classes, %d rows: %s steps in %.1f s; C=%g chosen by %s, "
               "the optimum at most %.2g %% below its objective (duality gap).", len(heads),
               inputs.num_classes, n, "+".join(map(str, tried)), path.fit["seconds"],
               path.head.inverse_regularization, path.fit["chosen_by"], 100 * path.fit["duality_gap"])
  return path


def convergence_note(fit: dict[str, Any]) -> str:
  """What a choice line adds about the chosen head's optimizer: nothing when its duality gap certifies its
  objective P within `PathConfig.gap_tolerance` of the optimum P* ((P - P*) / P at most that); else "; the
  optimum up to 83 % below its objective (duality gap)" when its gradient check passed, "; its optimizer NOT
  CONVERGED in 10 epochs: gradient at 0.12 of its start, the optimum up to 83 % below its objective (duality
  gap)" when it did not (a record without a gap: the gradient alone)."""
  gap = fit.get("duality_gap")
  bound = "" if gap is None else f"the optimum up to {100 * gap:.2g} % below its objective (duality gap)"
  if not fit.get("converged", True):
    epochs = f" in {fit['epochs']} epochs" if "epochs" in fit else ""
    return (f"; its optimizer NOT CONVERGED{epochs}: gradient at {fit['gradient_ratio']:.2g} of its start"
            + (f", {bound}" if bound else ""))
  return f"; {bound}" if bound and not fit.get("certified", True) else ""


def scratch_dir(model_dir: str, strategy: tf.distribute.Strategy, name: str) -> str:
  """The engine's scratch folder of one path in a run: beside the run's outputs (a worker's own under
  multi-worker)."""
  return os.path.join(distribute.output_dir(model_dir, strategy), name)
