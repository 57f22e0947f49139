"""The BERT encoder: its architecture, its graph over a dict of weights, and the TF Hub encoder SavedModel."""

import dataclasses
import json

import numpy as np
import tensorflow as tf

from rank4class_data.validation import check_choice, check_range

HIDDEN_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")
# A large negative number added to attention logits of padding positions; -1e9 cannot overflow float32.
_MASK_LOGIT = -1e9
# What `bert_encoder_outputs` computes its matmuls in.
COMPUTE_DTYPES = (tf.float32, tf.bfloat16)


@dataclasses.dataclass
class BertArchitecture:
  """Shapes and hyper-parameters of a BERT encoder (the fields of a Hugging Face `BertConfig`).

  Attributes:
    vocab_size: Number of word pieces.
    hidden_size: Width H of every token representation.
    num_layers: Number of Transformer layers.
    num_heads: Attention heads per layer; must divide `hidden_size`.
    intermediate_size: Width of the feed-forward layer.
    max_position_embeddings: Longest supported sequence.
    type_vocab_size: Number of segment (token type) ids.
    layer_norm_eps: Epsilon of every layer normalization.
    hidden_activation: One of `HIDDEN_ACTIVATIONS` (`gelu` is the exact erf form).
    hidden_dropout: Dropout rate on embeddings and sub-layer outputs while training.
    attention_dropout: Dropout rate on attention probabilities while training.
  """

  vocab_size: int
  hidden_size: int
  num_layers: int
  num_heads: int
  intermediate_size: int
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  layer_norm_eps: float = 1e-12
  hidden_activation: str = "gelu"
  hidden_dropout: float = 0.1
  attention_dropout: float = 0.1

  def __post_init__(self):
    for name in (
      "vocab_size",
      "hidden_size",
      "num_layers",
      "num_heads",
      "intermediate_size",
      "max_position_embeddings",
      "type_vocab_size",
    ):
      check_range(name, getattr(self, name), 1, integer=True)
      # A NumPy integer as a plain int (config.json holds them).
      setattr(self, name, int(getattr(self, name)))
    if self.hidden_size % self.num_heads:
      raise ValueError(
        f"BERT `hidden_size` {self.hidden_size} is not divisible by `num_heads` {self.num_heads}."
      )
    check_choice("hidden_activation", self.hidden_activation, HIDDEN_ACTIVATIONS)
    for name in ("hidden_dropout", "attention_dropout"):
      check_range(name, getattr(self, name), 0.0, 1.0, high_inclusive=False)

  @classmethod
  def from_hugging_face_config(cls, config_path: str) -> "BertArchitecture":
    """Reads a Hugging Face `config.json` of a BERT model.

    Raises:
      ValueError: if the file is not JSON or describes anything but an absolute-position BERT.
    """
    try:
      with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{config_path} is not valid JSON: {e}") from e
    model_type = config.get("model_type")
    if model_type != "bert":
      raise ValueError(
        f"{config_path} has model_type {model_type!r}; only BERT-family checkpoints "
        "(model_type 'bert', e.g. BERT, MiniLM, all-MiniLM-L6-v2) can be converted."
      )
    position_type = config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
      raise ValueError(
        f"{config_path} has position_embedding_type {position_type!r}; only 'absolute' is supported."
      )
    try:
      return cls(
        vocab_size=config["vocab_size"],
        hidden_size=config["hidden_size"],
        num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"],
        intermediate_size=config["intermediate_size"],
        max_position_embeddings=config.get("max_position_embeddings", 512),
        type_vocab_size=config.get("type_vocab_size", 2),
        layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
        hidden_activation=config.get("hidden_act", "gelu"),
        hidden_dropout=float(config.get("hidden_dropout_prob", 0.1)),
        attention_dropout=float(config.get("attention_probs_dropout_prob", 0.1)),
      )
    except KeyError as e:
      raise ValueError(f"{config_path} lacks the BERT field {e.args[0]!r}.") from e
    except ValueError as e:
      raise ValueError(f"{config_path}: {e}") from e


def bert_weight_shapes(config: BertArchitecture) -> dict[str, tuple[int, ...]]:
  """Names and shapes of the encoder's weights (query/key/value kernels fused into one `qkv` kernel)."""
  h, i = config.hidden_size, config.intermediate_size
  shapes = {
    "embeddings/word_embeddings": (config.vocab_size, h),
    "embeddings/position_embeddings": (config.max_position_embeddings, h),
    "embeddings/token_type_embeddings": (config.type_vocab_size, h),
    "embeddings/layer_norm/gamma": (h,),
    "embeddings/layer_norm/beta": (h,),
  }
  for layer in range(config.num_layers):
    p = f"layer_{layer}/"
    shapes.update(
      {
        p + "attention/qkv/kernel": (h, 3 * h),
        p + "attention/qkv/bias": (3 * h,),
        p + "attention/output/kernel": (h, h),
        p + "attention/output/bias": (h,),
        p + "attention/layer_norm/gamma": (h,),
        p + "attention/layer_norm/beta": (h,),
        p + "intermediate/kernel": (h, i),
        p + "intermediate/bias": (i,),
        p + "output/kernel": (i, h),
        p + "output/bias": (h,),
        p + "output/layer_norm/gamma": (h,),
        p + "output/layer_norm/beta": (h,),
      }
    )
  shapes.update({"pooler/kernel": (h, h), "pooler/bias": (h,)})
  return shapes


def _layer_norm(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, eps: float) -> tf.Tensor:
  mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
  return (x - mean) * (tf.math.rsqrt(variance + eps) * gamma) + beta


def _activation(x: tf.Tensor, name: str) -> tf.Tensor:
  if name == "gelu":
    return tf.nn.gelu(x, approximate=False)
  if name == "relu":
    return tf.nn.relu(x)
  return tf.nn.gelu(x, approximate=True)


def _dense(x: tf.Tensor, kernel: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
  # bias_add, not "+": its gradient is the dedicated BiasAddGrad kernel rather than a generic reduction.
  # A bfloat16 `x` multiplies bfloat16 copies of the (float32) weights.
  return tf.nn.bias_add(tf.matmul(x, tf.cast(kernel, x.dtype)), tf.cast(bias, x.dtype))


def inverted_dropout(x: tf.Tensor, rate: float, training: bool) -> tf.Tensor:
  """Inverted dropout from 16-bit random draws (~40% cheaper than `tf.nn.dropout` forward and backward).

  Half the Philox work of float draws, and one multiplicative mask whose gradient is a single multiply.
  The keep probability is 1 - round(rate * 2**16) / 2**16 and the scale is its exact inverse (unbiased).
  """
  if not training or rate <= 0:
    return x
  threshold = int(round(rate * 65536))
  size = tf.size(x)
  seed = tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)  # Fresh randomness on every call.
  bits = tf.random.stateless_uniform([(size + 1) // 2], seed=seed, minval=None, maxval=None, dtype=tf.int32)
  halves = tf.reshape(tf.bitcast(bits, tf.uint16), [-1])[:size]
  mask = tf.cast(halves >= threshold, x.dtype) * (65536.0 / (65536 - threshold))
  return x * tf.reshape(mask, tf.shape(x))


def _embedding_rows(weights: dict[str, tf.Tensor], config: BertArchitecture, input_word_ids: tf.Tensor,
                    input_type_ids: tf.Tensor, seq_length: tf.Tensor, training: bool) -> tf.Tensor:
  """The embedded tokens (word + segment + position, normalised, dropout) as rows [batch_size * seq_length,
  hidden_size]."""
  embeddings = (
    tf.gather(weights["embeddings/word_embeddings"], input_word_ids)
    + tf.gather(weights["embeddings/token_type_embeddings"], input_type_ids)
    + weights["embeddings/position_embeddings"][tf.newaxis, :seq_length]
  )
  # Token rows are kept as one [batch_size * seq_length, hidden_size] matrix so that every dense layer is a
  # single large matmul.
  x = tf.reshape(embeddings, [-1, config.hidden_size])
  x = _layer_norm(x, weights["embeddings/layer_norm/gamma"], weights["embeddings/layer_norm/beta"],
                  config.layer_norm_eps)
  return inverted_dropout(x, config.hidden_dropout, training)


def _transformer_layer(x: tf.Tensor, weights: dict[str, tf.Tensor], p: str, config: BertArchitecture,
                       mask_logits: tf.Tensor, batch_size: tf.Tensor, seq_length: tf.Tensor, training: bool,
                       low: tf.DType) -> tf.Tensor:
  """One post-layer-norm Transformer layer (weights under the prefix `p`) on the token rows `x` [batch_size *
  seq_length, hidden_size]: self-attention, then the feed-forward block, each added to its input and
  normalised. Matmuls run in `low`; softmax, residual sums and layer norms in float32."""
  h, num_heads = config.hidden_size, config.num_heads
  head_size = h // num_heads
  eps = config.layer_norm_eps
  qkv = _dense(tf.cast(x, low), weights[p + "attention/qkv/kernel"], weights[p + "attention/qkv/bias"])
  # [3, batch_size, num_heads, seq_length, head_size]
  qkv = tf.transpose(tf.reshape(qkv, [batch_size, seq_length, 3, num_heads, head_size]), [2, 0, 3, 1, 4])
  # Unstacking (gradient: one stack) instead of indexing (gradient: three zero-filled full-size tensors).
  query, key, value = tf.unstack(qkv, axis=0)
  query = query * tf.cast(head_size**-0.5, low)
  # [batch_size, heads, seq, seq]; the softmax in float32.
  logits = tf.cast(tf.matmul(query, key, transpose_b=True), tf.float32) + mask_logits
  probabilities = inverted_dropout(tf.nn.softmax(logits, axis=-1), config.attention_dropout, training)
  context = tf.matmul(tf.cast(probabilities, low), value)  # [batch_size, heads, seq_length, head_size]
  context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, h])
  attention = tf.cast(
    _dense(context, weights[p + "attention/output/kernel"], weights[p + "attention/output/bias"]),
    tf.float32
  )
  x = _layer_norm(
    inverted_dropout(attention, config.hidden_dropout, training) + x,
    weights[p + "attention/layer_norm/gamma"],
    weights[p + "attention/layer_norm/beta"],
    eps,
  )
  intermediate = _activation(
    _dense(tf.cast(x, low), weights[p + "intermediate/kernel"], weights[p + "intermediate/bias"]),
    config.hidden_activation,
  )
  output = tf.cast(_dense(intermediate, weights[p + "output/kernel"], weights[p + "output/bias"]),
                   tf.float32)
  x = _layer_norm(
    inverted_dropout(output, config.hidden_dropout, training) + x,
    weights[p + "output/layer_norm/gamma"],
    weights[p + "output/layer_norm/beta"],
    eps,
  )
  return x


def bert_encoder_outputs(
  weights: dict[str, tf.Tensor],
  config: BertArchitecture,
  input_word_ids: tf.Tensor,
  input_mask: tf.Tensor,
  input_type_ids: tf.Tensor,
  training: bool = False,
  compute_dtype: tf.DType = tf.float32,
) -> dict[str, tf.Tensor | list[tf.Tensor]]:
  """Runs BERT (post-layer-norm Transformer, Devlin et al. 2019 §3) on packed inputs.

  Args:
    weights: `bert_weight_shapes(config)` names -> float32 tensors or variables.
    config: the architecture.
    input_word_ids: int [batch_size, seq_length].
    input_mask: int [batch_size, seq_length], 1 for real tokens.
    input_type_ids: int [batch_size, seq_length], segment ids.
    training: apply dropout.
    compute_dtype: tf.float32, or tf.bfloat16 for inference on CPUs with bfloat16 instructions: every matmul
      (dense layers and attention) and the activation then run in bfloat16 on bfloat16 copies of the
      weights, while embeddings, softmax, residual sums, layer norms and the outputs stay float32
      (`COMPUTE_DTYPES`; the vectors' cosine to float32 measured in bench/text_encoder_precision.py).

  Returns:
    `sequence_output` [batch_size, seq_length, hidden_size], `pooled_output` [batch_size, hidden_size] (tanh
    dense layer on the first token), `encoder_outputs` (list of each layer's [batch_size, seq_length,
    hidden_size]) and `default` (= `pooled_output`).
  """
  if compute_dtype not in COMPUTE_DTYPES:
    raise ValueError(f"`compute_dtype` must be one of {[d.name for d in COMPUTE_DTYPES]}, got "
                     f"{compute_dtype!r}.")
  low = compute_dtype
  h = config.hidden_size
  batch_size, seq_length = tf.shape(input_word_ids)[0], tf.shape(input_word_ids)[1]

  x = _embedding_rows(weights, config, input_word_ids, input_type_ids, seq_length, training)
  # [batch_size, 1, 1, seq_length]: padding keys get a large negative logit.
  mask_logits = (1.0 - tf.cast(input_mask, tf.float32))[:, tf.newaxis, tf.newaxis, :] * _MASK_LOGIT

  layer_outputs = []
  for layer in range(config.num_layers):
    x = _transformer_layer(x, weights, f"layer_{layer}/", config, mask_logits, batch_size, seq_length,
                           training, low)
    layer_outputs.append(tf.reshape(x, [batch_size, seq_length, h]))

  sequence_output = layer_outputs[-1]
  pooled_output = tf.tanh(tf.matmul(sequence_output[:, 0], weights["pooler/kernel"]) + weights["pooler/bias"])
  return {
    "sequence_output": sequence_output,
    "pooled_output": pooled_output,
    "encoder_outputs": layer_outputs,
    "default": pooled_output,
  }


class _BertEncoderModule(tf.Module):
  """Holds the encoder's variables; calling it runs `bert_encoder_outputs` on them."""

  def __init__(self, config: BertArchitecture, weights: dict[str, np.ndarray]):
    super().__init__(name="bert_encoder")
    self._config = config
    self._weight_names = list(bert_weight_shapes(config))
    # A list (not a dict keyed by names with "/") keeps the object graph simple; names live on the variables.
    self.weight_list = [
      tf.Variable(np.asarray(weights[name], np.float32), name=name, trainable=True)
      for name in self._weight_names
    ]

  def __call__(self, inputs: dict[str, tf.Tensor], training: bool = False):
    return bert_encoder_outputs(
      dict(zip(self._weight_names, self.weight_list, strict=True)),
      self._config,
      tf.cast(inputs["input_word_ids"], tf.int32),
      tf.cast(inputs["input_mask"], tf.int32),
      tf.cast(inputs["input_type_ids"], tf.int32),
      training=training,
    )


_ENCODER_INPUT_SPEC = {
  "input_word_ids": tf.TensorSpec([None, None], tf.int32, name="input_word_ids"),
  "input_mask": tf.TensorSpec([None, None], tf.int32, name="input_mask"),
  "input_type_ids": tf.TensorSpec([None, None], tf.int32, name="input_type_ids"),
}


def save_bert_encoder(config: BertArchitecture, weights: dict[str, np.ndarray], path: str) -> None:
  """Saves a reusable TF Hub encoder SavedModel (trainable through `hub.KerasLayer(..., trainable=True)`)."""
  module = _BertEncoderModule(config, weights)
  root = tf.train.Checkpoint()
  root.encoder = module
  # The attributes `hub.KerasLayer` reads to register weights and losses (the "Reusable SavedModel" API).
  root.variables = list(module.weight_list)
  root.trainable_variables = list(module.weight_list)
  root.regularization_losses = []

  @tf.function(autograph=False)
  def call(inputs, training=False):
    return module(inputs, training=training)

  # One trace per mode; the serving signature calls the inference trace instead of tracing the model again.
  inference = call.get_concrete_function(_ENCODER_INPUT_SPEC, training=False)
  call.get_concrete_function(_ENCODER_INPUT_SPEC, training=True)
  root.__call__ = call

  @tf.function(input_signature=[_ENCODER_INPUT_SPEC], autograph=False)
  def serving_default(inputs):
    outputs = inference(inputs, training=False)
    flat = {"pooled_output": outputs["pooled_output"], "sequence_output": outputs["sequence_output"]}
    for layer, layer_output in enumerate(outputs["encoder_outputs"]):
      flat[f"encoder_output_{layer}"] = layer_output
    return flat

  tf.saved_model.save(root, path, signatures={"serving_default": serving_default})
