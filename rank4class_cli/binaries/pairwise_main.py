r"""Trains and evaluates the pairwise margin-ranking Transformer (Rank over Class) on real data.

Sample command lines:

  # Drug reviews ranked by rating inside each condition; frozen MiniLM embeddings, 3 seeds.
  pairwise-train --mode=train --dataset=drug_reviews --pivot=condition --label=rating --encoder=minilm \
      --frozen_embeddings --train_steps=1500 --learning_rate=1e-3 --seeds=1,2,3 \
      --model_dir=/tmp/drug_condition

  # A short end-to-end fine-tuning run (MiniLM trained), group-batched.
  pairwise-train --mode=train --dataset=newsgroups_queries --encoder=minilm --trainable_encoder \
      --max_seq_length=64 --train_steps=60 --lists_per_batch=1 --model_dir=/tmp/ng_finetune

  # Your own grouped rows: a group id, a text and an ordinal label per row; bad rows listed in <model_dir>.
  # The files' format comes from their extension (--input_format=auto), or name it: --input_format=tsv.
  pairwise-train --dataset=rows --train_files=reviews.csv --group_column=condition --text_column=review \
      --label_column=rating --label_order=negative,neutral,positive --bad_rows=skip --model_dir=/tmp/reviews

  # Re-evaluate an exported model on the test split rebuilt from its config.json.
  pairwise-train --mode=evaluate --model_dir=/tmp/drug_condition/seed_1

  # Table 4: skewed train, balanced test, converted ranking accuracy vs a classifier on the same encoder.
  pairwise-train --mode=class_conversion --pivot=none --encoder=minilm --frozen_embeddings --seeds=1,2,3 \
      --train_steps=1500 --learning_rate=1e-3 --model_dir=/tmp/table4

Modes: "train" (train with validation-based checkpoint selection, evaluate the test split, export SavedModels
to <model_dir>/export), "evaluate" (reload <model_dir>/export and evaluate a split), "class_conversion" (the
Table 4 experiment). With several --seeds, seed s runs in <model_dir>/seed_<s> (training seed and group split
seed both s) and <model_dir>/summary.json holds mean ± std over seeds. The strategy is MirroredStrategy over
the visible GPUs when there are two or more, TensorFlow's default strategy on one device (one GPU or the CPU),
or MultiWorkerMirroredStrategy under a multi-worker TF_CONFIG. Training
runs through the engine (progress line on stderr, the JSON summary on stdout); an interrupted run restarted
with the same --model_dir resumes from its last checkpoint. The runs themselves are `pairwise.margin.runs`.
"""

import json

from absl import flags

from pairwise.margin import aggregate, configs, margin_model, runs
from rank4class_cli import cli, pairwise_flags, terminal
from rank4class_data import file_formats
from rank4class_data.rows import bad_rows
from rank4class_data.validation import refuse_output_over_inputs
from rank4class_engine import distribute

PROGRAM = "pairwise-train"
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.
define = cli.FlagDefiner(FLAGS)

define.string("mode", "train", "One of: " + ", ".join(runs.MODES) + ".")
define.string("model_dir", None, "Output folder (config.json, metrics.json, export/, and the training "
              "engine's backup/, best/, logs/, progress.jsonl).")
define.string("dataset", "drug_reviews", "Data set: " + ", ".join(configs.DATASETS) + "; with --train_files "
              "and no --dataset: elwc or rows, as --input_format tells.")
define.string("train_files", "", "elwc: ELWC TFRecord files of text ranking lists; rows: CSV/TSV/JSONL/.tab "
              "files with a group id, a text and a label per row (comma-separated globs).")
define.enum("input_format", configs.AUTO, configs.INPUT_FORMATS, "Format of --train_files. "
            + file_formats.help_text(configs.INPUT_FORMATS, {
                configs.AUTO: "rows for row-file extensions, else elwc",
                configs.ELWC: "ELWC TFRecords of text ranking lists",
                configs.ROWS: "row files of any row format, each told by its extension"}))
define.string("group_column", "", "rows: the group id column (a query, a user, a condition).")
define.string("text_column", "text", "rows: the item text column.")
define.string("label_column", "label", "rows: the label column (a number >= 0, higher = better).")
define.list("label_order", [],
            "rows: ordinal label names from worst to best (e.g. negative,neutral,positive).")
define.bad_row_flags(rejects_default="<model_dir>/rejects.jsonl")
define.string("label_key", "label", "elwc: example feature holding the relevance (TF-Ranking's ANTIQUE "
              "example: relevance).")
define.string("text_key", "document_tokens", "elwc: example feature holding the item text.")
define.string("query_key", "query_tokens", "elwc: context feature holding the query (if present, an item "
              "reads '<query> | <text>').")
define.string("pivot", "condition", "Drug reviews' contextual pivot: " + ", ".join(configs.DRUG_REVIEW_PIVOTS)
              + ".")
define.string("label", "rating",
              "Drug reviews' ranking label: " + ", ".join(configs.DRUG_REVIEW_LABELS) + ".")
define.float("validation_fraction", 0.1, "Rows (whole groups) held out for validation.")
define.float("test_fraction", 0.2, "Drug reviews: rows (whole groups) held out for test.")
define.integer("num_queries", 60, "20 Newsgroups: queries from the train file.")
define.integer("num_test_queries", 30, "20 Newsgroups: queries from the test file.")
define.string("encoder", "minilm", "Text encoder: minilm (all-MiniLM-L6-v2 converted once), random_bert "
              "(tiny random BERT with MiniLM's vocabulary, for smoke runs), hub (--preprocess_handle and "
              "--encoder_handle) or hashed_bow (hashed bag of words).")
define.string("preprocess_handle", None, "TF Hub BERT preprocess handle or SavedModel dir (--encoder=hub).")
define.string("encoder_handle", None, "TF Hub BERT encoder handle or SavedModel dir (--encoder=hub).")
define.bool("trainable_encoder", False, "Fine-tune the encoder end to end.")
define.bool("frozen_embeddings", False, "Embed each text once with the frozen encoder (cached) and train "
            "only the head on the embeddings.")
define.string("pooling", "mean", "Encoder pooling: mean or cls.")
define.integer("max_seq_length", 128, "Tokens per item (paper: 128).")
define.string("objective", "margin", "Objective: " + ", ".join(configs.OBJECTIVES) + ".")
define.string("head", "mlp", "Pair head: " + ", ".join(margin_model.HEADS) + " (linear: the paper's 'w/o "
              "MLP' ablation).")
define.bool("separate_encoders", False, "Separate left/right encoders (the paper's ablation).")
define.float("margin", 2.0, "Margin γ of the ranking loss.")
define.float("dropout", 0.2, "Head dropout.")
define.integer("num_classes", 0, "> 0: double-headed model that also predicts the absolute class.")
define.float("class_loss_weight", 1.0, "Weight of the class cross-entropy (double-headed).")
define.string("batching", "groups", "Training batches: groups (one encoding per item, all pairs in-graph) or "
              "pairs (per-pair encoding, as the reference).")
define.integer("list_size", 20, "Items per training list (groups are chunked).")
define.integer("lists_per_batch", 4, "Lists per global batch (--batching=groups).")
define.integer("pair_batch_size", 32, "Pairs per global batch (--batching=pairs).")
define.float("min_label_gap", 0.0, "Minimum label difference of a training pair.")
define.integer("train_steps", 1000, "Optimisation steps.")
define.float("learning_rate", 4e-5, "AdamW learning rate (paper: 4e-5 for BERT).")
define.float("weight_decay", 0.01, "AdamW decoupled weight decay.")
define.float("global_clipnorm", 1.0, "Global gradient-norm clip (0: none).")
define.integer("eval_every", 0, "Steps between validation runs (0: at the end only); train_steps is rounded "
               "up to a multiple of it.")
define.integer("log_every", 50, "Unused (TensorBoard scalars come at each validation); kept for older "
               "command lines.")
define.integer("checkpoint_every", 500, "Steps between resumable checkpoints (an interrupted run resumes "
               "from the last one).")
define.preemption_flag()
define.list("seeds", ["0"], "Seeds; each runs in <model_dir>/seed_<s> when several are given.")
define.string("aggregation", "mean_preference",
              "Pair scores -> list order: " + ", ".join(aggregate.AGGREGATIONS) + ".")
define.bool("symmetrize", True, "Average f(a, b) and -f(b, a) when ranking lists.")
define.integer("topn", 10, "Cutoff k of NDCG@k, MAP@k, MRR@k.")
define.float("relevance_threshold", 2.0, "Labels >= this are relevant for MAP and MRR.")
define.string("gain", "exponential", "NDCG gain: exponential or linear (use linear for usefulCount).")
define.string("split", "test", "--mode=evaluate: split to evaluate.")
define.integer("test_per_class", 0, "--mode=class_conversion: balanced test items per class (0: smallest "
               "class count).")
define.list("proportions", None, "--mode=class_conversion: class proportions for the conversion (default: "
            "equal segments).")
define.string("strategy", "auto", "tf.distribute strategy: " + ", ".join(distribute.STRATEGIES) + ".")
define.bool("export", True, "Export SavedModels to <model_dir>/export.")
define.bool("overwrite_model_dir", False, "When --model_dir (or a seed's folder) holds a run of other "
            "settings, remove its run files and start afresh (default: refuse, naming the changed settings; "
            "the same settings resume).")

cli.register_choices(FLAGS, {
    "mode": runs.MODES, "dataset": configs.DATASETS, "pivot": configs.DRUG_REVIEW_PIVOTS,
    "label": configs.DRUG_REVIEW_LABELS, "encoder": runs.ENCODERS, "objective": configs.OBJECTIVES,
    "head": margin_model.HEADS, "batching": configs.BATCHINGS, "aggregation": aggregate.AGGREGATIONS,
    "pooling": ("mean", "cls"), "gain": ("exponential", "linear"), "split": configs.SPLIT_NAMES,
    "strategy": distribute.STRATEGIES,
})
flags.mark_flag_as_required("model_dir", flag_values=FLAGS)
define.alias("data_files", "train_files")
# The config fields whose flag has another name, as library messages name them (`cli.flag_words` writes them
# as these flags); every other field is spelled as its flag (`data.group_column` is --group_column) or has
# none. `pairwise_flags.config_from_flags` reads each of these flags into its field.
define.field_flags({
    "data_files": "train_files", "rejects_path": "rejects", "trainable": "trainable_encoder",
    "precompute": "frozen_embeddings", "overwrite": "overwrite_model_dir", "train.model_dir": "model_dir",
})


dataset, encoder_config = pairwise_flags.dataset, pairwise_flags.encoder_config
config_from_flags = pairwise_flags.config_from_flags
conversion_from_flags = pairwise_flags.conversion_from_flags
seed_run_from_flags = pairwise_flags.seed_run_from_flags


def check_flags(f: flags.FlagValues) -> None:
  """ValueError naming the flag, for values the configs reject."""
  config_from_flags(f)
  conversion_from_flags(f)


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, check_flags)


def check_outputs(config: runs.RunConfig) -> None:
  """ValueError when --model_dir is a data file or folder (or an encoder handle's), or the rejects file would
  overwrite a data file."""
  data, encoder = config.pairwise.data, config.pairwise.encoder
  skipping = data.dataset == "rows" and data.bad_rows == bad_rows.SKIP
  refuse_output_over_inputs(
      {"--rejects": data.rejects_path if skipping else None},
      {"--train_files": data.data_files or None,
       "--preprocess_handle": [encoder.preprocess_handle] if encoder.preprocess_handle else None,
       "--encoder_handle": [encoder.encoder_handle] if encoder.encoder_handle else None},
      folders={"--model_dir": config.pairwise.train.model_dir})


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  config = config_from_flags(FLAGS)
  check_outputs(config)
  summary = runs.run_config(config, FLAGS.encoder, seed_run_from_flags(FLAGS))
  terminal.out(json.dumps(summary, indent=2, sort_keys=True, default=str))


def run() -> None:
  """Console script `pairwise-train`."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
