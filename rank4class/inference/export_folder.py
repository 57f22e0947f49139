"""An export folder: where the SavedModel is (an export, or a training model_dir's `export/`), loading it with
one located error, and the files beside it that every export kind carries:

- the inputs description (`INPUTS_FILE`, `ExportInputs`): what raw input the export reads ("text", "image",
  "dense"), whether raw texts first become a frozen text encoder's embeddings (the export then takes vectors;
  texts are embedded through the embedding cache, as in training), and for two-stage and zero-shot exports
  their classes;
- for a hybrid text model (`--text_mode=hybrid`), its frozen text encoder and the model's config
  (`MODEL_CONFIG_FILE`): predict and evaluate then read the embedding branch's vectors from the embedding
  cache and build the model without MiniLM (`load_hybrid_model`); hybrid exports of 0.8 and earlier run
  MiniLM in their graph, as served;
- the calibration (`CALIBRATION_FILE`, `rank4class.inference.calibration.Calibration`, fitted on the
  validation split by `rank4class-train`): a calibrated export gives probabilities and conformal class sets.
  Exports without one (trained before calibration existed, with --nocalibrate, or zero-shot) give scores only.

`rank4class.inference.served` loads each kind for serving on top of this.
"""

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError
from tensorflow.core.protobuf import saved_model_pb2

from rank4class.inference import calibration as calibration_lib
from rank4class.modeling import class_encoders
from rank4class.modeling import model as model_lib
from rank4class_data.classification_data import EMBEDDING_KEY, TEXT_KEY
from rank4class_data.validation import DataError, write_json
from rank4class_encoders import text_encoder

ONE_STAGE = "one_stage"
TWO_STAGE = "two_stage"
ZERO_SHOT = "zero_shot"
KINDS = (ONE_STAGE, TWO_STAGE, ZERO_SHOT)
TEXT = "text"
IMAGE = "image"
DENSE = "dense"
INPUTS_FILE = "rank4class_inputs.json"
# `calibration.Calibration.to_dict()`; absent from uncalibrated exports.
CALIBRATION_FILE = "calibration.json"
SIGNATURE_KEY = "serving_default"
# Hybrid text exports: the Keras model's `get_config()` (JSON), to build it without loading MiniLM.
MODEL_CONFIG_FILE = "model_config.json"


@dataclasses.dataclass
class ExportInputs:
  """What an export reads and ranks (`INPUTS_FILE` in the export folder).

  Attributes:
    kind: One of `KINDS`.
    input: The raw input users give: "text", "image" or "dense".
    frozen_text_encoder: When set, the export takes this encoder's frozen embeddings of raw texts (models
      trained with --text_mode=frozen), computed before scoring.
    class_names: Two-stage and zero-shot: the classes in id order (zero-shot: the training classes, ranked
      when no class-texts file is given). None for one-stage exports (the Keras model holds them).
    class_texts: Zero-shot: the training classes' texts, same order.
    num_candidates: Two-stage: classes M the first stage passes on.
    hybrid_text_encoder: One-stage hybrid text models: the frozen text encoder of the embedding branch (its
      precision resolved as the export computes); its embeddings are the embedding cache's under this
      encoder's identity. None for other models and for hybrid exports of 0.8 and earlier.
    embedding_dim: With `hybrid_text_encoder`: the width of its embeddings.
  """

  kind: str
  input: str
  frozen_text_encoder: text_encoder.TextEncoderConfig | None = None
  class_names: list[str] | None = None
  class_texts: list[str] | None = None
  num_candidates: int | None = None
  hybrid_text_encoder: text_encoder.TextEncoderConfig | None = None
  embedding_dim: int | None = None

  def to_dict(self) -> dict[str, Any]:
    out = dataclasses.asdict(self)
    return {key: value for key, value in out.items() if value is not None}

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> "ExportInputs":
    values = dict(values)
    values.setdefault("kind", ONE_STAGE)  # Descriptions written before there were other kinds.
    for key in ("frozen_text_encoder", "hybrid_text_encoder"):
      if values.get(key) is not None:
        values[key] = text_encoder.TextEncoderConfig(**values[key])
    known = {field.name for field in dataclasses.fields(cls)}
    return cls(**{key: value for key, value in values.items() if key in known})


def input_kind(spec: tf.TensorSpec, frozen: text_encoder.TextEncoderConfig | None) -> str:
  """"text", "image" or "dense": what users give a model whose signature input is `spec`."""
  if spec.dtype == tf.string or frozen is not None:
    return TEXT
  return IMAGE if spec.shape.rank > 2 else DENSE


def write_inputs(folder: str, inputs: ExportInputs) -> None:
  """Writes the inputs description into an export folder (whole or not at all)."""
  write_json(os.path.join(folder, INPUTS_FILE), inputs.to_dict())


def write_calibration(folder: str, calibration: calibration_lib.Calibration) -> None:
  """Writes the calibration into an export folder (whole or not at all)."""
  write_json(os.path.join(folder, CALIBRATION_FILE), calibration.to_dict())


def read_calibration(export_dir: str) -> calibration_lib.Calibration | None:
  """The export's calibration (`CALIBRATION_FILE`), or None for an export without one.

  Raises:
    DataError: naming the file when it is not a calibration.
  """
  path = os.path.join(export_dir, CALIBRATION_FILE)
  if not os.path.exists(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      return calibration_lib.Calibration.from_dict(json.load(f))
  except (ValueError, TypeError, AttributeError) as e:
    raise DataError(path, f"not a calibration ({e})", expected="the JSON rank4class-train writes (train or "
                    "export the model again, or delete the file to serve scores only)") from e


NOT_CALIBRATED_NOTE = ("this export carries no calibration ({file}): it gives scores, not probabilities "
                       "(exports of rank4class-train since calibration existed carry one unless trained with "
                       "`rank4class-train --nocalibrate`; zero-shot exports carry none)")



def resolve_export_dir(model_path: str) -> str:
  """The SavedModel folder: `model_path` itself, or `<model_path>/export` of a training model_dir.

  Raises:
    FileNotFoundError: naming the path when neither holds a saved_model.pb.
  """
  for candidate in (model_path, os.path.join(model_path, "export")):
    if os.path.isfile(os.path.join(candidate, "saved_model.pb")):
      return candidate
  raise FileNotFoundError(f"{model_path}: no SavedModel here or in {os.path.join(model_path, 'export')}; "
                          "expected the export of a training run (or its model_dir).")


def model_folder(model_path: str) -> str:
  """The SavedModel folder `resolve_export_dir` finds for `model_path`, or `model_path` itself when it holds
  none (for checks that run before the model is loaded; loading it then names what is missing)."""
  try:
    return resolve_export_dir(model_path)
  except FileNotFoundError:
    return model_path


# What TensorFlow and Keras raise for a SavedModel folder whose files are damaged (empty, cut short, missing
# variables): anything but a model the toolkit wrote.
_UNLOADABLE = (ValueError, OSError, IndexError, KeyError, DecodeError, tf.errors.OpError)


@contextlib.contextmanager
def loading(export_dir: str) -> Iterator[None]:
  """Reports a SavedModel that cannot be loaded as one DataError naming its folder (TensorFlow's own errors
  name a file inside it, an op, or nothing)."""
  graph = os.path.join(export_dir, "saved_model.pb")
  if os.path.isfile(graph) and os.path.getsize(graph) == 0:
    raise DataError(graph, "an empty file", expected="a SavedModel's graph (export the model again)")
  try:
    yield
  except DataError:
    raise
  except _UNLOADABLE as e:
    reason = " ".join(str(e).split()) or "no message"
    reason = reason if len(reason) <= 200 else reason[:200] + "..."
    raise DataError(export_dir, f"cannot load the SavedModel ({type(e).__name__}: {reason})",
                    expected="a SavedModel exported by rank4class-train or rank4class-export "
                             "(export it again)"
                    ) from e


def signature_inputs(signature) -> dict[str, tf.TensorSpec]:
  """A loaded signature's keyword inputs: name -> spec."""
  return signature.structured_input_signature[1]


def _signature_def(export_dir: str, key: str = SIGNATURE_KEY):
  """The export's signature `key` as its graph file records it (`SignatureDef`: inputs and outputs by name),
  read without loading the SavedModel (which restores every function and variable: seconds for a text
  model)."""
  with loading(export_dir):
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
      saved.ParseFromString(f.read())
    return saved.meta_graphs[0].signature_def[key]


def signature_names(export_dir: str, key: str = SIGNATURE_KEY) -> tuple[list[str], list[str]]:
  """(input names, output names) of the export's signature `key`, sorted, read from its graph file."""
  signature = _signature_def(export_dir, key)
  return sorted(signature.inputs), sorted(signature.outputs)


def _tensor_spec(name: str, info) -> tf.TensorSpec:
  """A `TensorInfo` of a `SignatureDef` as the loaded signature's `tf.TensorSpec`."""
  return tf.TensorSpec(tf.TensorShape(info.tensor_shape), tf.dtypes.as_dtype(info.dtype), name=name)


def serving_input_spec(export_dir: str) -> tf.TensorSpec:
  """The raw input spec (`inputs`) of the export's serving signature (dtype and shape of one batch).

  Raises:
    DataError: naming the folder, for a SavedModel that cannot be read or has no serving signature.
  """
  inputs = _signature_def(export_dir).inputs
  if not inputs:
    raise DataError(export_dir, "a serving signature without inputs",
                    expected="a SavedModel exported by rank4class-train or rank4class-export (export it "
                    "again)")
  name = "inputs" if "inputs" in inputs else sorted(inputs)[0]
  return _tensor_spec(name, inputs[name])


def read_inputs(export_dir: str) -> ExportInputs:
  """The export's inputs description; for exports written before it existed, what the signature says.

  Raises:
    DataError: for a two-stage or zero-shot export written without one (export it again), or an unreadable
      file.
  """
  path = os.path.join(export_dir, INPUTS_FILE)
  if os.path.exists(path):
    try:
      with open(path, encoding="utf-8") as f:
        inputs = ExportInputs.from_dict(json.load(f))
    except (ValueError, TypeError) as e:
      raise DataError(path, f"not an inputs description ({e})", expected="the JSON rank4class-train or "
                      "rank4class-export writes (export the model again)") from e
    if inputs.kind not in KINDS:
      raise DataError(path, f"unknown export kind {inputs.kind!r}", field="kind", expected=", ".join(KINDS))
    return inputs
  signature = _signature_def(export_dir)
  if "class_texts" in signature.inputs or "candidate_ids" in signature.outputs:
    raise DataError(export_dir, f"no {INPUTS_FILE} (a two-stage or zero-shot export of an older version)",
                    expected="an export written by this version: run rank4class-export again")
  return ExportInputs(ONE_STAGE, input_kind(serving_input_spec(export_dir), None))


def frozen_text_encoder(export_dir: str) -> text_encoder.TextEncoderConfig | None:
  """The frozen text encoder whose embeddings an export takes (`INPUTS_FILE`), or None."""
  path = os.path.join(export_dir, INPUTS_FILE)
  if not os.path.exists(path):
    return None
  return read_inputs(export_dir).frozen_text_encoder


def load_keras_model(export_dir: str) -> model_lib.Rank4ClassModel:
  """Loads a one-stage export as the `Rank4ClassModel` it was saved from (the class texts' frozen embeddings
  taken from its weights, not computed again: `class_encoders.restoring_text_embeddings`); DataError naming
  the folder when it cannot be loaded (or is an export of another kind)."""
  inputs = read_inputs(export_dir) if os.path.exists(os.path.join(export_dir, INPUTS_FILE)) else None
  if inputs is not None and inputs.kind != ONE_STAGE:
    raise DataError(export_dir, f"a {inputs.kind} export, not a trained model",
                    expected="the export of rank4class-train (its model_dir or <model_dir>/export)")
  with loading(export_dir), class_encoders.restoring_text_embeddings():
    model = tf.keras.models.load_model(export_dir, compile=False)
  encoder = getattr(model, "class_encoder", None)
  if isinstance(encoder, class_encoders.MetadataClassEncoder) and encoder.unrestored_text_embeddings():
    raise DataError(export_dir, "the saved class-text embeddings did not load (a row of zeros)",
                    expected="an export whose variables hold every class text's embedding")
  return model


def write_model_config(folder: str, model: model_lib.Rank4ClassModel) -> None:
  """Writes the model's Keras config into an export folder (`MODEL_CONFIG_FILE`, whole or not at all)."""
  config = json.loads(json.dumps(model.get_config(), default=_json_value))
  write_json(os.path.join(folder, MODEL_CONFIG_FILE), config)


def _json_value(value: Any) -> Any:
  """NumPy values (a TF-IDF layer's idf weights) and shapes as JSON."""
  if isinstance(value, (np.ndarray, np.generic)):
    return value.tolist()
  if isinstance(value, tf.TensorShape):
    return value.as_list()
  raise TypeError(f"{type(value).__name__} is not JSON serializable")


def embedding_input_spec(embedding_dim: int) -> dict[str, tf.TensorSpec]:
  """The hybrid model's input of texts with their frozen embeddings (`TEXT_KEY`, `EMBEDDING_KEY`)."""
  return {TEXT_KEY: tf.TensorSpec([None], tf.string),
          EMBEDDING_KEY: tf.TensorSpec([None, embedding_dim], tf.float32)}


def reads_cached_embeddings(export_dir: str, inputs: ExportInputs) -> bool:
  """Whether the export is a hybrid text model recorded for the embedding cache (`hybrid_text_encoder`, its
  embedding width and `MODEL_CONFIG_FILE`); hybrid exports of 0.8 and earlier run MiniLM in their graph."""
  return (inputs.kind == ONE_STAGE and inputs.hybrid_text_encoder is not None
          and inputs.embedding_dim is not None
          and os.path.isfile(os.path.join(export_dir, MODEL_CONFIG_FILE)))


def load_hybrid_model(export_dir: str, inputs: ExportInputs) -> model_lib.Rank4ClassModel:
  """A hybrid text export's `Rank4ClassModel` built from its config without its text encoder (the model takes
  `embedding_input_spec`'s dict), with the export's weights: every variable of the model is restored from the
  SavedModel's checkpoint (MiniLM's, which it lacks, are left there). The same scores as the export's graph on
  the same embeddings, without loading MiniLM or the SavedModel's functions.

  Raises:
    DataError: naming the folder, for a config or checkpoint that does not build or restore the model.
  """
  path = os.path.join(export_dir, MODEL_CONFIG_FILE)
  try:
    with open(path, encoding="utf-8") as f:
      config = json.load(f)
    config["instance_encoder"]["config"]["embedding_dim"] = inputs.embedding_dim
  except (ValueError, TypeError, KeyError) as e:
    raise DataError(path, f"not a hybrid model's config ({e})", expected="the JSON rank4class-train writes "
                    "(export the model again, or delete the file to run MiniLM in the graph)") from e
  with loading(export_dir):
    model = model_lib.Rank4ClassModel.from_config(config)
    example = {TEXT_KEY: tf.constant([""]), EMBEDDING_KEY: tf.zeros([1, inputs.embedding_dim])}
    # `call` creates every weight (`build` would trace the model on strings, which runs the text encoder).
    model.call(example, training=False)
    model.built = True
    status = model.load_weights(os.path.join(export_dir, tf.saved_model.VARIABLES_DIRECTORY,
                                             tf.saved_model.VARIABLES_FILENAME))
    try:
      status.expect_partial().assert_existing_objects_matched()
    except AssertionError as e:
      raise ValueError(f"its checkpoint lacks weights of the model its config builds: {e}") from e
  return model


def export_fingerprint(export_dir: str) -> str:
  """sha256 of the export's graph and variable index (which holds a checksum of every variable): equal exactly
  when the exports compute the same function."""
  digest = hashlib.sha256()
  for name in ("saved_model.pb", os.path.join("variables", "variables.index")):
    path = os.path.join(export_dir, name)
    if os.path.exists(path):
      with open(path, "rb") as f:
        digest.update(hashlib.sha256(f.read()).digest())
  return digest.hexdigest()
