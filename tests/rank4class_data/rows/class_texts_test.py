"""Tests of rank4class_data.rows.class_texts: a class-texts file read, checked and put in class-id order."""

import hashlib
import os

import tensorflow as tf
from absl.testing import parameterized

from rank4class_data.rows import class_texts
from rank4class_data.validation import DataError


class ReadClassTextsTest(tf.test.TestCase, parameterized.TestCase):

  def _write(self, name: str, content: str | bytes) -> str:
    path = os.path.join(self.create_tempdir().full_path, name)
    with open(path, "wb") as f:
      f.write(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path

  def test_csv_gives_texts_by_class_in_file_order(self):
    path = self._write("t.csv", 'class,text,source\nzebra,A striped horse ,wiki\n apple ,"Fruit, red",x\n')
    texts = class_texts.read_class_texts(path)
    # Class names lose surrounding spaces (as the converter's labels); texts are kept as written.
    self.assertEqual(list(texts.items()), [("zebra", "A striped horse "), ("apple", "Fruit, red")])

  def test_byte_order_mark_is_dropped_from_the_header(self):
    path = self._write("t.csv", b"\xef\xbb\xbfclass,text\na,Alpha\nb,Beta\n")
    self.assertEqual(class_texts.read_class_texts(path), {"a": "Alpha", "b": "Beta"})

  def test_tsv(self):
    path = self._write("t.tsv", "text\tclass\nFirst, with a comma\tx\nSecond\ty\n")
    self.assertEqual(class_texts.read_class_texts(path), {"x": "First, with a comma", "y": "Second"})

  def test_jsonl_with_an_integer_class_and_other_keys(self):
    path = self._write("t.jsonl", '{"class": "cat", "text": "A small feline", "id": 1}\n\n'
                       '{"class": 3, "text": "Three"}\n')
    self.assertEqual(class_texts.read_class_texts(path), {"cat": "A small feline", "3": "Three"})

  @parameterized.named_parameters(
      ("no_text_column", "t.csv", "class,description\na,x\n",
       "t.csv, header row (line 1), field 'text': no 'text' column (the header has ['class', "
       "'description']); expected columns 'class' and 'text'."),
      ("no_class_column", "t.tsv", "label\ttext\na\tx\n",
       "t.tsv, header row (line 1), field 'class': no 'class' column (the header has ['label', 'text'])"),
      ("empty_class", "t.csv", "class,text\na,Alpha\n  ,Nothing\n",
       "t.csv, row 2 (line 3), field 'class': an empty class name; expected a class name."),
      ("empty_text", "t.csv", "class,text\na,\n",
       "t.csv, row 1 (line 2), field 'text': empty text; expected a non-empty text."),
      ("blank_text", "t.csv", 'class,text\na,Alpha\nb,"  "\n',
       "t.csv, row 2 (line 3), field 'text': empty text"),
      ("duplicate", "t.csv", "class,text\na,Alpha\nb,Beta\n a,Again\n",
       "t.csv, row 3 (line 4), field 'class': class 'a' again (first on row 1); expected one row per class."),
      ("empty_file", "t.csv", "", "t.csv: no rows (the file is empty)"),
      ("header_only", "t.csv", "class,text\n", "t.csv: no rows (only a header)"),
      ("jsonl_missing_key", "t.jsonl", '{"class": "a", "text": "x"}\n{"class": "b", "txt": "y"}\n',
       "t.jsonl, row 2, field 'text': no 'text' key (the row has ['class', 'txt']); expected keys 'class' "
       "and 'text' in every row."),
      ("jsonl_text_not_a_string", "t.jsonl", '{"class": "a", "text": 5}\n',
       "t.jsonl, row 1, field 'text': a int; expected a text string."),
      ("jsonl_empty_file", "t.jsonl", "\n", "t.jsonl: no rows (the file is empty)"),
      ("short_row", "t.csv", "class,text\na\n", "t.csv, row 1 (line 2): 1 fields; expected 2 fields"),
      ("other_format", "t.libsvm", "1 1:2\n", "t.libsvm: a file with extension '.libsvm'; expected a CSV, "
       "TSV or JSONL file with columns class,text"),
  )
  def test_bad_file_is_a_located_one_line_error(self, name, content, message):
    path = self._write(name, content)
    with self.assertRaises(DataError) as raised:
      class_texts.read_class_texts(path)
    self.assertIn(path + message.removeprefix(name), str(raised.exception))
    self.assertLen(str(raised.exception).splitlines(), 1)

  def test_missing_file_is_named(self):
    with self.assertRaisesRegex(FileNotFoundError, "nowhere.csv: no such file"):
      class_texts.read_class_texts(os.path.join(self.create_tempdir().full_path, "nowhere.csv"))


class TextsInClassOrderTest(tf.test.TestCase):

  def test_texts_follow_the_class_ids_and_extra_classes_come_back_apart(self):
    table = {"zebra": "Z text", "unseen_1": "U1", "apple": "A text", "mango": "M text", "unseen_2": "U2"}
    texts, unseen = class_texts.texts_in_class_order(table, ["apple", "mango", "zebra"], "t.csv")
    self.assertEqual(texts, ["A text", "M text", "Z text"])
    self.assertEqual(unseen, ["unseen_1", "unseen_2"])  # File order.

  def test_every_class_listed_gives_no_unseen_classes(self):
    self.assertEqual(class_texts.texts_in_class_order({"b": "B", "a": "A"}, ["a", "b"], "t.csv"),
                     (["A", "B"], []))

  def test_classes_without_a_text_are_an_error_naming_how_many_and_the_first_few(self):
    classes = [f"c{i}" for i in range(9)]
    with self.assertRaises(DataError) as raised:
      class_texts.texts_in_class_order({"c0": "zero", "c8": "eight"}, classes, "t.csv")
    self.assertEqual(str(raised.exception),
                     "t.csv, field 'class': no text for 7 of the data's 9 classes: 'c1', 'c2', 'c3', 'c4', "
                     "'c5', ... (7 in all); expected a row for every class of the training data.")

  def test_unseen_classes_note_is_one_line_naming_them(self):
    note = class_texts.unseen_classes_note("t.csv", ["x", "y"])
    self.assertEqual(note, "t.csv lists 2 classes the training data lacks ('x', 'y'): noted, not trained")
    self.assertIn("1 class the", class_texts.unseen_classes_note("t.csv", ["x"]))


class FileSha256Test(tf.test.TestCase):

  def test_hash_of_the_bytes_changes_with_a_text(self):
    path = os.path.join(self.create_tempdir().full_path, "t.csv")
    with open(path, "w") as f:
      f.write("class,text\na,alpha\n")
    self.assertEqual(class_texts.file_sha256(path), hashlib.sha256(b"class,text\na,alpha\n").hexdigest())
    before = class_texts.file_sha256(path)
    with open(path, "w") as f:
      f.write("class,text\na,alpha!\n")
    self.assertNotEqual(class_texts.file_sha256(path), before)
    with self.assertRaisesRegex(DataError, "a directory"):
      class_texts.file_sha256(os.path.dirname(path))


if __name__ == "__main__":
  tf.test.main()
