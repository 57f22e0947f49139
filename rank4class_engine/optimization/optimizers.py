"""The one optimizer factory of every model family: Adam, Adagrad, AdamW or lazy Adam from an
`OptimizerConfig`, with its learning-rate schedule (`rank4class_engine.optimization.learning_rates`), gradient
clipping and the variables left out of weight decay."""

import dataclasses
from typing import Any

import tensorflow as tf

from rank4class_data.validation import check_choice, check_range
from rank4class_engine.optimization import lazy_adam
from rank4class_engine.optimization import learning_rates as learning_rates_lib

ADAM = "adam"
ADAGRAD = "adagrad"
ADAMW = "adamw"
LAZY_ADAM = "lazy_adam"  # Sparse rows only (many classes): `rank4class_engine.optimization.lazy_adam`.
OPTIMIZERS = (ADAM, ADAGRAD, ADAMW, LAZY_ADAM)
# Variable-name patterns (`re.search` in the variable's name) that BERT's fine-tuning recipe leaves out of
# weight decay, with the pairwise tower's norms and PReLU slopes: biases, layer and batch norms (their gamma
# and beta), PReLU's alpha. The pairwise models' AdamW uses them; Rank4Class's AdamW decays every variable.
NO_DECAY_NAMES = ("bias", "LayerNorm", "layer_norm", "batch_norm", "gamma", "beta", "alpha")


@dataclasses.dataclass
class OptimizerConfig:
  """The optimizer (the Rank4Class paper uses Adam and Adagrad, App. C; Rank over Class AdamW, §4).

  Attributes:
    type: One of `OPTIMIZERS`.
    learning_rate: Initial learning rate (the peak of `schedule`).
    weight_decay: Decoupled weight decay of "adamw" (the other types do not decay).
    clipnorm: Optional clipping of each gradient's norm.
    schedule: One of `rank4class_engine.optimization.learning_rates.SCHEDULES`: "constant", or "linear" (decay
      to 0 over the run's steps).
    warmup_fraction: Share of the run's steps over which the rate rises linearly from 0 to `learning_rate`.
    beta_1: Decay of the first moment ("adam", "adamw", "lazy_adam").
    beta_2: Decay of the second moment ("adam", "adamw", "lazy_adam").
    epsilon: Added to the root of the second moment (Adagrad: of the accumulator); Keras' 1e-7 by default.
    global_clipnorm: Optional clipping of the norm of all gradients together (not with `clipnorm`).
    exclude_from_decay: Variable-name patterns (`re.search`) that "adamw" does not decay, e.g.
      `NO_DECAY_NAMES`.
  """

  type: str = ADAM
  learning_rate: float = 1e-3
  weight_decay: float = 1e-4
  clipnorm: float | None = None
  schedule: str = learning_rates_lib.CONSTANT
  warmup_fraction: float = 0.0
  beta_1: float = 0.9
  beta_2: float = 0.999
  epsilon: float = 1e-7
  global_clipnorm: float | None = None
  exclude_from_decay: tuple[str, ...] = ()

  def __post_init__(self):
    check_choice("type", self.type, OPTIMIZERS)
    check_range("learning_rate", self.learning_rate, 0.0, low_inclusive=False)
    check_choice("schedule", self.schedule, learning_rates_lib.SCHEDULES)
    check_range("warmup_fraction", self.warmup_fraction, 0.0, 1.0, high_inclusive=False)
    check_range("beta_1", self.beta_1, 0.0, 1.0, high_inclusive=False)
    check_range("beta_2", self.beta_2, 0.0, 1.0, high_inclusive=False)
    check_range("epsilon", self.epsilon, 0.0, low_inclusive=False)
    if self.global_clipnorm is not None:
      check_range("global_clipnorm", self.global_clipnorm, 0.0, low_inclusive=False)
      if self.clipnorm is not None:
        raise ValueError(f"Give `clipnorm` ({self.clipnorm}) or `global_clipnorm` ({self.global_clipnorm}), "
                         "not both.")
    self.exclude_from_decay = tuple(self.exclude_from_decay)


def make_optimizer(config: OptimizerConfig, total_steps: int | None = None, *,
                   jit_compile: bool = True) -> tf.keras.optimizers.Optimizer:
  """The optimizer of `config`, its learning rate scheduled over the run's `total_steps`
  (`learning_rates.make_learning_rate`; None for a constant rate without warmup).

  Example:
    make_optimizer(OptimizerConfig(type="adamw", learning_rate=4e-5, weight_decay=0.01, epsilon=1e-8,
                                   global_clipnorm=1.0, exclude_from_decay=NO_DECAY_NAMES), jit_compile=False)

  Args:
    config: The optimizer's settings.
    total_steps: The run's optimizer steps (needed by a "linear" schedule or a warmup).
    jit_compile: Let Keras compile the update step with XLA (it does so on GPUs only).

  Returns:
    A `tf.keras.optimizers.Adam`, `Adagrad`, `AdamW` or `lazy_adam.LazyAdam`.

  Raises:
    ValueError: For a schedule or warmup without `total_steps`.
  """
  kwargs: dict[str, Any] = {"learning_rate": learning_rates_lib.make_learning_rate(
      config.learning_rate, config.schedule, config.warmup_fraction, total_steps), "jit_compile": jit_compile}
  if config.clipnorm is not None:
    kwargs["clipnorm"] = config.clipnorm
  if config.global_clipnorm is not None:
    kwargs["global_clipnorm"] = config.global_clipnorm
  if config.type == ADAGRAD:
    return tf.keras.optimizers.Adagrad(epsilon=config.epsilon, **kwargs)
  kwargs.update(beta_1=config.beta_1, beta_2=config.beta_2, epsilon=config.epsilon)
  if config.type == ADAM:
    return tf.keras.optimizers.Adam(**kwargs)
  if config.type == LAZY_ADAM:
    return lazy_adam.LazyAdam(**kwargs)
  optimizer = tf.keras.optimizers.AdamW(weight_decay=config.weight_decay, **kwargs)
  if config.exclude_from_decay:
    optimizer.exclude_from_weight_decay(var_names=list(config.exclude_from_decay))
  return optimizer
