"""Tests of the file-format registry: its queries, and that every format list of the toolkit comes from it."""

import importlib

import pytest

from rank4class.evaluation import evaluate
from rank4class.inference import predict
from rank4class.training import training_data
from rank4class_data import file_formats
from rank4class_data.conversion import convert, image_folders
from rank4class_data.rows import class_texts, row_tables


def test_row_formats_and_extensions():
  assert file_formats.names(container=file_formats.ROWS) == ("csv", "tsv", "jsonl", "libsvm", "tab")
  assert file_formats.extensions(file_formats.ROWS) == {
    ".csv": "csv",
    ".tsv": "tsv",
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".libsvm": "libsvm",
    ".svm": "libsvm",
    ".svmlight": "libsvm",
    ".tab": "tab",
  }


def test_queries_by_what_a_file_carries():
  assert file_formats.names(carries=file_formats.IMAGE) == ("example", "images")
  assert file_formats.names(carries=file_formats.GROUPS,
                            container=file_formats.ROWS) == ("csv", "tsv", "jsonl",
                                                                                         "libsvm")
  assert "libsvm" not in file_formats.names(carries=file_formats.TEXT)
  assert file_formats.names(container=file_formats.TFRECORD) == ("example", "elwc")


@pytest.mark.parametrize("path, container, expected", [
    ("a/b/reviews.TSV", None, "tsv"),
    ("x.ndjson", file_formats.ROWS, "jsonl"),
    ("cat.JPG", None, "images"),
    ("cat.jpg", file_formats.ROWS, None),
    ("notes.txt", None, "lines"),
    ("train.tfrecord", None, None),  # example and elwc share the extension: the contents tell them apart.
    ("no_extension", None, None),
])
def test_from_extension(path, container, expected):
  assert file_formats.from_extension(path, container) == expected


def test_every_list_of_the_toolkit_is_the_registry_s():
  assert row_tables.INPUT_FORMATS == file_formats.names(container=file_formats.ROWS)
  assert row_tables.EXTENSIONS == file_formats.extensions(file_formats.ROWS)
  assert image_folders.IMAGE_EXTENSIONS == file_formats.get("images").extensions
  registered = set(file_formats.FORMATS)
  # Each binary's accepted formats are registry names, or its own words for a group of them.
  assert set(class_texts.FORMATS) <= registered
  assert set(convert.ROW_FORMATS) <= registered
  assert set(training_data.INPUT_FORMATS) - {training_data.AUTO, training_data.ROWS} <= registered
  assert set(evaluate.INPUT_FORMATS) - {evaluate.ROWS} <= registered
  assert set(predict.INPUT_FORMATS) - {predict.TFRECORD} <= registered


@pytest.mark.parametrize("name", sorted(file_formats.FORMATS))
def test_readers_and_writers_exist(name):
  spec = file_formats.get(name)
  for dotted in (spec.reader, spec.writer):
    if dotted is None:
      continue
    module, attribute = dotted.rsplit(".", 1)
    assert callable(getattr(importlib.import_module(module), attribute)), dotted


def test_bad_names_are_refused_with_the_known_ones():
  with pytest.raises(ValueError, match=r"`format` must be one of \['csv', 'tsv'.*got 'xlsx'"):
    file_formats.get("xlsx")
  with pytest.raises(ValueError, match="`carries` must be one of"):
    file_formats.names(carries="audio")
  with pytest.raises(ValueError, match="extensions must be lower case"):
    file_formats.FileFormat("x", file_formats.ROWS, ("CSV",), frozenset(), "m.f", None, "x")


def test_help_text_is_the_registry_s_and_refuses_an_unknown_name():
  assert file_formats.help_text(("auto", "tsv", "elwc"), {"auto": "by extension"}) == (
      "auto: by extension; tsv (.tsv): tab-separated rows with a header; "
      "elwc: TFRecords of ExampleListWithContext (TF-Ranking's lists).")
  with pytest.raises(KeyError):
    file_formats.help_text(("auto", "xlsx"), {"auto": "by extension"})
