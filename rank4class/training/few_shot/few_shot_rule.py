"""When a run is few-shot, and its labelled rows as one set: a run whose classes have few labelled rows each
trains on all of them and makes every choice by cross-validation (`few_shot_path`), since a validation split
carved from them (10 % of 8 rows per class: under one row per class) would choose on noise.

The rule: a text run (frozen MiniLM embeddings) whose median class holds at most `FEW_SHOT_MEDIAN_ROWS`
labelled rows (the training files' rows, the validation split a run would carve included), every class at
least 2 (one row per fold at the least), fewer than `MAX_CLASSES` classes, and the model, its length and its
validation left to the defaults (no `--validation_files`, `--train_steps` or `--epochs`; softmax loss, dot
interaction, full class lists, no logit adjustment). At 32 rows per class the carved split holds about 3 rows
per class; from there on a 10 % split of a few hundred rows, and the default run's own cross-validation of its
regressions below 300 validation rows, choose as before.

  rows_per_class(labels, 3)        # [8, 8, 8]
  fold_count(np.array([8, 3, 9]))  # 3: min(MAX_FOLDS, the smallest class)
"""

import dataclasses

import numpy as np

from rank4class.modeling import class_sampling, interactions
from rank4class.modeling import model as model_lib
from rank4class.training import training_data as data_lib
from rank4class.training.train_config import RunConfig
from rank4class_engine.optimization import losses as losses_lib

# A run is few-shot from this median of labelled rows per class down.
FEW_SHOT_MEDIAN_ROWS = 32
# Cross-validation folds: min(MAX_FOLDS, the smallest class's rows), and at least MIN_FOLDS.
MAX_FOLDS = 5
MIN_FOLDS = 2
# From this many classes on the toolkit's baselines and candidates switch to centroids
# (`model_setup.AUTO_CENTROID_CLASSES`); the few-shot path stays below it.
MAX_CLASSES = 500
AUTO, ON, OFF = "auto", "on", "off"


def rows_per_class(labels: np.ndarray, num_classes: int) -> np.ndarray:
  """The labelled rows of each class `[num_classes]`."""
  return np.bincount(np.asarray(labels, np.int64), minlength=num_classes)


def fold_count(counts: np.ndarray) -> int:
  """The folds of the cross-validation: `min(MAX_FOLDS, the smallest class)`, at least `MIN_FOLDS` (every
  fold then holds a row of each class)."""
  return max(MIN_FOLDS, min(MAX_FOLDS, int(np.min(counts))))


def _labelled(data: data_lib.PreparedData) -> np.ndarray | None:
  """Class ids of every labelled row (training and validation splits), None when not held in memory as
  class ids."""
  splits = (data.train, data.validation)
  if not all(isinstance(s, data_lib.ArraySplit) and s.labels.ndim == 1 for s in splits):
    return None
  return np.concatenate([s.labels for s in splits])


def missing(run: RunConfig, data_config: data_lib.DataConfig, model_config: model_lib.Rank4ClassConfig,
            data: data_lib.PreparedData) -> list[str]:
  """What the few-shot path needs and this run lacks, in words (empty: it can apply); with `run.few_shot`
  "on" only what the path itself needs, not the defaults that "auto" asks for."""
  labels = _labelled(data)
  counts = None if labels is None else rows_per_class(labels, len(data.class_names))
  needs = [
    ("frozen text embeddings as inputs (`data.text_mode`=auto or frozen on text)",
     data.input_kind == data_lib.EMBEDDING_INPUT and data.text_handles is not None),
    ("the labelled rows in memory with one class id each", labels is not None),
    ("no `data.validation_files` (every labelled row trains; cross-validation chooses)",
     not data_config.validation_files),
    (f"fewer than {MAX_CLASSES} classes", len(data.class_names) < MAX_CLASSES),
    ("at least 2 labelled rows in every class", counts is not None and int(np.min(counts)) >= 2)]
  if run.few_shot == AUTO:
    needs += [
      ("the default length (no `run.train_steps` or `run.epochs`)", run.train_steps is None and
       run.epochs is None),
      ("the softmax loss, the dot interaction, full class lists and no logit adjustment",
       model_config.loss.type == losses_lib.SOFTMAX and model_config.interaction.type == interactions.DOT
       and model_config.sampling == class_sampling.SamplingConfig() and not model_config.logit_adjustment)]
  return [need for need, ok in needs if not ok]


def applies(run: RunConfig, data_config: data_lib.DataConfig, model_config: model_lib.Rank4ClassConfig,
            data: data_lib.PreparedData) -> bool:
  """Whether the run trains by the few-shot path (`run.few_shot`): "off" never; "on" always (ValueError
  naming what it lacks where it cannot); "auto" where nothing is missing and the median class holds at most
  `FEW_SHOT_MEDIAN_ROWS` labelled rows."""
  if run.few_shot == OFF:
    return False
  lacking = missing(run, data_config, model_config, data)
  if run.few_shot == ON:
    if lacking:
      raise ValueError("few_shot='on' needs " + "; ".join(lacking) + ".")
    return True
  if lacking:
    return False
  return float(np.median(rows_per_class(_labelled(data), len(data.class_names)))) <= FEW_SHOT_MEDIAN_ROWS


def all_rows(data: data_lib.PreparedData) -> data_lib.PreparedData:
  """`data` with its training and validation rows as one training split (every labelled row trains); the
  validation split is that same set, read only where a model must be built on a sample or a baseline
  reports beside the test split."""
  train, validation = data.train, data.validation
  rows = data_lib.ArraySplit(np.concatenate([train.features, validation.features]),
                             np.concatenate([train.labels, validation.labels]))
  raw = None
  if data.raw_texts is not None and data.raw_texts[0] is not None and data.raw_texts[1] is not None:
    texts = np.concatenate([data.raw_texts[0], data.raw_texts[1]])
    raw = (texts, texts, data.raw_texts[2])
  return dataclasses.replace(data, train=rows, validation=rows, raw_texts=raw,
                             validation_note="none: every labelled row trains, and cross-validation on them "
                                             "chooses (few labelled rows per class)")
