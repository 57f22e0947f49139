"""Rank4Class classification data read from a named data set, TFRecords, rows or ELWC class lists: the splits
(validation carved from training when none is given), stratified subsets, the model's input kind. Text is read
raw; `rank4class.training.training_data` embeds it."""

import dataclasses
import os

import numpy as np
import tensorflow as tf

from rank4class_data import datasets
from rank4class_data.conversion import convert, row_cache
from rank4class_data.records import class_lists, tfrecords
from rank4class_data.rows import row_tables
from rank4class_data.validation import DataError, check_choice, check_range

TEXT_DATASETS = datasets.TEXT_CLASSIFICATION_DATASETS
IMAGE_DATASETS = datasets.IMAGE_CLASSIFICATION_DATASETS
DATASETS = (*TEXT_DATASETS, *IMAGE_DATASETS)

FROZEN = "frozen"
FINETUNE = "finetune"
TFIDF = "tfidf"
HYBRID = "hybrid"
# Text read as in "hybrid" (each text with its frozen embedding); `rank4class.training.train` trains the
# "frozen" model on the embeddings and validates the logistic regressions of the embeddings and of TF-IDF
# beside them against it.
AUTO_TEXT = "auto"
TEXT_MODES = (AUTO_TEXT, FROZEN, FINETUNE, TFIDF, HYBRID)

# Formats of `train_files`: classification tf.Examples (the converter's), ELWC class lists, or row files
# (CSV/TSV/JSONL/LibSVM/.tab, converted on the fly and cached); "auto": rows when every file has a row-file
# extension, else tf.Examples.
AUTO = "auto"
EXAMPLE = "example"
ELWC = "elwc"
ROWS = "rows"
# A row format ("csv", "tsv", ...) as the input format means rows of that format.
INPUT_FORMATS = (AUTO, EXAMPLE, ELWC, ROWS, *row_tables.INPUT_FORMATS)
# ELWC: relevance of the classes a list does not name.
UNLISTED_CLASSES = {"irrelevant": class_lists.UNLISTED_ZERO, "unjudged": class_lists.UNLISTED_MASKED}

# What the model's raw input is; decides the default instance encoder and the serving signature's dtype.
TEXT_INPUT = "text"
EMBEDDING_INPUT = "embedding"
# Hybrid text: each instance is a dict {TEXT_KEY: the raw text, EMBEDDING_KEY: its frozen
# embedding}; the model's export reads the raw text alone (`rank4class.modeling.encoders.HybridTextEncoder`).
TEXT_AND_EMBEDDING_INPUT = "text_and_embedding"
IMAGE_INPUT = "image"
DENSE_INPUT = "dense"

# The keys of a hybrid-text instance: the raw text and its frozen embedding (the features of a
# TEXT_AND_EMBEDDING_INPUT split; `rank4class.modeling.hybrid_text_encoder` reads them).
TEXT_KEY = "text"
EMBEDDING_KEY = "embedding"


@dataclasses.dataclass
class DataConfig:
  """Where training data comes from: a named real data set, or TFRecord files (`tf.Example`s or ELWC lists).

  Attributes:
    dataset: One of `DATASETS` ("reuters_r8", "20newsgroups", "wordnet_hypernyms", "wordnet_hypernyms_all":
      text; "fashion_mnist", "digits": images), or None when TFRecord files are given.
    train_files: File pattern(s) of the training split (comma-separated globs): TFRecords, or row files.
    validation_files: Pattern of the validation split; None carves it from the training files
      (round(rows x `validation_fraction`) rows, stratified by class: `datasets.validation_counts`,
      `split_seed`), as for the named data sets.
    test_files: Optional pattern evaluated once at the end with the best model.
    label_vocab: The converter's vocabulary JSON (classes + schema) of the TFRecords; None for the one beside
      the first training file. For ELWC (required): that JSON, or a text file with one class name per line.
    input_format: "example" (one classification `tf.Example` per instance, the converter's output), "elwc"
      (one list per instance: the instance in the context, one candidate class per example with a class id and
      a graded relevance label; read into memory, see `rank4class_data.records.class_lists`), "rows" (CSV,
      TSV, JSONL, LibSVM or `.tab` rows, converted once into the row cache, see
      `rank4class_data.conversion.row_cache`; a row format such as "csv" stands for "rows" in that format), or
      "auto" (rows when every training file has a row-file extension, else "example").
    feature_key: ELWC: the context feature holding the instance; None for "text", else "features".
    label_key: ELWC: the examples' relevance feature (TF-Ranking's examples write "relevance" or "utility").
    class_id_key: ELWC: the examples' class id feature.
    unlisted_classes: ELWC: the classes a list does not name are "irrelevant" (relevance 0) or "unjudged"
      (label -1: the losses and metrics skip them).
    text_mode: For text (named data sets and files alike): "frozen" (each text embedded once by the frozen
      encoder, mean-pooled, cached on disk; an MLP on top), "finetune" (the encoder on raw strings, trained
      end to end: the whole encoder runs forward and backward every step, slow on CPU), "tfidf" (raw strings
      into TF-IDF bags of n-grams in the graph, the vocabulary learned on the training texts, then a
      projection: `rank4class.modeling.encoders.TfidfEncoder`; no MiniLM) or "hybrid" (both: the TF-IDF
        projection beside
      an MLP on the frozen embedding, `rank4class.modeling.encoders.HybridTextEncoder`; training reads each
      text with its embedding, embedded once and cached as in "frozen"; the export reads raw texts and embeds
      them in its graph), or "auto" (read as "hybrid"; `rank4class.training.train` trains the "frozen" model
      and keeps it, or the logistic regression of the embeddings or of TF-IDF beside them, whichever is best
      on validation; rank4class-train's default).
    validation_fraction: Share of the training rows held out for validation (model selection), stratified by
      class, when no validation files are given; the test split is only used for the final report.
    split_seed: Seed of the stratified validation split and of the subsets below (fixed across model seeds).
    max_train_examples: Optional stratified subset of the remaining training rows.
    max_validation_examples: Optional stratified subset of the validation rows.
    max_test_examples: Optional stratified subset of the test rows.
    max_seq_length: Token budget per document for the text encoder.
    text_precision: What the frozen text encoder computes in: "auto" (the default: bfloat16 where the CPU
      has bfloat16 instructions and no GPU is visible, else float32; a run records the precision it chose),
      "float32" or "bfloat16" (bfloat16 matmuls, 1.6-2.4x the float32 rate on such a CPU, vectors at cosine
      >= 0.9999 to float32): `rank4class_encoders.text_encoder.PRECISIONS`.
    embedding_cache_dir: Where frozen embeddings are cached; None for the embedding cache's default.
    hub_cache_dir: Where the converted MiniLM SavedModels are cached; None for the converter's default.
    text_encoder_handles: [preprocess, encoder] TF Hub handles (or SavedModel dirs) of another BERT-style
      text encoder; None for MiniLM (all-MiniLM-L6-v2, converted once and cached).
    image_data_dir: A prepared TFDS data dir for Fashion-MNIST; None reads the Debian IDX files.
    rows: Row files: columns, format and bad-row policy of their conversion.
    row_cache_dir: Where converted row files are cached; None for `row_cache.DEFAULT_CACHE_DIR`.
    class_texts: A CSV/TSV/JSONL file with columns class,text: one text per class for the metadata class
      encoder (`rank4class_data.rows.class_texts`); every class of the data needs one, classes it lists that
      the data lacks are noted, not trained. None: no class texts (the metadata class encoder embeds the class
      names).
    class_texts_sha256: The sha256 of the `class_texts` file's bytes, recorded by
      `rank4class.training.train.train` in the run's config.json: a run resumed after the file changed is
      refused, naming this key (its texts are part of the model).
  """

  dataset: str | None = None
  train_files: str | None = None
  validation_files: str | None = None
  test_files: str | None = None
  label_vocab: str | None = None
  input_format: str = AUTO
  feature_key: str | None = None
  label_key: str = tfrecords.LABEL_KEY
  class_id_key: str = "class_id"
  unlisted_classes: str = "irrelevant"
  text_mode: str = FROZEN
  validation_fraction: float = 0.1
  split_seed: int = 0
  max_train_examples: int | None = None
  max_validation_examples: int | None = None
  max_test_examples: int | None = None
  max_seq_length: int = 128
  text_precision: str = "auto"
  embedding_cache_dir: str | None = None
  hub_cache_dir: str | None = None
  text_encoder_handles: list[str] | None = None
  image_data_dir: str | None = None
  rows: row_cache.RowConversion = dataclasses.field(default_factory=row_cache.RowConversion)
  row_cache_dir: str | None = None
  class_texts: str | None = None
  class_texts_sha256: str | None = None

  def __post_init__(self):
    if isinstance(self.rows, dict):
      self.rows = row_cache.RowConversion(**self.rows)
    if self.input_format in row_tables.INPUT_FORMATS:
      self.rows = dataclasses.replace(self.rows, input_format=self.input_format)
      self.input_format = ROWS
    if self.dataset is None and self.train_files is None:
      raise ValueError("DataConfig needs `dataset` (one of " + ", ".join(DATASETS) + ") or `train_files`.")
    if self.dataset is not None and self.train_files is not None:
      raise ValueError(f"Give either `dataset` ({self.dataset!r}) or `train_files` ({self.train_files!r}), "
                       "not both.")
    if self.dataset is not None:
      check_choice("dataset", self.dataset, DATASETS)
    check_choice("input_format", self.input_format, INPUT_FORMATS)
    if self.input_format == ELWC and (self.train_files is None or self.label_vocab is None):
      raise ValueError("ELWC training reads `train_files` and needs `label_vocab` (the class names in id "
                       "order: the converter's JSON or one name per line).")
    if self.input_format == ROWS and self.train_files is None:
      raise ValueError("input_format 'rows' reads `train_files`.")
    check_choice("unlisted_classes", self.unlisted_classes, UNLISTED_CLASSES)
    check_choice("text_mode", self.text_mode, TEXT_MODES)
    check_range("validation_fraction", self.validation_fraction, 0.0, 1.0, low_inclusive=False,
                high_inclusive=False)
    if self.text_encoder_handles is not None and len(self.text_encoder_handles) != 2:
      raise ValueError("`text_encoder_handles` must be [preprocess, encoder], got "
                       f"{self.text_encoder_handles}.")
    for name in ("max_train_examples", "max_validation_examples", "max_test_examples"):
      if getattr(self, name) is not None:
        check_range(name, getattr(self, name), 1, integer=True)


@dataclasses.dataclass
class ArraySplit:
  """One split held in memory.

  Attributes:
    features: Model inputs `[n, ...]`: strings (object array), embeddings float32 `[n, d]`, images uint8; for
      hybrid text a dict {`TEXT_KEY`: strings `[n]`, `EMBEDDING_KEY`: float32 `[n, d]`}, row i
      of both the same instance.
    labels: int64 class ids `[n]`, or float32 relevance over all classes `[n, num_classes]` (ELWC lists).
  """

  features: np.ndarray | dict[str, np.ndarray]
  labels: np.ndarray

  def __post_init__(self):
    for name, array in (self.features.items() if isinstance(self.features, dict) else [("features",
                                                                                        self.features)]):
      if len(array) != len(self.labels):  # A text paired with another row's embedding would train silently.
        raise ValueError(f"ArraySplit: {name} has {len(array)} rows for {len(self.labels)} labels.")

  def __len__(self) -> int:
    return len(self.labels)

  @property
  def nbytes(self) -> int:
    """Bytes of the features and labels arrays (a string array counts its pointers)."""
    return sum(np.asarray(a).nbytes for a in tf.nest.flatten(self.features)) + self.labels.nbytes

  def make_dataset(self, batch_size: int, shuffle: bool, repeat: bool, seed: int,
                   input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
    """(features, labels) batches; per replica under `input_context`, each pipeline reading its own shard."""
    dataset = tf.data.Dataset.from_tensor_slices((self.features, self.labels))
    if input_context is not None and input_context.num_input_pipelines > 1:
      dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if shuffle:
      dataset = dataset.shuffle(len(self), seed=seed, reshuffle_each_iteration=True)
    if repeat:
      dataset = dataset.repeat()
    if input_context is not None:
      batch_size = input_context.get_per_replica_batch_size(batch_size)
    return dataset.batch(batch_size, drop_remainder=repeat).prefetch(tf.data.AUTOTUNE)


@dataclasses.dataclass
class RecordSplit:
  """One split stored as TFRecord files of classification `tf.Example`s.

  Attributes:
    file_pattern: Comma-separated globs.
    schema: How to parse the records.
    feature_key: The feature fed to the model.
  """

  file_pattern: str
  schema: tfrecords.ExampleSchema
  feature_key: str

  def __len__(self) -> int:
    return sum(tfrecords.count_records(path) for path in tfrecords.InputConfig(self.file_pattern).files())

  def make_dataset(self, batch_size: int, shuffle: bool, repeat: bool, seed: int,
                   input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
    config = tfrecords.InputConfig(self.file_pattern, batch_size=batch_size, shuffle=shuffle, seed=seed,
                                   num_epochs=None if repeat else 1, drop_remainder=repeat)
    key = self.feature_key
    return tfrecords.make_dataset(config, self.schema, input_context).map(lambda f, y: (f[key], y))


Split = ArraySplit | RecordSplit


@dataclasses.dataclass
class PreparedData:
  """The splits of one run, ready for `fit`.

  Attributes:
    class_names: Class names in id order.
    input_kind: TEXT_INPUT, EMBEDDING_INPUT, TEXT_AND_EMBEDDING_INPUT, IMAGE_INPUT or DENSE_INPUT.
    train: Training split.
    validation: Validation split (model selection).
    test: Test split (final report only), or None.
    text_handles: MiniLM TF Hub handles (preprocess, encoder) when the input is text read by MiniLM (frozen,
      fine-tuned or hybrid), else None (TF-IDF text too).
    validation_note: Where the validation split comes from, for the user (e.g. carved from the training data).
    conversions: Row files converted (or their conversion reused) for this run, by split name.
    embedded_texts: Texts turned into frozen embeddings (from the embedding cache or computed); 0 otherwise.
    computed_texts: Of those, the ones run through the encoder (not in the embedding cache).
    embedding_seconds: Wall time of that embedding (cache lookups included).
    class_texts: The texts of `DataConfig.class_texts` in class-id order, or None when no file is given.
    class_texts_note: The classes that file lists and the data lacks, for the user; None when there are none.
    raw_texts: The raw texts of (train, validation, test) in split order when the inputs are texts embedded by
      the frozen encoder (the features hold their embeddings), so text baselines read what the user gave; None
      otherwise (raw-text and hybrid splits hold the texts themselves).
  """

  class_names: list[str]
  input_kind: str
  train: Split
  validation: Split
  test: Split | None
  text_handles: tuple[str, str] | None = None
  validation_note: str | None = None
  conversions: dict[str, row_cache.ConvertedSplit] = dataclasses.field(default_factory=dict)
  embedded_texts: int = 0
  computed_texts: int = 0
  embedding_seconds: float = 0.0
  class_texts: list[str] | None = None
  class_texts_note: str | None = None
  raw_texts: tuple[np.ndarray | None, ...] | None = None


def _stratified_subset(labels: np.ndarray, size: int | None, seed: int) -> np.ndarray:
  """Indices of a stratified subset of `size` rows (all rows when `size` is None or too large)."""
  if size is None or size >= len(labels):
    return np.arange(len(labels))
  _, subset = datasets.train_validation_split(_strata(labels), size / len(labels), seed)
  return subset


def _record_split(pattern: str, schema: tfrecords.ExampleSchema) -> tuple[RecordSplit, str]:
  if schema.image_key is not None:
    return RecordSplit(pattern, schema, schema.image_key), IMAGE_INPUT
  if schema.dense_key is not None:
    return RecordSplit(pattern, schema, schema.dense_key), DENSE_INPUT
  if schema.text_key is not None:
    return RecordSplit(pattern, schema, schema.text_key), TEXT_INPUT
  raise ValueError(f"{pattern}: the schema has no image, dense or text feature to feed the model.")


def read_data(config: DataConfig) -> PreparedData:
  """The splits `config` describes, by input format, read but not embedded: raw text stays raw text (records
  streamed from disk when validation files are given and the text mode needs no embedding; otherwise, and for
  ELWC, read into memory, validation carved from the training split when none is given).

  Raises:
    ValueError / FileNotFoundError / DataError: for missing data packages or files, or bad records.
  """
  input_format = resolved_input_format(config)
  if input_format == ELWC:
    return _prepare_class_lists(config)
  if input_format == ROWS:
    return _prepare_rows(config)
  if config.dataset is None:
    return _prepare_records(config)
  if config.dataset in TEXT_DATASETS:
    train_data = datasets.load_text_classification(config.dataset, "train")
    test_data = datasets.load_text_classification(config.dataset, "test")
    train_features: np.ndarray = np.asarray(train_data.texts, dtype=object)
    test_features: np.ndarray = np.asarray(test_data.texts, dtype=object)
    kind = TEXT_INPUT
  else:
    train_data = datasets.load_image_classification(config.dataset, "train", config.image_data_dir)
    test_data = datasets.load_image_classification(config.dataset, "test", config.image_data_dir)
    train_features, test_features = train_data.images, test_data.images
    kind = IMAGE_INPUT
  return _in_memory(config, list(train_data.class_names), kind, (train_features, train_data.labels), None,
                    (test_features, test_data.labels))


def _in_memory(config: DataConfig, class_names: list[str], kind: str, train: tuple[np.ndarray, np.ndarray],
               validation: tuple[np.ndarray, np.ndarray] | None,
               test: tuple[np.ndarray, np.ndarray] | None) -> PreparedData:
  """Splits held as (features, labels) arrays: validation carved from train when None, stratified subsets;
  text stays raw (`rank4class.training.training_data.prepare_data` embeds it)."""
  note = f"{len(validation[1])} rows of {config.validation_files}" if validation is not None else None
  if validation is None:
    strata = _strata(train[1])
    train_idx, val_idx = datasets.train_validation_split(strata, config.validation_fraction,
                                                         config.split_seed)
    validation = (train[0][val_idx], train[1][val_idx])
    train = (train[0][train_idx], train[1][train_idx])
    note = (f"{len(val_idx):,} rows carved from the training data ({len(val_idx) / len(strata):.1%}; "
            f"`validation_fraction`={config.validation_fraction:g}, stratified by class, seed "
            f"{config.split_seed})")
    classes = len(np.unique(strata))
    missing = classes - len(np.unique(strata[val_idx]))
    if missing:
      note += f"; {missing:,} of {classes:,} classes have no validation row (too few rows for their share)"
  splits = []
  for split, size in ((train, config.max_train_examples), (validation, config.max_validation_examples),
                      (test, config.max_test_examples)):
    if split is not None:
      idx = _stratified_subset(split[1], size, config.split_seed)
      splits.append((split[0][idx], split[1][idx]))
  arrays = [ArraySplit(x, y if y.ndim == 2 else np.asarray(y, np.int64)) for x, y in splits]
  return PreparedData(class_names, kind, arrays[0], arrays[1], arrays[2] if len(arrays) > 2 else None,
                      validation_note=note)


def _strata(labels: np.ndarray) -> np.ndarray:
  """Class ids, or for relevance lists the most relevant class."""
  return np.argmax(labels, axis=1) if labels.ndim == 2 else labels


def resolved_input_format(config: DataConfig) -> str:
  """`config.input_format`, with "auto" resolved from the training files' extensions."""
  if config.input_format != AUTO:
    return config.input_format
  if config.train_files is not None and row_cache.is_row_pattern(config.train_files):
    return ROWS
  return EXAMPLE


def _prepare_rows(config: DataConfig) -> PreparedData:
  """Row files: each split converted once (the training split's vocabulary numbers the others), then read as
  the converter's TFRecords."""
  train = row_cache.convert_split(config.train_files, config.rows, config.label_vocab,
                                  cache_dir=config.row_cache_dir)
  num_features = convert.load_schema(train.vocab_path).dense_dim or None
  converted = {"train": train}
  for name, pattern in (("validation", config.validation_files), ("test", config.test_files)):
    if pattern:
      converted[name] = row_cache.convert_split(pattern, config.rows, train.vocab_path, num_features,
                                                config.row_cache_dir)
  records = dataclasses.replace(
      config, input_format=EXAMPLE, train_files=train.tfrecord, label_vocab=train.vocab_path,
      validation_files=converted["validation"].tfrecord if "validation" in converted else None,
      test_files=converted["test"].tfrecord if "test" in converted else None)
  data = _prepare_records(records)
  if config.validation_files:
    data.validation_note = f"{len(data.validation)} rows of {config.validation_files}"
  data.conversions = converted
  return data


def _prepare_records(config: DataConfig) -> PreparedData:
  """The converter's tf.Example TFRecords: streamed, or read into memory to carve validation / embed text."""
  first_file = tfrecords.InputConfig(config.train_files).files()[0]
  if tf.io.gfile.stat(first_file).length:
    tfrecords.first_record(first_file)  # A file that is no TFRecord is named before its vocabulary.
  vocab_path = config.label_vocab or convert.default_vocab_path(first_file)
  if not os.path.isfile(vocab_path):
    raise DataError(first_file, f"no label vocabulary {vocab_path} beside it",
                    expected="the converter's TFRecords with the .labels.json it writes beside them "
                    "(rank4class-convert), or `label_vocab`")
  metadata = convert.read_metadata(vocab_path)
  schema = tfrecords.ExampleSchema.from_dict(metadata["schema"])
  schema.num_classes = len(metadata["classes"])  # Labels out of range are errors.
  train, kind = _record_split(config.train_files, schema)
  validation = _record_split(config.validation_files, schema)[0] if config.validation_files else None
  test = _record_split(config.test_files, schema)[0] if config.test_files else None
  for split in (train, validation, test):
    if split is not None:  # An empty split would stop training later, naming nothing.
      tfrecords.require_records(tfrecords.InputConfig(split.file_pattern).files())
  if validation is not None and not (kind == TEXT_INPUT and config.text_mode in (FROZEN, HYBRID, AUTO_TEXT)):
    return PreparedData(list(metadata["classes"]), kind, train, validation, test,
                        validation_note=f"{config.validation_files}")
  read = [_read_records(split, kind) if split is not None else None for split in (train, validation, test)]
  return _in_memory(config, list(metadata["classes"]), kind, *read)


def read_split(split: Split, kind: str) -> tuple[np.ndarray | dict[str, np.ndarray], np.ndarray]:
  """All (features, labels) of a split in memory: an in-memory split's arrays, a record split read in file
  order."""
  if isinstance(split, ArraySplit):
    return split.features, split.labels
  return _read_records(split, kind)


def split_texts(split: Split, kind: str) -> np.ndarray:
  """The raw texts of a raw-text or hybrid split, in row order (object array `[n]`).

  Raises:
    ValueError: for a split of other inputs.
  """
  features = read_split(split, kind)[0]
  if kind == TEXT_AND_EMBEDDING_INPUT:
    return features[TEXT_KEY]
  if kind != TEXT_INPUT:
    raise ValueError(f"The split holds {kind} inputs, not raw texts.")
  return features


def _read_records(split: RecordSplit, kind: str) -> tuple[np.ndarray, np.ndarray]:
  """All (features, class ids) of a record split, in file order; texts decoded to str."""
  features, labels = [], []
  for x, y in split.make_dataset(1024, shuffle=False, repeat=False, seed=0):
    features.append(x.numpy())
    labels.append(y.numpy().reshape([-1]))
  if not labels:
    raise DataError(split.file_pattern, "no records", expected="TFRecord files with records")
  array = np.concatenate(features)
  if kind == TEXT_INPUT:
    array = np.asarray([t.decode("utf-8") for t in array.reshape([-1])], dtype=object)
  return array, np.concatenate(labels).astype(np.int64)


def _prepare_class_lists(config: DataConfig) -> PreparedData:
  """ELWC class lists: relevance over all classes per instance (text or dense instances)."""
  class_names = class_lists.read_class_names(config.label_vocab)
  patterns = [config.train_files, config.validation_files, config.test_files]
  read = [class_lists.read_class_lists(class_lists.ClassListsConfig(
      pattern, len(class_names), config.feature_key, config.label_key, config.class_id_key,
      UNLISTED_CLASSES[config.unlisted_classes])) if pattern else None for pattern in patterns]
  present = [r for r in read if r is not None]
  if len({(r.kind, r.features.shape[1:]) for r in present}) > 1:
    raise ValueError("The ELWC splits hold different instances: " + ", ".join(
        f"{p}: {r.kind} {list(r.features.shape[1:])}" for p, r in zip(patterns, read, strict=True) if r))
  kind = TEXT_INPUT if present[0].kind == class_lists.TEXT else DENSE_INPUT
  return _in_memory(config, class_names, kind, *[(r.features, r.relevance) if r else None for r in read])


def input_spec(split: Split) -> tf.TensorSpec | dict[str, tf.TensorSpec]:
  """The spec of one batch of a split's model inputs, batch axis None (a dict of specs for hybrid text)."""
  features = next(iter(split.make_dataset(1, shuffle=False, repeat=False, seed=0)))[0]
  return tf.nest.map_structure(lambda x: tf.TensorSpec([None, *x.shape[1:]], x.dtype), features)
