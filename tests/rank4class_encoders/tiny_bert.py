"""A tiny random BERT in the TF Hub format, shared by the text-encoder and embedding-cache tests.

Exported once per test process (cached) into a temporary folder removed at exit.
"""

import atexit
import functools
import shutil
import tempfile

from rank4class_encoders import bert_conversion

VOCAB = [
  "[PAD]",
  "[UNK]",
  "[CLS]",
  "[SEP]",
  "[MASK]",
  "the",
  "cat",
  "dog",
  "sat",
  "ran",
  "on",
  "mat",
  "a",
  "park",
  "##s",
  ".",
  "!",
  "is",
  "happy",
  "sad",
]


@functools.cache
def tiny_handles() -> bert_conversion.HubHandles:
  """Preprocessor and encoder handles of a 2-layer, 16-wide BERT with `VOCAB`."""
  directory = tempfile.mkdtemp()
  atexit.register(shutil.rmtree, directory, ignore_errors=True)
  return bert_conversion.export_random_bert(
    directory,
    VOCAB,
    hidden_size=16,
    num_layers=2,
    num_heads=2,
    intermediate_size=32,
    max_position_embeddings=32,
  )
