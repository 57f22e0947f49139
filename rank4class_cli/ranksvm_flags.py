"""The flags of `pairwise-ranksvm` read back into its config: `config_from_flags` (a `RankSVMMainConfig`),
the data format of --input_format and the deprecated --rows_format (`data_format`, `deprecation_lines`), and
--multi_hot_fields' items (`parse_multi_hot`)."""

import os

from absl import flags

from pairwise.ranksvm import features as features_lib
from pairwise.ranksvm import ranksvm
from pairwise.ranksvm import ranksvm_config as config_lib
from rank4class_data.datasets.newsgroups import NewsgroupsQrelsConfig
from rank4class_data.ranking import ranking_corpus
from rank4class_data.rows import bad_rows, row_tables
from rank4class_engine.statistics import ranking_metrics

ROW_INPUTS = (config_lib.ROWS, *config_lib.ROW_FILE_FORMATS)


def data_format(f: flags.FlagValues) -> tuple[str, str]:
  """(`RankingDataConfig.format`, `.rows_format`) of --input_format and the deprecated --rows_format.

  --input_format=csv with a folder as --input is the corpus (its name before 0.9.0), with a file a CSV row
  file. --rows_format=X (deprecated) means row files of format X, with --input_format rows or a row format or
  not given; beside another format it is ignored, as before 0.9.0.

  Raises:
    ValueError: when --input_format and --rows_format name two row formats.
  """
  name = f.input_format
  if name == "csv" and f.input and os.path.isdir(f.input):
    return config_lib.CORPUS, row_tables.AUTO
  if f["rows_format"].present and (name in ROW_INPUTS or not f["input_format"].present):
    if name in config_lib.ROW_FILE_FORMATS and f.rows_format not in (row_tables.AUTO, name):
      raise ValueError(f"--input_format={name} and --rows_format={f.rows_format} name two row formats; give "
                       "--input_format only.")
    if f.rows_format != row_tables.AUTO:
      return config_lib.ROWS, f.rows_format
    return (name, row_tables.AUTO) if name in ROW_INPUTS else (config_lib.ROWS, row_tables.AUTO)
  return name, row_tables.AUTO


def deprecation_lines(f: flags.FlagValues) -> list[str]:
  """One warning line for each deprecated way of naming the data format that `f` uses."""
  lines = []
  if f.input_format == "csv" and f.input and os.path.isdir(f.input):
    lines.append("--input_format=csv for a folder is deprecated; use --input_format=corpus (the folder of "
                 "docs.csv, queries.csv and query_doc.csv).")
  if f["rows_format"].present:
    if f.rows_format in config_lib.ROW_FILE_FORMATS:
      new = f"--input_format={f.rows_format} (row files of that format)"
    else:
      new = ("--input_format=rows (each row file's format from its extension)"
             + (" or --input_format=libsvm (SVMlight qid files)" if f.rows_format == "libsvm" else ""))
    lines.append(f"--rows_format is deprecated; use {new}.")
  return lines


def parse_multi_hot(items: list[str]) -> dict[str, str]:
  """--multi_hot_fields' `field:separator` items (e.g. ["system:/"]) -> {field: separator}; ValueError naming
  a malformed item."""
  fields = {}
  for item in items:
    field, sep, separator = item.partition(":")
    if not sep or not field or not separator:
      raise ValueError(f"--multi_hot_fields item {item!r} must be field:separator, e.g. system:/.")
    fields[field] = separator
  return fields


def config_from_flags(f: flags.FlagValues) -> config_lib.RankSVMMainConfig:
  """The `RankSVMMainConfig` of parsed flags.

  Raises:
    ValueError: naming the flag, for values the configs reject.
  """
  has_fields = any([f.categorical_fields, f.multi_hot_fields, f.numeric_fields, f.text_fields])
  feature_config = features_lib.FeatureConfig(
      categorical_fields=list(f.categorical_fields), multi_hot_fields=parse_multi_hot(f.multi_hot_fields),
      numeric_fields=list(f.numeric_fields), missing_values=list(f.missing_values),
      text_fields=list(f.text_fields), similarities=list(f.similarities), feedback_k=f.feedback_k,
      neighbor_k=f.neighbor_k) if has_fields else None
  data_format_name, rows_format = data_format(f)
  folder = data_format_name == config_lib.CORPUS  # The corpus is a folder of three files; the others files.
  return config_lib.RankSVMMainConfig(
      mode=f.mode, model_dir=f.model_dir,
      data=config_lib.RankingDataConfig(
          format=data_format_name, data_dir=f.input if folder else None,
          data_path=None if folder else f.input,
          elwc_label_key=f.label_key, elwc_feature_names=list(f.feature_names),
          libsvm_duplicates=f.libsvm_duplicates, feature_columns=list(f.feature_columns),
          rows_format=rows_format, bad_rows=bad_rows.BadRowPolicy(f.bad_rows, f.max_bad_rows, f.rejects or (
              os.path.join(f.model_dir, "rejects.jsonl") if f.model_dir else None)),
          layout=ranking_corpus.CsvLayout(
              doc_id_column=f.doc_id_column, query_id_column=f.query_id_column,
              query_text_column=f.query_text_column, label_column=f.label_column, label_kind=f.label_kind),
          newsgroups=NewsgroupsQrelsConfig(
              num_queries=f.num_queries, list_size=f.ng_list_size, num_grade2=f.ng_num_grade2,
              num_grade1=f.ng_num_grade1, doc_num_words=f.ng_doc_num_words,
              heldout_fraction=f.ng_heldout_fraction, seed=f.ng_seed)),
      features=feature_config,
      encoder=config_lib.SimilarityEncoderConfig(name=f.text_encoder, max_seq_length=f.max_seq_length),
      svm=ranksvm.RankSVMConfig(
          c=f.c, loss=f.loss, tolerance=f.tolerance, max_iterations=f.max_iterations, batch_size=f.batch_size,
          num_epochs=f.num_epochs, learning_rate=f.learning_rate, max_pairs_per_query=f.max_pairs_per_query,
          skip_unpairable_queries=f.skip_unpairable_queries, seed=f.seed),
      evaluation=config_lib.RankSVMEvaluationConfig(
          protocol=f.eval_protocol, heldout_query_ids=list(f.heldout_query_ids),
          heldout_fraction=f.heldout_fraction, metrics=ranking_metrics.RankingMetricsConfig(
              topn=f.topn, relevance_threshold=f.relevance_threshold, tie_breaking=f.tie_breaking),
          gain=f.gain, baseline_features=list(f.baseline_features)),
      query=f.query, query_id=f.query_id, top_k=f.top_k, display_field=f.display_field)
