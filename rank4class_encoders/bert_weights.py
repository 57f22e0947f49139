"""Hugging Face BERT weights <-> the encoder's weights (and their `model.safetensors` files), and BERT's
random initialisation."""

import json
import os
from collections.abc import Sequence

import numpy as np
from safetensors import numpy as safetensors_numpy

from rank4class_data.messages import say
from rank4class_data.validation import atomic_output, atomic_paths
from rank4class_encoders.bert_encoder import BertArchitecture, bert_weight_shapes

# One encoder layer's tensors in a Hugging Face `BertModel` state dict, below `encoder.layer.<i>.`.
_HUGGING_FACE_LAYER_TENSORS = (
  "attention.self.query.weight",
  "attention.self.key.weight",
  "attention.self.value.weight",
  "attention.self.query.bias",
  "attention.self.key.bias",
  "attention.self.value.bias",
  "attention.output.dense.weight",
  "attention.output.dense.bias",
  "attention.output.LayerNorm.weight",
  "attention.output.LayerNorm.bias",
  "intermediate.dense.weight",
  "intermediate.dense.bias",
  "output.dense.weight",
  "output.dense.bias",
  "output.LayerNorm.weight",
  "output.LayerNorm.bias",
)


def _layer_weights(hf: dict[str, np.ndarray], layer: int, source: str) -> dict[str, np.ndarray]:
  """Encoder layer `layer`'s weights from its Hugging Face tensors `hf` (names below `encoder.layer.<i>.`)."""
  p = f"layer_{layer}/"
  try:
    qkv_kernel = np.concatenate(
      [hf[f"attention.self.{part}.weight"].T for part in ("query", "key", "value")], axis=1
    )
    qkv_bias = np.concatenate([hf[f"attention.self.{part}.bias"] for part in ("query", "key", "value")])
  except ValueError as e:
    raise ValueError(
      f"{source}: query/key/value tensors of layer {layer} have mismatched shapes: {e}"
    ) from e
  return {
    p + "attention/qkv/kernel": qkv_kernel,
    p + "attention/qkv/bias": qkv_bias,
    p + "attention/output/kernel": hf["attention.output.dense.weight"].T,
    p + "attention/output/bias": hf["attention.output.dense.bias"],
    p + "attention/layer_norm/gamma": hf["attention.output.LayerNorm.weight"],
    p + "attention/layer_norm/beta": hf["attention.output.LayerNorm.bias"],
    p + "intermediate/kernel": hf["intermediate.dense.weight"].T,
    p + "intermediate/bias": hf["intermediate.dense.bias"],
    p + "output/kernel": hf["output.dense.weight"].T,
    p + "output/bias": hf["output.dense.bias"],
    p + "output/layer_norm/gamma": hf["output.LayerNorm.weight"],
    p + "output/layer_norm/beta": hf["output.LayerNorm.bias"],
  }


def _pooler_weights(
  state: dict[str, np.ndarray], get, config: BertArchitecture, source: str
) -> dict[str, np.ndarray]:
  """The pooler's weights from `state` (read by `get`), or an identity pooler when the state has none."""
  if "pooler.dense.weight" in state:
    return {"pooler/kernel": get("pooler.dense.weight").T, "pooler/bias": get("pooler.dense.bias")}
  # Checkpoints saved without the pooler (e.g. from BertForMaskedLM): an identity pooler keeps
  # `pooled_output` = tanh(first token), and mean pooling does not use it at all.
  say(f"{source} has no pooler weights; using an identity pooler.")
  return {
    "pooler/kernel": np.eye(config.hidden_size, dtype=np.float32),
    "pooler/bias": np.zeros([config.hidden_size], np.float32),
  }


def hugging_face_to_bert_weights(
  state: dict[str, np.ndarray], config: BertArchitecture, source: str = "state dict"
) -> dict[str, np.ndarray]:
  """Maps a Hugging Face `BertModel` state dict (PyTorch layout) onto `bert_weight_shapes` names.

  PyTorch `Linear` weights are [out, in] and are transposed; query, key and value kernels are concatenated.
  A `bert.` prefix (as in `BertForMaskedLM` checkpoints) is accepted; heads beyond the encoder are ignored.

  Raises:
    ValueError: naming missing tensors or tensors whose shape disagrees with `config`.
  """
  if any(key.startswith("bert.") for key in state):
    state = {key[len("bert.") :]: value for key, value in state.items() if key.startswith("bert.")}
  missing = []

  def get(name: str) -> np.ndarray:
    for candidate in (
      name,
      name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"),
    ):
      if candidate in state:
        return np.asarray(state[candidate], np.float32)
    missing.append(name)
    return np.zeros([0], np.float32)

  embeddings = {
    "embeddings/word_embeddings": get("embeddings.word_embeddings.weight"),
    "embeddings/position_embeddings": get("embeddings.position_embeddings.weight"),
    "embeddings/token_type_embeddings": get("embeddings.token_type_embeddings.weight"),
    "embeddings/layer_norm/gamma": get("embeddings.LayerNorm.weight"),
    "embeddings/layer_norm/beta": get("embeddings.LayerNorm.bias"),
  }
  layers = [
    {name: get(f"encoder.layer.{layer}." + name) for name in _HUGGING_FACE_LAYER_TENSORS}
    for layer in range(config.num_layers)
  ]
  if missing:
    raise ValueError(
      f"{source} lacks {len(missing)} BERT tensors, e.g. {missing[:5]}; is it a BERT checkpoint "
      f"with {config.num_layers} layers?"
    )
  weights = dict(embeddings)
  for layer, hf in enumerate(layers):
    weights.update(_layer_weights(hf, layer, source))
  weights.update(_pooler_weights(state, get, config, source))
  for name, shape in bert_weight_shapes(config).items():
    if weights[name].shape != shape:
      raise ValueError(
        f"{source}: tensor for {name!r} has shape {weights[name].shape}, but config.json implies {shape}."
      )
  return weights


def bert_weights_to_hugging_face(
  weights: dict[str, np.ndarray], config: BertArchitecture
) -> dict[str, np.ndarray]:
  """Inverse of `hugging_face_to_bert_weights`: a Hugging Face `BertModel` state dict (PyTorch layout)."""
  h = config.hidden_size
  state = {
    "embeddings.word_embeddings.weight": weights["embeddings/word_embeddings"],
    "embeddings.position_embeddings.weight": weights["embeddings/position_embeddings"],
    "embeddings.token_type_embeddings.weight": weights["embeddings/token_type_embeddings"],
    "embeddings.LayerNorm.weight": weights["embeddings/layer_norm/gamma"],
    "embeddings.LayerNorm.bias": weights["embeddings/layer_norm/beta"],
    "pooler.dense.weight": weights["pooler/kernel"].T,
    "pooler.dense.bias": weights["pooler/bias"],
  }
  for layer in range(config.num_layers):
    p, hf = f"layer_{layer}/", f"encoder.layer.{layer}."
    qkv_kernel, qkv_bias = weights[p + "attention/qkv/kernel"], weights[p + "attention/qkv/bias"]
    for index, part in enumerate(("query", "key", "value")):
      state[hf + f"attention.self.{part}.weight"] = qkv_kernel[:, index * h : (index + 1) * h].T
      state[hf + f"attention.self.{part}.bias"] = qkv_bias[index * h : (index + 1) * h]
    state.update(
      {
        hf + "attention.output.dense.weight": weights[p + "attention/output/kernel"].T,
        hf + "attention.output.dense.bias": weights[p + "attention/output/bias"],
        hf + "attention.output.LayerNorm.weight": weights[p + "attention/layer_norm/gamma"],
        hf + "attention.output.LayerNorm.bias": weights[p + "attention/layer_norm/beta"],
        hf + "intermediate.dense.weight": weights[p + "intermediate/kernel"].T,
        hf + "intermediate.dense.bias": weights[p + "intermediate/bias"],
        hf + "output.dense.weight": weights[p + "output/kernel"].T,
        hf + "output.dense.bias": weights[p + "output/bias"],
        hf + "output.LayerNorm.weight": weights[p + "output/layer_norm/gamma"],
        hf + "output.LayerNorm.bias": weights[p + "output/layer_norm/beta"],
      }
    )
  return {name: np.ascontiguousarray(value, np.float32) for name, value in state.items()}


def write_hugging_face_bert(
  directory: str,
  config: BertArchitecture,
  weights: dict[str, np.ndarray],
  vocab: Sequence[str],
  lower_case: bool = True,
) -> None:
  """Writes a Hugging Face BERT directory (`config.json`, `vocab.txt`, `model.safetensors`,
  `tokenizer_config.json`), e.g. to hand a fine-tuned or random encoder to PyTorch tools."""
  os.makedirs(directory, exist_ok=True)
  hugging_face_config = {
    "architectures": ["BertModel"],
    "model_type": "bert",
    "vocab_size": config.vocab_size,
    "hidden_size": config.hidden_size,
    "num_hidden_layers": config.num_layers,
    "num_attention_heads": config.num_heads,
    "intermediate_size": config.intermediate_size,
    "max_position_embeddings": config.max_position_embeddings,
    "type_vocab_size": config.type_vocab_size,
    "layer_norm_eps": config.layer_norm_eps,
    "hidden_act": config.hidden_activation,
    "hidden_dropout_prob": config.hidden_dropout,
    "attention_probs_dropout_prob": config.attention_dropout,
    "position_embedding_type": "absolute",
    "pad_token_id": 0,
  }
  with atomic_output(os.path.join(directory, "config.json")) as f:
    json.dump(hugging_face_config, f, indent=2, sort_keys=True)
  with atomic_output(os.path.join(directory, "tokenizer_config.json")) as f:
    json.dump({"do_lower_case": lower_case, "tokenizer_class": "BertTokenizer"}, f, indent=2, sort_keys=True)
  with atomic_output(os.path.join(directory, "vocab.txt")) as f:
    f.write("".join(token + "\n" for token in vocab))
  with atomic_paths(os.path.join(directory, "model.safetensors")) as (weights_path,):
    safetensors_numpy.save_file(bert_weights_to_hugging_face(weights, config), weights_path)


def read_safetensors(path: str) -> dict[str, np.ndarray]:
  """The tensors of a Hugging Face `model.safetensors` file by name; ValueError naming an unreadable file."""
  try:
    return safetensors_numpy.load_file(path)
  except Exception as e:  # safetensors raises its own SafetensorError for corrupt files.
    raise ValueError(f"{path} is not a readable safetensors file: {e}") from e


def random_bert_weights(config: BertArchitecture, seed: int = 0) -> dict[str, np.ndarray]:
  """BERT's initialisation (normal(0, 0.02) kernels and embeddings, zero biases, unit layer-norm scales)."""
  rng = np.random.default_rng(seed)
  weights = {}
  for name, shape in bert_weight_shapes(config).items():
    if name.endswith("gamma"):
      weights[name] = np.ones(shape, np.float32)
    elif name.endswith(("bias", "beta")):
      weights[name] = np.zeros(shape, np.float32)
    else:
      weights[name] = rng.normal(0.0, 0.02, size=shape).astype(np.float32)
  return weights
