r"""Trains and evaluates the pairwise margin-ranking Transformer (Rank over Class) on real data.

Sample command lines:

  # Drug reviews ranked by rating inside each condition; frozen MiniLM embeddings, 3 seeds.
  pairwise-train --mode=train --dataset=drug_reviews --pivot=condition --label=rating --encoder=minilm \
      --frozen_embeddings --train_steps=1500 --learning_rate=1e-3 --seeds=1,2,3 --model_dir=/tmp/drug_condition

  # A short end-to-end fine-tuning run (MiniLM trained), group-batched.
  pairwise-train --mode=train --dataset=newsgroups_queries --encoder=minilm --trainable_encoder \
      --max_seq_length=64 --train_steps=60 --lists_per_batch=1 --model_dir=/tmp/ng_finetune

  # Re-evaluate an exported model on the test split rebuilt from its config.json.
  pairwise-train --mode=evaluate --model_dir=/tmp/drug_condition/seed_1

  # Table 4: skewed train, balanced test, converted ranking accuracy vs a classifier on the same encoder.
  pairwise-train --mode=class_conversion --pivot=none --encoder=minilm --frozen_embeddings --seeds=1,2,3 \
      --train_steps=1500 --learning_rate=1e-3 --model_dir=/tmp/table4

Modes: "train" (train with validation-based checkpoint selection, evaluate the test split, export SavedModels
to <model_dir>/export), "evaluate" (reload <model_dir>/export and evaluate a split), "class_conversion" (the
Table 4 experiment). With several --seeds, seed s runs in <model_dir>/seed_<s> (training seed and group split
seed both s) and <model_dir>/summary.json holds mean ± std over seeds. The strategy is MirroredStrategy over
the visible GPUs (one device on CPU) or MultiWorkerMirroredStrategy under a multi-worker TF_CONFIG. Training
runs through the engine (progress line on stderr, the JSON summary on stdout); an interrupted run restarted
with the same --model_dir resumes from its last checkpoint. The runs themselves are `pairwise.runs`.
"""

import json
import sys

from absl import flags

from pairwise import aggregate, margin_model, runs
from pairwise import pairwise_train as train_lib
from rank4class_engine import cli, distribute

PROGRAM = "pairwise-train"
MODES = runs.MODES
ENCODERS = ("minilm", "random_bert", "hub", "hashed_bow")
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.

flags.DEFINE_string("mode", "train", "One of: " + ", ".join(MODES) + ".", flag_values=FLAGS)
flags.DEFINE_string("model_dir", None, "Output folder (config.json, metrics.json, export/, and the training "
                    "engine's backup/, best/, logs/, progress.jsonl).", flag_values=FLAGS)
flags.DEFINE_string("dataset", "drug_reviews", "Data set: " + ", ".join(train_lib.DATASETS) + ".",
                    flag_values=FLAGS)
flags.DEFINE_string("data_files", "", "elwc: ELWC TFRecord files of text ranking lists (comma-separated globs).",
                    flag_values=FLAGS)
flags.DEFINE_string("label_key", "label", "elwc: example feature holding the relevance (TF-Ranking's ANTIQUE "
                    "example: relevance).", flag_values=FLAGS)
flags.DEFINE_string("text_key", "document_tokens", "elwc: example feature holding the item text.",
                    flag_values=FLAGS)
flags.DEFINE_string("query_key", "query_tokens", "elwc: context feature holding the query (if present, an item "
                    "reads '<query> | <text>').", flag_values=FLAGS)
flags.DEFINE_string("pivot", "condition", "Drug reviews' contextual pivot: "
                    + ", ".join(train_lib.DRUG_REVIEW_PIVOTS) + ".", flag_values=FLAGS)
flags.DEFINE_string("label", "rating", "Drug reviews' ranking label: " + ", ".join(train_lib.DRUG_REVIEW_LABELS)
                    + ".", flag_values=FLAGS)
flags.DEFINE_float("validation_fraction", 0.1, "Rows (whole groups) held out for validation.", flag_values=FLAGS)
flags.DEFINE_float("test_fraction", 0.2, "Drug reviews: rows (whole groups) held out for test.",
                   flag_values=FLAGS)
flags.DEFINE_integer("num_queries", 60, "20 Newsgroups: queries from the train file.", flag_values=FLAGS)
flags.DEFINE_integer("num_test_queries", 30, "20 Newsgroups: queries from the test file.", flag_values=FLAGS)
flags.DEFINE_string("encoder", "minilm", "Text encoder: minilm (all-MiniLM-L6-v2 converted once), random_bert "
                    "(tiny random BERT with MiniLM's vocabulary, for smoke runs), hub (--preprocess_handle and "
                    "--encoder_handle) or hashed_bow (hashed bag of words).", flag_values=FLAGS)
flags.DEFINE_string("preprocess_handle", None, "TF Hub BERT preprocess handle or SavedModel dir (--encoder=hub).",
                    flag_values=FLAGS)
flags.DEFINE_string("encoder_handle", None, "TF Hub BERT encoder handle or SavedModel dir (--encoder=hub).",
                    flag_values=FLAGS)
flags.DEFINE_bool("trainable_encoder", False, "Fine-tune the encoder end to end.", flag_values=FLAGS)
flags.DEFINE_bool("frozen_embeddings", False, "Embed each text once with the frozen encoder (cached) and train "
                  "only the head on the embeddings.", flag_values=FLAGS)
flags.DEFINE_string("pooling", "mean", "Encoder pooling: mean or cls.", flag_values=FLAGS)
flags.DEFINE_integer("max_seq_length", 128, "Tokens per item (paper: 128).", flag_values=FLAGS)
flags.DEFINE_string("objective", "margin", "Objective: " + ", ".join(train_lib.OBJECTIVES) + ".",
                    flag_values=FLAGS)
flags.DEFINE_string("head", "mlp", "Pair head: " + ", ".join(margin_model.HEADS) + " (linear: the paper's "
                    "'w/o MLP' ablation).", flag_values=FLAGS)
flags.DEFINE_bool("separate_encoders", False, "Separate left/right encoders (the paper's ablation).",
                  flag_values=FLAGS)
flags.DEFINE_float("margin", 2.0, "Margin γ of the ranking loss.", flag_values=FLAGS)
flags.DEFINE_float("dropout", 0.2, "Head dropout.", flag_values=FLAGS)
flags.DEFINE_integer("num_classes", 0, "> 0: double-headed model that also predicts the absolute class.",
                     flag_values=FLAGS)
flags.DEFINE_float("class_loss_weight", 1.0, "Weight of the class cross-entropy (double-headed).",
                   flag_values=FLAGS)
flags.DEFINE_string("batching", "groups", "Training batches: groups (one encoding per item, all pairs in-graph) "
                    "or pairs (per-pair encoding, as the reference).", flag_values=FLAGS)
flags.DEFINE_integer("list_size", 20, "Items per training list (groups are chunked).", flag_values=FLAGS)
flags.DEFINE_integer("lists_per_batch", 4, "Lists per global batch (--batching=groups).", flag_values=FLAGS)
flags.DEFINE_integer("pair_batch_size", 32, "Pairs per global batch (--batching=pairs).", flag_values=FLAGS)
flags.DEFINE_float("min_label_gap", 0.0, "Minimum label difference of a training pair.", flag_values=FLAGS)
flags.DEFINE_integer("train_steps", 1000, "Optimisation steps.", flag_values=FLAGS)
flags.DEFINE_float("learning_rate", 4e-5, "AdamW learning rate (paper: 4e-5 for BERT).", flag_values=FLAGS)
flags.DEFINE_float("weight_decay", 0.01, "AdamW decoupled weight decay.", flag_values=FLAGS)
flags.DEFINE_float("global_clipnorm", 1.0, "Global gradient-norm clip (0: none).", flag_values=FLAGS)
flags.DEFINE_integer("eval_every", 0, "Steps between validation runs (0: at the end only); train_steps is "
                     "rounded up to a multiple of it.", flag_values=FLAGS)
flags.DEFINE_integer("log_every", 50, "Unused (TensorBoard scalars come at each validation); kept for older "
                     "command lines.", flag_values=FLAGS)
flags.DEFINE_integer("checkpoint_every", 500, "Steps between resumable checkpoints (an interrupted run resumes "
                     "from the last one).", flag_values=FLAGS)
flags.DEFINE_list("seeds", ["0"], "Seeds; each runs in <model_dir>/seed_<s> when several are given.",
                  flag_values=FLAGS)
flags.DEFINE_string("aggregation", "mean_preference", "Pair scores -> list order: "
                    + ", ".join(aggregate.AGGREGATIONS) + ".", flag_values=FLAGS)
flags.DEFINE_bool("symmetrize", True, "Average f(a, b) and -f(b, a) when ranking lists.", flag_values=FLAGS)
flags.DEFINE_integer("topn", 10, "Cutoff k of NDCG@k, MAP@k, MRR@k.", flag_values=FLAGS)
flags.DEFINE_float("relevance_threshold", 2.0, "Labels >= this are relevant for MAP and MRR.", flag_values=FLAGS)
flags.DEFINE_string("gain", "exponential", "NDCG gain: exponential or linear (use linear for usefulCount).",
                    flag_values=FLAGS)
flags.DEFINE_string("split", "test", "--mode=evaluate: split to evaluate.", flag_values=FLAGS)
flags.DEFINE_integer("test_per_class", 0, "--mode=class_conversion: balanced test items per class (0: smallest "
                     "class count).", flag_values=FLAGS)
flags.DEFINE_list("proportions", None, "--mode=class_conversion: class proportions for the conversion "
                  "(default: equal segments).", flag_values=FLAGS)
flags.DEFINE_string("strategy", "auto", "tf.distribute strategy: " + ", ".join(distribute.STRATEGIES) + ".",
                    flag_values=FLAGS)
flags.DEFINE_bool("export", True, "Export SavedModels to <model_dir>/export.", flag_values=FLAGS)

cli.register_choices(FLAGS, {
    "mode": MODES, "dataset": train_lib.DATASETS, "pivot": train_lib.DRUG_REVIEW_PIVOTS,
    "label": train_lib.DRUG_REVIEW_LABELS, "encoder": ENCODERS, "objective": train_lib.OBJECTIVES,
    "head": margin_model.HEADS, "batching": train_lib.BATCHINGS, "aggregation": aggregate.AGGREGATIONS,
    "pooling": ("mean", "cls"), "gain": ("exponential", "linear"), "split": train_lib.SPLIT_NAMES,
    "strategy": distribute.STRATEGIES,
})
flags.mark_flag_as_required("model_dir", flag_values=FLAGS)


def _encoder_config(f: flags.FlagValues) -> train_lib.EncoderConfig:
  if f.encoder == "hashed_bow":
    if f.frozen_embeddings:
      raise ValueError("--frozen_embeddings needs a BERT encoder (minilm, random_bert, hub), not hashed_bow")
    return train_lib.EncoderConfig(kind="hashed_bow")
  if f.encoder == "hub":
    if not f.preprocess_handle or not f.encoder_handle:
      raise ValueError("--encoder=hub needs --preprocess_handle and --encoder_handle")
    preprocess, encoder = f.preprocess_handle, f.encoder_handle
  else:
    preprocess, encoder = "", ""  # Resolved in `resolve_handles`, which converts or exports models.
  if f.frozen_embeddings and f.trainable_encoder:
    raise ValueError("--frozen_embeddings and --trainable_encoder exclude each other")
  return train_lib.EncoderConfig(kind="text_encoder", preprocess_handle=preprocess, encoder_handle=encoder,
                                 trainable=f.trainable_encoder, pooling=f.pooling,
                                 max_seq_length=f.max_seq_length, precompute=f.frozen_embeddings)


def config_from_flags(f: flags.FlagValues) -> runs.RunConfig:
  """Builds the RunConfig from parsed flags.

  Raises:
    ValueError: naming the flag, for values the configs reject.
  """
  try:
    seeds = tuple(int(s) for s in f.seeds)
  except ValueError:
    raise ValueError(f"--seeds={','.join(f.seeds)} must be a comma-separated list of integers") from None
  if not seeds:
    raise ValueError("--seeds must name at least one seed")
  try:
    proportions = None if f.proportions is None else [float(p) for p in f.proportions]
  except ValueError:
    raise ValueError(f"--proportions={','.join(f.proportions)} must be comma-separated numbers") from None
  pairwise = train_lib.PairwiseConfig(
      data=train_lib.DataConfig(dataset=f.dataset, pivot=f.pivot, label=f.label,
                                validation_fraction=f.validation_fraction, test_fraction=f.test_fraction,
                                split_seed=seeds[0], num_queries=f.num_queries,
                                num_test_queries=f.num_test_queries, data_files=f.data_files,
                                label_key=f.label_key, text_key=f.text_key, query_key=f.query_key),
      encoder=_encoder_config(f),
      model=train_lib.ModelConfig(objective=f.objective, head=f.head, separate_encoders=f.separate_encoders,
                                  margin=f.margin, dropout=f.dropout, num_classes=f.num_classes,
                                  class_loss_weight=f.class_loss_weight),
      train=train_lib.TrainConfig(model_dir=f.model_dir, batching=f.batching, list_size=f.list_size,
                                  lists_per_batch=f.lists_per_batch, pair_batch_size=f.pair_batch_size,
                                  min_label_gap=f.min_label_gap, train_steps=f.train_steps,
                                  learning_rate=f.learning_rate, weight_decay=f.weight_decay,
                                  global_clipnorm=f.global_clipnorm, log_every=f.log_every,
                                  eval_every=f.eval_every, checkpoint_every=f.checkpoint_every, seed=seeds[0],
                                  export=f.export),
      eval=train_lib.EvalConfig(aggregation=f.aggregation, symmetrize=f.symmetrize, topn=f.topn,
                                relevance_threshold=f.relevance_threshold, gain=f.gain))
  conversion = train_lib.ClassConversionConfig(test_per_class=f.test_per_class, proportions=proportions)
  return runs.RunConfig(mode=f.mode, seeds=seeds, strategy=f.strategy, split=f.split, pairwise=pairwise,
                        conversion=conversion)


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, config_from_flags)


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  summary = runs.run_config(config_from_flags(FLAGS), FLAGS.encoder)
  json.dump(summary, sys.stdout, indent=2, sort_keys=True, default=str)
  sys.stdout.write("\n")


def run() -> None:
  """Console script `pairwise-train`."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
