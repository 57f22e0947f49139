"""Training (through the engine) and export of the pairwise models, and the train-evaluate-export experiment.

The library behind `pairwise_main.py`'s training (configs in `pairwise.margin.configs`, data in
`pairwise.margin.item_data`, metrics in `pairwise.margin.evaluation`; nothing here reads flags). A run writes
to `model_dir`: `config.json`, `backup/` (latest, resumable), `best/` (best validation checkpoint),
`logs/{train,validation}` (TensorBoard), `metrics.json` and `export/` (SavedModels: `pair_scorer` scores a
pair of items, `list_scorer` ranks padded lists from one encoding per item; a listwise model exports
`item_scorer`).

Fixes relative to the reference PyTorch code (atapour/rank-over-class): splits are by group (it splits pairs,
so test passages are trained on); model selection uses the validation split (it keeps the best *test*
checkpoint); left/right order is random (it keeps `combinations` order); ties count as wrong pair predictions
(it reads a tie as E = -1); gradient clipping covers the head as well (it clips only the Transformer); the
learning rate defaults to the paper's 4e-5 (its default is 4e-6) with weight decay actually applied (its
default 0 makes AdamW plain Adam); the MLP uses the paper's Linear-BatchNorm-PReLU order (it uses
Linear-PReLU-BatchNorm); and training runs the configured number of steps (its `while epoch <= num_epochs`
runs one epoch too many).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import numpy as np
import tensorflow as tf

from pairwise.margin import aggregate, evaluation, group_batching, item_data, listwise, margin_model, pairs
from pairwise.margin.configs import (
  EncoderConfig,
  ModelConfig,
  PairwiseConfig,
  PairwiseEvaluationConfig,
  PairwiseTrainConfig,
)
from rank4class_data.messages import say
from rank4class_data.ranking.grouped_items import GroupedItems
from rank4class_data.validation import atomic_directory
from rank4class_encoders import embedding_cache, text_encoder
from rank4class_engine import distribute
from rank4class_engine.loop import trainer
from rank4class_engine.optimization import optimizers
from rank4class_engine.runs import run_directory
from rank4class_engine.statistics import ranking_metrics

# ------------------------------------------------------------------------------------------------ model


def make_encoder(config: EncoderConfig) -> tf.keras.layers.Layer | None:
  """The encoder layer of `config` (None for precomputed embeddings)."""
  if config.takes_embeddings:
    return None
  if config.kind == "hashed_bow":
    return margin_model.HashedBagOfWordsEncoder(config.hashed_buckets, config.hashed_dim, name="encoder")
  if not config.preprocess_handle or not config.encoder_handle:
    raise ValueError("Encoder kind 'text_encoder' needs `preprocess_handle` and `encoder_handle`.")
  return text_encoder.TextEncoder(config.preprocess_handle, config.encoder_handle, trainable=config.trainable,
                                  pooling=config.pooling,
                                  max_seq_length=config.max_seq_length, name="encoder")


def build_model(config: ModelConfig, encoder: tf.keras.layers.Layer | None) -> tf.keras.Model:
  """`PairwiseRanker` for the margin objective, `ListwiseRanker` for a listwise one."""
  if config.objective == "margin":
    return margin_model.PairwiseRanker(encoder, head=config.head, separate_encoders=config.separate_encoders,
                                       dropout=config.dropout, batch_norm=config.batch_norm,
                                       num_classes=config.num_classes, name="pairwise_ranker")
  return listwise.ListwiseRanker(encoder, dropout=config.dropout, batch_norm=config.batch_norm,
                                 num_classes=config.num_classes, name="listwise_ranker")


def make_optimizer(config: PairwiseTrainConfig) -> tf.keras.optimizers.Optimizer:
  """The engine's optimizer (`rank4class_engine.optimization.optimizers.make_optimizer`) of `config.optimizer`
  (by default the paper's AdamW, `configs.default_optimizer`), its update step not compiled with XLA."""
  return optimizers.make_optimizer(config.optimizer, jit_compile=False)


def _build(model: tf.keras.Model, example_item: Any) -> None:
  """Creates all variables by one call on a two-item batch (in inference mode, so BatchNorm stays put)."""
  items = tf.constant([example_item, example_item])
  model((items, items) if isinstance(model, margin_model.PairwiseRanker) else items, training=False)


# ------------------------------------------------------------------------------------------------ losses


def _batch_losses(model: tf.keras.Model, batch: dict[str, tf.Tensor], table: group_batching.ItemTable,
                  model_config: ModelConfig, train_config: PairwiseTrainConfig,
                  training: bool) -> dict[str, tf.Tensor]:
  """Per-replica loss sums and counts of one batch.

  Returns:
    {"ranking_sum", "ranking_count", "class_sum", "class_count", "correct_pairs", "pairs"} float32 scalars.
  """
  zero = tf.constant(0.0)
  out = {"class_sum": zero, "class_count": zero}
  num_classes = model_config.num_classes
  if model_config.objective == "margin" and train_config.batching == "pairs":
    left, right = tf.gather(table.features, batch["left"]), tf.gather(table.features, batch["right"])
    outputs = model((left, right), training=training)
    scores = outputs["scores"] if num_classes else outputs
    pair_labels = batch["pair_labels"]
    if num_classes:
      logits = tf.concat([outputs["left_class_logits"], outputs["right_class_logits"]], axis=0)
      classes = tf.gather(table.class_labels, tf.concat([batch["left"], batch["right"]], axis=0))
      out["class_sum"] = tf.reduce_sum(listwise.class_loss_values(logits, classes, num_classes))
      out["class_count"] = tf.cast(tf.shape(classes)[0], tf.float32)
  else:
    lists = table.gather_lists(batch["rows"])
    if model_config.objective == "margin":
      result = group_batching.group_pair_scores(model, lists["items"], lists["mask"], lists["labels"],
                                                batch["flips"], train_config.min_label_gap, training=training)
      scores, pair_labels, embeddings = result["scores"], result["pair_labels"], result["embeddings"]
    else:
      embeddings = model.encode_lists(lists["items"], lists["mask"], training=training)
      item_scores = model.score_embeddings(embeddings, training=training)
      loss = listwise.get_listwise_loss(model_config.objective)
      per_list = listwise.listwise_loss_values(loss, lists["labels"], item_scores)
      out["ranking_sum"] = tf.reduce_sum(per_list)
      out["ranking_count"] = tf.cast(tf.shape(per_list)[0], tf.float32)
      oriented = pairs.oriented_list_pairs(lists["labels"], lists["mask"], train_config.min_label_gap)
      where = tf.where(oriented["valid"])
      left_scores = tf.gather_nd(item_scores, tf.stack([where[:, 0], tf.cast(
          tf.gather_nd(oriented["left"], where), tf.int64)], axis=1))
      right_scores = tf.gather_nd(item_scores, tf.stack([where[:, 0], tf.cast(
          tf.gather_nd(oriented["right"], where), tf.int64)], axis=1))
      scores = tf.stack([left_scores, right_scores], axis=1)
      pair_labels = tf.gather_nd(oriented["pair_labels"], where)
    if num_classes:
      valid_items = tf.where(lists["mask"])
      logits = model.classify(tf.gather_nd(embeddings, valid_items), training=training)
      classes = tf.gather_nd(lists["classes"], valid_items)
      out["class_sum"] = tf.reduce_sum(listwise.class_loss_values(logits, classes, num_classes))
      out["class_count"] = tf.cast(tf.shape(classes)[0], tf.float32)
  if model_config.objective == "margin":
    out["ranking_sum"] = tf.reduce_sum(pairs.margin_ranking_loss(scores[:, 0], scores[:, 1], pair_labels,
                                                                 model_config.margin))
    out["ranking_count"] = tf.cast(tf.shape(pair_labels)[0], tf.float32)
  out["correct_pairs"] = tf.reduce_sum(tf.cast(ranking_metrics.pairs_correct(pair_labels,
                                                                             scores[:, 0] - scores[:, 1]),
                                               tf.float32))
  out["pairs"] = tf.cast(tf.shape(pair_labels)[0], tf.float32)
  return out


class TrainingModel(tf.keras.Model):
  """The ranker with its pairwise or listwise loss as a Keras `train_step`, so the engine's `fit` trains it.

  Batches are item indices (`group_batching.list_dataset` / `pair_dataset`); the items stay in one table. Each
  loss term is a sum over the replica's pairs (items, lists) divided by the global count, all-reduced across
  replicas, so the summed replica gradients are those of the global mean; the ranker's regularisation losses
  (`ranker.losses`, e.g. a layer's L2 penalty) are added once. The logs (loss: the ranking loss; pair
  accuracy, pairs, class loss, and regularization_loss where the ranker has one) are global, the same on every
  replica.
  """

  def __init__(self, ranker: tf.keras.Model, table: group_batching.ItemTable, model_config: ModelConfig,
               train_config: PairwiseTrainConfig):
    super().__init__()
    self.ranker = ranker
    self._table = table
    self._model_config = model_config
    self._train_config = train_config
    self.distribute_reduction_method = "first"  # Logs are already global: do not add replicas up again.

  def call(self, inputs, training=None):
    return self.ranker(inputs, training=training)

  def train_step(self, batch):
    context = tf.distribute.get_replica_context()
    with tf.GradientTape() as tape:
      stats = _batch_losses(self.ranker, batch, self._table, self._model_config, self._train_config,
                            training=True)
      totals = {k: context.all_reduce(tf.distribute.ReduceOp.SUM, v) for k, v in stats.items()}
      ranking_loss = totals["ranking_sum"] / tf.maximum(totals["ranking_count"], 1.0)
      loss = stats["ranking_sum"] / tf.maximum(totals["ranking_count"], 1.0)
      if self._model_config.num_classes:
        loss += (self._model_config.class_loss_weight * stats["class_sum"]
                 / tf.maximum(totals["class_count"], 1.0))
      regularization = None
      if self.ranker.losses:  # Regularisation of the ranker's layers, counted once over the replicas.
        regularization = tf.add_n(self.ranker.losses)
        loss += regularization / self.distribute_strategy.num_replicas_in_sync
    variables = self.ranker.trainable_variables
    gradients = tape.gradient(loss, variables)
    if self.distribute_strategy.num_replicas_in_sync > 1:
      # Sparse (IndexedSlices) gradients of embedding lookups differ in size between replicas; inside the
      # engine's multi-step loop their all-gather fails ("Shape mismatch in the collective instance"). Dense
      # gradients are all-reduced instead.
      gradients = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in gradients]
    self.optimizer.apply_gradients([(g, v) for g, v in zip(gradients, variables,
                                                           strict=True) if g is not None])
    logs = {"loss": ranking_loss, "pair_accuracy": totals["correct_pairs"] / tf.maximum(totals["pairs"], 1.0),
            "pairs": totals["pairs"]}
    if self._model_config.num_classes:
      logs["class_loss"] = totals["class_sum"] / tf.maximum(totals["class_count"], 1.0)
    if regularization is not None:
      logs["regularization_loss"] = regularization
    return logs


# ------------------------------------------------------------------------------------------------ training


@dataclasses.dataclass
class PairwiseTrainResult:
  """What `train` returns.

  Attributes:
    model: The trained model (best validation checkpoint restored when validation data were given).
    history: One dict per validation evaluation ({"step", metrics...}).
    best_step: Step of the restored checkpoint (the last step without validation data).
    train_pairs_per_second: Training pairs per second of wall time after the first execution, validations
      included (the engine's examples/s times the mean pairs of a step).
    loop_seconds: Wall time of the training loop (tracing, validations and checkpoints included).
    steps: Steps trained in total (a resumed run's included).
  """

  model: tf.keras.Model
  history: list[dict[str, Any]]
  best_step: int
  train_pairs_per_second: float
  loop_seconds: float = 0.0
  steps: int = 0


TrainResult = PairwiseTrainResult  # Deprecated name (before 0.9.0); removed in 0.10.0.


def _features_match_encoder(items: GroupedItems, encoder_config: EncoderConfig) -> None:
  precomputed = isinstance(items.features, np.ndarray)
  if precomputed != encoder_config.takes_embeddings:
    raise ValueError(f"Encoder config (kind {encoder_config.kind!r}, precompute {encoder_config.precompute}) "
                     f"does not fit the items: they are {'embeddings' if precomputed else 'texts'}.")


def training_model(config: PairwiseConfig, train_items: GroupedItems,
                   strategy: tf.distribute.Strategy) -> tuple[tf.keras.Model, TrainingModel]:
  """The ranker of `config` with all variables built, and the compiled `TrainingModel` that trains it on
  `train_items`' index batches, both under `strategy`."""
  table = group_batching.ItemTable.from_items(train_items)
  with strategy.scope():
    ranker = build_model(config.model, make_encoder(config.encoder))
    # In replica context: TF Hub layers loaded under a strategy scope cannot run in cross-replica context.
    strategy.run(lambda: _build(ranker, train_items.features[0]))
    model = TrainingModel(ranker, table, config.model, config.train)
    # Its only variables are the ranker's, all created above: marked built, so the engine's BackupAndRestore
    # builds the optimizer before restoring a checkpoint instead of warning that the model is unbuilt.
    model.built = True
    model.compile(optimizer=make_optimizer(config.train))
  return ranker, model


def training_dataset(train_items: GroupedItems, config: PairwiseTrainConfig, steps: int) -> tf.data.Dataset:
  """The endless stream of index batches `TrainingModel` trains on: one seeded pass of `steps` batches,
  repeated.

  `.skip(step)` continues it at a step: the engine resumes a run there with the batches an uninterrupted run
  would have had.
  """
  if config.batching == "groups":
    dataset = group_batching.list_dataset(train_items, config.list_size, config.lists_per_batch, steps,
                                          config.seed, min_label_gap=config.min_label_gap)
  else:
    dataset = group_batching.pair_dataset(train_items, config.pair_batch_size, steps, config.seed,
                                          config.min_label_gap)
  return dataset.repeat().prefetch(2)


def _checked_global_batch(config: PairwiseConfig, train_items: GroupedItems,
                          strategy: tf.distribute.Strategy) -> int:
  """The global batch (lists or pairs per step); raises ValueError for a config or data `train` refuses."""
  train_config, model_config = config.train, config.model
  if not train_config.model_dir:
    raise ValueError("`train.model_dir` must be set.")
  _features_match_encoder(train_items, config.encoder)
  if model_config.num_classes:
    if train_items.class_labels is None:
      raise ValueError("`num_classes` > 0 needs items with `class_labels`.")
    if train_items.class_labels.max() >= model_config.num_classes:
      row = int(np.argmax(train_items.class_labels))
      raise ValueError(f"Class label {train_items.class_labels[row]} at train row {row} is >= `num_classes` "
                       f"{model_config.num_classes}.")
  replicas = strategy.num_replicas_in_sync
  global_batch = (
    train_config.lists_per_batch if train_config.batching == "groups" else train_config.pair_batch_size
  )
  if global_batch % replicas:
    raise ValueError(f"The global batch ({global_batch}) must be divisible by the {replicas} replicas.")
  return global_batch


def train(config: PairwiseConfig, train_items: GroupedItems,
          validation_items: GroupedItems | None = None,
          strategy: tf.distribute.Strategy | None = None) -> PairwiseTrainResult:
  """Trains the configured model on `train_items` under `strategy` (default: the current one), through the
  training engine (`rank4class_engine.loop.trainer.fit`).

  The engine writes resumable checkpoints (`backup/`, resumed after an interruption with the batches an
  uninterrupted run would have had), the best validation weights (`best/`, on validation "pair_accuracy_raw"),
  TensorBoard logs (`logs/`), a progress line and `progress.jsonl`, and locks `model_dir` against a second
  run; the directory's config and outputs are `run_experiment`'s (`rank4class_engine.runs.run_directory`).
  Validation runs every `eval_every` steps (0: once, at the end) and at the last of exactly `train_steps`
  steps.

  Raises:
    ValueError: for inconsistent configs or data.
    RunDirectoryBusyError: when another run holds `model_dir`.
  """
  strategy = strategy or tf.distribute.get_strategy()
  train_config = config.train
  global_batch = _checked_global_batch(config, train_items, strategy)
  tf.keras.utils.set_random_seed(train_config.seed)

  eval_every = train_config.eval_every or train_config.train_steps
  engine_config = trainer.EngineConfig(
      run_dir=train_config.model_dir, train_steps=train_config.train_steps, eval_every=eval_every,
      checkpoint_every=train_config.checkpoint_every,
      best_metric="pair_accuracy_raw" if validation_items is not None else "", global_batch_size=global_batch,
      preemption_grace_seconds=train_config.preemption_grace_seconds)
  ranker, model = training_model(config, train_items, strategy)
  stream = training_dataset(train_items, train_config, engine_config.train_steps)

  def validate(unused_model: tf.keras.Model) -> dict[str, float]:
    return evaluation.scalars(evaluation.evaluate(ranker, validation_items, config.eval))

  fit = trainer.fit(model, lambda start_step: stream.skip(start_step), engine_config, strategy,
                    validate=validate if validation_items is not None else None)
  history = [{"step": int(record["step"]), **{k[4:]: v for k, v in record.items() if k.startswith("val_")}}
             for record in fit.history] if validation_items is not None else []
  pairs_per_step = np.mean([record["pairs"] for record in fit.history]) if fit.history else float("nan")
  return PairwiseTrainResult(
    model=ranker,
    history=history,
    best_step=fit.best_step if fit.best_step is not None else fit.steps,
    train_pairs_per_second=(fit.examples_per_second or float("nan")) / global_batch * pairs_per_step,
    loop_seconds=fit.loop_seconds,
    steps=fit.steps,
  )


def export(model: tf.keras.Model, export_dir: str, eval_config: PairwiseEvaluationConfig,
           example_item: Any) -> dict[str, str]:
  """Writes serving SavedModels (loadable with `tf.keras.models.load_model` after `import pairwise`).

  A `PairwiseRanker` gives "pair_scorer" ((left [batch_size], right [batch_size]) -> [batch_size, 2]) and
  "list_scorer" (`aggregate.PairwiseListScorer`: items [num_lists, n] -> [num_lists, n]); a `ListwiseRanker`
  gives "item_scorer" (items [batch_size] -> scores). Each is written to a temporary folder and renamed.

  Returns:
    Name -> path of each export.
  """
  os.makedirs(export_dir, exist_ok=True)
  items = tf.constant([example_item, example_item])
  paths = {}
  if isinstance(model, listwise.ListwiseRanker):
    targets = {"item_scorer": (model, items)}
  else:
    scorer = aggregate.PairwiseListScorer(model, eval_config.aggregation, eval_config.symmetrize,
                                          name="list_scorer")
    list_input = (
      (items[tf.newaxis], tf.constant([[True, True]])) if items.dtype != tf.string else items[tf.newaxis]
    )
    targets = {"pair_scorer": (model, (items, items)), "list_scorer": (scorer, list_input)}
  for name, (target, example) in targets.items():
    target(example, training=False)
    paths[name] = os.path.join(export_dir, name)
    with atomic_directory(paths[name]) as path:
      target.save(path, include_optimizer=False)
  return paths


# ------------------------------------------------------------------------------------------------ runs


METRICS_FILE = "metrics.json"
# Config keys that may change when a run directory is reused: where it is, where rejects are listed, and the
# grace after a signal (none of them changes a result).
RESTART_FREE_KEYS = ("train.model_dir", "train.log_every", "data.rejects_path",
                     "train.preemption_grace_seconds")


def run_experiment(config: PairwiseConfig, strategy: tf.distribute.Strategy | None = None,
                   splits: dict[str, GroupedItems] | None = None, *,
                   overwrite: bool = False) -> dict[str, Any]:
  """Loads the data, trains with validation-based selection, evaluates the test split, exports.

  The run directory `config.train.model_dir` follows `rank4class_engine.runs.run_directory`: locked first,
  then the config compared (the same config resumes, or returns the finished run's metrics; another one is
  refused with the changed keys named unless `overwrite`), then written; the export appears whole; the
  checkpoint goes once `metrics.json` (validation history, test metrics with per-group values, best step,
  throughput) is written.

  Returns:
    The content of `metrics.json`.
  """
  strategy = strategy or tf.distribute.get_strategy()
  with run_directory.RunDirectory(config.train.model_dir, config.to_dict(), METRICS_FILE,
                                  restart_free=RESTART_FREE_KEYS, normalize=_comparable_config,
                                  overwrite=overwrite, overwrite_hint="`overwrite`",
                                  chief=distribute.is_chief(strategy),
                                  worker_dir=distribute.output_dir(config.train.model_dir, strategy)) as run:
    if run.finished is not None:
      return run.finished
    chief = distribute.is_chief(strategy)
    phases, start = {}, time.perf_counter()
    splits = splits if splits is not None else item_data.load_ranking_data(config.data)
    phases["data"] = time.perf_counter() - start
    _phase_line(chief, phases, "data", "Read the data")
    if config.encoder.precompute:
      splits = _embedded_splits(config, splits, phases, chief)
    validation = splits.get("validation")
    if validation is not None and len(pairs.group_lists(validation.group_ids, min_items=2)) == 0:
      validation = None
    result = train(config, splits["train"], validation, strategy)
    phases["loop"] = result.loop_seconds
    if chief:
      say(trainer.trained_line(result.steps, result.loop_seconds) + ".")
    start = time.perf_counter()
    test_metrics = evaluation.evaluate(result.model, splits["test"], config.eval)
    phases["test"] = time.perf_counter() - start
    _phase_line(chief, phases, "test", "Evaluated the test split")
    summary = {"best_step": result.best_step, "train_pairs_per_second": result.train_pairs_per_second,
               "validation_history": result.history, "test": test_metrics,
               "test_random_baseline": evaluation.random_baseline(splits["test"], config.eval,
                                                                  seed=config.train.seed),
               "num_items": {name: len(items) for name, items in splits.items()}}
    if config.train.export:
      start = time.perf_counter()
      with run.staged(run_directory.EXPORT_DIR) as staging:
        staged = export(result.model, staging, config.eval, splits["train"].features[0])
      final = run.file(run_directory.EXPORT_DIR)
      summary["export"] = {name: os.path.join(final, os.path.relpath(path, staging))
                           for name, path in staged.items()}
      phases["export"] = time.perf_counter() - start
      _phase_line(chief, phases, "export", f"Exported to {final}")
    summary["phase_seconds"] = phases
    run.finish(summary)
    return summary


def _embedded_splits(config: PairwiseConfig, splits: dict[str, GroupedItems], phases: dict[str, float],
                     chief: bool) -> dict[str, GroupedItems]:
  """The splits with their texts embedded once (`config.encoder.precompute`), the phase timed and said."""
  start, computed = time.perf_counter(), embedding_cache.computed_texts()
  texts = len({t for items in splits.values() for t in items.features})
  splits = item_data.prepare_items(config.encoder, splits)
  phases["embedding"] = time.perf_counter() - start
  note = embedding_cache.source_note(texts, embedding_cache.computed_texts() - computed)
  _phase_line(chief, phases, "embedding", f"Embedded {texts:,} texts", f" ({note})")
  return splits


def _phase_line(chief: bool, phases: dict[str, float], phase: str, what: str, note: str = "") -> None:
  """One line on stderr (stdout holds the JSON summary) for a phase that ran: "<what> in X s<note>."."""
  if chief and phase in phases:
    say(f"{what} in {phases[phase]:.1f} s{note}.")


def _comparable_config(config_dict: dict[str, Any]) -> dict[str, Any]:
  """A config.json dict through the dataclasses: fields added since it was written take their defaults."""
  return PairwiseConfig.from_dict(config_dict).to_dict()
