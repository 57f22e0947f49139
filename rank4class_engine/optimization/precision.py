"""Mixed-precision policies for training: float32 by default, bfloat16 or float16 compute on request.

Models keep their variables in float32 under the mixed policies, and the toolkit's models return float32
scores, so TF-Ranking's losses and metrics (sorting, softmax, exponentiated gains) run in float32 (TF-Ranking
#254). Keras wraps the optimizer in a `LossScaleOptimizer` under `mixed_float16` when the model is compiled.
"""

import contextlib
from collections.abc import Iterator

import tensorflow as tf

from rank4class_data.messages import say
from rank4class_data.validation import check_choice

FLOAT32 = "float32"
MIXED_BFLOAT16 = "mixed_bfloat16"
MIXED_FLOAT16 = "mixed_float16"
POLICIES = (FLOAT32, MIXED_BFLOAT16, MIXED_FLOAT16)


def check_policy(name: str) -> str:
  """Returns `name` if it is one of POLICIES; raises ValueError naming the allowed ones otherwise."""
  check_choice("precision", name, POLICIES)
  return name


@contextlib.contextmanager
def policy_scope(name: str) -> Iterator[tf.keras.mixed_precision.Policy]:
  """Sets the global Keras dtype policy while models are built (layers read it when created), then restores
  it.

  Example:
    with precision.policy_scope("mixed_bfloat16"):
      model = build_model(...)   # bfloat16 compute, float32 variables and scores
      model.compile(...)

  Args:
    name: One of POLICIES. `mixed_float16` without a GPU runs, slowly, and says so in the log.
  """
  check_policy(name)
  if name == MIXED_FLOAT16 and not tf.config.list_logical_devices("GPU"):
    say("mixed_float16 without a GPU: float16 math is emulated on CPU and slow; use mixed_bfloat16.")
  previous = tf.keras.mixed_precision.global_policy()
  tf.keras.mixed_precision.set_global_policy(name)
  try:
    yield tf.keras.mixed_precision.global_policy()
  finally:
    tf.keras.mixed_precision.set_global_policy(previous)
