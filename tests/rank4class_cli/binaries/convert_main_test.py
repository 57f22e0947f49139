"""Tests for rank4class_cli.binaries.convert_main: the `rank4class-convert` command line."""

import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from rank4class_cli.binaries import convert_main
from rank4class_data.conversion import convert
from rank4class_data.records import tfrecords
from rank4class_data.rows import bad_rows
from tests.rank4class_cli.cli_runner import parsed_config, run_binary


def _config(argv: list[str]) -> convert.ConvertConfig | convert.ExportConfig:
  return parsed_config(convert_main, argv)


class ConvertMainTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.source = self.create_tempfile(
        "reviews.tsv",
        content=("review\trating\tcondition\nworks well\tpositive\tPain\nno effect\tnegative\tAcne\n"
                 "great\tpositive\tAcne\n")).full_path
    self.out = self.create_tempdir().full_path

  def _run_main(self, **flag_values) -> str:
    result = run_binary(convert_main, [f"--{name}={value}" for name, value in flag_values.items()])
    self.assertEqual((result.code, result.stderr), (0, ""))
    return result.stdout

  def test_to_tfrecord_writes_outputs_and_prints_summary(self):
    output = os.path.join(self.out, "reviews.tfrecord")
    printed = self._run_main(input=self.source, output=output, text_column="review", label_column="rating",
                             group_column="condition")
    self.assertCountEqual(os.listdir(self.out), ["reviews.tfrecord", "reviews.labels.json"])
    self.assertIn("rows: 3  classes: 2  skew (max/min class count): 2.00", printed)
    self.assertIn(os.path.join(self.out, "reviews.labels.json"), printed)
    schema = convert.load_schema(os.path.join(self.out, "reviews.labels.json"))
    self.assertEqual(schema.group_key, "group_id")

  def test_next_hint_trains_on_a_training_file_and_evaluates_on_a_test_split(self):
    train = os.path.join(self.out, "train.tfrecord")
    printed = self._run_main(input=self.source, output=train, text_column="review", label_column="rating")
    self.assertEqual(printed.splitlines()[-1], f"Next: rank4class-train --train_files={train} "
                     "--model_dir=<run folder>")  # The row flags were applied here: the records need none.
    test = os.path.join(self.out, "test.tfrecord")
    printed = self._run_main(input=self.source, output=test, text_column="review", label_column="rating",
                             label_vocab=os.path.join(self.out, "train.labels.json"))
    self.assertEqual(printed.splitlines()[-1], f"Next: rank4class-evaluate --model_dir=<run folder> "
                     f"--input={test}")  # Converted with the training vocabulary: a test split.
    moved = os.path.join(self.out, "train2.tfrecord")
    vocab = os.path.join(self.out, "vocab dir.json")
    printed = self._run_main(input=self.source, output=moved, text_column="review", label_column="rating",
                             vocab_output=vocab)
    self.assertEqual(printed.splitlines()[-1], f"Next: rank4class-train --train_files={moved} "
                     f"--label_vocab='{vocab}' --model_dir=<run folder>")

  def test_from_tfrecord_writes_rows_back(self):
    output = os.path.join(self.out, "reviews.tfrecord")
    self._run_main(input=self.source, output=output, text_column="review", label_column="rating",
                   group_column="condition")
    back = os.path.join(self.out, "back.tsv")
    printed = self._run_main(direction="from_tfrecord", input=output, output=back)
    self.assertIn("rows: 3", printed)
    with open(back) as f, open(self.source) as g:
      self.assertEqual(f.read(), g.read())

  def test_config_from_flags(self):
    config = _config(["--input=a.csv", "--output=b.tfrecord", "--feature_columns=x,y", "--labels_are_ids",
                      "--num_classes=4", "--vocab_output=v.json"])
    self.assertEqual(
        config,
        convert.ConvertConfig("a.csv", "b.tfrecord", feature_columns=("x", "y"), labels_are_ids=True,
                              num_classes=4, vocab_output_path="v.json"))
    self.assertEqual(_config(["--direction=from_tfrecord", "--input=b.tfrecord", "--output=c.tab",
                              "--label_vocab=v.json"]),
                     convert.ExportConfig("b.tfrecord", "c.tab", vocab_path="v.json"))

  def test_image_folder_input_converts_class_subfolders(self):
    folder = os.path.join(self.out, "photos")
    for name, value in (("cat", 10), ("dog", 200)):
      os.makedirs(os.path.join(folder, name))
      with open(os.path.join(folder, name, "1.png"), "wb") as f:
        f.write(tf.io.encode_png(tf.fill([3, 5, 3], tf.constant(value, tf.uint8))).numpy())
    output = os.path.join(self.out, "photos.tfrecord")
    printed = self._run_main(input=folder, output=output, image_size="2,2", image_channels=1)
    self.assertIn("rows: 2  classes: 2", printed)
    self.assertIn(f"Next: rank4class-train --train_files={output} ", printed)
    images = [i.image for i in tfrecords.read_instances(output, convert.load_schema(
        os.path.join(self.out, "photos.labels.json")))]
    self.assertAllEqual(images, [np.full([2, 2, 1], 10), np.full([2, 2, 1], 200)])

  def test_image_folder_converts_again_into_itself_but_never_over_an_image(self):
    folder = os.path.join(self.out, "photos")
    os.makedirs(os.path.join(folder, "cat"))
    image = os.path.join(folder, "cat", "1.png")
    with open(image, "wb") as f:
      f.write(tf.io.encode_png(tf.fill([2, 2, 1], tf.constant(7, tf.uint8))).numpy())
    output = os.path.join(folder, "photos.tfrecord")  # Not an image: the folder's images are the input.
    for _ in range(2):
      self._run_main(input=folder, output=output)
    result = run_binary(convert_main, [f"--input={folder}", f"--output={self.out}/o.tfrecord",
                                       f"--vocab_output={image}"])
    self.assertEqual(result.code, 1)
    self.assertEqual(result.stderr, f"rank4class-convert: error: --vocab_output and --input name the same "
                     f"file {image}: writing --vocab_output would overwrite the input; give --vocab_output a "
                     "path outside the inputs\n")

  def test_rows_written_back_never_replace_the_records_vocabulary(self):
    records = os.path.join(self.out, "reviews.tfrecord")
    self._run_main(input=self.source, output=records, text_column="review", label_column="rating")
    vocab = os.path.join(self.out, "reviews.labels.json")
    with open(vocab, "rb") as f:
      before = f.read()
    result = run_binary(convert_main, ["--direction=from_tfrecord", f"--input={records}", f"--output={vocab}",
                                       "--output_format=jsonl"])
    self.assertEqual(result.code, 1)
    self.assertRegex(result.stderr, r"^rank4class-convert: error: --output and --label_vocab name the same "
                                    r"file .*reviews\.labels\.json: ")
    with open(vocab, "rb") as f:
      self.assertEqual(f.read(), before)

  def test_two_outputs_on_one_file_are_refused(self):
    output = os.path.join(self.out, "o.tfrecord")
    result = run_binary(convert_main,
                        [f"--input={self.source}", f"--output={output}", f"--vocab_output={output}",
                                       "--text_column=review", "--label_column=rating"])
    self.assertEqual(result.code, 1)
    self.assertEqual(result.stderr, "rank4class-convert: error: --vocab_output and --output name the same "
                     f"file {output}: one output would replace the other; give them different paths\n")
    self.assertEmpty(os.listdir(self.out))

  def test_skip_policy_converts_the_good_rows_and_lists_the_bad(self):
    bad = self.create_tempfile("bad.tsv", content="review\trating\n\t\nok\tpositive\n \tnegative\n").full_path
    rejects = os.path.join(self.out, "rejected.jsonl")
    printed = self._run_main(input=bad, output=os.path.join(self.out, "o.tfrecord"), text_column="review",
                             label_column="rating", bad_rows="skip", max_bad_rows=2, rejects=rejects)
    self.assertIn("rows: 1  classes: 1", printed)
    self.assertIn(f"rejected rows: 2 (listed in {rejects})", printed)
    with open(rejects, encoding="utf-8") as f:
      self.assertEqual([line.split('"reason": ')[1].split(",")[0] for line in f],
                       ['"empty label"', '"empty text"'])
    self.assertEqual(_config(["--input=a.csv", "--output=b.tfrecord", "--bad_rows=skip", "--max_bad_rows=3"]
                             ).bad_rows, bad_rows.BadRowPolicy("skip", 3, None))


  def test_bad_input_exits_non_zero_naming_file_row_field_without_output(self):
    bad = self.create_tempfile("bad.tsv", content="review\trating\nok\tpositive\n \tnegative\n").full_path
    result = run_binary(convert_main, [f"--input={bad}", f"--output={os.path.join(self.out, 'o.tfrecord')}",
                                       "--text_column=review", "--label_column=rating"])
    self.assertEqual(result.code, 1)
    self.assertEqual(result.stderr, f"rank4class-convert: error: {bad}, row 2 (line 3), field 'review': "
                     "empty text; expected a non-empty text.\n")
    self.assertEmpty(os.listdir(self.out))

  def test_missing_input_file_is_one_line(self):
    result = run_binary(convert_main, ["--input=/no/such/rows.csv", f"--output={self.out}/o.tfrecord"])
    self.assertIn(result.code, (1, 2))
    self.assertEqual(result.stderr.splitlines(), [result.stderr.strip()])
    self.assertRegex(result.stderr, r"^rank4class-convert: error: .*/no/such/rows.csv")
    self.assertEmpty(os.listdir(self.out))

  def test_help_lists_this_binary_flags(self):
    result = run_binary(convert_main, ["--helpshort"])
    self.assertEqual(result.code, 0)
    self.assertIn("--label_column: Label column", result.stdout)
    self.assertIn("--[no]debug: Show the Python traceback", result.stdout)
    self.assertNotIn("--model_dir", result.stdout)

  def test_binary_exits_1_on_unknown_label(self):
    vocab = self.create_tempfile("v.txt", content="positive\nneutral\n").full_path
    result = subprocess.run([
        sys.executable, "-m", "rank4class_cli.binaries.convert_main", f"--input={self.source}",
        f"--output={os.path.join(self.out, 'o.tfrecord')}", "--text_column=review", "--label_column=rating",
        f"--label_vocab={vocab}"
    ], capture_output=True, text=True, timeout=600, env={
        **os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"
    }, check=False)
    self.assertEqual(result.returncode, 1, result.stderr)
    self.assertIn(f"{self.source}, row 2 (line 3), field 'rating': unknown label 'negative'", result.stderr)
    self.assertEmpty(os.listdir(self.out))


class UnreadableInputTest(tf.test.TestCase):
  """Inputs the converter cannot read: exit 1, one line naming the file (and row), no output left behind."""

  def _fails(self, argv: list[str], output: str = "o.tfrecord") -> str:
    out = self.create_tempdir().full_path
    result = run_binary(convert_main, argv + [f"--output={os.path.join(out, output)}"])
    self.assertEqual((result.code, len(result.stderr.splitlines())), (1, 1))
    self.assertEmpty(os.listdir(out))
    return result.stderr

  def test_latin1_row_is_one_line(self):
    source = self.create_tempfile("latin1.csv", content=b"text,label\ncaf\xe9,x\n").full_path
    self.assertEqual(self._fails([f"--input={source}"]),
                     f"rank4class-convert: error: {source}, row 1 (line 2), field 'text': byte 0xe9 is not "
                     "UTF-8; expected UTF-8 text (save the file as UTF-8, e.g. iconv -f latin1 -t utf-8).\n")

  def test_header_only_file_is_one_line(self):
    source = self.create_tempfile("header.csv", content="text,label\n").full_path
    self.assertEqual(self._fails([f"--input={source}"]), f"rank4class-convert: error: {source}: no rows "
                     "(only a header); expected data rows after the header.\n")

  def test_csv_given_as_tfrecord_is_one_line(self):
    source = self.create_tempfile("rows.csv", content="text,label\na,x\n").full_path
    with open(os.path.join(os.path.dirname(source), "rows.labels.json"), "w", encoding="utf-8") as f:
      f.write('{"classes": ["x"], "schema": {}}')
    self.assertEqual(self._fails(["--direction=from_tfrecord", f"--input={source}"], "back.csv"),
                     f"rank4class-convert: error: {source}, row 1: not a TFRecord file (no valid record at "
                     "byte 0); expected a TFRecord file (is the input format right?).\n")

  def test_folder_without_images_is_one_line(self):
    folder = self.create_tempdir().full_path  # A folder is an image folder to the converter.
    self.assertEqual(self._fails([f"--input={folder}"]),
                     f"rank4class-convert: error: {folder}: no images in class subfolders; expected "
                     "<folder>/<class name>/<image>, images ending in .png, .jpg, .jpeg, .bmp, .gif.\n")


if __name__ == "__main__":
  tf.test.main()
