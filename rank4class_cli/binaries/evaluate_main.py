r"""Evaluates an exported Rank4Class model on TFRecord files, row files or image folders in batches; writes a
JSON report and a per-class CSV, prints a table.

Sample command lines:

  rank4class-evaluate --model_dir=/tmp/r8_lc_approx --input='/data/test-*.tfrecord'

  rank4class-evaluate --model_dir=/tmp/run/export --input=/data/lists.tfrecord --input_format=elwc \
      --report_path=/tmp/lists_report.json

  rank4class-evaluate --model_dir=/tmp/reviews --input=test.csv --text_column=review --label_column=rating

  # A zero-shot export on rows labelled with the classes of a new class-texts file.
  rank4class-evaluate --model_dir=/tmp/zero_shot --class_texts=new_classes.csv --input=new_test.csv

--model_dir is a training model_dir (its export/ is used) or a SavedModel folder of any kind
(rank4class-export's two-stage and zero-shot exports are ranked exactly over their classes; a class a
two-stage export's first stage misses counts as ranked below its candidates). "example" records are
classification tf.Examples (the converter's output: label + text / features / image); "elwc" records are
ranking lists: the instance in the context, one example per candidate class with `class_id` and a graded
`label`, evaluated with ranking metrics over the given lists. From 2,048 classes on, "example" records are
ranked exactly over all classes in chunks (--chunk_size): memory stays bounded at 100,000 classes.
"""

from absl import flags

from rank4class.evaluation import evaluate as evaluate_lib
from rank4class.inference import served
from rank4class_cli import cli, terminal
from rank4class_data import file_formats
from rank4class_data.conversion import convert, row_cache
from rank4class_data.records import tfrecords
from rank4class_data.validation import refuse_output_over_inputs

PROGRAM = "rank4class-evaluate"
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.
define = cli.FlagDefiner(FLAGS)

define.string("model_dir", None, "Training model_dir (uses <model_dir>/export) or an exported SavedModel.")
define.string("input", None, "TFRecord file pattern(s), comma-separated globs; or row files (CSV, TSV, "
              "JSONL, .tab) or an image folder of class-named subfolders, converted as "
              "training converts them.")
AUTO = "auto"
define.string("input_format", AUTO, file_formats.help_text(
    (AUTO, *evaluate_lib.INPUT_FORMATS),
    {AUTO: "rows for row files and image folders, else example",
     evaluate_lib.ROWS: "row files (CSV, TSV, JSONL, .tab) or an image folder, converted as training "
                        "converts them"}))
define.row_conversion_flags()
define.string("label_vocab", None, "The converter's vocabulary JSON of the records (default: beside the "
              "first file, if any).")
define.string("feature_key", None, "Feature holding the model input (default: text, features or image by "
              "the model's input, or the vocabulary's key).")
define.string("label_key", "label", "Label feature (class id; relevance for elwc).")
define.string("class_id_key", evaluate_lib.ELWC_CLASS_ID_KEY, "elwc: per-candidate class id feature.")
define.integer("batch_size", 1024, "Instances (or lists) per batch; with cached/frozen embeddings "
               "16384 is fastest (docs/BENCHMARKS.md), for raw text or images keep it small.")
define.list("metric_ks", ["1", "5"], "Cutoffs K of top-K error and NDCG@K.")
define.string("report_path", None, "JSON report path (default: <model_dir>/eval_report.json).")
define.integer("chunk_size", None, "example records: rank all classes this many at a time (exact, bounded "
               "memory, no confusion matrix); default: 4096 from 2,048 classes on; 0: never.")
define.string("embedding_cache_dir", None, "Frozen-text models on text records: embedding cache folder "
              "(default: the shared one).")
define.string("class_texts", None, "Zero-shot exports: CSV/TSV/JSONL with columns class,text; its classes "
              "are ranked instead of the training ones, and the records' labels are its class names.")

cli.register_choices(FLAGS, {"input_format": (AUTO, *evaluate_lib.INPUT_FORMATS)})
flags.mark_flag_as_required("model_dir", flag_values=FLAGS)
flags.mark_flag_as_required("input", flag_values=FLAGS)
define.alias("data_files", "input")
# The config fields whose flag has another name, as library messages name them (`cli.flag_words` writes them
# as these flags); every other field is spelled as its flag. `config_from_flags` below reads these flags.
define.field_flags({"model_path": "model_dir", "data_files": "input"})


def config_from_flags(f: flags.FlagValues) -> evaluate_lib.EvaluateConfig:
  """Builds the EvaluateConfig from parsed flags.

  Raises:
    ValueError: naming the flag, for values the config rejects.
  """
  try:
    ks = tuple(int(k) for k in f.metric_ks)
  except ValueError:
    raise ValueError(f"--metric_ks={','.join(f.metric_ks)} must be a comma-separated list of "
                     "integers") from None
  if f.batch_size < 1:
    raise ValueError(f"--batch_size={f.batch_size} must be positive")
  try:
    served.resolve_export_dir(f.model_dir)
  except FileNotFoundError as e:
    raise FileNotFoundError(f"--model_dir: {e}") from None
  input_format = f.input_format
  if input_format == AUTO:
    input_format = evaluate_lib.ROWS if row_cache.is_row_pattern(f.input) else evaluate_lib.EXAMPLE
  return evaluate_lib.EvaluateConfig(
      model_path=f.model_dir, data_files=f.input, input_format=input_format, label_vocab=f.label_vocab,
      feature_key=f.feature_key, label_key=f.label_key, class_id_key=f.class_id_key, batch_size=f.batch_size,
      metric_ks=ks, report_path=f.report_path, chunk_size=f.chunk_size,
      embedding_cache_dir=f.embedding_cache_dir, rows=cli.row_conversion(f), class_texts=f.class_texts)


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, config_from_flags)


def check_outputs(config: evaluate_lib.EvaluateConfig) -> None:
  """ValueError when the report would overwrite a record file, their vocabulary or a file of the model."""
  export_dir = served.resolve_export_dir(config.model_path)
  report_path = evaluate_lib.resolved_report_path(config, export_dir)
  # Row files or an image folder (a folder stands for its files).
  if config.input_format == evaluate_lib.ROWS:
    inputs = {"--input": config.data_files}
  else:
    files = tfrecords.InputConfig(config.data_files).files()
    inputs = {"--input": files, "--label_vocab": [config.label_vocab or convert.default_vocab_path(files[0])]}
  refuse_output_over_inputs(
      {"--report_path": [report_path, evaluate_lib.per_class_csv_path(report_path)] if report_path else None},
      {**inputs, "--model_dir": [export_dir],
       "--class_texts": [config.class_texts] if config.class_texts else None})


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  config = config_from_flags(FLAGS)
  check_outputs(config)
  report = evaluate_lib.evaluate(config)
  terminal.out(evaluate_lib.format_table(report))
  if report.get("report_path"):
    terminal.out(f"Report written to {report['report_path']}")


def run() -> None:
  """Console script `rank4class-evaluate`."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
