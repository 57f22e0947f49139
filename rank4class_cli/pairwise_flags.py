"""The flags of `pairwise-train` read back into its configs: `config_from_flags` (a `runs.RunConfig`), the
class-conversion experiment's settings (`conversion_from_flags`) and the run of one seed of --mode
(`seed_run_from_flags`)."""

import dataclasses
import os

from absl import flags

from pairwise.margin import configs, runs
from pairwise.studies import class_conversion
from rank4class_cli import cli


def dataset(f: flags.FlagValues) -> str:
  """--dataset; with --train_files and no --dataset, the files' (`configs.files_dataset`: elwc or rows)."""
  if f.train_files and not f["dataset"].present:
    return configs.files_dataset(f.train_files, f.input_format)
  return f.dataset


def encoder_config(f: flags.FlagValues) -> configs.EncoderConfig:
  """The EncoderConfig of --encoder and its flags (ValueError naming the flags that exclude each other)."""
  if f.encoder == "hashed_bow":
    if f.frozen_embeddings:
      raise ValueError("--frozen_embeddings needs a BERT encoder (minilm, random_bert, hub), not hashed_bow")
    return configs.EncoderConfig(kind="hashed_bow")
  if f.encoder == "hub":
    if not f.preprocess_handle or not f.encoder_handle:
      raise ValueError("--encoder=hub needs --preprocess_handle and --encoder_handle")
    preprocess, encoder = f.preprocess_handle, f.encoder_handle
  else:
    preprocess, encoder = "", ""  # Resolved in `runs.resolve_handles`, which converts or exports models.
  if f.frozen_embeddings and f.trainable_encoder:
    raise ValueError("--frozen_embeddings and --trainable_encoder exclude each other")
  return configs.EncoderConfig(kind="text_encoder", preprocess_handle=preprocess, encoder_handle=encoder,
                               trainable=f.trainable_encoder, pooling=f.pooling,
                               max_seq_length=f.max_seq_length, precompute=f.frozen_embeddings)


def config_from_flags(f: flags.FlagValues) -> runs.RunConfig:
  """The RunConfig of parsed flags.

  Raises:
    ValueError: naming the flag, for values the configs reject.
  """
  seeds = cli.int_tuple("seeds", f.seeds)
  if not seeds:
    raise ValueError("--seeds must name at least one seed")
  optimizer = dataclasses.replace(configs.default_optimizer(), learning_rate=f.learning_rate,
                                  weight_decay=f.weight_decay, global_clipnorm=f.global_clipnorm or None)
  pairwise = configs.PairwiseConfig(
      data=configs.ItemDataConfig(
          dataset=dataset(f), pivot=f.pivot, label=f.label, validation_fraction=f.validation_fraction,
          test_fraction=f.test_fraction, split_seed=seeds[0], num_queries=f.num_queries,
          num_test_queries=f.num_test_queries, data_files=f.train_files, input_format=f.input_format,
          label_key=f.label_key,
          text_key=f.text_key, query_key=f.query_key, group_column=f.group_column, text_column=f.text_column,
          label_column=f.label_column, label_order=tuple(f.label_order), bad_rows=f.bad_rows,
          max_bad_rows=f.max_bad_rows, rejects_path=f.rejects or os.path.join(f.model_dir, "rejects.jsonl")),
      encoder=encoder_config(f),
      model=configs.ModelConfig(
          objective=f.objective, head=f.head, separate_encoders=f.separate_encoders, margin=f.margin,
          dropout=f.dropout, num_classes=f.num_classes, class_loss_weight=f.class_loss_weight),
      train=configs.PairwiseTrainConfig(
          model_dir=f.model_dir, batching=f.batching, list_size=f.list_size,
          lists_per_batch=f.lists_per_batch,
          pair_batch_size=f.pair_batch_size, min_label_gap=f.min_label_gap, train_steps=f.train_steps,
          optimizer=optimizer, log_every=f.log_every, eval_every=f.eval_every,
          checkpoint_every=f.checkpoint_every, seed=seeds[0], export=f.export,
          preemption_grace_seconds=f.preemption_grace_seconds),
      eval=configs.PairwiseEvaluationConfig(aggregation=f.aggregation, symmetrize=f.symmetrize, topn=f.topn,
                                            relevance_threshold=f.relevance_threshold, gain=f.gain))
  return runs.RunConfig(mode=f.mode, seeds=seeds, strategy=f.strategy, split=f.split, pairwise=pairwise,
                        overwrite=f.overwrite_model_dir)


def conversion_from_flags(f: flags.FlagValues) -> class_conversion.ClassConversionConfig:
  """--mode=class_conversion's settings (ValueError naming --proportions when it holds a non-number)."""
  proportions = f.proportions
  try:
    proportions = None if proportions is None else [float(p) for p in proportions]
  except ValueError:
    raise ValueError(f"--proportions={','.join(proportions)} must be comma-separated numbers") from None
  return class_conversion.ClassConversionConfig(test_per_class=f.test_per_class, proportions=proportions)


def seed_run_from_flags(f: flags.FlagValues) -> runs.SeedRun:
  """The run of one seed of --mode: training (`runs.train_seed`), or the Table 4 experiment. The binary
  composes them: `pairwise.margin.runs` (model layer) does not import the experiment."""
  if f.mode != "class_conversion":
    return runs.train_seed
  conversion = conversion_from_flags(f)

  def run_class_conversion(config: configs.PairwiseConfig, strategy, *, overwrite: bool = False) -> dict:
    return class_conversion.run_class_conversion(config, conversion, strategy, overwrite=overwrite)

  return run_class_conversion
