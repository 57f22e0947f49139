"""Tests for rank4class_data.conversion.image_folders: class-named image subfolders -> the converter's
TFRecord."""

import json
import os

import numpy as np
import tensorflow as tf

from rank4class_data.conversion import convert, image_folders, row_cache
from rank4class_data.conversion.image_folders import ImageFolderConfig
from rank4class_data.records import tfrecords
from rank4class_data.rows import bad_rows
from rank4class_data.validation import DataError


def _image(value: int, shape=(4, 6, 3)) -> np.ndarray:
  return (np.arange(np.prod(shape)).reshape(shape) * 3 + value).astype(np.uint8)


def _write(path: str, image: np.ndarray) -> str:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(tf.io.encode_png(image).numpy())
  return path


class ImageFoldersTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    self.folder = os.path.join(self.root, "train")
    _write(os.path.join(self.folder, "dog", "b.png"), _image(2))
    _write(os.path.join(self.folder, "cat", "a.png"), _image(0))
    _write(os.path.join(self.folder, "cat", "more", "c.PNG"), _image(1))  # Nested, upper-case extension.
    with open(os.path.join(self.folder, "cat", "notes.txt"), "w") as f:
      f.write("not an image")  # Ignored: not an image extension.

  def _read(self, output: str) -> list[tfrecords.ClassificationInstance]:
    return list(tfrecords.read_instances(output, convert.load_schema(convert.default_vocab_path(output))))

  def test_class_subfolders_become_labelled_uint8_examples(self):
    output = os.path.join(self.root, "train.tfrecord")
    summary = image_folders.convert_image_folder(ImageFolderConfig(self.folder, output))
    self.assertEqual((summary.rows, summary.class_counts), (3, {"cat": 2, "dog": 1}))
    instances = self._read(output)
    self.assertEqual([i.label for i in instances], [0, 0, 1])
    for instance, value in zip(instances, [0, 1, 2], strict=True):
      self.assertAllEqual(instance.image, _image(value))  # PNG is lossless: the pixels round-trip.
    schema = convert.load_schema(convert.default_vocab_path(output))
    self.assertEqual((schema.image_key, schema.image_shape, schema.text_key), ("image", (4, 6, 3), None))

  def test_resize_and_grey(self):
    _write(os.path.join(self.folder, "dog", "big.png"), _image(5, (8, 12, 3)))
    output = os.path.join(self.root, "small.tfrecord")
    image_folders.convert_image_folder(ImageFolderConfig(self.folder, output, image_size=(2, 3), channels=1))
    instances = self._read(output)
    self.assertEqual([i.image.shape for i in instances], [(2, 3, 1)] * 4)
    expected = tf.image.resize(tf.image.rgb_to_grayscale(_image(0)), (2, 3))
    self.assertAllClose(instances[0].image.astype(np.float32), expected, atol=1.0)

  def test_bad_images_fail_or_are_skipped_and_listed(self):
    corrupt = os.path.join(self.folder, "dog", "corrupt.png")
    with open(corrupt, "wb") as f:
      f.write(b"\x89PNG not really")
    odd = _write(os.path.join(self.folder, "dog", "odd.png"), _image(7, (5, 5, 3)))
    output = os.path.join(self.root, "out.tfrecord")
    with self.assertRaisesRegex(DataError, r"corrupt\.png, field 'image': not a decodable image"):
      image_folders.convert_image_folder(ImageFolderConfig(self.folder, output))
    self.assertFalse(os.path.exists(output))
    summary = image_folders.convert_image_folder(ImageFolderConfig(
        self.folder, output, bad_rows=bad_rows.BadRowPolicy(bad_rows.SKIP)))
    self.assertEqual((summary.rows, summary.rejected), (3, 2))
    with open(summary.rejects_path) as f:
      rejects = [json.loads(line) for line in f]
    self.assertEqual([(r["file"], r["reason"]) for r in rejects], [
        (corrupt, "not a decodable image"),
        (odd, "shape [5, 5, 3] differs from the first image's [4, 6, 3]")])

  def test_vocabulary_of_the_training_folder_fixes_ids(self):
    train = os.path.join(self.root, "train.tfrecord")
    image_folders.convert_image_folder(ImageFolderConfig(self.folder, train))
    test_folder = os.path.join(self.root, "test")
    _write(os.path.join(test_folder, "dog", "x.png"), _image(9))
    test = os.path.join(self.root, "test.tfrecord")
    image_folders.convert_image_folder(ImageFolderConfig(test_folder, test,
                                                         label_vocab_path=convert.default_vocab_path(train)))
    self.assertEqual([i.label for i in self._read(test)], [1])  # "dog" keeps id 1 although it is alone.
    _write(os.path.join(test_folder, "bird", "y.png"), _image(9))
    with self.assertRaisesRegex(DataError, r"y\.png, field 'class': class folder 'bird' is not in the vocab"):
      image_folders.convert_image_folder(ImageFolderConfig(test_folder, test,
                                                           label_vocab_path=convert.default_vocab_path(train)))

  def test_empty_or_missing_folders_and_bad_settings(self):
    empty = self.create_tempdir().full_path
    os.makedirs(os.path.join(empty, "cat"))
    with self.assertRaisesRegex(DataError, "no images in class subfolders"):
      image_folders.list_images(empty)
    with self.assertRaisesRegex(FileNotFoundError, "no such folder"):
      image_folders.list_images(os.path.join(empty, "nope"))
    with self.assertRaisesRegex(ValueError, r"`channels` must be one of \[None, 1, 3\], got "):
      ImageFolderConfig(empty, "o.tfrecord", channels=4)
    with self.assertRaisesRegex(ValueError, "`image_size` must be"):
      ImageFolderConfig(empty, "o.tfrecord", image_size=(0, 3))

  def test_training_converts_an_image_folder_once_through_the_row_cache(self):
    cache = os.path.join(self.root, "cache")
    self.assertTrue(row_cache.is_row_pattern(self.folder))
    first = row_cache.convert_split(self.folder, row_cache.RowConversion(image_size=(4, 6)), cache_dir=cache)
    self.assertEqual((first.reused, first.summary.class_counts), (False, {"cat": 2, "dog": 1}))
    self.assertTrue(row_cache.convert_split(self.folder, row_cache.RowConversion(image_size=(4, 6)),
                                            cache_dir=cache).reused)
    _write(os.path.join(self.folder, "dog", "b.png"), _image(3))  # Changed pixels: converted again.
    self.assertFalse(row_cache.convert_split(self.folder, row_cache.RowConversion(image_size=(4, 6)),
                                             cache_dir=cache).reused)


if __name__ == "__main__":
  tf.test.main()
