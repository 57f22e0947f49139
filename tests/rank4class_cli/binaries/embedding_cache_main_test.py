"""End-to-end tests of the rank4class-embedding-cache binary: it shows the shared cache and clears it."""

import os
from unittest import mock

import numpy as np
import tensorflow as tf

from rank4class_cli.binaries import embedding_cache_main
from rank4class_encoders import embedding_cache
from tests.rank4class_cli.cli_runner import parse_error, run_binary


class EmbeddingCacheMainTest(tf.test.TestCase):

  def _fill(self, cache: str, texts: list[str]) -> None:
    keys = embedding_cache.text_keys("enc", texts)
    embedding_cache.open_store(cache).insert(keys, np.ones([len(texts), 4], np.float32), "enc" * 22,
                                             {"pooling": "mean", "max_seq_length": 16})

  def test_shows_the_cache_then_clears_it(self):
    cache = self.create_tempdir().full_path
    result = run_binary(embedding_cache_main, [f"--cache_dir={cache}"])
    self.assertEqual((result.code, result.stderr), (0, ""))
    self.assertEqual(result.stdout.splitlines()[0], f"cache: {cache}/{embedding_cache.STORE_FILE} (empty)")
    self._fill(cache, ["a cat", "a dog", "an eel"])
    result = run_binary(embedding_cache_main, [f"--cache_dir={cache}"])
    self.assertEqual(result.code, 0)
    lines = result.stdout.splitlines()
    self.assertEqual(lines[:2], [f"cache: {cache}/{embedding_cache.STORE_FILE}", "texts: 3"])
    self.assertEqual(lines[-1], "encoder encencencenc: max_seq_length=16, pooling=mean")
    result = run_binary(embedding_cache_main, [f"--cache_dir={cache}", "--clear"])
    self.assertEqual((result.code, result.stderr), (0, ""))
    self.assertEqual(result.stdout.splitlines()[:3],
                     ["cleared: 3 cached embeddings removed", f"cache: {cache}/{embedding_cache.STORE_FILE}",
                      "texts: 0"])
    self.assertEqual(embedding_cache.open_store(cache).lookup(embedding_cache.text_keys("enc", ["a cat"])),
                     {})

  def test_cap_comes_from_the_environment_and_a_bad_one_is_one_line(self):
    cache = self.create_tempdir().full_path
    with mock.patch.dict(os.environ, {embedding_cache.MAX_BYTES_ENV: "64M"}):
      result = run_binary(embedding_cache_main, [f"--cache_dir={cache}"])
    self.assertIn(f"cap: {64 * 1024**2:,} bytes", result.stdout)
    with mock.patch.dict(os.environ, {embedding_cache.MAX_BYTES_ENV: "-3"}):
      code, stderr = parse_error(embedding_cache_main, [f"--cache_dir={cache}"])
    self.assertEqual(code, 2)
    self.assertEqual(stderr, "rank4class-embedding-cache: error: $RANK4CLASS_EMBEDDING_CACHE_MAX_BYTES: An "
                             "embedding cache size must be a positive number of bytes (e.g. 2G, "
                             "512M), got '-3'.\n")


if __name__ == "__main__":
  tf.test.main()
