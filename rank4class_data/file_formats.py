"""The one registry of the file formats the toolkit reads and writes: name, file extensions, what a file can
carry, and which function reads and writes it.

Every binary's format list is a query of this registry (`names`), and every "which format is this file?"
is `from_extension`, so a format is added, or an extension taught, in one place. The lists differ by binary
because what a binary can do with a format differs (evaluation reads labelled files only; predict also reads
plain text lines and unlabelled image folders), not because a format means something else there.

Containers:
- `ROWS`: one instance per line or row (CSV, TSV, JSONL, Orange `.tab`, LibSVM). A training, evaluation or
  predict input, and what `rank4class-convert` converts to TFRecords and back.
- `TFRECORD`: the converter's TFRecords: tf.Example per instance (`example`) or ELWC lists (`elwc`).
- `FOLDER`: images, in class-named subfolders when labelled.
- `LINES`: plain text, one instance per line (predict only).

Example:
  file_formats.from_extension("reviews.tsv")                       # "tsv"
  file_formats.names(container=file_formats.ROWS)                  # ("csv", "tsv", "jsonl", "libsvm", "tab")
  file_formats.names(carries=file_formats.TEXT, container=ROWS)    # the row formats that hold raw text
  file_formats.get("libsvm").writer                                # "rank4class_data.ranking.feature_lists.write_libsvm"
"""  # noqa: E501

import dataclasses
import os

from rank4class_data.validation import check_choice

# Containers.
ROWS = "rows"
TFRECORD = "tfrecord"
FOLDER = "folder"
LINES = "lines"
CONTAINERS = (ROWS, TFRECORD, FOLDER, LINES)

# What a file of the format can carry.
TEXT = "text"          # raw text of an instance
FEATURES = "features"  # a numeric feature vector
IMAGE = "image"        # an image
LABELS = "labels"      # the true class (or relevance) of an instance
GROUPS = "groups"      # instances grouped into ranked lists (a query or group id, or ELWC's lists)
CARRIES = (TEXT, FEATURES, IMAGE, LABELS, GROUPS)


@dataclasses.dataclass(frozen=True)
class FileFormat:
  """One file format.

  Attributes:
    name: The name flags and configs use (`--input_format=<name>`).
    container: One of `CONTAINERS`.
    extensions: Lower-case extensions that mean this format when a binary is told "auto" (the first is the one
      written); empty where the extension cannot tell (ELWC and tf.Example share `.tfrecord`).
    carries: What a file can hold, from `CARRIES`.
    reader: Dotted name of the function that reads it.
    writer: Dotted name of the function that writes it, or None.
    summary: A few words for help texts and errors.
  """

  name: str
  container: str
  extensions: tuple[str, ...]
  carries: frozenset[str]
  reader: str
  writer: str | None
  summary: str

  def __post_init__(self):
    check_choice("container", self.container, CONTAINERS)
    for item in self.carries:
      check_choice("carries", item, CARRIES)
    if any(not extension.startswith(".") or extension != extension.lower() for extension in self.extensions):
      raise ValueError(f"{self.name}: extensions must be lower case and start with '.', got "
                       f"{self.extensions}.")


_ROW_READER = "rank4class_data.rows.row_tables.read_table"
_ROW_WRITER = "rank4class_data.conversion.convert.convert_from_tfrecord"
_FORMATS = (
    FileFormat("csv", ROWS, (".csv",), frozenset({TEXT, FEATURES, LABELS, GROUPS}), _ROW_READER, _ROW_WRITER,
               "comma-separated rows with a header"),
    FileFormat("tsv", ROWS, (".tsv",), frozenset({TEXT, FEATURES, LABELS, GROUPS}), _ROW_READER, _ROW_WRITER,
               "tab-separated rows with a header"),
    FileFormat("jsonl", ROWS, (".jsonl", ".json", ".ndjson"), frozenset({TEXT, FEATURES, LABELS, GROUPS}),
               _ROW_READER, _ROW_WRITER, "one JSON object per line"),
    FileFormat("libsvm", ROWS, (".libsvm", ".svm", ".svmlight"), frozenset({FEATURES, LABELS, GROUPS}),
               _ROW_READER, "rank4class_data.ranking.feature_lists.write_libsvm",
               "SVMlight/LibSVM lines '<label> [qid:<id>] <index>:<value> ...'"),
    FileFormat("tab", ROWS, (".tab",), frozenset({TEXT, FEATURES, LABELS}), _ROW_READER, _ROW_WRITER,
               "Orange .tab (names, types, flags)"),
    FileFormat("example", TFRECORD, (), frozenset({TEXT, FEATURES, IMAGE, LABELS}),
               "rank4class_data.records.tfrecords.read_instances",
               "rank4class_data.conversion.convert.convert_to_tfrecord",
               "TFRecords of tf.Example, one per instance (rank4class-convert's)"),
    FileFormat("elwc", TFRECORD, (), frozenset({TEXT, FEATURES, LABELS, GROUPS}),
               "rank4class_data.records.elwc.read_elwc", "rank4class_data.records.elwc.write_elwc",
               "TFRecords of ExampleListWithContext (TF-Ranking's lists)"),
    FileFormat("images", FOLDER, (".png", ".jpg", ".jpeg", ".bmp", ".gif"), frozenset({IMAGE, LABELS}),
               "rank4class_data.conversion.image_folders.list_images", None,
               "a folder of images, in subfolders named by class when labelled"),
    FileFormat("lines", LINES, (".txt",), frozenset({TEXT}), "rank4class.inference.predict.predict", None,
               "plain text, one instance per line"),
)
FORMATS: dict[str, FileFormat] = {spec.name: spec for spec in _FORMATS}
# Extensions of TFRecord files of either kind (`example` or `elwc`: the contents tell them apart).
TFRECORD_EXTENSIONS = (".tfrecord", ".tfrecords")


def get(name: str) -> FileFormat:
  """The format called `name`; a ValueError naming the known formats otherwise."""
  check_choice("format", name, tuple(FORMATS))
  return FORMATS[name]


def names(container: str | None = None, carries: str | None = None) -> tuple[str, ...]:
  """The formats (in registry order) of `container` and carrying `carries` (None: any)."""
  if container is not None:
    check_choice("container", container, CONTAINERS)
  if carries is not None:
    check_choice("carries", carries, CARRIES)
  return tuple(spec.name for spec in _FORMATS
               if (container is None or spec.container == container)
               and (carries is None or carries in spec.carries))


def extensions(container: str) -> dict[str, str]:
  """Extension -> format name of the formats of `container` (what "auto" reads)."""
  return {extension: spec.name for spec in _FORMATS if spec.container == container
          for extension in spec.extensions}


def from_extension(path: str, container: str | None = None) -> str | None:
  """The format a file's extension names (of `container` if given), or None when it names none."""
  extension = os.path.splitext(path)[1].lower()
  for spec in _FORMATS:
    if (container is None or spec.container == container) and extension in spec.extensions:
      return spec.name
  return None


def help_text(format_names: tuple[str, ...], groups: dict[str, str] | None = None) -> str:
  """A binary's `--input_format` help, made from the registry: "csv (.csv): comma-separated rows with a
  header; ...". `groups` gives the meaning of the binary's own words that are not formats ("auto", or "rows"
  for any row format); every other name must be a registry format (KeyError otherwise, so a help text cannot
  name a format the registry lacks)."""
  groups = groups or {}
  parts = []
  for name in format_names:
    if name in groups:
      parts.append(f"{name}: {groups[name]}")
      continue
    spec = FORMATS[name]
    extensions = f" ({' '.join(spec.extensions)})" if spec.extensions else ""
    parts.append(f"{name}{extensions}: {spec.summary}")
  return "; ".join(parts) + "."
