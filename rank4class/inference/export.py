"""Exports of a trained Rank4Class model beyond its own serving signature (`rank4class-export`):
- "two_stage": a cheap retriever model (dot interaction) picks each instance's top M classes over all classes
  (exact, chunked), the model re-ranks those M, in one signature (`two_stage`);
- "zero_shot": the model ranks class texts given with each request, so classes unseen in training, or a
  re-written class table, are ranked without retraining (`zero_shot`; needs the metadata class encoder).

A two-stage export carries the ranker's calibration (`served.CALIBRATION_FILE`): probabilities over its M
candidates. A zero-shot export carries none (its classes are whatever texts come at serving time, which the
validation split never saw): it gives scores only.
"""

import dataclasses
import os
from typing import Any

import tensorflow as tf

from rank4class.inference import full_class_scoring, served, two_stage, zero_shot
from rank4class.modeling import class_encoders
from rank4class.modeling import model as model_lib
from rank4class_data.validation import check_choice, check_range

TWO_STAGE = "two_stage"
ZERO_SHOT = "zero_shot"
KINDS = (TWO_STAGE, ZERO_SHOT)


@dataclasses.dataclass
class ExportConfig:
  """What to export.

  Attributes:
    model_path: The trained model: a training model_dir (its export/) or a SavedModel folder. The ranker of
      "two_stage", the text-class model of "zero_shot".
    export_dir: Where the new SavedModel goes (written whole or not at all; replaces an existing one).
    kind: One of `KINDS`.
    retriever_path: "two_stage": the first stage's model (same classes in the same order), e.g. a dot model.
    num_candidates: "two_stage": classes M the first stage passes to the ranker.
    top_k: Classes returned per instance.
    chunk_size: "two_stage": classes the first stage scores at once (its memory bound).
  """

  model_path: str
  export_dir: str
  kind: str = TWO_STAGE
  retriever_path: str | None = None
  num_candidates: int = 200
  top_k: int = 5
  chunk_size: int = full_class_scoring.DEFAULT_CHUNK_SIZE

  def __post_init__(self):
    check_choice("kind", self.kind, KINDS)
    if self.kind == TWO_STAGE and not self.retriever_path:
      raise ValueError("A two-stage export needs the retriever model (`retriever_path`), e.g. a "
                       "dot-interaction model trained on the same classes.")
    for name in ("top_k", "num_candidates", "chunk_size"):
      check_range(name, getattr(self, name), 1, integer=True)


def _load(path: str) -> tuple[model_lib.Rank4ClassModel, tf.TensorSpec, served.ExportInputs]:
  export_dir = served.resolve_export_dir(path)
  inputs = served.read_inputs(export_dir)
  if inputs.kind != served.ONE_STAGE:
    raise ValueError(f"{path}: a {inputs.kind} export; give the trained model (rank4class-train's model_dir "
                     "or its export/)")
  return served.load_keras_model(export_dir), served.serving_input_spec(export_dir), inputs


def _describe(spec: tf.TensorSpec, inputs: served.ExportInputs) -> str:
  if inputs.frozen_text_encoder is not None:
    return f"texts embedded by {inputs.frozen_text_encoder.encoder_handle}"
  return f"{inputs.input} {spec.dtype.name} {spec.shape.as_list()[1:]}"


def export(config: ExportConfig) -> dict[str, Any]:
  """Writes the export; returns {"export_dir", "kind", "inputs", "outputs", "num_classes", "calibrated",
  "source"}: "source" is the model exported, for "zero_shot" of a training run that trained a zero-shot model
  (`rank4class.training.zero_shot_choice`) that model, chosen on classes held out of its training.

  Raises:
    FileNotFoundError: naming a model path without a SavedModel.
    ValueError: models with different classes or inputs, M outside [1, C], or zero-shot without class texts.
  """
  source = config.model_path
  if config.kind == ZERO_SHOT:
    source = zero_shot.trained_zero_shot_model(config.model_path) or source
  model, spec, inputs = _load(source)
  calibration = None
  if config.kind == TWO_STAGE:
    retriever, retriever_spec, retriever_inputs = _load(config.retriever_path)
    if (
      retriever_inputs.frozen_text_encoder != inputs.frozen_text_encoder
      or retriever_spec.dtype != spec.dtype
      or retriever_spec.shape[1:] != spec.shape[1:]
    ):
      raise ValueError(f"{config.retriever_path} and {config.model_path} read different inputs ("
                       f"{_describe(retriever_spec, retriever_inputs)} against {_describe(spec, inputs)}); "
                       "the two stages must be trained on the same inputs (the same data and, for text, "
                       "`rank4class-train --text_mode=frozen`: the default, auto, may keep a TF-IDF model "
                       "that reads raw text)")
    calibration = served.read_calibration(served.resolve_export_dir(config.model_path))
    two_stage.export_two_stage(retriever, model, config.export_dir, config.num_candidates, config.top_k,
                               config.chunk_size, spec, inputs.frozen_text_encoder, calibration)
  else:
    if not isinstance(model.class_encoder, class_encoders.MetadataClassEncoder):
      plain = os.path.isdir(os.path.join(config.model_path, zero_shot.RUN_WITHOUT_CLASS_TEXTS_DIR))
      kept = ("; the run kept the same run without its class texts (better on validation) and trained no "
              "zero-shot model: `zero_shot_holdout` (default auto) trains one" if plain else "")
      raise ValueError(f"{config.model_path}: a zero-shot export needs a model whose classes are texts (the "
                       "metadata class encoder: `rank4class-train --class_encoder=metadata`); this model's "
                       f"class encoder is {type(model.class_encoder).__name__}{kept}.")
    zero_shot.export_zero_shot(model, config.export_dir, config.top_k, spec, inputs.frozen_text_encoder)
  # From the graph file: loading the SavedModel restores every function and variable (1.4 s with MiniLM).
  input_names, output_names = served.signature_names(config.export_dir)
  return {"export_dir": config.export_dir, "kind": config.kind, "num_classes": model.num_classes,
          "calibrated": calibration is not None, "source": source, "inputs": input_names,
          "outputs": output_names}
