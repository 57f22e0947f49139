"""Configuration of RankSVM's workflows (`pairwise.studies.ranksvm_workflow`): the dataclasses written to a model's
config.json, and their construction from the `pairwise-ranksvm` flag values."""

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from pairwise.ranksvm import features as features_lib
from pairwise.ranksvm import ranksvm
from rank4class_data import bad_rows as bad_rows_lib
from rank4class_data import feature_lists, libsvm, ranking_corpus, row_tables
from rank4class_data.datasets.newsgroups import NewsgroupsQrelsConfig
from rank4class_data.validation import check_choice, check_range
from rank4class_engine import ranking_metrics

MODES = ("train", "evaluate", "rank")
DATA_FORMATS = ("csv", "libsvm", "elwc", "newsgroups20", "rows")
FEATURE_FORMATS = ("libsvm", "elwc", "rows")  # Formats whose rows are features already (no Φ to fit).
EVAL_PROTOCOLS = ("heldout", "leave_one_query_out", "model")
TEXT_ENCODERS = ("none", "minilm")
GAIN_CHOICES = ("auto", *ranking_metrics.GAINS)


@dataclasses.dataclass
class RankingDataConfig:
  """Where the ranking data comes from.

  Attributes:
    format: One of `DATA_FORMATS`; "rows": one row per document in CSV/TSV/JSONL/`.tab`/LibSVM files with a
      query id (`layout.query_id_column`; LibSVM: qid), numeric features (`feature_columns`; LibSVM: every index)
      and a label (`layout.label_column`, `layout.label_kind`), read by `rank4class_data.grouped_rows`.
    data_dir: Folder of the CSV layout.
    data_path: LibSVM or ELWC file; rows: the row files (comma-separated paths or globs).
    layout: CSV column names and label kind.
    newsgroups: Construction of the 20 Newsgroups set.
    elwc_label_key: ELWC: example feature holding the relevance (TF-Ranking's examples: "relevance", "utility").
    elwc_feature_names: ELWC: features in this order; empty = the context's `feature_names`, else every numeric
      example feature in the file. Features an example lacks are 0.
    libsvm_duplicates: LibSVM: a feature index given twice in a line is an "error", or "last" wins, or "sum".
    feature_columns: rows: the numeric feature columns (with a saved model: default its features).
    bad_rows: rows: the bad-row policy (fail, or skip into its rejects file).
    rows_format: rows: the files' format, one of `row_tables.INPUT_FORMATS`, or "auto" for each extension's.
  """

  format: str = "csv"
  data_dir: str | None = None
  data_path: str | None = None
  layout: ranking_corpus.CsvLayout = dataclasses.field(default_factory=ranking_corpus.CsvLayout)
  newsgroups: NewsgroupsQrelsConfig = dataclasses.field(default_factory=NewsgroupsQrelsConfig)
  elwc_label_key: str = feature_lists.ELWC_LABEL
  elwc_feature_names: list[str] = dataclasses.field(default_factory=list)
  libsvm_duplicates: str = "error"
  feature_columns: list[str] = dataclasses.field(default_factory=list)
  bad_rows: bad_rows_lib.BadRowPolicy = dataclasses.field(default_factory=bad_rows_lib.BadRowPolicy)
  rows_format: str = row_tables.AUTO

  def __post_init__(self):
    if isinstance(self.bad_rows, dict):
      self.bad_rows = bad_rows_lib.BadRowPolicy(**self.bad_rows)
    check_choice("format", self.format, DATA_FORMATS)
    if self.format == "csv" and not self.data_dir:
      raise ValueError("--data_format=csv needs --data_dir (folder of docs.csv, queries.csv, query_doc.csv).")
    if self.format in ("libsvm", "elwc", "rows") and not self.data_path:
      raise ValueError(f"--data_format={self.format} needs --data_path.")
    if not self.elwc_label_key:
      raise ValueError("--label_key must name the ELWC example feature holding the relevance.")
    libsvm.check_duplicates_policy(self.libsvm_duplicates)
    check_choice("rows_format", self.rows_format, (row_tables.AUTO, *row_tables.INPUT_FORMATS))


@dataclasses.dataclass
class SimilarityEncoderConfig:
  """The text encoder of the embedding similarity.

  Attributes:
    name: One of `TEXT_ENCODERS`.
    max_seq_length: Tokens per text.
  """

  name: str = "none"
  max_seq_length: int = 128

  def __post_init__(self):
    check_choice("name", self.name, TEXT_ENCODERS)


@dataclasses.dataclass
class EvaluationConfig:
  """How `evaluate` splits queries and scores rankings.

  Attributes:
    protocol: One of `EVAL_PROTOCOLS`.
    heldout_query_ids: Held-out queries; empty = a seeded `heldout_fraction` (newsgroups20: its own split).
    heldout_fraction: Fraction held out when no ids are given.
    metrics: Cutoff, gain ("auto" resolved per data), relevance threshold, tie policy.
    gain: One of `GAIN_CHOICES`.
    baseline_features: Feature names scored alone; ["auto"] = every similarity feature.
  """

  protocol: str = "heldout"
  heldout_query_ids: list[str] = dataclasses.field(default_factory=list)
  heldout_fraction: float = 0.5
  metrics: ranking_metrics.RankingMetricsConfig = dataclasses.field(
      default_factory=ranking_metrics.RankingMetricsConfig)
  gain: str = "auto"
  baseline_features: list[str] = dataclasses.field(default_factory=lambda: ["auto"])

  def __post_init__(self):
    check_choice("protocol", self.protocol, EVAL_PROTOCOLS)
    check_choice("gain", self.gain, GAIN_CHOICES)
    check_range("heldout_fraction", self.heldout_fraction, 0.0, 1.0, low_inclusive=False, high_inclusive=False)


@dataclasses.dataclass
class RankSVMMainConfig:
  """Everything one run of the binary does.

  Attributes:
    mode: One of `MODES`.
    model_dir: Model folder (see `pairwise.studies.ranksvm_workflow`).
    data: Data source.
    features: Φ(q, d) fields (unused for libsvm/elwc data, whose rows are already features).
    encoder: Text encoder for the embedding similarity.
    svm: RankSVM objective and solver.
    evaluation: Evaluation protocol and metrics.
    query: Query text for rank mode.
    query_id: List to rank for libsvm/elwc data in rank mode.
    top_k: Documents printed in rank mode.
    display_field: Document field printed in rank mode.
  """

  mode: str = "train"
  model_dir: str | None = None
  data: RankingDataConfig = dataclasses.field(default_factory=RankingDataConfig)
  features: features_lib.FeatureConfig | None = None
  encoder: SimilarityEncoderConfig = dataclasses.field(default_factory=SimilarityEncoderConfig)
  svm: ranksvm.RankSVMConfig = dataclasses.field(default_factory=ranksvm.RankSVMConfig)
  evaluation: EvaluationConfig = dataclasses.field(default_factory=EvaluationConfig)
  query: str | None = None
  query_id: str | None = None
  top_k: int = 10
  display_field: str | None = None

  def __post_init__(self):
    check_choice("mode", self.mode, MODES)
    check_range("top_k", self.top_k, 1, integer=True)
    needs_dir = self.mode in ("train", "rank") or (self.mode == "evaluate" and self.evaluation.protocol == "model")
    if needs_dir and not self.model_dir:
      raise ValueError(f"--mode={self.mode} needs --model_dir.")
    featurized = self.data.format in FEATURE_FORMATS
    if self.mode == "rank" and featurized and not self.query_id:
      raise ValueError(f"--mode=rank with --data_format={self.data.format} needs --query_id (its rows are "
                       "already features, so free text cannot be ranked).")
    if self.mode == "rank" and not featurized and not self.query:
      raise ValueError("--mode=rank needs --query.")
    if not featurized and self.features is None and not (self.mode == "rank" or self.evaluation.protocol == "model"):
      raise ValueError("Give document fields for Φ(q, d): --categorical_fields, --multi_hot_fields, "
                       "--numeric_fields or --text_fields.")


def parse_multi_hot(items: list[str]) -> dict[str, str]:
  """`field:separator` items (e.g. ["system:/"]) -> {field: separator}; ValueError naming a malformed item."""
  fields = {}
  for item in items:
    field, sep, separator = item.partition(":")
    if not sep or not field or not separator:
      raise ValueError(f"--multi_hot_fields item {item!r} must be field:separator, e.g. system:/.")
    fields[field] = separator
  return fields


def config_from_flag_values(v: Mapping[str, Any]) -> RankSVMMainConfig:
  """The config of one `pairwise-ranksvm` run from its flag values (flag name -> parsed value).

  Raises:
    ValueError: naming the flag, for values the configs reject.
  """
  has_fields = any([v["categorical_fields"], v["multi_hot_fields"], v["numeric_fields"], v["text_fields"]])
  feature_config = features_lib.FeatureConfig(
      categorical_fields=list(v["categorical_fields"]), multi_hot_fields=parse_multi_hot(v["multi_hot_fields"]),
      numeric_fields=list(v["numeric_fields"]), missing_values=list(v["missing_values"]),
      text_fields=list(v["text_fields"]), similarities=list(v["similarities"]), feedback_k=v["feedback_k"],
      neighbor_k=v["neighbor_k"]) if has_fields else None
  return RankSVMMainConfig(
      mode=v["mode"], model_dir=v["model_dir"],
      data=RankingDataConfig(
          format=v["data_format"], data_dir=v["data_dir"], data_path=v["data_path"], elwc_label_key=v["label_key"],
          elwc_feature_names=list(v["feature_names"]), libsvm_duplicates=v["libsvm_duplicates"],
          feature_columns=list(v["feature_columns"]), rows_format=v["rows_format"],
          bad_rows=bad_rows_lib.BadRowPolicy(v["bad_rows"], v["max_bad_rows"], v["rejects"] or (
              os.path.join(v["model_dir"], "rejects.jsonl") if v["model_dir"] else None)),
          layout=ranking_corpus.CsvLayout(
              doc_id_column=v["doc_id_column"], query_id_column=v["query_id_column"],
              query_text_column=v["query_text_column"], label_column=v["label_column"],
              label_kind=v["label_kind"]),
          newsgroups=NewsgroupsQrelsConfig(
              num_queries=v["ng_num_queries"], list_size=v["ng_list_size"], num_grade2=v["ng_num_grade2"],
              num_grade1=v["ng_num_grade1"], doc_num_words=v["ng_doc_num_words"],
              heldout_fraction=v["ng_heldout_fraction"], seed=v["ng_seed"])),
      features=feature_config,
      encoder=SimilarityEncoderConfig(name=v["text_encoder"], max_seq_length=v["max_seq_length"]),
      svm=ranksvm.RankSVMConfig(
          c=v["c"], loss=v["loss"], tolerance=v["tolerance"], max_iterations=v["max_iterations"],
          batch_size=v["batch_size"], num_epochs=v["num_epochs"], learning_rate=v["learning_rate"],
          max_pairs_per_query=v["max_pairs_per_query"], skip_unpairable_queries=v["skip_unpairable_queries"],
          seed=v["seed"]),
      evaluation=EvaluationConfig(
          protocol=v["eval_protocol"], heldout_query_ids=list(v["heldout_query_ids"]),
          heldout_fraction=v["heldout_fraction"],
          metrics=ranking_metrics.RankingMetricsConfig(
              topn=v["topn"], relevance_threshold=v["relevance_threshold"], tie_breaking=v["tie_breaking"]),
          gain=v["gain"], baseline_features=list(v["baseline_features"])),
      query=v["query"], query_id=v["query_id"], top_k=v["top_k"], display_field=v["display_field"])
