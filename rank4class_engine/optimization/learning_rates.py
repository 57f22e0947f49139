"""Learning-rate schedules: a constant rate, or a linear warmup followed by a linear decay to zero (the
schedule of Hugging Face's Trainer and of BERT's fine-tuning recipe)."""

from typing import Any

import tensorflow as tf

from rank4class_data.validation import check_choice, check_range

CONSTANT = "constant"
LINEAR = "linear"
SCHEDULES = (CONSTANT, LINEAR)


@tf.keras.utils.register_keras_serializable(package="rank4class")
class WarmupLinearDecay(tf.keras.optimizers.schedules.LearningRateSchedule):
  """`peak * step / warmup_steps` for the first `warmup_steps` steps, then `peak * (total_steps - step + 1) /
  (total_steps - warmup_steps)` down to `peak / (total_steps - warmup_steps)` at the last step; with
  `total_steps` None, `peak` after the warmup. Steps count from 1 (Keras passes the steps already taken).

  Example:
    WarmupLinearDecay(3e-5, warmup_steps=10, total_steps=100)(4)   # step 5: 1.5e-5
    WarmupLinearDecay(3e-5, warmup_steps=10, total_steps=100)(55)  # step 56: 3e-5 * 45 / 90 = 1.5e-5

  Args:
    peak: The rate at the end of the warmup.
    warmup_steps: Steps of the linear warmup (0: none).
    total_steps: The run's optimizer steps, or None for no decay.

  Raises:
    ValueError: For a peak <= 0, warmup steps < 0 or total steps <= warmup steps.
  """

  def __init__(self, peak: float, warmup_steps: int, total_steps: int | None = None):
    check_range("peak", peak, 0.0, low_inclusive=False)
    if warmup_steps < 0 or (total_steps is not None and total_steps <= warmup_steps):
      raise ValueError(f"Need 0 <= warmup_steps < total_steps, got warmup_steps={warmup_steps}, "
                       f"total_steps={total_steps}.")
    self._peak = float(peak)
    self._warmup_steps = int(warmup_steps)
    self._total_steps = None if total_steps is None else int(total_steps)

  def __call__(self, step) -> tf.Tensor:
    step = tf.cast(step, tf.float32) + 1.0
    rate = tf.constant(self._peak, tf.float32)
    if self._total_steps is not None:
      rate = self._peak * (self._total_steps - step + 1.0) / (self._total_steps - self._warmup_steps)
    if self._warmup_steps:
      rate = tf.where(step <= self._warmup_steps, self._peak * step / self._warmup_steps, rate)
    return tf.clip_by_value(rate, 0.0, self._peak)

  def get_config(self) -> dict[str, Any]:
    return {"peak": self._peak, "warmup_steps": self._warmup_steps, "total_steps": self._total_steps}


def make_learning_rate(peak: float, schedule: str, warmup_fraction: float,
                       total_steps: int | None) -> float | WarmupLinearDecay:
  """The optimizer's learning rate: `peak` itself for "constant" without warmup, else a `WarmupLinearDecay`
  with `round(warmup_fraction * total_steps)` warmup steps, decaying over `total_steps` for "linear".

  Raises:
    ValueError: For an unknown schedule, a warmup fraction outside [0, 1), or a schedule without total steps.
  """
  check_choice("schedule", schedule, SCHEDULES)
  check_range("warmup_fraction", warmup_fraction, 0.0, 1.0, high_inclusive=False)
  if schedule == CONSTANT and warmup_fraction == 0.0:
    return peak
  if total_steps is None:
    raise ValueError(f"The {schedule!r} schedule with warmup {warmup_fraction:g} needs the "
                     "run's total steps.")
  warmup = min(round(warmup_fraction * total_steps), total_steps - 1)
  return WarmupLinearDecay(peak, warmup, total_steps if schedule == LINEAR else None)
