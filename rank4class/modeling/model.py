"""The Rank4Class model: instance encoder, class encoder and an interaction scoring every class (§3-4)."""

import dataclasses
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class.modeling import class_encoders as class_encoders_lib
from rank4class.modeling import class_sampling, ranking_math
from rank4class.modeling import encoders as encoders_lib
from rank4class.modeling import interactions as interactions_lib
from rank4class_data.validation import check_range
from rank4class_engine.optimization import losses as losses_lib

# Classes scored at once when ranking all of them in chunks (`encoded_top_k`): the memory bound.
DEFAULT_CHUNK_SIZE = 4096


def _as_layer(value: Any, expected: type, argument: str) -> tf.keras.layers.Layer:
  if isinstance(value, dict):
    value = tf.keras.layers.deserialize(value)
  if not isinstance(value, expected):
    raise ValueError(f"`{argument}` must be a {expected.__name__} (or its serialized config), got {value!r}.")
  return value


def logit_adjusted(scores: tf.Tensor, log_priors: tf.Tensor, tau: float) -> tf.Tensor:
  """`scores + tau * log_priors`: scores `[batch_size, C]` with priors `[C]`, or sampled lists `[batch_size,
  K]` with each listed class's log prior `[batch_size, K]` (Menon et al. 2021, Eq. 10)."""
  return scores + tf.cast(tau, scores.dtype) * tf.cast(log_priors, scores.dtype)


@tf.keras.utils.register_keras_serializable(package="rank4class")
class LogitAdjustment(tf.keras.layers.Layer):
  """The logit-adjusted loss for skewed labels (Menon et al. 2021, "Long-tail learning via logit adjustment",
  §4.2, Eq. 10): in training, each class's score gets `tau * log(prior)` (the prior: its share of the training
  rows) before the loss; at inference the scores pass unchanged. Frequent classes must then win by a margin in
  training, so the trained scores favour rare classes more than the plain softmax's (a lower balanced error).

  The log priors are a non-trainable weight: a saved or exported model holds them (and does not use them at
  inference); `initial_priors` is not part of `get_config` (C floats in every saved config), a config round
  trip starting them at log(1 / C).

  Example:
    adjust = LogitAdjustment(num_classes=2, tau=1.0, initial_priors=[0.75, 0.25])
    adjust(tf.zeros([1, 2]), training=True)  # [[log 0.75, log 0.25]]
    adjust(tf.zeros([1, 2]), training=False)  # [[0, 0]]

  Args:
    num_classes: Number of classes C >= 2.
    tau: Positive scale of the log priors (1 in the paper).
    initial_priors: Class priors `[C]`, positive (normalised to sum to 1); None: uniform.

  Call inputs: scores `[batch_size, C]`, or (scores `[batch_size, K]`, class ids int `[batch_size, K]`) for
  sampled class lists.
  Returns: the scores, adjusted when `training` is True.
  """

  def __init__(self, num_classes: int, tau: float = 1.0, initial_priors=None, **kwargs):
    super().__init__(**kwargs)
    check_range("num_classes", num_classes, 2, integer=True)
    check_range("tau", tau, 0, low_inclusive=False)
    num_classes = int(num_classes)  # A NumPy integer too; a plain int in the Keras config.
    self._num_classes = num_classes
    self._tau = float(tau)
    self._initial_log_priors = np.full([num_classes], -np.log(num_classes), np.float32)
    if initial_priors is not None:
      priors = np.asarray(initial_priors, np.float64)
      if priors.shape != (num_classes,) or not np.all(np.isfinite(priors)) or np.any(priors <= 0):
        raise ValueError(f"`initial_priors` must be {num_classes} positive values, got {initial_priors!r}.")
      self._initial_log_priors = np.log(priors / priors.sum()).astype(np.float32)

  @property
  def num_classes(self) -> int:
    return self._num_classes

  def build(self, input_shape):
    initial = self._initial_log_priors
    self.log_priors = self.add_weight("log_priors", shape=[self._num_classes], trainable=False,
                                      initializer=lambda shape, dtype=None: tf.constant(initial, dtype=dtype))
    super().build(input_shape)

  def call(self, inputs, training=None):
    scores, class_ids = inputs if isinstance(inputs, (tuple, list)) else (inputs, None)
    if not training:
      return scores
    log_priors = self.log_priors if class_ids is None else tf.gather(self.log_priors, class_ids)
    return logit_adjusted(scores, log_priors, self._tau)

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "num_classes": self._num_classes, "tau": self._tau}


@tf.keras.utils.register_keras_serializable(package="rank4class")
class Rank4ClassModel(tf.keras.Model):
  """Ranks the classes for each instance: `s_i = I(H(x), c_i) + b_i` for all classes at once (Fig. 2 right).

  `H` is an `encoders.InstanceEncoder`, `(c, b)` come from a `class_encoders.ClassEncoder` (the classes are
  the list items) and `I` is an `interactions.Interaction`. With `OneHotClassEncoder` + `DotInteraction` and
  `losses.get("softmax")` this is the classic `Dense(num_classes)` softmax classifier (Claim 1, §3.2).

  Labels: `fit`/`evaluate` take integer class ids `[batch_size]` (or `[batch_size, 1]`), validated to lie in
  [0, num_classes) — an out-of-range id is an error, never masked — and turned into one-hot relevance
  `[batch_size, num_classes]` before the compiled TF-Ranking loss and metrics see them. Relevance labels
  `[batch_size, num_classes]` pass through unchanged.

  Example:
    model = Rank4ClassModel(encoders.get("mlp", hidden_units=(64, 64)),
                            class_encoders.get("one_hot", num_classes=10),
                            interactions.get("latent_cross", hidden_units=(128, 128)),
                            class_names=[str(i) for i in range(10)])
    model.compile("adam", loss=losses.get("approx_ndcg"), metrics=metrics.get_default_metrics())
    model.fit(features, class_ids, epochs=5)
    class_ids, scores = model.rank(features, k=5)

  Args:
    instance_encoder: Maps raw inputs to `[batch_size, d_h]`.
    class_encoder: Gives class embeddings `[num_classes, d_c]` and biases `[num_classes]`.
    interaction: Scores `(instances, classes)` -> `[batch_size, num_classes]`.
    class_names: One unique name per class in id order (returned by the serving signature); default
      "0".."C-1".
    class_sampler: Optional `class_sampling.ClassSampler`: training then scores each instance's sampled list
      (its true class and K-1 negatives: class embeddings looked up for those ids only, the interaction run on
      K classes) instead of all C; prediction and evaluation still score every class. Call the model once on a
      batch before `fit` (as `rank4class.training.train` does) so that a saved model records its input shape.
    logit_adjustment: Optional `LogitAdjustment`: training scores get `tau * log(prior)` per class (sampled
      lists: per listed class) before the loss; inference scores are unchanged.

  Call inputs: the instance encoder's raw inputs (floats `[batch_size, features]`, images, or strings).
  Returns: scores `[batch_size, num_classes]`.
  """

  def __init__(
    self,
    instance_encoder: encoders_lib.InstanceEncoder | dict,
    class_encoder: class_encoders_lib.ClassEncoder | dict,
    interaction: interactions_lib.Interaction | dict,
    class_names: list[str] | None = None,
    class_sampler: class_sampling.ClassSampler | dict | None = None,
    logit_adjustment: LogitAdjustment | dict | None = None,
    **kwargs,
  ):
    super().__init__(**kwargs)
    self._logit_adjustment = (None if logit_adjustment is None
                              else _as_layer(logit_adjustment, LogitAdjustment, "logit_adjustment"))
    self._class_sampler = (None if class_sampler is None
                           else _as_layer(class_sampler, class_sampling.ClassSampler, "class_sampler"))
    self._instance_encoder = _as_layer(instance_encoder, encoders_lib.InstanceEncoder, "instance_encoder")
    self._class_encoder = _as_layer(class_encoder, class_encoders_lib.ClassEncoder, "class_encoder")
    self._interaction = _as_layer(interaction, interactions_lib.Interaction, "interaction")
    num_classes = self._class_encoder.num_classes
    if self._logit_adjustment is not None and self._logit_adjustment.num_classes != num_classes:
      raise ValueError(f"`logit_adjustment` has {self._logit_adjustment.num_classes} classes but the class "
                       f"encoder has {num_classes}.")
    if class_names is None:
      class_names = [str(i) for i in range(num_classes)]
    class_names = list(class_names)
    if len(class_names) != num_classes:
      raise ValueError(
        f"`class_names` has {len(class_names)} names but the class encoder has {num_classes} classes."
      )
    if any(not isinstance(n, str) for n in class_names) or len(set(class_names)) != len(class_names):
      raise ValueError(f"`class_names` must be unique strings, got {class_names}.")
    # Not a list attribute: Keras tracks list attributes and walks every element of them each time it flattens
    # the model's layers (~14 times per epoch in `fit`): at 100,000 classes that was ~60 ms per epoch.
    self._class_names = np.asarray(class_names, dtype=object)

  @property
  def instance_encoder(self) -> encoders_lib.InstanceEncoder:
    return self._instance_encoder

  @property
  def class_encoder(self) -> class_encoders_lib.ClassEncoder:
    return self._class_encoder

  @property
  def interaction(self) -> interactions_lib.Interaction:
    return self._interaction

  @property
  def num_classes(self) -> int:
    return self._class_encoder.num_classes

  @property
  def class_names(self) -> list[str]:
    return list(self._class_names)

  def build(self, input_shape):
    """Builds from a batch input shape; string inputs (text encoders) get string placeholders."""
    if self._instance_encoder.input_dtype != tf.string:
      super().build(input_shape)
      return
    graph = (
      tf.__internal__.FuncGraph("build_graph") if tf.executing_eagerly() else tf.compat.v1.get_default_graph()
    )
    with graph.as_default():
      self.call(tf.compat.v1.placeholder(tf.string, shape=input_shape), training=False)
    tf.keras.layers.Layer.build(self, input_shape)

  def class_embeddings(self, training: bool | None = None) -> tuple[tf.Tensor, tf.Tensor]:
    """All class embeddings `[num_classes, d_c]` and biases `[num_classes]`."""
    return self._class_encoder(None, training=training)

  @property
  def class_sampler(self) -> class_sampling.ClassSampler | None:
    return self._class_sampler

  def _encode_instances(self, inputs, training) -> tf.Tensor:
    instances = self._instance_encoder(inputs, training=training)  # [batch_size, d_h]
    if not self._class_encoder.built:
      self._class_encoder.resolve_embedding_dim(instances.shape[-1])
    if self._class_sampler is not None:
      self._class_sampler.build_hard_negative_state(instances.shape[-1])
    return instances

  def list_scores(self, inputs, class_ids: tf.Tensor, training=None) -> tf.Tensor:
    """Scores of given classes only: `class_ids` int `[batch_size, K]` (each instance its own list) ->
    float32 `[batch_size, K]`, equal to the full scores at those ids; class embeddings are looked up for the
    listed ids only and the interaction runs on K classes per instance (sampled training, two-stage
    re-ranking).
    """
    return self.encoded_list_scores(self._encode_instances(inputs, training), class_ids, training)

  def encoded_list_scores(self, instances: tf.Tensor, class_ids: tf.Tensor, training=None) -> tf.Tensor:
    """`list_scores` from instance embeddings `[batch_size, d_h]` (the instance encoder's output)."""
    class_ids = tf.convert_to_tensor(class_ids)
    # Listed classes only.
    classes, bias = self._class_encoder(tf.reshape(class_ids, [-1]), training=training)
    shape = tf.shape(class_ids)
    classes = tf.reshape(classes, tf.concat([shape, [-1]], axis=0))
    classes.set_shape([None, None, self._class_encoder.embedding_dim])
    scores = self._interaction((instances, classes), training=training)  # [batch_size, K]
    return tf.cast(scores, tf.float32) + tf.reshape(tf.cast(bias, tf.float32), shape)

  def encoded_top_k(self, instances: tf.Tensor, k: int, chunk_size: int = DEFAULT_CHUNK_SIZE,
                    class_ids: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor | None]:
    """The `k` best classes of each instance embedding `[batch, d_h]` over all classes, scored `chunk_size`
    classes at a time (memory bounded by the chunk, not by C; `rank4class.evaluation.full_class_evaluation`).

    Returns:
      (class ids int32 `[batch, k]`, float32 scores `[batch, k]`, best first; with `class_ids` (true classes
      `[batch]`) also int32 `[batch]`: how many classes score strictly above the true one, its 0-based rank).
    """
    num_classes = self.num_classes
    if not 1 <= k <= num_classes:
      raise ValueError(f"`k` must be in [1, num_classes={num_classes}], got {k}.")
    check_range("chunk_size", chunk_size, 1, integer=True)
    classes, bias = self.class_embeddings(training=False)
    batch = tf.shape(instances)[0]
    true_scores = None
    if class_ids is not None:
      class_ids = tf.cast(class_ids, tf.int32)
      true_scores = self.encoded_list_scores(instances, class_ids[:, tf.newaxis], training=False)[:, 0]

    def body(start, top_scores, top_ids, above):
      end = tf.minimum(start + chunk_size, num_classes)
      scores = tf.cast(self._interaction((instances, classes[start:end]), training=False), tf.float32)
      scores += tf.cast(bias[start:end], tf.float32)[tf.newaxis, :]  # [batch, chunk]
      ids = tf.broadcast_to(tf.range(start, end)[tf.newaxis, :], tf.shape(scores))
      top_scores, positions = tf.math.top_k(tf.concat([top_scores, scores], axis=1), k=k)
      top_ids = tf.gather(tf.concat([top_ids, ids], axis=1), positions, batch_dims=1)
      if true_scores is not None:  # The true class itself is never counted above itself.
        higher = (scores > true_scores[:, tf.newaxis]) & (ids != class_ids[:, tf.newaxis])
        above += tf.reduce_sum(tf.cast(higher, tf.int32), axis=1)
      return end, top_scores, top_ids, above

    initial = (tf.constant(0), tf.fill([batch, k], -np.inf), tf.fill([batch, k], -1),
               tf.zeros([batch], tf.int32))
    _, top_scores, top_ids, above = tf.while_loop(lambda start, *_: start < num_classes, body, initial,
                                                  parallel_iterations=1)  # One chunk alive at a time.
    return top_ids, top_scores, (above if class_ids is not None else None)

  def text_class_scores(self, inputs, class_texts, training=None) -> tf.Tensor:
    """Scores `[batch_size, n]` of classes given by their texts `[n]` (classes unseen in training, or a new
    class table), no per-class bias; needs a `MetadataClassEncoder` (classes described by text)."""
    if not isinstance(self._class_encoder, class_encoders_lib.MetadataClassEncoder):
      raise ValueError("Scoring classes by their texts needs the metadata class encoder (classes described "
                       f"by text); this model's is {type(self._class_encoder).__name__}.")
    return self.class_vector_scores(inputs,
                                    self._class_encoder.encode_class_texts(class_texts, training=training),
                                    training)

  def class_vector_scores(self, inputs, class_vectors, training=None) -> tf.Tensor:
    """Scores `[batch_size, n]` of classes given by their vectors `[n, d_c]` (e.g. `encode_class_texts` of
    class texts, computed once for many requests), no per-class bias."""
    instances = self._encode_instances(inputs, training)
    classes = tf.cast(class_vectors, instances.dtype)
    return tf.cast(self._interaction((instances, classes), training=training), tf.float32)

  def sampled_scores(self, inputs, class_ids: tf.Tensor, training=None) -> tuple[tf.Tensor, tf.Tensor]:
    """Scores of each instance's sampled class list (the class sampler's), log-Q corrected.

    Args:
      inputs: Raw instance inputs.
      class_ids: True class ids `[batch_size]` (validated against num_classes).

    Returns:
      (relevance `[batch_size, K]`: 1 true class, 0 negative, -1 accidental hit; float32 scores `[batch_size,
      K]`).
    """
    class_ids = ranking_math.validate_class_ids(class_ids, self.num_classes)
    instances = self._encode_instances(inputs, training)
    if self._class_sampler.mines_hard_negatives and training:
      self._class_sampler.observe(class_ids, instances, lambda queries, k: self.encoded_top_k(queries, k)[0])
    ids, relevance, log_q = self._class_sampler(class_ids, training=training)
    scores = self.encoded_list_scores(instances, ids, training)
    if self._logit_adjustment is not None:
      scores = self._logit_adjustment((scores, ids), training=training)
    if not self.built:  # Every part now has its weights: the model is built without scoring all classes.
      self.built = True
    return relevance, self._class_sampler.correct(scores, log_q)

  def call(self, inputs, training=None):
    instances = self._encode_instances(inputs, training)
    classes, bias = self.class_embeddings(training)  # [num_classes, d_c], [num_classes]
    scores = self._interaction((instances, classes), training=training)  # [batch_size, num_classes]
    # Scores leave the model in float32 under a mixed-precision policy too: TF-Ranking's losses and metrics
    # sort and exponentiate them, which bfloat16/float16 cannot do accurately (TF-Ranking #254).
    scores = tf.cast(scores, tf.float32) + tf.cast(bias, tf.float32)[tf.newaxis, :]
    if self._logit_adjustment is not None:
      scores = self._logit_adjustment(scores, training=training)
    return scores

  def rank(self, inputs, k: int = 5) -> tuple[tf.Tensor, tf.Tensor]:
    """The `k` best classes per instance, best first: (class ids int32 `[batch_size, k]`, scores `[batch_size,
    k]`)."""
    return ranking_math.top_k_classes(self(inputs, training=False), k)

  def relevance(self, labels: tf.Tensor) -> tf.Tensor:
    """Class ids `[batch_size]`/`[batch_size, 1]` -> one-hot relevance `[batch_size, num_classes]`, validated;
    relevance `[batch_size, num_classes]` passes through as float32."""
    labels = tf.convert_to_tensor(labels)
    if labels.shape.rank == 2 and labels.shape[-1] == self.num_classes:
      return tf.cast(labels, tf.float32)
    return ranking_math.class_ids_to_relevance(labels, self.num_classes)

  def train_step(self, data):
    x, y, sample_weight = tf.keras.utils.unpack_x_y_sample_weight(data)
    if self._class_sampler is None:
      return super().train_step(tf.keras.utils.pack_x_y_sample_weight(x, self.relevance(y), sample_weight))
    if y.shape.rank == 2 and y.shape[-1] == self.num_classes:
      raise ValueError("Sampled class lists train on class ids; graded relevance over all classes (ELWC "
                       "lists) needs full lists (no class sampler).")
    with tf.GradientTape() as tape:  # Keras' own train_step, on the sampled lists.
      relevance, scores = self.sampled_scores(x, y, training=True)
      loss = self.compute_loss(x, relevance, scores, sample_weight)
    self.optimizer.minimize(loss, self.trainable_variables, tape=tape)
    return self.compute_metrics(x, relevance, scores, sample_weight)

  def test_step(self, data):
    x, y, sample_weight = tf.keras.utils.unpack_x_y_sample_weight(data)
    if y is not None:
      y = self.relevance(y)
    return super().test_step(tf.keras.utils.pack_x_y_sample_weight(x, y, sample_weight))

  def serving_input_spec(self) -> tf.TensorSpec:
    """The raw input `tf.TensorSpec` of a serving signature (from the built instance encoder)."""
    return self._instance_encoder.serving_input_spec()

  def get_config(self) -> dict[str, Any]:
    return {
      "name": self.name,
      "instance_encoder": tf.keras.layers.serialize(self._instance_encoder),
      "class_encoder": tf.keras.layers.serialize(self._class_encoder),
      "interaction": tf.keras.layers.serialize(self._interaction),
      "class_names": list(self._class_names),
      "class_sampler": (None if self._class_sampler is None
                        else tf.keras.layers.serialize(self._class_sampler)),
      "logit_adjustment": (None if self._logit_adjustment is None
                           else tf.keras.layers.serialize(self._logit_adjustment)),
    }

  @classmethod
  def from_config(cls, config: dict[str, Any], custom_objects=None) -> "Rank4ClassModel":
    config = dict(config)
    for key in ("instance_encoder", "class_encoder", "interaction", "class_sampler", "logit_adjustment"):
      if config.get(key) is not None:
        config[key] = tf.keras.layers.deserialize(config[key], custom_objects=custom_objects)
    return cls(**config)


@dataclasses.dataclass
class Rank4ClassConfig:
  """A whole Rank4Class set-up: the three model parts, the loss and the metric cutoffs.

  Attributes:
    instance_encoder: Which instance encoder.
    class_encoder: Which class encoder.
    interaction: Which interaction.
    loss: Which ranking loss (training only; not part of the exported model).
    metric_ks: Cutoffs K of top-K error and NDCG@K.
    sampling: Full class lists in training (the default), or sampled ones (`class_sampling`).
    logit_adjustment: tau of the logit-adjusted loss (`LogitAdjustment`: training scores + tau * log prior);
      0 turns it off.
    class_priors: Each class's share of the training rows, for `logit_adjustment`. None in a run's
      config.json: `rank4class.training.train.resolve_model_config` counts them on the training split when it
        builds the
      model.
  """

  instance_encoder: encoders_lib.InstanceEncoderConfig = dataclasses.field(
    default_factory=encoders_lib.InstanceEncoderConfig
  )
  class_encoder: class_encoders_lib.ClassEncoderConfig = dataclasses.field(
    default_factory=class_encoders_lib.ClassEncoderConfig
  )
  interaction: interactions_lib.InteractionConfig = dataclasses.field(
    default_factory=interactions_lib.InteractionConfig
  )
  loss: losses_lib.LossConfig = dataclasses.field(default_factory=losses_lib.LossConfig)
  metric_ks: tuple[int, ...] = (1, 5)
  sampling: class_sampling.SamplingConfig = dataclasses.field(default_factory=class_sampling.SamplingConfig)
  logit_adjustment: float = 0.0
  class_priors: np.ndarray | None = None

  def __post_init__(self):
    check_range("logit_adjustment", self.logit_adjustment, 0.0)  # 0: off.


def build_model(config: Rank4ClassConfig, class_names: list[str], class_counts=None) -> Rank4ClassModel:
  """Builds an (uncompiled, unbuilt) `Rank4ClassModel` for the classes `class_names` (in id order).

  Args:
    config: The model parts (and the class sampling of training).
    class_names: Class names in id order.
    class_counts: Training rows per class, for the samplers that use them (see `class_sampling`).

  Raises:
    ValueError: If a part's config is invalid, or `logit_adjustment` is on without `class_priors`.
  """
  adjustment = None
  if config.logit_adjustment:
    if config.class_priors is None:
      raise ValueError("`logit_adjustment` needs `class_priors` (the training split's class shares; "
                       "rank4class.training.train fills them in).")
    adjustment = LogitAdjustment(len(class_names), config.logit_adjustment, config.class_priors)
  return Rank4ClassModel(
    instance_encoder=encoders_lib.make_instance_encoder(config.instance_encoder),
    class_encoder=class_encoders_lib.make_class_encoder(config.class_encoder, class_names),
    interaction=interactions_lib.make_interaction(config.interaction),
    class_names=class_names,
    class_sampler=class_sampling.make_class_sampler(config.sampling, len(class_names), class_counts),
    logit_adjustment=adjustment,
  )
