"""Every export kind loaded for serving (`rank4class-predict`, `rank4class-evaluate`).

Kinds:
- "one_stage": the trained model's own export (`rank4class-train`): the Keras `Rank4ClassModel` scores every
  class;
- "two_stage": `rank4class-export --kind=two_stage`: a retriever's top M classes re-ranked by the ranker; a
  class the retriever misses is out of reach (rank infinity: a top-K miss, no NDCG gain, reciprocal rank 0);
- "zero_shot": `rank4class-export --kind=zero_shot`: the classes are texts, the training ones or any
  class-texts file given at serving time (classes never seen in training). Each class set is embedded once
  through the export's class tower; the vectors are kept in the embedding cache, keyed by the export's weights
  and the text.

What every export folder holds beside the SavedModel (the inputs description, the calibration), and locating
and loading it: `rank4class.inference.export_folder`, whose names are re-exported here. A calibrated export's
models give probabilities (`ServedModel.probabilities`) and conformal class sets; others give scores only.

  model = served.load("/tmp/zero_shot", class_texts="new_classes.csv")
  class_ids, scores = model.top_k(model.model_inputs(["a text"]), k=5)   # ids into model.class_names
"""

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from rank4class.inference import full_class_scoring
from rank4class.inference.export_folder import (  # noqa: F401  Re-exported: served.X is the serving API.
  CALIBRATION_FILE,
  DENSE,
  IMAGE,
  INPUTS_FILE,
  KINDS,
  MODEL_CONFIG_FILE,
  NOT_CALIBRATED_NOTE,
  ONE_STAGE,
  SIGNATURE_KEY,
  TEXT,
  TWO_STAGE,
  ZERO_SHOT,
  ExportInputs,
  embedding_input_spec,
  export_fingerprint,
  frozen_text_encoder,
  input_kind,
  load_hybrid_model,
  load_keras_model,
  loading,
  model_folder,
  read_calibration,
  read_inputs,
  reads_cached_embeddings,
  resolve_export_dir,
  serving_input_spec,
  signature_inputs,
  signature_names,
  write_calibration,
  write_inputs,
  write_model_config,
)
from rank4class.modeling import ranking_math
from rank4class_data.classification_data import EMBEDDING_KEY, TEXT_KEY
from rank4class_data.rows import class_texts as class_texts_lib
from rank4class_data.validation import DataError
from rank4class_encoders import embedding_cache, text_embeddings, text_encoder

# Two-stage exports: the retriever's M candidates and the ranker's scores of them (what evaluation ranks).
CANDIDATES_SIGNATURE = "candidates"
# Zero-shot exports: class texts -> class vectors (once per class set), then instances x class vectors ->
# scores.
EMBED_CLASSES_SIGNATURE = "embed_class_texts"
SCORE_CLASSES_SIGNATURE = "score_classes"
# Class texts embedded per call of the zero-shot class tower.
CLASS_TEXT_BATCH = 256
ScoreFn = Callable[[tf.Tensor], tf.Tensor]


def make_score_fn(model: tf.keras.Model, input_spec: tf.TensorSpec | None = None,
                  strategy: tf.distribute.Strategy | None = None) -> ScoreFn:
  """A `tf.function` mapping a batch of raw inputs to class scores float32 `[batch_size, num_classes]`.

  Args:
    model: A built Rank4Class model.
    input_spec: Spec of one input batch (batch axis None), so that the function is traced once; a dict of
      specs for a dict input (hybrid text's training input); None for `model.serving_input_spec()`.
    strategy: The strategy the model was built under, if any: the model is then called in a replica context
      (as `fit` does; TF Hub layers under MirroredStrategy refuse cross-replica calls), on the whole batch,
      and the first replica's scores are returned.
  """
  spec = input_spec or model.serving_input_spec()
  spec = tf.nest.map_structure(lambda s: tf.TensorSpec([None, *s.shape[1:]], s.dtype), spec)

  def call(inputs):
    return tf.cast(model(inputs, training=False), tf.float32)

  @tf.function(input_signature=[spec], autograph=False)
  def score(inputs):
    if strategy is None:
      return call(inputs)
    return strategy.experimental_local_results(strategy.run(call, args=(inputs,)))[0]

  return score


def text_inputs(texts, frozen: text_encoder.TextEncoderConfig | None, cache_dir: str | None = None,
                hybrid: text_encoder.TextEncoderConfig | None = None) -> tf.Tensor | dict[str, tf.Tensor]:
  """A batch of raw texts (strings, or a string tensor read as UTF-8) as a model takes them: the frozen
  encoder's embeddings (read from the embedding cache; only texts it lacks run through the encoder); with
  `hybrid` (a hybrid model built by `load_hybrid_model`), the strings beside that encoder's embeddings, read
  the same way (`embedding_input_spec`); else the strings themselves."""
  if isinstance(texts, tf.Tensor):
    texts = [text.decode("utf-8") for text in tf.reshape(texts, [-1]).numpy()]
  texts = [str(text) for text in texts]
  if frozen is not None:
    return tf.constant(text_embeddings.embed_texts(texts, frozen, cache_dir))
  strings = tf.constant(np.asarray(texts, dtype=object), tf.string)
  if hybrid is not None:
    embeddings = text_embeddings.embed_texts(texts, hybrid, cache_dir)
    return {TEXT_KEY: strings, EMBEDDING_KEY: tf.constant(embeddings)}
  return strings


def strictly_higher_ranks(scores: np.ndarray, class_ids: np.ndarray) -> np.ndarray:
  """0-based rank of each row's true class `class_ids` in `scores` `[n, C]`: how many classes score strictly
  higher (float64 `[n]`)."""
  true = scores[np.arange(len(class_ids)), class_ids]
  return (scores > true[:, None]).sum(axis=1).astype(np.float64)


def candidate_ranks(candidate_ids: np.ndarray, scores: np.ndarray, class_ids: np.ndarray) -> np.ndarray:
  """0-based rank of each row's true class among its candidates `candidate_ids` `[n, M]` scored `scores`
  `[n, M]`: how many candidates score strictly higher; infinity where the true class is not a candidate (below
  every candidate: a top-K miss for every K, no NDCG gain, reciprocal rank 0)."""
  found = candidate_ids == class_ids[:, None]
  true = np.where(found, scores, -np.inf).max(axis=1)
  higher = ((scores > true[:, None]) & ~found).sum(axis=1).astype(np.float64)
  return np.where(found.any(axis=1), higher, np.inf)


# --- Served models ------------------------------------------------------------------------------------------


class ServedModel:
  """An export loaded once, ranking raw inputs over its classes.

  Attributes:
    export_dir: The SavedModel folder.
    inputs: Its `ExportInputs`.
    class_names: The classes ranked, in id order (zero-shot: those of the class-texts file when given).
    input_spec: The signature's input spec (vectors for frozen-text models).
    hybrid_text_encoder: A hybrid text model built without MiniLM (`load_hybrid_model`): the frozen encoder
      whose embeddings (from the embedding cache) `model_inputs` gives beside the texts; else None.
    calibration: The export's `calibration.Calibration` (`CALIBRATION_FILE`), or None: then `probabilities`
      raises and `calibration_note` says why.
  """

  def __init__(self, export_dir: str, inputs: ExportInputs, class_names: list[str], input_spec: tf.TensorSpec,
               embedding_cache_dir: str | None = None):
    self.export_dir, self.inputs, self.class_names, self.input_spec = (
      export_dir,
      inputs,
      class_names,
      input_spec,
    )
    self._embedding_cache_dir = embedding_cache_dir
    self.hybrid_text_encoder = None
    self.calibration = read_calibration(export_dir)

  @property
  def calibration_note(self) -> str | None:
    """None for a calibrated export, else a line saying it gives scores only."""
    if self.calibration is not None:
      return None
    return f"{self.export_dir}: " + NOT_CALIBRATED_NOTE.format(file=CALIBRATION_FILE)

  @property
  def kind(self) -> str:
    return self.inputs.kind

  @property
  def input_kind(self) -> str:
    return self.inputs.input

  @property
  def input_shape(self) -> tuple:
    return tuple(self.input_spec.shape[1:])

  @property
  def max_k(self) -> int:
    """The most classes one instance's ranking holds."""
    return len(self.class_names)

  def model_inputs(self, raw) -> tf.Tensor | dict[str, tf.Tensor]:
    """A batch the model takes from raw inputs: texts (embedded first for frozen-text exports; with their
    embeddings for a `hybrid_text_encoder`), float vectors `[n, d]` or images `[n, h, w, c]`; a tensor of raw
    texts is read as UTF-8."""
    if self.input_kind == TEXT:
      return text_inputs(raw, self.inputs.frozen_text_encoder, self._embedding_cache_dir,
                         self.hybrid_text_encoder)
    return tf.cast(tf.convert_to_tensor(raw), self.input_spec.dtype)

  def top_k(self, inputs: tf.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The `k` best classes of each instance of a `model_inputs` batch, best first: (ids int `[n, k]` into
    `class_names`, scores float32 `[n, k]`); `k` is capped at `max_k`."""
    raise NotImplementedError

  def ranks(self, inputs: tf.Tensor, class_ids: np.ndarray) -> np.ndarray:
    """0-based rank of each instance's true class (ids into `class_names`), float64 `[n]`: how many classes
    score strictly higher; infinity for a class the export cannot rank (two-stage: not retrieved)."""
    raise NotImplementedError

  def scored_classes(self, inputs: tf.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Every class the export scores for each instance: (ids int `[n, m]` into `class_names`, scores float32
    `[n, m]`); m is the number of classes (two-stage: the M candidates)."""
    raise NotImplementedError

  def probabilities(self, inputs: tf.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Calibrated class probabilities: (ids int `[n, m]` as `scored_classes`, softmax(scores / T) float64
    `[n, m]`, rows summing to 1 over the classes scored; a two-stage export's are over its M candidates, so a
    class the first stage misses has probability 0).

    Raises:
      ValueError: for an export without a calibration (`calibration_note`).
    """
    if self.calibration is None:
      raise ValueError(self.calibration_note)
    ids, scores = self.scored_classes(inputs)
    return ids, self.calibration.probabilities(scores)


def top_k_positions(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
  """The `k` best columns of `scores` `[n, m]`, best first, as the serving signature orders them: (positions
  int `[n, k]`, scores float32 `[n, k]`); `k` is capped at m."""
  ids, top = ranking_math.top_k_classes(tf.constant(scores, tf.float32), min(k, scores.shape[1]))
  return ids.numpy(), top.numpy()


def _check_ids(class_ids, num_classes: int) -> np.ndarray:
  class_ids = np.reshape(np.asarray(class_ids), [-1]).astype(np.int64)
  if class_ids.size and (class_ids.min() < 0 or class_ids.max() >= num_classes):
    raise ValueError(f"class ids must be in [0, {num_classes}), got {class_ids.min()}..{class_ids.max()}.")
  return class_ids


class OneStage(ServedModel):
  """`rank4class-train`'s export: the Keras model scores every class. A hybrid text export that records its
  text encoder (`reads_cached_embeddings`) is built without MiniLM and takes the texts with their embeddings
  from the embedding cache (texts seen in training are read, new ones embedded once and stored): the scores
  of its graph (to the bit in bfloat16, to ~1e-5 in float32), without loading MiniLM for cached texts."""

  def __init__(self, export_dir: str, inputs: ExportInputs, embedding_cache_dir: str | None = None):
    spec = serving_input_spec(export_dir)
    if reads_cached_embeddings(export_dir, inputs):
      self.model = load_hybrid_model(export_dir, inputs)
      model_spec = embedding_input_spec(inputs.embedding_dim)
    else:
      self.model, model_spec = load_keras_model(export_dir), spec
    super().__init__(export_dir, inputs, self.model.class_names, spec, embedding_cache_dir)
    if model_spec is not spec:
      self.hybrid_text_encoder = inputs.hybrid_text_encoder
    self._score = make_score_fn(self.model, model_spec)
    self._rank = None

  def scores(self, inputs: tf.Tensor) -> tf.Tensor:
    """Scores of every class, float32 `[n, num_classes]`."""
    return self._score(inputs)

  def top_k(self, inputs, k):
    ids, scores = ranking_math.top_k_classes(self._score(inputs), min(k, self.max_k))
    return ids.numpy(), scores.numpy()

  def scored_classes(self, inputs):
    scores = self._score(inputs).numpy()
    return np.broadcast_to(np.arange(scores.shape[1]), scores.shape), scores

  def ranks(self, inputs, class_ids):
    if self._rank is None:
      self._rank = full_class_scoring.rank_function(self.model)
    return self._rank(inputs, tf.constant(_check_ids(class_ids, self.max_k))).numpy().astype(np.float64)


class TwoStage(ServedModel):
  """`rank4class-export --kind=two_stage`: each instance's ranking is the retriever's M candidates, ordered by
  the ranker."""

  def __init__(self, export_dir: str, inputs: ExportInputs, loaded, embedding_cache_dir: str | None = None):
    self._loaded = loaded
    if CANDIDATES_SIGNATURE not in loaded.signatures:
      raise DataError(export_dir, f"no '{CANDIDATES_SIGNATURE}' signature",
                      expected="a two-stage export written by this version: run rank4class-export again")
    self._candidates = loaded.signatures[CANDIDATES_SIGNATURE]
    spec = signature_inputs(self._candidates)["inputs"]
    super().__init__(export_dir, inputs, list(inputs.class_names), spec, embedding_cache_dir)

  @property
  def max_k(self) -> int:
    return int(self.inputs.num_candidates)

  def candidates(self, inputs: tf.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(candidate class ids int `[n, M]`, the ranker's scores of them float32 `[n, M]`)."""
    out = self._candidates(inputs=inputs)
    return out["candidate_ids"].numpy(), out["candidate_scores"].numpy()

  def top_k(self, inputs, k):
    ids, scores = self.candidates(inputs)
    positions, top = top_k_positions(scores, k)
    return np.take_along_axis(ids, positions, axis=1), top

  def scored_classes(self, inputs):
    return self.candidates(inputs)

  def ranks(self, inputs, class_ids):
    return candidate_ranks(*self.candidates(inputs), _check_ids(class_ids, len(self.class_names)))


class ZeroShot(ServedModel):
  """`rank4class-export --kind=zero_shot`: ranks a class set given by texts: the training classes, or a
  class-texts file's (`with_class_texts`). Class vectors are computed once per class set (cached)."""

  def __init__(self, export_dir: str, inputs: ExportInputs, loaded, embedding_cache_dir: str | None = None):
    self._loaded = loaded
    for name in (EMBED_CLASSES_SIGNATURE, SCORE_CLASSES_SIGNATURE):
      if name not in loaded.signatures:
        raise DataError(export_dir, f"no '{name}' signature",
                        expected="a zero-shot export written by this version: run rank4class-export again")
    self._embed = loaded.signatures[EMBED_CLASSES_SIGNATURE]
    self._score = loaded.signatures[SCORE_CLASSES_SIGNATURE]
    spec = signature_inputs(self._score)["inputs"]
    super().__init__(export_dir, inputs, list(inputs.class_names), spec, embedding_cache_dir)
    self._identity = f"rank4class zero-shot class tower {export_fingerprint(export_dir)}"
    self.class_texts = list(inputs.class_texts)
    self._class_vectors = None

  def with_class_texts(self, names: Sequence[str], texts: Sequence[str]) -> "ZeroShot":
    """Ranks these classes (name, text) from now on; their vectors come from the cache or the class tower."""
    if len(names) != len(texts) or not names:
      raise ValueError(f"Need one text per class and at least one class, got {len(names)} names and "
                       f"{len(texts)} texts.")
    self.class_names, self.class_texts = list(names), list(texts)
    self._class_vectors = None
    return self

  @property
  def class_vectors(self) -> np.ndarray:
    """The class set's vectors float32 `[num_classes, d]`, embedded on first use."""
    if self._class_vectors is None:
      self._class_vectors = self.embed_class_texts(self.class_texts)
    return self._class_vectors

  def embed_class_texts(self, texts: Sequence[str]) -> np.ndarray:
    """Class vectors float32 `[n, d]` of `texts` through the export's class tower, read from the embedding
    cache when this export embedded them before."""
    store = embedding_cache.open_store(self._embedding_cache_dir)
    keys = embedding_cache.text_keys(self._identity, list(texts))
    found = store.lookup(keys)
    missing = [i for i, key in enumerate(keys) if key not in found]
    computed = {}
    for start in range(0, len(missing), CLASS_TEXT_BATCH):
      batch = missing[start:start + CLASS_TEXT_BATCH]
      vectors = self._embed(class_texts=tf.constant([texts[i] for i in batch]))["class_embeddings"].numpy()
      computed.update({keys[i]: vector for i, vector in zip(batch, vectors, strict=True)})
    if computed:
      store.insert(list(computed), np.stack(list(computed.values())).astype(np.float32), self._identity)
    return np.stack([found[key] if key in found else computed[key] for key in keys]).astype(np.float32)

  def scores(self, inputs: tf.Tensor) -> np.ndarray:
    """Scores of the class set, float32 `[n, num_classes]`."""
    return self._score(inputs=inputs, class_embeddings=tf.constant(self.class_vectors))["scores"].numpy()

  def top_k(self, inputs, k):
    return top_k_positions(self.scores(inputs), k)

  def scored_classes(self, inputs):
    scores = self.scores(inputs)
    return np.broadcast_to(np.arange(scores.shape[1]), scores.shape), scores

  def ranks(self, inputs, class_ids):
    return strictly_higher_ranks(self.scores(inputs), _check_ids(class_ids, len(self.class_names)))


def load(model_path: str, class_texts: str | None = None,
         embedding_cache_dir: str | None = None) -> ServedModel:
  """Loads the export of any kind at `model_path` (an export folder or a training model_dir).

  Args:
    model_path: The export, or a training run's model_dir (its export/).
    class_texts: Zero-shot exports only: a class-texts file (CSV/TSV/JSONL with columns class, text) whose
      classes are ranked instead of the training ones.
    embedding_cache_dir: Where text embeddings and zero-shot class vectors are cached; None for the default.

  Raises:
    FileNotFoundError: without a SavedModel at `model_path`.
    DataError: an unloadable export or class-texts file.
    ValueError: class texts for an export that is not zero-shot.
  """
  export_dir = resolve_export_dir(model_path)
  inputs = read_inputs(export_dir)
  if class_texts is not None and inputs.kind != ZERO_SHOT:
    raise ValueError(f"{export_dir}: class texts apply to zero-shot exports (rank4class-export "
                     f"--kind=zero_shot); this is a {inputs.kind} export, which ranks its trained classes")
  if inputs.kind == ONE_STAGE:
    return OneStage(export_dir, inputs, embedding_cache_dir)
  with loading(export_dir):
    loaded = tf.saved_model.load(export_dir)
  if inputs.kind == TWO_STAGE:
    return TwoStage(export_dir, inputs, loaded, embedding_cache_dir)
  model = ZeroShot(export_dir, inputs, loaded, embedding_cache_dir)
  if class_texts is not None:
    table = class_texts_lib.read_class_texts(class_texts)
    model.with_class_texts(list(table), list(table.values()))
  return model
