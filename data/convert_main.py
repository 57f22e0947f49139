"""Command line converter: CSV/TSV/JSONL/LibSVM/Orange `.tab` rows -> classification TFRecords, and back.

Sample command lines:

  # R8 train: writes r8-train.tfrecord and r8-train.labels.json, prints rows, classes and skew.
  rank4class-convert --input=reuters-r8-train.tab --output=/tmp/r8/r8-train.tfrecord
  # Test split with the train split's vocabulary, so ids agree and unknown labels are errors.
  rank4class-convert --input=reuters-r8-test.tab --output=/tmp/r8/r8-test.tfrecord \
      --label_vocab=/tmp/r8/r8-train.labels.json
  # CSV with named columns and a group id.
  rank4class-convert --input=reviews.csv --output=/tmp/reviews.tfrecord --text_column=review \
      --label_column=rating --group_column=condition --grade_column=usefulCount
  # Back to rows (the vocabulary beside the TFRecord gives the label names).
  rank4class-convert --direction=from_tfrecord --input=/tmp/r8/r8-test.tfrecord --output=/tmp/r8/r8-test.tab

Exits with status 1 and a message naming the file, row and field on bad input; no output file is left behind.
"""

import sys

from absl import app, flags

from rank4class_data import convert
from rank4class_data.validation import DataError

DIRECTIONS = ("to_tfrecord", "from_tfrecord")

FLAGS = flags.FLAGS
flags.DEFINE_enum("direction", "to_tfrecord", DIRECTIONS,
                  "to_tfrecord: rows -> TFRecord + label vocabulary JSON; from_tfrecord: TFRecord -> rows.")
flags.DEFINE_string("input", None, "Input file: rows (to_tfrecord) or a TFRecord (from_tfrecord).")
flags.DEFINE_string("output", None, "Output file: a TFRecord (to_tfrecord) or rows (from_tfrecord).")
flags.DEFINE_enum("input_format", convert.AUTO, (convert.AUTO, *convert.INPUT_FORMATS),
                  "Format of the input rows; auto: from the extension (.csv .tsv .jsonl .libsvm .tab).")
flags.DEFINE_enum("output_format", convert.AUTO, (convert.AUTO, *convert.ROW_FORMATS),
                  "Format of the output rows (from_tfrecord); auto: from the extension.")
flags.DEFINE_string(
    "text_column", convert.AUTO,
    "Text column; auto: .tab's string column, 'text' for CSV/TSV/JSONL (none with "
    "--feature_columns), none for LibSVM; empty: no text.")
flags.DEFINE_string("label_column", convert.AUTO,
                    "Label column; auto: .tab's class column, LibSVM's first token, else 'label'.")
flags.DEFINE_string("group_column", None, "Optional group id column (LibSVM: qid).")
flags.DEFINE_string("grade_column", None, "Optional ordinal/graded label column (numbers).")
flags.DEFINE_list("feature_columns", [], "Numeric columns forming the dense feature vector.")
flags.DEFINE_integer("num_features", None, "LibSVM feature dimension; default: the largest index seen.")
flags.DEFINE_string(
    "label_vocab", None,
    "Existing label vocabulary (.labels.json of another conversion, or one class a line): fixes "
    "the ids; labels outside it are errors. With from_tfrecord: the TFRecord's vocabulary "
    "(default: the one beside it).")
flags.DEFINE_bool("labels_are_ids", False, "Labels are integer class ids (checked against --num_classes).")
flags.DEFINE_integer("num_classes", None, "Number of classes for --labels_are_ids without --label_vocab.")
flags.DEFINE_string("vocab_output", None, "Vocabulary JSON to write; default: <output stem>.labels.json.")
flags.mark_flags_as_required(["input", "output"])


def config_from_flags() -> convert.ConvertConfig | convert.ExportConfig:
  """The conversion the flags ask for."""
  if FLAGS.direction == "from_tfrecord":
    return convert.ExportConfig(input_path=FLAGS.input, output_path=FLAGS.output,
                                output_format=FLAGS.output_format, vocab_path=FLAGS.label_vocab)
  return convert.ConvertConfig(input_path=FLAGS.input, output_path=FLAGS.output,
                               input_format=FLAGS.input_format, text_column=FLAGS.text_column,
                               label_column=FLAGS.label_column, group_column=FLAGS.group_column,
                               grade_column=FLAGS.grade_column, feature_columns=tuple(FLAGS.feature_columns),
                               num_features=FLAGS.num_features, label_vocab_path=FLAGS.label_vocab,
                               labels_are_ids=FLAGS.labels_are_ids, num_classes=FLAGS.num_classes,
                               vocab_output_path=FLAGS.vocab_output)


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  try:
    config = config_from_flags()
    if isinstance(config, convert.ExportConfig):
      summary = convert.convert_from_tfrecord(config)
    else:
      summary = convert.convert_to_tfrecord(config)
      print(f"vocabulary: {config.vocab_path}")
  except (DataError, FileNotFoundError, ValueError) as e:
    print(f"rank4class-convert: error: {e}", file=sys.stderr)
    sys.exit(1)
  print(summary.format())


def run() -> None:
  """Console script entry point `rank4class-convert`."""
  app.run(main)


if __name__ == "__main__":
  run()
