"""Tests for rank4class_encoders.embedding_cache: equal to the encoder, one row per (encoder, text), damage
and kills detected, the cap, clearing, TFRecords, frozen heads."""

import io
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_data import datasets
from rank4class_encoders import bert_conversion, embedding_cache, text_encoder
from tests.rank4class_encoders.tiny_bert import tiny_handles

TEXTS = [
  "the cat sat on the mat .",
  "a dog",
  "the dogs ran in a park !",
  "sad",
  "the cat is happy",
  "a dog is sad",
  "cats",
]


def tiny_config(**kwargs) -> text_encoder.TextEncoderConfig:
  handles = tiny_handles()
  return text_encoder.TextEncoderConfig(
    handles.preprocess, handles.encoder, **{"max_seq_length": 16, **kwargs}
  )


class EmbedTextsTest(tf.test.TestCase):
  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.encoder = text_encoder.make_text_encoder(tiny_config())

  def test_equals_the_encoder_in_input_order(self):
    # Batches of 3 regroup the texts by length and drop padding columns; the vectors must not change.
    got = embedding_cache.embed_texts(self.encoder, TEXTS, batch_size=3)
    self.assertEqual(got.shape, (len(TEXTS), 16))
    self.assertAllClose(got, self.encoder(tf.constant(TEXTS)), atol=1e-5)

  def test_long_runs_show_a_progress_line_and_short_ones_stay_silent(self):
    # Shorter than PROGRESS_SECONDS (an hour here, so a loaded machine's first trace does not count as long).
    with mock.patch.object(embedding_cache, "PROGRESS_SECONDS", 3600.0), \
        mock.patch("sys.stderr", new_callable=io.StringIO) as stderr:
      embedding_cache.compute_embeddings(self.encoder, TEXTS, batch_size=3)
    self.assertEqual(stderr.getvalue(), "")
    with mock.patch.object(embedding_cache, "PROGRESS_SECONDS", 0.0), \
        mock.patch("sys.stderr", new_callable=io.StringIO) as stderr:
      embedding_cache.compute_embeddings(self.encoder, TEXTS, batch_size=3)
    # Not a terminal: one whole line per update (progress_line).
    lines = stderr.getvalue().splitlines(keepends=True)
    self.assertEqual([line.split(" (")[0] for line in lines],
                     ["embedding texts: 3/7", "embedding texts: 6/7", "embedding texts: 7/7"])
    self.assertRegex(lines[-1], r"^embedding texts: 7/7 \([\d,]+ texts/s, 0 s left\)\n$")

  def test_cache_hit_skips_building_and_running_the_encoder(self):
    cache = self.create_tempdir().full_path
    first = embedding_cache.embed_texts(tiny_config(), TEXTS, cache_dir=cache)
    with (
      mock.patch.object(text_encoder, "make_text_encoder", side_effect=AssertionError("built")),
      mock.patch.object(embedding_cache, "compute_embeddings", side_effect=AssertionError("ran")),
    ):
      second = embedding_cache.embed_texts(tiny_config(), TEXTS, cache_dir=cache)
    self.assertAllEqual(first, second)
    # Only the store (and SQLite's write-ahead log): no temporary files are left behind.
    self.assertIn(embedding_cache.STORE_FILE, os.listdir(cache))
    self.assertContainsSubset(os.listdir(cache),
                              [embedding_cache.STORE_FILE, embedding_cache.STORE_FILE + "-wal",
                                                  embedding_cache.STORE_FILE + "-shm"])

  def test_identity_depends_on_length_pooling_and_weights(self):
    identity = embedding_cache.encoder_identity(tiny_config())
    self.assertEqual(embedding_cache.encoder_identity(self.encoder), identity)  # Frozen instance = config.
    self.assertNotEqual(embedding_cache.encoder_identity(tiny_config(max_seq_length=8)), identity)
    self.assertNotEqual(embedding_cache.encoder_identity(tiny_config(pooling="cls")), identity)
    tuned = text_encoder.make_text_encoder(tiny_config(trainable=True))
    tuned_identity = embedding_cache.encoder_identity(tuned)
    tuned.trainable_weights[0].assign_add(tf.ones_like(tuned.trainable_weights[0]))
    self.assertNotEqual(embedding_cache.encoder_identity(tuned), tuned_identity)

  def test_bfloat16_vectors_have_their_own_identity_and_float32_keeps_its_own(self):
    identity = embedding_cache.encoder_identity(tiny_config())
    self.assertEqual(embedding_cache.encoder_identity(tiny_config(precision="float32")), identity)
    half = tiny_config(precision="bfloat16")
    self.assertNotEqual(embedding_cache.encoder_identity(half), identity)
    self.assertEqual(embedding_cache.encoder_identity(text_encoder.make_text_encoder(half)),
                     embedding_cache.encoder_identity(half))
    with mock.patch.object(text_encoder, "cpu_has_bfloat16", return_value=False):
      self.assertEqual(embedding_cache.encoder_identity(tiny_config(precision="auto")), identity)
    cache = self.create_tempdir().full_path
    vectors = embedding_cache.embed_texts(half, TEXTS, cache_dir=cache)
    direct = embedding_cache.compute_embeddings(text_encoder.make_text_encoder(half), TEXTS)
    self.assertAllEqual(vectors, direct)  # The cache holds the bfloat16 path's vectors.

  def test_empty_text_list_gives_empty_matrix(self):
    self.assertEqual(embedding_cache.embed_texts(self.encoder, []).shape, (0, 16))

  def test_bad_inputs_raise(self):
    with self.assertRaisesRegex(ValueError, "row 1 is int"):
      embedding_cache.embed_texts(self.encoder, ["a", 3])
    with self.assertRaisesRegex(ValueError, "must be a TextEncoder or a TextEncoderConfig, got str"):
      embedding_cache.embed_texts("encoder", ["a"])
    with self.assertRaisesRegex(ValueError, "`batch_size` must be an integer >= 1, got 0"):
      embedding_cache.embed_texts(self.encoder, ["a"], batch_size=0)

  def test_frozen_head_trains_on_cached_embeddings(self):
    tf.keras.utils.set_random_seed(0)  # Head init and fit's shuffling, whatever ran before.
    rng = np.random.default_rng(0)
    animals = rng.integers(0, 2, size=64)
    moods = rng.choice(["happy", "sad"], size=64)
    texts = [
      f"the {'dog' if animal else 'cat'} is {mood}" for animal, mood in zip(animals, moods, strict=True)
    ]
    embeddings = embedding_cache.embed_texts(tiny_config(), texts, cache_dir=self.create_tempdir().full_path)
    head = tf.keras.Sequential([tf.keras.layers.Dense(2)])
    head.compile(
      tf.keras.optimizers.Adam(0.1),
      tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=["accuracy"],
    )
    history = head.fit(embeddings / embeddings.std(), animals, epochs=30, batch_size=64, verbose=0)
    majority = max(animals.mean(), 1 - animals.mean())
    self.assertGreater(history.history["accuracy"][-1], majority + 0.2)


class ModelGraphVectorsTest(tf.test.TestCase, parameterized.TestCase):
  """The cache's vectors are the model graph's: `compute_embeddings` (each batch cut to its longest text,
  rounded up to `LENGTH_MULTIPLE`) gives a text the vector a graph call of the encoder (every column, as
  training, the exports and predict run it) gives it, alone or in any batch; so does an eager call."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.handles = bert_conversion.cached_conversion(bert_conversion.minilm_checkpoint_dir())
    texts = datasets.load_text_classification("reuters_r8", "test").texts
    cls.texts = [text[:600] for text in texts[:12]] + ["Oil prices rose.", "a", "Shares fell on Monday"]

  @parameterized.parameters("float32", "bfloat16")
  def test_alone_and_in_batches_as_in_the_graph(self, precision):
    if precision == "bfloat16" and not text_encoder.cpu_has_bfloat16():
      self.skipTest("bfloat16 is emulated on a CPU without its instructions")
    encoder = text_encoder.make_text_encoder(text_encoder.TextEncoderConfig(
        self.handles.preprocess, self.handles.encoder, max_seq_length=128, precision=precision))
    graph = tf.function(encoder, input_signature=[tf.TensorSpec([None], tf.string)])
    want = graph(tf.constant(self.texts)).numpy()
    lengths = encoder.preprocess(tf.constant(self.texts))["input_mask"].numpy().sum(axis=1)
    self.assertGreater(len(set(lengths % 16)), 3)  # Texts of many lengths, not all multiples of 16.
    # float32 sums in another order at other shapes (~1e-6): within the 1e-5 an export reproduces scores to.
    # bfloat16 agrees to the bit here; before the rounding, vectors cut to a text's own length moved by up to
    # 3e-3, and an eager call (op by op, before its BERT became one function) by up to 7e-3.
    atol = 1e-5 if precision == "float32" else 1e-6
    for batch_size in (1, 5, 64):
      computed = embedding_cache.compute_embeddings(encoder, self.texts, batch_size)
      self.assertAllClose(computed, want, atol=atol, rtol=0, msg=f"batch_size={batch_size}")
    self.assertAllClose(encoder(tf.constant(self.texts[:5])).numpy(), want[:5], atol=atol, rtol=0)
    self.assertAllClose(encoder(tf.constant(self.texts[-1:])).numpy(), want[-1:], atol=atol, rtol=0)


class _EmbeddedCount:
  """Counts the texts that run through the encoder (`compute_embeddings`) inside a `with` block."""

  def __init__(self):
    self.texts: list[str] = []
    self._patch = mock.patch.object(embedding_cache, "compute_embeddings", side_effect=self._record)
    self._real = embedding_cache.compute_embeddings

  def _record(self, encoder, texts, batch_size=64):
    self.texts.extend(texts)
    return self._real(encoder, texts, batch_size)

  def __enter__(self):
    self._patch.start()
    return self

  def __exit__(self, *exc_info):
    self._patch.stop()


class SourceNoteTest(tf.test.TestCase):

  def test_says_how_many_were_computed_and_read(self):
    self.assertEqual(embedding_cache.source_note(2347, 0), "all read from the embedding cache")
    self.assertEqual(embedding_cache.source_note(2347, 2347), "all computed")
    self.assertEqual(embedding_cache.source_note(2347, 1200),
                     "1,200 computed, 1,147 read from the embedding cache")


class ContentAddressedCacheTest(tf.test.TestCase):
  """Each (encoder, text) is embedded once per cache, whatever list, order or batch it comes in."""

  def setUp(self):
    super().setUp()
    self.cache = self.create_tempdir().full_path
    self.first = embedding_cache.embed_texts(tiny_config(), TEXTS, cache_dir=self.cache)

  def test_second_call_embeds_no_text(self):
    with _EmbeddedCount() as count:
      again = embedding_cache.embed_texts(tiny_config(), TEXTS, cache_dir=self.cache)
    self.assertEqual(count.texts, [])
    self.assertAllEqual(again, self.first)

  def test_subset_reordered_duplicated_and_rebatched_lists_hit(self):
    picks = [3, 0, 3, 6, 0]
    with _EmbeddedCount() as count:
      subset = embedding_cache.embed_texts(tiny_config(), [TEXTS[i] for i in picks], cache_dir=self.cache)
      batches = [embedding_cache.embed_texts(tiny_config(), TEXTS[i : i + 2], cache_dir=self.cache)
                 for i in range(0, len(TEXTS), 2)]
    self.assertEqual(count.texts, [])
    self.assertAllEqual(subset, self.first[picks])
    self.assertAllEqual(np.concatenate(batches), self.first)

  def test_only_new_texts_are_embedded_each_once(self):
    new = ["a happy cat", "the sad dog"]
    texts = [TEXTS[1], new[0], new[1], new[0], TEXTS[2]]
    computed = embedding_cache.computed_texts()
    with _EmbeddedCount() as count:
      got = embedding_cache.embed_texts(tiny_config(), texts, cache_dir=self.cache)
    self.assertCountEqual(count.texts, new)
    self.assertEqual(embedding_cache.computed_texts() - computed, 2)  # What the "Embedded" lines report.
    encoder = text_encoder.make_text_encoder(tiny_config())
    self.assertAllClose(got, encoder(tf.constant(texts), training=False), atol=1e-5)
    self.assertAllEqual(got[[0, 4]], self.first[[1, 2]])

  def test_other_max_seq_length_pooling_or_encoder_misses(self):
    for config in (tiny_config(max_seq_length=4), tiny_config(pooling="cls")):
      with _EmbeddedCount() as count:
        got = embedding_cache.embed_texts(config, TEXTS, cache_dir=self.cache)
      self.assertCountEqual(count.texts, TEXTS)
      self.assertAllClose(got, text_encoder.make_text_encoder(config)(tf.constant(TEXTS), training=False),
                          atol=1e-5)
    # A trainable instance whose weights moved is another encoder.
    tuned = text_encoder.make_text_encoder(tiny_config(trainable=True))
    tuned.trainable_weights[0].assign_add(tf.ones_like(tuned.trainable_weights[0]))
    self.assertNotEqual(embedding_cache.encoder_identity(tuned),
                        embedding_cache.encoder_identity(tiny_config()))

  def test_clear_empties_the_cache_and_older_per_list_files(self):
    legacy = os.path.join(self.cache, "embeddings-" + "0" * 32 + ".npy")
    np.save(legacy, np.zeros([2, 2], np.float32))
    self.assertEqual(embedding_cache.clear(self.cache), len(TEXTS) + 1)
    self.assertFalse(os.path.exists(legacy))
    self.assertEqual(embedding_cache.open_store(self.cache).stats()["rows"], 0)
    with _EmbeddedCount() as count:
      embedding_cache.embed_texts(tiny_config(), TEXTS, cache_dir=self.cache)
    self.assertCountEqual(count.texts, TEXTS)

  def test_truncated_or_foreign_store_file_is_rebuilt(self):
    path = os.path.join(self.cache, embedding_cache.STORE_FILE)
    embedding_cache.open_store(self.cache).close()  # Checkpoints the log into the file, as at process exit.
    for damage in ("truncate", "garbage"):
      store = embedding_cache.open_store(self.cache)
      store.close()
      size = os.path.getsize(path)
      self.assertGreater(size, 8192)
      with open(path, "r+b") as f:
        if damage == "truncate":
          f.truncate(size // 2)
        else:
          f.write(os.urandom(size))
      with _EmbeddedCount() as count:
        got = embedding_cache.embed_texts(tiny_config(), TEXTS, cache_dir=self.cache)
      self.assertCountEqual(count.texts, TEXTS, msg=damage)
      self.assertAllClose(got, self.first, atol=1e-5)
      self.assertEqual(embedding_cache.open_store(self.cache).stats()["rows"], len(TEXTS))

  def test_row_failing_its_checksum_is_embedded_again_not_read(self):
    store = embedding_cache.open_store(self.cache)
    key = embedding_cache.text_keys(embedding_cache.encoder_identity(tiny_config()), [TEXTS[2]])[0]
    with sqlite3.connect(store.path) as connection:  # A bit flipped on disk; its checksum no longer matches.
      (vector,) = connection.execute("SELECT vector FROM vectors WHERE key = ?", (key,)).fetchone()
      flipped = bytes([vector[0] ^ 1]) + vector[1:]
      connection.execute("UPDATE vectors SET vector = ? WHERE key = ?", (flipped, key))
    with _EmbeddedCount() as count:
      got = embedding_cache.embed_texts(tiny_config(), TEXTS, cache_dir=self.cache)
    self.assertEqual(count.texts, [TEXTS[2]])
    self.assertAllClose(got, self.first, atol=1e-5)


class EmbeddingStoreTest(tf.test.TestCase):
  """The store itself: least recently used rows evicted under the cap, connections sharing the file."""

  def _rows(self, first: int, count: int, dim: int = 384) -> tuple[list[bytes], np.ndarray]:
    keys = embedding_cache.text_keys("test", [str(i) for i in range(first, first + count)])
    # Row i holds i everywhere, so any row read back says which text it belongs to.
    return keys, np.repeat(np.arange(first, first + count, dtype=np.float32)[:, None], dim, axis=1)

  def test_cap_evicts_the_least_recently_used_rows(self):
    now = [1000.0]
    store = embedding_cache.EmbeddingStore(self.create_tempdir().full_path, max_bytes=400_000,
                                           clock=lambda: now[0])
    old, old_vectors = self._rows(0, 100)  # 100 x 1.5 KB rows: about 160 KB with SQLite's pages.
    store.insert(old, old_vectors)
    now[0] += 2 * 3600
    touched, _ = self._rows(50, 50)
    self.assertLen(store.lookup(touched), 50)  # Rows 50-99 used again: they are now newer than 0-49.
    now[0] += 2 * 3600
    new, new_vectors = self._rows(100, 150)
    store.insert(new, new_vectors)
    stats = store.stats()
    self.assertLessEqual(stats["bytes"], 400_000)
    self.assertLess(stats["rows"], 250)
    found = store.lookup(old + new)
    self.assertNotIn(old[0], found)  # The least recently used went first...
    self.assertContainsSubset(new, found)  # ...the newest stayed...
    self.assertIn(old[99], found)  # ...and so did a row read after the first ones were written.
    every = old + new  # Row i of it holds i.
    for key, vector in found.items():
      self.assertAllEqual(vector, np.full([384], every.index(key), np.float32))

  def test_eviction_of_rows_spread_over_pages_drops_no_more_than_it_must(self):
    now = [1000.0]
    store = embedding_cache.EmbeddingStore(self.create_tempdir().full_path, max_bytes=400_000,
                                           clock=lambda: now[0])
    old, _ = self._rows(0, 200)
    store.insert(old, self._rows(0, 200)[1])
    now[0] += 2 * 3600
    store.lookup(old[::2])  # Every other row used again: the least recently used ones share pages with them.
    now[0] += 2 * 3600
    new, new_vectors = self._rows(200, 60)
    store.insert(new, new_vectors)
    stats = store.stats()
    self.assertLessEqual(stats["bytes"], 400_000)
    found = store.lookup(old + new)
    # 260 rows fill ~490 KB (5 rows a page); down to 90% of the cap keeps ~190 of them. Only rows never read
    # again were evicted, and not every row on their pages (the file was compacted instead).
    kept = {row for row, key in enumerate(old + new) if key in found}
    self.assertContainsSubset(set(range(0, 200, 2)) | set(range(200, 260)), kept)
    self.assertBetween(len(kept), 180, 259)

  def test_two_connections_writing_at_once_lose_no_row(self):
    directory = self.create_tempdir().full_path
    stores = [embedding_cache.EmbeddingStore(directory) for _ in range(2)]
    batches = [self._rows(i * 40, 40, dim=8) for i in range(10)]
    threads = [threading.Thread(target=lambda i=i: stores[i % 2].insert(*batches[i])) for i in range(10)]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join()
    keys = [key for batch, _ in batches for key in batch]
    found = stores[0].lookup(keys)
    self.assertLen(found, 400)
    self.assertAllEqual(np.stack([found[key] for key in keys]), np.concatenate([v for _, v in batches]))

  def test_opening_while_another_connection_locks_the_new_file_waits_and_retries(self):
    # Switching a new file to WAL while another connection creates it can fail with "database is locked" at
    # once (no busy wait): the opening is tried again, so the insert keeps its rows.
    store = embedding_cache.EmbeddingStore(self.create_tempdir().full_path)
    real_open, failures = store._open, [sqlite3.OperationalError("database is locked")] * 2

    def flaky_open():
      if failures:
        raise failures.pop()
      return real_open()

    with mock.patch.object(store, "_open", side_effect=flaky_open), mock.patch.object(time, "sleep") as sleep:
      keys, vectors = self._rows(0, 3, dim=4)
      store.insert(keys, vectors)
    self.assertEqual([c.args[0] for c in sleep.call_args_list], [0.01, 0.02])
    self.assertLen(store.lookup(keys), 3)
    other = embedding_cache.EmbeddingStore(self.create_tempdir().full_path)
    with mock.patch.object(other, "_open", side_effect=sqlite3.OperationalError("disk I/O error")):
      with self.assertRaisesRegex(sqlite3.OperationalError, "disk I/O error"):
        other.insert(keys, vectors)

  def test_writer_killed_mid_insert_leaves_only_whole_rows(self):
    directory = self.create_tempdir().full_path
    # The child inserts batches of 500 rows (batch b holds b everywhere) until it is killed.
    child = subprocess.Popen([sys.executable, "-c", f"""
import numpy as np
from rank4class_encoders import embedding_cache
store = embedding_cache.EmbeddingStore({directory!r})
for b in range(10**6):
  keys = embedding_cache.text_keys("kill", [f"{{b}}-{{i}}" for i in range(500)])
  store.insert(keys, np.full([500, 384], b, np.float32))
"""], cwd=os.getcwd(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = embedding_cache.EmbeddingStore(directory)
    deadline = time.time() + 120
    while time.time() < deadline:
      if os.path.exists(store.path) and store.stats()["rows"] >= 1500:
        break
      time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    store.close()
    store = embedding_cache.EmbeddingStore(directory)
    rows = store.stats()["rows"]
    self.assertGreaterEqual(rows, 1500)
    self.assertEqual(rows % 500, 0)  # Whole transactions only.
    for b in range(rows // 500):
      found = store.lookup(embedding_cache.text_keys("kill", [f"{b}-{i}" for i in range(500)]))
      self.assertLen(found, 500)
      self.assertAllEqual(np.stack(list(found.values())), np.full([500, 384], b, np.float32))

  def test_vectors_of_size_reads_whole_rows_of_that_size(self):
    store = embedding_cache.EmbeddingStore(self.create_tempdir().full_path)
    store.insert(*self._rows(0, 3, dim=4))
    store.insert(*self._rows(3, 2, dim=8))
    self.assertAllEqual(np.sort(store.vectors_of_size(4, limit=10)[:, 0]), [0, 1, 2])
    self.assertEqual(store.vectors_of_size(8, limit=1).shape, (1, 8))
    self.assertEqual(store.vectors_of_size(16, limit=10).shape, (0, 16))

  def test_cap_setting_reads_the_environment(self):
    with mock.patch.dict(os.environ, {embedding_cache.MAX_BYTES_ENV: "512M"}):
      self.assertEqual(embedding_cache.max_bytes_setting(), 512 * 1024**2)
    with mock.patch.dict(os.environ, {embedding_cache.MAX_BYTES_ENV: ""}):
      self.assertEqual(embedding_cache.max_bytes_setting(), embedding_cache.DEFAULT_MAX_BYTES)
    with mock.patch.dict(os.environ, {embedding_cache.MAX_BYTES_ENV: "lots"}), \
        self.assertRaisesRegex(ValueError, "RANK4CLASS_EMBEDDING_CACHE_MAX_BYTES: .* got 'lots'"):
      embedding_cache.max_bytes_setting()


if __name__ == "__main__":
  tf.test.main()
