"""Configuration of RankSVM's workflows (`pairwise.studies.ranksvm_workflow`): the dataclasses written to a
model's config.json (`pairwise-ranksvm`, rank4class_cli/binaries/ranksvm_main.py, builds them from its
flags)."""

import dataclasses

from pairwise.ranksvm import features as features_lib
from pairwise.ranksvm import ranksvm
from rank4class_data.datasets.newsgroups import NewsgroupsQrelsConfig
from rank4class_data.ranking import feature_lists, ranking_corpus
from rank4class_data.rows import bad_rows as bad_rows_lib
from rank4class_data.rows import libsvm, row_tables
from rank4class_data.validation import check_choice, check_range
from rank4class_engine.statistics import ranking_metrics

MODES = ("train", "evaluate", "rank")
# The folder of docs.csv, queries.csv and query_doc.csv (`rank4class_data.ranking.ranking_corpus`).
CORPUS = "corpus"
ROWS = "rows"  # Row files, each of the format its extension names (or `RankingDataConfig.rows_format`).
# The row formats that name a row file as the data format ("csv": rows of CSV). LibSVM's name stays the
# SVMlight qid file read as feature lists; its rows are `rows` with a .libsvm extension.
ROW_FILE_FORMATS = tuple(name for name in row_tables.INPUT_FORMATS if name != "libsvm")
DATA_FORMATS = (CORPUS, "libsvm", "elwc", "newsgroups20", ROWS, *ROW_FILE_FORMATS)
FEATURE_FORMATS = ("libsvm", "elwc", "rows")  # Formats whose rows are features already (no Φ to fit).
EVAL_PROTOCOLS = ("heldout", "leave_one_query_out", "model")
TEXT_ENCODERS = ("none", "minilm")
GAIN_CHOICES = ("auto", *ranking_metrics.GAINS)


@dataclasses.dataclass
class RankingDataConfig:
  """Where the ranking data comes from.

  Attributes:
    format: One of `DATA_FORMATS`. "corpus": the folder `data_dir` of docs.csv, queries.csv and
      query_doc.csv. "rows": one row per document in CSV/TSV/JSONL/`.tab`/LibSVM files with a query id
      (`layout.query_id_column`; LibSVM: qid), numeric features (`feature_columns`; LibSVM: every index) and
      a label (`layout.label_column`, `layout.label_kind`), read by `rank4class_data.ranking.grouped_rows`,
      each file's format told by its extension; a row format ("csv", "tsv", "jsonl", "tab") is rows of that
      format, stored as "rows" with `rows_format`. A config.json written before 0.9.0 names the corpus
      folder "csv" (with `data_dir` and no `data_path`): read as "corpus".
    data_dir: Folder of the corpus layout.
    data_path: LibSVM or ELWC file; rows: the row files (comma-separated paths or globs).
    layout: CSV column names and label kind.
    newsgroups: Construction of the 20 Newsgroups set.
    elwc_label_key: ELWC: example feature holding the relevance (TF-Ranking's examples: "relevance",
      "utility").
    elwc_feature_names: ELWC: features in this order; empty = the context's `feature_names`, else every
      numeric example feature in the file. Features an example lacks are 0.
    libsvm_duplicates: LibSVM: a feature index given twice in a line is an "error", or "last" wins, or "sum".
    feature_columns: rows: the numeric feature columns (with a saved model: default its features).
    bad_rows: rows: the bad-row policy (fail, or skip into its rejects file).
    rows_format: rows: the files' format, one of `row_tables.INPUT_FORMATS`, or "auto" for each extension's
      (set by a row format as `format`).
  """

  format: str = CORPUS
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
    check_choice("rows_format", self.rows_format, (row_tables.AUTO, *row_tables.INPUT_FORMATS))
    if self.format == "csv" and self.data_dir and not self.data_path:
      self.format = CORPUS  # Written before 0.9.0, when "csv" named the corpus folder.
    if self.format == CORPUS and not self.data_dir:
      raise ValueError("`format`=corpus needs `data_dir`, the folder of docs.csv, queries.csv and "
                       "query_doc.csv.")
    if self.format not in (CORPUS, "newsgroups20") and not self.data_path:
      raise ValueError(f"`format`={self.format} needs `data_path`.")
    if self.format in ROW_FILE_FORMATS:
      if self.rows_format not in (row_tables.AUTO, self.format):
        raise ValueError(f"`format`={self.format} and `rows_format`={self.rows_format} name two row formats; "
                         "give one.")
      self.format, self.rows_format = ROWS, self.format
    if not self.elwc_label_key:
      raise ValueError("`elwc_label_key` must name the ELWC example feature holding the relevance.")
    libsvm.check_duplicates_policy(self.libsvm_duplicates)


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
class RankSVMEvaluationConfig:
  """How RankSVM's `evaluate` splits queries and scores rankings.

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
    check_range("heldout_fraction", self.heldout_fraction, 0.0, 1.0, low_inclusive=False,
                high_inclusive=False)


EvaluationConfig = RankSVMEvaluationConfig  # Deprecated name (before 0.9.0); removed in 0.10.0.


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
  evaluation: RankSVMEvaluationConfig = dataclasses.field(default_factory=RankSVMEvaluationConfig)
  query: str | None = None
  query_id: str | None = None
  top_k: int = 10
  display_field: str | None = None

  def __post_init__(self):
    check_choice("mode", self.mode, MODES)
    check_range("top_k", self.top_k, 1, integer=True)
    needs_dir = self.mode in ("train", "rank") or (
      self.mode == "evaluate" and self.evaluation.protocol == "model"
    )
    if needs_dir and not self.model_dir:
      raise ValueError(f"`mode`={self.mode} needs `model_dir`.")
    featurized = self.data.format in FEATURE_FORMATS
    if self.mode == "rank" and featurized and not self.query_id:
      raise ValueError(f"`mode`=rank with `data.format`={self.data.format} needs `query_id` (its rows are "
                       "already features, so free text cannot be ranked).")
    if self.mode == "rank" and not featurized and not self.query:
      raise ValueError("`mode`=rank needs `query`.")
    if (
      not featurized
      and self.features is None
      and not (self.mode == "rank" or self.evaluation.protocol == "model")
    ):
      raise ValueError("Give document fields for Φ(q, d): `features.categorical_fields`, "
                       "`features.multi_hot_fields`, `features.numeric_fields` or `features.text_fields`.")
