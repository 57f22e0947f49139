"""Image augmentation whose draws a checkpoint determines: random shifts (and optional mirror flips) of the
training images, the identity at inference.

A small CNN trained from scratch on tens of thousands of images over-fits within a few epochs; shifting each
image by a few pixels is the augmentation every CNN recipe for MNIST-like data uses, and it is safe for any
image set (a flip is not: it turns a 2 into a mirrored 2, so it is an option). As `ResumableDropout`, the draws
are a pure function of (the layer's seed, a call counter kept as a weight, the replica), so a resumed run
augments its batches as an uninterrupted one would (`rank4class_engine.trainer`'s resume guarantee).

Example:
  layer = RandomShift(max_shift=2, seed=7)
  layer(images, training=True)  # each image moved by -2..2 pixels on both axes, the border filled with 0
"""

import random
from typing import Any

import tensorflow as tf

from rank4class_data.validation import check_range
from rank4class_engine import resumable_dropout


@tf.keras.utils.register_keras_serializable(package="rank4class")
class RandomShift(tf.keras.layers.Layer):
  """Moves each training image by a whole number of pixels drawn from [-max_shift, max_shift] on each axis (the
  uncovered border filled with `fill_value`), and mirrors it left-right with probability 1/2 when `flip`.

  Args:
    max_shift: Largest shift in pixels, >= 0 (0 and no flip: the identity).
    flip: Also mirror half of the images left to right (for images whose classes do not depend on handedness).
    fill_value: The value of the pixels shifted in (after the encoder's rescale: 0 is black for pixels / 255).
    seed: Integer seed; None draws one from Python's `random` (seeded by `tf.keras.utils.set_random_seed`), kept
      in the config.

  Call inputs: float images `[batch_size, height, width, channels]`; `training`.
  Returns: the same shape and dtype.

  Raises:
    ValueError: for a negative `max_shift`.
  """

  def __init__(self, max_shift: int = 2, flip: bool = False, fill_value: float = 0.0, seed: int | None = None,
               **kwargs):
    super().__init__(**kwargs)
    check_range("max_shift", max_shift, 0, integer=True)  # Pixels.
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
      mirrored = tf.random.stateless_uniform([batch], seed=tf.random.experimental.stateless_fold_in(seed, 1)) < 0.5
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
  """`images` `[batch, height, width, channels]` moved by `shifts` `[batch, 2]` (dx to the right, dy down, whole
  pixels): `output[b, y, x] = images[b, y - dy, x - dx]`, `fill_value` where that falls outside the image."""
  zeros = tf.zeros_like(shifts[:, 0])
  ones = tf.ones_like(zeros)
  # ImageProjectiveTransformV3 maps each output pixel (x, y) to the input pixel (x + a2, y + b2).
  transforms = tf.stack([ones, zeros, -shifts[:, 0], zeros, ones, -shifts[:, 1], zeros, zeros], axis=1)
  return tf.raw_ops.ImageProjectiveTransformV3(
      images=images, transforms=transforms, output_shape=tf.shape(images)[1:3],
      fill_value=tf.constant(fill_value, tf.float32), interpolation="NEAREST", fill_mode="CONSTANT")
