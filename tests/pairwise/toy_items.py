"""Toy grouped items for the pairwise tests: texts whose words hint at their label, embeddings that hold
it."""

import dataclasses

import numpy as np
import tensorflow as tf

from pairwise.margin import configs, margin_model
from rank4class_data.ranking.grouped_items import GroupedItems
from rank4class_engine import distribute

GOOD, MID, BAD = ["great", "excellent", "best"], ["okay", "fine", "average"], ["awful", "worst", "terrible"]
FILLER = ["drug", "pill", "day", "night", "sleep", "dose", "doctor", "week"]


def text_items(num_groups: int, per_group: int, seed: int) -> GroupedItems:
  """Reviews whose words hint at their label: one word of the label's set, one of a random set, fillers."""
  rng = np.random.default_rng(seed)
  word_sets = [BAD, MID, GOOD]
  texts, labels = [], []
  for _ in range(num_groups * per_group):
    label = int(rng.integers(0, 3))
    words = [rng.choice(word_sets[label]), rng.choice(word_sets[int(rng.integers(0, 3))])]
    words += list(rng.choice(FILLER, 3))
    texts.append(" ".join(rng.permutation(words)))
    labels.append(label)
  labels = np.array(labels)
  return GroupedItems(texts, labels.astype(float), np.repeat(np.arange(num_groups), per_group),
                      class_labels=labels)


def embedding_items(num_groups: int, per_group: int, seed: int, dim: int = 8,
                    noise: float = 0.5) -> GroupedItems:
  """Embeddings whose first coordinate is the label plus noise."""
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, 3, size=num_groups * per_group)
  features = rng.normal(size=(len(labels), dim)).astype(np.float32)
  features[:, 0] = labels + rng.normal(0, noise, size=len(labels))
  return GroupedItems(features, labels.astype(float), np.repeat(np.arange(num_groups), per_group),
                      class_labels=labels)


def oracle(items: GroupedItems) -> margin_model.PairwiseRanker:
  """A linear pair head scoring the first embedding coordinate (the label): a perfect ranker."""
  model = margin_model.PairwiseRanker(None, head="linear")
  z = tf.constant(items.features[:2])
  model((z, z))
  weights = np.zeros([items.features.shape[1], 1], np.float32)
  weights[0] = 1.0
  model._head._linear.set_weights([weights, np.zeros([1], np.float32)])  # pylint: disable=protected-access
  return model


def config(model_dir: str, encoder: configs.EncoderConfig | None = None,
           **train_kwargs) -> configs.PairwiseConfig:
  """A short run on precomputed embeddings (or `encoder`), without export; `train_kwargs` are fields of the
  train section or of its optimizer (learning_rate=..., weight_decay=...)."""
  optimizer = {"learning_rate": 5e-3}
  optimizer.update({k: train_kwargs.pop(k) for k in configs.FLAT_OPTIMIZER_FIELDS if k in train_kwargs})
  train = dict(model_dir=model_dir, train_steps=60, list_size=8, lists_per_batch=4, log_every=20,
               checkpoint_every=30, export=False,
               optimizer=dataclasses.replace(configs.default_optimizer(), **optimizer))
  train.update(train_kwargs)
  return configs.PairwiseConfig(encoder=encoder or configs.EncoderConfig(kind="precomputed"),
                                train=configs.PairwiseTrainConfig(**train),
                                eval=configs.PairwiseEvaluationConfig(topn=5))


_STRATEGY = []


def two_replica_strategy() -> tf.distribute.Strategy:
  """One 2-replica MirroredStrategy per process: strategies created per test can collide in collective
  keys."""
  if not _STRATEGY:
    _STRATEGY.append(distribute.make_strategy("mirrored", ["/cpu:0", "/cpu:1"]))
  return _STRATEGY[0]
