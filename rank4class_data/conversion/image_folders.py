"""Images in class-named subfolders (`<root>/<class>/<image>`, the usual layout) -> the converter's TFRecord.

Every image becomes one uint8 `tf.Example` of one fixed shape (`ExampleSchema.image_key`/`image_shape`), with
the label vocabulary JSON beside it, so images train, evaluate and predict like any other converted data. An
image that cannot be decoded, or that has another size when no `image_size` is given, is a bad row under the
same policy as the converter's rows (fail, or skip and list it in the rejects file).
"""

import dataclasses
import os

import numpy as np
import tensorflow as tf

from rank4class_data import file_formats, progress_line
from rank4class_data.conversion import convert
from rank4class_data.label_vocabulary import LabelVocabulary
from rank4class_data.records import tfrecords
from rank4class_data.rows import bad_rows as bad_rows_lib
from rank4class_data.validation import DataError, FieldError, check_choice

IMAGE_EXTENSIONS = file_formats.get("images").extensions
_FIELD = "image"


@dataclasses.dataclass
class ImageFolderConfig:
  """What `convert_image_folder` reads and writes.

  Attributes:
    input_dir: Folder with one subfolder per class, named by the class, holding its images (files with
      `IMAGE_EXTENSIONS`, searched recursively inside each class folder).
    output_path: TFRecord of `tf.Example`s to write.
    image_size: (height, width) every image is resized to (bilinear); None: every image must have the first
      image's size.
    channels: 1 (grey) or 3 (RGB) channels every image is converted to; None: the first image's.
    label_vocab_path: Existing vocabulary (another conversion's JSON, or one class a line): fixes the ids; a
      subfolder outside it is an error. Use the training folder's for the test folder.
    vocab_output_path: Where to write the vocabulary JSON; None for `<output without extension>.labels.json`.
    bad_rows: What an unreadable or odd-sized image does (`rank4class_data.rows.bad_rows`).
  """

  input_dir: str
  output_path: str
  image_size: tuple[int, int] | None = None
  channels: int | None = None
  label_vocab_path: str | None = None
  vocab_output_path: str | None = None
  bad_rows: bad_rows_lib.BadRowPolicy = dataclasses.field(default_factory=bad_rows_lib.BadRowPolicy)

  def __post_init__(self):
    if isinstance(self.bad_rows, dict):
      self.bad_rows = bad_rows_lib.BadRowPolicy(**self.bad_rows)
    if self.image_size is not None:
      self.image_size = tuple(int(d) for d in self.image_size)
      if len(self.image_size) != 2 or min(self.image_size) < 1:
        raise ValueError(f"`image_size` must be (height, width), two positive ints, got {self.image_size}.")
    check_choice("channels", self.channels, (None, 1, 3))  # None: the first image's.

  @property
  def vocab_path(self) -> str:
    return self.vocab_output_path or convert.default_vocab_path(self.output_path)


def is_image_folder(path: str) -> bool:
  """Whether `path` is a folder (the class-subfolder layout is checked when it is read)."""
  return os.path.isdir(os.path.expanduser(path))


def _is_image(name: str) -> bool:
  return os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS


def list_images(input_dir: str, unlabelled: bool = False) -> list[tuple[str | None, str]]:
  """(class name, image path) of every image under `input_dir`'s class subfolders, sorted by class, then path.

  Args:
    input_dir: The folder.
    unlabelled: Also list the images directly in `input_dir` (class None, first): new images to predict.

  Raises:
    DataError: naming the folder, when it holds no image where one is looked for.
  """
  root = os.path.expanduser(input_dir)
  if not os.path.isdir(root):
    raise FileNotFoundError(f"{input_dir}: no such folder")
  names = sorted(os.listdir(root))
  images = [(None, os.path.join(root, n)) for n in names
            if unlabelled and _is_image(n) and os.path.isfile(os.path.join(root, n))]
  for name in names:
    folder = os.path.join(root, name)
    if not os.path.isdir(folder) or name.startswith("."):
      continue
    for parent, _, files in sorted(os.walk(folder)):
      images += [(name, os.path.join(parent, f)) for f in sorted(files) if _is_image(f)]
  if not images:
    raise DataError(input_dir, "no images" + (" in it or" if unlabelled else "") + " in class subfolders",
                    expected=f"<folder>/<class name>/<image>, images ending in {', '.join(IMAGE_EXTENSIONS)}")
  return images


def read_image(path: str, image_size: tuple[int, int] | None = None, channels: int | None = None,
               shape: tuple[int, int, int] | None = None) -> np.ndarray:
  """The image file as uint8 [height, width, channels], resized to `image_size` when given.

  Raises:
    FieldError: for an undecodable image, or one whose shape is not `shape` (when given).
  """
  with open(path, "rb") as f:
    data = f.read()
  try:
    image = tf.io.decode_image(data, channels=channels or 0, expand_animations=False)
  except (tf.errors.InvalidArgumentError, ValueError):
    raise FieldError(_FIELD, "not a decodable image", f"a {', '.join(IMAGE_EXTENSIONS)} image") from None
  if image_size is not None:
    image = tf.cast(tf.round(tf.clip_by_value(tf.image.resize(image, image_size), 0, 255)), tf.uint8)
  image = image.numpy()
  if shape is not None and image.shape != tuple(shape):
    raise FieldError(_FIELD, f"shape {list(image.shape)} differs from the first image's {list(shape)}",
                     "images of one size and channel count (or set image_size / channels)")
  return image


def convert_image_folder(config: ImageFolderConfig) -> convert.ConversionSummary:
  """Converts a folder of class-named image subfolders into a TFRecord plus its label vocabulary JSON.

  Both files (and under "skip" the rejects file) appear together, only when the conversion succeeds.

  Raises:
    FileNotFoundError / DataError: naming the folder or the image and what was expected.
  """
  images = list_images(config.input_dir)
  vocabulary = (LabelVocabulary.from_file(config.label_vocab_path) if config.label_vocab_path
                else LabelVocabulary.from_labels([name for name, _ in images]))
  ids = vocabulary.label_to_id
  rejected = bad_rows_lib.RejectedRows(config.bad_rows)
  instances, shape = [], None
  progress = progress_line.ProgressLine(progress_line.DEFAULT_EVERY_SECONDS)
  for name, path in images:
    try:
      if name not in ids:
        raise FieldError("class", f"class folder {name!r} is not in the vocabulary",
                         f"one of {vocabulary.classes[:20]} ({config.label_vocab_path})")
      image = read_image(path, config.image_size, config.channels, shape)
    except FieldError as e:
      rejected(e.at(path, None))  # The path names the image.
      continue
    shape = shape or image.shape
    instances.append(tfrecords.ClassificationInstance(label=ids[name], image=image))
    if progress.due():
      progress.show(f"converting: {len(instances):,} images ({len(instances) / progress.elapsed:,.0f} "
                    f"images/s, {len(rejected)} rejected)")
  progress.close()
  if not instances:
    raise DataError(config.input_dir, f"no readable image ({len(rejected)} rejected)", expected="images")
  counts = np.bincount([i.label for i in instances], minlength=len(vocabulary.classes))
  vocabulary = LabelVocabulary(vocabulary.classes, [int(c) for c in counts])
  schema = tfrecords.ExampleSchema(text_key=None, image_key=tfrecords.IMAGE_KEY, image_shape=shape,
                                   num_classes=len(vocabulary.classes))
  metadata = {**vocabulary.to_json(), "rows": len(instances), "schema": schema.to_dict(),
              "config": dataclasses.asdict(config)}
  return convert.write_conversion(config.input_dir, config.output_path, config.vocab_path, instances, schema,
                                  metadata, vocabulary, rejected)
