r"""Predicts with an exported Rank4Class model on new raw inputs; writes the top-K classes per instance.

Sample command lines:

  # Text lines (one instance a line) -> CSV: id, class_1, score_1, ..., class_5, score_5.
  rank4class-predict --model_dir=/tmp/run --input=new_texts.txt --output=/tmp/predictions.csv

  # Rows with an id and a true label -> JSONL with the label and whether it is in the top 3; bad rows skipped
  # and listed in /tmp/predictions.rejects.jsonl.
  rank4class-predict --model_dir=/tmp/run --input=tweets.tab --text_column=Content --label_column=Author \
      --output=/tmp/predictions.jsonl --top_k=3 --bad_rows=skip

  # The converter's TFRecord (its label comes along).
  rank4class-predict --model_dir=/tmp/run --input=/tmp/test.tfrecord --output=/tmp/test_predictions.csv

  # A zero-shot export (rank4class-export --kind=zero_shot) ranks the classes of a class-texts file, unseen
  # ones too.
  rank4class-predict --model_dir=/tmp/zero_shot --class_texts=new_classes.csv --input=new_texts.txt \
      --output=/tmp/zero_shot_predictions.csv

  # Probabilities and 90% class sets (sets that hold the true class for 90% of instances like the validation
  # split's): CSV columns probability_1..K and class_set (names joined by "|"); JSONL lists.
  rank4class-predict --model_dir=/tmp/run --input=new_texts.txt --output=/tmp/predictions.csv --coverage=0.9

--model_dir is a training model_dir (its export/ is used) or a SavedModel folder of any kind: a training run's
export, or rank4class-export's two-stage or zero-shot export. A model trained on frozen text embeddings embeds
the raw texts with the same frozen encoder (through the embedding cache) before scoring. An export calibrated
by rank4class-train (its calibration.json: a temperature fitted on the validation split) writes a probability
beside each score; other exports (zero-shot, trained with --nocalibrate or before calibration existed) write
scores only.
"""

from absl import flags

from rank4class.inference import predict as predict_lib
from rank4class.inference import served
from rank4class_cli import cli, terminal
from rank4class_data import file_formats
from rank4class_data.conversion import convert, image_folders
from rank4class_data.rows import bad_rows
from rank4class_data.validation import refuse_output_over_inputs

PROGRAM = "rank4class-predict"
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.
define = cli.FlagDefiner(FLAGS)

define.string("model_dir", None, "Training model_dir (uses <model_dir>/export) or an exported SavedModel.")
define.string("input", None, "Text lines (.txt), rows (.csv/.tsv/.jsonl/.tab), the converter's .tfrecord, or "
              "a folder of images (loose ones, and in class-named subfolders with their true class).")
define.string("output", None, "Predictions file: .csv or .jsonl.")
define.enum("input_format", predict_lib.AUTO, (predict_lib.AUTO, *predict_lib.INPUT_FORMATS),
            "Input format. " + file_formats.help_text(
                (predict_lib.AUTO, *predict_lib.INPUT_FORMATS),
                {predict_lib.AUTO: "by extension (unknown extensions: text lines)",
                 predict_lib.TFRECORD: "the converter's TFRecords of tf.Example"}))
define.enum("output_format", predict_lib.AUTO, (predict_lib.AUTO, *predict_lib.OUTPUT_FORMATS),
            "Output format; auto: by extension.")
define.string("text_column", predict_lib.AUTO,
              "Rows: the text column (auto: .tab's string column, else 'text').")
define.list("feature_columns", [], "Rows: numeric columns of a dense model's input, in training order.")
define.string("id_column", None, "Rows: id column copied to the output (default: row numbers).")
define.string("label_column", None, "Rows: true-label column; the output says if it is in the top K.")
define.integer("top_k", 5, "Classes per prediction.")
define.integer("batch_size", 256, "Instances scored per call.")
define.bad_row_flags()
define.string("embedding_cache_dir", None,
              "Frozen-text models: embedding cache folder (default: the shared one).")
define.string("class_texts", None, "Zero-shot exports: CSV/TSV/JSONL with columns class,text; its classes "
              "are ranked instead of the training ones (classes unseen in training too).")
define.float("coverage", None, "Calibrated exports: also write each instance's conformal class set holding "
             "the true class with this probability, e.g. 0.9 (CSV: names joined by '|'; JSONL: a "
             "list). Default: off.")
flags.mark_flags_as_required(["model_dir", "input", "output"], flag_values=FLAGS)
# The config fields whose flag has another name, as library messages name them (`cli.flag_words` writes them
# as these flags); every other field is spelled as its flag. `config_from_flags` below reads these flags.
define.field_flags({"model_path": "model_dir", "input_path": "input", "output_path": "output"})


def config_from_flags(f: flags.FlagValues) -> predict_lib.PredictConfig:
  """The prediction the flags ask for; ValueError names a bad value."""
  return predict_lib.PredictConfig(
      model_path=f.model_dir, input_path=f.input, output_path=f.output, input_format=f.input_format,
      output_format=f.output_format, text_column=f.text_column, feature_columns=tuple(f.feature_columns),
      id_column=f.id_column, label_column=f.label_column, top_k=f.top_k, batch_size=f.batch_size,
      bad_rows=cli.bad_row_policy(f),
      embedding_cache_dir=f.embedding_cache_dir, class_texts=f.class_texts, coverage=f.coverage)


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, config_from_flags)


def check_outputs(config: predict_lib.PredictConfig) -> None:
  """ValueError when the predictions or the rejects file would overwrite the input, its vocabulary or a file
  of the model."""
  skipping = config.bad_rows.policy == bad_rows.SKIP
  input_format = config.resolved_input_format()
  tfrecord = input_format == predict_lib.TFRECORD

  def images(folder: str) -> list[str]:  # What predict reads of a folder.
    return [path for _, path in image_folders.list_images(folder, unlabelled=True)]

  refuse_output_over_inputs(
      {"--output": config.output_path,
       "--rejects": config.bad_rows.rejects_file(config.output_path) if skipping else None},
      {"--input": [config.input_path],
       "--input's vocabulary": [convert.default_vocab_path(config.input_path)] if tfrecord else None,
       "--model_dir": [served.model_folder(config.model_path)],
       "--class_texts": [config.class_texts] if config.class_texts else None},
      folder_files={"--input": images} if input_format == predict_lib.IMAGES else None)


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  config = config_from_flags(FLAGS)
  check_outputs(config)
  summary = predict_lib.predict(config)
  terminal.out(summary.format())


def run() -> None:
  """Console script `rank4class-predict`."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
