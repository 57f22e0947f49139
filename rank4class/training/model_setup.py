"""The model config of a Rank4Class run fitted to its data before the model is built: the instance encoder
chosen for the inputs ("auto"), the TF-IDF vocabulary of the training texts, the metadata class encoder and
its size, the cosine class-text towers, the class embeddings started at the class centroids, and the logit
adjustment's class priors. Everything learned here comes from the training split only."""

import dataclasses
import logging
import time

import numpy as np
import tensorflow as tf

from rank4class.modeling import class_encoders, interactions
from rank4class.modeling import encoders as encoders_lib
from rank4class.modeling import model as model_lib
from rank4class.training import training_data as data_lib
from rank4class.training.train_config import AUTO_ENCODER
from rank4class_encoders import text_embeddings
from rank4class_encoders import text_encoder as text_encoder_lib

_logger = logging.getLogger(__name__)


# `ModelSetup.start` of a model whose classes are texts in cosine towers (`with_cosine_towers`).
COSINE_START = "cosine_towers"


@dataclasses.dataclass
class ModelSetup:
  """The model config fitted to the data, and where its training starts.

  Attributes:
    model_config: The resolved model config.
    start: Where training starts: `class_encoders.CENTROID_INIT` or `RANDOM_INIT` (the one-hot class
      embeddings), or `COSINE_START` (class texts in cosine towers: the nearest class text).
  """

  model_config: model_lib.Rank4ClassConfig
  start: str

  @property
  def starts_fitted(self) -> bool:
    """Whether the untrained model is a fitted classifier that training must improve on (step 0 is
    validated)."""
    return self.start != class_encoders.RANDOM_INIT

  def start_line(self) -> str | None:
    """One line for the terminal on where training starts, None for a random start."""
    what = {class_encoders.CENTROID_INIT: "the nearest class centroid classifier of the model's inputs",
            COSINE_START: "the nearest class text (cosine of the frozen embeddings)"}.get(self.start)
    return None if what is None else (f"Start: {what}; step 0 is validated, and the best validation step is "
                                      "kept (0: that classifier).")


def resolve_model_config(model: model_lib.Rank4ClassConfig, data_config: data_lib.DataConfig,
                         data: data_lib.PreparedData) -> model_lib.Rank4ClassConfig:
  """`resolve_model_setup(model, data_config, data).model_config`."""
  return resolve_model_setup(model, data_config, data).model_config


def _choose_instance_encoder(data_config: data_lib.DataConfig, encoder: encoders_lib.InstanceEncoderConfig,
                             kind: str) -> None:
  """Sets `encoder.type` for the data's input `kind` when it is "auto"; raises ValueError when the chosen
  encoder cannot read that input or text_mode "hybrid" is asked of data without texts."""
  if data_config.text_mode == data_lib.HYBRID and kind != data_lib.TEXT_AND_EMBEDDING_INPUT:
    raise ValueError("text_mode 'hybrid' reads texts (TF-IDF of each text beside its frozen MiniLM "
                     f"embedding), but the data's inputs are {kind}; use it on text data (a named text data "
                     "set, rows with a text column, or text records).")
  raw_text_encoder = encoders_lib.TFIDF if data_config.text_mode == data_lib.TFIDF else encoders_lib.TEXT
  if encoder.type == AUTO_ENCODER:
    encoder.type = {data_lib.TEXT_INPUT: raw_text_encoder,
                    data_lib.TEXT_AND_EMBEDDING_INPUT: encoders_lib.HYBRID,
                    data_lib.IMAGE_INPUT: encoders_lib.IMAGE}.get(kind, encoders_lib.MLP)
  if kind == data_lib.TEXT_INPUT and encoder.type != raw_text_encoder:
    raise ValueError(f"Raw text input with text_mode {data_config.text_mode!r} needs the "
                     f"{raw_text_encoder!r} instance encoder, got {encoder.type!r}.")
  if kind == data_lib.TEXT_AND_EMBEDDING_INPUT and encoder.type != encoders_lib.HYBRID:
    raise ValueError("Texts with their frozen embeddings (text_mode 'hybrid') need the "
                     f"{encoders_lib.HYBRID!r} instance encoder, got {encoder.type!r}.")
  if kind != data_lib.TEXT_INPUT and encoder.type in (encoders_lib.TEXT, encoders_lib.TFIDF):
    raise ValueError(f"The {encoder.type!r} instance encoder reads raw strings, but the input is {kind}.")
  if kind != data_lib.TEXT_AND_EMBEDDING_INPUT and encoder.type == encoders_lib.HYBRID:
    raise ValueError(f"The {encoders_lib.HYBRID!r} instance encoder reads texts with their frozen embeddings "
                     f"(text_mode 'hybrid' on text data), but the input is {kind}.")


def _fill_instance_encoder(data_config: data_lib.DataConfig, encoder: encoders_lib.InstanceEncoderConfig,
                           data: data_lib.PreparedData) -> None:
  """Fills in what `encoder` learns from the data: the TF-IDF vocabulary, the hybrid encoder's frozen text
  encoder (raises ValueError when a given one differs) and the text encoder's handles."""
  if encoder.type in (encoders_lib.TFIDF, encoders_lib.HYBRID) and encoder.tfidf.vocabulary is None:
    encoder.tfidf = tfidf_with_vocabulary(encoder.tfidf, data)
  if encoder.type == encoders_lib.HYBRID:
    # The frozen encoder the training embeddings came from: the export embeds raw texts with it, so they must
    # agree.
    frozen = data_lib.frozen_text_encoder(data_config, data.text_handles)
    if encoder.hybrid.text is not None and encoder.hybrid.text != frozen:
      raise ValueError(f"The hybrid encoder's text encoder ({encoder.hybrid.text}) differs from the one the "
                       f"data's embeddings were made with ({frozen}); leave `hybrid.text` unset.")
    encoder.hybrid = dataclasses.replace(encoder.hybrid, text=frozen)
  if encoder.type == encoders_lib.TEXT and data.text_handles is not None:
    text = encoder.text.text if encoder.text is not None else None
    if text is None or not text.preprocess_handle or not text.encoder_handle:
      text = text_encoder_lib.TextEncoderConfig(
          preprocess_handle=data.text_handles[0], encoder_handle=data.text_handles[1], trainable=True,
          pooling="mean", max_seq_length=data_config.max_seq_length)
      encoder.text = encoders_lib.TextInstanceEncoderConfig(
          text=text, output_dim=encoder.text.output_dim if encoder.text else None,
          dropout=encoder.text.dropout if encoder.text else 0.0)


def resolve_model_setup(model: model_lib.Rank4ClassConfig, data_config: data_lib.DataConfig,
                        data: data_lib.PreparedData) -> ModelSetup:
  """The model config with the instance encoder chosen for the data ("auto"), text handles filled in, the
  TF-IDF vocabulary learned from the training texts (`tfidf_with_vocabulary`), and the metadata class
  encoder's settings when none are given (`metadata_class_encoder`).

  Raises:
    ValueError: If the chosen instance encoder cannot read the data's inputs, or text_mode "hybrid" is asked
      of data without texts.
  """
  model_config = dataclasses.replace(model, instance_encoder=dataclasses.replace(model.instance_encoder))
  encoder = model_config.instance_encoder
  _choose_instance_encoder(data_config, encoder, data.input_kind)
  _fill_instance_encoder(data_config, encoder, data)
  class_encoder = model_config.class_encoder
  cosine = False
  if class_encoder.type == class_encoders.METADATA and class_encoder.metadata is None:
    cosine = cosine_towers_apply(model_config, data)
    if cosine:
      model_config = with_cosine_towers(model_config,
                                        data_lib.frozen_text_encoder(data_config, data.text_handles),
                                        data.class_texts)
    else:
      model_config.class_encoder = dataclasses.replace(
          class_encoder, metadata=metadata_class_encoder(data_config, data, encoder,
                                                         model_config.interaction.type))
  elif (class_encoder.type == class_encoders.METADATA and data.class_texts is not None
        and class_encoder.metadata.class_texts != data.class_texts):
    raise ValueError(f"The class texts of {data_config.class_texts} differ from those the model config gives "
                     "(`class_encoder.metadata.class_texts`); give the texts in one place.")
  start = COSINE_START if cosine else class_start(model_config, data)
  if start == class_encoders.CENTROID_INIT:
    model_config = with_class_centroids(model_config, data)
  if model_config.logit_adjustment and model_config.class_priors is None:
    model_config = dataclasses.replace(model_config, class_priors=training_class_priors(data))
  return ModelSetup(model_config, start)


def tfidf_with_vocabulary(tfidf: encoders_lib.TfidfEncoderConfig,
                          data: data_lib.PreparedData) -> encoders_lib.TfidfEncoderConfig:
  """`tfidf` with the vocabulary and idf weights `encoders.tfidf_vocabulary` learns from the training split's
  texts: never the validation or test texts. A function of the training texts and the settings, so a resumed
  run rebuilds the vocabulary its checkpoint's first layer was trained on (config.json keeps None, not ~10^4
  n-grams; the exported model holds them)."""
  start = time.perf_counter()
  texts = data_lib.split_texts(data.train, data.input_kind)
  vocabulary, idf_weights = encoders_lib.tfidf_vocabulary(texts, tfidf.max_tokens, tfidf.ngrams, tfidf.min_df)
  _logger.info("TF-IDF vocabulary: %d n-grams from %d training texts in %.1f s.", len(vocabulary), len(texts),
               time.perf_counter() - start)
  return dataclasses.replace(tfidf, vocabulary=vocabulary, idf_weights=idf_weights)


# The cosine towers' score: a dot product of unit vectors divided by this (docs/RESULTS.md, zero-shot).
COSINE_TOWERS_TEMPERATURE = 0.05


def cosine_towers_apply(model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData) -> bool:
  """Whether a run whose classes are texts gets `with_cosine_towers` (`ClassEncoderConfig.towers`).

  Raises:
    ValueError: for "cosine" where it cannot apply (naming what it needs).
  """
  towers = model_config.class_encoder.towers
  if towers == class_encoders.PROJECTION_TOWERS:
    return False
  missing = [need for need, ok in (
      ("frozen text embeddings as inputs (`data.text_mode`=frozen on text)",
       data.input_kind == data_lib.EMBEDDING_INPUT and data.text_handles is not None),
      ("the mlp instance encoder", model_config.instance_encoder.type == encoders_lib.MLP),
      ("the dot interaction", model_config.interaction.type == interactions.DOT)) if not ok]
  if missing and towers == class_encoders.COSINE_TOWERS:
    raise ValueError("Cosine class-text towers need " + ", ".join(missing) + "; use the projection towers "
                     "(`class_encoder.towers`=projection) otherwise.")
  return not missing


def with_cosine_towers(model_config: model_lib.Rank4ClassConfig, text: text_encoder_lib.TextEncoderConfig,
                       class_texts: list[str] | None) -> model_lib.Rank4ClassConfig:
  """`model_config` with both towers starting at the frozen `text` encoder's cosine similarity: the class
  texts' embeddings l2-normalised, then `x + W x` (W initialised at zeros), unit length, no class bias; the
  instances' frozen embeddings l2-normalised, then `x + MLP(x)` (the MLP's hidden width kept, its output layer
  initialised at zeros), unit length; their dot product divided by `COSINE_TOWERS_TEMPERATURE`. At step 0 the
  model ranks classes as the untrained nearest-class-text baseline does; training moves it from there
  (docs/RESULTS.md: on WordNet's held-out classes 30.7 +- 0.3 % top-1 error against the baseline's 37.3 %)."""
  mlp = model_config.instance_encoder.mlp
  return dataclasses.replace(
      model_config,
      instance_encoder=dataclasses.replace(model_config.instance_encoder, mlp=dataclasses.replace(
          mlp, residual=True, l2_normalize=True)),
      class_encoder=dataclasses.replace(model_config.class_encoder,
                                        metadata=class_encoders.MetadataClassEncoderConfig(
          text=dataclasses.replace(text, l2_normalize=True), class_texts=class_texts, use_bias=False,
          residual_projection=True, normalize_output=True)),
      interaction=dataclasses.replace(model_config.interaction, temperature=COSINE_TOWERS_TEMPERATURE))


# The length of the class embeddings started at the class centroids: the scores at step 0 are cosines x 20, as
# the cosine towers' dot / COSINE_TOWERS_TEMPERATURE. The factor sits in the embeddings, not in the
# interaction's temperature: Adam's steps are about the learning rate per coordinate whatever the scale, so
# classes of length 20 drift 20 times less (relative to their length) than unit ones divided by 0.05. On
# WordNet (seed 0, lr 1e-3): 46.1 % test top-1 error against 49.7 % (length 40 with temperature 2: 46.0).
CLASS_CENTROID_LENGTH = 1 / COSINE_TOWERS_TEMPERATURE
# `ClassEncoderConfig.init="auto"` starts the one-hot class embeddings at the class centroids from this many
# classes on (where they apply). Frozen MiniLM, softmax + dot, the study's protocol (seeds 0-2, lr tuned on
# validation), test top-1 error random -> centroids: WordNet hypernyms (3,498 classes, ~9 training rows each)
# 72.15 +- 0.55 -> 46.05 +- 0.16 (nearest centroid baseline 50.91); all 14,823 hypernyms 89.05 +- 0.52 ->
# 55.58 +- 0.13 (baseline 61.64); Reuters R52 (52) 6.84 +- 0.49 -> 6.50 +- 0.32;
# 20 Newsgroups (20) 22.86 +- 0.23 -> 23.37 +- 0.53: within seed noise at tens of classes, so the default
# model stays as it was there. 500 is where the baselines switch from logistic regression to nearest centroids
# (`baselines.BaselineConfig.max_classes`): from there on the centroid classifier is the bar, and the model
# starts at it. No set between 52 and 3,498 classes was measured, nor dense features (which the model reads as
# they are, where the baselines standardise them): "auto" picks centroids for frozen text embeddings only.
AUTO_CENTROID_CLASSES = 500


# `_fitted_classifier_needs`' key of the logistic-regression candidate.
LOGISTIC = "logistic"


def _fitted_classifier_needs(model_config: model_lib.Rank4ClassConfig,
                             data: data_lib.PreparedData) -> dict[str, list[str]]:
  """What the two fitted classifiers, the class-centroid start and the logistic-regression model
  (`logistic_regression_model`), lack for this model and data, in words, keyed "centroids" and "logistic"; an
  empty list: it applies."""
  class_encoder, encoder = model_config.class_encoder, model_config.instance_encoder
  fixed = (
    data.input_kind in (data_lib.EMBEDDING_INPUT, data_lib.DENSE_INPUT) and encoder.type == encoders_lib.MLP
  )
  hybrid = (data.input_kind == data_lib.TEXT_AND_EMBEDDING_INPUT and encoder.type == encoders_lib.HYBRID
            and not encoder.tfidf.hidden_units and encoder.hybrid.combine == encoders_lib.CONCAT)
  common = [("the one_hot class encoder", class_encoder.type == class_encoders.ONE_HOT),
            ("the dot interaction", model_config.interaction.type == interactions.DOT),
            ("class ids as labels (not graded ELWC class lists)", has_class_ids(data.train)),
            ("class embeddings of the input's size (no one-hot embedding_dim)",
             class_encoder.one_hot.embedding_dim is None)]
  fixed_need = ("fixed vectors as inputs (frozen text embeddings, `data.text_mode`=frozen, or dense "
                "features) with the mlp instance encoder", fixed)
  centroid = [*common, fixed_need]
  logistic = [*common,
              (fixed_need[0] + ", or hybrid text (`data.text_mode`=hybrid) with a linear TF-IDF projection "
               "concatenated to the embedding branch", fixed or hybrid),
              ("class biases (use_bias)", class_encoder.one_hot.use_bias),
              ("no logit adjustment (it changes what the trained model's scores estimate)",
               not model_config.logit_adjustment),
              (f"fewer than {AUTO_CENTROID_CLASSES} classes (from there on the baselines use centroids)",
               len(data.class_names) < AUTO_CENTROID_CLASSES)]
  return {class_encoders.CENTROID_INIT: [need for need, ok in centroid if not ok],
          LOGISTIC: [need for need, ok in logistic if not ok]}


def class_start(model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData) -> str:
  """How a run starts its one-hot class embeddings (`ClassEncoderConfig.init` resolved for the data):
  `class_encoders.CENTROID_INIT` or `RANDOM_INIT`. "auto" starts frozen text embeddings of
  `AUTO_CENTROID_CLASSES` classes or more at the class centroids (where the baselines switch to centroids).

  Raises:
    ValueError: for "centroids" where they cannot apply (naming what they need).
  """
  init = model_config.class_encoder.init
  if init == class_encoders.RANDOM_INIT:
    return init
  missing = _fitted_classifier_needs(model_config, data)[class_encoders.CENTROID_INIT]
  if init == class_encoders.CENTROID_INIT:
    if missing:
      raise ValueError("Class embeddings started at the class centroids need " + ", ".join(missing) + "; use "
                       "`class_encoder.init`=random otherwise.")
    return init
  many = len(data.class_names) >= AUTO_CENTROID_CLASSES
  return (
    class_encoders.CENTROID_INIT
    if many and not missing and data.input_kind == data_lib.EMBEDDING_INPUT
    else class_encoders.RANDOM_INIT
  )


def logistic_regression_applies(model_config: model_lib.Rank4ClassConfig,
                                data: data_lib.PreparedData) -> list[str]:
  """What the logistic-regression candidate (`logistic_regression_model`) lacks for this model and data, in
  words; an empty list: it applies."""
  return _fitted_classifier_needs(model_config, data)[LOGISTIC]


def class_centroids_apply(model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData) -> bool:
  """Whether a run starts its one-hot class embeddings at the class centroids (`class_start`)."""
  return class_start(model_config, data) == class_encoders.CENTROID_INIT


def _split_batches(split: data_lib.Split, batch_size: int = 4096):
  """(features, class ids) NumPy batches of a split in order, one batch in memory at a time for record
  splits."""
  if isinstance(split, data_lib.ArraySplit):
    for begin in range(0, len(split), batch_size):
      yield split.features[begin:begin + batch_size], split.labels[begin:begin + batch_size]
    return
  for x, y in split.make_dataset(batch_size, shuffle=False, repeat=False, seed=0):
    yield x.numpy(), y.numpy().reshape([-1])


def with_class_centroids(model_config: model_lib.Rank4ClassConfig,
                         data: data_lib.PreparedData) -> model_lib.Rank4ClassConfig:
  """`model_config` that starts as the nearest class centroid classifier, as `with_cosine_towers` starts at
  the nearest class text: the one-hot class embeddings start at the centroids of the training split's inputs
  (`class_encoders.class_centroids`; never the validation or test rows) scaled to length
  `CLASS_CENTROID_LENGTH` (20), and the instance tower is `x + MLP(x)` of unit length (the MLP's hidden width
  kept, its output layer initialised at zeros). At step 0 the model's scores are the cosines of the inputs to
  the centroids x 20 (with the dot interaction's temperature 1), class biases 0, and it ranks as the nearest
  class centroid classifier on the model's inputs does (`rank4class.evaluation.baselines` standardises the
  features first; on WordNet's test split the two give 50.79 % and 50.91 % top-1 error): a class without
  training rows starts at the zero vector with bias -2 x 20, below every cosine score, as that classifier
  ranks it last (without a class bias, `use_bias=False`, it scores 0).

  The centroids are a function of the training split, so a resumed run rebuilds the same model; config.json
  keeps `initial_embeddings` None (not C x d floats) and the checkpoint holds the trained values."""
  start = time.perf_counter()
  centroids, counts = class_encoders.class_centroids(_split_batches(data.train), len(data.class_names))
  _logger.info("Class centroids of %d classes (%d without training rows) from %d training rows in %.1f s.",
               len(counts), int(np.sum(counts == 0)), int(np.sum(counts)), time.perf_counter() - start)
  encoder, class_encoder = model_config.instance_encoder, model_config.class_encoder
  bias = None
  if class_encoder.one_hot.use_bias and np.any(counts == 0):
    bias = np.where(counts == 0, -2 * CLASS_CENTROID_LENGTH, 0).astype(np.float32)
  return dataclasses.replace(
      model_config,
      instance_encoder=dataclasses.replace(encoder, mlp=dataclasses.replace(encoder.mlp, residual=True,
                                                                            l2_normalize=True)),
      class_encoder=dataclasses.replace(class_encoder, one_hot=dataclasses.replace(
          class_encoder.one_hot, initial_embeddings=centroids * CLASS_CENTROID_LENGTH, initial_bias=bias)))


def training_class_priors(data: data_lib.PreparedData) -> np.ndarray:
  """Each class's share of the training split's rows (the logit adjustment's priors; never the validation or
  test rows), read batch by batch; a class without training rows counts as one row (log 0 would be -inf).

  Raises:
    ValueError: for graded class lists (ELWC), which have no one class per row.
  """
  counts = np.zeros(len(data.class_names), np.int64)
  for _, labels in _split_batches(data.train):
    if np.ndim(labels) != 1:
      raise ValueError("The logit adjustment needs one class id per training row; graded class lists (ELWC) "
                       "have none.")
    counts += np.bincount(labels, minlength=len(counts))
  counts = np.maximum(counts, 1)
  return counts / counts.sum()


def metadata_class_encoder(data_config: data_lib.DataConfig, data: data_lib.PreparedData,
                           instance_encoder: encoders_lib.InstanceEncoderConfig,
                           interaction: str) -> class_encoders.MetadataClassEncoderConfig:
  """The metadata class encoder of a run that gives none: the class texts (`data.class_texts`, else the class
  names) embedded once by the frozen text encoder of the data (MiniLM, also for image and dense inputs),
  projected to `class_embedding_dim`."""
  handles = data.text_handles if data.text_handles is not None else data_lib.text_handles(data_config)
  return class_encoders.MetadataClassEncoderConfig(
      text=data_lib.frozen_text_encoder(data_config, handles), class_texts=data.class_texts,
      output_dim=class_embedding_dim(instance_encoder, interaction))


def with_class_text_embeddings(model_config: model_lib.Rank4ClassConfig, cache_dir: str | None,
                               class_names: list[str]) -> model_lib.Rank4ClassConfig:
  """`model_config` whose frozen metadata class encoder is given its class texts' embeddings
  (`MetadataClassEncoderConfig.text_embeddings`) from the embedding cache in `cache_dir` (None: the default
  one), so that each build of the run's models (the trained model, the zero-shot model and its mix) reads
  them instead of running the encoder over every class text again; the cache gives the encoder's own vectors
  to the bit. Unchanged for other class encoders, a fine-tuned text encoder or `precompute=False`."""
  class_encoder = model_config.class_encoder
  meta = class_encoder.metadata
  if (class_encoder.type != class_encoders.METADATA or meta is None or not meta.precompute
      or meta.text.trainable or meta.text_embeddings is not None):
    return model_config
  texts = list(meta.class_texts) if meta.class_texts is not None else list(class_names)
  vectors = text_embeddings.embed_texts(texts, dataclasses.replace(meta.text, l2_normalize=False), cache_dir)
  if meta.text.l2_normalize:  # Over all the texts at once, as the layer does: the cache's batches can differ
    vectors = tf.math.l2_normalize(tf.constant(vectors), axis=-1).numpy()  # from it in the last bit.
  return dataclasses.replace(model_config, class_encoder=dataclasses.replace(
      class_encoder, metadata=dataclasses.replace(meta, text_embeddings=vectors)))


def class_embedding_dim(instance_encoder: encoders_lib.InstanceEncoderConfig, interaction: str) -> int | None:
  """The size the metadata class encoder projects the frozen class-text embeddings to.

  Dot and latent cross score `h . c` and `h * c`, so the classes are projected (a learned Dense) to the
  instance embedding's size: the last of the MLP's `hidden_units`; the image encoder's `output_dim`, else the
  small CNN's last filters; the text encoder's `output_dim` (None: its hidden size, that of the class texts'
  own encoder, MiniLM's 384, so no projection); the TF-IDF encoder's `output_dim`; the hybrid encoder's TF-IDF
  `output_dim` plus the MLP's last width (combine "concat") or that `output_dim` alone ("sum"). Concat needs
  no match and its first layer already maps the class embedding linearly: None. None also where the config
  does not say the instance size (a residual MLP, whose size is its input's: frozen text embeddings match the
  class texts' as they are; an application backbone without `output_dim`); the interaction then projects the
  instance to the class size where they differ.
  """
  if interaction == interactions.CONCAT:
    return None
  if instance_encoder.type == encoders_lib.MLP:
    return None if instance_encoder.mlp.residual else instance_encoder.mlp.hidden_units[-1]
  if instance_encoder.type == encoders_lib.IMAGE:
    image = instance_encoder.image
    if image.output_dim is not None or image.backbone != encoders_lib.SMALL_CNN:
      return image.output_dim
    return image.filters[-1]
  if instance_encoder.type == encoders_lib.TEXT and instance_encoder.text is not None:
    return instance_encoder.text.output_dim
  if instance_encoder.type == encoders_lib.TFIDF:
    return instance_encoder.tfidf.output_dim
  if instance_encoder.type == encoders_lib.HYBRID:
    if instance_encoder.hybrid.combine == encoders_lib.SUM:
      return instance_encoder.tfidf.output_dim
    mlp = instance_encoder.mlp
    return None if mlp.residual else instance_encoder.tfidf.output_dim + mlp.hidden_units[-1]
  return None



def has_class_ids(split: data_lib.Split) -> bool:
  """Whether `split` labels each row with one class id (graded ELWC class lists do not)."""
  return not isinstance(split, data_lib.ArraySplit) or split.labels.ndim == 1
