"""The pairwise models' configs (data, encoder, model, training, evaluation), written to a run's
config.json."""

from __future__ import annotations

import dataclasses
from typing import Any

from pairwise.margin import aggregate, listwise, margin_model
from rank4class_data import file_formats
from rank4class_data.datasets import drug_reviews
from rank4class_data.rows import bad_rows as bad_rows_lib
from rank4class_data.rows import row_tables
from rank4class_data.validation import check_choice, check_range
from rank4class_encoders import text_encoder
from rank4class_engine.optimization import optimizers
from rank4class_engine.runs import configs as engine_configs
from rank4class_engine.statistics import ranking_metrics

DATASETS = ("drug_reviews", "newsgroups_queries", "elwc", "rows")
# Formats of the user's files (`ItemDataConfig.data_files`): "auto" (the extension's), ELWC text lists, row
# files each of its extension's format ("rows"), or rows of one named format.
AUTO, ELWC, ROWS = "auto", "elwc", "rows"
ROW_FORMATS = file_formats.names(container=file_formats.ROWS, carries=file_formats.TEXT)
INPUT_FORMATS = (AUTO, ELWC, ROWS, *ROW_FORMATS)
DRUG_REVIEW_PIVOTS = drug_reviews.PIVOTS
DRUG_REVIEW_LABELS = drug_reviews.LABELS
OBJECTIVES = ("margin",) + listwise.LISTWISE_LOSSES
BATCHINGS = ("groups", "pairs")
ENCODER_KINDS = ("text_encoder", "hashed_bow", "precomputed")
SPLIT_NAMES = ("train", "validation", "test")


@dataclasses.dataclass
class ItemDataConfig:
  """Which real data set, pivot and labels to rank, and how to split it.

  Attributes:
    dataset: One of `DATASETS`. "drug_reviews": Drugs.com reviews, train and test files pooled, then split by
      group. "newsgroups_queries": the graded 20 Newsgroups set as "query | passage" items
      (`rank4class_data.datasets.newsgroups`); train/validation groups come from the train file, test groups
      from the test file.
      "elwc": the user's text ranking lists in ELWC files (`data_files`; one group per list), split by group.
      "rows": the user's rows (`data_files`: CSV, TSV, JSONL, `.tab`; a group id, a text and a label per row,
      `rank4class_data.ranking.grouped_rows`), split by group.
    pivot: Drug reviews' contextual pivot, one of `DRUG_REVIEW_PIVOTS` ("none" = one group of everything).
    label: Drug reviews' ranking label, one of `DRUG_REVIEW_LABELS` (ordinal rating 0/1/2, or usefulCount).
    validation_fraction: Fraction of rows (whole groups) for validation.
    test_fraction: Fraction of rows (whole groups) for test (drug reviews only).
    split_seed: Seed of the group split and of the 20 Newsgroups draw (the test file's draw uses split_seed +
      1).
    num_queries: 20 Newsgroups queries drawn from the train file (train + validation).
    num_test_queries: 20 Newsgroups queries drawn from the test file.
    passages_per_grade: Passages per query with grade 0, 1 and 2 (misc.forsale queries, which have no grade-1
      pool, get grade-0 passages instead).
    query_words: At most this many subject words of the query document are the query.
    passage_words: Words kept of each passage.
    max_items_per_group: Drug reviews: a larger group keeps a seeded random subset (0 = keep all).
    data_files: elwc: comma-separated globs of ELWC TFRecord files; rows: of row files.
    input_format: The files' format, one of `INPUT_FORMATS`: "auto" (a row-file extension: rows, else ELWC;
      each row file's format from its extension), "elwc", "rows", or a row format ("csv", "tsv", "jsonl",
      "tab") for rows of that format; it must agree with `dataset` ("elwc" or "rows").
    label_key: elwc: example feature holding the relevance (TF-Ranking's ANTIQUE example: "relevance").
    text_key: elwc: example feature holding the item's text (a string or a token list).
    query_key: elwc: context feature holding the query; present, an item reads "<query> | <text>".
    group_column: rows: the group id column.
    text_column: rows: the item text column.
    label_column: rows: the label column (a number >= 0, higher = better, or one of `label_order`).
    label_order: rows: ordinal label names from worst to best; empty: the labels are numbers.
    bad_rows: rows: "fail" on the first bad row, or "skip" bad rows and list them in `rejects_path`.
    max_bad_rows: rows: "skip": the most bad rows allowed; None for no limit.
    rejects_path: rows: "skip": the JSONL list of bad rows.
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
  input_format: str = AUTO
  label_key: str = "label"
  text_key: str = "document_tokens"
  query_key: str = "query_tokens"
  group_column: str = ""
  text_column: str = "text"
  label_column: str = "label"
  label_order: tuple[str, ...] = ()
  bad_rows: str = bad_rows_lib.FAIL
  max_bad_rows: int | None = None
  rejects_path: str | None = None

  def __post_init__(self):
    check_choice("dataset", self.dataset, DATASETS)
    check_choice("input_format", self.input_format, INPUT_FORMATS)
    self.label_order = tuple(self.label_order)
    bad_rows_lib.BadRowPolicy(self.bad_rows, self.max_bad_rows)  # Validates both.
    if self.dataset == ROWS and not (self.data_files and self.group_column and self.text_column
                                     and self.label_column):
      raise ValueError("`dataset`=rows needs `data_files` (CSV/TSV/JSONL/.tab rows), `group_column`, "
                       "`text_column` and `label_column`.")
    if self.dataset == ELWC and not self.data_files:
      raise ValueError("`dataset`=elwc needs `data_files` (ELWC TFRecord files of text ranking lists).")
    if self.dataset == ELWC and not (self.label_key and self.text_key):
      raise ValueError("`dataset`=elwc needs `label_key` and `text_key` naming example features.")
    if self.input_format != AUTO and self.dataset in (ELWC, ROWS) and (
        (self.input_format == ELWC) != (self.dataset == ELWC)):
      raise ValueError(f"`input_format`={self.input_format} does not fit `dataset`={self.dataset}: "
                       + ("ELWC lists are `input_format`=elwc." if self.dataset == ELWC else
                          f"row files are `input_format`=rows or a row format ({', '.join(ROW_FORMATS)})."))
    check_choice("pivot", self.pivot, DRUG_REVIEW_PIVOTS)
    check_choice("label", self.label, DRUG_REVIEW_LABELS)
    self.passages_per_grade = tuple(int(k) for k in self.passages_per_grade)
    if len(self.passages_per_grade) != 3 or min(self.passages_per_grade) < 0:
      raise ValueError(f"`passages_per_grade` must be 3 counts >= 0, got {self.passages_per_grade}.")

  @property
  def rows_format(self) -> str:
    """The row files' format for `rank4class_data.ranking.grouped_rows` ("auto": each file's extension's)."""
    return self.input_format if self.input_format in ROW_FORMATS else row_tables.AUTO


def files_dataset(data_files: str, input_format: str = AUTO) -> str:
  """The data set ("elwc" or "rows") of the user's files in `input_format` (one of `INPUT_FORMATS`): named,
  or under "auto" told by the first file's extension (a row-file extension: rows, else ELWC)."""
  check_choice("input_format", input_format, INPUT_FORMATS)
  if input_format != AUTO:
    return ELWC if input_format == ELWC else ROWS
  first = row_tables.expand_paths(data_files)[0]
  return ROWS if file_formats.from_extension(first, file_formats.ROWS) else ELWC


@dataclasses.dataclass
class EncoderConfig:
  """The shared text encoder.

  Attributes:
    kind: One of `ENCODER_KINDS`: "text_encoder" (`rank4class_encoders.text_encoder.TextEncoder`, TF Hub BERT
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
      `rank4class_encoders.text_embeddings`) and train the head on the embeddings; the model then takes
      embeddings and has no encoder.
    embedding_cache_dir: Where precomputed embeddings are cached (None:
      `rank4class_encoders.text_embeddings.DEFAULT_EMBEDDING_CACHE_DIR`).
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
    check_choice("kind", self.kind, ENCODER_KINDS)
    check_choice("pooling", self.pooling, text_encoder.POOLINGS)
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
    check_choice("objective", self.objective, OBJECTIVES)
    check_choice("head", self.head, margin_model.HEADS)
    check_range("margin", self.margin, 0.0)
    check_range("dropout", self.dropout, 0.0, 1.0, high_inclusive=False)
    check_range("class_loss_weight", self.class_loss_weight, 0.0)


@dataclasses.dataclass
class PairwiseEvaluationConfig:
  """How the pairwise models' lists are ranked and measured.

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
    check_choice("aggregation", self.aggregation, aggregate.AGGREGATIONS)
    check_range("topn", self.topn, 1, integer=True)
    check_choice("gain", self.gain, ranking_metrics.GAINS)
    check_choice("tie_breaking", self.tie_breaking, ranking_metrics.TIE_BREAKING_POLICIES)
    check_range("max_pairs_per_batch", self.max_pairs_per_batch, 1)


EvalConfig = PairwiseEvaluationConfig  # Deprecated name (before 0.9.0); removed in 0.10.0.


def default_optimizer() -> optimizers.OptimizerConfig:
  """The pairwise models' optimizer (the paper's, §4): AdamW with α 4e-5, β1 0.9, β2 0.999, ε 1e-8, decoupled
  weight decay 0.01 (not on biases, norms or PReLU slopes: `optimizers.NO_DECAY_NAMES`), the global gradient
  norm clipped at 1.0."""
  return optimizers.OptimizerConfig(type=optimizers.ADAMW, learning_rate=4e-5, weight_decay=0.01,
                                    epsilon=1e-8,
                                    global_clipnorm=1.0, exclude_from_decay=optimizers.NO_DECAY_NAMES)


# The optimizer settings that a train section written before 0.9.0 holds as its own fields (AdamW's), now the
# fields of its `optimizer`; a global_clipnorm of 0 meant no clipping.
FLAT_OPTIMIZER_FIELDS = ("learning_rate", "beta_1", "beta_2", "epsilon", "weight_decay", "global_clipnorm")


@dataclasses.dataclass
class PairwiseTrainConfig:
  """Optimisation and bookkeeping of a pairwise model's training.

  Attributes:
    model_dir: Output folder: config.json, metrics.json, export/, and the engine's backup/ (while running),
      best/, logs/ and progress.jsonl.
    batching: "groups" (group-batched, one encoding per item) or "pairs" (per-pair encoding, as the
      reference).
    list_size: Items per training list (groups are chunked to this size).
    lists_per_batch: Lists per global batch ("groups"); divisible by the number of replicas.
    pair_batch_size: Pairs per global batch ("pairs").
    min_label_gap: Minimum label difference of a training pair.
    train_steps: Optimisation steps.
    optimizer: The engine's optimizer (`rank4class_engine.optimization.optimizers`); default
      `default_optimizer()`, the paper's AdamW. A config written before 0.9.0 held its AdamW settings as
      fields of this section (`FLAT_OPTIMIZER_FIELDS`); `PairwiseConfig.from_dict` reads them into it.
    log_every: Unused since training runs through the engine (TensorBoard scalars at each validation); kept so
      earlier config.json files load.
    eval_every: Steps between validation evaluations (0 = only at the end).
    checkpoint_every: Steps between resumable checkpoints (the engine's; combined with `eval_every` by their
      greatest common divisor, since executions end on both).
    seed: Seed of initialisation, pair orientation and list chunking.
    export: Write SavedModels to `model_dir/export` at the end.
    preemption_grace_seconds: After SIGTERM or SIGINT, the seconds the loop has to finish its current
      execution and checkpoint that step before it is interrupted at once
      (`rank4class_engine.loop.trainer.EngineConfig`); changes no result.
  """

  model_dir: str = ""
  batching: str = "groups"
  list_size: int = 20
  lists_per_batch: int = 4
  pair_batch_size: int = 32
  min_label_gap: float = 0.0
  train_steps: int = 1000
  optimizer: optimizers.OptimizerConfig = dataclasses.field(default_factory=default_optimizer)
  log_every: int = 50
  eval_every: int = 0
  checkpoint_every: int = 500
  seed: int = 0
  export: bool = True
  preemption_grace_seconds: float = 20.0

  def __post_init__(self):
    check_choice("batching", self.batching, BATCHINGS)
    check_range("list_size", self.list_size, 2)
    for name in ("lists_per_batch", "pair_batch_size", "train_steps", "log_every", "checkpoint_every"):
      check_range(name, getattr(self, name), 1)
    check_range("preemption_grace_seconds", self.preemption_grace_seconds, 0)

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> PairwiseTrainConfig:
    """The section from its config.json dict, in the form of 0.9.0 or in the earlier one whose AdamW settings
    are fields of their own (`FLAT_OPTIMIZER_FIELDS`); missing fields take their defaults.

    Raises:
      ValueError: Naming a field that the section has no place for, or flat optimizer fields beside
        `optimizer`.
    """
    return engine_configs.from_dict(cls, nested_optimizer(values))


TrainConfig = PairwiseTrainConfig  # Deprecated name (before 0.9.0); removed in 0.10.0.


def nested_optimizer(train: dict[str, Any]) -> dict[str, Any]:
  """A train section's dict with the flat AdamW fields of a config written before 0.9.0
  (`FLAT_OPTIMIZER_FIELDS`) moved into its `optimizer` (the other optimizer settings those runs used:
  `default_optimizer()`'s); a dict of the nested form is returned as it is.

  Raises:
    ValueError: For flat optimizer fields beside an `optimizer`, naming them.
  """
  flat = {name: train[name] for name in FLAT_OPTIMIZER_FIELDS if name in train}
  if not flat:
    return train
  if "optimizer" in train:
    raise ValueError("train: give the optimizer settings in `optimizer`, not also as the fields "
                     f"{sorted(flat)}.")
  if "global_clipnorm" in flat:
    flat["global_clipnorm"] = flat["global_clipnorm"] or None  # 0 meant no clipping.
  optimizer = {**engine_configs.to_dict(default_optimizer()), **flat}
  return {**{k: v for k, v in train.items() if k not in flat}, "optimizer": optimizer}


@dataclasses.dataclass
class PairwiseConfig:
  """Everything a run needs; written to `model_dir/config.json`.

  Attributes:
    data: `ItemDataConfig`.
    encoder: `EncoderConfig`.
    model: `ModelConfig`.
    train: `PairwiseTrainConfig`.
    eval: `PairwiseEvaluationConfig`.
  """

  data: ItemDataConfig = dataclasses.field(default_factory=ItemDataConfig)
  encoder: EncoderConfig = dataclasses.field(default_factory=EncoderConfig)
  model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
  train: PairwiseTrainConfig = dataclasses.field(default_factory=PairwiseTrainConfig)
  eval: PairwiseEvaluationConfig = dataclasses.field(default_factory=PairwiseEvaluationConfig)

  def __post_init__(self):
    if self.model.objective != "margin" and self.train.batching != "groups":
      raise ValueError(f"Listwise objective {self.model.objective!r} needs batching='groups', got "
                       f"{self.train.batching!r}.")
    if self.encoder.takes_embeddings and self.model.separate_encoders:
      raise ValueError("`separate_encoders` needs an encoder in the model, not precomputed embeddings.")

  def to_dict(self) -> dict[str, Any]:
    """The JSON-ready dict written to config.json."""
    return engine_configs.to_dict(self)

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> PairwiseConfig:
    """The config from a parsed config.json; missing sections and fields take their defaults, and a train
    section written before 0.9.0 (AdamW's settings as its own fields) loads into
    `PairwiseTrainConfig.optimizer`.

    Raises:
      ValueError: Naming a section or field that the config has no place for.
    """
    if isinstance(values, dict) and isinstance(values.get("train"), dict):
      values = {**values, "train": nested_optimizer(values["train"])}
    return engine_configs.from_dict(cls, values)
