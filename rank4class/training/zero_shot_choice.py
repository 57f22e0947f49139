"""The zero-shot model of a run whose classes are texts, chosen on classes held out of its training.

Training a model whose classes are texts (cosine towers: both start at the frozen encoder's cosine similarity,
the nearest class text) teaches it the training classes; on classes it never saw it can end below its
untrained start. So a second model is trained with a share of the training classes held out whole (their rows
too), and on those classes, ranked among their own texts as unseen classes are, the validation chooses how
long it trains (the best validation step, step 0 included: the untrained start) and how much of the untrained
cosine it keeps: scores `(1 - s) * trained cosine + s * untrained cosine` for s in `UNTRAINED_SHARES`, built
into both towers (`ranking_math.with_untrained_share`), so s = 1 is the nearest class text itself. On the
held-out classes the chosen model is never below that start. It is saved into `<model_dir>/zero_shot/export`,
where `rank4class-export --kind=zero_shot` takes it from.

  held = held_out_classes(num_classes=630, share=0.1, seed=0)   # 63 class ids
  split = split_held_out(data, held)                            # the run's data without them, and their rows
  validate = ZeroShotValidation(split, class_text_embeddings, temperature=0.05, metric="ndcg_5")
"""

import dataclasses
import json
import math
import os
import shutil
import time
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class.inference import full_class_scoring, served, serving, zero_shot
from rank4class.modeling import model as model_lib
from rank4class.training import training_data as data_lib
from rank4class.training.model_choice import BuildFn
from rank4class.training.model_setup import COSINE_START, ModelSetup
from rank4class.training.run_validation import make_validate_fn
from rank4class.training.train_config import EXPORT_DIR, OutputsConfig, RunConfig, metric_mode
from rank4class_data.messages import say
from rank4class_data.validation import check_range
from rank4class_encoders import text_embeddings
from rank4class_engine import distribute
from rank4class_engine.loop import trainer

# The run's subfolder of the zero-shot model: its checkpoints, progress log, export/ and CHOICE_FILE.
ZERO_SHOT_DIR = zero_shot.RUN_ZERO_SHOT_DIR
CHOICE_FILE = "zero_shot_choice.json"
# Share of the untrained cosine the zero-shot model may keep, chosen on the held-out classes.
UNTRAINED_SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)
# `OutputsConfig.zero_shot_holdout=None` (auto) holds out this share of the training classes, and at
# least MIN_HELD_OUT of them (fewer make a choice on noise), from MIN_CLASSES classes on (half of them at
# most).
AUTO_HOLDOUT = 0.1
MIN_HELD_OUT = 5
MIN_CLASSES = 10
# Validation metric names of the zero-shot model: METRIC_PREFIX + the run's metric, on the held-out classes.
METRIC_PREFIX = "zero_shot_"
SHARE_KEY = METRIC_PREFIX + "untrained_share"
UNTRAINED_PREFIX = METRIC_PREFIX + "untrained_"


def held_out_classes(num_classes: int, share: float, seed: int) -> np.ndarray:
  """Sorted ids of round(share * num_classes) classes drawn with `seed`, at most all but two (so two classes
  remain to train on), or none for fewer than two."""
  check_range("share", share, 0.0, 1.0, high_inclusive=False)
  count = min(int(math.floor(share * num_classes + 0.5)), max(num_classes - 2, 0))
  if count < 2:
    return np.zeros([0], np.int64)
  return np.sort(np.random.default_rng(seed).permutation(num_classes)[:count]).astype(np.int64)


def auto_held_out(num_classes: int, share: float | None, seed: int) -> np.ndarray:
  """The classes `OutputsConfig.zero_shot_holdout` holds out: None (auto) `AUTO_HOLDOUT` of them and
  at least `MIN_HELD_OUT`, from `MIN_CLASSES` classes on (none below); 0 none; a share in (0, 1) that share
  (at least 2 classes, or none)."""
  if share is None:
    if num_classes < MIN_CLASSES:
      return np.zeros([0], np.int64)
    share = max(AUTO_HOLDOUT, MIN_HELD_OUT / num_classes)
  return held_out_classes(num_classes, share, seed) if share > 0 else np.zeros([0], np.int64)


@dataclasses.dataclass
class HeldOutSplit:
  """A run's data split by class for the zero-shot choice.

  Attributes:
    seen: The data without the held-out classes (train and validation; no test), class ids renumbered
      0..C-H-1 in the old order, class texts and names of those classes.
    held_out: The held-out class ids (in the run's numbering), sorted.
    instances: The inputs of every training and validation row of the held-out classes.
    labels: Their classes as ids into `held_out` (0..H-1).
    class_names: The held-out classes' names, in `held_out` order.
    class_texts: Their texts.
  """

  seen: data_lib.PreparedData
  held_out: np.ndarray
  instances: np.ndarray
  labels: np.ndarray
  class_names: list[str]
  class_texts: list[str]


def split_held_out(data: data_lib.PreparedData, held_out: np.ndarray) -> HeldOutSplit:
  """Splits in-memory class-id data (frozen embeddings or dense features) by `held_out`. The classes' texts
  are `data.class_texts`, or their names when there are none (as the metadata class encoder embeds them).

  Raises:
    ValueError: for data not held in memory with class ids.
  """
  texts = list(data.class_texts) if data.class_texts is not None else list(data.class_names)
  splits = (data.train, data.validation)
  if not all(isinstance(s, data_lib.ArraySplit) and s.labels.ndim == 1 for s in splits):
    raise ValueError("The zero-shot choice needs the training rows in memory with one class id each.")
  num_classes = len(data.class_names)
  is_held = np.zeros([num_classes], bool)
  is_held[held_out] = True
  seen_ids = np.flatnonzero(~is_held)
  renumber = np.full([num_classes], -1, np.int64)
  renumber[seen_ids] = np.arange(len(seen_ids))
  held_renumber = np.full([num_classes], -1, np.int64)
  held_renumber[held_out] = np.arange(len(held_out))

  def seen_part(split: data_lib.ArraySplit) -> data_lib.ArraySplit:
    keep = ~is_held[split.labels]
    return data_lib.ArraySplit(split.features[keep], renumber[split.labels[keep]])

  instances = np.concatenate([s.features[is_held[s.labels]] for s in splits])
  labels = np.concatenate([held_renumber[s.labels[is_held[s.labels]]] for s in splits])
  seen = dataclasses.replace(
      data, train=seen_part(data.train), validation=seen_part(data.validation), test=None,
      class_names=[data.class_names[i] for i in seen_ids], class_texts=[texts[i] for i in seen_ids],
      raw_texts=None, conversions={})
  return HeldOutSplit(seen=seen, held_out=np.asarray(held_out, np.int64), instances=instances, labels=labels,
                      class_names=[data.class_names[i] for i in held_out],
                      class_texts=[texts[i] for i in held_out])


def _unit(x: np.ndarray) -> np.ndarray:
  x = np.asarray(x, np.float64)
  return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


class ZeroShotValidation:
  """The validation of the zero-shot model: `split.instances` ranked among the held-out class texts.

  Called with the model (trained cosine towers, untrained share 0), it returns for the best share s of
  `UNTRAINED_SHARES` the run's ranking metrics with `METRIC_PREFIX`, s under `SHARE_KEY`, and the untrained
  cosine's metrics (s = 1) with `UNTRAINED_PREFIX`.

  Args:
    split: The held-out classes and their rows.
    class_text_embeddings: The frozen text encoder's embeddings of `split.class_texts` `[H, d]`.
    metric: The ranking metric that chooses s (e.g. "ndcg_5", "top_1_error").
    ks: Cutoffs of the metrics.
    batch_size: Instances scored at once.
  """

  def __init__(self, split: HeldOutSplit, class_text_embeddings: np.ndarray, metric: str,
               ks: tuple[int, ...] = (1, 5), batch_size: int = 512):
    self._split = split
    self._class_text_embeddings = tf.constant(_unit(class_text_embeddings), tf.float32)
    self._metric = metric
    self._sign = 1.0 if metric_mode(metric) == "max" else -1.0
    self._ks = ks
    self._batch_size = batch_size
    self._untrained = (
      _unit(split.instances.reshape(len(split.instances), -1)) @ _unit(class_text_embeddings).T
    )
    self._untrained_metrics = self._metrics(self._untrained)
    self._score = None

  def _metrics(self, cosines: np.ndarray) -> dict[str, float]:
    return full_class_scoring.rank_metrics(served.strictly_higher_ranks(cosines, self._split.labels),
                                           self._ks)

  def trained_cosines(self, model: model_lib.Rank4ClassModel) -> np.ndarray:
    """The trained towers' cosines `[n, H]` of the held-out rows and class texts (the scores x
    temperature)."""
    if self._score is None:
      encoder = model.class_encoder
      self._score = tf.function(lambda x: model.class_vector_scores(
          x, encoder.project_text_embeddings(self._class_text_embeddings), training=False))
    temperature = model.interaction.temperature
    instances = self._split.instances
    return np.concatenate([self._score(tf.constant(instances[i:i + self._batch_size])).numpy()
                           for i in range(0, len(instances), self._batch_size)]) * temperature

  def __call__(self, model: model_lib.Rank4ClassModel) -> dict[str, float]:
    trained = self.trained_cosines(model)
    best = None
    for share in UNTRAINED_SHARES:
      metrics = self._metrics((1.0 - share) * trained + share * self._untrained)
      if best is None or self._sign * metrics[self._metric] > self._sign * best[1][self._metric]:
        best = (share, metrics)
    share, metrics = best
    return {**{METRIC_PREFIX + k: v for k, v in metrics.items()}, SHARE_KEY: share,
            **{UNTRAINED_PREFIX + k: v for k, v in self._untrained_metrics.items()}}


def summary(split: HeldOutSplit, metric: str, best_step: int | None,
            best_metrics: dict[str, float]) -> dict[str, Any]:
  """The choice's record (`Rank4ClassTrainResult.zero_shot`, CHOICE_FILE)."""
  return {"held_out_classes": list(split.class_names), "num_held_out_classes": int(len(split.held_out)),
          "num_held_out_rows": int(len(split.labels)), "metric": metric, "mode": metric_mode(metric),
          "step": best_step, "untrained_share": best_metrics.get(SHARE_KEY),
          "value": best_metrics.get(METRIC_PREFIX + metric),
          "untrained_value": best_metrics.get(UNTRAINED_PREFIX + metric)}


def choice_line(record: dict[str, Any]) -> str:
  """"Zero-shot model (63 classes held out of its training, 630 rows): step 300, untrained share 0.25;
  held-out ndcg_5 0.8123 against the untrained cosine's 0.7901."."""
  return (f"Zero-shot model ({record['num_held_out_classes']} classes held out of its training, "
          f"{record['num_held_out_rows']:,} rows): step {record['step']}, untrained share "
          f"{record['untrained_share']:g}; held-out {record['metric']} {record['value']:.4f} against the "
          f"untrained cosine's {record['untrained_value']:.4f}.")


def held_out_of_run(holdout: float | None, seed: int, setup: ModelSetup, data: data_lib.PreparedData,
                        strategy: tf.distribute.Strategy) -> np.ndarray:
  """The classes the zero-shot model is trained without (`OutputsConfig.zero_shot_holdout`, drawn by `seed`):
  for cosine towers over in-memory class ids, not under MultiWorkerMirroredStrategy; none otherwise."""
  if (setup.start != COSINE_START or isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
      or not isinstance(data.train, data_lib.ArraySplit) or data.train.labels.ndim != 1):
    return np.zeros([0], np.int64)
  return auto_held_out(len(data.class_names), holdout, seed)


def with_untrained_share(model_config: model_lib.Rank4ClassConfig,
                          share: float) -> model_lib.Rank4ClassConfig:
  """`model_config` with the untrained `share` mixed into both towers (`zero_shot_choice`)."""
  return dataclasses.replace(model_config, instance_encoder=dataclasses.replace(
      model_config.instance_encoder,
      mlp=dataclasses.replace(model_config.instance_encoder.mlp, untrained_share=share)),
      class_encoder=dataclasses.replace(model_config.class_encoder, metadata=dataclasses.replace(
          model_config.class_encoder.metadata, untrained_share=share)))


def train_zero_shot(model_dir: str, run: RunConfig, outputs: OutputsConfig, data_config: data_lib.DataConfig,
                     build: BuildFn, model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData,
                     held_out: np.ndarray, engine: trainer.EngineConfig, strategy: tf.distribute.Strategy,
                     chief: bool, phases: dict[str, float]) -> dict:
  """Trains the zero-shot model (`zero_shot_choice`) in `<model_dir>/zero_shot` without the `held_out`
  classes, for the run's steps, validating it on them; exports the chosen step with the chosen untrained share
  into `<model_dir>/zero_shot/export`. Resumes from its own checkpoints like the run. Returns its record."""
  start = time.perf_counter()
  split = split_held_out(data, held_out)
  metadata = model_config.class_encoder.metadata
  seen_config = dataclasses.replace(model_config, class_encoder=dataclasses.replace(
      model_config.class_encoder, metadata=dataclasses.replace(metadata, class_texts=split.seen.class_texts)))
  ks = tuple(model_config.metric_ks)
  metric = run.best_metric if run.best_metric != "loss" else f"ndcg_{max(ks)}"
  run_dir = os.path.join(model_dir, ZERO_SHOT_DIR)
  if chief and run.verbose:
    say(f"Zero-shot model: trained without {len(held_out)} of the {len(data.class_names)} classes, "
        f"validated on their {len(split.labels):,} rows ({run_dir}).")
  model = build(seen_config, split.seen)
  score_fn = served.make_score_fn(model, data_lib.input_spec(split.seen.validation), strategy)
  seen_validate = make_validate_fn(score_fn, model, split.seen, ks, max(run.batch_size, 256), with_loss=False)
  class_vectors = text_embeddings.embed_texts(split.class_texts, metadata.text,
                                              data_config.embedding_cache_dir)
  held_out_validate = ZeroShotValidation(split, class_vectors, metric, ks)

  def validate(m):
    with strategy.scope():
      return {**seen_validate(m), **held_out_validate(m)}

  def train_dataset(start_step: int):
    if strategy.num_replicas_in_sync == 1:
      return split.seen.train.make_dataset(run.batch_size, True, True, run.seed).skip(start_step)
    return strategy.distribute_datasets_from_function(
        lambda ctx: split.seen.train.make_dataset(run.batch_size, True, True, run.seed, ctx).skip(start_step))

  fitted = trainer.fit(model, train_dataset, dataclasses.replace(
      engine, run_dir=run_dir, best_metric=METRIC_PREFIX + metric,
      best_mode=metric_mode(metric), validate_start=True), strategy, validate=validate)
  record = summary(split, metric, fitted.best_step, fitted.best_metrics)
  mixed_config = with_untrained_share(seen_config, record["untrained_share"])
  mixed = build(mixed_config, split.seen)
  mixed.set_weights(model.get_weights())
  if outputs.export:
    target = distribute.output_dir(run_dir, strategy, EXPORT_DIR)
    serving.export_saved_model(mixed, target, top_k=outputs.serving_top_k, overwrite=True,
                               frozen_text_encoder=data_lib.frozen_text_encoder(data_config,
                                                                                data.text_handles))
    record["export_dir"] = target if chief else None
    if not chief:
      shutil.rmtree(target, ignore_errors=True)
  if chief:
    with open(os.path.join(run_dir, CHOICE_FILE), "w", encoding="utf-8") as f:
      json.dump(record, f, indent=2)
  phases["zero_shot"] = time.perf_counter() - start
  return record
