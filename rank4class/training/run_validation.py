"""The validation of a Rank4Class run: what it computes (ranking metrics over all classes, exact and chunk by
chunk at many classes; the loss where something reads it) and the engine's validation function."""

import numpy as np
import tensorflow as tf

from rank4class.evaluation import evaluators
from rank4class.inference import full_class_scoring, served
from rank4class.modeling import model as model_lib
from rank4class.modeling import ranking_math
from rank4class.training import training_data as data_lib
from rank4class.training.model_setup import has_class_ids
from rank4class.training.train_config import RunConfig
from rank4class_engine.loop import trainer
from rank4class_engine.optimization import losses as losses_lib

# Losses whose value over C classes costs O(C^2) per instance (pairs, approximate ranks over all pairs):
# "auto" computes them on validation up to this many classes only (at 1,100 classes and batch 256, one
# pairwise tensor is 1.2 GB).
QUADRATIC_LOSSES = (losses_lib.PAIRWISE_LOGISTIC, losses_lib.APPROX_NDCG, losses_lib.GUMBEL_APPROX_NDCG)
QUADRATIC_LOSS_CLASSES = 256
# In-memory validation splits up to this size are batched once and kept as tensors.
_MATERIALIZED_VALIDATION_BYTES = 256 * 2**20


# From this many classes on, validation and the test report rank all classes chunk by chunk.
CHUNKED_VALIDATION_CLASSES = full_class_scoring.CHUNKED_CLASSES


def validation_loss_note(run: RunConfig, loss: str, num_classes: int) -> tuple[bool, str]:
  """(whether validation computes the `loss` (its name), a line for the terminal saying what validation
  computes)."""
  chunked = num_classes >= CHUNKED_VALIDATION_CLASSES
  metrics = (f"Validation: top-K error, NDCG@K and MRR over all {num_classes:,} classes"
             + (" (exact ranks, chunk by chunk)" if chunked else ""))
  read = run.tensorboard or run.best_metric == "loss"
  if run.validation_loss == "off":
    return False, f"{metrics}; no loss (`run.validation_loss`=off)."
  if chunked:  # `_train` refuses "on" and best_metric="loss" here.
    return False, f"{metrics}; no loss (not computed from {CHUNKED_VALIDATION_CLASSES:,} classes on)."
  if run.validation_loss == "on" or run.best_metric == "loss":
    return True, f"{metrics}, and the {loss} loss."
  if not read:
    return False, (f"{metrics}; no loss (nothing reads it: no TensorBoard; "
                   "`run.validation_loss`=on computes it).")
  if loss in QUADRATIC_LOSSES and num_classes > QUADRATIC_LOSS_CLASSES:
    return False, (f"{metrics}; no loss: {loss} over {num_classes:,} classes costs O(C^2) memory per "
                   "instance (`run.validation_loss`=on computes it anyway).")
  return True, f"{metrics}, and the {loss} loss (for TensorBoard)."


def make_validate_fn(score_fn: served.ScoreFn, model: model_lib.Rank4ClassModel,
                     data: data_lib.PreparedData, ks: tuple[int, ...], batch_size: int,
                     with_loss: bool) -> trainer.ValidateFn:
  """The engine's validation: the validation split's ranking metrics (top-K error, NDCG@K, MRR) and, when
  `with_loss`, its loss.

  One pass over the split per validation; the score function is traced once per run, the loss and the
  evaluator once per process (for each configuration). The loss is optional because tracing a ranking loss
  once more costs a short run (a study's) a noticeable share of its time; `train` asks for it when something
  reads it (TensorBoard or `best_metric="loss"`).
  """
  options = tf.data.Options()
  options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
  dataset = data.validation.make_dataset(batch_size, False, False, 0).with_options(options)
  if (
    isinstance(data.validation, data_lib.ArraySplit)
    and data.validation.nbytes <= _MATERIALIZED_VALIDATION_BYTES
  ):
    # Held as tensors once: starting the input pipeline again costs every validation ~10 ms, as much as the
    # validation's scoring itself on a small split (docs/BENCHMARKS.md).
    dataset = list(dataset)
  # Outside fit's strategy scope (the test reuses it).
  evaluator = evaluators.get_evaluator(data.class_names, ks)
  if model.num_classes >= CHUNKED_VALIDATION_CLASSES and has_class_ids(data.validation):
    # Many classes: exact ranks over all classes, chunk by chunk, instead of `[batch, C]` score matrices. No
    # validation loss: over all C classes a ranking loss costs O(C^2) per instance (pairs, approximate ranks).
    ranks = full_class_scoring.rank_function(model, ks)
    return lambda model: full_class_scoring.rank_metrics(
        np.concatenate([ranks(x, y).numpy() for x, y in dataset]), ks)
  batch_loss = None
  if with_loss:
    loss = losses_lib.traced_loss(model.loss, model.num_classes)  # Traced once per process and loss config.

    relevance = ranking_math.traced_relevance(model.num_classes)

    def batch_loss(scores: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
      if labels.shape.rank == 2 and labels.shape[-1] == model.num_classes:  # Graded relevance (ELWC lists).
        return loss(model.relevance(labels), scores)
      return loss(relevance(tf.reshape(tf.cast(labels, tf.int64), [-1])), scores)

  def validate(model: tf.keras.Model) -> dict[str, float]:
    del model  # `score_fn` holds it.
    return evaluators.evaluate_dataset(score_fn, dataset, data.class_names, ks, evaluator,
                                         loss_fn=batch_loss)["metrics"]

  return validate
