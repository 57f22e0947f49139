"""The embedding cache's store: one SQLite file of (encoder identity, text) -> vector rows, shared by every
process on the machine (`rank4class_encoders.embedding_cache` computes what it lacks).

The store is one SQLite file, `<cache_dir>/embeddings.sqlite3`: one row per text, keyed by
sha256(encoder identity, text) (`embedding_cache.text_keys`). Each row carries a checksum of its key and
vector: a row that does not match it is a miss, never a vector; a file SQLite reports corrupt is removed and
rebuilt. SQLite's transactions (write-ahead log) keep the file whole when a process is killed and let several
processes share it. A store the file system will not write (a full disk, the file-size limit, a quota, a
read-only or forbidden folder) is skipped with one line: lookups miss and inserts store nothing, so the run
goes on without it.

Size cap: `DEFAULT_MAX_BYTES`, or `$RANK4CLASS_EMBEDDING_CACHE_MAX_BYTES` (bytes, or with a K/M/G suffix);
the least recently used rows go first. Clear it with `clear(cache_dir)` or
`rank4class-embedding-cache --clear` (`python -m rank4class_cli.binaries.embedding_cache_main --clear`).
"""

import json
import logging
import os
import re
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from rank4class_data import write_failures
from rank4class_data.messages import say
from rank4class_data.validation import check_range

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
    self._skipped = False  # The file system refused a write: lookups miss, inserts store nothing.

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

  def _run_or_skip(self, operation: Callable[[sqlite3.Connection], object], skipped: object):
    """`_run(operation)`, or `skipped` once the file system refused a write to the store (a full disk, the
    file-size limit, a quota, a read-only or forbidden folder; said once): the run goes on without it."""
    if self._skipped:
      return skipped
    try:
      return self._run(operation)
    except (OSError, sqlite3.Error) as e:
      failure = write_failures.find(e, self.path)
      if failure is None:
        raise
      self._skipped = True
      write_failures.skip_cache("Embedding cache", self.path, failure, "embedding texts without it")
      return skipped

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
    where not found; dim is 0 when nothing is found). A store that cannot be written (`_run_or_skip`) finds
    nothing.

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
      return rows, blobs, stale, bad

    def touch(connection: sqlite3.Connection) -> None:
      connection.execute("BEGIN IMMEDIATE")
      connection.executemany("UPDATE vectors SET used = ? WHERE key = ?",
                             [(int(self._clock()), key) for key in stale])
      connection.executemany("DELETE FROM vectors WHERE key = ?", [(key,) for key in bad])
      connection.execute("COMMIT")

    rows, blobs, stale, bad = self._run_or_skip(read, ([], [], [], []))
    if stale or bad:
      self._run_or_skip(touch, None)  # The hits stand even where the store cannot be written.
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
    `rank4class-embedding-cache`). Stores nothing where the file system refuses (`_run_or_skip`)."""
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

    self._run_or_skip(write, None)

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
