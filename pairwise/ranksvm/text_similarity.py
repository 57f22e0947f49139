"""Query-document text similarity features: Okapi BM25, TF-IDF cosine and embedding cosines (NumPy).

These are the query-dependent parts of Φ(q, d) (RankingSVM paper §3.3 uses the cosine of sentence-encoder
embeddings; BM25 and TF-IDF serve where no encoder is wanted). Two collection-aware embedding cosines smooth
the short, noisy query and document vectors with their nearest neighbours in the document collection:
pseudo-relevance feedback (Rocchio 1971, in embedding space: the query is replaced by the centroid of its k
nearest collection documents) and cluster-based document smoothing (Kurland & Lee 2004: each document is
replaced by the centroid of its k nearest collection documents, itself included).

Collection statistics (document frequencies, average length) are fitted once on the document collection and
saved with the feature mapping, so a saved model scores new queries with exactly the statistics it was trained
with.
"""

import collections
import dataclasses
import functools
import math
import re
from collections.abc import Callable, Sequence

import numpy as np

from rank4class_data.validation import check_range

_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
  """Lower-cased runs of ASCII letters and digits: "Glucose [Mass/volume]" -> ["glucose", "mass",
  "volume"]."""
  return _TOKEN.findall(text.lower())


@functools.lru_cache(maxsize=200_000)
def _term_counts(text: str) -> tuple[collections.Counter, int]:
  tokens = tokenize(text)
  return collections.Counter(tokens), len(tokens)


def _document_frequency(documents: Sequence[str]) -> dict[str, int]:
  frequency = collections.Counter()
  for text in documents:
    frequency.update(_term_counts(text)[0].keys())
  return dict(frequency)


@dataclasses.dataclass
class Bm25:
  """Okapi BM25 (Robertson & Zaragoza 2009) with Lucene's non-negative idf.

  score(q, d) = sum over distinct query terms t of idf(t) * tf(t, d) (k1 + 1) / (tf(t, d) + k1 (1 - b + b |d|
  / avgdl)), idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)); terms unseen in the collection get df = 0.

  Attributes:
    k1: Term-frequency saturation, >= 0.
    b: Length normalization in [0, 1].
    num_docs: N, documents in the fitted collection.
    avg_doc_length: avgdl, in tokens.
    document_frequency: Term -> number of collection documents containing it.
  """

  k1: float = 1.2
  b: float = 0.75
  num_docs: int = 0
  avg_doc_length: float = 0.0
  document_frequency: dict[str, int] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    check_range("k1", self.k1, 0.0)
    check_range("b", self.b, 0.0, 1.0)

  def fit(self, documents: Sequence[str]) -> "Bm25":
    """Collects N, avgdl and document frequencies from `documents`; returns self."""
    if not documents:
      raise ValueError("BM25 needs at least one document to fit its collection statistics.")
    self.num_docs = len(documents)
    self.avg_doc_length = float(np.mean([_term_counts(text)[1] for text in documents]))
    self.document_frequency = _document_frequency(documents)
    return self

  def idf(self, term: str) -> float:
    df = self.document_frequency.get(term, 0)
    return math.log(1.0 + (self.num_docs - df + 0.5) / (df + 0.5))

  def scores(self, query: str, documents: Sequence[str]) -> np.ndarray:
    """BM25 of `query` against each of `documents`; float64 [num_documents]."""
    if self.num_docs == 0:
      raise ValueError("BM25 is not fitted: call fit() on the document collection first.")
    terms = sorted(set(tokenize(query)))
    idf = {term: self.idf(term) for term in terms}
    avgdl = self.avg_doc_length if self.avg_doc_length > 0 else 1.0
    result = np.zeros(len(documents))
    for i, text in enumerate(documents):
      counts, length = _term_counts(text)
      norm = self.k1 * (1.0 - self.b + self.b * length / avgdl)
      result[i] = sum(idf[t] * counts[t] * (self.k1 + 1.0) / (counts[t] + norm) for t in terms if counts[t])
    return result

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, state: dict) -> "Bm25":
    return cls(**state)


@dataclasses.dataclass
class TfidfCosine:
  """Cosine between L2-normalized TF-IDF vectors (raw counts times smooth idf = ln((1 + N) / (1 + df)) + 1).

  Equals scikit-learn's `TfidfVectorizer(norm="l2", smooth_idf=True)` cosine with the same tokens; query terms
  absent from the fitted collection are ignored (they have no idf).

  Attributes:
    num_docs: N, documents in the fitted collection.
    document_frequency: Term -> number of collection documents containing it.
  """

  num_docs: int = 0
  document_frequency: dict[str, int] = dataclasses.field(default_factory=dict)

  def fit(self, documents: Sequence[str]) -> "TfidfCosine":
    """Collects N and document frequencies from `documents`; returns self."""
    if not documents:
      raise ValueError("TF-IDF needs at least one document to fit its collection statistics.")
    self.num_docs = len(documents)
    self.document_frequency = _document_frequency(documents)
    return self

  def _vector(self, text: str) -> dict[str, float]:
    counts, _ = _term_counts(text)
    weights = {t: c * (math.log((1.0 + self.num_docs) / (1.0 + self.document_frequency[t])) + 1.0)
               for t, c in counts.items() if t in self.document_frequency}
    norm = math.sqrt(sum(w * w for w in weights.values()))
    return {t: w / norm for t, w in weights.items()} if norm > 0 else {}

  def scores(self, query: str, documents: Sequence[str]) -> np.ndarray:
    """Cosine of `query` against each of `documents`; float64 [num_documents] in [0, 1]."""
    if self.num_docs == 0:
      raise ValueError("TF-IDF is not fitted: call fit() on the document collection first.")
    query_vector = self._vector(query)
    result = np.zeros(len(documents))
    for i, text in enumerate(documents):
      doc_vector = self._vector(text)
      result[i] = sum(w * doc_vector.get(t, 0.0) for t, w in query_vector.items())
    return result

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, state: dict) -> "TfidfCosine":
    return cls(**state)


def cosine_similarity(first, second) -> np.ndarray:
  """Row-wise cosine: first [n, dim], second [n, dim] (or [1, dim], broadcast) -> float64 [n].

  A zero vector has cosine 0 with everything.
  """
  first = np.asarray(first, dtype=np.float64)
  second = np.asarray(second, dtype=np.float64)
  if first.ndim != 2 or second.ndim != 2 or first.shape[1] != second.shape[1]:
    raise ValueError(f"Expected [n, dim] embeddings with equal dim; got {first.shape} and {second.shape}.")
  dot = np.sum(first * second, axis=1)
  norms = np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1)
  return np.divide(dot, norms, out=np.zeros_like(dot), where=norms > 0)


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
  norms = np.linalg.norm(vectors, axis=1, keepdims=True)
  return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def nearest_centroids(points, collection, k: int, max_block_elements: int = 1 << 24) -> np.ndarray:
  """For each point, the unit-length mean of its k most cosine-similar collection rows.

  Args:
    points: float [m, dim].
    collection: float [n, dim], n >= 1.
    k: Neighbours per point, >= 1; capped at n.
    max_block_elements: Bound on the [block, n] similarity block held at once (memory), not on the result.

  Returns:
    float64 [m, dim] unit rows (zero rows for a zero mean). Ties among equally similar rows go to the lower
    collection index, so the result does not depend on the blocking.
  """
  points = _unit_rows(np.asarray(points, dtype=np.float64))
  collection = _unit_rows(np.asarray(collection, dtype=np.float64))
  if (
    points.ndim != 2 or collection.ndim != 2 or points.shape[1] != collection.shape[1] or not len(collection)
  ):
    raise ValueError(f"Expected points [m, dim] and a non-empty collection [n, dim]; got {points.shape} and "
                     f"{collection.shape}.")
  check_range("k", k, 1)
  k = min(k, len(collection))
  block = max(1, max_block_elements // len(collection))
  result = np.zeros_like(points)
  for start in range(0, len(points), block):
    similarity = points[start:start + block] @ collection.T
    nearest = np.argsort(-similarity, axis=1, kind="stable")[:, :k]
    result[start:start + block] = _unit_rows(collection[nearest].mean(axis=1))
  return result


class EmbeddingCosine:
  """Cosine between text-encoder embeddings of the query and of each document, caching embeddings by text.

  Args:
    embed: Maps a list of n strings to float [n, dim] embeddings (e.g. a MiniLM `TextEncoder`, mean pooling).
    batch_size: Texts per `embed` call.
  """

  def __init__(self, embed: Callable[[list[str]], np.ndarray], batch_size: int = 64):
    check_range("batch_size", batch_size, 1)
    self._embed = embed
    self._batch_size = batch_size
    self._cache: dict[str, np.ndarray] = {}
    self._neighbor_key: tuple | None = None
    self._neighbors: dict[str, np.ndarray] = {}

  def embeddings(self, texts: Sequence[str]) -> np.ndarray:
    """float64 [len(texts), dim], computing only texts not seen before."""
    missing = list(dict.fromkeys(text for text in texts if text not in self._cache))
    for start in range(0, len(missing), self._batch_size):
      batch = missing[start:start + self._batch_size]
      vectors = np.asarray(self._embed(batch), dtype=np.float64)
      if vectors.ndim != 2 or vectors.shape[0] != len(batch):
        raise ValueError(f"The text encoder returned shape {vectors.shape} for {len(batch)} texts; expected "
                         "[num_texts, dim].")
      self._cache.update(zip(batch, vectors, strict=True))
    if not texts:
      return np.zeros((0, 0))
    return np.stack([self._cache[text] for text in texts])

  def scores(self, query: str, documents: Sequence[str]) -> np.ndarray:
    """Cosine of the query embedding with each document embedding; float64 [num_documents]."""
    if not documents:
      return np.zeros(0)
    vectors = self.embeddings([query, *documents])
    return cosine_similarity(vectors[1:], vectors[:1])

  def feedback_scores(self, query: str, documents: Sequence[str], collection: Sequence[str],
                      k: int) -> np.ndarray:
    """Pseudo-relevance feedback: cosine of each document with the centroid of the query's k nearest
    `collection` documents; float64 [num_documents]."""
    if not documents:
      return np.zeros(0)
    centroid = nearest_centroids(self.embeddings([query]), self.embeddings(collection), k)
    return cosine_similarity(self.embeddings(documents), centroid)

  def neighbor_scores(self, query: str, documents: Sequence[str], collection: Sequence[str],
                      k: int) -> np.ndarray:
    """Document smoothing: cosine of the query with each document's centroid of its k nearest `collection`
    documents (computed once per collection and cached); float64 [num_documents]."""
    if not documents:
      return np.zeros(0)
    key = (hash(tuple(collection)), len(collection), k)
    if self._neighbor_key != key:
      texts = list(dict.fromkeys(collection))
      centroids = nearest_centroids(self.embeddings(texts), self.embeddings(collection), k)
      self._neighbor_key, self._neighbors = key, dict(zip(texts, centroids, strict=True))
    unknown = [text for text in documents if text not in self._neighbors]
    if unknown:
      raise ValueError(f"{len(unknown)} document(s) are not in the collection their neighbours come from, "
                       f"e.g. {unknown[0][:60]!r}.")
    smoothed = np.stack([self._neighbors[text] for text in documents])
    return cosine_similarity(smoothed, self.embeddings([query]))
