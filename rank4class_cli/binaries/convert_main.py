"""Command line converter: CSV/TSV/JSONL/LibSVM/Orange `.tab` rows or a folder of class-named image subfolders
-> classification TFRecords, and back.

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

  # Images in class-named subfolders (photos/train/cat/1.jpg ...), resized to 64x64 RGB.
  rank4class-convert --input=photos/train --output=/tmp/photos-train.tfrecord --image_size=64,64 \
      --image_channels=3

  # A file with a few bad rows: leave them out and list them (file, row, line, field, reason) in
  # /tmp/reviews.rejects.jsonl; more than 50 bad rows stop the conversion.
  rank4class-convert --input=reviews.csv --output=/tmp/reviews.tfrecord --bad_rows=skip --max_bad_rows=50

Exits with status 1 and a message naming the file, row and field on bad input (the first bad row, or under
--bad_rows=skip one over --max_bad_rows); no output file is left behind.
"""

from absl import flags

from rank4class_cli import cli, terminal
from rank4class_data import file_formats
from rank4class_data.conversion import convert, image_folders
from rank4class_data.conversion.image_folders import ImageFolderConfig
from rank4class_data.rows import bad_rows, libsvm, row_tables
from rank4class_data.validation import refuse_output_over_inputs

DIRECTIONS = ("to_tfrecord", "from_tfrecord")

PROGRAM = "rank4class-convert"
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.
define = cli.FlagDefiner(FLAGS)
define.enum("direction", "to_tfrecord", DIRECTIONS,
            "to_tfrecord: rows -> TFRecord + label vocabulary JSON; from_tfrecord: TFRecord -> rows.")
define.string("input", None, "Input: rows (to_tfrecord; several files: comma-separated paths or globs), a "
              "folder of class-named image subfolders (to_tfrecord) or a TFRecord (from_tfrecord).")
define.string("output", None, "Output file: a TFRecord (to_tfrecord) or rows (from_tfrecord).")
define.enum("input_format", row_tables.AUTO, (row_tables.AUTO, *row_tables.INPUT_FORMATS),
            "Format of the input rows (to_tfrecord). " + file_formats.help_text(
                (row_tables.AUTO, *row_tables.INPUT_FORMATS), {row_tables.AUTO: "from the extension"}))
define.enum("output_format", row_tables.AUTO, (row_tables.AUTO, *convert.ROW_FORMATS),
            "Format of the output rows (from_tfrecord); auto: from the extension.")
define.string(
    "text_column", row_tables.AUTO,
    "Text column; auto: .tab's string column, 'text' for CSV/TSV/JSONL (none with "
    "--feature_columns), none for LibSVM; empty: no text.")
define.string("label_column", row_tables.AUTO,
              "Label column; auto: .tab's class column, LibSVM's first token, else 'label'.")
define.string("group_column", None, "Optional group id column (LibSVM: qid).")
define.string("grade_column", None, "Optional ordinal/graded label column (numbers).")
define.list("feature_columns", [], "Numeric columns forming the dense feature vector.")
define.integer("num_features", None, "LibSVM feature dimension; default: the largest index seen.")
define.enum("libsvm_duplicates", "error", libsvm.DUPLICATE_POLICIES,
            "LibSVM: a feature index repeated in a line is an error, or its last value wins, or the values "
            "are summed.")
define.string(
    "label_vocab", None,
    "Existing label vocabulary (.labels.json of another conversion, or one class a line): fixes "
    "the ids; labels outside it are errors. With from_tfrecord: the TFRecord's vocabulary "
    "(default: the one beside it).")
define.bool("labels_are_ids", False, "Labels are integer class ids (checked against --num_classes).")
define.integer("num_classes", None, "Number of classes for --labels_are_ids without --label_vocab.")
define.string("vocab_output", None, "Vocabulary JSON to write; default: <output stem>.labels.json.")
define.list("image_size", [], "Image folders: height,width every image is resized to; default: all one size.")
define.integer("image_channels", None, "Image folders: 1 or 3 channels; default: the first image's.")
define.bad_row_flags()
flags.mark_flags_as_required(["input", "output"], flag_values=FLAGS)
# The config fields whose flag has another name, as library messages name them (`cli.flag_words` writes them
# as these flags); every other field is spelled as its flag. `config_from_flags` below reads these flags.
define.field_flags({"input_path": "input", "output_path": "output", "vocab_path": "label_vocab",
                    "label_vocab_path": "label_vocab", "vocab_output_path": "vocab_output"})


def config_from_flags(
  f: flags.FlagValues,
) -> convert.ConvertConfig | convert.ExportConfig | ImageFolderConfig:
  """The conversion the flags ask for."""
  if f.direction == "from_tfrecord":
    return convert.ExportConfig(input_path=f.input, output_path=f.output,
                                output_format=f.output_format, vocab_path=f.label_vocab)
  if f.input_format == row_tables.AUTO and image_folders.is_image_folder(f.input):
    return ImageFolderConfig(f.input, f.output, cli.int_tuple("image_size", f.image_size) or None,
                             f.image_channels, f.label_vocab, f.vocab_output, cli.bad_row_policy(f))
  return convert.ConvertConfig(input_path=f.input, output_path=f.output,
                               input_format=f.input_format, text_column=f.text_column,
                               label_column=f.label_column, group_column=f.group_column,
                               grade_column=f.grade_column, feature_columns=tuple(f.feature_columns),
                               num_features=f.num_features, label_vocab_path=f.label_vocab,
                               labels_are_ids=f.labels_are_ids, num_classes=f.num_classes,
                               vocab_output_path=f.vocab_output, libsvm_duplicates=f.libsvm_duplicates,
                               bad_rows=cli.bad_row_policy(f))


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, config_from_flags)


def check_outputs(config: convert.ConvertConfig | convert.ExportConfig | ImageFolderConfig) -> None:
  """ValueError when an output (TFRecord or rows, vocabulary, rejects) would overwrite an input or another
  output."""
  if isinstance(config, convert.ExportConfig):
    vocab = config.vocab_path or convert.default_vocab_path(config.input_path)
    refuse_output_over_inputs({"--output": config.output_path},
                              {"--input": [config.input_path], "--label_vocab": [vocab]})
    return
  skipping = config.bad_rows.policy == bad_rows.SKIP
  images = isinstance(config, ImageFolderConfig)
  refuse_output_over_inputs(
      {"--output": config.output_path, "--vocab_output": config.vocab_path,
       "--rejects": config.bad_rows.rejects_file(config.output_path) if skipping else None},
      {"--input": [config.input_dir] if images else config.input_path,
       "--label_vocab": [config.label_vocab_path] if config.label_vocab_path else None},
      folder_files={"--input": lambda folder: [path for _, path in image_folders.list_images(folder)]}
      if images else None)


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  config = config_from_flags(FLAGS)
  check_outputs(config)
  if isinstance(config, convert.ExportConfig):
    summary = convert.convert_from_tfrecord(config)
  elif isinstance(config, ImageFolderConfig):
    summary = image_folders.convert_image_folder(config)
    terminal.out(f"vocabulary: {config.vocab_path}")
  else:
    summary = convert.convert_to_tfrecord(config)
    terminal.out(f"vocabulary: {config.vocab_path}")
  terminal.out(summary.format())
  if not isinstance(config, convert.ExportConfig):
    terminal.out(next_command(config))


def next_command(config: convert.ConvertConfig | ImageFolderConfig) -> str:
  """The command to run on the TFRecord just written; it runs as printed once `<run folder>` is replaced.

  Converted against another conversion's vocabulary (--label_vocab=<...>.labels.json: another split of data
  already converted, the way a test split is), the records are for evaluating a model trained on that
  vocabulary: `rank4class-evaluate`. Otherwise (a class list fixing the ids, or no vocabulary) they are
  training data: `rank4class-train`. A vocabulary written elsewhere than beside the records
  is named. The row flags (columns, bad rows) were applied here: the records need none of them.
  """
  vocab = [("label_vocab", config.vocab_path)] \
      if config.vocab_path != convert.default_vocab_path(config.output_path) else []
  if config.label_vocab_path and config.label_vocab_path.endswith(convert.VOCAB_SUFFIX):
    return cli.next_command("rank4class-evaluate", [("model_dir", "<run folder>"),
                                                    ("input", config.output_path), *vocab])
  return cli.next_command("rank4class-train", [("train_files", config.output_path), *vocab,
                                               ("model_dir", "<run folder>")])


def run() -> None:
  """Console script entry point `rank4class-convert`."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
