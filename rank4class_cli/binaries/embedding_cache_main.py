"""Shows or clears the frozen-text embedding cache that training, evaluation, prediction and the studies
share.

Sample command lines:

  # Where the cache lives, how many texts it holds, its size and cap, and the encoders they came from:
  rank4class-embedding-cache

  # Empty it (every encoder's rows, and the per-list .npy files of older versions):
  rank4class-embedding-cache --clear

  # Another cache folder (the one given to --embedding_cache_dir of the other binaries):
  rank4class-embedding-cache --cache_dir=/tmp/embeddings --clear

The cap is `$RANK4CLASS_EMBEDDING_CACHE_MAX_BYTES` (e.g. 2G, 512M), 2 GiB by default; the least recently used
texts are evicted first.
"""

import dataclasses
import os

from absl import flags

from rank4class_cli import cli, terminal
from rank4class_encoders import embedding_cache

PROGRAM = "rank4class-embedding-cache"
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.
define = cli.FlagDefiner(FLAGS)

define.string("cache_dir", None, f"The embedding cache folder. Default: {embedding_cache.DEFAULT_CACHE_DIR}.")
define.bool("clear", False, "Remove every cached embedding.")


@dataclasses.dataclass
class EmbeddingCacheConfig:
  """Which cache, and what to do with it.

  Attributes:
    cache_dir: The cache folder (`~` is expanded); None for `embedding_cache.DEFAULT_CACHE_DIR`.
    clear: Remove every cached embedding before showing the cache.
  """

  cache_dir: str | None = None
  clear: bool = False


def config_from_flags(f: flags.FlagValues) -> EmbeddingCacheConfig:
  """Parses the flags into an `EmbeddingCacheConfig` (checking the cap's environment variable too)."""
  embedding_cache.max_bytes_setting()
  return EmbeddingCacheConfig(cache_dir=f.cache_dir, clear=f.clear)


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, config_from_flags)


def describe(config: EmbeddingCacheConfig) -> list[str]:
  """Clears the cache if asked, then the lines that describe it."""
  directory = os.path.expanduser(config.cache_dir or embedding_cache.DEFAULT_CACHE_DIR)
  lines = []
  if config.clear:
    removed = embedding_cache.clear(directory)
    lines.append(f"cleared: {removed:,} cached embeddings removed")
  store_path = os.path.join(directory, embedding_cache.STORE_FILE)
  if not os.path.exists(store_path):
    return [*lines, f"cache: {store_path} (empty)", f"cap: {embedding_cache.max_bytes_setting():,} bytes"]
  stats = embedding_cache.open_store(directory).stats()
  lines += [f"cache: {stats['path']}",
            f"texts: {stats['rows']:,}",
            f"size: {stats['bytes']:,} bytes",
            f"cap: {stats['max_bytes']:,} bytes (${embedding_cache.MAX_BYTES_ENV})"]
  for identity, description in sorted(stats["encoders"].items()):
    settings = ", ".join(f"{name}={value}" for name, value in sorted(description.items()))
    lines.append(f"encoder {identity[:12]}: {settings}")
  return lines


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  for line in describe(config_from_flags(FLAGS)):
    terminal.out(line)


def run():
  """Console-script entry point (`rank4class-embedding-cache`)."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
