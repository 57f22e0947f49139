"""The class-conversion experiment (Rank over Class Table 4, §4.3): a ranking converted into classes against a
classifier on the same encoder, trained on a skewed train set and tested on a balanced one."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import tensorflow as tf

from pairwise.margin import aggregate, evaluation, item_data, margin_model, pairwise_train
from pairwise.margin.configs import ModelConfig, PairwiseConfig, PairwiseEvaluationConfig
from pairwise.margin.pairwise_train import RESTART_FREE_KEYS
from rank4class_data.datasets import drug_reviews
from rank4class_data.ranking.grouped_items import GroupedItems
from rank4class_engine import distribute
from rank4class_engine.runs import run_directory


@dataclasses.dataclass
class ClassConversionConfig:
  """The Table 4 experiment (§4.3): skewed train, balanced test, converted ranking vs a classifier.

  Attributes:
    test_per_class: Test items per class in the balanced test set (0: the smallest class count).
    proportions: Class proportions for the conversion (None: equal segments, right for a balanced test).
    classifier_steps: Training steps of the classifier (0: `train.train_steps`).
    classifier_batch_size: Items per classifier batch.
  """

  test_per_class: int = 0
  proportions: list[float] | None = None
  classifier_steps: int = 0
  classifier_batch_size: int = 32


def balanced_subset(items: GroupedItems, per_class: int, seed: int) -> GroupedItems:
  """`per_class` random items of each class (0: as many as the smallest class has)."""
  classes, counts = np.unique(items.class_labels, return_counts=True)
  per_class = per_class or int(counts.min())
  if per_class > counts.min():
    raise ValueError(f"`test_per_class` {per_class} exceeds the smallest class count {counts.min()}.")
  rng = np.random.default_rng(seed)
  rows = np.concatenate([rng.choice(np.flatnonzero(items.class_labels == c), per_class, replace=False)
                         for c in classes])
  return items.subset(np.sort(rows))


def build_classifier(encoder: tf.keras.layers.Layer | None, num_classes: int, dim: int,
                     config: ModelConfig) -> tf.keras.Model:
  """The classifier baseline on the same encoder: the paper's blocks d→d→d/2, then softmax logits."""
  layers = [] if encoder is None else [encoder]
  layers += margin_model.paper_tower(dim, config.dropout, config.batch_norm)
  layers.append(tf.keras.layers.Dense(num_classes))
  return tf.keras.Sequential(layers, name="classifier")


def _macro_f1(truth: np.ndarray, predicted: np.ndarray, num_classes: int) -> float:
  scores = []
  for c in range(num_classes):
    tp = np.sum((predicted == c) & (truth == c))
    denominator = np.sum(predicted == c) + np.sum(truth == c)
    scores.append(2 * tp / denominator if denominator else 0.0)
  return float(np.mean(scores))


def class_conversion(model: tf.keras.Model, items: GroupedItems, num_classes: int,
                     eval_config: PairwiseEvaluationConfig,
                     proportions: list[float] | None = None) -> dict[str, Any]:
  """Ranks all `items` as ONE list and converts the order into classes (Table 4; `aggregate` docstring).

  Returns:
    {"accuracy", "predicted" int64 [n], "scores" [n]} against `items.class_labels`.
  """
  if items.class_labels is None:
    raise ValueError("Class conversion needs `class_labels`.")
  rows = np.arange(len(items))[None, :]
  scores = evaluation.score_items_as_lists(model, items, eval_config, rows)["scores"][0]
  predicted = aggregate.ranking_to_classes(scores, num_classes, proportions)
  return {"accuracy": float(np.mean(predicted == items.class_labels)), "predicted": predicted,
          "scores": scores}


RESULT_FILE = "class_conversion.json"


def run_class_conversion(config: PairwiseConfig, conversion: ClassConversionConfig,
                         strategy: tf.distribute.Strategy | None = None,
                         train_items: GroupedItems | None = None,
                         test_items: GroupedItems | None = None, *,
                         overwrite: bool = False) -> dict[str, Any]:
  """Table 4 on the drug reviews: rank a balanced test set as one list, convert to classes, vs a classifier.

  The ranker trains on the (skewed) train file with `config.data.pivot` groups and rating labels; the
  classifier (same encoder, same optimizer) trains with softmax cross-entropy on the same items. Reported:
  converted ranking accuracy; the classifier's argmax accuracy and macro-F1; and, for a like-for-like use of
  the known balanced prior, the classifier's expected class Σ_k k·p_k ranked and converted the same way.
  """
  strategy = strategy or tf.distribute.get_strategy()
  with run_directory.RunDirectory(config.train.model_dir, {"pairwise": config.to_dict(),
                                                           "conversion": dataclasses.asdict(conversion)},
                                  RESULT_FILE, restart_free=tuple(f"pairwise.{k}" for k in RESTART_FREE_KEYS),
                                  normalize=_comparable_config,
                                  overwrite=overwrite, overwrite_hint="`overwrite`",
                                  chief=distribute.is_chief(strategy)) as run:
    if run.finished is not None:
      return run.finished
    summary = _class_conversion(config, conversion, strategy, train_items, test_items)
    run.finish(summary)
    return summary


def _comparable_config(config_dict: dict[str, Any]) -> dict[str, Any]:
  """A class-conversion run's config.json dict with its pairwise part through the dataclasses (a run written
  before 0.9.0, whose AdamW settings were train fields of their own, compares equal to the same run now)."""
  if isinstance(config_dict.get("pairwise"), dict):
    return {**config_dict, "pairwise": PairwiseConfig.from_dict(config_dict["pairwise"]).to_dict()}
  return config_dict


def _class_conversion(config: PairwiseConfig, conversion: ClassConversionConfig,
                      strategy: tf.distribute.Strategy,
                      train_items: GroupedItems | None, test_items: GroupedItems | None) -> dict[str, Any]:
  splits = {}
  if train_items is None or test_items is None:
    # Embedding the whole pool keeps one frozen-embedding cache entry for every seed's balanced test draw.
    splits["pool"] = drug_reviews.drug_review_items("none", "rating")
  if train_items is None:
    train_items = drug_reviews.drug_review_items(config.data.pivot, "rating", splits=("train",))
  if test_items is None:
    test_items = balanced_subset(drug_reviews.drug_review_items("none", "rating", splits=("test",)),
                                 conversion.test_per_class, config.data.split_seed)
  splits = item_data.prepare_items(config.encoder, {**splits, "train": train_items, "test": test_items})
  train_items, test_items = splits["train"], splits["test"]
  num_classes = int(max(train_items.class_labels.max(), test_items.class_labels.max())) + 1
  result = pairwise_train.train(config, train_items, None, strategy)
  ranked = class_conversion(result.model, test_items, num_classes, config.eval, conversion.proportions)
  train_config = config.train
  tf.keras.utils.set_random_seed(train_config.seed)
  with strategy.scope():
    encoder = pairwise_train.make_encoder(config.encoder)
    dim = encoder.output_dim if encoder is not None else int(np.asarray(train_items.features).shape[1])
    classifier = build_classifier(encoder, num_classes, dim, config.model)
    classifier.compile(optimizer=pairwise_train.make_optimizer(train_config),
                       loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  features = (np.asarray(train_items.features) if isinstance(train_items.features, np.ndarray)
              else np.asarray(train_items.features, dtype=object))
  steps = conversion.classifier_steps or train_config.train_steps
  dataset = tf.data.Dataset.from_tensor_slices((features, train_items.class_labels)).shuffle(
      len(train_items), seed=train_config.seed, reshuffle_each_iteration=True).repeat().batch(
          conversion.classifier_batch_size, drop_remainder=True)
  classifier.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0)
  test_features = (np.asarray(test_items.features) if isinstance(test_items.features, np.ndarray)
                   else tf.constant(list(test_items.features)))
  logits = classifier.predict(test_features, batch_size=64, verbose=0)
  probabilities = tf.nn.softmax(logits).numpy()
  argmax = probabilities.argmax(axis=1)
  expected_class = probabilities @ np.arange(num_classes)
  converted = aggregate.ranking_to_classes(expected_class, num_classes, conversion.proportions)
  truth = test_items.class_labels
  summary = {
      "ranking_converted_accuracy": ranked["accuracy"],
      "classifier_accuracy": float(np.mean(argmax == truth)),
      "classifier_macro_f1": _macro_f1(truth, argmax, num_classes),
      "classifier_converted_accuracy": float(np.mean(converted == truth)),
      "train_class_counts": np.bincount(train_items.class_labels, minlength=num_classes).tolist(),
      "test_class_counts": np.bincount(truth, minlength=num_classes).tolist(),
  }
  return summary
