"""RankSVM's three workflows on ranking data: train (fit Φ and RankSVM, save the model folder), evaluate
(RankSVM against its single features on held-out queries, by leaving each query out, or a saved model) and
rank (the top-k documents for a new query). Its command line is `pairwise-ranksvm` (pairwise/ranksvm_main.py);
the configs are in pairwise/ranksvm_config.py.

A model folder holds config.json, feature_mapping.json, weights.json and scorer/ (a Keras SavedModel scoring Φ
rows). The metrics are defined in pairwise/ranking_metrics.py.
"""

import dataclasses
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable

import numpy as np
import tensorflow as tf
from absl import logging

from pairwise import features as features_lib
from pairwise import ranking_metrics, ranksvm
from pairwise.ranksvm_config import (
  FEATURE_FORMATS,
  EvaluationConfig,
  RankingDataConfig,
  RankSVMMainConfig,
  SimilarityEncoderConfig,
)
from rank4class_data import bad_rows, feature_lists, grouped_rows, newsgroups, ranking_corpus, row_tables
from rank4class_data.validation import write_json
from rank4class_encoders import text_embeddings, text_encoder
from rank4class_engine import configs as engine_configs

CONFIG_FILE = "config.json"
MAPPING_FILE = "feature_mapping.json"
WEIGHTS_FILE = "weights.json"
EVALUATION_FILE = "evaluation.json"
SCORER_DIR = "scorer"
TOP_WEIGHTS_PRINTED = 20


def make_text_embedder(config: SimilarityEncoderConfig) -> Callable[[list[str]], np.ndarray] | None:
  """A function texts -> float32 [num_texts, dim] for the chosen encoder, or None for "none".

  MiniLM (all-MiniLM-L6-v2, converted once by `text_embeddings.minilm_handles`) runs with mean pooling, as it
  was trained; its embeddings go through the embedding cache (`text_embeddings.embed_texts`), so repeated runs
  over the same texts do not encode them again.
  """
  if config.name == "none":
    return None
  handles = text_embeddings.minilm_handles()
  encoder = text_encoder.TextEncoderConfig(preprocess_handle=handles.preprocess, encoder_handle=handles.encoder,
                                           pooling="mean", max_seq_length=config.max_seq_length)
  return lambda texts: text_embeddings.embed_texts(texts, encoder)


@dataclasses.dataclass
class LoadedData:
  """Data of one run.

  Attributes:
    corpus: Raw documents and queries (None for libsvm/elwc).
    lists: Pre-computed Φ rows (libsvm/elwc only).
    label_kind: "rank" or "relevance" as in the source.
    default_heldout: Held-out query ids the data prescribes (newsgroups20), else None.
  """

  corpus: ranking_corpus.RankingCorpus | None
  lists: feature_lists.FeatureLists | None
  label_kind: str
  default_heldout: list[str] | None = None


def load_data(config: RankingDataConfig) -> LoadedData:
  """Reads (or builds) the ranking data."""
  if config.format == "csv":
    corpus = ranking_corpus.read_corpus_csv(config.data_dir, config.layout)
    return LoadedData(corpus, None, corpus.label_kind)
  if config.format == "newsgroups20":
    qrels = newsgroups.build_newsgroups_qrels(config.newsgroups)
    return LoadedData(qrels.corpus, None, "relevance", qrels.heldout_query_ids)
  if config.format == "rows":
    lists = _read_rows(config)
  elif config.format == "libsvm":
    lists = feature_lists.read_libsvm(config.data_path, duplicates=config.libsvm_duplicates)
  else:
    lists = feature_lists.read_elwc(config.data_path, list(config.elwc_feature_names) or None,
                                    label_key=config.elwc_label_key)
  return LoadedData(None, lists, "relevance")


def _read_rows(config: RankingDataConfig) -> feature_lists.FeatureLists:
  """The user's feature rows grouped by query; under "skip" bad rows are listed (`config.bad_rows`)."""
  rows = grouped_rows.read_grouped_rows(grouped_rows.GroupedRowsConfig(
      config.data_path, config.layout.query_id_column, config.layout.label_column,
      feature_columns=tuple(config.feature_columns), label_kind=config.layout.label_kind,
      libsvm_duplicates=config.libsvm_duplicates, bad_rows=config.bad_rows))
  rejects = None
  if config.bad_rows.policy == bad_rows.SKIP:
    rejects = config.bad_rows.rejects_file(row_tables.expand_paths(config.data_path)[0])
  grouped_rows.write_rejects(rows, rejects)
  sys.stderr.write(f"Rows: {rows.summary(config.data_path, rejects)}.\n")
  return rows.to_feature_lists()


def _query_ids(data: LoadedData) -> list[str]:
  if data.lists is not None:
    return list(data.lists.query_ids)
  return [data.corpus.query_ids[q] for q in data.corpus.judged_queries()]


def _featurize(data: LoadedData, mapper: features_lib.FeatureMapper | None,
               query_ids: list[str]) -> feature_lists.FeatureLists:
  if data.lists is not None:
    return data.lists.select_ids(query_ids)
  return mapper.transform(data.corpus.select_queries(query_ids))


def _metrics_config(config: EvaluationConfig, label_kind: str) -> ranking_metrics.RankingMetricsConfig:
  gain = config.gain if config.gain != "auto" else ("linear" if label_kind == "rank" else "exponential")
  return dataclasses.replace(config.metrics, gain=gain)


def _evaluate_scores(lists: feature_lists.FeatureLists, scores: np.ndarray,
                     metrics: ranking_metrics.RankingMetricsConfig) -> dict[str, float]:
  labels, mask = ranking_metrics.ragged_to_padded(lists.relevance, lists.list_offsets)
  padded, _ = ranking_metrics.ragged_to_padded(scores, lists.list_offsets)
  return ranking_metrics.compute_metrics(labels, padded, mask, metrics)


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
    write_json(os.path.join(model_dir, MAPPING_FILE), mapper.to_dict())
  write_json(os.path.join(model_dir, WEIGHTS_FILE),
             {"weights": result.weights_by_name(), "num_pairs": result.num_pairs,
              "num_skipped_queries": result.num_skipped_queries, "constant_features": result.constant_features})
  write_json(os.path.join(model_dir, CONFIG_FILE), engine_configs.to_dict(config))


def load_scorer(model_dir: str) -> tf.keras.Model:
  """The scorer SavedModel of `model_dir`."""
  path = os.path.join(model_dir, SCORER_DIR)
  if not os.path.isdir(path):
    raise FileNotFoundError(f"{path}: no trained scorer; run --mode=train with --model_dir={model_dir} first.")
  return tf.keras.models.load_model(path)


def load_mapper(model_dir: str) -> features_lib.FeatureMapper:
  """The fitted feature mapping of `model_dir`, with the text encoder it was trained with."""
  with open(os.path.join(model_dir, CONFIG_FILE), encoding="utf-8") as f:
    encoder = engine_configs.from_dict(SimilarityEncoderConfig, json.load(f)["encoder"])
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
    write_json(os.path.join(config.model_dir, EVALUATION_FILE), report)
  return report


def _paired_ndcg_differences(lists: feature_lists.FeatureLists, scores: dict[str, np.ndarray],
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
  if config.data.format in FEATURE_FORMATS:
    data = load_data(config.data)
    lists = data.lists.select_ids([config.query_id])
    features = lists.features
    doc_ids, display = lists.doc_ids, [""] * len(lists.doc_ids)
  else:
    if config.data.format == "csv":
      corpus = ranking_corpus.read_documents_csv(os.path.join(config.data.data_dir, ranking_corpus.DOCS_FILE),
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


def format_training(result: ranksvm.RankSVMResult, model_dir: str) -> str:
  """What `train` reports: the pair count and the largest weights by magnitude."""
  lines = [f"Trained on {result.num_pairs} pairs; model in {model_dir}."]
  ranked = sorted(result.weights_by_name().items(), key=lambda kv: -abs(kv[1]))[:TOP_WEIGHTS_PRINTED]
  lines.extend(f"{weight:>10.4f}  {name}" for name, weight in ranked)
  return "\n".join(lines)


def run(config: RankSVMMainConfig) -> str:
  """Runs `config.mode` (train, evaluate or rank) and returns its plain-text report."""
  if config.mode == "train":
    return format_training(train(config), config.model_dir)
  if config.mode == "evaluate":
    return format_evaluation(evaluate(config))
  return format_ranking(config.query or config.query_id, rank(config))
