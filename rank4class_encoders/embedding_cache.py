"""Frozen text embeddings computed once per (encoder, text): a content-addressed on-disk store shared by every
caller (training, evaluation, predict, the studies).

The store is one SQLite file, `<cache_dir>/embeddings.sqlite3`: one row per text, keyed by
sha256(encoder identity, text), where the identity covers what changes a vector (the handles' file contents,
max_seq_length, pooling, normalization, and a trainable encoder's current weights). A list of texts is looked
up row by row, so a subset, a reordering, duplicates or another batching of texts seen before are all hits and
only the texts never seen are embedded. Each row carries a checksum of its key and vector: a row that does not
match it is a miss, never a vector; a file SQLite reports corrupt is removed and rebuilt. SQLite's
transactions (write-ahead log) keep the file whole when a process is killed and let several processes share
it.

Size cap: `DEFAULT_MAX_BYTES`, or `$RANK4CLASS_EMBEDDING_CACHE_MAX_BYTES` (bytes, or with a K/M/G suffix);
the least recently used rows go first. Clear it with `clear(cache_dir)` or
`rank4class-embedding-cache --clear` (`python -m rank4class_cli.binaries.embedding_cache_main --clear`).
"""

import dataclasses
import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from rank4class_data import progress_line
from rank4class_data.messages import say
from rank4class_data.validation import check_range
from rank4class_encoders import text_encoder as text_encoder_lib

_logger = logging.getLogger(__name__)

# The cache folder shared by every binary (rank4class and pairwise) unless a caller names another.
DEFAULT_CACHE_DIR = os.path.join("~", ".cache", "rank4class", "embeddings")
STORE_FILE = "embeddings.sqlite3"
# How long a connection waits for another one's lock (SQLite's busy timeout, and the retries of opening).
_CONNECT_TIMEOUT_SECONDS = 120
# Default size cap of the store file; the environment variable below overrides it.
DEFAULT_MAX_BYTES = 2 * 1024**3
MAX_BYTES_ENV = "RANK4CLASS_EMBEDDING_CACHE_MAX_BYTES"
# Evicting down to this share of the cap, so a full store does not evict again at every insert.
_EVICT_TO = 0.9
# A hit refreshes its last-use time only when it is older than this, so repeated reads write nothing.
_TOUCH_SECONDS = 3600
# Keys per SQL statement (under SQLite's oldest limit of 999 parameters).
_KEYS_PER_STATEMENT = 900
# Bumped whenever the table layout or the key changes: a store of another version is rebuilt.
_FORMAT_VERSION = 1
# Memory-mapped reads of the store file, up to this many bytes (SQLite clamps it to its build's limit).
_MMAP_BYTES = 1 << 31
# SQLite's primary result codes of a damaged file: SQLITE_CORRUPT, SQLITE_NOTADB.
_DAMAGED_CODES = (11, 26)
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


def parse_byte_size(value: str) -> int:
  """Bytes from "2147483648", "512M", "2G" or "64K" (binary multiples).

  Raises:
    ValueError: naming the value, if it is not a positive whole number with an optional K/M/G suffix.
  """
  match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)B?\s*", str(value), re.IGNORECASE)
  if match is None or int(match.group(1)) <= 0:
    raise ValueError("An embedding cache size must be a positive number of bytes (e.g. 2G, "
                     f"512M), got {value!r}.")
  return int(match.group(1)) * 1024 ** " KMG".index(match.group(2).upper() or " ")


def max_bytes_setting() -> int:
  """The store's size cap: `$RANK4CLASS_EMBEDDING_CACHE_MAX_BYTES` when set, else `DEFAULT_MAX_BYTES`."""
  value = os.environ.get(MAX_BYTES_ENV)
  if value is None or not value.strip():
    return DEFAULT_MAX_BYTES
  try:
    return parse_byte_size(value)
  except ValueError as e:
    raise ValueError(f"${MAX_BYTES_ENV}: {e}") from None


def _checksum(key: bytes, vector: bytes) -> int:
  return zlib.crc32(vector, zlib.crc32(key))


def _damaged(error: sqlite3.DatabaseError) -> bool:
  """Whether SQLite reports a damaged file (rather than, say, a lock held too long)."""
  code = getattr(error, "sqlite_errorcode", None)
  if code is not None:
    return code & 0xFF in _DAMAGED_CODES
  return type(error) is sqlite3.DatabaseError


class EmbeddingStore:
  """The on-disk (encoder, text) -> vector store of one cache folder; safe across threads and processes.

  Example:
    store = EmbeddingStore("~/.cache/rank4class/embeddings")
    keys = text_keys(encoder_identity(config), texts)
    found = store.lookup(keys)                      # {key: float32 [dim]} of the texts seen before
    store.insert(missing_keys, vectors, identity)   # float32 [len(missing_keys), dim]

  Args:
    cache_dir: the folder (created if missing; `~` is expanded).
    max_bytes: size cap of the store file; None for `max_bytes_setting()`.
    clock: seconds since the epoch (last-use times; tests pass their own).
  """

  def __init__(self, cache_dir: str, max_bytes: int | None = None, clock: Callable[[], float] = time.time):
    self.cache_dir = os.path.expanduser(cache_dir)
    self.path = os.path.join(self.cache_dir, STORE_FILE)
    self.max_bytes = max_bytes_setting() if max_bytes is None else max_bytes
    check_range("max_bytes", self.max_bytes, 0, low_inclusive=False)
    self._clock = clock
    self._lock = threading.Lock()
    self._connection: sqlite3.Connection | None = None
    self._pid = None

  # -- connection -------------------------------------------------------------------------------------------

  def _connect(self) -> sqlite3.Connection:
    if self._connection is not None and self._pid == os.getpid():
      return self._connection
    os.makedirs(self.cache_dir, exist_ok=True)
    # Two connections opening a new file at once: switching it to WAL can fail with "database is locked" at
    # once, without SQLite's busy wait; the opening is tried again (within the connection's timeout).
    deadline, pause = time.monotonic() + _CONNECT_TIMEOUT_SECONDS, 0.01
    while True:
      try:
        connection = self._open()
        break
      except sqlite3.OperationalError as e:
        if "locked" not in str(e) or time.monotonic() + pause > deadline:
          raise
        time.sleep(pause)
        pause = min(2 * pause, 1.0)
    self._connection, self._pid = connection, os.getpid()
    return connection

  def _open(self) -> sqlite3.Connection:
    """A new connection to the store file, its settings made and its tables created."""
    # Autocommit mode: every write below runs in an explicit BEGIN IMMEDIATE ... COMMIT.
    connection = sqlite3.connect(self.path, timeout=_CONNECT_TIMEOUT_SECONDS, isolation_level=None,
                                 check_same_thread=False)
    try:
      # Page size and vacuum mode only take effect on a new, empty file: 8 KiB pages hold five 384-d rows
      # where 4 KiB ones hold two; freed pages go back to the file system after an eviction.
      connection.execute("PRAGMA page_size = 8192")
      connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
      connection.execute("PRAGMA journal_mode = WAL")
      connection.execute("PRAGMA synchronous = NORMAL")  # WAL: a killed process loses no committed row.
      connection.execute("PRAGMA journal_size_limit = 67108864")  # The log shrinks back after a checkpoint.
      # Reading through a memory map rather than read() calls: lookups of random keys run about 3x faster.
      connection.execute(f"PRAGMA mmap_size = {_MMAP_BYTES}")
      version = connection.execute("PRAGMA user_version").fetchone()[0]
      if version not in (0, _FORMAT_VERSION):
        raise sqlite3.DatabaseError(f"format version {version}, expected {_FORMAT_VERSION}")
      connection.execute("BEGIN IMMEDIATE")
      connection.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL, "
                         "checksum INTEGER NOT NULL, used INTEGER NOT NULL)")
      connection.execute("CREATE INDEX IF NOT EXISTS vectors_by_use ON vectors (used)")
      connection.execute("CREATE TABLE IF NOT EXISTS encoders (identity TEXT PRIMARY KEY, description TEXT)")
      connection.execute(f"PRAGMA user_version = {_FORMAT_VERSION}")
      connection.execute("COMMIT")
    except BaseException:
      connection.close()
      raise
    return connection

  def _rebuild(self, error: Exception) -> None:
    """Removes a damaged store file (and its log) so the next use starts an empty one."""
    say(f"Embedding cache {self.path} is damaged ({error}); removing it and starting an empty one.")
    if self._connection is not None:
      self._connection.close()
    self._connection = None
    for suffix in ("", "-wal", "-shm", "-journal"):
      try:
        os.remove(self.path + suffix)
      except FileNotFoundError:
        pass

  def _run(self, operation: Callable[[sqlite3.Connection], object]):
    """`operation(connection)` under the lock; a damaged file is rebuilt and the operation run once more."""
    with self._lock:
      for attempt in (0, 1):
        connection = None
        try:
          connection = self._connect()
          return operation(connection)
        except sqlite3.DatabaseError as e:
          if connection is not None and connection.in_transaction:
            try:
              connection.execute("ROLLBACK")
            except sqlite3.Error:
              pass
          if attempt or not _damaged(e):
            raise
          self._rebuild(e)

  def close(self) -> None:
    with self._lock:
      if self._connection is not None and self._pid == os.getpid():
        self._connection.close()
      self._connection = None

  # -- rows --------------------------------------------------------------------------------------------------

  def lookup(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
    """The stored vectors of `keys` (float32 [dim] each; keys never stored, or whose row fails its checksum,
    are absent). Refreshes the last-use time of the hits."""
    found, vectors = self.lookup_matrix(keys)
    return {key: vectors[row] for row, key in enumerate(keys) if found[row]}

  def lookup_matrix(self, keys: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """`lookup` of distinct `keys` as arrays: (found bool [len(keys)], float32 [len(keys), dim] with zero rows
    where not found; dim is 0 when nothing is found).

    Raises:
      ValueError: if the vectors found have several sizes (keys of several encoders of different widths).
    """
    position = {key: row for row, key in enumerate(keys)}

    def read(connection: sqlite3.Connection) -> tuple[np.ndarray, np.ndarray]:
      rows, blobs, stale, bad = [], [], [], []
      now = int(self._clock())
      for start in range(0, len(keys), _KEYS_PER_STATEMENT):
        chunk = keys[start : start + _KEYS_PER_STATEMENT]
        cursor = connection.execute(
          f"SELECT key, vector, checksum, used FROM vectors WHERE key IN ({','.join('?' * len(chunk))})",
          chunk)
        for key, vector, checksum, used in cursor:
          if len(vector) % 4 or _checksum(key, vector) != checksum:
            bad.append(key)  # A damaged row is a miss, never numbers.
            continue
          rows.append(position[key])
          blobs.append(vector)
          if used < now - _TOUCH_SECONDS:
            stale.append(key)
      if bad:
        say(f"Embedding cache {self.path}: {len(bad)} rows fail their checksum; embedding those texts "
            "again.")
      if stale or bad:
        connection.execute("BEGIN IMMEDIATE")
        connection.executemany("UPDATE vectors SET used = ? WHERE key = ?", [(now, key) for key in stale])
        connection.executemany("DELETE FROM vectors WHERE key = ?", [(key,) for key in bad])
        connection.execute("COMMIT")
      return rows, blobs

    rows, blobs = self._run(read)
    found = np.zeros([len(keys)], bool)
    if not blobs:
      return found, np.zeros([len(keys), 0], np.float32)
    sizes = {len(blob) for blob in blobs}
    if len(sizes) > 1:
      raise ValueError(f"Embedding cache {self.path}: the vectors asked for have several sizes "
                       f"{sorted(size // 4 for size in sizes)}; clear the cache "
                       "(rank4class-embedding-cache --clear).")
    vectors = np.zeros([len(keys), sizes.pop() // 4], np.float32)
    vectors[rows] = np.frombuffer(b"".join(blobs), np.float32).reshape(len(blobs), -1)
    found[rows] = True
    return found, vectors

  def insert(self, keys: Sequence[bytes], vectors: np.ndarray, identity: str | None = None,
             description: dict | None = None) -> None:
    """Stores float32 `vectors` [len(keys), dim] under `keys` in one transaction, then evicts the least
    recently used rows while the file is over the cap. `identity` / `description` name the encoder (shown by
    `rank4class-embedding-cache`)."""
    vectors = np.ascontiguousarray(vectors, np.float32)
    if vectors.ndim != 2 or len(vectors) != len(keys):
      raise ValueError(f"`vectors` must be [{len(keys)}, dim], got shape {vectors.shape}.")

    def write(connection: sqlite3.Connection) -> None:
      now = int(self._clock())
      rows = []
      for key, vector in zip(keys, vectors, strict=True):
        data = vector.tobytes()
        rows.append((key, data, _checksum(key, data), now))
      connection.execute("BEGIN IMMEDIATE")
      connection.executemany("INSERT OR REPLACE INTO vectors (key, vector, checksum, used) "
                             "VALUES (?, ?, ?, ?)",
                             rows)
      if identity is not None:
        connection.execute("INSERT OR IGNORE INTO encoders (identity, description) VALUES (?, ?)",
                           (identity, json.dumps(description or {}, sort_keys=True)))
      connection.execute("COMMIT")
      self._evict(connection)

    self._run(write)

  @staticmethod
  def _used_bytes(connection: sqlite3.Connection) -> int:
    page_size = connection.execute("PRAGMA page_size").fetchone()[0]
    pages = connection.execute("PRAGMA page_count").fetchone()[0]
    free = connection.execute("PRAGMA freelist_count").fetchone()[0]
    return (pages - free) * page_size

  def _evict(self, connection: sqlite3.Connection) -> None:
    """While the file is over the cap: drops the least recently used rows (down to _EVICT_TO of the cap by
    bytes per row), then gives freed pages back, compacting the file when the rows freed were spread over
    pages still in use."""
    for _ in range(4):
      used = self._used_bytes(connection)
      if used <= self.max_bytes:
        return
      connection.execute("BEGIN IMMEDIATE")
      count = connection.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
      drop = max(1, min(count, int(np.ceil(count * (1 - _EVICT_TO * self.max_bytes / used)))))
      connection.execute("DELETE FROM vectors WHERE key IN (SELECT key FROM vectors ORDER BY "
                         "used, rowid LIMIT ?)",
                         (drop,))
      connection.execute("COMMIT")
      _logger.info("Embedding cache %s: over its cap of %d bytes; evicted the %d least recently used rows.",
                   self.path, self.max_bytes, drop)
      connection.execute("PRAGMA incremental_vacuum").fetchall()
      if count > drop and self._used_bytes(connection) > self.max_bytes:
        try:
          connection.execute("VACUUM")
        except sqlite3.OperationalError as e:  # Another process holds the file; the next insert tries again.
          _logger.info("Embedding cache %s: not compacted now (%s).", self.path, e)
          return

  def vectors_of_size(self, dim: int, limit: int) -> np.ndarray:
    """Up to `limit` stored vectors of `dim` floats that pass their checksum, float32 [n, dim] (real
    embeddings for benchmarks)."""

    def read(connection: sqlite3.Connection) -> np.ndarray:
      rows = connection.execute("SELECT key, vector, checksum FROM vectors WHERE length(vector) = ? LIMIT ?",
                                (4 * dim, limit))
      vectors = [np.frombuffer(vector, np.float32) for key, vector, checksum in rows
                 if _checksum(key, vector) == checksum]
      return np.stack(vectors) if vectors else np.zeros([0, dim], np.float32)

    return self._run(read)

  def stats(self) -> dict[str, object]:
    """The store's path, rows, bytes in use, cap and encoders (identity -> description)."""

    def read(connection: sqlite3.Connection) -> dict[str, object]:
      encoders = {identity: json.loads(description)
                  for identity, description in connection.execute("SELECT identity, "
                                                                  "description FROM encoders")}
      return {"path": self.path, "rows": connection.execute("SELECT COUNT(*) FROM vectors").fetchone()[0],
              "bytes": self._used_bytes(connection), "max_bytes": self.max_bytes, "encoders": encoders}

    return self._run(read)

  def clear(self) -> None:
    """Deletes every row (other processes then see an empty store) and gives the space back."""

    def delete(connection: sqlite3.Connection) -> None:
      connection.execute("BEGIN IMMEDIATE")
      connection.execute("DELETE FROM vectors")
      connection.execute("DELETE FROM encoders")
      connection.execute("COMMIT")
      connection.execute("PRAGMA incremental_vacuum").fetchall()
      connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    self._run(delete)


# Folder -> store, one per process, so a process opens each store file once.
_STORES: dict[str, EmbeddingStore] = {}
_STORES_LOCK = threading.Lock()


def open_store(cache_dir: str | None = None) -> EmbeddingStore:
  """The process's store of `cache_dir` (None: `DEFAULT_CACHE_DIR`), with the cap `max_bytes_setting()`
  gives."""
  path = os.path.abspath(os.path.expanduser(cache_dir or DEFAULT_CACHE_DIR))
  with _STORES_LOCK:
    store = _STORES.get(path)
    max_bytes = max_bytes_setting()
    if store is None or store.max_bytes != max_bytes:
      store = _STORES[path] = EmbeddingStore(path, max_bytes)
    return store


# Files of the per-list cache that came before the store (`embeddings-<key>.npy` and `.json`); `clear` removes
# them.
_LEGACY_FILE = re.compile(r"embeddings-[0-9a-f]{32}\.(npy|json)")


def clear(cache_dir: str | None = None) -> int:
  """Empties the embedding cache of `cache_dir` (None: `DEFAULT_CACHE_DIR`), older per-list files included.

  Returns:
    The number of rows (texts) and legacy files removed.
  """
  directory = os.path.expanduser(cache_dir or DEFAULT_CACHE_DIR)
  if not os.path.isdir(directory):
    return 0
  removed = 0
  for name in os.listdir(directory):
    if _LEGACY_FILE.fullmatch(name):
      os.remove(os.path.join(directory, name))
      removed += 1
  if os.path.exists(os.path.join(directory, STORE_FILE)):
    store = open_store(directory)
    removed += store.stats()["rows"]
    store.clear()
  return removed


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
