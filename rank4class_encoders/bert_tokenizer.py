"""BERT word-piece tokenization in the graph, as Hugging Face's tokenizers do it, and the TF Hub
preprocessor."""

import dataclasses
import json
import os
from collections.abc import Sequence

import tensorflow as tf
import tensorflow_text as text
from tensorflow_text.python.ops import bert_tokenizer as tf_text_bert_tokenizer

# Hugging Face's WordPiece maps a word longer than this many characters to the unknown token.
MAX_CHARS_PER_WORD = 100


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


def special_token_ids(vocab: list[str], settings: TokenizerSettings, vocab_path: str) -> dict[str, int]:
  """Ids of `settings`' special tokens in `vocab` (field name -> id; `mask_token` only when present).

  Raises:
    ValueError: naming `vocab_path` if a required special token is missing or a word piece is repeated.
  """
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


def build_preprocess_module(
  vocab_path: str, settings: TokenizerSettings, default_seq_length: int
) -> tf.train.Checkpoint:
  """The TF Hub BERT preprocessing object: `__call__`, `tokenize`, `bert_pack_inputs`."""
  vocab = read_vocab(vocab_path)
  ids = special_token_ids(vocab, settings, vocab_path)
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
