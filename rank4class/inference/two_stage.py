"""Two-stage inference over many classes: a cheap dot-product model retrieves each instance's top M classes
(exact, chunked over all C: `full_class_scoring.chunked_top_k`), the interaction model re-ranks those M
only (`Rank4ClassModel.list_scores`). One exported signature runs both.

Cost per instance: C dot products (in chunks) + M interaction evaluations, instead of C interaction
evaluations. The first stage is exact top-M search, not an approximate index. Checked on the package index
here (2026-11): ScaNN 1.4.2, the newest, builds its TensorFlow ops against `tensorflow~=2.20.0` (its "tf"
extra) and needs numpy 2, neither of our stacks (TF 2.15.1 with numpy 1.x, TF 2.21); a custom-op library is
tied to the TF version it was built with. faiss-cpu 1.15.1 installs but has no TensorFlow ops, so it cannot
sit inside one SavedModel signature. Chunked exact search keeps C = 100,000 in bounded memory and needs
neither. `two_stage_report` measures what the first stage costs in quality: its recall@M and the re-ranked
metrics against the ranker scoring every class.
"""

import time
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class.inference import calibration as calibration_lib
from rank4class.inference import full_class_scoring, served
from rank4class.modeling import model as model_lib
from rank4class_data.validation import atomic_directory
from rank4class_encoders import text_encoder

SIGNATURE_KEY = served.SIGNATURE_KEY


def _check_pair(retriever: model_lib.Rank4ClassModel, ranker: model_lib.Rank4ClassModel, num_candidates: int):
  if retriever.class_names != ranker.class_names:
    raise ValueError("The retriever and the ranker must rank the same classes in the same id order.")
  if not 1 <= num_candidates <= ranker.num_classes:
    raise ValueError(f"`num_candidates` must be in [1, num_classes={ranker.num_classes}], got "
                     f"{num_candidates}.")


def candidate_scores(retriever: model_lib.Rank4ClassModel, ranker: model_lib.Rank4ClassModel, inputs,
                     num_candidates: int, chunk_size: int = full_class_scoring.DEFAULT_CHUNK_SIZE
                     ) -> tuple[tf.Tensor, tf.Tensor]:
  """(the retriever's top M class ids int32 `[batch, M]` over all classes, exact and chunked; the ranker's
  scores of those M `[batch, M]`): what every two-stage ranking is made of."""
  candidates, _, _ = full_class_scoring.chunked_top_k(retriever, inputs, num_candidates, chunk_size)
  return candidates, ranker.list_scores(inputs, candidates, training=False)


def two_stage_top_k(retriever: model_lib.Rank4ClassModel, ranker: model_lib.Rank4ClassModel, inputs,
                    num_candidates: int, k: int, chunk_size: int = full_class_scoring.DEFAULT_CHUNK_SIZE
                    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """(class ids int32 `[batch, k]`, ranker scores `[batch, k]`, best first; candidates int32 `[batch, M]`)."""
  _check_pair(retriever, ranker, num_candidates)
  if not 1 <= k <= num_candidates:
    raise ValueError(f"`k` must be in [1, num_candidates={num_candidates}], got {k}.")
  candidates, scores = candidate_scores(retriever, ranker, inputs, num_candidates, chunk_size)
  top_scores, positions = tf.math.top_k(scores, k=k)
  return tf.gather(candidates, positions, batch_dims=1), top_scores, candidates


class TwoStageModule(tf.Module):
  """Both models and the signature `serve(inputs)` -> {"class_ids", "class_names", "scores" `[batch, k]`,
  "candidate_ids" `[batch, M]`}, the outputs of `serving.make_serving_function` plus the first stage's."""

  def __init__(self, retriever: model_lib.Rank4ClassModel, ranker: model_lib.Rank4ClassModel,
               num_candidates: int, top_k: int = 5, chunk_size: int = full_class_scoring.DEFAULT_CHUNK_SIZE,
               input_spec: tf.TensorSpec | None = None):
    super().__init__()
    _check_pair(retriever, ranker, num_candidates)
    self.retriever, self.ranker = retriever, ranker
    self._class_names = tf.constant(ranker.class_names)
    k = min(top_k, num_candidates)

    spec = input_spec or ranker.serving_input_spec()
    spec = tf.TensorSpec([None, *spec.shape[1:]], spec.dtype, name="inputs")

    @tf.function(input_signature=[spec])
    def serve(inputs):
      ids, scores, candidates = two_stage_top_k(retriever, ranker, inputs, num_candidates, k, chunk_size)
      return {"class_ids": ids, "class_names": tf.gather(self._class_names, ids), "scores": scores,
              "candidate_ids": candidates}

    @tf.function(input_signature=[spec])
    def candidates(inputs):
      ids, scores = candidate_scores(retriever, ranker, inputs, num_candidates, chunk_size)
      return {"candidate_ids": ids, "candidate_scores": scores}

    self.serve, self.candidates = serve, candidates

  def signatures(self) -> dict[str, Any]:
    return {SIGNATURE_KEY: self.serve.get_concrete_function(),
            served.CANDIDATES_SIGNATURE: self.candidates.get_concrete_function()}


def export_two_stage(retriever: model_lib.Rank4ClassModel, ranker: model_lib.Rank4ClassModel, export_dir: str,
                     num_candidates: int, top_k: int = 5,
                     chunk_size: int = full_class_scoring.DEFAULT_CHUNK_SIZE,
                     input_spec: tf.TensorSpec | None = None,
                     frozen_text_encoder: text_encoder.TextEncoderConfig | None = None,
                     calibration: calibration_lib.Calibration | None = None) -> str:
  """Saves the two-stage signatures and the inputs description as a SavedModel (written whole or not at all);
  returns `export_dir`.

  `tf.saved_model.load(export_dir).signatures["serving_default"](inputs=batch)` serves it (no `import
  rank4class` needed); its "candidates" signature gives the M candidates and the ranker's scores of them.

  Args:
    frozen_text_encoder: When the models take frozen text embeddings: the encoder that makes them from raw
      texts.
    calibration: The ranker's calibration (`served.CALIBRATION_FILE`), copied so that the export gives
      probabilities: softmax of the ranker's scores / T over the M candidates (fitted over all classes, so a
        little
      higher than the ranker's own, and a class the first stage misses has probability 0 and is in no class
      set).
  """
  module = TwoStageModule(retriever, ranker, num_candidates, top_k, chunk_size, input_spec)
  spec = input_spec or ranker.serving_input_spec()
  inputs = served.ExportInputs(served.TWO_STAGE, served.input_kind(spec, frozen_text_encoder),
                               frozen_text_encoder,
                               class_names=ranker.class_names, num_candidates=num_candidates)
  with atomic_directory(export_dir) as temp:
    tf.saved_model.save(module, temp, signatures=module.signatures())
    served.write_inputs(temp, inputs)
    if calibration is not None:
      served.write_calibration(temp, calibration)
  return export_dir


def two_stage_report(retriever: model_lib.Rank4ClassModel, ranker: model_lib.Rank4ClassModel,
                     dataset: tf.data.Dataset, num_candidates: int, ks: tuple[int, ...] = (1, 5),
                     chunk_size: int = full_class_scoring.DEFAULT_CHUNK_SIZE) -> dict[str, Any]:
  """The first stage's recall@M, and the two-stage and exhaustive ranker metrics on `(inputs, class ids)`.

  A true class the first stage misses counts as ranked below every candidate (a top-K miss for every K <= M,
  no NDCG@K gain, reciprocal rank 0).
  """
  _check_pair(retriever, ranker, num_candidates)

  @tf.function
  def step(x, y):
    y = tf.cast(tf.reshape(y, [-1]), tf.int32)
    candidates, scores = candidate_scores(retriever, ranker, x, num_candidates, chunk_size)
    return candidates, scores, full_class_scoring.chunked_top_k(ranker, x, 1, chunk_size, y)[2]

  ranks, exhaustive, start = [], [], time.perf_counter()
  for x, y in dataset:
    candidates, scores, e = step(x, y)
    labels = np.reshape(np.asarray(y), [-1]).astype(np.int64)
    ranks.append(served.candidate_ranks(candidates.numpy(), scores.numpy(), labels))
    exhaustive.append(e.numpy())
  ranks, exhaustive = np.concatenate(ranks), np.concatenate(exhaustive)
  two_stage = full_class_scoring.rank_metrics(ranks, ks)
  return {"recall_at_m": float(np.isfinite(ranks).mean()), "num_candidates": num_candidates,
          "n": int(len(ranks)),
          "two_stage": two_stage, "exhaustive": full_class_scoring.rank_metrics(exhaustive, ks),
          "seconds": time.perf_counter() - start}


def recall_curve(retriever: model_lib.Rank4ClassModel, dataset: tf.data.Dataset, ms: tuple[int, ...],
                 chunk_size: int = full_class_scoring.DEFAULT_CHUNK_SIZE) -> dict[int, float]:
  """The first stage's recall@M for each M of `ms`: the share of `(inputs, class ids)` instances whose true
  class the retriever ranks among its M best (exact ranks over all classes, chunked; one pass for every M).

  Ties count against the true class: it is among the M best when fewer than M classes score strictly higher.
  """
  ranks_of = full_class_scoring.rank_function(retriever, (1,), chunk_size)
  ranks = np.concatenate([ranks_of(x, y).numpy() for x, y in dataset])
  return {m: float(np.mean(ranks < m)) for m in ms}
