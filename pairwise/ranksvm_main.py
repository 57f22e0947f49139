r"""RankSVM command line: train, evaluate on held-out queries, and rank documents for a new query.

Sample command lines (LOINC sample layout; its ranks carry no relevance signal, so its metrics mean nothing):

  pairwise-ranksvm --mode=train --data_format=csv --data_dir=../shared/loinc --model_dir=/tmp/ranksvm \
    --categorical_fields=property,scale,class,discourage --multi_hot_fields=system:/ \
    --numeric_fields=rank_loinc --missing_values=-999999999 --text_fields=long_common_name,component \
    --similarities=bm25,tfidf
  pairwise-ranksvm --mode=rank --data_format=csv --data_dir=../shared/loinc --model_dir=/tmp/ranksvm \
    --query="glucose in blood" --top_k=5
  pairwise-ranksvm --mode=evaluate --eval_protocol=leave_one_query_out --data_format=csv \
    --data_dir=../shared/loinc --categorical_fields=scale --text_fields=long_common_name

Graded 20 Newsgroups set (see pairwise/newsgroups_qrels.py), RankSVM against its single features:

  pairwise-ranksvm --mode=evaluate --eval_protocol=heldout --data_format=newsgroups20 \
    --text_fields=text --similarities=bm25,embedding,embedding_feedback,embedding_neighbors \
    --text_encoder=minilm --model_dir=/tmp/ranksvm_20ng

Modes: `train` fits Φ on the documents and RankSVM on the (training) queries, and writes `<model_dir>/`
config.json, feature_mapping.json, weights.json and scorer/ (a Keras SavedModel scoring Φ rows). `evaluate`
reports NDCG@k, MAP@k, MRR@k, Kendall tau and pair accuracy (definitions in pairwise/ranking_metrics.py) of
RankSVM and of each single baseline feature, on held-out queries (`heldout`), by leaving each query out in
turn (`leave_one_query_out`), or for the model already in --model_dir (`model`). `rank` prints the top-k
documents for --query (or the list of --query_id for LibSVM/ELWC data), best first, with their scores.
"""

import dataclasses
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import tensorflow as tf
from absl import app, flags, logging

from pairwise import features as features_lib
from pairwise import newsgroups_qrels, ranking_data, ranking_metrics, ranksvm
from rank4class_data.validation import atomic_output

MODES = ("train", "evaluate", "rank")
DATA_FORMATS = ("csv", "libsvm", "elwc", "newsgroups20")
EVAL_PROTOCOLS = ("heldout", "leave_one_query_out", "model")
TEXT_ENCODERS = ("none", "minilm")
GAIN_CHOICES = ("auto", *ranking_metrics.GAINS)

CONFIG_FILE = "config.json"
MAPPING_FILE = "feature_mapping.json"
WEIGHTS_FILE = "weights.json"
EVALUATION_FILE = "evaluation.json"
SCORER_DIR = "scorer"

FLAGS = flags.FLAGS
flags.DEFINE_enum("mode", "train", MODES, "What to do: train, evaluate or rank.")
flags.DEFINE_string("model_dir", None, "Folder of the trained model (written by train, read by rank and by "
                    "evaluate with --eval_protocol=model; evaluate --eval_protocol=heldout writes it if set).")
# Data.
flags.DEFINE_enum("data_format", "csv", DATA_FORMATS, "csv: docs.csv/queries.csv/query_doc.csv in --data_dir; "
                  "libsvm: SVMlight qid file --data_path; elwc: ELWC TFRecord --data_path; newsgroups20: the "
                  "graded 20 Newsgroups set built by pairwise/newsgroups_qrels.py.")
flags.DEFINE_string("data_dir", None, "Folder with docs.csv, queries.csv and query_doc.csv (--data_format=csv).")
flags.DEFINE_string("data_path", None, "LibSVM/SVMlight or ELWC file (--data_format=libsvm|elwc).")
flags.DEFINE_string("doc_id_column", "loinc_num", "Document id column of docs.csv and query_doc.csv.")
flags.DEFINE_string("query_id_column", "id_query", "Query id column of queries.csv and query_doc.csv.")
flags.DEFINE_string("query_text_column", "query", "Query text column of queries.csv.")
flags.DEFINE_string("label_column", "rank", "Label column of query_doc.csv.")
flags.DEFINE_enum("label_kind", "rank", ranking_data.LABEL_KINDS,
                  "rank: 1 = best; relevance: higher = better.")
flags.DEFINE_integer("ng_num_queries", 40, "newsgroups20: number of queries.")
flags.DEFINE_integer("ng_list_size", 30, "newsgroups20: candidates per query.")
flags.DEFINE_integer("ng_num_grade2", 10, "newsgroups20: same-newsgroup candidates per query.")
flags.DEFINE_integer("ng_num_grade1", 10, "newsgroups20: same-hierarchy candidates per query.")
flags.DEFINE_integer("ng_doc_num_words", 100, "newsgroups20: words kept per document (field 'text').")
flags.DEFINE_float("ng_heldout_fraction", 0.5, "newsgroups20: fraction of queries held out.")
flags.DEFINE_integer("ng_seed", 0, "newsgroups20: seed of the construction.")
# Features Φ(q, d).
flags.DEFINE_list("categorical_fields", [], "Document fields one-hot encoded.")
flags.DEFINE_list("multi_hot_fields", [], "field:separator items, e.g. system:/ (split 'Ser/Plas' into two).")
flags.DEFINE_list("numeric_fields", [], "Document fields standardized, each with a missing indicator.")
flags.DEFINE_list("missing_values", list(features_lib.DEFAULT_MISSING_VALUES),
                  "Numeric-field values meaning missing (numbers compare numerically).")
flags.DEFINE_list("text_fields", [], "Document fields compared with the query text.")
flags.DEFINE_list("similarities", ["bm25", "tfidf"], f"Per text field, from {list(features_lib.SIMILARITIES)}.")
flags.DEFINE_integer("feedback_k", 10, "embedding_feedback: collection documents in the query's feedback centroid.")
flags.DEFINE_integer("neighbor_k", 10, "embedding_neighbors: collection documents in a document's smoothed vector.")
flags.DEFINE_enum("text_encoder", "none", TEXT_ENCODERS,
                  "Encoder of the embedding similarities: minilm = all-MiniLM-L6-v2, mean pooling.")
flags.DEFINE_integer("max_seq_length", 128, "Encoder tokens per text.")
# RankSVM.
flags.DEFINE_float("c", 1.0, "SVM trade-off C.")
flags.DEFINE_enum("loss", "hinge", ranksvm.LOSS_NAMES, "hinge (SVM) or squared_hinge.")
flags.DEFINE_integer("batch_size", None, "Pairs per step; unset = full batch.")
flags.DEFINE_integer("num_steps", 3000, "Full-batch Adam steps.")
flags.DEFINE_integer("num_epochs", 20, "Mini-batch epochs.")
flags.DEFINE_float("learning_rate", 0.05, "Initial Adam learning rate.")
flags.DEFINE_integer("max_pairs_per_query", None, "Subsample each query to at most this many pairs.")
flags.DEFINE_boolean("skip_unpairable_queries", False, "Skip (instead of rejecting) queries with one document.")
flags.DEFINE_integer("seed", 0, "Seed of pairs, sign flips and splits.")
# Evaluation.
flags.DEFINE_enum("eval_protocol", "heldout", EVAL_PROTOCOLS, "How evaluate splits queries.")
flags.DEFINE_list("heldout_query_ids", [], "Held-out queries (heldout protocol; default: a seeded fraction).")
flags.DEFINE_float("heldout_fraction", 0.5, "Fraction of queries held out when --heldout_query_ids is empty.")
flags.DEFINE_integer("topn", 10, "Cutoff k of NDCG@k, MAP@k and MRR@k.")
flags.DEFINE_enum("gain", "auto", GAIN_CHOICES, "NDCG gain; auto = linear for rank labels, else exponential.")
flags.DEFINE_float("relevance_threshold", 1.0, "Relevance >= this counts as relevant for MAP and MRR.")
flags.DEFINE_enum("tie_breaking", "pessimistic", ranking_metrics.TIE_BREAKING_POLICIES, "Order of tied scores.")
flags.DEFINE_list("baseline_features", ["auto"], "Features evaluated alone; auto = every text similarity.")
# Ranking.
flags.DEFINE_string("query", None, "Query text to rank documents for (--mode=rank).")
flags.DEFINE_string("query_id", None, "Query id whose list is ranked (--mode=rank with libsvm/elwc data).")
flags.DEFINE_integer("top_k", 10, "Documents printed by --mode=rank.")
flags.DEFINE_string("display_field", None, "Document field printed next to each ranked document "
                    "(default: the first text field).")


@dataclasses.dataclass
class DataConfig:
  """Where the ranking data comes from.

  Attributes:
    format: One of `DATA_FORMATS`.
    data_dir: Folder of the CSV layout.
    data_path: LibSVM or ELWC file.
    layout: CSV column names and label kind.
    newsgroups: Construction of the 20 Newsgroups set.
  """

  format: str = "csv"
  data_dir: str | None = None
  data_path: str | None = None
  layout: ranking_data.CsvLayout = dataclasses.field(default_factory=ranking_data.CsvLayout)
  newsgroups: newsgroups_qrels.NewsgroupsQrelsConfig = dataclasses.field(
      default_factory=newsgroups_qrels.NewsgroupsQrelsConfig)

  def __post_init__(self):
    if self.format not in DATA_FORMATS:
      raise ValueError(f"Unknown data format {self.format!r}; allowed: {list(DATA_FORMATS)}.")
    if self.format == "csv" and not self.data_dir:
      raise ValueError("--data_format=csv needs --data_dir (folder of docs.csv, queries.csv, query_doc.csv).")
    if self.format in ("libsvm", "elwc") and not self.data_path:
      raise ValueError(f"--data_format={self.format} needs --data_path.")


@dataclasses.dataclass
class EncoderConfig:
  """The text encoder of the embedding similarity.

  Attributes:
    name: One of `TEXT_ENCODERS`.
    max_seq_length: Tokens per text.
  """

  name: str = "none"
  max_seq_length: int = 128

  def __post_init__(self):
    if self.name not in TEXT_ENCODERS:
      raise ValueError(f"Unknown text encoder {self.name!r}; allowed: {list(TEXT_ENCODERS)}.")


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
    if self.protocol not in EVAL_PROTOCOLS:
      raise ValueError(f"Unknown evaluation protocol {self.protocol!r}; allowed: {list(EVAL_PROTOCOLS)}.")
    if self.gain not in GAIN_CHOICES:
      raise ValueError(f"Unknown gain {self.gain!r}; allowed: {list(GAIN_CHOICES)}.")
    if not 0 < self.heldout_fraction < 1:
      raise ValueError(f"`heldout_fraction` must be in (0, 1), got {self.heldout_fraction}.")


@dataclasses.dataclass
class RankSVMMainConfig:
  """Everything one run of the binary does.

  Attributes:
    mode: One of `MODES`.
    model_dir: Model folder (see the module docstring).
    data: Data source.
    features: Φ(q, d) fields (unused for libsvm/elwc data, whose rows are already features).
    encoder: Text encoder for the embedding similarity.
    svm: RankSVM objective and optimizer.
    evaluation: Evaluation protocol and metrics.
    query: Query text for rank mode.
    query_id: List to rank for libsvm/elwc data in rank mode.
    top_k: Documents printed in rank mode.
    display_field: Document field printed in rank mode.
  """

  mode: str = "train"
  model_dir: str | None = None
  data: DataConfig = dataclasses.field(default_factory=DataConfig)
  features: features_lib.FeatureConfig | None = None
  encoder: EncoderConfig = dataclasses.field(default_factory=EncoderConfig)
  svm: ranksvm.RankSVMConfig = dataclasses.field(default_factory=ranksvm.RankSVMConfig)
  evaluation: EvaluationConfig = dataclasses.field(default_factory=EvaluationConfig)
  query: str | None = None
  query_id: str | None = None
  top_k: int = 10
  display_field: str | None = None

  def __post_init__(self):
    if self.mode not in MODES:
      raise ValueError(f"Unknown mode {self.mode!r}; allowed: {list(MODES)}.")
    if self.top_k < 1:
      raise ValueError(f"--top_k must be positive, got {self.top_k}.")
    needs_dir = self.mode in ("train", "rank") or (self.mode == "evaluate" and self.evaluation.protocol == "model")
    if needs_dir and not self.model_dir:
      raise ValueError(f"--mode={self.mode} needs --model_dir.")
    featurized = self.data.format in ("libsvm", "elwc")
    if self.mode == "rank" and featurized and not self.query_id:
      raise ValueError(f"--mode=rank with --data_format={self.data.format} needs --query_id (its rows are "
                       "already features, so free text cannot be ranked).")
    if self.mode == "rank" and not featurized and not self.query:
      raise ValueError("--mode=rank needs --query.")
    if not featurized and self.features is None and not (self.mode == "rank" or self.evaluation.protocol == "model"):
      raise ValueError("Give document fields for Φ(q, d): --categorical_fields, --multi_hot_fields, "
                       "--numeric_fields or --text_fields.")


def _parse_multi_hot(items: list[str]) -> dict[str, str]:
  fields = {}
  for item in items:
    field, sep, separator = item.partition(":")
    if not sep or not field or not separator:
      raise ValueError(f"--multi_hot_fields item {item!r} must be field:separator, e.g. system:/.")
    fields[field] = separator
  return fields


def config_from_flags() -> RankSVMMainConfig:
  """Parses the flags into a `RankSVMMainConfig` (the only function reading FLAGS)."""
  has_fields = any([FLAGS.categorical_fields, FLAGS.multi_hot_fields, FLAGS.numeric_fields, FLAGS.text_fields])
  feature_config = features_lib.FeatureConfig(
      categorical_fields=list(FLAGS.categorical_fields), multi_hot_fields=_parse_multi_hot(FLAGS.multi_hot_fields),
      numeric_fields=list(FLAGS.numeric_fields), missing_values=list(FLAGS.missing_values),
      text_fields=list(FLAGS.text_fields), similarities=list(FLAGS.similarities), feedback_k=FLAGS.feedback_k,
      neighbor_k=FLAGS.neighbor_k) if has_fields else None
  return RankSVMMainConfig(
      mode=FLAGS.mode, model_dir=FLAGS.model_dir,
      data=DataConfig(
          format=FLAGS.data_format, data_dir=FLAGS.data_dir, data_path=FLAGS.data_path,
          layout=ranking_data.CsvLayout(
              doc_id_column=FLAGS.doc_id_column, query_id_column=FLAGS.query_id_column,
              query_text_column=FLAGS.query_text_column, label_column=FLAGS.label_column,
              label_kind=FLAGS.label_kind),
          newsgroups=newsgroups_qrels.NewsgroupsQrelsConfig(
              num_queries=FLAGS.ng_num_queries, list_size=FLAGS.ng_list_size, num_grade2=FLAGS.ng_num_grade2,
              num_grade1=FLAGS.ng_num_grade1, doc_num_words=FLAGS.ng_doc_num_words,
              heldout_fraction=FLAGS.ng_heldout_fraction, seed=FLAGS.ng_seed)),
      features=feature_config,
      encoder=EncoderConfig(name=FLAGS.text_encoder, max_seq_length=FLAGS.max_seq_length),
      svm=ranksvm.RankSVMConfig(
          c=FLAGS.c, loss=FLAGS.loss, batch_size=FLAGS.batch_size, num_steps=FLAGS.num_steps,
          num_epochs=FLAGS.num_epochs, learning_rate=FLAGS.learning_rate,
          max_pairs_per_query=FLAGS.max_pairs_per_query, skip_unpairable_queries=FLAGS.skip_unpairable_queries,
          seed=FLAGS.seed),
      evaluation=EvaluationConfig(
          protocol=FLAGS.eval_protocol, heldout_query_ids=list(FLAGS.heldout_query_ids),
          heldout_fraction=FLAGS.heldout_fraction,
          metrics=ranking_metrics.RankingMetricsConfig(
              topn=FLAGS.topn, relevance_threshold=FLAGS.relevance_threshold, tie_breaking=FLAGS.tie_breaking),
          gain=FLAGS.gain, baseline_features=list(FLAGS.baseline_features)),
      query=FLAGS.query, query_id=FLAGS.query_id, top_k=FLAGS.top_k, display_field=FLAGS.display_field)


def make_text_embedder(config: EncoderConfig):
  """A function texts -> float32 [num_texts, dim] for the chosen encoder, or None for "none".

  The MiniLM checkpoint is converted to the TF Hub BERT format once (cached by
  `rank4class.hub_conversion.cached_conversion`) and run by `rank4class.text_encoder.TextEncoder` with mean
  pooling, as all-MiniLM-L6-v2 was trained.
  """
  if config.name == "none":
    return None
  from rank4class import hub_conversion, text_encoder  # pylint: disable=g-import-not-at-top

  handles = hub_conversion.cached_conversion(hub_conversion.minilm_checkpoint_dir())
  encoder = text_encoder.TextEncoder(preprocess_handle=handles.preprocess, encoder_handle=handles.encoder,
                                     pooling="mean", max_seq_length=config.max_seq_length)

  def embed(texts: list[str]) -> np.ndarray:
    return encoder(tf.constant(list(texts))).numpy()

  return embed


@dataclasses.dataclass
class LoadedData:
  """Data of one run.

  Attributes:
    corpus: Raw documents and queries (None for libsvm/elwc).
    lists: Pre-computed Φ rows (libsvm/elwc only).
    label_kind: "rank" or "relevance" as in the source.
    default_heldout: Held-out query ids the data prescribes (newsgroups20), else None.
  """

  corpus: ranking_data.RankingCorpus | None
  lists: ranking_data.FeatureLists | None
  label_kind: str
  default_heldout: list[str] | None = None


def load_data(config: DataConfig) -> LoadedData:
  """Reads (or builds) the ranking data."""
  if config.format == "csv":
    corpus = ranking_data.read_corpus_csv(config.data_dir, config.layout)
    return LoadedData(corpus, None, corpus.label_kind)
  if config.format == "newsgroups20":
    qrels = newsgroups_qrels.build_newsgroups_qrels(config.newsgroups)
    return LoadedData(qrels.corpus, None, "relevance", qrels.heldout_query_ids)
  reader = ranking_data.read_libsvm if config.format == "libsvm" else ranking_data.read_elwc
  return LoadedData(None, reader(config.data_path), "relevance")


def _query_ids(data: LoadedData) -> list[str]:
  if data.lists is not None:
    return list(data.lists.query_ids)
  return [data.corpus.query_ids[q] for q in data.corpus.judged_queries()]


def _featurize(data: LoadedData, mapper: features_lib.FeatureMapper | None,
               query_ids: list[str]) -> ranking_data.FeatureLists:
  if data.lists is not None:
    return data.lists.select_ids(query_ids)
  return mapper.transform(data.corpus.select_queries(query_ids))


def _metrics_config(config: EvaluationConfig, label_kind: str) -> ranking_metrics.RankingMetricsConfig:
  gain = config.gain if config.gain != "auto" else ("linear" if label_kind == "rank" else "exponential")
  return dataclasses.replace(config.metrics, gain=gain)


def _evaluate_scores(lists: ranking_data.FeatureLists, scores: np.ndarray,
                     metrics: ranking_metrics.RankingMetricsConfig) -> dict[str, float]:
  labels, mask = ranking_metrics.ragged_to_padded(lists.relevance, lists.list_offsets)
  padded, _ = ranking_metrics.ragged_to_padded(scores, lists.list_offsets)
  return ranking_metrics.compute_metrics(labels, padded, mask, metrics)


def _write_json(path: str, value) -> None:
  with atomic_output(path) as f:
    json.dump(value, f, indent=2, sort_keys=True, default=str)


def save_model(model_dir: str, config: RankSVMMainConfig, result: ranksvm.RankSVMResult,
               mapper: features_lib.FeatureMapper | None) -> None:
  """Writes config.json, feature_mapping.json, weights.json and the scorer SavedModel into `model_dir`."""
  os.makedirs(model_dir, exist_ok=True)
  temp_dir = tempfile.mkdtemp(prefix=".scorer.", dir=model_dir)
  try:
    result.model.save(os.path.join(temp_dir, SCORER_DIR), save_format="tf")
    final = os.path.join(model_dir, SCORER_DIR)
    if os.path.exists(final):
      shutil.rmtree(final)
    os.replace(os.path.join(temp_dir, SCORER_DIR), final)
  finally:
    shutil.rmtree(temp_dir, ignore_errors=True)
  if mapper is not None:
    _write_json(os.path.join(model_dir, MAPPING_FILE), mapper.to_dict())
  _write_json(os.path.join(model_dir, WEIGHTS_FILE),
              {"weights": result.weights_by_name(), "num_pairs": result.num_pairs,
               "num_skipped_queries": result.num_skipped_queries, "constant_features": result.constant_features})
  _write_json(os.path.join(model_dir, CONFIG_FILE), dataclasses.asdict(config))


def load_scorer(model_dir: str) -> tf.keras.Model:
  """The scorer SavedModel of `model_dir`."""
  path = os.path.join(model_dir, SCORER_DIR)
  if not os.path.isdir(path):
    raise FileNotFoundError(f"{path}: no trained scorer; run --mode=train with --model_dir={model_dir} first.")
  return tf.keras.models.load_model(path)


def load_mapper(model_dir: str) -> features_lib.FeatureMapper:
  """The fitted feature mapping of `model_dir`, with the text encoder it was trained with."""
  with open(os.path.join(model_dir, CONFIG_FILE), encoding="utf-8") as f:
    encoder = EncoderConfig(**json.load(f)["encoder"])
  path = os.path.join(model_dir, MAPPING_FILE)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path}: the model was trained on pre-computed features (libsvm/elwc); rank with "
                            "--query_id instead.")
  with open(path, encoding="utf-8") as f:
    state = json.load(f)
  embed = make_text_embedder(encoder) if features_lib.uses_encoder(features_lib.FeatureConfig(**state["config"])) \
      else None
  return features_lib.FeatureMapper.from_dict(state, embed=embed)


def _fit_mapper(config: RankSVMMainConfig, data: LoadedData) -> features_lib.FeatureMapper | None:
  if data.corpus is None:
    return None
  return features_lib.FeatureMapper(config.features, embed=make_text_embedder(config.encoder)).fit(data.corpus)


def train(config: RankSVMMainConfig) -> ranksvm.RankSVMResult:
  """Fits Φ on all documents and RankSVM on every judged query; saves the model to `config.model_dir`."""
  data = load_data(config.data)
  mapper = _fit_mapper(config, data)
  lists = _featurize(data, mapper, _query_ids(data))
  result = ranksvm.train_ranksvm(lists, config.svm)
  save_model(config.model_dir, config, result, mapper)
  logging.info("Trained RankSVM on %d queries, %d pairs; saved to %s.", lists.num_queries, result.num_pairs,
               config.model_dir)
  return result


def _baseline_names(config: EvaluationConfig, feature_names: list[str]) -> list[str]:
  if config.baseline_features == ["auto"]:
    return [name for name in feature_names if "(" in name]
  unknown = [name for name in config.baseline_features if name not in feature_names]
  if unknown:
    raise ValueError(f"--baseline_features {unknown} are not features; the features are {feature_names}.")
  return list(config.baseline_features)


def _heldout_split(config: RankSVMMainConfig, data: LoadedData, query_ids: list[str]) -> tuple[list[str], list[str]]:
  evaluation = config.evaluation
  if evaluation.heldout_query_ids:
    unknown = [q for q in evaluation.heldout_query_ids if q not in query_ids]
    if unknown:
      raise ValueError(f"--heldout_query_ids {unknown} are not judged queries; known: {query_ids[:20]}.")
    heldout = [q for q in query_ids if q in set(evaluation.heldout_query_ids)]
  elif data.default_heldout is not None:
    heldout = list(data.default_heldout)
  else:
    order = np.random.default_rng(config.svm.seed).permutation(len(query_ids))
    num_heldout = min(max(int(round(len(query_ids) * evaluation.heldout_fraction)), 1), len(query_ids) - 1)
    heldout = [query_ids[i] for i in sorted(order[:num_heldout])]
  train_ids = [q for q in query_ids if q not in set(heldout)]
  if not train_ids or not heldout:
    raise ValueError(f"Held-out evaluation needs training and held-out queries; got {len(train_ids)} and "
                     f"{len(heldout)} of {len(query_ids)}.")
  return train_ids, heldout


def evaluate(config: RankSVMMainConfig) -> dict:
  """Evaluates RankSVM and its single baseline features; writes evaluation.json to `model_dir` if set.

  Returns:
    {"protocol", "num_train_queries", "num_eval_queries", "metrics_config", "results": {scorer: {metric: mean}}}.
  """
  data = load_data(config.data)
  query_ids = _query_ids(data)
  evaluation = config.evaluation
  metrics = _metrics_config(evaluation, data.label_kind)
  if evaluation.protocol == "model":
    mapper = load_mapper(config.model_dir) if data.corpus is not None else None
    model = load_scorer(config.model_dir)
    eval_ids = evaluation.heldout_query_ids or query_ids
    lists = _featurize(data, mapper, eval_ids)
    scores = {"ranksvm": ranksvm.score_rows(model, lists.features)}
    num_train = None
  else:
    mapper = _fit_mapper(config, data)
    all_lists = _featurize(data, mapper, query_ids)
    if evaluation.protocol == "heldout":
      train_ids, eval_ids = _heldout_split(config, data, query_ids)
      result = ranksvm.train_ranksvm(all_lists.select_ids(train_ids), config.svm)
      lists = all_lists.select_ids(eval_ids)
      scores = {"ranksvm": ranksvm.score_rows(result.model, lists.features)}
      num_train = len(train_ids)
      if config.model_dir:
        save_model(config.model_dir, config, result, mapper)
    else:
      if len(query_ids) < 2:
        raise ValueError("Leave-one-query-out needs at least two judged queries.")
      lists, eval_ids = all_lists, query_ids
      parts = []
      for q, query_id in enumerate(query_ids):
        rest = [other for other in query_ids if other != query_id]
        result = ranksvm.train_ranksvm(all_lists.select_ids(rest), config.svm)
        parts.append(ranksvm.score_rows(result.model, all_lists.features[all_lists.query_rows(q)]))
      scores = {"ranksvm": np.concatenate(parts)}
      num_train = len(query_ids) - 1
    for name in _baseline_names(evaluation, lists.feature_names):
      scores[name] = lists.features[:, lists.feature_names.index(name)].astype(np.float64)
  results = {name: _evaluate_scores(lists, values, metrics) for name, values in scores.items()}
  report = {"protocol": evaluation.protocol, "num_train_queries": num_train, "num_eval_queries": len(eval_ids),
            "eval_query_ids": list(eval_ids), "metrics_config": dataclasses.asdict(metrics), "results": results,
            "paired_ndcg_difference": _paired_ndcg_differences(lists, scores, metrics)}
  if config.model_dir:
    os.makedirs(config.model_dir, exist_ok=True)
    _write_json(os.path.join(config.model_dir, EVALUATION_FILE), report)
  return report


def _paired_ndcg_differences(lists: ranking_data.FeatureLists, scores: dict[str, np.ndarray],
                              metrics: ranking_metrics.RankingMetricsConfig) -> dict[str, dict[str, float]]:
  """Per-query NDCG@k of RankSVM minus each other scorer: mean, standard error and wins/losses/ties."""
  labels, mask = ranking_metrics.ragged_to_padded(lists.relevance, lists.list_offsets)

  def per_query(values):
    padded, _ = ranking_metrics.ragged_to_padded(values, lists.list_offsets)
    return ranking_metrics.ndcg(labels, padded, mask, metrics.topn, metrics.gain, metrics.tie_breaking)

  reference = per_query(scores["ranksvm"])
  differences = {}
  for name, values in scores.items():
    if name == "ranksvm":
      continue
    diff = reference - per_query(values)
    diff = diff[~np.isnan(diff)]
    differences[name] = {
        "mean": float(diff.mean()), "standard_error": float(diff.std(ddof=1) / np.sqrt(len(diff)))
        if len(diff) > 1 else float("nan"),
        "wins": int(np.sum(diff > 1e-9)), "losses": int(np.sum(diff < -1e-9)),
        "ties": int(np.sum(np.abs(diff) <= 1e-9))}
  return differences


def format_evaluation(report: dict) -> str:
  """A plain-text table of an `evaluate` report."""
  names = list(next(iter(report["results"].values())))
  width = max(len(name) for name in report["results"]) + 2
  lines = [f"{report['protocol']}: {report['num_eval_queries']} evaluated queries"
           + (f", {report['num_train_queries']} training queries" if report["num_train_queries"] else ""),
           "scorer".ljust(width) + "".join(f"{name:>15}" for name in names)]
  for scorer, values in report["results"].items():
    lines.append(scorer.ljust(width) + "".join(f"{values[name]:>15.4f}" for name in names))
  suffix = "" if report["metrics_config"]["topn"] is None else f"@{report['metrics_config']['topn']}"
  for scorer, diff in report.get("paired_ndcg_difference", {}).items():
    lines.append(f"ranksvm - {scorer}: NDCG{suffix} {diff['mean']:+.4f} +- {diff['standard_error']:.4f} (standard "
                 f"error over queries); wins/losses/ties {diff['wins']}/{diff['losses']}/{diff['ties']}")
  return "\n".join(lines)


@dataclasses.dataclass
class RankedDocument:
  """One line of rank mode's output.

  Attributes:
    rank: 1 = best.
    doc_id: Document id.
    score: RankSVM score w·standardize(Φ(q, d)).
    display: Value of the display field ("" if none).
  """

  rank: int
  doc_id: str
  score: float
  display: str = ""


def rank(config: RankSVMMainConfig) -> list[RankedDocument]:
  """The top-k documents for `config.query` (or the list of `config.query_id`), best first.

  Documents are sorted by score, descending; equal scores keep document-file order.
  """
  model = load_scorer(config.model_dir)
  if config.data.format in ("libsvm", "elwc"):
    data = load_data(config.data)
    lists = data.lists.select_ids([config.query_id])
    features = lists.features
    doc_ids, display = lists.doc_ids, [""] * len(lists.doc_ids)
  else:
    if config.data.format == "csv":
      corpus = ranking_data.read_documents_csv(os.path.join(config.data.data_dir, ranking_data.DOCS_FILE),
                                               config.data.layout.doc_id_column)
    else:
      corpus = load_data(config.data).corpus
    mapper = load_mapper(config.model_dir)
    features = mapper.query_features(config.query, corpus)
    doc_ids = corpus.doc_ids
    field = config.display_field or (mapper.config.text_fields[0] if mapper.config.text_fields else None)
    if field is not None and field not in corpus.doc_fields:
      raise ValueError(f"--display_field {field!r} is not a document field; fields: {list(corpus.doc_fields)}.")
    display = corpus.doc_fields[field] if field is not None else [""] * len(doc_ids)
  scores = ranksvm.score_rows(model, features)
  order = np.argsort(-scores, kind="stable")[:config.top_k]
  return [RankedDocument(rank=r + 1, doc_id=doc_ids[i], score=float(scores[i]), display=display[i])
          for r, i in enumerate(order)]


def format_ranking(query: str, ranked: list[RankedDocument]) -> str:
  """A plain-text table of `rank` output, best first."""
  width = max([len("doc_id"), *(len(doc.doc_id) for doc in ranked)]) + 2
  lines = [f"Query: {query}", "rank".ljust(6) + "score".rjust(12) + "  " + "doc_id".ljust(width) + "document"]
  for doc in ranked:
    lines.append(f"{doc.rank:<6d}{doc.score:>12.4f}  {doc.doc_id.ljust(width)}{doc.display}")
  return "\n".join(lines)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  config = config_from_flags()
  if config.mode == "train":
    result = train(config)
    print(f"Trained on {result.num_pairs} pairs; model in {config.model_dir}.")
    for name, weight in sorted(result.weights_by_name().items(), key=lambda kv: -abs(kv[1]))[:20]:
      print(f"{weight:>10.4f}  {name}")
  elif config.mode == "evaluate":
    print(format_evaluation(evaluate(config)))
  else:
    print(format_ranking(config.query or config.query_id, rank(config)))
  sys.stdout.flush()


def run():
  """Console-script entry point (`pairwise-ranksvm`)."""
  app.run(main)


if __name__ == "__main__":
  run()
