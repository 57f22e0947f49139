"""Serving signature for Rank4Class: raw inputs (strings, images, features) -> top-K class names and
scores."""

import os
from collections.abc import Callable

import tensorflow as tf
import tensorflow_hub as hub

from rank4class.inference import calibration as calibration_lib
from rank4class.inference import served
from rank4class.modeling import hybrid_text_encoder, ranking_math
from rank4class.modeling import model as model_lib
from rank4class_data.validation import atomic_directory, check_range
from rank4class_encoders import text_encoder

SIGNATURE_KEY = served.SIGNATURE_KEY


def make_serving_function(
  model: model_lib.Rank4ClassModel,
  top_k: int = 5,
  input_spec: tf.TensorSpec | None = None,
  input_dtype: tf.DType | None = None,
) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
  """A `tf.function` that scores a batch of raw inputs and returns its `top_k` classes, best first.

  Args:
    model: A built `Rank4ClassModel` (called at least once).
    top_k: How many classes to return; capped at the number of classes.
    input_spec: Signature of the raw input batch; default `model.serving_input_spec()` (`[None]` strings for
      text, `[None, ...]` of the shape the model was built with otherwise).
    input_dtype: Optional dtype replacing the default spec's (e.g. `tf.uint8` for raw images).

  Returns:
    `serve(inputs)` -> {"class_ids": int32 `[batch_size, k]`, "class_names": string `[batch_size, k]`,
    "scores": float32 `[batch_size, k]`}, with `k = min(top_k, num_classes)`.

  Raises:
    ValueError: If `top_k` < 1 or the model is not built and no `input_spec` is given.
  """
  check_range("top_k", top_k, 1, integer=True)
  spec = input_spec or model.serving_input_spec()
  if input_dtype is not None:
    spec = tf.TensorSpec(spec.shape, input_dtype, name=spec.name)
  k = min(top_k, model.num_classes)
  class_names = tf.constant(model.class_names)

  @tf.function(input_signature=[spec], autograph=False)
  def serve(inputs):
    class_ids, scores = ranking_math.top_k_classes(model(inputs, training=False), k)
    return {
      "class_ids": class_ids,
      "class_names": tf.gather(class_names, class_ids),
      "scores": tf.cast(scores, tf.float32),
    }

  return serve


def _write_inputs(staging: str, model: model_lib.Rank4ClassModel, input_spec: tf.TensorSpec | None,
                  input_dtype: tf.DType | None,
                  frozen_text_encoder: text_encoder.TextEncoderConfig | None) -> None:
  """Writes the export's inputs description (and a hybrid text model's config) into `staging`."""
  spec = input_spec or model.serving_input_spec()
  if input_dtype is not None:
    spec = tf.TensorSpec(spec.shape, input_dtype)
  inputs = served.ExportInputs(served.ONE_STAGE, served.input_kind(spec, frozen_text_encoder),
                               frozen_text_encoder)
  encoder = model.instance_encoder
  if isinstance(encoder, hybrid_text_encoder.HybridTextEncoder):
    # Predict and evaluate read the embedding branch's vectors from the embedding cache under this encoder's
    # identity, and build the model from its config without MiniLM.
    inputs.hybrid_text_encoder, inputs.embedding_dim = encoder.text_encoder_config, encoder.embedding_dim
    served.write_model_config(staging, model)
  served.write_inputs(staging, inputs)


def has_hub_layer(model: tf.keras.Model) -> bool:
  """Whether `model` holds a TF Hub layer (a text encoder). Its export keeps Keras' traces of every layer, as
  exports always did: a hub layer's config names its module's path on the machine that saved it. The export of
  any other model saves its configs without the traces (every layer of the toolkit is registered with its
  config): `tf.keras.models.load_model` rebuilds it after `import rank4class`, and the serving signature is
  saved as before. Saving and loading take a third of the time or less."""
  return any(isinstance(layer, hub.KerasLayer) for layer in model.submodules)


def export_saved_model(
  model: model_lib.Rank4ClassModel,
  export_dir: str,
  top_k: int = 5,
  input_spec: tf.TensorSpec | None = None,
  input_dtype: tf.DType | None = None,
  overwrite: bool = False,
  frozen_text_encoder: text_encoder.TextEncoderConfig | None = None,
  calibration: calibration_lib.Calibration | None = None,
) -> str:
  """Saves `model` as a SavedModel whose "serving_default" signature returns top-K class names and scores.

  The directory also loads back as a `Rank4ClassModel` with `tf.keras.models.load_model` after
  `import rank4class`. Every file (the SavedModel, its inputs description `served.INPUTS_FILE` and calibration
  `served.CALIBRATION_FILE`; a hybrid text model's config `served.MODEL_CONFIG_FILE`) is written
  into a temporary sibling folder that then replaces `export_dir` whole (`atomic_directory`): a reader sees
  the complete old export or the complete new one, never a half-written one or one without its inputs
  description.

  Args:
    model: A built `Rank4ClassModel`.
    export_dir: Destination directory.
    top_k: Classes per instance in the signature's outputs.
    input_spec: Signature of the raw inputs (see `make_serving_function`).
    input_dtype: Dtype replacing the default input spec's.
    overwrite: Replace an existing `export_dir`.
    frozen_text_encoder: When the model takes frozen text embeddings (--text_mode=frozen): the encoder that
      makes them from raw texts, recorded so that `rank4class-predict` and `rank4class-evaluate` read raw
      texts.
    calibration: The model's calibration (fitted on the validation split), written as
      `served.CALIBRATION_FILE` so that the export gives probabilities and conformal class sets; None for
      scores only.

  Returns:
    `export_dir`.

  Raises:
    FileExistsError: If `export_dir` exists and `overwrite` is False.
  """
  export_dir = os.path.abspath(export_dir)
  if os.path.exists(export_dir) and not overwrite:
    raise FileExistsError(f"Export directory {export_dir} exists; pass overwrite=True to replace it.")
  serve = make_serving_function(model, top_k, input_spec, input_dtype)
  with atomic_directory(export_dir) as staging:
    model.save(
      staging,
      save_format="tf",
      include_optimizer=False,
      save_traces=has_hub_layer(model),
      signatures={SIGNATURE_KEY: serve.get_concrete_function()},
    )
    _write_inputs(staging, model, input_spec, input_dtype, frozen_text_encoder)
    if calibration is not None:
      served.write_calibration(staging, calibration)
  return export_dir


def load_serving_function(export_dir: str) -> Callable[..., dict[str, tf.Tensor]]:
  """The "serving_default" signature of an exported Rank4Class SavedModel (needs no `import rank4class`).

  Call it as `fn(batch)`; it returns the dict of `make_serving_function`.
  """
  loaded = tf.saved_model.load(export_dir)

  def serve(inputs: tf.Tensor) -> dict[str, tf.Tensor]:
    # Referencing `loaded` keeps its variables alive as long as this function.
    return loaded.signatures[SIGNATURE_KEY](inputs=inputs)

  return serve
