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


import sys

from absl import flags

from pairwise import features as features_lib
from pairwise import newsgroups_qrels, ranking_data, ranking_metrics, ranksvm
from pairwise import ranksvm_workflow as workflow
from rank4class_data import libsvm
from rank4class_engine import cli

PROGRAM = "pairwise-ranksvm"
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.
flags.DEFINE_enum("mode", "train", workflow.MODES, "What to do: train, evaluate or rank.", flag_values=FLAGS)
flags.DEFINE_string("model_dir", None, "Folder of the trained model (written by train, read by rank and by "
                    "evaluate with --eval_protocol=model; evaluate --eval_protocol=heldout writes it if set).",
                    flag_values=FLAGS)
# Data.
flags.DEFINE_enum("data_format",
                  "csv", workflow.DATA_FORMATS, "csv: docs.csv/queries.csv/query_doc.csv in --data_dir; "
                  "libsvm: SVMlight qid file --data_path; elwc: ELWC TFRecord --data_path; newsgroups20: the "
                  "graded 20 Newsgroups set built by pairwise/newsgroups_qrels.py.", flag_values=FLAGS)
flags.DEFINE_string("data_dir", None,
                    "Folder with docs.csv, queries.csv and query_doc.csv (--data_format=csv).",
                    flag_values=FLAGS)
flags.DEFINE_string("data_path", None, "LibSVM/SVMlight or ELWC file (--data_format=libsvm|elwc).",
                    flag_values=FLAGS)
flags.DEFINE_string("label_key", "label", "elwc: example feature holding the relevance (TF-Ranking's own "
                    "examples use relevance or utility).", flag_values=FLAGS)
flags.DEFINE_list("feature_names", [], "elwc: features in this order; default: the context's feature_names, else "
                  "every numeric example feature in the file (an example's absent features are 0).",
                  flag_values=FLAGS)
flags.DEFINE_enum("libsvm_duplicates", "error", libsvm.DUPLICATE_POLICIES, "libsvm: a feature index repeated in "
                  "a line is an error, or its last value wins, or the values are summed.", flag_values=FLAGS)
flags.DEFINE_string("doc_id_column", "loinc_num", "Document id column of docs.csv and query_doc.csv.",
                    flag_values=FLAGS)
flags.DEFINE_string("query_id_column", "id_query", "Query id column of queries.csv and query_doc.csv.",
                    flag_values=FLAGS)
flags.DEFINE_string("query_text_column", "query", "Query text column of queries.csv.", flag_values=FLAGS)
flags.DEFINE_string("label_column", "rank", "Label column of query_doc.csv.", flag_values=FLAGS)
flags.DEFINE_enum("label_kind", "rank", ranking_data.LABEL_KINDS,
                  "rank: 1 = best; relevance: higher = better.", flag_values=FLAGS)
flags.DEFINE_integer("ng_num_queries", 40, "newsgroups20: number of queries.", flag_values=FLAGS)
flags.DEFINE_integer("ng_list_size", 30, "newsgroups20: candidates per query.", flag_values=FLAGS)
flags.DEFINE_integer("ng_num_grade2", 10, "newsgroups20: same-newsgroup candidates per query.",
                     flag_values=FLAGS)
flags.DEFINE_integer("ng_num_grade1", 10, "newsgroups20: same-hierarchy candidates per query.",
                     flag_values=FLAGS)
flags.DEFINE_integer("ng_doc_num_words", 100, "newsgroups20: words kept per document (field 'text').",
                     flag_values=FLAGS)
flags.DEFINE_float("ng_heldout_fraction", 0.5, "newsgroups20: fraction of queries held out.",
                   flag_values=FLAGS)
flags.DEFINE_integer("ng_seed", 0, "newsgroups20: seed of the construction.", flag_values=FLAGS)
# Features Φ(q, d).
flags.DEFINE_list("categorical_fields", [], "Document fields one-hot encoded.", flag_values=FLAGS)
flags.DEFINE_list("multi_hot_fields", [], "field:separator items, e.g. system:/ (split 'Ser/Plas' into two).",
                  flag_values=FLAGS)
flags.DEFINE_list("numeric_fields", [], "Document fields standardized, each with a missing indicator.",
                  flag_values=FLAGS)
flags.DEFINE_list("missing_values", list(features_lib.DEFAULT_MISSING_VALUES),
                  "Numeric-field values meaning missing (numbers compare numerically).", flag_values=FLAGS)
flags.DEFINE_list("text_fields", [], "Document fields compared with the query text.", flag_values=FLAGS)
flags.DEFINE_list("similarities", ["bm25",
                  "tfidf"], f"Per text field, from {list(features_lib.SIMILARITIES)}.",
                  flag_values=FLAGS)
flags.DEFINE_integer("feedback_k", 10,
                     "embedding_feedback: collection documents in the query's feedback centroid.",
                     flag_values=FLAGS)
flags.DEFINE_integer("neighbor_k", 10,
                     "embedding_neighbors: collection documents in a document's smoothed vector.",
                     flag_values=FLAGS)
flags.DEFINE_enum("text_encoder", "none", workflow.TEXT_ENCODERS,
                  "Encoder of the embedding similarities: minilm = all-MiniLM-L6-v2, mean pooling.",
                  flag_values=FLAGS)
flags.DEFINE_integer("max_seq_length", 128, "Encoder tokens per text.", flag_values=FLAGS)
# RankSVM.
flags.DEFINE_float("c", 1.0, "SVM trade-off C.", flag_values=FLAGS)
flags.DEFINE_enum("loss", "hinge", ranksvm.LOSS_NAMES, "hinge (SVM) or squared_hinge.", flag_values=FLAGS)
flags.DEFINE_integer("batch_size", None, "Pairs per step; unset = full batch.", flag_values=FLAGS)
flags.DEFINE_integer("num_steps", 3000, "Full-batch Adam steps.", flag_values=FLAGS)
flags.DEFINE_integer("num_epochs", 20, "Mini-batch epochs.", flag_values=FLAGS)
flags.DEFINE_float("learning_rate", 0.05, "Initial Adam learning rate.", flag_values=FLAGS)
flags.DEFINE_integer("max_pairs_per_query", None, "Subsample each query to at most this many pairs.",
                     flag_values=FLAGS)
flags.DEFINE_boolean("skip_unpairable_queries", False,
                     "Skip (instead of rejecting) queries with one document.",
                     flag_values=FLAGS)
flags.DEFINE_integer("seed", 0, "Seed of pairs, sign flips and splits.", flag_values=FLAGS)
# Evaluation.
flags.DEFINE_enum("eval_protocol", "heldout", workflow.EVAL_PROTOCOLS, "How evaluate splits queries.",
                  flag_values=FLAGS)
flags.DEFINE_list("heldout_query_ids", [], "Held-out queries (heldout protocol; default: a seeded fraction).",
                  flag_values=FLAGS)
flags.DEFINE_float("heldout_fraction", 0.5, "Fraction of queries held out when --heldout_query_ids is empty.",
                   flag_values=FLAGS)
flags.DEFINE_integer("topn", 10, "Cutoff k of NDCG@k, MAP@k and MRR@k.", flag_values=FLAGS)
flags.DEFINE_enum("gain", "auto", workflow.GAIN_CHOICES,
                  "NDCG gain; auto = linear for rank labels, else exponential.",
                  flag_values=FLAGS)
flags.DEFINE_float("relevance_threshold", 1.0, "Relevance >= this counts as relevant for MAP and MRR.",
                   flag_values=FLAGS)
flags.DEFINE_enum("tie_breaking",
                  "pessimistic", ranking_metrics.TIE_BREAKING_POLICIES, "Order of tied scores.",
                  flag_values=FLAGS)
flags.DEFINE_list("baseline_features", ["auto"], "Features evaluated alone; auto = every text similarity.",
                  flag_values=FLAGS)
# Ranking.
flags.DEFINE_string("query", None, "Query text to rank documents for (--mode=rank).", flag_values=FLAGS)
flags.DEFINE_string("query_id", None, "Query id whose list is ranked (--mode=rank with libsvm/elwc data).",
                    flag_values=FLAGS)
flags.DEFINE_integer("top_k", 10, "Documents printed by --mode=rank.", flag_values=FLAGS)
flags.DEFINE_string("display_field", None, "Document field printed next to each ranked document "
                    "(default: the first text field).", flag_values=FLAGS)


def _parse_multi_hot(items: list[str]) -> dict[str, str]:
  fields = {}
  for item in items:
    field, sep, separator = item.partition(":")
    if not sep or not field or not separator:
      raise ValueError(f"--multi_hot_fields item {item!r} must be field:separator, e.g. system:/.")
    fields[field] = separator
  return fields


def config_from_flags(f: flags.FlagValues) -> workflow.RankSVMMainConfig:
  """Parses the flags into a `RankSVMMainConfig`."""
  has_fields = any([f.categorical_fields, f.multi_hot_fields, f.numeric_fields, f.text_fields])
  feature_config = features_lib.FeatureConfig(
      categorical_fields=list(f.categorical_fields), multi_hot_fields=_parse_multi_hot(f.multi_hot_fields),
      numeric_fields=list(f.numeric_fields), missing_values=list(f.missing_values),
      text_fields=list(f.text_fields), similarities=list(f.similarities), feedback_k=f.feedback_k,
      neighbor_k=f.neighbor_k) if has_fields else None
  return workflow.RankSVMMainConfig(
      mode=f.mode, model_dir=f.model_dir,
      data=workflow.DataConfig(
          format=f.data_format, data_dir=f.data_dir, data_path=f.data_path, elwc_label_key=f.label_key,
          elwc_feature_names=list(f.feature_names), libsvm_duplicates=f.libsvm_duplicates,
          layout=ranking_data.CsvLayout(
              doc_id_column=f.doc_id_column, query_id_column=f.query_id_column,
              query_text_column=f.query_text_column, label_column=f.label_column,
              label_kind=f.label_kind),
          newsgroups=newsgroups_qrels.NewsgroupsQrelsConfig(
              num_queries=f.ng_num_queries, list_size=f.ng_list_size, num_grade2=f.ng_num_grade2,
              num_grade1=f.ng_num_grade1, doc_num_words=f.ng_doc_num_words,
              heldout_fraction=f.ng_heldout_fraction, seed=f.ng_seed)),
      features=feature_config,
      encoder=workflow.EncoderConfig(name=f.text_encoder, max_seq_length=f.max_seq_length),
      svm=ranksvm.RankSVMConfig(
          c=f.c, loss=f.loss, batch_size=f.batch_size, num_steps=f.num_steps,
          num_epochs=f.num_epochs, learning_rate=f.learning_rate,
          max_pairs_per_query=f.max_pairs_per_query, skip_unpairable_queries=f.skip_unpairable_queries,
          seed=f.seed),
      evaluation=workflow.EvaluationConfig(
          protocol=f.eval_protocol, heldout_query_ids=list(f.heldout_query_ids),
          heldout_fraction=f.heldout_fraction,
          metrics=ranking_metrics.RankingMetricsConfig(
              topn=f.topn, relevance_threshold=f.relevance_threshold, tie_breaking=f.tie_breaking),
          gain=f.gain, baseline_features=list(f.baseline_features)),
      query=f.query, query_id=f.query_id, top_k=f.top_k, display_field=f.display_field)


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, config_from_flags)


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  config = config_from_flags(FLAGS)
  if config.mode == "train":
    result = workflow.train(config)
    print(f"Trained on {result.num_pairs} pairs; model in {config.model_dir}.")
    for name, weight in sorted(result.weights_by_name().items(), key=lambda kv: -abs(kv[1]))[:20]:
      print(f"{weight:>10.4f}  {name}")
  elif config.mode == "evaluate":
    print(workflow.format_evaluation(workflow.evaluate(config)))
  else:
    print(workflow.format_ranking(config.query or config.query_id, workflow.rank(config)))
  sys.stdout.flush()


def run():
  """Console-script entry point (`pairwise-ranksvm`)."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
