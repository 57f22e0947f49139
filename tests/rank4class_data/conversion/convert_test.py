"""Tests for rank4class_data.conversion.convert: rows -> TFRecord + label vocabulary, and back, on real and
bad files."""

import csv
import io
import json
import math
import os
import re
from unittest import mock

import tensorflow as tf
from absl.testing import parameterized

from rank4class_data import datasets
from rank4class_data.conversion import convert
from rank4class_data.conversion.convert import ConvertConfig, ExportConfig
from rank4class_data.records import tfrecords
from rank4class_data.rows import bad_rows, row_tables
from rank4class_data.validation import DataError


def _rows(path: str, input_format: str = "auto") -> list[dict]:
  return [record.fields for record in row_tables.read_table(path, input_format).records]


class ReutersRoundTripTest(tf.test.TestCase):
  """The real R8 files: train and test to TFRecords, test back to `.tab` with identical rows."""

  def test_r8_tab_to_tfrecord_and_back_gives_identical_rows(self):
    out = self.create_tempdir().full_path
    train_tab = datasets.text_classification_path("reuters_r8", "train")
    test_tab = datasets.text_classification_path("reuters_r8", "test")
    train = convert.convert_to_tfrecord(ConvertConfig(train_tab, os.path.join(out, "r8-train.tfrecord")))
    self.assertEqual(train.rows, 5485)
    self.assertEqual(train.num_classes, 8)
    self.assertEqual(train.class_counts["earn"], 2840)
    self.assertAlmostEqual(train.skew, 2840 / 41)
    test = convert.convert_to_tfrecord(
        ConvertConfig(test_tab, os.path.join(out, "r8-test.tfrecord"),
                      label_vocab_path=os.path.join(out, "r8-train.labels.json")))
    self.assertEqual(test.rows, 2189)
    self.assertEqual(list(test.class_counts),
                     datasets.load_text_classification("reuters_r8", "test").class_names)

    back = convert.convert_from_tfrecord(
        ExportConfig(os.path.join(out, "r8-test.tfrecord"), os.path.join(out, "r8-test.tab")))
    self.assertEqual(back.rows, 2189)
    self.assertEqual(back.class_counts, test.class_counts)
    self.assertEqual(_rows(os.path.join(out, "r8-test.tab")), _rows(test_tab))
    with open(test_tab, encoding="utf-8") as original, open(os.path.join(out, "r8-test.tab"),
                                                            encoding="utf-8") as f:
      original_lines, lines = original.read().splitlines(), f.read().splitlines()
    self.assertEqual(lines[:3], ["Category\tText", "d\tstring", "class\t"])
    self.assertEqual([line for line in lines[3:]], [line for line in original_lines[3:] if line])

    # The vocabulary beside the test TFRecord has the train ids, the test counts and the schema to parse with.
    with open(os.path.join(out, "r8-test.labels.json"), encoding="utf-8") as f:
      metadata = json.load(f)
    self.assertEqual(metadata["label_to_id"]["earn"], 2)
    self.assertEqual(metadata["counts"]["grain"], 10)
    schema = convert.load_schema(os.path.join(out, "r8-test.labels.json"))
    self.assertEqual(schema.num_classes, 8)
    _, labels = next(
        iter(
            tfrecords.make_dataset(
                tfrecords.InputConfig(os.path.join(out, "r8-test.tfrecord"), batch_size=4, shuffle=False),
                schema)))
    self.assertAllEqual(labels, datasets.load_text_classification("reuters_r8", "test").labels[:4])


class FormatsTest(tf.test.TestCase, parameterized.TestCase):

  def _file(self, name: str, content: str) -> str:
    return self.create_tempfile(name, content=content).full_path

  @parameterized.named_parameters(("csv", ".csv", ","), ("tsv", ".tsv", "\t"))
  def test_delimited_round_trip_with_group_and_grade(self, extension, sep):
    rows = [["review", "rating", "condition", "useful"], ["good, \"really\"", "positive", "Pain", "12"],
            ["bad", "negative", "Acne", "0"], ["fine", "neutral", "Pain", "2.5"]]
    source = os.path.join(self.create_tempdir().full_path, "in" + extension)
    with open(source, "w", newline="", encoding="utf-8") as f:
      csv.writer(f, delimiter=sep, lineterminator="\n").writerows(rows)
    out = self.create_tempdir().full_path
    summary = convert.convert_to_tfrecord(
        ConvertConfig(source, os.path.join(out, "r.tfrecord"), text_column="review", label_column="rating",
                      group_column="condition", grade_column="useful"))
    self.assertEqual(summary.class_counts, {"negative": 1, "neutral": 1, "positive": 1})
    self.assertEqual(summary.skew, 1.0)
    schema = convert.load_schema(os.path.join(out, "r.labels.json"))
    features, labels = next(
        iter(
            tfrecords.make_dataset(
                tfrecords.InputConfig(os.path.join(out, "r.tfrecord"), batch_size=3, shuffle=False), schema)))
    self.assertAllEqual(labels, [2, 0, 1])
    self.assertAllEqual(features["text"], [b'good, "really"', b"bad", b"fine"])
    self.assertAllEqual(features["group_id"], [b"Pain", b"Acne", b"Pain"])
    self.assertAllClose(features["grade"], [12.0, 0.0, 2.5])
    convert.convert_from_tfrecord(
        ExportConfig(os.path.join(out, "r.tfrecord"), os.path.join(out, "back" + extension)))
    self.assertEqual(_rows(os.path.join(out, "back" + extension)), _rows(source))

  def test_jsonl_with_feature_columns_round_trip(self):
    source = self._file("in.jsonl", '{"label": "b", "x": 0.5, "y": 2}\n\n{"label": "a", "x": -1, "y": 0.1}\n')
    out = self.create_tempdir().full_path
    summary = convert.convert_to_tfrecord(
        ConvertConfig(source, os.path.join(out, "f.tfrecord"), feature_columns=("x", "y")))
    self.assertEqual(summary.class_counts, {"a": 1, "b": 1})
    instances = list(
        tfrecords.read_instances(os.path.join(out, "f.tfrecord"),
                                 convert.load_schema(os.path.join(out, "f.labels.json"))))
    self.assertEqual([i.label for i in instances], [1, 0])
    self.assertIsNone(instances[0].text)
    self.assertAllClose(instances[1].dense, [-1.0, 0.1])
    convert.convert_from_tfrecord(
        ExportConfig(os.path.join(out, "f.tfrecord"), os.path.join(out, "back.jsonl")))
    self.assertEqual(_rows(os.path.join(out, "back.jsonl")), _rows(source))

  def test_libsvm_duplicate_index_policies(self):
    source = self._file("dup.libsvm", "1 1:0.5 2:1 1:2\n2 2:1\n")
    for policy, first_row in (("last", [2.0, 1.0]), ("sum", [2.5, 1.0])):
      output = os.path.join(self.create_tempdir().full_path, f"{policy}.tfrecord")
      convert.convert_to_tfrecord(convert.ConvertConfig(source, output, libsvm_duplicates=policy))
      instances = list(tfrecords.read_instances(output,
                                                convert.load_schema(convert.default_vocab_path(output))))
      self.assertAllClose(instances[0].dense, first_row)
    with self.assertRaisesRegex(ValueError,
                                r"`libsvm_duplicates` must be one of \['error', 'last', 'sum'\], got 'max'"):
      convert.ConvertConfig(source, "x.tfrecord", libsvm_duplicates="max")

  def test_libsvm_with_qid_sorts_numeric_labels(self):
    source = self._file("in.libsvm", "10 qid:3 1:0.5 3:2 # comment\n2 qid:3 2:1\n\n-1 qid:4 3:-1.5\n")
    out = self.create_tempdir().full_path
    summary = convert.convert_to_tfrecord(
        ConvertConfig(source, os.path.join(out, "s.tfrecord"), group_column="qid"))
    self.assertEqual(list(summary.class_counts), ["-1", "2", "10"])
    schema = convert.load_schema(os.path.join(out, "s.labels.json"))
    self.assertEqual(schema.dense_dim, 3)
    instances = list(tfrecords.read_instances(os.path.join(out, "s.tfrecord"), schema))
    self.assertEqual([(i.label, i.group_id) for i in instances], [(2, "3"), (1, "3"), (0, "4")])
    self.assertAllClose([i.dense for i in instances], [[0.5, 0.0, 2.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.5]])

  def test_labels_as_ids(self):
    source = self._file("in.csv", "text,label\na,2\nb,0\n")
    out = self.create_tempdir().full_path
    summary = convert.convert_to_tfrecord(
        ConvertConfig(source, os.path.join(out, "i.tfrecord"), labels_are_ids=True, num_classes=3))
    self.assertEqual(summary.class_counts, {"0": 1, "1": 0, "2": 1})
    self.assertEqual(summary.skew, math.inf)
    instances = list(tfrecords.read_instances(os.path.join(out, "i.tfrecord"), tfrecords.ExampleSchema()))
    self.assertEqual([i.label for i in instances], [2, 0])

  def test_summary_format_lists_rows_classes_skew(self):
    text = convert.ConversionSummary("in.csv", "out.tfrecord", 7, {"a": 6, "b": 1}).format()
    self.assertIn("rows: 7  classes: 2  skew (max/min class count): 6.00", text)
    self.assertIn("  a  6", text)


class SkipBadRowsTest(tf.test.TestCase, parameterized.TestCase):
  """The "skip" policy: good rows converted, every bad row listed with file, row, line, field and reason."""

  def _convert(self, name, content, **policy):
    source = self.create_tempfile(name, content=content).full_path
    out = self.create_tempdir().full_path
    config = ConvertConfig(source, os.path.join(out, "o.tfrecord"),
                           bad_rows=bad_rows.BadRowPolicy(bad_rows.SKIP, **policy))
    return source, out, config

  def _rejects(self, path):
    with open(path, encoding="utf-8") as f:
      return [json.loads(line) for line in f]

  def test_csv_rows_of_every_kind_are_skipped_and_listed(self):
    # Row 1 is the blank row after the header that stopped a whole file (only separators; its label is checked
    # first).
    content = "text,label\n,\ngood film,pos\nshort\n  ,neg\nbad film,neg\n"
    source, out, config = self._convert("in.csv", content)
    summary = convert.convert_to_tfrecord(config)
    self.assertEqual((summary.rows, summary.class_counts, summary.rejected), (2, {"neg": 1, "pos": 1}, 3))
    self.assertEqual(summary.rejects_path, os.path.join(out, "o.rejects.jsonl"))
    self.assertEqual(self._rejects(summary.rejects_path), [
        {"file": source, "row": 1, "line": 2, "field": "label", "reason": "empty label",
         "expected": "a class name"},
        {"file": source, "row": 3, "line": 4, "field": None, "reason": "1 fields",
         "expected": "2 fields as in the header ['text', 'label']"},
        {"file": source, "row": 4, "line": 5, "field": "text", "reason": "empty text",
         "expected": "a non-empty text"},
    ])
    texts = [i.text for i in tfrecords.read_instances(config.output_path,
                                                      convert.load_schema(config.vocab_path))]
    self.assertEqual(texts, ["good film", "bad film"])
    self.assertIn("rejected rows: 3 (listed in ", summary.format())

  @parameterized.named_parameters(
      ("jsonl", "in.jsonl", '{"text": "a", "label": "x"}\n{"text": \n{"text": "b", "label": "y"}\n',
       [(2, "invalid JSON (Expecting value")]),
      ("libsvm", "in.libsvm", "1 1:0.5\n2 3=1\n1 2:1 2:3\n2 1:1\n",
       [(2, "token '3=1'"), (3, "feature 2 given twice")]),
      ("tab", "in.tab", "Category\tText\nd\tstring\nclass\t\nx\ta\ny\n",
       [(2, "1 tab-separated fields")]),
  )
  def test_malformed_rows_of_each_format_are_skipped(self, name, content, expected):
    _, _, config = self._convert(name, content)
    summary = convert.convert_to_tfrecord(config)
    got = [(r["row"], r["reason"]) for r in self._rejects(summary.rejects_path)]
    self.assertEqual([row for row, _ in got], [row for row, _ in expected])
    for (_, reason), (_, start) in zip(got, expected, strict=True):
      self.assertStartsWith(reason, start)

  def test_latin1_row_is_skipped_and_listed(self):
    source, out, config = self._convert("in.csv", "text,label\ncaf\u00e9 cr\u00e8me,pos\n")
    with open(source, "ab") as f:
      f.write(b"caf\xe9,neg\nthe end,neg\n")  # Row 2 was written as Latin-1.
    summary = convert.convert_to_tfrecord(config)
    self.assertEqual((summary.rows, summary.class_counts, summary.rejected), (2, {"neg": 1, "pos": 1}, 1))
    self.assertEqual(self._rejects(summary.rejects_path), [
        {"file": source, "row": 2, "line": 3, "field": "text", "reason": "byte 0xe9 is not UTF-8",
         "expected": "UTF-8 text (save the file as UTF-8, e.g. iconv -f latin1 -t utf-8)"}])
    texts = [i.text for i in tfrecords.read_instances(config.output_path,
                                                      convert.load_schema(config.vocab_path))]
    self.assertEqual(texts, ["caf\u00e9 cr\u00e8me", "the end"])

  def test_more_bad_rows_than_the_limit_stop_and_write_nothing(self):
    source, out, config = self._convert("in.csv", "text,label\n,\n,\ngood,pos\n,\n", max_bad_rows=2)
    with self.assertRaisesRegex(DataError, r"in\.csv, row 4 \(line 5\), field 'label': empty label: bad row "
                                r"3, more than max_bad_rows=2; expected fewer bad rows"):
      convert.convert_to_tfrecord(config)
    self.assertEmpty(os.listdir(out))
    del source

  def test_long_conversions_show_a_progress_line(self):
    _, _, config = self._convert("in.csv", "text,label\na,x\n,\nb,y\n")
    with mock.patch.object(convert, "PROGRESS_SECONDS", 0.0), \
        mock.patch("sys.stderr", new_callable=io.StringIO) as stderr:
      convert.convert_to_tfrecord(config)
    lines = stderr.getvalue().splitlines(keepends=True)  # Not a terminal: whole lines.
    self.assertEqual([line.split(" (")[0] for line in lines], ["converting: 1 rows", "converting: 2 rows"])
    self.assertRegex(lines[-1], r"^converting: 2 rows \([\d,]+ rows/s, 1 rejected\)\n$")

  def test_no_bad_rows_leave_an_empty_rejects_file_and_fail_is_the_default(self):
    _, _, config = self._convert("in.csv", "text,label\na,x\nb,y\n", rejects_path=None)
    summary = convert.convert_to_tfrecord(config)
    self.assertEqual((summary.rejected, self._rejects(summary.rejects_path)), (0, []))
    self.assertEqual(ConvertConfig("a", "b").bad_rows.policy, bad_rows.FAIL)
    with self.assertRaisesRegex(ValueError, r"`policy` must be one of \[.*\], got 'ignore'"):
      bad_rows.BadRowPolicy("ignore")


class ExportedFilesTest(tf.test.TestCase, parameterized.TestCase):
  """Files as spreadsheets and scrapers write them convert like any other."""

  @parameterized.named_parameters(
      ("csv", "in.csv", "text,label\nsunny day,pos\nrain,neg\n"),
      ("jsonl", "in.jsonl", '{"text": "sunny day", "label": "pos"}\n{"text": "rain", "label": "neg"}\n'),
  )
  def test_byte_order_mark_converts(self, name, content):
    source = self.create_tempfile(name, content=b"\xef\xbb\xbf" + content.encode("utf-8")).full_path
    output = os.path.join(self.create_tempdir().full_path, "o.tfrecord")
    summary = convert.convert_to_tfrecord(ConvertConfig(source, output))
    self.assertEqual(summary.class_counts, {"neg": 1, "pos": 1})
    instances = list(tfrecords.read_instances(output,
                                              convert.load_schema(convert.default_vocab_path(output))))
    self.assertEqual([(i.text, i.label) for i in instances], [("sunny day", 1), ("rain", 0)])

  def test_five_megabyte_field_converts_whole(self):
    text = "word " * 1_000_000
    source = self.create_tempfile("in.csv", content=f'text,label\n"{text}",long\nshort,short\n').full_path
    output = os.path.join(self.create_tempdir().full_path, "o.tfrecord")
    convert.convert_to_tfrecord(ConvertConfig(source, output))
    instances = list(tfrecords.read_instances(output,
                                              convert.load_schema(convert.default_vocab_path(output))))
    self.assertEqual([len(i.text) for i in instances], [5_000_000, 5])


class BadInputTest(tf.test.TestCase, parameterized.TestCase):
  """Every bad-input class: the error names file, row and field, and the output folder stays empty."""

  def _convert_fails(self, name, content, expected_message, **config):
    source = self.create_tempfile(name, content=content).full_path
    out = self.create_tempdir().full_path
    with self.assertRaises((DataError, FileNotFoundError)) as context:
      convert.convert_to_tfrecord(ConvertConfig(source, os.path.join(out, "o.tfrecord"), **config))
    self.assertIn(source, str(context.exception))
    self.assertRegex(str(context.exception), expected_message)
    self.assertEmpty(os.listdir(out))
    return context.exception

  @parameterized.named_parameters(
      ("renamed_column", "in.csv", "txt,label\na,x\n",
       r"header row \(line 1\), field 'text': missing column 'text'; expected one of the header's columns "
       r"\['txt', 'label'\]", {}),
      ("missing_label_column", "in.tsv", "text\tlabel\na\tx\n", r"header row.*field 'cls': missing column", {
          "label_column": "cls"
      }),
      ("missing_json_field", "in.jsonl", '{"text": "a", "label": "x"}\n{"text": "b"}\n',
       r"row 2, field 'label': missing field", {}),
      ("empty_text", "in.csv", "text,label\na,x\n ,y\n", r"row 2 \(line 3\), field 'text': empty text", {}),
      ("empty_tab_text", "in.tab", "Category\tText\nd\tstring\nclass\t\nx\ta\ny\t\n",
       r"row 2 \(line 5\), field 'Text': empty text", {}),
      ("negative_label", "in.csv", "text,label\na,0\nb,-1\n",
       r"row 2 \(line 3\), field 'label': negative label -1; expected a class id in \[0, 3\)", {
           "labels_are_ids": True,
           "num_classes": 3
       }),
      ("out_of_range_label", "in.csv", "text,label\na,0\nb,3\n",
       r"row 2 \(line 3\), field 'label': label 3 out of range; expected a class id in \[0, 3\)", {
           "labels_are_ids": True,
           "num_classes": 3
       }),
      ("non_integer_label", "in.csv", "text,label\na,1.5\n",
       r"row 1 \(line 2\), field 'label': label '1.5' is not", {
           "labels_are_ids": True,
           "num_classes": 3
       }),
      ("nan_feature", "in.csv", "label,x,y\na,1,2\nb,nan,3\n",
       r"row 2 \(line 3\), field 'x': 'nan' is not finite.*expected a finite number", {
           "feature_columns": ("x", "y")
       }),
      ("non_numeric_feature", "in.csv", "label,x\na,abc\n",
       r"row 1 \(line 2\), field 'x': 'abc' is not a number", {
           "feature_columns": ("x",)
       }),
      ("nan_grade", "in.jsonl", '{"text": "a", "label": "x", "g": NaN}\n',
       r"row 1, field 'g': nan is not finite", {
           "grade_column": "g"
       }),
      ("short_row", "in.csv", "text,label\na,x\nb\n", r"row 2 \(line 3\): 1 fields; expected 2 fields", {}),
      ("bad_json", "in.jsonl", '{"text": "a", "label": "x"}\n{"text": \n', r"row 2: invalid JSON", {}),
      ("libsvm_bad_token", "in.libsvm", "1 1:0.5\n2 3=1\n", r"row 2, field 'features': token '3=1'", {}),
      ("libsvm_index_out_of_range", "in.libsvm", "1 1:0.5\n2 4:1\n",
       r"row 2, field 'feature 4': feature index 4 out of range", {
           "num_features": 3
       }),
      ("libsvm_nan", "in.libsvm", "1 1:0.5\n2 2:nan\n", r"row 2, field 'feature 2': feature 2 value 'nan'; "
       "expected a finite number", {}),
      ("libsvm_repeated_index", "in.libsvm", "1 1:0.5\n\n2 2:1 2:3\n", r"row 2 \(line 3\), field 'feature "
       r"2': feature 2 given twice; expected each index at most once per line \(or a duplicate-index policy: "
       r"last, sum\)", {}),
      ("no_rows", "in.csv", "text,label\n", r"in\.csv: no rows \(only a header\); expected data rows after "
       r"the header\.$", {}),
      ("empty_file", "in.csv", "", r"in\.csv: no rows \(the file is empty\); expected a row file", {}),
      ("latin1_row", "in.csv", "text,label\nbon,x\ncaf\udce9,y\n", r"in\.csv, row 2 \(line 3\), field "
       r"'text': byte 0xe9 is not UTF-8; expected UTF-8 text \(save the file as UTF-8, e\.g\. iconv -f "
       r"latin1 -t utf-8\)\.$", {}),
  )
  def test_bad_input_raises_naming_file_row_field(self, name, content, message, config):
    self._convert_fails(name, content.encode("utf-8", "surrogateescape"), message, **config)

  def test_folder_as_input_is_one_located_error(self):
    folder = self.create_tempdir().full_path
    out = self.create_tempdir().full_path
    with self.assertRaisesRegex(DataError, "^" + re.escape(f"{folder}: a directory; expected a row file "
                                                           "(CSV, TSV, JSONL, LibSVM or .tab) (a file, not a "
                                                           "folder).") + "$"):
      convert.convert_to_tfrecord(ConvertConfig(folder, os.path.join(out, "o.tfrecord"), input_format="csv"))
    self.assertEmpty(os.listdir(out))

  def test_unknown_label_with_vocabulary_raises(self):
    vocab = self.create_tempfile("train.labels.json", content='{"classes": ["earn", "acq"]}').full_path
    error = self._convert_fails(
        "in.tsv", "text\tlabel\na\tearn\nb\tgrain\n",
        r"row 2 \(line 3\), field 'label': unknown label 'grain'; expected one of the "
        r"vocabulary's classes \['earn', 'acq'\]", label_vocab_path=vocab)
    self.assertEqual((error.row, error.field), (2, "label"))

  def test_late_error_leaves_no_partial_output(self):
    content = "text,label\n" + "".join(f"doc {i},c{i % 3}\n" for i in range(500)) + ",c0\n"
    self._convert_fails("in.csv", content, r"row 501 \(line 502\), field 'text': empty text")

  def test_missing_input_file_raises_naming_it(self):
    out = self.create_tempdir().full_path
    missing = os.path.join(out, "absent.csv")
    with self.assertRaisesRegex(FileNotFoundError, f"{re.escape(missing)}: no such file"):
      convert.convert_to_tfrecord(ConvertConfig(missing, os.path.join(out, "o.tfrecord")))
    self.assertEmpty(os.listdir(out))

  def test_missing_vocabulary_file_raises_naming_it(self):
    source = self.create_tempfile("in.csv", content="text,label\na,x\n").full_path
    out = self.create_tempdir().full_path
    with self.assertRaisesRegex(FileNotFoundError, "absent.labels.json: no such file"):
      convert.convert_to_tfrecord(
          ConvertConfig(source, os.path.join(out, "o.tfrecord"),
                        label_vocab_path=os.path.join(out, "absent.labels.json")))
    self.assertEmpty(os.listdir(out))

  def test_ids_without_num_classes_raise(self):
    with self.assertRaisesRegex(ValueError, "labels_are_ids"):
      ConvertConfig("in.csv", "o.tfrecord", labels_are_ids=True)

  def test_tab_export_of_text_with_tab_fails_without_output(self):
    out = self.create_tempdir().full_path
    source = self.create_tempfile("in.tsv", content='text\tlabel\nok\tx\n"a\tb"\ty\n').full_path
    convert.convert_to_tfrecord(ConvertConfig(source, os.path.join(out, "t.tfrecord")))
    export = self.create_tempdir().full_path
    with self.assertRaisesRegex(DataError, r"back\.tab, row 2, field 'text': value contains a tab"):
      convert.convert_from_tfrecord(
          ExportConfig(os.path.join(out, "t.tfrecord"), os.path.join(export, "back.tab"),
                       vocab_path=os.path.join(out, "t.labels.json")))
    self.assertEmpty(os.listdir(export))


if __name__ == "__main__":
  tf.test.main()
