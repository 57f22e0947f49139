"""The image instance encoder of Rank4Class: a small CNN or a `tf.keras.applications` backbone, global
pooling, and its augmentation with resumable draws in training (`RandomShift`).

A small CNN trained from scratch on tens of thousands of images over-fits within a few epochs; shifting each
image by a few pixels is the augmentation every CNN recipe for MNIST-like data uses, and it is safe for any
image set (a flip is not: it turns a 2 into a mirrored 2, so it is an option). As `ResumableDropout`, the
draws are a pure function of (the layer's seed, a call counter kept as a weight, the replica), so a resumed
run augments its batches as an uninterrupted one would (`rank4class_engine.loop.trainer`'s resume guarantee).

Example:
  layer = RandomShift(max_shift=2, seed=7)
  layer(images, training=True)  # each image moved by -2..2 pixels on both axes, the border filled with 0
"""

import random
from typing import Any

import tensorflow as tf

from rank4class.modeling import instance_encoder
from rank4class_data import validation
from rank4class_engine.loop import resumable_dropout

SMALL_CNN = "small_cnn"
# Backbones from `tf.keras.applications` by name; always built without downloads unless weights are given.
APPLICATION_BACKBONES = {
  "resnet50": tf.keras.applications.ResNet50,
  "vgg16": tf.keras.applications.VGG16,
  "mobilenet_v2": tf.keras.applications.MobileNetV2,
  "efficientnet_b0": tf.keras.applications.EfficientNetB0,
  "densenet121": tf.keras.applications.DenseNet121,
}
BACKBONE_NAMES = (SMALL_CNN, *APPLICATION_BACKBONES)
POOLINGS = ("avg", "max")


@tf.keras.utils.register_keras_serializable(package="rank4class")
class RandomShift(tf.keras.layers.Layer):
  """Moves each training image by a whole number of pixels drawn from [-max_shift, max_shift] on each axis
  (the uncovered border filled with `fill_value`), and mirrors it left-right with probability 1/2 when `flip`.

  Args:
    max_shift: Largest shift in pixels, >= 0 (0 and no flip: the identity).
    flip: Also mirror half of the images left to right (for images whose classes do not depend on handedness).
    fill_value: The value of the pixels shifted in (after the encoder's rescale: 0 is black for pixels / 255).
    seed: Integer seed; None draws one from Python's `random` (seeded by `tf.keras.utils.set_random_seed`),
      kept in the config.

  Call inputs: float images `[batch_size, height, width, channels]`; `training`.
  Returns: the same shape and dtype.

  Raises:
    ValueError: for a negative `max_shift`.
  """

  def __init__(self, max_shift: int = 2, flip: bool = False, fill_value: float = 0.0, seed: int | None = None,
               **kwargs):
    super().__init__(**kwargs)
    validation.check_range("max_shift", max_shift, 0, integer=True)  # Pixels.
    self._max_shift = int(max_shift)
    self._flip = bool(flip)
    self._fill_value = float(fill_value)
    self._seed = int(seed) if seed is not None else random.randrange(2**31)

  @property
  def max_shift(self) -> int:
    return self._max_shift

  @property
  def flip(self) -> bool:
    return self._flip

  def build(self, input_shape):
    if tf.TensorShape(input_shape).rank != 4:
      raise ValueError(f"RandomShift expects [batch, height, width, channels] images, got {input_shape}.")
    self._calls = resumable_dropout.add_call_counter(self)
    super().build(input_shape)

  def call(self, inputs, training=None):
    if not training or (self._max_shift == 0 and not self._flip):
      return inputs
    seed = resumable_dropout.next_call_seed(self._seed, self._calls)
    batch = tf.shape(inputs)[0]
    images = inputs
    if self._flip:
      mirrored = tf.random.stateless_uniform([batch],
                                             seed=tf.random.experimental.stateless_fold_in(seed, 1)) < 0.5
      images = tf.where(mirrored[:, tf.newaxis, tf.newaxis, tf.newaxis], tf.reverse(images, axis=[2]), images)
    if self._max_shift > 0:
      shifts = tf.cast(tf.random.stateless_uniform(
          [batch, 2], seed=tf.random.experimental.stateless_fold_in(seed, 2), minval=-self._max_shift,
          maxval=self._max_shift + 1, dtype=tf.int32), tf.float32)
      images = translate(images, shifts, self._fill_value)
    return images

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "max_shift": self._max_shift, "flip": self._flip,
            "fill_value": self._fill_value, "seed": self._seed}


def translate(images: tf.Tensor, shifts: tf.Tensor, fill_value: float = 0.0) -> tf.Tensor:
  """`images` `[batch, height, width, channels]` moved by `shifts` `[batch, 2]` (dx to the right, dy down,
  whole pixels): `output[b, y, x] = images[b, y - dy, x - dx]`, `fill_value` where that falls outside the
  image."""
  zeros = tf.zeros_like(shifts[:, 0])
  ones = tf.ones_like(zeros)
  # ImageProjectiveTransformV3 maps each output pixel (x, y) to the input pixel (x + a2, y + b2).
  transforms = tf.stack([ones, zeros, -shifts[:, 0], zeros, ones, -shifts[:, 1], zeros, zeros], axis=1)
  return tf.raw_ops.ImageProjectiveTransformV3(
      images=images, transforms=transforms, output_shape=tf.shape(images)[1:3],
      fill_value=tf.constant(fill_value, tf.float32), interpolation="NEAREST", fill_mode="CONSTANT")


@tf.keras.utils.register_keras_serializable(package="rank4class")
class ImageEncoder(instance_encoder.InstanceEncoder):
  """Encodes images with a CNN backbone followed by global pooling (ResNet50/VGG16 in the paper, App. B.2).

  `backbone` is "small_cnn" (a few conv + max-pool blocks, fast on CPU), the name of a
  `tf.keras.applications` model in `APPLICATION_BACKBONES` (built with `include_top=False` and
  `weights=backbone_weights`, None by default so nothing is downloaded), or any `tf.keras.Model` mapping
  images to a feature map `[batch_size, h, w, channels]` or to vectors `[batch_size, channels]`.
  Pixels are mapped by `x * rescale + offset` first; grayscale `[batch_size, height, width]` gets a channel
  axis.

  Example:
    encoder = ImageEncoder(backbone="small_cnn", filters=(16, 32), rescale=1 / 16)
    encoder(tf.zeros([4, 8, 8, 1], tf.uint8)).shape  # [4, 32]

  Args:
    backbone: "small_cnn", a name in `APPLICATION_BACKBONES`, or a `tf.keras.Model`.
    image_shape: `(height, width, channels)`; required by `tf.keras.applications` backbones.
    filters: Conv widths of the "small_cnn" blocks (ignored otherwise).
    pooling: "avg" or "max" global pooling of the feature map.
    rescale: Multiplier applied to the pixels.
    offset: Added to the pixels after `rescale`.
    output_dim: Optional size of a linear projection on top; None keeps the backbone's channels.
    dropout: Dropout rate before the projection, in [0, 1).
    backbone_weights: `weights` argument of a `tf.keras.applications` backbone (None: random init).
    shift: Training images are moved by up to this many pixels on each axis (`RandomShift`,
      the identity at inference); 0: none.
    flip: Training images are also mirrored left-right with probability 1/2 (not for digits or text).

  Call inputs: numeric `[batch_size, height, width, channels]` or `[batch_size, height, width]`.
  Returns: `[batch_size, output_dim or channels]`.
  """

  def __init__(
    self,
    backbone: str | tf.keras.Model = SMALL_CNN,
    image_shape: tuple[int, int, int] | None = None,
    filters: tuple[int, ...] = (32, 64, 128),
    pooling: str = "avg",
    rescale: float = 1.0 / 255.0,
    offset: float = 0.0,
    output_dim: int | None = None,
    dropout: float = 0.0,
    backbone_weights: str | None = None,
    shift: int = 0,
    flip: bool = False,
    **kwargs,
  ):
    super().__init__(**kwargs)
    if isinstance(backbone, dict):  # A serialized custom backbone, from get_config.
      backbone = tf.keras.layers.deserialize(backbone)
    if isinstance(backbone, str):
      validation.check_choice("backbone", backbone, BACKBONE_NAMES)  # Or a tf.keras.Model (below).
      if backbone in APPLICATION_BACKBONES and image_shape is None:
        raise ValueError(f"Backbone {backbone!r} needs `image_shape` (height, width, channels).")
    elif not isinstance(backbone, tf.keras.Model):
      raise ValueError(
        f"`backbone` must be a name in {BACKBONE_NAMES} or a tf.keras.Model, got {backbone!r}."
      )
    if image_shape is not None:
      image_shape = tuple(image_shape)
      if len(image_shape) != 3 or any(not isinstance(d, int) or d < 1 for d in image_shape):
        raise ValueError(f"`image_shape` must be (height, width, channels) positive ints, got {image_shape}.")
    validation.check_choice("pooling", pooling, POOLINGS)
    self._backbone_arg = backbone
    self._image_shape = image_shape
    self._filters = validation.check_widths("filters", filters, allow_empty=False)
    self._pooling = pooling
    self._rescale = float(rescale)
    self._offset = float(offset)
    self._output_dim = instance_encoder.check_output_dim(output_dim)
    self._dropout = instance_encoder.check_dropout(dropout)
    self._backbone_weights = backbone_weights
    self._augmentation = (RandomShift(shift, flip=flip, name="augmentation")
                          if shift or flip else None)
    self._feature_dim = None

  @property
  def output_dim(self) -> int | None:
    return self._output_dim if self._output_dim is not None else self._feature_dim

  def _make_backbone(self) -> tf.keras.Model | list[tf.keras.layers.Layer]:
    if isinstance(self._backbone_arg, tf.keras.Model):
      return self._backbone_arg
    if self._backbone_arg == SMALL_CNN:
      layers = []
      for i, width in enumerate(self._filters):
        layers.append(tf.keras.layers.Conv2D(width, 3, padding="same", activation="relu", name=f"conv_{i}"))
        layers.append(tf.keras.layers.MaxPool2D(2, padding="same", name=f"pool_{i}"))
      self._feature_dim = self._filters[-1]
      return layers
    application = APPLICATION_BACKBONES[self._backbone_arg]
    return application(include_top=False, weights=self._backbone_weights, input_shape=self._image_shape)

  def build(self, input_shape):
    input_shape = tf.TensorShape(input_shape)
    self._seen_input_shape = input_shape
    if input_shape.rank not in (3, 4):
      raise ValueError(f"ImageEncoder expects [batch, height, width(, channels)] images, got {input_shape}.")
    self._backbone = self._make_backbone()
    self._build_dropout_and_projection()
    super().build(input_shape)

  def _features(self, images: tf.Tensor, training: bool | None) -> tf.Tensor:
    if isinstance(self._backbone, list):
      x = images
      for layer in self._backbone:
        x = layer(x)
    else:
      x = self._backbone(images, training=training)
    if x.shape.rank == 4:
      x = tf.reduce_mean(x, axis=[1, 2]) if self._pooling == "avg" else tf.reduce_max(x, axis=[1, 2])
    self._feature_dim = x.shape[-1]
    return x

  def call(self, inputs, training=None):
    images = tf.cast(inputs, self.compute_dtype) * self._rescale + self._offset
    if images.shape.rank == 3:
      images = images[..., tf.newaxis]
    if self._augmentation is not None:
      images = self._augmentation(images, training=training)
    x = self._features(images, training)
    return self._dropout_and_projection(x, training)

  def get_config(self) -> dict[str, Any]:
    backbone = self._backbone_arg
    if isinstance(backbone, tf.keras.Model):
      backbone = tf.keras.layers.serialize(backbone)
    return {
      **super().get_config(),
      "backbone": backbone,
      "image_shape": list(self._image_shape) if self._image_shape else None,
      "filters": list(self._filters),
      "pooling": self._pooling,
      "rescale": self._rescale,
      "offset": self._offset,
      "output_dim": self._output_dim,
      "dropout": self._dropout,
      "backbone_weights": self._backbone_weights,
      "shift": self._augmentation.max_shift if self._augmentation is not None else 0,
      "flip": self._augmentation.flip if self._augmentation is not None else False,
    }
