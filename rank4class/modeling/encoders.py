"""Rank4Class's instance encoders H(x) by name: their settings (`InstanceEncoderConfig`), `get` and
`make_instance_encoder`, and every encoder's public names, whose modules are:

- `rank4class.modeling.instance_encoder`: the base class `InstanceEncoder`;
- `rank4class.modeling.mlp_encoder`: dense features (`MlpEncoder`);
- `rank4class.modeling.image_encoder`: images, CNN backbones (`ImageEncoder`);
- `rank4class.modeling.text_instance_encoder`: raw text through a TF Hub encoder (`TextInstanceEncoder`);
- `rank4class.modeling.tfidf_encoder`: bags of n-grams (`TfidfEncoder`, `tfidf_vocabulary`);
- `rank4class.modeling.hybrid_text_encoder`: TF-IDF beside frozen text embeddings (`HybridTextEncoder`).
"""

import dataclasses

import numpy as np

from rank4class.modeling.hybrid_text_encoder import (
  CONCAT,
  EMBEDDING_KEY,
  FROZEN_TEXT_KEYS,
  HYBRID_COMBINES,
  SUM,
  TEXT_KEY,
  HybridTextEncoder,
)
from rank4class.modeling.image_encoder import (
  APPLICATION_BACKBONES,
  BACKBONE_NAMES,
  POOLINGS,
  SMALL_CNN,
  ImageEncoder,
)
from rank4class.modeling.instance_encoder import InstanceEncoder
from rank4class.modeling.mlp_encoder import MlpEncoder
from rank4class.modeling.text_instance_encoder import TextInstanceEncoder
from rank4class.modeling.tfidf_encoder import (
  DEFAULT_TFIDF_MAX_TOKENS,
  OOV_TOKEN,
  TfidfEncoder,
  min_document_frequency,
  tfidf_vocabulary,
)
from rank4class_data.validation import check_choice
from rank4class_encoders import text_encoder as text_encoder_lib

__all__ = [
  # Defined here.
  "ENCODER_NAMES", "HYBRID", "IMAGE", "MLP", "TEXT", "TFIDF", "HybridTextEncoderConfig", "ImageEncoderConfig",
  "InstanceEncoderConfig", "MlpEncoderConfig", "TextInstanceEncoderConfig", "TfidfEncoderConfig", "get",
  "make_instance_encoder",
  # The encoders' modules' public names.
  "APPLICATION_BACKBONES", "BACKBONE_NAMES", "CONCAT", "DEFAULT_TFIDF_MAX_TOKENS", "EMBEDDING_KEY",
  "FROZEN_TEXT_KEYS", "HYBRID_COMBINES", "OOV_TOKEN", "POOLINGS", "SMALL_CNN", "SUM", "TEXT_KEY",
  "HybridTextEncoder", "ImageEncoder", "InstanceEncoder", "MlpEncoder", "TextInstanceEncoder", "TfidfEncoder",
  "min_document_frequency", "tfidf_vocabulary",
]

MLP = "mlp"
IMAGE = "image"
TEXT = "text"
TFIDF = "tfidf"
HYBRID = "hybrid"
ENCODER_NAMES = (MLP, IMAGE, TEXT, TFIDF, HYBRID)

_ENCODER_CLASSES = {MLP: MlpEncoder, IMAGE: ImageEncoder, TEXT: TextInstanceEncoder, TFIDF: TfidfEncoder,
                    HYBRID: HybridTextEncoder}


def get(name: str, **kwargs) -> InstanceEncoder:
  """Builds an instance encoder by name.

  Args:
    name: One of `ENCODER_NAMES`.
    **kwargs: Constructor arguments of `MlpEncoder`, `ImageEncoder`, `TextInstanceEncoder`, `TfidfEncoder` or
      `HybridTextEncoder`.

  Returns:
    The encoder layer.

  Raises:
    ValueError: If `name` is unknown (the message lists the allowed names) or an argument is invalid.
  """
  check_choice("instance_encoder", name, _ENCODER_CLASSES)
  return _ENCODER_CLASSES[name](**kwargs)


@dataclasses.dataclass
class MlpEncoderConfig:
  """Settings of `MlpEncoder`.

  Attributes:
    hidden_units: Widths of the hidden layers; the last is the embedding size.
    activation: Keras activation name.
    dropout: Dropout rate after each hidden layer.
    residual: The MLP is a zero-initialised residual branch added to the input (the encoder starts as the
      identity; the embedding size is the input size).
    l2_normalize: Scale the inputs and the embedding to unit length.
    untrained_share: With `residual` and `l2_normalize`: the share of the untrained (input) cosine a dot
      product keeps (`MlpEncoder`); 0 for the embedding alone.
  """

  hidden_units: tuple[int, ...] = (128, 128)
  activation: str = "relu"
  dropout: float = 0.0
  residual: bool = False
  l2_normalize: bool = False
  untrained_share: float = 0.0


@dataclasses.dataclass
class ImageEncoderConfig:
  """Settings of `ImageEncoder` with a named backbone.

  Attributes:
    backbone: "small_cnn" or a name in `APPLICATION_BACKBONES`.
    image_shape: (height, width, channels); required by application backbones.
    filters: Conv widths of "small_cnn".
    pooling: "avg" or "max".
    rescale: Pixel multiplier.
    offset: Pixel offset after rescaling.
    output_dim: Optional projection size.
    dropout: Dropout before the projection.
    backbone_weights: Weights of an application backbone (None: random init, no download).
    shift: Random shifts of training images, in pixels (0: none).
    flip: Random left-right mirroring of training images.
  """

  backbone: str = SMALL_CNN
  image_shape: tuple[int, int, int] | None = None
  filters: tuple[int, ...] = (32, 64, 128)
  pooling: str = "avg"
  rescale: float = 1.0 / 255.0
  offset: float = 0.0
  output_dim: int | None = None
  dropout: float = 0.0
  backbone_weights: str | None = None
  shift: int = 0
  flip: bool = False


@dataclasses.dataclass
class TextInstanceEncoderConfig:
  """Settings of `TextInstanceEncoder`.

  Attributes:
    text: Handles and pooling of the TF Hub text encoder (`trainable` there means fine-tuning).
    output_dim: Optional projection size.
    dropout: Dropout on the text embedding.
  """

  text: text_encoder_lib.TextEncoderConfig
  output_dim: int | None = None
  dropout: float = 0.0


@dataclasses.dataclass
class TfidfEncoderConfig:
  """Settings of `TfidfEncoder`.

  Attributes:
    output_dim: Embedding size.
    max_tokens: Vocabulary size, the OOV token included.
    ngrams: N-grams of 1 to `ngrams` words.
    min_df: The vocabulary keeps the n-grams of at least `min_df` training texts (`tfidf_vocabulary`); 1 keeps
      every n-gram. The TF-IDF candidate of text mode "auto" uses `min_document_frequency`, as the TF-IDF + LR
      baseline does.
    sublinear_tf: Weigh an n-gram by 1 + log of its count.
    l2_normalize: Scale each TF-IDF vector to unit length.
    dropout: Dropout on the TF-IDF entries.
    hidden_units: ReLU layers before the output layer (empty: linear).
    vocabulary: The n-grams in column order. None in a run's config.json:
      `rank4class.training.train.resolve_model_config` learns them and their idf weights from the training
      texts when it builds the model (`tfidf_vocabulary`), the same on every resume.
    idf_weights: Their idf weights (None with `vocabulary`).
    initial_kernel: Initial kernel of the linear projection `[len(vocabulary), output_dim]`. None in
      config.json: `rank4class.training.linear_candidates.logistic_regression_model` fits it (the
        logistic-regression candidate).
  """

  output_dim: int = 128
  max_tokens: int = DEFAULT_TFIDF_MAX_TOKENS
  ngrams: int = 2
  min_df: int = 1
  sublinear_tf: bool = False
  l2_normalize: bool = True
  dropout: float = 0.0
  hidden_units: tuple[int, ...] = ()
  vocabulary: list[str] | None = None
  idf_weights: list[float] | None = None
  initial_kernel: np.ndarray | None = None


@dataclasses.dataclass
class HybridTextEncoderConfig:
  """Settings of `HybridTextEncoder` beside its branches' (`InstanceEncoderConfig.tfidf` and `.mlp`).

  Attributes:
    combine: "concat" or "sum" of the TF-IDF projection and the embedding MLP. Concat was better on both sets
      measured (softmax + dot, width 128, seeds 0-2, test top-1 error): Reuters R8 2.86 +- 0.21 against sum's
      3.03 +- 0.15, Drugs.com sentiment 28.23 +- 0.26 against 30.08 +- 0.79.
    text: The frozen text encoder whose embeddings the MLP reads. None in a run's config.json:
      `rank4class.training.train.resolve_model_config` gives the one the training data was embedded with.
  """

  combine: str = CONCAT
  text: text_encoder_lib.TextEncoderConfig | None = None

  def __post_init__(self):
    if isinstance(self.text, dict):
      self.text = text_encoder_lib.TextEncoderConfig(**self.text)
    check_choice("combine", self.combine, HYBRID_COMBINES)


@dataclasses.dataclass
class InstanceEncoderConfig:
  """Which instance encoder to build, and its settings (only the chosen kind's settings are used).

  Attributes:
    type: One of `ENCODER_NAMES`.
    mlp: Settings used when `type == "mlp"`, and by the embedding branch of "hybrid".
    image: Settings used when `type == "image"`.
    text: Settings used when `type == "text"`; required then.
    tfidf: Settings used when `type == "tfidf"`, and by the TF-IDF branch of "hybrid".
    hybrid: Settings used when `type == "hybrid"` (`hybrid.text` required then).
  """

  type: str = MLP
  mlp: MlpEncoderConfig = dataclasses.field(default_factory=MlpEncoderConfig)
  image: ImageEncoderConfig = dataclasses.field(default_factory=ImageEncoderConfig)
  text: TextInstanceEncoderConfig | None = None
  tfidf: TfidfEncoderConfig = dataclasses.field(default_factory=TfidfEncoderConfig)
  hybrid: HybridTextEncoderConfig = dataclasses.field(default_factory=HybridTextEncoderConfig)


def make_instance_encoder(config: InstanceEncoderConfig) -> InstanceEncoder:
  """Builds the instance encoder that `config` describes.

  Raises:
    ValueError: If `config.type` is unknown, `config.text` is missing for a text encoder or
      `config.hybrid.text` for a hybrid one. A TF-IDF encoder without a vocabulary is built unadapted
      (`TfidfEncoder.adapt` it before use); a hybrid one without a vocabulary raises.
  """
  check_choice("instance_encoder", config.type, ENCODER_NAMES)
  if config.type == MLP:
    return get(MLP, **dataclasses.asdict(config.mlp))
  if config.type == IMAGE:
    return get(IMAGE, **dataclasses.asdict(config.image))
  if config.type == TEXT:
    if config.text is None:
      raise ValueError("InstanceEncoderConfig.type is 'text' but `text` settings are missing.")
    return get(TEXT, text=config.text.text, output_dim=config.text.output_dim, dropout=config.text.dropout)
  if config.type == TFIDF:
    return get(TFIDF, **dataclasses.asdict(config.tfidf))
  if config.type == HYBRID:
    text = config.hybrid.text
    if text is None:
      raise ValueError("InstanceEncoderConfig.type is 'hybrid' but `hybrid.text` (the frozen text encoder of "
                       "the embeddings) is missing.")
    if config.tfidf.vocabulary is None:
      raise ValueError("InstanceEncoderConfig.type is 'hybrid' but `tfidf.vocabulary` is missing (learn it "
                       "from the training texts: `tfidf_vocabulary`).")
    return get(HYBRID, tfidf=dataclasses.asdict(config.tfidf), mlp=dataclasses.asdict(config.mlp),
               text_encoder={key: getattr(text, key) for key in FROZEN_TEXT_KEYS},
               combine=config.hybrid.combine)
