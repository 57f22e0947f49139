"""Classes described by text at serving time: rank a set of class texts given with the request (classes never
seen in training, or a re-written class table) for each instance, with a model whose class encoder embeds class
texts (`MetadataClassEncoder`). Nothing is retrained: the class texts go through the trained text encoder and
projection, the instances through the trained instance encoder, and the trained interaction scores them.

`export_zero_shot` writes one SavedModel signature `(inputs, class_texts) -> scores, top classes`;
`zero_shot_report` measures it on labelled instances, and `nearest_text_baseline` is the untrained reference:
cosine similarity of an instance's and a class text's frozen embeddings.
"""

from typing import Any

import numpy as np
import tensorflow as tf

from rank4class import full_class_evaluation
from rank4class import model as model_lib
from rank4class_data.validation import atomic_directory

SIGNATURE_KEY = "serving_default"


def _ranks(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
  """0-based rank of each row's true class: how many classes score strictly higher."""
  true = scores[np.arange(len(labels)), labels]
  return (scores > true[:, None]).sum(axis=1)


def zero_shot_report(model: model_lib.Rank4ClassModel, inputs: np.ndarray, labels: np.ndarray,
                     class_texts: list[str], ks: tuple[int, ...] = (1, 5), batch_size: int = 512) -> dict[str, Any]:
  """Top-K error, NDCG@K, MRR and accuracy of ranking `class_texts` for instances whose true class is
  `labels` (ids into `class_texts`)."""
  score = tf.function(lambda x: model.text_class_scores(x, tf.constant(class_texts), training=False))
  ranks = np.concatenate([_ranks(score(inputs[i:i + batch_size]).numpy(), labels[i:i + batch_size])
                          for i in range(0, len(labels), batch_size)])
  return {"metrics": full_class_evaluation.rank_metrics(ranks, ks), "n": int(len(labels)),
          "num_classes": len(class_texts)}


def nearest_text_baseline(instance_embeddings: np.ndarray, class_text_embeddings: np.ndarray, labels: np.ndarray,
                          ks: tuple[int, ...] = (1, 5)) -> dict[str, Any]:
  """The same metrics for ranking classes by cosine similarity of frozen instance and class-text embeddings."""
  def unit(x):
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
  scores = unit(instance_embeddings) @ unit(class_text_embeddings).T
  return {"metrics": full_class_evaluation.rank_metrics(_ranks(scores, labels), ks), "n": int(len(labels)),
          "num_classes": len(class_text_embeddings)}


class ZeroShotModule(tf.Module):
  """The model and `serve(inputs, class_texts)` -> {"scores" `[batch, n]`, "class_indices", "class_texts",
  "top_scores" `[batch, k]`}: the k best of the given class texts per instance, best first."""

  def __init__(self, model: model_lib.Rank4ClassModel, top_k: int = 5, input_spec: tf.TensorSpec | None = None):
    super().__init__()
    self.model = model

    @tf.function(input_signature=[input_spec or model.serving_input_spec(), tf.TensorSpec([None], tf.string)])
    def serve(inputs, class_texts):
      scores = model.text_class_scores(inputs, class_texts, training=False)
      top_scores, indices = tf.math.top_k(scores, k=tf.minimum(top_k, tf.shape(class_texts)[0]))
      return {"scores": scores, "class_indices": indices, "class_texts": tf.gather(class_texts, indices),
              "top_scores": top_scores}

    self.serve = serve


def export_zero_shot(model: model_lib.Rank4ClassModel, export_dir: str, top_k: int = 5,
                     input_spec: tf.TensorSpec | None = None) -> str:
  """Saves the zero-shot signature (written whole or not at all); returns `export_dir`.

  `tf.saved_model.load(export_dir).signatures["serving_default"](inputs=batch, class_texts=texts)` serves it.

  Raises:
    ValueError: when the model's class encoder does not embed class texts.
  """
  module = ZeroShotModule(model, top_k, input_spec)
  with atomic_directory(export_dir) as temp:
    tf.saved_model.save(module, temp, signatures={SIGNATURE_KEY: module.serve.get_concrete_function()})
  return export_dir
