"""Training, evaluation and export of the pairwise margin-ranking Transformer under a tf.distribute strategy.

The library behind `pairwise_main.py`: configs are dataclasses, nothing here reads flags. A run writes to
`model_dir`: `config.json`, `checkpoints/` (latest, resumable), `best/` (best validation checkpoint),
`logs/{train,validation}` (TensorBoard), `metrics.json` and `export/` (SavedModels: `pair_scorer` scores a pair
of items, `list_scorer` ranks padded lists from one encoding per item; a listwise model exports `item_scorer`).

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
import json
import math
import os
import shutil
import tempfile
from typing import Any

import numpy as np
import tensorflow as tf

from pairwise import (
  aggregate,
  group_batching,
  listwise,
  margin_model,
  newsgroups_qrels,
  pairs,
  ranking_metrics,
)
from rank4class_data import elwc
from rank4class_engine import trainer

DATASETS = ("drug_reviews", "newsgroups_queries", "elwc")
DRUG_REVIEW_PIVOTS = ("condition", "drug_name", "none")
DRUG_REVIEW_LABELS = ("rating", "useful_count")
OBJECTIVES = ("margin",) + listwise.LISTWISE_LOSSES
BATCHINGS = ("groups", "pairs")
ENCODER_KINDS = ("text_encoder", "hashed_bow", "precomputed")
SPLIT_NAMES = ("train", "validation", "test")

# Separates query and passage in one concatenated item (the paper's MS MARCO input, §4.4). Plain text, since a
# literal "[SEP]" is split into "[", "sep", "]" by BERT's basic tokenizer.
QUERY_PASSAGE_SEPARATOR = " | "


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
  if value not in allowed:
    raise ValueError(f"`{name}` must be one of {list(allowed)}, got {value!r}.")


@dataclasses.dataclass
class DataConfig:
  """Which real data set, pivot and labels to rank, and how to split it.

  Attributes:
    dataset: One of `DATASETS`. "drug_reviews": Drugs.com reviews, train and test files pooled, then split by
      group. "newsgroups_queries": a graded query–passage set derived from 20 Newsgroups (see
      `newsgroup_query_items`); train/validation groups come from the train file, test groups from the test file.
      "elwc": the user's text ranking lists in ELWC files (`data_files`; one group per list), split by group.
    pivot: Drug reviews' contextual pivot, one of `DRUG_REVIEW_PIVOTS` ("none" = one group of everything).
    label: Drug reviews' ranking label, one of `DRUG_REVIEW_LABELS` (ordinal rating 0/1/2, or usefulCount).
    validation_fraction: Fraction of rows (whole groups) for validation.
    test_fraction: Fraction of rows (whole groups) for test (drug reviews only).
    split_seed: Seed of the group split and of the 20 Newsgroups sampling.
    num_queries: 20 Newsgroups queries drawn from the train file (train + validation).
    num_test_queries: 20 Newsgroups queries drawn from the test file.
    passages_per_grade: Passages per query with grade 0, 1 and 2 (fewer where the pool is smaller).
    query_words: Words of the query document used as the query (its subject comes first).
    passage_words: Words kept of each passage.
    max_items_per_group: Drug reviews: a larger group keeps a seeded random subset (0 = keep all).
    data_files: elwc: comma-separated globs of ELWC TFRecord files.
    label_key: elwc: example feature holding the relevance (TF-Ranking's ANTIQUE example: "relevance").
    text_key: elwc: example feature holding the item's text (a string or a token list).
    query_key: elwc: context feature holding the query; present, an item reads "<query> | <text>".
  """

  dataset: str = "drug_reviews"
  pivot: str = "condition"
  label: str = "rating"
  validation_fraction: float = 0.1
  test_fraction: float = 0.2
  split_seed: int = 0
  num_queries: int = 60
  num_test_queries: int = 30
  passages_per_grade: tuple[int, int, int] = (7, 7, 6)
  query_words: int = 8
  passage_words: int = 60
  max_items_per_group: int = 0
  data_files: str = ""
  label_key: str = "label"
  text_key: str = "document_tokens"
  query_key: str = "query_tokens"

  def __post_init__(self):
    _check_choice("dataset", self.dataset, DATASETS)
    if self.dataset == "elwc" and not self.data_files:
      raise ValueError("--dataset=elwc needs --data_files (ELWC TFRecord files of text ranking lists).")
    if self.dataset == "elwc" and not (self.label_key and self.text_key):
      raise ValueError("--dataset=elwc needs --label_key and --text_key naming example features.")
    _check_choice("pivot", self.pivot, DRUG_REVIEW_PIVOTS)
    _check_choice("label", self.label, DRUG_REVIEW_LABELS)
    self.passages_per_grade = tuple(int(k) for k in self.passages_per_grade)
    if len(self.passages_per_grade) != 3 or min(self.passages_per_grade) < 0:
      raise ValueError(f"`passages_per_grade` must be 3 counts >= 0, got {self.passages_per_grade}.")


@dataclasses.dataclass
class EncoderConfig:
  """The shared text encoder.

  Attributes:
    kind: One of `ENCODER_KINDS`: "text_encoder" (`rank4class.text_encoder.TextEncoder`, TF Hub BERT
      convention), "hashed_bow" (`margin_model.HashedBagOfWordsEncoder`), "precomputed" (items are embeddings,
      e.g. from a frozen encoder; no encoder in the model).
    preprocess_handle: TF Hub handle or SavedModel dir of the BERT preprocessor ("text_encoder").
    encoder_handle: TF Hub handle or SavedModel dir of the BERT encoder ("text_encoder").
    trainable: Fine-tune the encoder.
    pooling: "mean" or "cls" ("text_encoder").
    max_seq_length: Tokens per passage (paper: 128).
    hashed_buckets: Hash buckets ("hashed_bow").
    hashed_dim: Embedding width ("hashed_bow").
    precompute: "text_encoder" only: embed every text once with the frozen encoder (cached on disk by
      `rank4class.embedding_cache`) and train the head on the embeddings; the model then takes embeddings
      and has no encoder.
    embedding_cache_dir: Where precomputed embeddings are cached (None: `DEFAULT_EMBEDDING_CACHE_DIR`).
  """

  kind: str = "text_encoder"
  preprocess_handle: str = ""
  encoder_handle: str = ""
  trainable: bool = True
  pooling: str = "mean"
  max_seq_length: int = 128
  hashed_buckets: int = 4096
  hashed_dim: int = 64
  precompute: bool = False
  embedding_cache_dir: str | None = None

  def __post_init__(self):
    _check_choice("kind", self.kind, ENCODER_KINDS)
    if self.precompute and self.kind != "text_encoder":
      raise ValueError(f"`precompute` needs kind='text_encoder', got {self.kind!r}.")

  @property
  def takes_embeddings(self) -> bool:
    """Whether the model's inputs are embeddings rather than texts."""
    return self.kind == "precomputed" or self.precompute


@dataclasses.dataclass
class ModelConfig:
  """The ranking model and its objective.

  Attributes:
    objective: One of `OBJECTIVES`: "margin" (the paper's pairwise model and loss), or a listwise TF-Ranking
      loss on per-item scores ("softmax", "approx_ndcg").
    head: Pair head of the margin objective, one of `margin_model.HEADS` ("linear" = §4.5 "w/o MLP").
    separate_encoders: Two encoders for left and right passages (§4.5 ablation).
    margin: γ of the margin loss (paper: 2).
    dropout: Head dropout (paper: 0.2).
    batch_norm: Head BatchNorm.
    num_classes: > 0 adds the double-headed option's class head (classes = the data's class labels).
    class_loss_weight: Weight of the class cross-entropy added to the ranking loss.
  """

  objective: str = "margin"
  head: str = "mlp"
  separate_encoders: bool = False
  margin: float = 2.0
  dropout: float = 0.2
  batch_norm: bool = True
  num_classes: int = 0
  class_loss_weight: float = 1.0

  def __post_init__(self):
    _check_choice("objective", self.objective, OBJECTIVES)
    _check_choice("head", self.head, margin_model.HEADS)
    if self.margin < 0:
      raise ValueError(f"`margin` must be >= 0, got {self.margin}.")
    if self.class_loss_weight < 0:
      raise ValueError(f"`class_loss_weight` must be >= 0, got {self.class_loss_weight}.")


@dataclasses.dataclass
class EvalConfig:
  """How lists are ranked and measured.

  Attributes:
    aggregation: Pair scores -> list order, one of `aggregate.AGGREGATIONS`.
    symmetrize: Average f(a, b) and -f(b, a).
    topn: Cutoff k of NDCG@k, MAP@k, MRR@k.
    relevance_threshold: Labels >= this are relevant for MAP and MRR.
    gain: NDCG gain, "exponential" (2^label - 1) or "linear" (use for counts such as usefulCount).
    tie_breaking: Ranking-metric tie policy (`ranking_metrics.TIE_BREAKING_POLICIES`).
    max_pairs_per_batch: Bound on pairs scored at once when ranking lists.
  """

  aggregation: str = "mean_preference"
  symmetrize: bool = True
  topn: int = 10
  relevance_threshold: float = 2.0
  gain: str = "exponential"
  tie_breaking: str = "pessimistic"
  max_pairs_per_batch: int = 65536

  def __post_init__(self):
    _check_choice("aggregation", self.aggregation, aggregate.AGGREGATIONS)


@dataclasses.dataclass
class TrainConfig:
  """Optimisation and bookkeeping.

  Attributes:
    model_dir: Output folder: config.json, metrics.json, export/, and the engine's backup/ (while running),
      best/, logs/ and progress.jsonl.
    batching: "groups" (group-batched, one encoding per item) or "pairs" (per-pair encoding, as the reference).
    list_size: Items per training list (groups are chunked to this size).
    lists_per_batch: Lists per global batch ("groups"); divisible by the number of replicas.
    pair_batch_size: Pairs per global batch ("pairs").
    min_label_gap: Minimum label difference of a training pair.
    train_steps: Optimisation steps.
    learning_rate: AdamW α (paper: 4e-5 for BERT).
    beta_1: AdamW β1.
    beta_2: AdamW β2.
    epsilon: AdamW ε (paper: 1e-8).
    weight_decay: Decoupled weight decay (not on biases, norms or PReLU slopes).
    global_clipnorm: Clip the global gradient norm (reference: 1.0); 0 disables.
    log_every: Unused since training runs through the engine (TensorBoard scalars at each validation); kept so
      earlier config.json files load.
    eval_every: Steps between validation evaluations (0 = only at the end).
    checkpoint_every: Steps between resumable checkpoints (the engine's; combined with `eval_every` by their
      greatest common divisor, since executions end on both).
    seed: Seed of initialisation, pair orientation and list chunking.
    export: Write SavedModels to `model_dir/export` at the end.
  """

  model_dir: str = ""
  batching: str = "groups"
  list_size: int = 20
  lists_per_batch: int = 4
  pair_batch_size: int = 32
  min_label_gap: float = 0.0
  train_steps: int = 1000
  learning_rate: float = 4e-5
  beta_1: float = 0.9
  beta_2: float = 0.999
  epsilon: float = 1e-8
  weight_decay: float = 0.01
  global_clipnorm: float = 1.0
  log_every: int = 50
  eval_every: int = 0
  checkpoint_every: int = 500
  seed: int = 0
  export: bool = True

  def __post_init__(self):
    _check_choice("batching", self.batching, BATCHINGS)
    for name in ("list_size", "lists_per_batch", "pair_batch_size", "train_steps", "log_every",
                 "checkpoint_every"):
      if getattr(self, name) < 1:
        raise ValueError(f"`{name}` must be >= 1, got {getattr(self, name)}.")
    if self.list_size < 2:
      raise ValueError(f"`list_size` must be >= 2, got {self.list_size}.")
    if self.learning_rate <= 0:
      raise ValueError(f"`learning_rate` must be > 0, got {self.learning_rate}.")


@dataclasses.dataclass
class PairwiseConfig:
  """Everything a run needs; written to `model_dir/config.json`.

  Attributes:
    data: `DataConfig`.
    encoder: `EncoderConfig`.
    model: `ModelConfig`.
    train: `TrainConfig`.
    eval: `EvalConfig`.
  """

  data: DataConfig = dataclasses.field(default_factory=DataConfig)
  encoder: EncoderConfig = dataclasses.field(default_factory=EncoderConfig)
  model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
  train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
  eval: EvalConfig = dataclasses.field(default_factory=EvalConfig)

  def __post_init__(self):
    if self.model.objective != "margin" and self.train.batching != "groups":
      raise ValueError(f"Listwise objective {self.model.objective!r} needs batching='groups', got "
                       f"{self.train.batching!r}.")
    if self.encoder.takes_embeddings and self.model.separate_encoders:
      raise ValueError("`separate_encoders` needs an encoder in the model, not precomputed embeddings.")

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> PairwiseConfig:
    sections = {"data": DataConfig, "encoder": EncoderConfig, "model": ModelConfig, "train": TrainConfig,
                "eval": EvalConfig}
    unknown = set(values) - set(sections)
    if unknown:
      raise ValueError(f"Unknown config sections {sorted(unknown)}; expected {sorted(sections)}.")
    return cls(**{name: kind(**values.get(name, {})) for name, kind in sections.items()})


def write_json_atomic(path: str, values: Any) -> None:
  """Writes JSON to a temporary file in the same folder, then renames it over `path`."""
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp_", suffix=".json")
  with os.fdopen(fd, "w") as f:
    json.dump(values, f, indent=2, sort_keys=True, default=_json_default)
  os.replace(tmp, path)


def _json_default(value: Any) -> Any:
  if isinstance(value, np.generic):
    return value.item()
  if isinstance(value, np.ndarray):
    return value.tolist()
  raise TypeError(f"Not JSON serializable: {type(value)}")


# ------------------------------------------------------------------------------------------------ data


def newsgroup_query_items(texts: list[str], labels: np.ndarray, class_names: list[str], num_queries: int,
                          passages_per_grade: tuple[int, int, int] = (7, 7, 6), query_words: int = 8,
                          passage_words: int = 60, seed: int = 0, first_group_id: int = 0) -> pairs.GroupedItems:
  """A graded query–passage ranking set from one 20 Newsgroups split.

  Each query is the first `query_words` words (the subject comes first) of a random document q; its list holds
  other documents of the split: `passages_per_grade[2]` from q's newsgroup (grade 2), `[1]` from other groups of
  q's hierarchy (grade 1; misc.forsale has none) and `[0]` from other hierarchies (grade 0), each cut to
  `passage_words` words. An item is "query | passage", concatenated as the paper's MS MARCO input (§4.4).

  Returns:
    `GroupedItems` with labels = grades, class_labels = grades, one group per query.
  """
  if num_queries < 1:
    raise ValueError(f"`num_queries` must be >= 1, got {num_queries}.")
  rng = np.random.default_rng(seed)
  labels = np.asarray(labels)
  hierarchies = np.array([newsgroups_qrels.hierarchy_of(class_names[c]) for c in labels])
  words = [t.split() for t in texts]
  query_rows = rng.choice(len(texts), size=min(num_queries, len(texts)), replace=False)
  features, grades, groups, names = [], [], [], []
  for g, q in enumerate(query_rows):
    query = " ".join(words[q][:query_words])
    same_group = labels == labels[q]
    same_hierarchy = hierarchies == hierarchies[q]
    pools = {2: same_group, 1: same_hierarchy & ~same_group, 0: ~same_hierarchy}
    for grade in (2, 1, 0):
      pool = np.flatnonzero(pools[grade] & (np.arange(len(texts)) != q))
      chosen = rng.choice(pool, size=min(passages_per_grade[grade], len(pool)), replace=False)
      for p in chosen:
        features.append(query + QUERY_PASSAGE_SEPARATOR + " ".join(words[p][:passage_words]))
        grades.append(grade)
        groups.append(first_group_id + g)
    names.append(query)
  grades = np.asarray(grades, np.int64)
  return pairs.GroupedItems(features=features, labels=grades.astype(np.float64), group_ids=np.asarray(groups),
                            class_labels=grades, group_names=names)


def drug_review_items(pivot: str = "condition", label: str = "rating", splits: tuple[str, ...] = ("train", "test"),
                      max_items_per_group: int = 0, seed: int = 0) -> pairs.GroupedItems:
  """Drugs.com reviews as `GroupedItems`: pooled `splits`, grouped by `pivot`, ranked by `label`.

  Class labels are always the ordinal rating (0 negative, 1 neutral, 2 positive).
  """
  _check_choice("pivot", pivot, DRUG_REVIEW_PIVOTS)
  _check_choice("label", label, DRUG_REVIEW_LABELS)
  from rank4class_data import datasets  # pylint: disable=g-import-not-at-top

  texts, ratings, useful, keys = [], [], [], []
  for split in splits:
    data = datasets.load_drug_reviews(split)
    texts += data.reviews
    ratings.append(data.ratings)
    useful.append(data.useful_counts)
    keys += {"condition": data.conditions, "drug_name": data.drug_names,
             "none": ["all"] * len(data.reviews)}[pivot]
  ratings = np.concatenate(ratings)
  useful = np.concatenate(useful)
  group_ids, names = pairs.dense_group_ids(keys)
  items = pairs.GroupedItems(features=texts, labels=(ratings if label == "rating" else useful).astype(np.float64),
                             group_ids=group_ids, class_labels=ratings, group_names=names)
  if max_items_per_group > 0:
    rng = np.random.default_rng(seed)
    keep = np.concatenate([
        np.sort(rng.permutation(np.flatnonzero(group_ids == g))[:max_items_per_group])
        for g in np.unique(group_ids)])
    items = items.subset(np.sort(keep))
  return items


def elwc_items(config: DataConfig) -> pairs.GroupedItems:
  """The user's ELWC text lists as items, one group per list (`rank4class_data.elwc.read_text_lists`)."""
  lists = elwc.read_text_lists(config.data_files, config.label_key, config.text_key, config.query_key or None)
  texts, labels, group_ids, names = [], [], [], []
  for group, text_list in enumerate(lists):
    prefix = "" if text_list.query is None else text_list.query + QUERY_PASSAGE_SEPARATOR
    texts += [prefix + text for text in text_list.texts]
    labels += text_list.labels
    group_ids += [group] * len(text_list.texts)
    names.append(f"{os.path.basename(text_list.path)}:{text_list.row}")
  return pairs.GroupedItems(texts, np.asarray(labels), np.asarray(group_ids), group_names=names)


def load_ranking_data(config: DataConfig) -> dict[str, pairs.GroupedItems]:
  """Train/validation/test `GroupedItems` of a real data set, split by group (never by pair)."""
  if config.dataset in ("drug_reviews", "elwc"):
    items = elwc_items(config) if config.dataset == "elwc" else drug_review_items(
        config.pivot, config.label, max_items_per_group=config.max_items_per_group, seed=config.split_seed)
    split = pairs.split_by_group(items.group_ids, config.validation_fraction, config.test_fraction,
                                 config.split_seed)
    return {"train": items.subset(split.train), "validation": items.subset(split.validation),
            "test": items.subset(split.test)}
  from rank4class_data import datasets  # pylint: disable=g-import-not-at-top

  kwargs = dict(passages_per_grade=config.passages_per_grade, query_words=config.query_words,
                passage_words=config.passage_words)
  train_data = datasets.load_text_classification("20newsgroups", "train")
  test_data = datasets.load_text_classification("20newsgroups", "test")
  train_items = newsgroup_query_items(train_data.texts, train_data.labels, train_data.class_names,
                                      config.num_queries, seed=config.split_seed, **kwargs)
  test_items = newsgroup_query_items(test_data.texts, test_data.labels, test_data.class_names,
                                     config.num_test_queries, seed=config.split_seed + 1,
                                     first_group_id=config.num_queries, **kwargs)
  split = pairs.split_by_group(train_items.group_ids, config.validation_fraction, 0.0, config.split_seed)
  return {"train": train_items.subset(split.train), "validation": train_items.subset(split.validation),
          "test": test_items}


# ------------------------------------------------------------------------------------------------ model


def make_encoder(config: EncoderConfig) -> tf.keras.layers.Layer | None:
  """The encoder layer of `config` (None for precomputed embeddings)."""
  if config.takes_embeddings:
    return None
  if config.kind == "hashed_bow":
    return margin_model.HashedBagOfWordsEncoder(config.hashed_buckets, config.hashed_dim, name="encoder")
  if not config.preprocess_handle or not config.encoder_handle:
    raise ValueError("Encoder kind 'text_encoder' needs `preprocess_handle` and `encoder_handle`.")
  from rank4class import text_encoder  # pylint: disable=g-import-not-at-top

  return text_encoder.TextEncoder(config.preprocess_handle, config.encoder_handle, trainable=config.trainable,
                                  pooling=config.pooling, max_seq_length=config.max_seq_length, name="encoder")


def build_model(config: ModelConfig, encoder: tf.keras.layers.Layer | None) -> tf.keras.Model:
  """`PairwiseRanker` for the margin objective, `ListwiseRanker` for a listwise one."""
  if config.objective == "margin":
    return margin_model.PairwiseRanker(encoder, head=config.head, separate_encoders=config.separate_encoders,
                                       dropout=config.dropout, batch_norm=config.batch_norm,
                                       num_classes=config.num_classes, name="pairwise_ranker")
  return listwise.ListwiseRanker(encoder, dropout=config.dropout, batch_norm=config.batch_norm,
                                 num_classes=config.num_classes, name="listwise_ranker")


def make_optimizer(config: TrainConfig) -> tf.keras.optimizers.Optimizer:
  """AdamW with the paper's β1, β2, ε; no decay on biases, norms and PReLU slopes."""
  optimizer = tf.keras.optimizers.AdamW(
      learning_rate=config.learning_rate, weight_decay=config.weight_decay, beta_1=config.beta_1,
      beta_2=config.beta_2, epsilon=config.epsilon, global_clipnorm=config.global_clipnorm or None,
      jit_compile=False)
  optimizer.exclude_from_weight_decay(
      var_names=["bias", "LayerNorm", "layer_norm", "batch_norm", "gamma", "beta", "alpha"])
  return optimizer


def _build(model: tf.keras.Model, example_item: Any) -> None:
  """Creates all variables by one call on a two-item batch (in inference mode, so BatchNorm stays put)."""
  items = tf.constant([example_item, example_item])
  model((items, items) if isinstance(model, margin_model.PairwiseRanker) else items, training=False)


# ------------------------------------------------------------------------------------------------ losses


def _batch_losses(model: tf.keras.Model, batch: dict[str, tf.Tensor], table: group_batching.ItemTable,
                  model_config: ModelConfig, train_config: TrainConfig, training: bool) -> dict[str, tf.Tensor]:
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
  out["correct_pairs"] = tf.reduce_sum(tf.cast(pair_labels * (scores[:, 0] - scores[:, 1]) > 0, tf.float32))
  out["pairs"] = tf.cast(tf.shape(pair_labels)[0], tf.float32)
  return out


class TrainingModel(tf.keras.Model):
  """The ranker with its pairwise or listwise loss as a Keras `train_step`, so the engine's `fit` trains it.

  Batches are item indices (`group_batching.list_dataset` / `pair_dataset`); the items stay in one table. Each
  loss term is a sum over the replica's pairs (items, lists) divided by the global count, all-reduced across
  replicas, so the summed replica gradients are those of the global mean. The logs (loss, pair accuracy, pairs,
  class loss) are global sums over replicas, the same on every replica.
  """

  def __init__(self, ranker: tf.keras.Model, table: group_batching.ItemTable, model_config: ModelConfig,
               train_config: TrainConfig):
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
    variables = self.ranker.trainable_variables
    gradients = tape.gradient(loss, variables)
    if self.distribute_strategy.num_replicas_in_sync > 1:
      # Sparse (IndexedSlices) gradients of embedding lookups differ in size between replicas; inside the
      # engine's multi-step loop their all-gather fails ("Shape mismatch in the collective instance"). Dense
      # gradients are all-reduced instead.
      gradients = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in gradients]
    self.optimizer.apply_gradients([(g, v) for g, v in zip(gradients, variables, strict=True) if g is not None])
    logs = {"loss": ranking_loss, "pair_accuracy": totals["correct_pairs"] / tf.maximum(totals["pairs"], 1.0),
            "pairs": totals["pairs"]}
    if self._model_config.num_classes:
      logs["class_loss"] = totals["class_sum"] / tf.maximum(totals["class_count"], 1.0)
    return logs


# ------------------------------------------------------------------------------------------------ evaluation


def _pair_accuracy_from_preferences(preferences: np.ndarray, labels: np.ndarray, mask: np.ndarray) -> float:
  """Raw pair accuracy: over ordered pairs (i, j) with different labels, sign(P_ij) = sign(y_i - y_j)."""
  label_diff = np.sign(labels[:, :, None] - labels[:, None, :])
  valid = (label_diff != 0) & mask[:, :, None] & mask[:, None, :]
  correct = np.sign(preferences) == label_diff
  return float(correct[valid].mean()) if valid.any() else float("nan")


def score_items_as_lists(model: tf.keras.Model, items: pairs.GroupedItems, eval_config: EvalConfig,
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


def evaluate(model: tf.keras.Model, items: pairs.GroupedItems, eval_config: EvalConfig) -> dict[str, Any]:
  """Ranks every group of `items` as one list and measures it.

  Metrics (definitions in `ranking_metrics`): "ndcg@k", "map@k", "mrr@k" (relevance: label >=
  `relevance_threshold`), "kendall_tau", "pair_accuracy" (of the aggregated list order, ties pessimistic) — means
  over groups with at least two items — and "pair_accuracy_raw": the model's own pair predictions, over every
  ordered pair (both orientations) with different labels, pooled over groups (the paper's "Pair Labels
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
  metrics["pair_accuracy_raw"] = _pair_accuracy_from_preferences(result["preferences"], labels, mask)
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


def random_baseline(items: pairs.GroupedItems, eval_config: EvalConfig, draws: int = 20,
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


def class_conversion(model: tf.keras.Model, items: pairs.GroupedItems, num_classes: int,
                     eval_config: EvalConfig, proportions: list[float] | None = None) -> dict[str, Any]:
  """Ranks all `items` as ONE list and converts the order into classes (Table 4; `aggregate` docstring).

  Returns:
    {"accuracy", "predicted" int64 [n], "scores" [n]} against `items.class_labels`.
  """
  if items.class_labels is None:
    raise ValueError("Class conversion needs `class_labels`.")
  rows = np.arange(len(items))[None, :]
  scores = score_items_as_lists(model, items, eval_config, rows)["scores"][0]
  predicted = aggregate.ranking_to_classes(scores, num_classes, proportions)
  return {"accuracy": float(np.mean(predicted == items.class_labels)), "predicted": predicted, "scores": scores}


# ------------------------------------------------------------------------------------------------ training


@dataclasses.dataclass
class TrainResult:
  """What `train` returns.

  Attributes:
    model: The trained model (best validation checkpoint restored when validation data were given).
    history: One dict per validation evaluation ({"step", metrics...}).
    best_step: Step of the restored checkpoint (the last step without validation data).
    train_pairs_per_second: Training pairs per second of wall time after the first execution, validations
      included (the engine's examples/s times the mean pairs of a step).
  """

  model: tf.keras.Model
  history: list[dict[str, Any]]
  best_step: int
  train_pairs_per_second: float


def _features_match_encoder(items: pairs.GroupedItems, encoder_config: EncoderConfig) -> None:
  precomputed = isinstance(items.features, np.ndarray)
  if precomputed != encoder_config.takes_embeddings:
    raise ValueError(f"Encoder config (kind {encoder_config.kind!r}, precompute {encoder_config.precompute}) does "
                     f"not fit the items: they are {'embeddings' if precomputed else 'texts'}.")


def train(config: PairwiseConfig, train_items: pairs.GroupedItems,
          validation_items: pairs.GroupedItems | None = None,
          strategy: tf.distribute.Strategy | None = None) -> TrainResult:
  """Trains the configured model on `train_items` under `strategy` (default: the current one), through the
  training engine (`rank4class_engine.trainer.fit`).

  Writes config.json; the engine writes resumable checkpoints (`backup/`, resumed after an interruption), the
  best validation weights (`best/`, on validation "pair_accuracy_raw"), TensorBoard logs (`logs/`), a progress
  line and `progress.jsonl`, and locks `model_dir` against a second run. Validation runs every `eval_every`
  steps (0: once, at the end); the run has `train_steps` rounded up to a multiple of `eval_every`.

  Raises:
    ValueError: for inconsistent configs or data.
    RunDirectoryBusyError: when another run holds `model_dir`.
  """
  strategy = strategy or tf.distribute.get_strategy()
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
  global_batch = train_config.lists_per_batch if train_config.batching == "groups" else train_config.pair_batch_size
  if global_batch % replicas:
    raise ValueError(f"The global batch ({global_batch}) must be divisible by the {replicas} replicas.")
  os.makedirs(train_config.model_dir, exist_ok=True)
  write_json_atomic(os.path.join(train_config.model_dir, "config.json"), config.to_dict())
  tf.keras.utils.set_random_seed(train_config.seed)

  eval_every = train_config.eval_every or train_config.train_steps
  engine_config = trainer.EngineConfig(
      run_dir=train_config.model_dir, train_steps=train_config.train_steps, eval_every=eval_every,
      checkpoint_every=math.gcd(train_config.checkpoint_every, eval_every),
      best_metric="pair_accuracy_raw" if validation_items is not None else "", global_batch_size=global_batch)
  table = group_batching.ItemTable.from_items(train_items)
  with strategy.scope():
    ranker = build_model(model_config, make_encoder(config.encoder))
    # In replica context: TF Hub layers loaded under a strategy scope cannot run in cross-replica context.
    strategy.run(lambda: _build(ranker, train_items.features[0]))
    model = TrainingModel(ranker, table, model_config, train_config)
    model.compile(optimizer=make_optimizer(train_config))
  # One pass of seeded batches covers the run (repeated so the engine may round up); a resumed run restarts the
  # batch order from the top (the engine resumes the step count, weights and optimizer, not the input position).
  if train_config.batching == "groups":
    dataset = group_batching.list_dataset(train_items, train_config.list_size, train_config.lists_per_batch,
                                          engine_config.total_steps, train_config.seed,
                                          min_label_gap=train_config.min_label_gap)
  else:
    dataset = group_batching.pair_dataset(train_items, train_config.pair_batch_size, engine_config.total_steps,
                                          train_config.seed, train_config.min_label_gap)

  def validate(unused_model: tf.keras.Model) -> dict[str, float]:
    metrics = evaluate(ranker, validation_items, config.eval)
    return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float, np.floating, np.integer))}

  fit = trainer.fit(model, dataset.repeat().prefetch(2), engine_config, strategy,
                    validate=validate if validation_items is not None else None)
  history = [{"step": int(record["step"]), **{k[4:]: v for k, v in record.items() if k.startswith("val_")}}
             for record in fit.history] if validation_items is not None else []
  pairs_per_step = np.mean([record["pairs"] for record in fit.history]) if fit.history else float("nan")
  return TrainResult(model=ranker, history=history,
                     best_step=fit.best_step if fit.best_step is not None else fit.steps,
                     train_pairs_per_second=(fit.examples_per_second or float("nan")) / global_batch * pairs_per_step)


def export(model: tf.keras.Model, export_dir: str, eval_config: EvalConfig, example_item: Any) -> dict[str, str]:
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
    list_input = (items[tf.newaxis], tf.constant([[True, True]])) if items.dtype != tf.string else items[tf.newaxis]
    targets = {"pair_scorer": (model, (items, items)), "list_scorer": (scorer, list_input)}
  for name, (target, example) in targets.items():
    target(example, training=False)
    final = os.path.join(export_dir, name)
    tmp = tempfile.mkdtemp(dir=export_dir, prefix=f".tmp_{name}_")
    target.save(tmp, include_optimizer=False)
    if os.path.exists(final):
      shutil.rmtree(final)
    os.replace(tmp, final)
    paths[name] = final
  return paths


# ------------------------------------------------------------------------------------------------ runs


# The frozen-embedding cache folder shared with rank4class's binaries.
DEFAULT_EMBEDDING_CACHE_DIR = os.path.join("~", ".cache", "rank4class", "embeddings")
_EMBEDDING_MEMO: dict[tuple[Any, ...], np.ndarray] = {}


def embed_texts(texts: list[str], config: EncoderConfig) -> np.ndarray:
  """Frozen-encoder embeddings float32 [len(texts), d] of `config`'s text encoder.

  Computed once by `rank4class.embedding_cache` (on disk, keyed by encoder files, texts and settings) and
  memoized for the process, so seeds and splits share one encoding.
  """
  from rank4class import embedding_cache, text_encoder  # pylint: disable=g-import-not-at-top

  encoder = text_encoder.TextEncoderConfig(preprocess_handle=config.preprocess_handle,
                                           encoder_handle=config.encoder_handle, trainable=False,
                                           pooling=config.pooling, max_seq_length=config.max_seq_length)
  key = (config.preprocess_handle, config.encoder_handle, config.pooling, config.max_seq_length, tuple(texts))
  if key not in _EMBEDDING_MEMO:
    cache_dir = os.path.expanduser(config.embedding_cache_dir or DEFAULT_EMBEDDING_CACHE_DIR)
    _EMBEDDING_MEMO[key] = np.asarray(embedding_cache.embed_texts(encoder, list(texts), cache_dir=cache_dir),
                                      np.float32)
  return _EMBEDDING_MEMO[key]


def prepare_items(config: EncoderConfig, splits: dict[str, pairs.GroupedItems]) -> dict[str, pairs.GroupedItems]:
  """Replaces texts by frozen embeddings when `config.precompute`; otherwise returns `splits` unchanged.

  The distinct texts of all splits are embedded together in sorted order, so every split seed hits the same
  cache entry.
  """
  if not config.precompute:
    return splits
  unique = sorted({t for items in splits.values() for t in items.features})
  embeddings = embed_texts(unique, config)
  row = {t: i for i, t in enumerate(unique)}
  return {name: dataclasses.replace(items, features=embeddings[[row[t] for t in items.features]])
          for name, items in splits.items()}


def scalars(metrics: dict[str, Any]) -> dict[str, float]:
  """The numeric entries of a metrics dict (no per-group lists), as floats."""
  return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float, np.floating, np.integer))}


def run_experiment(config: PairwiseConfig, strategy: tf.distribute.Strategy | None = None,
                   splits: dict[str, pairs.GroupedItems] | None = None) -> dict[str, Any]:
  """Loads the data, trains with validation-based selection, evaluates the test split, exports.

  Writes `metrics.json` (validation history, test metrics with per-group values, best step, throughput) to
  `model_dir` and returns its content.
  """
  splits = splits if splits is not None else load_ranking_data(config.data)
  splits = prepare_items(config.encoder, splits)
  validation = splits.get("validation")
  if validation is not None and len(pairs.group_lists(validation.group_ids, min_items=2)) == 0:
    validation = None
  result = train(config, splits["train"], validation, strategy)
  test_metrics = evaluate(result.model, splits["test"], config.eval)
  summary = {"best_step": result.best_step, "train_pairs_per_second": result.train_pairs_per_second,
             "validation_history": result.history, "test": test_metrics,
             "test_random_baseline": random_baseline(splits["test"], config.eval, seed=config.train.seed),
             "num_items": {name: len(items) for name, items in splits.items()}}
  if config.train.export:
    summary["export"] = export(result.model, os.path.join(config.train.model_dir, "export"), config.eval,
                               splits["train"].features[0])
  write_json_atomic(os.path.join(config.train.model_dir, "metrics.json"), summary)
  return summary


def evaluate_export(model_dir: str, split: str = "test") -> dict[str, Any]:
  """Re-evaluates the SavedModel exported to `model_dir/export` on a split rebuilt from `config.json`."""
  _check_choice("split", split, SPLIT_NAMES)
  with open(os.path.join(model_dir, "config.json")) as f:
    config = PairwiseConfig.from_dict(json.load(f))
  export_dir = os.path.join(model_dir, "export")
  name = "item_scorer" if config.model.objective != "margin" else "pair_scorer"
  path = os.path.join(export_dir, name)
  if not os.path.isdir(path):
    raise ValueError(f"No exported model at {path}; train with export enabled first.")
  model = tf.keras.models.load_model(path)
  splits = prepare_items(config.encoder, load_ranking_data(config.data))
  metrics = evaluate(model, splits[split], config.eval)
  write_json_atomic(os.path.join(model_dir, f"evaluation_{split}.json"), metrics)
  return metrics


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


def balanced_subset(items: pairs.GroupedItems, per_class: int, seed: int) -> pairs.GroupedItems:
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
  layers += [margin_model.DenseBlock(dim, config.dropout, config.batch_norm),
             margin_model.DenseBlock(dim, config.dropout, config.batch_norm),
             margin_model.DenseBlock(max(dim // 2, 1), config.dropout, config.batch_norm),
             tf.keras.layers.Dense(num_classes)]
  return tf.keras.Sequential(layers, name="classifier")


def _macro_f1(truth: np.ndarray, predicted: np.ndarray, num_classes: int) -> float:
  scores = []
  for c in range(num_classes):
    tp = np.sum((predicted == c) & (truth == c))
    denominator = np.sum(predicted == c) + np.sum(truth == c)
    scores.append(2 * tp / denominator if denominator else 0.0)
  return float(np.mean(scores))


def run_class_conversion(config: PairwiseConfig, conversion: ClassConversionConfig,
                         strategy: tf.distribute.Strategy | None = None,
                         train_items: pairs.GroupedItems | None = None,
                         test_items: pairs.GroupedItems | None = None) -> dict[str, Any]:
  """Table 4 on the drug reviews: rank a balanced test set as one list, convert to classes, vs a classifier.

  The ranker trains on the (skewed) train file with `config.data.pivot` groups and rating labels; the
  classifier (same encoder, same optimizer) trains with softmax cross-entropy on the same items. Reported:
  converted ranking accuracy; the classifier's argmax accuracy and macro-F1; and, for a like-for-like use of the
  known balanced prior, the classifier's expected class Σ_k k·p_k ranked and converted the same way.
  """
  strategy = strategy or tf.distribute.get_strategy()
  splits = {}
  if train_items is None or test_items is None:
    # Embedding the whole pool keeps one frozen-embedding cache entry for every seed's balanced test draw.
    splits["pool"] = drug_review_items("none", "rating")
  if train_items is None:
    train_items = drug_review_items(config.data.pivot, "rating", splits=("train",))
  if test_items is None:
    test_items = balanced_subset(drug_review_items("none", "rating", splits=("test",)),
                                 conversion.test_per_class, config.data.split_seed)
  splits = prepare_items(config.encoder, {**splits, "train": train_items, "test": test_items})
  train_items, test_items = splits["train"], splits["test"]
  num_classes = int(max(train_items.class_labels.max(), test_items.class_labels.max())) + 1
  result = train(config, train_items, None, strategy)
  ranked = class_conversion(result.model, test_items, num_classes, config.eval, conversion.proportions)
  train_config = config.train
  tf.keras.utils.set_random_seed(train_config.seed)
  with strategy.scope():
    encoder = make_encoder(config.encoder)
    dim = encoder.output_dim if encoder is not None else int(np.asarray(train_items.features).shape[1])
    classifier = build_classifier(encoder, num_classes, dim, config.model)
    classifier.compile(optimizer=make_optimizer(train_config),
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
  write_json_atomic(os.path.join(train_config.model_dir, "class_conversion.json"), summary)
  return summary


def summarize_seeds(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
  """Mean and (sample, ddof=1) standard deviation over seeds of every scalar metric present in all results."""
  if not results:
    raise ValueError("No results to summarize.")
  keys = set.intersection(*(set(scalars(r)) for r in results))
  summary = {}
  for key in sorted(keys):
    values = np.array([scalars(r)[key] for r in results], np.float64)
    summary[key] = {"mean": float(np.nanmean(values)),
                    "std": float(np.nanstd(values, ddof=1)) if len(values) > 1 else 0.0, "n": len(values)}
  return summary
