"""Classes described by text at serving time: rank a set of class texts given with the request (classes never
seen in training, or a re-written class table) for each instance, with a model whose class encoder embeds
class texts (`MetadataClassEncoder`). Nothing is retrained: the class texts go through the trained text
encoder and projection, the instances through the trained instance encoder, and the trained interaction scores
them.

`export_zero_shot` writes the SavedModel: `(inputs, class_texts) -> scores, top classes` in one call, and the
class tower and the scorer apart (a class set embedded once, then scored against every request;
`served.ZeroShot`); `zero_shot_report` measures it on labelled instances, and `nearest_text_baseline` is the
untrained reference: cosine similarity of an instance's and a class text's frozen embeddings.
"""

import os
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class.inference import full_class_scoring, served
from rank4class.modeling import class_encoders
from rank4class.modeling import model as model_lib
from rank4class_data.validation import atomic_directory
from rank4class_encoders import text_encoder

SIGNATURE_KEY = served.SIGNATURE_KEY
# The folder of a training run (`rank4class-train`'s model_dir) that holds its zero-shot model, when it
# trained one (`rank4class.training.zero_shot_choice`); its export/ is what a zero-shot export of the run
# serves.
RUN_ZERO_SHOT_DIR = "zero_shot"
# The folder of a training run whose classes are texts that trained the same run without them, to compare
# (`rank4class.training.model_choice.choose_class_texts`): its export is then a model of one-hot classes.
RUN_WITHOUT_CLASS_TEXTS_DIR = "without_class_texts"


def trained_zero_shot_model(path: str) -> str | None:
  """The one-stage export of the zero-shot model of the training run in `path`, or None when it has none."""
  candidate = os.path.join(path, RUN_ZERO_SHOT_DIR, "export")
  return candidate if os.path.isfile(os.path.join(candidate, "saved_model.pb")) else None


def zero_shot_report(model: model_lib.Rank4ClassModel, inputs: np.ndarray, labels: np.ndarray,
                     class_texts: list[str], ks: tuple[int, ...] = (1, 5),
                     batch_size: int = 512) -> dict[str, Any]:
  """Top-K error, NDCG@K, MRR and accuracy of ranking `class_texts` for instances whose true class is
  `labels` (ids into `class_texts`)."""
  score = tf.function(lambda x: model.text_class_scores(x, tf.constant(class_texts), training=False))
  ranks = np.concatenate([served.strictly_higher_ranks(score(inputs[i:i + batch_size]).numpy(),
                                                       labels[i:i + batch_size])
                          for i in range(0, len(labels), batch_size)])
  return {"metrics": full_class_scoring.rank_metrics(ranks, ks), "n": int(len(labels)),
          "num_classes": len(class_texts)}


def nearest_text_baseline(instance_embeddings: np.ndarray, class_text_embeddings: np.ndarray,
                          labels: np.ndarray, ks: tuple[int, ...] = (1, 5)) -> dict[str, Any]:
  """The same metrics for ranking classes by cosine similarity of frozen instance and class-text
  embeddings."""
  def unit(x):
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
  scores = unit(instance_embeddings) @ unit(class_text_embeddings).T
  return {"metrics": full_class_scoring.rank_metrics(served.strictly_higher_ranks(scores, labels), ks),
          "n": int(len(labels)), "num_classes": len(class_text_embeddings)}


class ZeroShotModule(tf.Module):
  """The model and three signatures:
  - `serve(inputs, class_texts)` -> {"scores" `[batch, n]`, "class_indices", "class_texts", "top_scores"
    `[batch, k]`}: the k best of the given class texts per instance, best first (one call, class texts
    embedded with every request);
  - `embed_class_texts(class_texts)` -> {"class_embeddings" `[n, d]`}: a class set's vectors, computed once;
  - `score_classes(inputs, class_embeddings)` -> {"scores" `[batch, n]`}: instances against those vectors
    (what `rank4class-predict` and `rank4class-evaluate` call per batch).
  """

  def __init__(self, model: model_lib.Rank4ClassModel, top_k: int = 5,
               input_spec: tf.TensorSpec | None = None):
    super().__init__()
    if not isinstance(model.class_encoder, class_encoders.MetadataClassEncoder):
      raise ValueError("A zero-shot export needs a model whose classes are texts (the metadata class "
                       f"encoder); this model's class encoder is {type(model.class_encoder).__name__}.")
    self.model = model
    spec = input_spec or model.serving_input_spec()
    spec = tf.TensorSpec([None, *spec.shape[1:]], spec.dtype, name="inputs")
    texts_spec = tf.TensorSpec([None], tf.string, name="class_texts")

    @tf.function(input_signature=[spec, texts_spec])
    def serve(inputs, class_texts):
      scores = model.text_class_scores(inputs, class_texts, training=False)
      top_scores, indices = tf.math.top_k(scores, k=tf.minimum(top_k, tf.shape(class_texts)[0]))
      return {"scores": scores, "class_indices": indices, "class_texts": tf.gather(class_texts, indices),
              "top_scores": top_scores}

    @tf.function(input_signature=[texts_spec])
    def embed_class_texts(class_texts):
      return {"class_embeddings": tf.cast(model.class_encoder.encode_class_texts(class_texts, training=False),
                                          tf.float32)}

    @tf.function(input_signature=[spec, tf.TensorSpec([None, model.class_encoder.embedding_dim], tf.float32,
                                                      name="class_embeddings")])
    def score_classes(inputs, class_embeddings):
      return {"scores": model.class_vector_scores(inputs, class_embeddings, training=False)}

    self.serve, self.embed_class_texts, self.score_classes = serve, embed_class_texts, score_classes

  def signatures(self) -> dict[str, Any]:
    return {SIGNATURE_KEY: self.serve.get_concrete_function(),
            served.EMBED_CLASSES_SIGNATURE: self.embed_class_texts.get_concrete_function(),
            served.SCORE_CLASSES_SIGNATURE: self.score_classes.get_concrete_function()}


def export_zero_shot(model: model_lib.Rank4ClassModel, export_dir: str, top_k: int = 5,
                     input_spec: tf.TensorSpec | None = None,
                     frozen_text_encoder: text_encoder.TextEncoderConfig | None = None) -> str:
  """Saves the zero-shot signatures and the inputs description (written whole or not at all); returns
  `export_dir`.

  `tf.saved_model.load(export_dir).signatures["serving_default"](inputs=batch, class_texts=texts)` serves it;
  `rank4class-predict` / `served.load` rank the training classes or a class-texts file's.

  Args:
    frozen_text_encoder: When the model takes frozen text embeddings: the encoder that makes them from raw
      texts.

  Raises:
    ValueError: when the model's class encoder does not embed class texts.
  """
  module = ZeroShotModule(model, top_k, input_spec)
  spec = input_spec or model.serving_input_spec()
  inputs = served.ExportInputs(served.ZERO_SHOT, served.input_kind(spec, frozen_text_encoder),
                               frozen_text_encoder,
                               class_names=model.class_names, class_texts=model.class_encoder.class_texts)
  with atomic_directory(export_dir) as temp:
    tf.saved_model.save(module, temp, signatures=module.signatures())
    served.write_inputs(temp, inputs)
  return export_dir
