"""Sampled class lists: training Rank4Class on K classes per instance instead of all C.

Each instance's list holds its true class (position 0, relevance 1) and K-1 negatives drawn from a sampling
distribution q over the classes:
- "uniform": q(c) = 1/C.
- "log_uniform": Zipf over the classes' frequency ranks r (0 = most frequent in the training labels; without
  counts, the class id): q = log((r + 2) / (r + 1)) / log(C + 1), TensorFlow's log-uniform candidate sampler.
- "empirical": q ∝ (count + 1)^power (word2vec's unigram^0.75 by default).
- "in_batch": the other instances' true classes in the batch (list size = batch size); q is the classes'
  training frequency, the chance a batch item brings it (TF Recommenders' in-batch softmax).
A negative that is the instance's own class (an accidental hit) gets relevance -1, TF-Ranking's padding label:
every loss and metric skips it. With the log-Q correction the listed scores become s - log q(c) (Jean et al.
2015; TF Recommenders' `candidate_sampling_probability`), which removes the sampler's popularity bias from the
softmax; a constant for "uniform".

Hard negatives (`hard_negatives` > 0, with any sampler): that many of each list's negatives are the classes
the current model scores highest for instances of the true class, the rest come from the sampler. The model
keeps a running mean of the instance embeddings of each class (its prototype, updated every step from the
batch) and, every `refresh_every` steps, scores `refresh_rows` prototypes (round robin over the classes)
against all C classes with its own interaction, exactly and in chunks (`Rank4ClassModel.encoded_top_k`); each
class's `hard_pool` top-scoring wrong classes become its row of the hard-negative table, from which every list
of that class draws. A class not yet mined draws uniform negatives instead. A mined class enters its list's
log-Q correction with the sampler's q like any other (the correction is a function of the class, not of the
draw). Cost: `refresh_rows` x C interaction scores per refresh (a matrix product for "dot"), and C x (d_h +
pool) numbers of state, carried in checkpoints and saved models.

The pure math is `sampling_probabilities`, `sample_class_lists`, `mined_negatives` and `draw_hard_negatives`;
`ClassSampler` is the serializable Keras layer a `Rank4ClassModel` carries to train on sampled lists.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class_data.validation import check_choice, check_range

UNIFORM = "uniform"
LOG_UNIFORM = "log_uniform"
EMPIRICAL = "empirical"
IN_BATCH = "in_batch"
SAMPLERS = (UNIFORM, LOG_UNIFORM, EMPIRICAL, IN_BATCH)
_NEEDS_COUNTS = (EMPIRICAL, IN_BATCH)
# Relevance of an accidental hit: TF-Ranking's padding label, left out of every loss and metric.
ACCIDENTAL_HIT = -1.0


def sampling_probabilities(sampler: str, num_classes: int, class_counts=None,
                           power: float = 0.75) -> np.ndarray:
  """q(c) of each class, float64 `[num_classes]` summing to 1.

  Args:
    sampler: One of `SAMPLERS`.
    num_classes: C.
    class_counts: Training rows per class `[num_classes]`; needed by "empirical" and "in_batch", and orders
      the classes of "log_uniform" (most frequent first; ties by id; without counts, by id).
    power: "empirical": the exponent of (count + 1).

  Raises:
    ValueError: for an unknown sampler, missing or misshaped counts.
  """
  check_choice("sampler", sampler, SAMPLERS)
  if class_counts is None and sampler in _NEEDS_COUNTS:
    raise ValueError(f"The {sampler!r} sampler needs the training class counts.")
  counts = None
  if class_counts is not None:
    counts = np.asarray(class_counts, np.float64)
    if counts.shape != (num_classes,) or (counts < 0).any():
      raise ValueError(f"`class_counts` must be {num_classes} counts >= 0, got shape {counts.shape}.")
  if sampler == UNIFORM:
    return np.full([num_classes], 1.0 / num_classes)
  if sampler == LOG_UNIFORM:
    order = np.arange(num_classes) if counts is None else np.argsort(-counts, kind="stable")
    ranks = np.empty(num_classes)
    ranks[order] = np.arange(num_classes)
    return np.log((ranks + 2.0) / (ranks + 1.0)) / np.log(num_classes + 1.0)
  weights = (counts + 1.0) ** (power if sampler == EMPIRICAL else 1.0)
  return weights / weights.sum()


def sample_class_lists(labels: tf.Tensor, num_sampled: int, probabilities: tf.Tensor, sampler: str,
                       extra_negatives: tf.Tensor | None = None,
                       shared: bool = False) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """Per instance its true class and sampled negatives.

  Args:
    labels: True class ids int32 `[batch_size]`.
    num_sampled: Negatives per instance drawn from q (ignored by "in_batch": the batch's other classes).
    probabilities: q float32 `[num_classes]` (`sampling_probabilities`).
    sampler: One of `SAMPLERS`.
    extra_negatives: Optional int32 `[batch_size, H]` negatives appended after the drawn ones (hard
      negatives).
    shared: Draw one set of `num_sampled` negatives for the whole batch (as `tf.nn.sampled_softmax_loss`)
      instead of one per instance: a step then touches ~`num_sampled` class rows instead of ~batch x
      `num_sampled`, which is what a sparse optimizer step costs at many classes. Ignored by "in_batch"
      (shared by construction).

  Returns:
    (class ids int32 `[batch_size, K]`, relevance float32 `[batch_size, K]`: 1 for the true class at position
    0, 0 for a negative, -1 for an accidental hit; log q float32 `[batch_size, K]`).
  """
  labels = tf.cast(labels, tf.int32)
  batch_size = tf.shape(labels)[0]
  num_classes = tf.shape(probabilities)[0]
  if sampler == IN_BATCH:
    # Row b: labels[b], labels[b + 1], ... (mod batch_size): its own class first, then every other instance's.
    positions = (tf.range(batch_size)[:, tf.newaxis] + tf.range(batch_size)[tf.newaxis, :]) % batch_size
    negatives = tf.gather(labels, positions)[:, 1:]
  else:
    rows = 1 if shared else batch_size
    if sampler == UNIFORM:
      negatives = tf.random.uniform([rows, num_sampled], maxval=num_classes, dtype=tf.int32)
    else:  # Inverse CDF: O(log C) per draw, no [batch_size, num_classes] tensor.
      cdf = tf.cumsum(probabilities)
      draws = tf.random.uniform([rows * num_sampled], maxval=cdf[-1])
      negatives = tf.minimum(tf.searchsorted(cdf, draws, side="right", out_type=tf.int32), num_classes - 1)
      negatives = tf.reshape(negatives, [rows, num_sampled])
    negatives = tf.broadcast_to(negatives, [batch_size, num_sampled])
  if extra_negatives is not None:
    negatives = tf.concat([negatives, tf.cast(extra_negatives, tf.int32)], axis=1)
  ids = tf.concat([labels[:, tf.newaxis], negatives], axis=1)
  hits = tf.equal(negatives, labels[:, tf.newaxis])
  relevance = tf.concat([tf.ones([batch_size, 1]), tf.where(hits, ACCIDENTAL_HIT, 0.0)], axis=1)
  return ids, relevance, tf.math.log(tf.gather(probabilities, ids))


def mined_negatives(top_ids: tf.Tensor, labels: tf.Tensor, pool: int) -> tf.Tensor:
  """The first `pool` wrong classes of each row of `top_ids` int32 `[rows, pool + 1]` (best first; the row's
  true class `labels[row]` taken out wherever it is) -> int32 `[rows, pool]`, best first."""
  true = tf.cast(tf.equal(top_ids, tf.cast(labels, top_ids.dtype)[:, tf.newaxis]), tf.int32)
  order = tf.argsort(true, axis=1, stable=True)  # Wrong classes first, in their order.
  return tf.gather(top_ids, order, batch_dims=1)[:, :pool]


def draw_hard_negatives(labels: tf.Tensor, table: tf.Tensor | tf.Variable, num_hard: int,
                        num_classes: int) -> tf.Tensor:
  """`num_hard` classes per instance drawn uniformly (with replacement) from its true class's row of the
  hard-negative table `[num_classes, pool]` (a tensor, or the variable itself: then only the batch's rows are
  read); a not-yet-mined entry (-1) becomes a uniform class instead."""
  batch_size = tf.shape(labels)[0]
  rows = tf.gather(table, labels)  # [batch_size, pool]
  columns = tf.random.uniform([batch_size, num_hard], maxval=int(table.shape[1]), dtype=tf.int32)
  hard = tf.gather(rows, columns, batch_dims=1)
  uniform = tf.random.uniform([batch_size, num_hard], maxval=num_classes, dtype=tf.int32)
  return tf.where(hard >= 0, hard, uniform)


def _scatter_rows(variable: tf.Variable, rows: tf.Tensor, values: tf.Tensor) -> None:
  """variable[rows] = values in place. Through the variable's handle: a replica's own copy of an ON_READ
  variable under a distribution strategy (whose `scatter_*` methods refuse), or a plain variable."""
  tf.raw_ops.ResourceScatterNdUpdate(ref=variable.handle, indices=rows[:, tf.newaxis],
                                     updates=tf.cast(values, variable.dtype))


def _check_hard_negatives(hard_negatives: int, num_sampled: int, sampler: str | None) -> None:
  """Hard negatives replace some of the drawn ones (any number for "in_batch", whose drawn ones are the
  batch)."""
  if hard_negatives < 0 or (sampler != IN_BATCH and hard_negatives > num_sampled):
    raise ValueError(f"`hard_negatives` must be in [0, num_sampled={num_sampled}], got {hard_negatives}.")


# (instance embeddings [rows, d_h], k) -> top class ids [rows, k]
TopKFn = Callable[[tf.Tensor, int], tf.Tensor]


@tf.keras.utils.register_keras_serializable(package="rank4class")
class ClassSampler(tf.keras.layers.Layer):
  """Draws each training instance's class list (see the module doc); no weights.

  Example:
    sampler = ClassSampler(num_classes=10_000, sampler="log_uniform", num_sampled=63, class_counts=counts)
    class_ids, relevance, log_q = sampler(labels)  # [batch_size, 64] each

  Args:
    num_classes: C.
    sampler: One of `SAMPLERS`.
    num_sampled: Negatives per instance (K - 1); "in_batch" uses the batch's other classes instead.
    class_counts: Training rows per class (see `sampling_probabilities`).
    log_q_correction: Subtract log q(c) from the listed scores (`correct`).
    power: "empirical": the exponent of (count + 1).
    hard_negatives: How many of the `num_sampled` negatives (added to the batch's for "in_batch") are hard
      negatives mined from the model (module doc); 0: none.
    hard_pool: Mined wrong classes kept per class (the table's width); default 4 x `hard_negatives`.
    refresh_every: Steps between refreshes of the hard-negative table.
    refresh_rows: Classes re-mined per refresh (round robin; all of them when >= num_classes).
    prototype_decay: Weight of the old prototype in each step's running mean.
    shared: One set of drawn negatives for the whole batch (`sample_class_lists`).
  """

  def __init__(self, num_classes: int, sampler: str = UNIFORM, num_sampled: int = 63, class_counts=None,
               log_q_correction: bool = True, power: float = 0.75, hard_negatives: int = 0,
               hard_pool: int | None = None, refresh_every: int = 100, refresh_rows: int = 1024,
               prototype_decay: float = 0.9, shared: bool = False, **kwargs):
    super().__init__(**kwargs)
    check_choice("sampler", sampler, SAMPLERS)
    check_range("num_sampled", num_sampled, 1)
    _check_hard_negatives(hard_negatives, num_sampled, sampler)
    check_range("refresh_every", refresh_every, 1)
    check_range("refresh_rows", refresh_rows, 1)
    check_range("prototype_decay", prototype_decay, 0.0, 1.0, high_inclusive=False)
    self._num_classes = int(num_classes)
    self._sampler = sampler
    self._num_sampled = int(num_sampled)
    # A NumPy array, not a list: Keras walks every element of a list attribute whenever it flattens the
    # layers.
    self._class_counts = None if class_counts is None else np.asarray(class_counts, np.int64)
    self._log_q_correction = bool(log_q_correction)
    self._power = float(power)
    self._hard_negatives = int(hard_negatives)
    self._hard_pool = int(hard_pool or 4 * hard_negatives)
    if self._hard_negatives and not 1 <= self._hard_pool < self._num_classes:
      raise ValueError(f"`hard_pool` must be in [1, num_classes - 1 = {self._num_classes - 1}], got "
                       f"{self._hard_pool}.")
    self._refresh_every = int(refresh_every)
    self._refresh_rows = int(min(refresh_rows, num_classes))
    self._prototype_decay = float(prototype_decay)
    self._shared = bool(shared)
    self._probabilities = tf.constant(
        sampling_probabilities(sampler, self._num_classes, self._class_counts, self._power), tf.float32)
    self._state: dict[str, tf.Variable] = {}

  @property
  def sampler(self) -> str:
    return self._sampler

  @property
  def mines_hard_negatives(self) -> bool:
    return self._hard_negatives > 0

  def build_hard_negative_state(self, instance_dim: int) -> None:
    """Creates the mining state (once): class prototypes `[C, d_h]`, which classes were seen, the
    hard-negative table `[C, pool]` (-1 = not mined), the step count and the round-robin cursor. Each replica
    keeps its own copy (it mines from its own batches); checkpoints and saved models keep the first
    replica's."""
    if self._state or not self.mines_hard_negatives:
      return

    def weight(name, shape, dtype, initializer):
      return self.add_weight(name=name, shape=shape, dtype=dtype, initializer=initializer, trainable=False,
                             synchronization=tf.VariableSynchronization.ON_READ,
                             aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    c = self._num_classes
    self._state = {
        "prototypes": weight("prototypes", [c, instance_dim], tf.float32, "zeros"),
        "seen": weight("seen", [c], tf.float32, "zeros"),
        "table": weight("hard_negative_table", [c, self._hard_pool], tf.int32,
                        tf.keras.initializers.Constant(-1)),
        "steps": weight("mining_steps", [], tf.int64, "zeros"),
        "cursor": weight("mining_cursor", [], tf.int32, "zeros"),
    }

  def hard_negative_table(self) -> tf.Tensor:
    """The current table `[C, pool]` (-1 = not mined yet)."""
    return tf.convert_to_tensor(self._state["table"])

  def observe(self, labels: tf.Tensor, instances: tf.Tensor, top_k: TopKFn) -> tf.Tensor:
    """One training step's mining: updates the batch classes' prototypes with `instances` `[batch, d_h]` (no
    gradient), and every `refresh_every` steps re-mines `refresh_rows` classes with `top_k`. Returns whether
    it refreshed (bool scalar)."""
    state = self._state
    labels = tf.cast(labels, tf.int32)
    instances = tf.cast(tf.stop_gradient(instances), tf.float32)
    seen = tf.gather(state["seen"], labels)[:, tf.newaxis] > 0
    decay = self._prototype_decay
    mean = tf.where(seen,
                    decay * tf.gather(state["prototypes"], labels) + (1.0 - decay) * instances, instances)
    _scatter_rows(state["prototypes"], labels, mean)
    _scatter_rows(state["seen"], labels, tf.ones_like(labels, tf.float32))
    state["steps"].assign_add(1)

    def refresh():
      rows = (state["cursor"] + tf.range(self._refresh_rows)) % self._num_classes
      queries = tf.cast(tf.gather(state["prototypes"], rows), instances.dtype)
      mined = mined_negatives(top_k(queries, self._hard_pool + 1), rows, self._hard_pool)
      mined = tf.where(tf.gather(state["seen"], rows)[:, tf.newaxis] > 0, mined, -1)  # Unseen: not mined.
      _scatter_rows(state["table"], rows, mined)
      state["cursor"].assign((state["cursor"] + self._refresh_rows) % self._num_classes)
      return tf.constant(True)

    return tf.cond(state["steps"] % self._refresh_every == 0, refresh, lambda: tf.constant(False))

  def call(self, labels, training=None):
    """True class ids `[batch_size]` -> (class ids `[batch_size, K]`, relevance, log q)."""
    labels = tf.cast(labels, tf.int32)
    hard = None
    if self.mines_hard_negatives:
      # From the variable: a gather of the batch's rows, not a read of the whole [C, pool] table every step.
      hard = draw_hard_negatives(labels, self._state["table"], self._hard_negatives, self._num_classes)
    return sample_class_lists(labels, self._num_sampled - self._hard_negatives, self._probabilities,
                              self._sampler, extra_negatives=hard, shared=self._shared)

  def correct(self, scores: tf.Tensor, log_q: tf.Tensor) -> tf.Tensor:
    """The listed scores with the log-Q correction (when enabled)."""
    return scores - tf.cast(log_q, scores.dtype) if self._log_q_correction else scores

  def get_config(self) -> dict[str, Any]:
    counts = None if self._class_counts is None else [int(c) for c in self._class_counts]
    return {**super().get_config(), "num_classes": self._num_classes, "sampler": self._sampler,
            "num_sampled": self._num_sampled, "class_counts": counts,
            "log_q_correction": self._log_q_correction, "power": self._power,
            "hard_negatives": self._hard_negatives, "hard_pool": self._hard_pool,
            "refresh_every": self._refresh_every, "refresh_rows": self._refresh_rows,
            "prototype_decay": self._prototype_decay, "shared": self._shared}


@dataclasses.dataclass
class SamplingConfig:
  """Whether training scores all classes or sampled lists.

  Attributes:
    sampler: None (every class in every list: exact, costs O(C) per instance) or one of `SAMPLERS`.
    num_sampled: Negatives per instance (list size K = num_sampled + 1); not used by "in_batch".
    log_q_correction: Subtract log q(c) from the sampled lists' scores.
    power: "empirical": the exponent of (count + 1).
    hard_negatives: How many negatives per list are mined from the model (module doc); 0: none.
    hard_refresh_every: Steps between refreshes of the hard-negative table.
    hard_refresh_rows: Classes re-mined per refresh.
    shared_negatives: One set of drawn negatives per batch instead of one per instance (faster sparse updates
      at many classes; `sample_class_lists`).
  """

  sampler: str | None = None
  num_sampled: int = 63
  log_q_correction: bool = True
  power: float = 0.75
  hard_negatives: int = 0
  hard_refresh_every: int = 100
  hard_refresh_rows: int = 1024
  shared_negatives: bool = False

  def __post_init__(self):
    check_choice("sampler", self.sampler, (None, *SAMPLERS))
    check_range("num_sampled", self.num_sampled, 1)
    if self.hard_negatives and self.sampler is None:
      raise ValueError("Hard negatives are drawn into sampled lists: set a class sampler too.")
    _check_hard_negatives(self.hard_negatives, self.num_sampled, self.sampler)


def make_class_sampler(config: SamplingConfig, num_classes: int, class_counts=None) -> ClassSampler | None:
  """The sampler `config` asks for, or None for full lists."""
  if config.sampler is None:
    return None
  return ClassSampler(num_classes, config.sampler, config.num_sampled, class_counts, config.log_q_correction,
                      config.power, hard_negatives=config.hard_negatives,
                      refresh_every=config.hard_refresh_every, refresh_rows=config.hard_refresh_rows,
                      shared=config.shared_negatives)
