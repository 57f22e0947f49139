r"""RankSVM command line: train, evaluate on held-out queries, and rank documents for a new query.

Sample command lines (LOINC sample layout; its ranks carry no relevance signal, so its metrics mean nothing):

  pairwise-ranksvm --mode=train --input_format=corpus --input=../shared/loinc --model_dir=/tmp/ranksvm \
    --label_column=rank --label_kind=rank --categorical_fields=property,scale,class,discourage \
    --multi_hot_fields=system:/ --numeric_fields=rank_loinc --missing_values=-999999999 \
    --text_fields=long_common_name,component --similarities=bm25,tfidf
  pairwise-ranksvm --mode=rank --input_format=corpus --input=../shared/loinc --model_dir=/tmp/ranksvm \
    --query="glucose in blood" --top_k=5
  pairwise-ranksvm --mode=evaluate --eval_protocol=leave_one_query_out --input_format=corpus \
    --input=../shared/loinc --label_column=rank --label_kind=rank --categorical_fields=scale \
    --text_fields=long_common_name

Graded 20 Newsgroups set (see rank4class_data/datasets/newsgroups.py), RankSVM against its single features:

  pairwise-ranksvm --mode=evaluate --eval_protocol=heldout --input_format=newsgroups20 \
    --text_fields=text --similarities=bm25,embedding,embedding_feedback,embedding_neighbors \
    --text_encoder=minilm --model_dir=/tmp/ranksvm_20ng

Your own feature rows (one document a row: a query id, numeric features, a label), their format named or told
by the extension (--input_format=rows):

  pairwise-ranksvm --mode=evaluate --input_format=tsv --input=runs.tsv --query_id_column=query \
    --feature_columns=bm25,pagerank --label_column=grade

Modes: `train` fits Φ on the documents and RankSVM on the (training) queries, and writes `<model_dir>/`
config.json, feature_mapping.json, weights.json and scorer/ (a Keras SavedModel scoring Φ rows). `evaluate`
reports NDCG@k, MAP@k, MRR@k, Kendall tau and pair accuracy (definitions in
rank4class_engine/statistics/ranking_metrics.py) of RankSVM and of each single baseline feature, on held-out
queries (`heldout`), by leaving each query out in turn (`leave_one_query_out`), or for the model already in
--model_dir (`model`). `rank` prints the top-k documents for --query (or the list of --query_id for
LibSVM/ELWC data), best first, with their scores.

Labels are relevance grades (higher = better) unless --label_kind=rank says the --label_column holds ranks
(1 = best); the terminal says which reading was used. A saved model states its features and their order
(weights.json); `rank` and `evaluate --eval_protocol=model` on LibSVM, ELWC or row files map each file's
features onto them by name (LibSVM: the index, or the `# feature_names:` header): a feature the model needs
and the file lacks is an error, extra features are ignored and named on stderr. RankSVM is solved by Newton's
method to a certified duality gap (--tolerance); a run that stops early says so on stderr and in weights.json.
"""

from absl import flags

from pairwise.ranksvm import features as features_lib
from pairwise.ranksvm import ranksvm
from pairwise.ranksvm import ranksvm_config as config_lib
from pairwise.studies import ranksvm_workflow as workflow
from rank4class_cli import cli, ranksvm_flags, terminal
from rank4class_data import file_formats
from rank4class_data.ranking import ranking_corpus
from rank4class_data.rows import libsvm, row_tables
from rank4class_data.rows.bad_rows import SKIP
from rank4class_data.rows.row_tables import expand_paths
from rank4class_data.validation import refuse_output_over_inputs
from rank4class_engine.statistics import ranking_metrics

PROGRAM = "pairwise-ranksvm"
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.
define = cli.FlagDefiner(FLAGS)
define.enum("mode", "train", config_lib.MODES, "What to do: train, evaluate or rank.")
define.string("model_dir", None, "Folder of the trained model (written by train, read by rank and by "
              "evaluate with --eval_protocol=model; evaluate --eval_protocol=heldout writes it if set).")
# Data.
define.enum("input_format", config_lib.CORPUS, config_lib.DATA_FORMATS, "corpus: docs.csv/queries.csv/"
            "query_doc.csv in the folder --input; libsvm: an SVMlight qid file --input; elwc: an ELWC "
            "TFRecord --input; newsgroups20: the graded 20 Newsgroups set built by "
            "rank4class_data/datasets/newsgroups.py (no --input); rows: your row files in --input, each of "
            "the format its extension names; "
            + file_formats.help_text(config_lib.ROW_FILE_FORMATS) + " (A folder given with csv, the name "
            "before 0.9.0, is the corpus: deprecated.)")
define.string("input", None, "corpus: the folder with docs.csv, queries.csv and query_doc.csv; libsvm, elwc: "
              "the LibSVM/SVMlight or ELWC file; rows, csv, tsv, jsonl, tab: row files (CSV/TSV/JSONL/.tab/"
              "LibSVM), one document a row (comma-separated globs).")
define.list("feature_columns", [], "rows: the numeric feature columns (the query id is --query_id_column, "
            "the label --label_column with --label_kind); with a saved model (--mode=rank, "
            "--eval_protocol=model) the default is the model's features, matched by name.")
define.enum("rows_format", row_tables.AUTO, (row_tables.AUTO, *row_tables.INPUT_FORMATS), "Deprecated "
            f"(removed in {cli.ALIASES_REMOVED_IN}): row files of this format; give it as --input_format "
            "(rows: each file's extension tells it).")
define.bad_row_flags(rejects_default="<model_dir>/rejects.jsonl, else <first data file stem>.rejects.jsonl")
define.string("label_key", "label", "elwc: example feature holding the relevance (TF-Ranking's own examples "
              "use relevance or utility).")
define.list("feature_names", [], "elwc: features in this order; default: the context's feature_names, else "
            "every numeric example feature in the file (an example's absent features are 0).")
define.enum("libsvm_duplicates", "error", libsvm.DUPLICATE_POLICIES, "libsvm: a feature index repeated in a "
            "line is an error, or its last value wins, or the values are summed.")
define.string("doc_id_column", "loinc_num", "Document id column of docs.csv and query_doc.csv.")
define.string("query_id_column", "id_query",
              "Query id column of queries.csv and query_doc.csv (rows: of the rows).")
define.string("query_text_column", "query", "Query text column of queries.csv.")
define.string("label_column", ranking_corpus.DEFAULT_LABEL_COLUMN, "Label column of query_doc.csv (rows: of "
              "the rows; LibSVM rows: the first token).")
define.enum("label_kind", "relevance", ranking_corpus.LABEL_KINDS, "relevance: higher = better (LibSVM, "
            "ELWC, LightGBM grades); rank: 1 = best within the query (the LOINC sample: --label_column=rank "
            "--label_kind=rank).")
define.integer("num_queries", 60, "newsgroups20: number of queries (training and held out).")
define.integer("ng_list_size", 30, "newsgroups20: candidates per query.")
define.integer("ng_num_grade2", 10, "newsgroups20: same-newsgroup candidates per query.")
define.integer("ng_num_grade1", 10, "newsgroups20: same-hierarchy candidates per query.")
define.integer("ng_doc_num_words", 100, "newsgroups20: words kept per document (field 'text').")
define.float("ng_heldout_fraction", 0.5, "newsgroups20: fraction of queries held out.")
define.integer("ng_seed", 0, "newsgroups20: seed of the construction.")
# Features Φ(q, d).
define.list("categorical_fields", [], "Document fields one-hot encoded.")
define.list("multi_hot_fields", [], "field:separator items, e.g. system:/ (split 'Ser/Plas' into two).")
define.list("numeric_fields", [], "Document fields standardized, each with a missing indicator.")
define.list("missing_values", list(features_lib.DEFAULT_MISSING_VALUES),
            "Numeric-field values meaning missing (numbers compare numerically).")
define.list("text_fields", [], "Document fields compared with the query text.")
define.list("similarities", ["bm25", "tfidf"], f"Per text field, from {list(features_lib.SIMILARITIES)}.")
define.integer("feedback_k", 10, "embedding_feedback: collection documents in the query's feedback centroid.")
define.integer("neighbor_k", 10, "embedding_neighbors: collection documents in a document's smoothed vector.")
define.enum("text_encoder", "none", config_lib.TEXT_ENCODERS,
            "Encoder of the embedding similarities: minilm = all-MiniLM-L6-v2, mean pooling.")
define.integer("max_seq_length", 128, "Encoder tokens per text.")
# RankSVM.
define.float("c", 1.0, "SVM trade-off C.")
define.enum("loss", "hinge", ranksvm.LOSS_NAMES, "hinge (SVM) or squared_hinge.")
define.float("tolerance", 1e-6, "Converged when the duality gap is at most this fraction of ||w||^2 / 2 "
             "(then the weights are within sqrt(tolerance) of the optimum, relative to their norm).")
define.integer("max_iterations", 200, "Newton steps at most; a run stopped there unconverged says so.")
define.integer("batch_size", None, "Unset: the Newton solver (all pairs, as indices). Set: mini-batch Adam "
               "with this many pairs per step (then --num_epochs and --learning_rate apply).")
define.integer("num_epochs", 20, "Mini-batch epochs (with --batch_size).")
define.float("learning_rate", 0.05, "Initial Adam learning rate (with --batch_size).")
define.integer("max_pairs_per_query", None, "Subsample each query to at most this many pairs.")
define.bool("skip_unpairable_queries", False, "Skip (instead of rejecting) queries with one document.")
define.bool("overwrite_model_dir", False, "When --model_dir holds a model of other settings, replace it "
            "(default: refuse, naming the changed settings; the same settings train again).")
define.integer("seed", 0, "Seed of pairs, sign flips and splits.")
# Evaluation.
define.enum("eval_protocol", "heldout", config_lib.EVAL_PROTOCOLS, "How evaluate splits queries.")
define.list("heldout_query_ids", [], "Held-out queries (heldout protocol; default: a seeded fraction).")
define.float("heldout_fraction", 0.5, "Fraction of queries held out when --heldout_query_ids is empty.")
define.integer("topn", 10, "Cutoff k of NDCG@k, MAP@k and MRR@k.")
define.enum("gain", "auto", config_lib.GAIN_CHOICES,
            "NDCG gain; auto = linear for rank labels, else exponential.")
define.float("relevance_threshold", 1.0, "Relevance >= this counts as relevant for MAP and MRR.")
define.enum("tie_breaking", "pessimistic", ranking_metrics.TIE_BREAKING_POLICIES, "Order of tied scores.")
define.list("baseline_features", ["auto"], "Features evaluated alone; auto = every text similarity.")
# Ranking.
define.string("query", None, "Query text to rank documents for (--mode=rank).")
define.string("query_id", None, "Query id whose list is ranked (--mode=rank with libsvm/elwc data).")
define.integer("top_k", 10, "Documents printed by --mode=rank.")
define.string("display_field", None, "Document field printed next to each ranked document (default: the "
              "first text field).")

define.alias("data_format", "input_format")
define.alias("data_dir", "input")
define.alias("data_path", "input")
define.alias("ng_num_queries", "num_queries")
# The config fields whose flag has another name, as library messages name them (`cli.flag_words` writes them
# as these flags; an undotted entry stands for every path ending in it); every other field is spelled as its
# flag (`svm.c` is --c, `layout.label_kind` --label_kind) or has none. `ranksvm_flags.config_from_flags` reads
# each of these flags into its field.
define.field_flags({
    "format": "input_format", "data_dir": "input", "data_path": "input", "elwc_label_key": "label_key",
    "elwc_feature_names": "feature_names", "encoder.name": "text_encoder",
    "encoder.max_seq_length": "max_seq_length", "protocol": "eval_protocol",
    # The 20 Newsgroups construction's fields, which its own checks name undotted; `heldout_fraction` and
    # `seed` undotted are the evaluation's and the run's.
    "list_size": "ng_list_size", "num_grade2": "ng_num_grade2", "num_grade1": "ng_num_grade1",
    "doc_num_words": "ng_doc_num_words", "newsgroups.heldout_fraction": "ng_heldout_fraction",
    "newsgroups.seed": "ng_seed",
    "overwrite": "overwrite_model_dir",
})
data_format, deprecation_lines = ranksvm_flags.data_format, ranksvm_flags.deprecation_lines
parse_multi_hot, config_from_flags = ranksvm_flags.parse_multi_hot, ranksvm_flags.config_from_flags


def check_flags(f: flags.FlagValues) -> None:
  """The flags' config (ValueError naming the flag, for values the configs reject), then one warning line on
  stderr per deprecated way of naming the data format."""
  config_from_flags(f)
  for line in deprecation_lines(f):
    terminal.err(line)


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, check_flags)


def check_outputs(config: config_lib.RankSVMMainConfig) -> None:
  """ValueError when the rejects file would overwrite a data file, or --model_dir (written by train and
  evaluate) is a data file or folder."""
  data = config.data
  rejects = None
  if data.format == "rows" and data.bad_rows.policy == SKIP and data.data_path:
    rejects = data.bad_rows.rejects_file(expand_paths(data.data_path)[0])
  refuse_output_over_inputs({"--rejects": rejects},
                            {"--input": [data.data_dir] if data.data_dir else data.data_path},
                            folders={"--model_dir": config.model_dir if config.mode != "rank" else None})


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  config = config_from_flags(FLAGS)
  check_outputs(config)
  terminal.out(workflow.run(config, FLAGS.overwrite_model_dir))


def run() -> None:
  """Console-script entry point (`pairwise-ranksvm`)."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
