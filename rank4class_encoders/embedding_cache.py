"""Frozen text embeddings computed once per (encoder, text): a content-addressed on-disk store shared by every
caller (training, evaluation, predict, the studies).

The store (`rank4class_encoders.embedding_store`, one SQLite file in the cache folder) holds one row per text,
keyed by sha256(encoder identity, text), where the identity covers what changes a vector (the handles' file
contents, max_seq_length, pooling, normalization, and a trainable encoder's current weights). A list of texts
is looked up row by row, so a subset, a reordering, duplicates or another batching of texts seen before are
all hits and only the texts never seen are embedded. A store that cannot be written is skipped with one line,
and the texts are embedded without it.

Clear it with `clear(cache_dir)` or `rank4class-embedding-cache --clear`
(`python -m rank4class_cli.binaries.embedding_cache_main --clear`).
"""

import dataclasses
import hashlib
import json
import logging
import os
import weakref
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from rank4class_data import progress_line
from rank4class_data.validation import check_range
from rank4class_encoders import text_encoder as text_encoder_lib

# The store's names, long importable from here.
from rank4class_encoders.embedding_store import (  # noqa: F401
  DEFAULT_CACHE_DIR,
  DEFAULT_MAX_BYTES,
  MAX_BYTES_ENV,
  STORE_FILE,
  EmbeddingStore,
  clear,
  max_bytes_setting,
  open_store,
  parse_byte_size,
)

_logger = logging.getLogger(__name__)

# Local handle directory -> (its folders' mtimes, its files' (path, size, mtime), digest): a handle is hashed
# once per process, and later calls check it with stat calls alone.
_HANDLE_DIGESTS: dict[str, tuple[tuple, tuple, str]] = {}


def _unchanged(handle: str, folders: tuple, listing: tuple) -> bool:
  """Whether no file under `handle` was added, removed, renamed or written since `folders` and `listing`."""
  try:
    for relative_path, mtime in folders:
      if os.stat(os.path.join(handle, relative_path)).st_mtime_ns != mtime:
        return False
    for relative_path, size, mtime in listing:
      stat = os.stat(os.path.join(handle, relative_path))
      if (stat.st_size, stat.st_mtime_ns) != (size, mtime):
        return False
  except OSError:
    return False
  return True


def handle_fingerprint(handle: str) -> str:
  """SHA-256 of every file under a local SavedModel directory; the handle itself for remote handles."""
  if not os.path.isdir(handle):
    return handle
  cached = _HANDLE_DIGESTS.get(os.path.abspath(handle))
  if cached is not None and _unchanged(handle, cached[0], cached[1]):
    return cached[2]
  folders, listing = [], []
  for root, _, files in sorted(os.walk(handle)):
    folders.append((os.path.relpath(root, handle), os.stat(root).st_mtime_ns))
    for name in sorted(files):
      path = os.path.join(root, name)
      stat = os.stat(path)
      listing.append((os.path.relpath(path, handle), stat.st_size, stat.st_mtime_ns))
  folders, listing = tuple(folders), tuple(listing)
  if cached is not None and cached[1] == listing:
    digest = cached[2]
  else:
    hasher = hashlib.sha256()
    for relative_path, _, _ in listing:
      hasher.update(relative_path.encode("utf-8") + b"\0")
      with open(os.path.join(handle, relative_path), "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
          hasher.update(block)
    digest = hasher.hexdigest()
  _HANDLE_DIGESTS[os.path.abspath(handle)] = (folders, listing, digest)
  return digest


def _weights_fingerprint(encoder: text_encoder_lib.TextEncoder) -> str:
  digest = hashlib.sha256()
  for weight in encoder.weights:
    digest.update(np.ascontiguousarray(weight.numpy()).tobytes())
  return digest.hexdigest()


def _encoder_config(encoder) -> text_encoder_lib.TextEncoderConfig:
  if isinstance(encoder, text_encoder_lib.TextEncoderConfig):
    return encoder
  if isinstance(encoder, text_encoder_lib.TextEncoder):
    return encoder.text_encoder_config
  raise ValueError(f"`encoder` must be a TextEncoder or a TextEncoderConfig, got {type(encoder).__name__}.")


def _identity_payload(encoder) -> dict[str, object]:
  config = _encoder_config(encoder)
  payload = {
    "preprocess": handle_fingerprint(config.preprocess_handle),
    "encoder": handle_fingerprint(config.encoder_handle),
    "max_seq_length": config.max_seq_length,
    "pooling": config.pooling,
    "l2_normalize": config.l2_normalize,
  }
  # bfloat16 vectors are other vectors (cosine >= 0.9999 to float32); float32 keeps the identity it always
  # had. The bfloat16 identity names the padding multiple its vectors were computed at (`LENGTH_MULTIPLE`):
  # vectors cut to any length before it are not the model graph's.
  precision = text_encoder_lib.resolve_precision(config.precision, config.trainable, config.encoder_handle)
  if precision == text_encoder_lib.BFLOAT16:
    payload["precision"] = text_encoder_lib.BFLOAT16
    payload["length_multiple"] = LENGTH_MULTIPLE
  if isinstance(encoder, text_encoder_lib.TextEncoder) and encoder.trainable:
    payload["weights"] = _weights_fingerprint(encoder)
  return payload


def encoder_identity(encoder) -> str:
  """What makes an encoder's vectors what they are, as a hex digest: handle contents, max_seq_length, pooling,
  normalization, a bfloat16 precision; a trainable (possibly fine-tuned) `TextEncoder` instance also
  contributes its current weights, while a frozen one and its config have the same identity."""
  return hashlib.sha256(json.dumps(_identity_payload(encoder), sort_keys=True).encode("utf-8")).hexdigest()


def text_keys(identity: str, texts: Sequence[str]) -> list[bytes]:
  """The store keys of `texts` under an `encoder_identity`: sha256(identity, NUL, UTF-8 text), 32 bytes
  each."""
  prefix = identity.encode("ascii") + b"\0"
  return [hashlib.sha256(prefix + text.encode("utf-8")).digest() for text in texts]


# The padding columns `compute_embeddings` cuts are cut down to a multiple of this many tokens (the
# longest text's length rounded up). bfloat16 products are rounded by the kernel the shapes select: cut to any
# length, a text's vector moved by up to 3e-3 against the same text in the model's graph (all `max_seq_length`
# columns); at multiples of 16 it is the same to the bit on both stacks (MiniLM, AVX512-BF16; multiples of 8
# sufficed on TF 2.15 only). `ModelGraphVectorsTest` checks it on the machine that runs the tests.
LENGTH_MULTIPLE = 16


def _embed_function(encoder: text_encoder_lib.TextEncoder):
  """A tf.function: strings [batch_size] -> embeddings, cutting the padding columns no row uses (down to a
  multiple of `LENGTH_MULTIPLE`)."""

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def embed(texts):
    inputs = encoder.preprocess(texts)
    # Padding keys get zero attention weight, so dropping columns that are padding in every row changes no
    # real token's vector; it saves the work on them.
    longest = tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=1))
    width = tf.shape(inputs["input_mask"])[1]
    length = tf.minimum((longest + LENGTH_MULTIPLE - 1) // LENGTH_MULTIPLE * LENGTH_MULTIPLE, width)
    inputs = {name: value[:, :length] for name, value in inputs.items()}
    return encoder.encode(inputs, training=False)

  return embed


# Seconds between progress lines on stderr (the first one after this long).
PROGRESS_SECONDS = progress_line.DEFAULT_EVERY_SECONDS
# Texts run through an encoder by `compute_embeddings` in this process (the cache's misses among them): the
# binaries' "Embedded" lines say how many of their texts were computed rather than read from the cache.
_computed_texts = 0


def computed_texts() -> int:
  """Texts run through an encoder by `compute_embeddings` in this process so far."""
  return _computed_texts


def source_note(texts: int, computed: int) -> str:
  """Where `texts` embeddings came from, `computed` of them run through the encoder: "all read from the
  embedding cache", "all computed" or "<computed> computed, <rest> read from the embedding cache"."""
  if computed <= 0:
    return "all read from the embedding cache"
  if computed >= texts:
    return "all computed"
  return f"{computed:,} computed, {texts - computed:,} read from the embedding cache"


def compute_embeddings(
  encoder: text_encoder_lib.TextEncoder, texts: Sequence[str], batch_size: int = 64
) -> np.ndarray:
  """Runs `encoder` in inference mode over `texts` in batches of similar length.

  Returns:
    float32 [len(texts), encoder.output_dim], in the order of `texts`.
  """
  check_range("batch_size", batch_size, 1, integer=True)
  texts = list(texts)
  embeddings = np.zeros([len(texts), encoder.output_dim], np.float32)
  if not texts:
    return embeddings
  embed = _EMBED_FUNCTIONS.get(encoder)
  if embed is None:
    embed = _EMBED_FUNCTIONS[encoder] = _embed_function(encoder)
  # Batching texts of similar length lets each batch drop more padding.
  order = np.argsort([-len(text) for text in texts], kind="stable")
  num_batches = (len(texts) + batch_size - 1) // batch_size
  log_every = max(1, num_batches // 10)
  progress = progress_line.ProgressLine(PROGRESS_SECONDS)
  for batch in range(num_batches):
    indices = order[batch * batch_size : (batch + 1) * batch_size]
    embeddings[indices] = embed(tf.constant([texts[i] for i in indices])).numpy()
    last = batch + 1 == num_batches
    log = (batch + 1) % log_every == 0 or last
    # A progress line on the terminal once embedding takes a while (silent for short runs and tests).
    show = progress.due() or (progress.visible and last)
    if log or show:
      done = min((batch + 1) * batch_size, len(texts))
      elapsed = progress.elapsed
      rate, left = done / elapsed, elapsed / done * (len(texts) - done)
      if log:
        _logger.info("Embedded %d/%d texts (%.1f texts/s, %.0f s left).", done, len(texts), rate, left)
      if show:
        progress.show(f"embedding texts: {done:,}/{len(texts):,} ({rate:,.0f} texts/s, {left:.0f} s left)")
  progress.close()
  global _computed_texts
  _computed_texts += len(texts)
  return embeddings


# Encoder -> its embedding function, so calls on later batches reuse the traced graph.
_EMBED_FUNCTIONS: "weakref.WeakKeyDictionary[text_encoder_lib.TextEncoder, Callable]" = (
  weakref.WeakKeyDictionary()
)
# Encoder identity -> the encoder built from a config, so a caller embedding batch by batch (predict on new
# texts) loads the SavedModels once; the identity covers the handles' files, so changed files build anew.
_BUILT: dict[str, text_encoder_lib.TextEncoder] = {}
_MAX_BUILT = 2


def _built_encoder(encoder, identity: str | None = None) -> text_encoder_lib.TextEncoder:
  if isinstance(encoder, text_encoder_lib.TextEncoderConfig):
    identity = identity or encoder_identity(encoder)
    if identity not in _BUILT:
      while len(_BUILT) >= _MAX_BUILT:
        _BUILT.pop(next(iter(_BUILT)))
      _BUILT[identity] = text_encoder_lib.make_text_encoder(encoder)
    return _BUILT[identity]
  if isinstance(encoder, text_encoder_lib.TextEncoder):
    return encoder
  raise ValueError(f"`encoder` must be a TextEncoder or a TextEncoderConfig, got {type(encoder).__name__}.")


def _description(encoder) -> dict[str, object]:
  return dataclasses.asdict(_encoder_config(encoder))


def embed_texts(
  encoder,
  texts: Sequence[str],
  batch_size: int = 64,
  cache_dir: str | None = None,
) -> np.ndarray:
  """Embeds texts with a frozen encoder, each text at most once per cache: texts the store holds are read,
  only the others (each distinct one once) run through the encoder and are stored.

  The frozen-encoder mode of training: embed a data set once, then train heads on the cached vectors in
  seconds; evaluation, prediction and the studies then read the same rows.

  Args:
    encoder: a `TextEncoder`, or a `TextEncoderConfig` (the encoder is then only built when a text is
      missing).
    texts: the documents.
    batch_size: texts per forward pass.
    cache_dir: the store's folder (`EmbeddingStore`); None disables caching.

  Returns:
    float32 [len(texts), hidden_size].
  """
  texts = list(texts)
  if any(not isinstance(text, str) for text in texts):
    bad = next(i for i, text in enumerate(texts) if not isinstance(text, str))
    raise ValueError(f"`texts` must be strings; row {bad} is {type(texts[bad]).__name__}.")
  check_range("batch_size", batch_size, 1, integer=True)
  if cache_dir is None:
    embeddings = compute_embeddings(_built_encoder(encoder), texts, batch_size)
  else:
    embeddings = _embed_through_store(encoder, texts, batch_size, open_store(cache_dir))
  return embeddings


def _embed_through_store(encoder, texts: list[str], batch_size: int, store: EmbeddingStore) -> np.ndarray:
  identity = encoder_identity(encoder)
  keys = text_keys(identity, texts)
  row_of = {}  # Distinct key -> its row in `vectors`.
  rows = [row_of.setdefault(key, len(row_of)) for key in keys]
  distinct = list(row_of)
  found, vectors = store.lookup_matrix(distinct)
  missing = np.flatnonzero(~found)
  if len(missing):
    text_of = dict(zip(keys, texts, strict=True))
    _logger.info("Embedding cache %s: %d of %d distinct texts cached; embedding %d.", store.path,
                 len(distinct) - len(missing), len(distinct), len(missing))
    computed = compute_embeddings(_built_encoder(encoder, identity), [text_of[distinct[i]] for i in missing],
                                  batch_size)
    store.insert([distinct[i] for i in missing], computed, identity, _description(encoder))
    if vectors.shape[1] != computed.shape[1]:
      if found.any():
        raise ValueError(f"Embedding cache {store.path}: stored vectors have {vectors.shape[1]} floats, the "
                         f"encoder gives {computed.shape[1]}; clear the cache "
                         "(rank4class-embedding-cache --clear).")
      vectors = np.zeros([len(distinct), computed.shape[1]], np.float32)
    vectors[missing] = computed
  elif not distinct:
    return np.zeros([0, _built_encoder(encoder).output_dim], np.float32)
  return vectors[rows]
