"""Evaluation of the pairwise models: each group ranked as one list from one encoding per item, and
measured."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import tensorflow as tf

from pairwise.margin import aggregate, configs, item_data, listwise, pairs
from pairwise.margin.configs import PairwiseEvaluationConfig
from rank4class_data.ranking.grouped_items import GroupedItems
from rank4class_data.validation import check_choice, write_json
from rank4class_engine.statistics import ranking_metrics


def score_items_as_lists(model: tf.keras.Model, items: GroupedItems, eval_config: PairwiseEvaluationConfig,
                         rows: np.ndarray) -> dict[str, np.ndarray]:
  """Scores padded lists of item rows [num_lists, n] (-1 = padding) with one encoding per item.

  Returns:
    {"scores": [num_lists, n] list scores, "preferences": [num_lists, n, n] raw pair preferences P (NaN for a
    listwise model: its pairs are its item-score differences), "labels", "mask"}.
  """
  mask = rows >= 0
  safe = np.maximum(rows, 0)
  labels = np.where(mask, items.labels[safe], pairs.PADDING_LABEL)
  n = rows.shape[1]
  lists_per_batch = max(1, eval_config.max_pairs_per_batch // max(n * n, 1))
  scores, preferences = [], []
  for start in range(0, len(rows), lists_per_batch):
    batch_rows = safe[start:start + lists_per_batch]
    batch_mask = tf.constant(mask[start:start + lists_per_batch])
    if isinstance(items.features, np.ndarray):
      batch_items = tf.constant(items.features[batch_rows], tf.float32)
    else:
      texts = np.asarray(items.features, dtype=object)[batch_rows]
      batch_items = tf.reshape(tf.constant(texts.reshape(-1).tolist(), tf.string), texts.shape)
    if isinstance(model, listwise.ListwiseRanker):
      s = model.score_lists(batch_items, batch_mask, training=False).numpy()
      preferences.append(s[:, :, None] - s[:, None, :])
    else:
      left = model.encode_lists(batch_items, batch_mask, "left", training=False)
      if model.is_pointwise:
        s = aggregate.score_lists(model, batch_items, batch_mask, training=False).numpy()
        preferences.append(s[:, :, None] - s[:, None, :])
      else:
        right = (model.encode_lists(batch_items, batch_mask, "right", training=False)
                 if model.separate_encoders else left)
        raw = aggregate.pair_preference_matrix(model, left, right, training=False)
        oriented = aggregate.orient_preferences(raw, eval_config.symmetrize)
        s = aggregate.aggregate_preferences(oriented, batch_mask, eval_config.aggregation).numpy()
        preferences.append(raw.numpy())
    scores.append(s)
  return {"scores": np.concatenate(scores), "preferences": np.concatenate(preferences), "labels": labels,
          "mask": mask}


def evaluate(model: tf.keras.Model, items: GroupedItems,
             eval_config: PairwiseEvaluationConfig) -> dict[str, Any]:
  """Ranks every group of `items` as one list and measures it.

  Metrics (definitions in `ranking_metrics`): "ndcg@k", "map@k", "mrr@k" (relevance: label >=
  `relevance_threshold`), "kendall_tau", "pair_accuracy" (of the aggregated list order, ties pessimistic) —
  means over groups with at least two items — and "pair_accuracy_raw": the model's own pair predictions, over
  every ordered pair (both orientations) with different labels, pooled over groups (the paper's "Pair Labels
  Accuracy"; a tie is wrong). "per_group" holds each group's values.
  """
  rows = pairs.group_lists(items.group_ids, list_size=None, seed=None, min_items=2)
  if len(rows) == 0:
    raise ValueError("No group with two or more items to evaluate.")
  result = score_items_as_lists(model, items, eval_config, rows)
  labels, scores, mask = result["labels"], result["scores"], result["mask"]
  metrics_config = ranking_metrics.RankingMetricsConfig(
      topn=eval_config.topn, gain=eval_config.gain, relevance_threshold=eval_config.relevance_threshold,
      tie_breaking=eval_config.tie_breaking)
  clean_labels = np.where(mask, labels, 0.0)
  clean_scores = np.where(mask, scores, 0.0)
  metrics = ranking_metrics.compute_metrics(clean_labels, clean_scores, mask, metrics_config)
  metrics["pair_accuracy_raw"] = ranking_metrics.preference_pair_accuracy(result["preferences"], labels, mask)
  suffix = f"@{eval_config.topn}"
  per_group = {"group_id": items.group_ids[rows[:, 0]].tolist(), "size": mask.sum(axis=1).tolist()}
  per_list_fns = {
      f"ndcg{suffix}": ranking_metrics.get("ndcg", topn=eval_config.topn, gain=eval_config.gain,
                                           tie_breaking=eval_config.tie_breaking),
      f"map{suffix}": ranking_metrics.get("map", topn=eval_config.topn,
                                          relevance_threshold=eval_config.relevance_threshold,
                                          tie_breaking=eval_config.tie_breaking),
      f"mrr{suffix}": ranking_metrics.get("mrr", topn=eval_config.topn,
                                          relevance_threshold=eval_config.relevance_threshold,
                                          tie_breaking=eval_config.tie_breaking),
      "pair_accuracy": ranking_metrics.get("pair_accuracy", tie_breaking=eval_config.tie_breaking),
  }
  for name, fn in per_list_fns.items():
    per_group[name] = fn(clean_labels, clean_scores, mask).tolist()
  metrics["num_groups"] = int(len(rows))
  metrics["num_items"] = int(mask.sum())
  metrics["per_group"] = per_group
  return metrics


def random_baseline(items: GroupedItems, eval_config: PairwiseEvaluationConfig, draws: int = 20,
                    seed: int = 0) -> dict[str, float]:
  """The metrics of `evaluate` for uniformly random scores, averaged over `draws` draws (chance level)."""
  rows = pairs.group_lists(items.group_ids, list_size=None, seed=None, min_items=2)
  mask = rows >= 0
  labels = np.where(mask, items.labels[np.maximum(rows, 0)], 0.0)
  metrics_config = ranking_metrics.RankingMetricsConfig(
      topn=eval_config.topn, gain=eval_config.gain, relevance_threshold=eval_config.relevance_threshold,
      tie_breaking=eval_config.tie_breaking)
  rng = np.random.default_rng(seed)
  runs = [ranking_metrics.compute_metrics(labels, rng.random(labels.shape), mask, metrics_config)
          for _ in range(draws)]
  return {k: float(np.nanmean([r[k] for r in runs])) for k in runs[0]}


def scalars(metrics: dict[str, Any]) -> dict[str, float]:
  """The numeric entries of a metrics dict (no per-group lists), as floats."""
  return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float, np.floating, np.integer))}


def evaluate_export(model_dir: str, split: str = "test") -> dict[str, Any]:
  """Re-evaluates the SavedModel exported to `model_dir/export` on a split rebuilt from `config.json`."""
  check_choice("split", split, configs.SPLIT_NAMES)
  with open(os.path.join(model_dir, "config.json")) as f:
    config = configs.PairwiseConfig.from_dict(json.load(f))
  export_dir = os.path.join(model_dir, "export")
  name = "item_scorer" if config.model.objective != "margin" else "pair_scorer"
  path = os.path.join(export_dir, name)
  if not os.path.isdir(path):
    raise ValueError(f"No exported model at {path}; train with export enabled first.")
  model = tf.keras.models.load_model(path)
  splits = item_data.prepare_items(config.encoder, item_data.load_ranking_data(config.data))
  metrics = evaluate(model, splits[split], config.eval)
  write_json(os.path.join(model_dir, f"evaluation_{split}.json"), metrics)
  return metrics
