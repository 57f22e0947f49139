"""A Keras text encoder over a TF Hub BERT preprocess/encoder pair, frozen or fine-tuned."""

import dataclasses
import os
import weakref
from typing import Any

import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # noqa: F401  Registers the ops that BERT preprocessing SavedModels use.

from rank4class_data.validation import check_choice, check_range
from rank4class_encoders import bert_conversion, bert_encoder

POOLINGS = ("cls", "mean")
# What a frozen encoder computes in (`TextEncoder`'s `precision`): "float32", or "bfloat16" matmuls on CPUs
# with bfloat16 instructions (`bert_encoder.bert_encoder_outputs`); "auto" picks bfloat16 for a frozen encoder
# where `cpu_has_bfloat16()` and no GPU is visible, else float32.
FLOAT32, BFLOAT16, AUTO_PRECISION = "float32", "bfloat16", "auto"
PRECISIONS = (FLOAT32, BFLOAT16, AUTO_PRECISION)
# /proc/cpuinfo flags of native bfloat16 dot products (x86: AVX512-BF16, AMX).
_BFLOAT16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# What this layer calls on the preprocess handle; any TF Hub BERT preprocessor has them.
_REQUIRED_PREPROCESS_ATTRIBUTES = ("tokenize", "bert_pack_inputs")
_REMOTE_PREFIXES = ("http://", "https://", "gs://", "hf://")
# Preprocessors hold no variables, so one loaded object serves every TextEncoder of a handle:
# handle -> (modification time of its saved_model.pb, loaded object).
_PREPROCESSORS: dict[str, tuple[float | None, object]] = {}


@dataclasses.dataclass
class TextEncoderConfig:
  """Configuration of a `TextEncoder`.

  Attributes:
    preprocess_handle: TF Hub handle or local SavedModel directory following the TF Hub BERT preprocess
      convention (`tokenize`, `bert_pack_inputs`).
    encoder_handle: TF Hub handle or local SavedModel directory following the TF Hub BERT encoder
      convention (`pooled_output`, `sequence_output`, `encoder_outputs`).
    trainable: fine-tune the encoder end to end (True) or keep it frozen (False).
    pooling: "cls" (the encoder's `pooled_output`) or "mean" (`sequence_output` averaged over `input_mask`).
    max_seq_length: padded length of every packed input, special tokens included.
    l2_normalize: scale each embedding to unit length (sentence-transformers' `Normalize`).
    precision: one of `PRECISIONS`: what a frozen encoder computes in (`TextEncoder`).
  """

  preprocess_handle: str
  encoder_handle: str
  trainable: bool = False
  pooling: str = "mean"
  max_seq_length: int = 128
  l2_normalize: bool = False
  precision: str = FLOAT32

  @classmethod
  def of(cls, value: "TextEncoderConfig | dict[str, Any]") -> "TextEncoderConfig":
    """`value` itself, or the config its fields describe (a dict, as a layer's saved `text` entry holds
    them)."""
    return value if isinstance(value, cls) else cls(**value)


# The flat keys under which the layers holding a text encoder (rank4class's text instance and metadata class
# encoders) saved its settings up to 0.8: the fields by name, `trainable` as `trainable_encoder` (a layer's
# own `trainable` is Keras's). Since 0.9 they save one `text` entry, the `TextEncoderConfig` as a dict.
_FLAT_LAYER_KEYS = {("trainable_encoder" if field.name == "trainable" else field.name): field.name
                    for field in dataclasses.fields(TextEncoderConfig)}


def nest_flat_layer_config(config: dict[str, Any]) -> dict[str, Any]:
  """A layer config saved up to 0.8, with the text encoder's settings as flat keys (`preprocess_handle`, ...,
  `trainable_encoder`), in today's form: those settings as one `text` entry. A config without them is returned
  as it is, so a layer's `from_config` reads configs of every version through this.

  Example:
    nest_flat_layer_config({"preprocess_handle": p, "encoder_handle": e, "trainable_encoder": True, "dropout": 0.1})
    # {"dropout": 0.1, "text": {"preprocess_handle": p, "encoder_handle": e, "trainable": True}}

  Raises:
    ValueError: for a config with both a `text` entry and flat text-encoder keys.
  """  # noqa: E501
  flat = {key: value for key, value in config.items() if key in _FLAT_LAYER_KEYS}
  if not flat:
    return config
  if "text" in config:
    raise ValueError("A layer config holds its text encoder's settings in `text` or, as saved up to 0.8, in "
                     f"flat keys, not both; got `text` and {sorted(flat)}.")
  rest = {key: value for key, value in config.items() if key not in flat}
  return {**rest, "text": {_FLAT_LAYER_KEYS[key]: value for key, value in flat.items()}}


def cpu_has_bfloat16() -> bool:
  """Whether this machine's CPU has native bfloat16 dot products (Linux /proc/cpuinfo; False elsewhere)."""
  try:
    with open("/proc/cpuinfo") as f:
      flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
  except OSError:
    return False
  return any(flag in flags for flag in _BFLOAT16_CPU_FLAGS)


def resolve_precision(precision: str, trainable: bool, encoder_handle: str | None = None) -> str:
  """`precision` with "auto" resolved on this machine: bfloat16 for a frozen encoder converted by
  `bert_conversion` (`encoder_handle`; None: MiniLM's conversion) on a CPU with bfloat16 instructions and no
  visible GPU, else float32. The layer and the embedding cache's identity both resolve through this."""
  check_choice("precision", precision, PRECISIONS)
  if precision != AUTO_PRECISION:
    return precision
  if trainable or not cpu_has_bfloat16() or tf.config.list_physical_devices("GPU"):
    return FLOAT32
  if encoder_handle is not None and bert_conversion.architecture_of(encoder_handle) is None:
    return FLOAT32
  return BFLOAT16


def masked_mean(sequence_output: tf.Tensor, input_mask: tf.Tensor) -> tf.Tensor:
  """Averages token vectors over the real (mask 1) tokens, as sentence-transformers' mean pooling.

  Args:
    sequence_output: float [batch_size, seq_length, hidden_size].
    input_mask: int or float [batch_size, seq_length], 1 for real tokens and 0 for padding.

  Returns:
    float [batch_size, hidden_size]; rows without any real token are 0.
  """
  mask = tf.cast(input_mask, sequence_output.dtype)[:, :, tf.newaxis]
  total = tf.reduce_sum(sequence_output * mask, axis=1)
  count = tf.reduce_sum(mask, axis=1)
  return total / tf.maximum(count, 1e-9)


def load_hub_module(handle: str, argument_name: str):
  """Loads a TF2 SavedModel by TF Hub handle or local path, with errors that name the handle.

  Raises:
    ValueError: if the handle is empty, a local path that does not exist or holds no SavedModel, or
      cannot be loaded.
  """
  if not isinstance(handle, str) or not handle:
    raise ValueError(
      f"`{argument_name}` must be a non-empty TF Hub handle or SavedModel directory, got {handle!r}."
    )
  if not handle.startswith(_REMOTE_PREFIXES):
    if not os.path.exists(handle):
      raise ValueError(
        f"`{argument_name}` {handle!r} does not exist: expected a TF Hub handle (https://...) "
        "or a local SavedModel directory."
      )
    if not os.path.isfile(os.path.join(handle, "saved_model.pb")):
      raise ValueError(
        f"`{argument_name}` {handle!r} holds no saved_model.pb: expected a SavedModel directory."
      )
  try:
    return hub.load(handle)
  except Exception as e:  # Network, format and TF errors alike: say which handle failed.
    raise ValueError(f"Could not load `{argument_name}` {handle!r}: {e}") from e


def _load_preprocessor(handle: str):
  local_graph = os.path.join(handle, "saved_model.pb")
  version = os.path.getmtime(local_graph) if os.path.isfile(local_graph) else None
  cached = _PREPROCESSORS.get(handle)
  if cached is not None and cached[0] == version and version is not None:
    return cached[1]
  preprocessor = load_hub_module(handle, "preprocess_handle")
  missing = [name for name in _REQUIRED_PREPROCESS_ATTRIBUTES if not hasattr(preprocessor, name)]
  if missing:
    raise ValueError(
      f"`preprocess_handle` {handle!r} lacks {missing}: expected a TF Hub BERT preprocessor with "
      "`tokenize` and `bert_pack_inputs`."
    )
  _PREPROCESSORS[handle] = (version, preprocessor)
  return preprocessor


def _hidden_size(encoder) -> int:
  """Width of `pooled_output`, from the saved function's output spec or else from a one-token call."""
  for function in getattr(encoder.__call__, "concrete_functions", ()):
    outputs = function.structured_outputs
    if isinstance(outputs, dict) and "pooled_output" in outputs:
      size = outputs["pooled_output"].shape[-1]
      if size is not None:
        return int(size)
  ones = tf.ones([1, 2], tf.int32)
  outputs = encoder({"input_word_ids": ones, "input_mask": ones, "input_type_ids": tf.zeros_like(ones)})
  return int(outputs["pooled_output"].shape[-1])


@tf.keras.utils.register_keras_serializable(package="rank4class")
class TextEncoder(tf.keras.layers.Layer):
  """Encodes strings, or pairs of strings, into one vector each with a TF Hub BERT (Devlin et al. 2019).

  The preprocessor's `tokenize` and `bert_pack_inputs` run inside the layer, so the model takes raw strings;
  pairs are packed as two segments (`[CLS] first [SEP] second [SEP]`, as for query+passage). With
  `trainable=True` the encoder's weights are fine-tuned; with `trainable=False` it is frozen and runs in
  inference mode (no dropout). Handles are loaded when the layer is constructed, so a wrong handle fails
  early, and `output_dim` is known before the layer is built.

  Example:
    ```python
    handles = text_embeddings.minilm_handles()
    encoder = TextEncoder(handles.preprocess, handles.encoder, pooling="mean", max_seq_length=64)
    encoder(tf.constant(["a cat sat", "stocks fell"]))              # [2, 384]
    encoder((tf.constant(["query"]), tf.constant(["passage"])))    # [1, 384], one text pair
    ```

  Args:
    preprocess_handle: TF Hub BERT preprocess handle or SavedModel directory.
    encoder_handle: TF Hub BERT encoder handle or SavedModel directory.
    trainable: fine-tune (True) or freeze (False) the encoder.
    pooling: one of `POOLINGS`: "cls" uses `pooled_output`, "mean" averages `sequence_output` over the mask.
    max_seq_length: packed length, special tokens included, at least 3 (`[CLS]`, `[SEP]` and, for pairs, a
      second `[SEP]`); longer inputs are truncated (longest segment first for pairs).
    l2_normalize: scale the output vectors to unit length.
    precision: one of `PRECISIONS` ("auto" is resolved when the layer is built, `resolve_precision`).
      "bfloat16" runs a frozen encoder converted by `bert_conversion` with bfloat16 matmuls
      (`bert_encoder.bert_encoder_outputs`): 1.7-2.4x the float32 rate on a CPU with bfloat16 instructions,
      vectors at cosine >= 0.9999 to float32 (docs/BENCHMARKS.md). The same graph runs wherever the layer
      does (embedding cache, training, prediction, the exported model), so they agree on every vector.

  Raises:
    ValueError: for an unknown pooling, a too small `max_seq_length`, or a handle that does not load or
      does not follow the TF Hub BERT conventions; for bfloat16 with a trainable encoder or an encoder not
      converted by `bert_conversion`.
  """

  def __init__(
    self,
    preprocess_handle: str,
    encoder_handle: str,
    trainable: bool = False,
    pooling: str = "mean",
    max_seq_length: int = 128,
    l2_normalize: bool = False,
    precision: str = FLOAT32,
    **kwargs,
  ):
    super().__init__(trainable=trainable, **kwargs)
    check_choice("pooling", pooling, POOLINGS)
    self._precision = resolve_precision(precision, trainable, encoder_handle)
    check_range("max_seq_length", max_seq_length, 3, integer=True)
    self._preprocess_handle = preprocess_handle
    self._encoder_handle = encoder_handle
    self._pooling = pooling
    self._max_seq_length = int(max_seq_length)  # A NumPy integer as a plain int (the layer's config is JSON).
    self._l2_normalize = bool(l2_normalize)
    self._preprocessor = _load_preprocessor(preprocess_handle)
    encoder = load_hub_module(encoder_handle, "encoder_handle")
    if not callable(encoder):
      raise ValueError(
        f"`encoder_handle` {encoder_handle!r} is not callable: expected a TF Hub BERT encoder."
      )
    self._encoder = hub.KerasLayer(encoder, trainable=trainable, name="encoder")
    self._output_dim = _hidden_size(encoder)
    self._architecture = None
    if self._precision == BFLOAT16:
      self._architecture = _bfloat16_architecture(encoder_handle, trainable)

  @property
  def output_dim(self) -> int:
    """Width of the output vectors (the encoder's hidden size)."""
    return self._output_dim

  @property
  def max_seq_length(self) -> int:
    return self._max_seq_length

  @property
  def precision(self) -> str:
    """What the encoder computes in: "float32" or "bfloat16" ("auto" resolved)."""
    return self._precision

  @property
  def pooling(self) -> str:
    return self._pooling

  @property
  def handles(self) -> tuple[str, str]:
    """(preprocess_handle, encoder_handle)."""
    return self._preprocess_handle, self._encoder_handle

  @property
  def text_encoder_config(self) -> TextEncoderConfig:
    """The settings this layer was built from (`make_text_encoder` of them builds its like): its config's
    entries of the same names, Keras's `trainable` included."""
    config = self.get_config()
    return TextEncoderConfig(**{field.name: config[field.name]
                                for field in dataclasses.fields(TextEncoderConfig)})

  def preprocess(self, inputs) -> dict[str, tf.Tensor]:
    """Tokenizes and packs strings [batch_size] or a pair (first, second) of them.

    Usable inside `tf.data` pipelines (it uses no Keras state).

    Returns:
      int32 `input_word_ids`, `input_mask`, `input_type_ids`, each [batch_size, max_seq_length].
    """
    if isinstance(inputs, (tuple, list)):
      if len(inputs) != 2:
        raise ValueError(
          f"TextEncoder takes strings [batch_size] or a pair (first, second) of them, got "
          f"{len(inputs)} inputs."
        )
      segments = [self._preprocessor.tokenize(_as_string_vector(x)) for x in inputs]
    else:
      segments = [self._preprocessor.tokenize(_as_string_vector(inputs))]
    packed = self._preprocessor.bert_pack_inputs(segments, seq_length=self._max_seq_length)
    return {
      name: tf.ensure_shape(tf.cast(packed[name], tf.int32), [None, self._max_seq_length])
      for name in ("input_word_ids", "input_mask", "input_type_ids")
    }

  def encode(self, encoder_inputs: dict[str, tf.Tensor], training=None) -> tf.Tensor:
    """Runs the encoder and pooling on packed inputs [batch_size, seq_length] -> [batch_size, output_dim]."""
    if self._architecture is None:
      outputs = self._encoder(encoder_inputs, training=training)
    else:  # The frozen converted BERT's own variables, run with bfloat16 matmuls.
      names = {variable.name.split(":")[0]: variable for variable in self._encoder.resolved_object.variables}
      outputs = _bfloat16_function(self)(
        names,
        encoder_inputs["input_word_ids"],
        encoder_inputs["input_mask"],
        encoder_inputs["input_type_ids"],
      )
    if self._pooling == "cls":
      pooled = outputs["pooled_output"]
    else:
      pooled = masked_mean(outputs["sequence_output"], encoder_inputs["input_mask"])
    if self._l2_normalize:
      pooled = tf.math.l2_normalize(pooled, axis=-1)
    return pooled

  def call(self, inputs, training=None):
    """Strings [batch_size] (or a (first, second) pair of them) -> float32 [batch_size, output_dim]."""
    return self.encode(self.preprocess(inputs), training=training)

  def compute_output_shape(self, input_shape):
    if (
      isinstance(input_shape, (tuple, list))
      and input_shape
      and not isinstance(input_shape[0], (int, type(None)))
    ):
      input_shape = input_shape[0]  # A (first, second) pair: both have the batch size.
    return tf.TensorShape([tf.TensorShape(input_shape)[0], self._output_dim])

  def get_config(self):
    return {
      **super().get_config(),
      "preprocess_handle": self._preprocess_handle,
      "encoder_handle": self._encoder_handle,
      "pooling": self._pooling,
      "max_seq_length": self._max_seq_length,
      "l2_normalize": self._l2_normalize,
      "precision": self._precision,
    }


# Each bfloat16 `TextEncoder`'s BERT as one graph function. Run eagerly op by op, its bfloat16 products are
# rounded otherwise than in a graph (up to 7e-3 per component on MiniLM); as a function, an eager call gives
# the vectors a traced one (the exports, training) and the embedding cache give, to the bit.
_BFLOAT16_FUNCTIONS: "weakref.WeakKeyDictionary[TextEncoder, Any]" = weakref.WeakKeyDictionary()


def _bfloat16_function(encoder: TextEncoder):
  """`bert_encoder.bert_encoder_outputs` in bfloat16 of `encoder`'s architecture, as a `tf.function` of
  (weights by name, input_word_ids, input_mask, input_type_ids)."""
  function = _BFLOAT16_FUNCTIONS.get(encoder)
  if function is None:
    architecture = encoder._architecture

    @tf.function(autograph=False, reduce_retracing=True)
    def function(names, word_ids, mask, type_ids):
      return bert_encoder.bert_encoder_outputs(names, architecture, word_ids, mask, type_ids,
                                               compute_dtype=tf.bfloat16)

    _BFLOAT16_FUNCTIONS[encoder] = function
  return function


def _as_string_vector(texts) -> tf.Tensor:
  """Strings [batch_size] or [batch_size, 1] -> [batch_size]."""
  texts = tf.convert_to_tensor(texts)
  if texts.dtype != tf.string:
    raise ValueError(f"TextEncoder takes string tensors, got dtype {texts.dtype.name}.")
  if texts.shape.rank == 2 and texts.shape[1] == 1:
    texts = tf.squeeze(texts, axis=1)
  if texts.shape.rank != 1:
    raise ValueError(f"TextEncoder takes strings of shape [batch_size], got shape {texts.shape}.")
  return texts


def make_text_encoder(config: TextEncoderConfig) -> TextEncoder:
  """Builds the `TextEncoder` a `TextEncoderConfig` describes."""
  return TextEncoder(**dataclasses.asdict(config))


def _bfloat16_architecture(encoder_handle: str, trainable: bool) -> bert_encoder.BertArchitecture:
  """The architecture of an encoder that can run in bfloat16: frozen, converted by `bert_conversion`."""
  if trainable:
    raise ValueError("precision 'bfloat16' runs a frozen text encoder only; fine-tuning computes in float32.")
  architecture = bert_conversion.architecture_of(encoder_handle)
  if architecture is None:
    raise ValueError(
      "precision 'bfloat16' needs an encoder converted by rank4class (its "
      f"{bert_conversion.CONVERSION_INFO_FILE} beside {encoder_handle!r}); use precision 'float32' for other "
      "TF Hub encoders."
    )
  return architecture
