"""Embeds texts once with a frozen text encoder and caches the vectors as NumPy or TFRecord files."""

import hashlib
import json
import os
from collections.abc import Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from rank4class_data import progress_line
from rank4class_data.validation import atomic_output, atomic_paths
from rank4class_encoders import text_encoder as text_encoder_lib

EMBEDDING_FEATURE = "embedding"
LABEL_FEATURE = "label"
# Local handle directory -> (listing of (path, size, mtime), digest), so a handle is hashed once per process.
_HANDLE_DIGESTS: dict[str, tuple[tuple, str]] = {}


def handle_fingerprint(handle: str) -> str:
  """SHA-256 of every file under a local SavedModel directory; the handle itself for remote handles."""
  if not os.path.isdir(handle):
    return handle
  listing = []
  for root, _, files in sorted(os.walk(handle)):
    for name in sorted(files):
      path = os.path.join(root, name)
      stat = os.stat(path)
      listing.append((os.path.relpath(path, handle), stat.st_size, stat.st_mtime_ns))
  listing = tuple(listing)
  cached = _HANDLE_DIGESTS.get(os.path.abspath(handle))
  if cached is not None and cached[0] == listing:
    return cached[1]
  digest = hashlib.sha256()
  for relative_path, _, _ in listing:
    digest.update(relative_path.encode("utf-8") + b"\0")
    with open(os.path.join(handle, relative_path), "rb") as f:
      for block in iter(lambda: f.read(1 << 22), b""):
        digest.update(block)
  _HANDLE_DIGESTS[os.path.abspath(handle)] = (listing, digest.hexdigest())
  return digest.hexdigest()


def texts_fingerprint(texts: Sequence[str]) -> str:
  """SHA-256 of a list of texts (order matters; each text is length-prefixed, so no separator is ambiguous)."""
  digest = hashlib.sha256()
  for text in texts:
    data = text.encode("utf-8")
    digest.update(len(data).to_bytes(8, "little") + data)
  return digest.hexdigest()


def _weights_fingerprint(encoder: text_encoder_lib.TextEncoder) -> str:
  digest = hashlib.sha256()
  for weight in encoder.weights:
    digest.update(np.ascontiguousarray(weight.numpy()).tobytes())
  return digest.hexdigest()


def _encoder_config(encoder) -> text_encoder_lib.TextEncoderConfig:
  if isinstance(encoder, text_encoder_lib.TextEncoderConfig):
    return encoder
  if isinstance(encoder, text_encoder_lib.TextEncoder):
    config = encoder.get_config()
    return text_encoder_lib.TextEncoderConfig(
      preprocess_handle=config["preprocess_handle"],
      encoder_handle=config["encoder_handle"],
      trainable=config["trainable"],
      pooling=config["pooling"],
      max_seq_length=config["max_seq_length"],
      l2_normalize=config["l2_normalize"],
    )
  raise ValueError(f"`encoder` must be a TextEncoder or a TextEncoderConfig, got {type(encoder).__name__}.")


def embedding_cache_key(encoder, texts: Sequence[str]) -> str:
  """Key of the embeddings of `texts`: handle contents, texts, max_seq_length, pooling, normalization.

  A trainable (possibly fine-tuned) `TextEncoder` instance also contributes its current weights; a frozen
  one and its config give the same key.
  """
  config = _encoder_config(encoder)
  payload = {
    "preprocess": handle_fingerprint(config.preprocess_handle),
    "encoder": handle_fingerprint(config.encoder_handle),
    "max_seq_length": config.max_seq_length,
    "pooling": config.pooling,
    "l2_normalize": config.l2_normalize,
    "texts": texts_fingerprint(texts),
  }
  if isinstance(encoder, text_encoder_lib.TextEncoder) and encoder.trainable:
    payload["weights"] = _weights_fingerprint(encoder)
  return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()[:32]


def _embed_function(encoder: text_encoder_lib.TextEncoder):
  """A tf.function: strings [batch_size] -> embeddings, cutting the padding columns no row uses."""

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def embed(texts):
    inputs = encoder.preprocess(texts)
    # Padding keys get zero attention weight, so dropping columns that are padding in every row changes no
    # real token's vector; it saves the work on them.
    length = tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=1))
    inputs = {name: value[:, :length] for name, value in inputs.items()}
    return encoder.encode(inputs, training=False)

  return embed


# Seconds between progress lines on stderr (the first one after this long).
PROGRESS_SECONDS = progress_line.DEFAULT_EVERY_SECONDS


def compute_embeddings(
  encoder: text_encoder_lib.TextEncoder, texts: Sequence[str], batch_size: int = 64
) -> np.ndarray:
  """Runs `encoder` in inference mode over `texts` in batches of similar length.

  Returns:
    float32 [len(texts), encoder.output_dim], in the order of `texts`.
  """
  if batch_size <= 0:
    raise ValueError(f"`batch_size` must be positive, got {batch_size}.")
  texts = list(texts)
  embeddings = np.zeros([len(texts), encoder.output_dim], np.float32)
  if not texts:
    return embeddings
  embed = _embed_function(encoder)
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
        logging.info("Embedded %d/%d texts (%.1f texts/s, %.0f s left).", done, len(texts), rate, left)
      if show:
        progress.show(f"embedding texts: {done:,}/{len(texts):,} ({rate:,.0f} texts/s, {left:.0f} s left)")
  progress.close()
  return embeddings


def embed_texts(
  encoder,
  texts: Sequence[str],
  batch_size: int = 64,
  cache_dir: str | None = None,
  tfrecord_path: str | None = None,
  labels: np.ndarray | None = None,
) -> np.ndarray:
  """Embeds texts with a frozen encoder, reusing `<cache_dir>/embeddings-<key>.npy` when it exists.

  The frozen-encoder mode of training: embed a data set once, then train heads on the cached vectors in
  seconds. The cache file is written atomically (temporary file + rename) next to a JSON description.

  Args:
    encoder: a `TextEncoder`, or a `TextEncoderConfig` (the encoder is then only built on a cache miss).
    texts: the documents.
    batch_size: texts per forward pass.
    cache_dir: cache folder; None disables caching.
    tfrecord_path: if given, the embeddings (and `labels`) are also written there as `tf.train.Example`s.
    labels: optional int labels [len(texts)] for the TFRecord file.

  Returns:
    float32 [len(texts), hidden_size].
  """
  texts = list(texts)
  if any(not isinstance(text, str) for text in texts):
    bad = next(i for i, text in enumerate(texts) if not isinstance(text, str))
    raise ValueError(f"`texts` must be strings; row {bad} is {type(texts[bad]).__name__}.")
  cache_path = None
  embeddings = None
  if cache_dir is not None:
    cache_dir = os.path.expanduser(cache_dir)
    key = embedding_cache_key(encoder, texts)
    cache_path = os.path.join(cache_dir, f"embeddings-{key}.npy")
    if os.path.exists(cache_path):
      logging.info("Reusing cached embeddings %s.", cache_path)
      embeddings = np.load(cache_path)
  if embeddings is None:
    if isinstance(encoder, text_encoder_lib.TextEncoderConfig):
      encoder = text_encoder_lib.make_text_encoder(encoder)
    elif not isinstance(encoder, text_encoder_lib.TextEncoder):
      raise ValueError(
        f"`encoder` must be a TextEncoder or a TextEncoderConfig, got {type(encoder).__name__}."
      )
    embeddings = compute_embeddings(encoder, texts, batch_size)
    if cache_path is not None:
      os.makedirs(cache_dir, exist_ok=True)
      with atomic_output(cache_path, "wb") as f:
        np.save(f, embeddings)
      config = _encoder_config(encoder)
      description = {
        "preprocess_handle": config.preprocess_handle,
        "encoder_handle": config.encoder_handle,
        "max_seq_length": config.max_seq_length,
        "pooling": config.pooling,
        "l2_normalize": config.l2_normalize,
        "num_texts": len(texts),
        "dim": int(embeddings.shape[1]),
      }
      with atomic_output(cache_path[: -len(".npy")] + ".json") as f:
        json.dump(description, f, indent=2)
  if tfrecord_path is not None:
    write_embeddings_tfrecord(tfrecord_path, embeddings, labels)
  return embeddings


def write_embeddings_tfrecord(path: str, embeddings: np.ndarray, labels: np.ndarray | None = None) -> None:
  """Writes one `tf.train.Example` per row (`embedding` floats, optional `label` int64), atomically.

  Raises:
    ValueError: if `embeddings` is not 2-D or `labels` has another length.
  """
  embeddings = np.asarray(embeddings, np.float32)
  if embeddings.ndim != 2:
    raise ValueError(f"`embeddings` must be [num_texts, dim], got shape {embeddings.shape}.")
  if labels is not None:
    labels = np.asarray(labels)
    if labels.shape != (embeddings.shape[0],):
      raise ValueError(f"`labels` must have shape ({embeddings.shape[0]},), got {labels.shape}.")
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with atomic_paths(path) as (temporary,), tf.io.TFRecordWriter(temporary) as writer:
    for row, vector in enumerate(embeddings):
      feature = {EMBEDDING_FEATURE: tf.train.Feature(float_list=tf.train.FloatList(value=vector))}
      if labels is not None:
        feature[LABEL_FEATURE] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(labels[row])]))
      writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def embeddings_dataset(path: str, dim: int, with_labels: bool = False) -> tf.data.Dataset:
  """Parses a `write_embeddings_tfrecord` file into `embedding` [dim] (and `label` []) examples."""
  features = {EMBEDDING_FEATURE: tf.io.FixedLenFeature([dim], tf.float32)}
  if with_labels:
    features[LABEL_FEATURE] = tf.io.FixedLenFeature([], tf.int64)
  return tf.data.TFRecordDataset(path).map(lambda record: tf.io.parse_single_example(record, features))


def read_embeddings_tfrecord(
  path: str, dim: int, with_labels: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
  """Reads a whole `write_embeddings_tfrecord` file.

  Returns:
    embeddings float32 [n, dim], and labels int64 [n] if `with_labels` else None.
  """
  if not os.path.exists(path):
    raise FileNotFoundError(f"Embeddings file {path!r} does not exist.")
  batches = list(embeddings_dataset(path, dim, with_labels).batch(4096).as_numpy_iterator())
  if not batches:
    return np.zeros([0, dim], np.float32), (np.zeros([0], np.int64) if with_labels else None)
  embeddings = np.concatenate([batch[EMBEDDING_FEATURE] for batch in batches])
  labels = np.concatenate([batch[LABEL_FEATURE] for batch in batches]) if with_labels else None
  return embeddings, labels
