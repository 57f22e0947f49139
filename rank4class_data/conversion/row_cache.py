"""Row files (CSV, TSV, JSONL, LibSVM, Orange `.tab`) and image folders converted on the fly for training,
once.

Each split's rows become the converter's TFRecord plus vocabulary JSON (`rank4class_data.conversion.convert`)
in a cache folder named by a key over the files (path and content hash), the conversion settings and the
vocabulary they are checked against: a second run on the same files reuses the conversion, a changed file or
setting converts again. The cache folder appears whole or not at all (a failed conversion leaves nothing); a
cache folder the file system will not write (a full disk, a quota, a read-only or forbidden folder) is skipped
with one line, the conversion going to a folder of the system's temporary folder
(`write_failures.cached_or_fallback`). A folder of class-named image subfolders
(`rank4class_data.conversion.image_folders`) is converted the same way, one image per row.
"""

import dataclasses
import hashlib
import json
import os

from rank4class_data import write_failures
from rank4class_data.conversion import convert, image_folders
from rank4class_data.rows import bad_rows as bad_rows_lib
from rank4class_data.rows import row_tables
from rank4class_data.validation import atomic_directory, check_choice, file_sha256, require_input_file

DEFAULT_CACHE_DIR = os.path.join("~", ".cache", "rank4class", "rows")
# Part of every key: raise it when the converter's output for the same rows changes.
_CONVERSION_VERSION = 1
_SUMMARY_FILE = "summary.json"
_TFRECORD_FILE = "rows.tfrecord"


def is_row_pattern(pattern: str) -> bool:
  """Whether every file of `pattern` (comma-separated paths or globs) has a row-file extension
  (.csv .tsv .jsonl .libsvm .tab ...), or the pattern is an image folder, so that training converts it instead
  of reading TFRecords."""
  if image_folders.is_image_folder(pattern):
    return True
  files = row_tables.expand_paths(pattern)
  return all(os.path.splitext(f)[1].lower() in row_tables.EXTENSIONS for f in files)


@dataclasses.dataclass
class RowConversion:
  """How row files become training data: the converter's settings apart from its paths.

  Attributes:
    input_format: One of `row_tables.INPUT_FORMATS`, or "auto" for each file's extension.
    text_column: Text column ("auto": `.tab`'s string column, "text" for CSV/TSV/JSONL without
      `feature_columns`, none for LibSVM; "" for none).
    label_column: Class column ("auto": `.tab`'s class column, LibSVM's first token, else "label").
    feature_columns: Numeric columns forming a dense feature vector (instead of, or beside, a text).
    libsvm_duplicates: LibSVM: a feature index repeated in a line is an "error", or "last" wins, or "sum".
    bad_rows: "fail" (the first bad row stops the run) or "skip" (bad rows are left out and listed).
    max_bad_rows: "skip": the most rows one split may reject; None for no limit.
    image_size: Image folders: (height, width) every image is resized to; None: all must have one size.
    image_channels: Image folders: 1 or 3 channels every image is converted to; None: the first image's.
  """

  input_format: str = row_tables.AUTO
  text_column: str | None = row_tables.AUTO
  label_column: str = row_tables.AUTO
  feature_columns: tuple[str, ...] = ()
  libsvm_duplicates: str = "error"
  bad_rows: str = bad_rows_lib.FAIL
  max_bad_rows: int | None = None
  image_size: tuple[int, int] | None = None
  image_channels: int | None = None

  def __post_init__(self):
    self.feature_columns = tuple(self.feature_columns)
    self.image_size = tuple(self.image_size) if self.image_size else None
    bad_rows_lib.BadRowPolicy(self.bad_rows, self.max_bad_rows)  # Validates both.
    check_choice("input_format", self.input_format, (row_tables.AUTO, *row_tables.INPUT_FORMATS))


@dataclasses.dataclass
class ConvertedSplit:
  """One split's rows as the converter's TFRecord.

  Attributes:
    pattern: The row files as the user gave them.
    tfrecord: The cached TFRecord of `tf.Example`s.
    vocab_path: Its vocabulary JSON (classes, counts, schema).
    summary: What the conversion wrote (rows, per-class counts, rejected rows and their JSONL list).
    reused: Whether an earlier conversion was reused.
  """

  pattern: str
  tfrecord: str
  vocab_path: str
  summary: convert.ConversionSummary
  reused: bool

  def describe(self) -> str:
    """One line for the terminal."""
    line = (f"{self.pattern}: {self.summary.rows:,} rows, {self.summary.num_classes} classes "
            f"({'conversion reused' if self.reused else 'converted'}: {os.path.dirname(self.tfrecord)})")
    rejected = self.summary.rejected
    if rejected:
      line += (f"; {rejected} bad row{'s' if rejected > 1 else ''} left out (listed in "
               f"{self.summary.rejects_path})")
    return line


def conversion_key(files: list[str], conversion: RowConversion, label_vocab: str | None,
                   num_features: int | None) -> str:
  """The cache key: files (absolute path and content), settings, the vocabulary file's content, dimension."""
  parts = {
      "version": _CONVERSION_VERSION,
      "files": [[os.path.abspath(f), file_sha256(f)] for f in files],
      "conversion": dataclasses.asdict(conversion),
      "label_vocab": file_sha256(label_vocab) if label_vocab else None,
      "num_features": num_features,
  }
  return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()[:24]


def convert_split(pattern: str, conversion: RowConversion, label_vocab: str | None = None,
                  num_features: int | None = None, cache_dir: str | None = None) -> ConvertedSplit:
  """Converts one split's row files (comma-separated paths or globs) or image folder, or reuses their earlier
  conversion.

  Args:
    pattern: The split's row files, or a folder of class-named image subfolders.
    conversion: Columns, format and bad-row policy.
    label_vocab: The vocabulary the labels are checked against and numbered by (the training split's
      `vocab_path` for validation and test; a user's file, or None to collect it, for training).
    num_features: LibSVM: the dimension (the training split's, for validation and test).
    cache_dir: The cache root; None for `DEFAULT_CACHE_DIR`.

  Raises:
    FileNotFoundError / DataError: as `convert.convert_to_tfrecord`, naming the file, row and field.
  """
  images = image_folders.is_image_folder(pattern)
  files = (
    [path for _, path in image_folders.list_images(pattern)] if images else row_tables.expand_paths(pattern)
  )
  for path in files:
    if not os.path.exists(path):
      raise FileNotFoundError(f"{path}: no such row file")
    require_input_file(path, "an image" if images else row_tables.ROW_FILE)  # A folder: one located error.
  key = conversion_key(files, conversion, label_vocab, num_features)
  return write_failures.cached_or_fallback(
      "Row cache", os.path.expanduser(cache_dir or DEFAULT_CACHE_DIR), "rows",
      lambda root: _converted(os.path.join(root, key), pattern, files, images, conversion, label_vocab,
                              num_features))


def _converted(folder: str, pattern: str, files: list[str], images: bool, conversion: RowConversion,
               label_vocab: str | None, num_features: int | None) -> ConvertedSplit:
  """The split converted into cache entry `folder` (whole or not at all), or the entry already there."""
  summary_path = os.path.join(folder, _SUMMARY_FILE)
  reused = os.path.isfile(summary_path)
  if not reused:
    with atomic_directory(folder) as temp:
      output = os.path.join(temp, _TFRECORD_FILE)
      bad_rows = bad_rows_lib.BadRowPolicy(conversion.bad_rows, conversion.max_bad_rows)
      if images:
        summary = image_folders.convert_image_folder(image_folders.ImageFolderConfig(
            pattern, output, conversion.image_size, conversion.image_channels, label_vocab,
            bad_rows=bad_rows))
      else:
        summary = convert.convert_to_tfrecord(_convert_config(",".join(files), output, conversion,
                                                              label_vocab, num_features, bad_rows))
      with open(os.path.join(temp, _SUMMARY_FILE), "w", encoding="utf-8") as f:
        json.dump(dataclasses.asdict(summary), f, indent=2, ensure_ascii=False)
  with open(summary_path, encoding="utf-8") as f:
    summary = convert.ConversionSummary(**json.load(f))
  # Paths written inside the temporary folder now live in `folder`.
  summary.output_path = os.path.join(folder, _TFRECORD_FILE)
  if summary.rejects_path is not None:
    summary.rejects_path = os.path.join(folder, os.path.basename(summary.rejects_path))
  return ConvertedSplit(pattern, summary.output_path, convert.default_vocab_path(summary.output_path),
                        summary, reused)


def _convert_config(inputs: str, output: str, conversion: RowConversion, label_vocab: str | None,
                    num_features: int | None, bad_rows: bad_rows_lib.BadRowPolicy) -> convert.ConvertConfig:
  return convert.ConvertConfig(
      input_path=inputs, output_path=output, input_format=conversion.input_format,
      text_column=conversion.text_column, label_column=conversion.label_column,
      feature_columns=conversion.feature_columns, num_features=num_features, label_vocab_path=label_vocab,
      libsvm_duplicates=conversion.libsvm_duplicates, bad_rows=bad_rows)
