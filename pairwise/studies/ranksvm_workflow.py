"""RankSVM's three workflows on ranking data: train (fit Φ and RankSVM, save the model folder), evaluate
(RankSVM against its single features on held-out queries, by leaving each query out, or a saved model) and
rank (the top-k documents for a new query). Its command line is `pairwise-ranksvm`
(rank4class_cli/binaries/ranksvm_main.py); the configs are in pairwise/ranksvm/ranksvm_config.py.

A model folder holds config.json, feature_mapping.json, weights.json and scorer/ (a Keras SavedModel scoring Φ
rows). weights.json states the model's features in input order ("feature_names"), their weights, and how the
solver ended ("solver": converged, iterations, primal objective, duality gap). Feature files scored by a saved
model (LibSVM, ELWC, rows) are mapped onto those names (`feature_lists.align_features`), never by position.
The metrics are defined in rank4class_engine/statistics/ranking_metrics.py.
"""

import dataclasses
import json
import logging
import os
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from pairwise.ranksvm import features as features_lib
from pairwise.ranksvm import ranksvm
from pairwise.ranksvm.ranksvm_config import (
  CORPUS,
  FEATURE_FORMATS,
  ROW_FILE_FORMATS,
  RankingDataConfig,
  RankSVMEvaluationConfig,
  RankSVMMainConfig,
  SimilarityEncoderConfig,
)
from rank4class_data.datasets import newsgroups
from rank4class_data.messages import say
from rank4class_data.ranking import feature_lists, grouped_rows, ranking_corpus
from rank4class_data.rows import bad_rows, row_tables
from rank4class_data.validation import require_input_file, write_json
from rank4class_encoders import text_embeddings, text_encoder
from rank4class_engine.runs import configs as engine_configs
from rank4class_engine.runs import run_directory, run_lock
from rank4class_engine.statistics import ranking_metrics

_logger = logging.getLogger(__name__)

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
  encoder = text_encoder.TextEncoderConfig(preprocess_handle=handles.preprocess,
                                           encoder_handle=handles.encoder,
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
  """Reads (or builds) the ranking data; for csv and rows data, says on stderr how the labels were read (once
  they are read: a bad file's error stays the one line)."""
  if config.format == CORPUS:
    corpus = ranking_corpus.read_corpus_csv(config.data_dir, config.layout)
    _describe_labels(config)
    return LoadedData(corpus, None, corpus.label_kind)
  if config.format == "newsgroups20":
    qrels = newsgroups.build_newsgroups_qrels(config.newsgroups)
    return LoadedData(qrels.corpus, None, "relevance", qrels.heldout_query_ids)
  if config.format == "rows":
    lists = _read_rows(config)
    _describe_labels(config)
  elif config.format == "libsvm":
    lists = feature_lists.read_libsvm(config.data_path, duplicates=config.libsvm_duplicates)
  else:
    lists = feature_lists.read_elwc(config.data_path, list(config.elwc_feature_names) or None,
                                    label_key=config.elwc_label_key)
  return LoadedData(None, lists, config.layout.label_kind if config.format == "rows" else "relevance")


def _describe_labels(config: RankingDataConfig) -> None:
  say(ranking_corpus.describe_labels(config.layout.label_column, config.layout.label_kind))


def _read_rows(config: RankingDataConfig) -> feature_lists.FeatureLists:
  """The user's feature rows grouped by query; under "skip" bad rows are listed (`config.bad_rows`).

  Raises:
    ValueError: naming `rows_format` for a file whose extension does not tell its format.
  """
  if config.rows_format == row_tables.AUTO:
    for path in row_tables.expand_paths(config.data_path):
      require_input_file(path, row_tables.ROW_FILE)  # A folder: that, before its (missing) extension.
      if os.path.splitext(path)[1].lower() not in row_tables.EXTENSIONS:
        raise ValueError(
            f"{path}: cannot tell the row format from extension {os.path.splitext(path)[1]!r}; give "
            f"`format` (one of {', '.join(ROW_FILE_FORMATS)}), or for an SVMlight/LibSVM file with qid: "
            "`format`=libsvm.")
  rows = grouped_rows.read_grouped_rows(grouped_rows.GroupedRowsConfig(
      config.data_path, config.layout.query_id_column, config.layout.label_column,
      feature_columns=tuple(config.feature_columns), label_kind=config.layout.label_kind,
      input_format=config.rows_format, libsvm_duplicates=config.libsvm_duplicates, bad_rows=config.bad_rows))
  rejects = None
  if config.bad_rows.policy == bad_rows.SKIP:
    rejects = config.bad_rows.rejects_file(row_tables.expand_paths(config.data_path)[0])
  grouped_rows.write_rejects(rows, rejects)
  say(f"Rows: {rows.summary(config.data_path, rejects)}.")
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


def _metrics_config(config: RankSVMEvaluationConfig, label_kind: str) -> ranking_metrics.RankingMetricsConfig:
  gain = config.gain if config.gain != "auto" else ("linear" if label_kind == "rank" else "exponential")
  return dataclasses.replace(config.metrics, gain=gain)


def _evaluate_scores(lists: feature_lists.FeatureLists, scores: np.ndarray,
                     metrics: ranking_metrics.RankingMetricsConfig) -> dict[str, float]:
  labels, mask = ranking_metrics.ragged_to_padded(lists.relevance, lists.list_offsets)
  padded, _ = ranking_metrics.ragged_to_padded(scores, lists.list_offsets)
  return ranking_metrics.compute_metrics(labels, padded, mask, metrics)


# Config keys that may differ between runs on one model folder: where it is, and what rank mode shows.
RESTART_FREE_KEYS = ("model_dir", "query", "query_id", "top_k", "display_field", "data.bad_rows.rejects")


def model_folder(config: RankSVMMainConfig, overwrite: bool = False) -> run_directory.RunDirectory:
  """The model folder as a run directory (`rank4class_engine.runs.run_directory`), to hold while a model is
  trained into it: locked first (a second writer stops at once), then a folder holding a model of another
  config is refused with the changed keys named (unless `overwrite`, which removes the model's files), then
  config.json written. The same config trains again and replaces the model (training is deterministic)."""
  return run_directory.RunDirectory(
      config.model_dir, engine_configs.to_dict(config), WEIGHTS_FILE, restart_free=RESTART_FREE_KEYS,
      normalize=_comparable_config, overwrite=overwrite, overwrite_hint="`overwrite`",
      run_files=(MAPPING_FILE, SCORER_DIR, EVALUATION_FILE))


def _comparable_config(config_dict: dict) -> dict:
  """A config.json dict through the dataclasses: fields added since it was written take their defaults."""
  return engine_configs.to_dict(engine_configs.from_dict(RankSVMMainConfig, config_dict))


def save_model(run: run_directory.RunDirectory, result: ranksvm.RankSVMResult,
               mapper: features_lib.FeatureMapper | None) -> None:
  """Writes scorer/ (whole) and feature_mapping.json, then weights.json last: its presence marks a complete
  model (`run.finish`)."""
  with run.staged(SCORER_DIR) as staging:
    result.model.save(staging, save_format="tf")
  mapping = run.file(MAPPING_FILE)
  if mapper is not None:
    write_json(mapping, mapper.to_dict())
  elif os.path.exists(mapping):
    os.remove(mapping)
  run.finish({"feature_names": result.feature_names, "weights": result.weights_by_name(),
              "num_pairs": result.num_pairs, "num_skipped_queries": result.num_skipped_queries,
              "constant_features": result.constant_features, "solver": result.solver})


def load_scorer(model_dir: str) -> tf.keras.Model:
  """The scorer SavedModel of `model_dir`."""
  path = os.path.join(model_dir, SCORER_DIR)
  if not os.path.isdir(path):
    raise FileNotFoundError(f"{path}: no trained scorer; train one first (`mode`=train with "
                            f"`model_dir`={model_dir}).")
  return tf.keras.models.load_model(path)


def model_feature_names(model: tf.keras.Model) -> list[str]:
  """The features a saved scorer takes, in its input order."""
  return ranksvm.scorer_of(model).feature_names


def load_model_features(config: RankingDataConfig, feature_names: list[str]) -> LoadedData:
  """Reads LibSVM, ELWC or row data for a saved model whose features are `feature_names`, matched by name.

  Rows without --feature_columns read the model's features as columns. A feature the model needs that the
  file lacks is an error naming the file and the features; the file's other features are ignored and named
  in one line on stderr.

  Raises:
    DataError: for missing features (and whatever the readers raise).
  """
  if config.format == "rows" and not config.feature_columns:
    config = dataclasses.replace(config, feature_columns=list(feature_names))
  data = load_data(config)
  source = config.data_path
  # LibSVM lines (also as rows) leave zeros out: an index the file never writes is a zero feature, not
  # missing.
  lists, extra = feature_lists.align_features(data.lists, feature_names, source,
                                              sparse_index_names=config.format in ("libsvm", "rows"))
  if extra:
    say(f"Ignoring {len(extra)} feature(s) of {source} that the model does not use: "
        f"{feature_lists.names_for_message(extra, limit=20)}.")
  return dataclasses.replace(data, lists=lists)


def load_mapper(model_dir: str) -> features_lib.FeatureMapper:
  """The fitted feature mapping of `model_dir`, with the text encoder it was trained with."""
  with open(os.path.join(model_dir, CONFIG_FILE), encoding="utf-8") as f:
    encoder = engine_configs.from_dict(SimilarityEncoderConfig, json.load(f)["encoder"])
  path = os.path.join(model_dir, MAPPING_FILE)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path}: the model was trained on pre-computed features (libsvm/elwc); rank "
                            "a list by `query_id` instead.")
  with open(path, encoding="utf-8") as f:
    state = json.load(f)
  embed = (
    make_text_embedder(encoder)
    if features_lib.uses_encoder(features_lib.FeatureConfig(**state["config"]))
    else None
  )
  return features_lib.FeatureMapper.from_dict(state, embed=embed)


def _fit_mapper(config: RankSVMMainConfig, data: LoadedData) -> features_lib.FeatureMapper | None:
  if data.corpus is None:
    return None
  return features_lib.FeatureMapper(config.features,
                                    embed=make_text_embedder(config.encoder)).fit(data.corpus)


def train(config: RankSVMMainConfig, overwrite: bool = False) -> ranksvm.RankSVMResult:
  """Fits Φ on all documents and RankSVM on every judged query; saves the model to `config.model_dir`
  (`model_folder`: a folder holding a model of another config is refused unless `overwrite`)."""
  with model_folder(config, overwrite) as run:
    data = load_data(config.data)
    mapper = _fit_mapper(config, data)
    lists = _featurize(data, mapper, _query_ids(data))
    result = ranksvm.train_ranksvm(lists, config.svm)
    save_model(run, result, mapper)
  _logger.info("Trained RankSVM on %d queries, %d pairs; saved to %s.", lists.num_queries, result.num_pairs,
               config.model_dir)
  return result


def _baseline_names(config: RankSVMEvaluationConfig, feature_names: list[str]) -> list[str]:
  if config.baseline_features == ["auto"]:
    return [name for name in feature_names if "(" in name]
  unknown = [name for name in config.baseline_features if name not in feature_names]
  if unknown:
    raise ValueError(f"`evaluation.baseline_features` {unknown} are not features; the features are "
                     f"{feature_names}.")
  return list(config.baseline_features)


def _heldout_split(config: RankSVMMainConfig, data: LoadedData, query_ids: list[str]) -> tuple[list[str],
                                                                                               list[str]]:
  evaluation = config.evaluation
  if evaluation.heldout_query_ids:
    unknown = [q for q in evaluation.heldout_query_ids if q not in query_ids]
    if unknown:
      raise ValueError(f"`evaluation.heldout_query_ids` {unknown} are not judged queries; known: "
                       f"{query_ids[:20]}.")
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


def evaluate(config: RankSVMMainConfig, overwrite: bool = False) -> dict:
  """Evaluates RankSVM and its single baseline features; writes evaluation.json to `model_dir` if set.

  With `model_dir` set, the held-out protocol trains its model into it (`model_folder`: another config's model
  is refused unless `overwrite`); the other protocols only write the report there, under the folder's lock.

  Returns:
    {"protocol", "num_train_queries", "num_eval_queries", "metrics_config", "results": {scorer: {metric:
    mean}}}.
  """
  if not config.model_dir:
    return _evaluate(config, None)
  if config.evaluation.protocol == "heldout":
    with model_folder(config, overwrite) as run:
      return _evaluate(config, run)
  with run_lock.RunDirectoryLock(config.model_dir):
    return _evaluate(config, None)


def _evaluate(config: RankSVMMainConfig, run: run_directory.RunDirectory | None) -> dict:
  evaluation = config.evaluation
  model = load_scorer(config.model_dir) if evaluation.protocol == "model" else None
  if model is not None and config.data.format in FEATURE_FORMATS:
    data = load_model_features(config.data, model_feature_names(model))
  else:
    data = load_data(config.data)
  query_ids = _query_ids(data)
  metrics = _metrics_config(evaluation, data.label_kind)
  if model is not None:
    mapper = load_mapper(config.model_dir) if data.corpus is not None else None
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
      if run is not None:
        save_model(run, result, mapper)
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
  report = {"protocol": evaluation.protocol, "num_train_queries": num_train,
            "num_eval_queries": len(eval_ids),
            "eval_query_ids": list(eval_ids), "metrics_config": dataclasses.asdict(metrics),
            "results": results, "paired_ndcg_difference": _paired_ndcg_differences(lists, scores, metrics)}
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
    lines.append(f"ranksvm - {scorer}: NDCG{suffix} {diff['mean']:+.4f} +- {diff['standard_error']:.4f} "
                 "(standard error over queries); wins/losses/ties "
                 f"{diff['wins']}/{diff['losses']}/{diff['ties']}")
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
    data = load_model_features(config.data, model_feature_names(model))
    lists = data.lists.select_ids([config.query_id])
    features = lists.features
    doc_ids, display = lists.doc_ids, [""] * len(lists.doc_ids)
  else:
    if config.data.format == CORPUS:
      corpus = ranking_corpus.read_documents_csv(os.path.join(config.data.data_dir, ranking_corpus.DOCS_FILE),
                                               config.data.layout.doc_id_column)
    else:
      corpus = load_data(config.data).corpus
    mapper = load_mapper(config.model_dir)
    features = mapper.query_features(config.query, corpus)
    doc_ids = corpus.doc_ids
    field = config.display_field or (mapper.config.text_fields[0] if mapper.config.text_fields else None)
    if field is not None and field not in corpus.doc_fields:
      raise ValueError(f"`display_field` {field!r} is not a document field; fields: "
                       f"{list(corpus.doc_fields)}.")
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


def format_solver(report: dict) -> str:
  """One line on how the solver ended: method, iterations, objective, gap, converged or not."""
  method = "Newton" if report["method"] == "newton" else "mini-batch Adam"
  unit = "iterations" if report["method"] == "newton" else "steps"
  return (f"Solver: {method}, {report['iterations']} {unit}, {report['seconds']:.2f} s; primal objective "
          f"{report['primal_objective']:.10g}, duality gap {report['duality_gap']:.3g} (relative "
          f"{report['relative_gap']:.3g}, tolerance {report['tolerance']:.3g}): "
          + ("converged." if report["converged"] else "NOT converged."))


def format_training(result: ranksvm.RankSVMResult, model_dir: str) -> str:
  """What `train` reports: the pair count, how the solver ended, and the largest weights by magnitude."""
  lines = [f"Trained on {result.num_pairs} pairs; model in {model_dir}.", format_solver(result.solver)]
  ranked = sorted(result.weights_by_name().items(), key=lambda kv: -abs(kv[1]))[:TOP_WEIGHTS_PRINTED]
  lines.extend(f"{weight:>10.4f}  {name}" for name, weight in ranked)
  return "\n".join(lines)


def run(config: RankSVMMainConfig, overwrite: bool = False) -> str:
  """Runs `config.mode` (train, evaluate or rank) and returns its plain-text report; `overwrite`: a model
  folder holding a model of another config is replaced instead of refused."""
  if config.mode == "train":
    return format_training(train(config, overwrite), config.model_dir)
  if config.mode == "evaluate":
    return format_evaluation(evaluate(config, overwrite))
  return format_ranking(config.query or config.query_id, rank(config))
