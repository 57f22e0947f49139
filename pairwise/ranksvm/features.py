"""The feature mapping Φ(q, d) of RankSVM: categorical, multi-hot, numeric and query-text similarity features.

Φ(q, d) concatenates, in this order (RankingSVM paper §3.3, with its defects fixed):
1. one-hot blocks `field=value` for each categorical field (values seen when fitting, sorted; a value not seen
   then maps to an all-zero block);
2. multi-hot blocks `field=token` for each multi-hot field, the value split on its separator (LOINC `system`
   "Ser/Plas/Bld" sets `system=Ser`, `system=Plas`, `system=Bld`);
3. for each numeric field, `field` standardized with the mean and standard deviation of the fitting documents'
   present values (0 where missing) and `field:missing` in {0, 1}: an explicit indicator, never a -1e9
   sentinel (the seed's sentinel dominated every other feature and stopped the solver converging);
4. for each text field and similarity, `similarity(field)` between the query text and the field: `bm25`,
   `tfidf` (cosine), `embedding` (cosine of text-encoder embeddings), and two collection-aware embedding
   cosines (`pairwise.ranksvm.text_similarity`): `embedding_feedback`, the document against the centroid of
   the query's `feedback_k` nearest documents (pseudo-relevance feedback), and `embedding_neighbors`, the
   query against the centroid of the document's `neighbor_k` nearest documents (document smoothing). Their
   collection is every document of the corpus being featurized (its field texts; no labels), so score new
   queries against the same corpus the model was trained with to reproduce its features.

Handling of awkward input: a numeric value that is neither a number nor one of `missing_values` raises
ValueError naming the field, document and value; a numeric field whose present values are all equal is kept
(its standardized column is 0 everywhere, logged), and RankSVM gives any constant column weight 0.
"""

import dataclasses
import math

import numpy as np

from pairwise.ranksvm import text_similarity
from rank4class_data.messages import say
from rank4class_data.ranking.feature_lists import FeatureLists
from rank4class_data.ranking.ranking_corpus import RankingCorpus
from rank4class_data.validation import check_choice, check_range

SIMILARITIES = ("bm25", "tfidf", "embedding", "embedding_feedback", "embedding_neighbors")
EMBEDDING_SIMILARITIES = ("embedding", "embedding_feedback", "embedding_neighbors")
DEFAULT_MISSING_VALUES = ("", "na", "nan", "null", "none")
_EMPTY_CATEGORY = "<empty>"


@dataclasses.dataclass
class FeatureConfig:
  """Which document fields become which features.

  Attributes:
    categorical_fields: Fields one-hot encoded.
    multi_hot_fields: Field -> separator, for fields holding several values (e.g. {"system": "/"}).
    numeric_fields: Fields standardized, each with a missing-value indicator.
    missing_values: Raw numeric-field values meaning "missing": compared as numbers when they parse as numbers
      (so "-999999999" matches "-999999999.0"), otherwise case-insensitively after stripping.
    text_fields: Fields compared with the query text.
    similarities: Similarities computed for each text field, a subset of `SIMILARITIES`.
    bm25_k1: BM25 term saturation.
    bm25_b: BM25 length normalization.
    feedback_k: Collection documents averaged into the query's feedback centroid (`embedding_feedback`).
    neighbor_k: Collection documents (the document itself included) averaged into a document's smoothed
      vector (`embedding_neighbors`).
  """

  categorical_fields: list[str] = dataclasses.field(default_factory=list)
  multi_hot_fields: dict[str, str] = dataclasses.field(default_factory=dict)
  numeric_fields: list[str] = dataclasses.field(default_factory=list)
  missing_values: list[str] = dataclasses.field(default_factory=lambda: list(DEFAULT_MISSING_VALUES))
  text_fields: list[str] = dataclasses.field(default_factory=list)
  similarities: list[str] = dataclasses.field(default_factory=lambda: ["bm25", "tfidf"])
  bm25_k1: float = 1.2
  bm25_b: float = 0.75
  feedback_k: int = 10
  neighbor_k: int = 10

  def __post_init__(self):
    for name in self.similarities:
      check_choice("similarities", name, SIMILARITIES)
    both = sorted(set(self.categorical_fields) & set(self.multi_hot_fields))
    if both:
      raise ValueError(f"Field(s) {both} are both categorical and multi-hot; choose one encoding.")
    for field, separator in self.multi_hot_fields.items():
      if not separator:
        raise ValueError(f"Multi-hot field {field!r} needs a non-empty separator.")
    for name in ("feedback_k", "neighbor_k"):
      check_range(name, getattr(self, name), 1)
    if self.text_fields and not self.similarities:
      raise ValueError(f"Text fields {self.text_fields} need at least one similarity from "
                       f"{list(SIMILARITIES)}.")
    if not (self.categorical_fields or self.multi_hot_fields or self.numeric_fields or self.text_fields):
      raise ValueError("The feature mapping has no fields: set categorical, multi-hot, numeric "
                       "or text fields.")


def uses_encoder(config: FeatureConfig) -> bool:
  """Whether the mapping computes an embedding similarity (and so needs a text encoder)."""
  return bool(config.text_fields) and any(name in EMBEDDING_SIMILARITIES for name in config.similarities)


class FeatureMapper:
  """Fits Φ(q, d) on a document collection and maps (query, document) pairs to feature rows.

  Example:
    mapper = FeatureMapper(FeatureConfig(categorical_fields=["scale"], multi_hot_fields={"system": "/"},
                                         numeric_fields=["rank_loinc"], missing_values=["-999999999"],
                                         text_fields=["long_common_name"], similarities=["bm25"]))
    lists = mapper.fit(corpus).transform(corpus)      # FeatureLists of every judged query
    rows = mapper.query_features("glucose in blood", corpus)   # [num_docs, num_features]

  Args:
    config: The fields and similarities.
    embed: Maps a list of n texts to [n, dim] embeddings; required when "embedding" is a similarity.
  """

  def __init__(self, config: FeatureConfig, embed=None):
    if uses_encoder(config) and embed is None:
      names = [name for name in config.similarities if name in EMBEDDING_SIMILARITIES]
      raise ValueError(f"Similarity {names} needs a text encoder (`embed`); pass one or drop it from "
                       "`similarities`.")
    self.config = config
    self._embedding = text_similarity.EmbeddingCosine(embed) if embed is not None else None
    self._vocabularies: dict[str, list[str]] = {}
    self._numeric_stats: dict[str, tuple[float, float]] = {}
    self._text_models: dict[str, dict[str, object]] = {}
    self._fitted = False

  @property
  def feature_names(self) -> list[str]:
    self._require_fitted()
    names = []
    for field in [*self.config.categorical_fields, *self.config.multi_hot_fields]:
      names += [f"{field}={value}" for value in self._vocabularies[field]]
    for field in self.config.numeric_fields:
      names += [field, f"{field}:missing"]
    for field in self.config.text_fields:
      names += [f"{name}({field})" for name in self.config.similarities]
    return names

  def _require_fitted(self) -> None:
    if not self._fitted:
      raise ValueError("The feature mapping is not fitted: call fit() on the document collection first.")

  def _check_fields(self, corpus: RankingCorpus) -> None:
    used = [*self.config.categorical_fields, *self.config.multi_hot_fields, *self.config.numeric_fields,
            *self.config.text_fields]
    missing = [field for field in used if field not in corpus.doc_fields]
    if missing:
      raise ValueError(f"Document field(s) {missing} not found; the documents have "
                       f"{list(corpus.doc_fields)}.")

  def _categories(self, field: str, raw: str) -> list[str]:
    if field in self.config.multi_hot_fields:
      tokens = [token.strip() for token in raw.split(self.config.multi_hot_fields[field])]
      return sorted({token for token in tokens if token}) or [_EMPTY_CATEGORY]
    return [raw.strip() or _EMPTY_CATEGORY]

  def _parse_numeric(self, field: str, raw: str, doc_id: str) -> float:
    """The value, or NaN when missing; raises ValueError for anything else."""
    text = raw.strip()
    tokens = {value.strip().lower() for value in self.config.missing_values} | {""}
    if text.lower() in tokens:
      return math.nan
    try:
      value = float(text)
    except ValueError:
      value = math.nan
    if not math.isfinite(value):
      raise ValueError(
          f"Numeric field {field!r} of document {doc_id!r} holds {raw!r}, which is not a finite number; "
          f"expected a number or a missing-value marker from {sorted(tokens)} (add it to "
          "`missing_values`).")
    for marker in self.config.missing_values:
      try:
        if float(marker) == value:
          return math.nan
      except ValueError:
        continue
    return value

  def fit(self, corpus: RankingCorpus) -> "FeatureMapper":
    """Learns vocabularies, numeric statistics and text-collection statistics from all corpus documents.

    Only document fields are read (never labels), so fitting on every document does not leak judgments.
    """
    self._check_fields(corpus)
    for field in [*self.config.categorical_fields, *self.config.multi_hot_fields]:
      values = {category for raw in corpus.doc_fields[field] for category in self._categories(field, raw)}
      self._vocabularies[field] = sorted(values)
    for field in self.config.numeric_fields:
      values = np.array([self._parse_numeric(field, raw, doc_id)
                         for raw, doc_id in zip(corpus.doc_fields[field], corpus.doc_ids, strict=True)])
      present = values[~np.isnan(values)]
      if present.size == 0:
        raise ValueError(f"Numeric field {field!r} has no present value in any document; drop it.")
      std = float(present.std())
      if std == 0:
        say(f"Numeric field {field!r} is constant ({present[0]}) over the fitting documents: its "
            "standardized column is 0 and RankSVM gives it weight 0.")
      self._numeric_stats[field] = (float(present.mean()), std if std > 0 else 1.0)
    for field in self.config.text_fields:
      texts = corpus.doc_fields[field]
      models = {}
      if "bm25" in self.config.similarities:
        models["bm25"] = text_similarity.Bm25(k1=self.config.bm25_k1, b=self.config.bm25_b).fit(texts)
      if "tfidf" in self.config.similarities:
        models["tfidf"] = text_similarity.TfidfCosine().fit(texts)
      self._text_models[field] = models
    self._fitted = True
    return self

  def document_features(self, corpus: RankingCorpus, doc_indices=None) -> np.ndarray:
    """The query-independent part of Φ for documents; float32 [num_selected_docs, num_document_features]."""
    self._require_fitted()
    self._check_fields(corpus)
    doc_indices = np.arange(corpus.num_docs) if doc_indices is None else np.asarray(doc_indices, np.int64)
    blocks = []
    for field in [*self.config.categorical_fields, *self.config.multi_hot_fields]:
      index = {value: j for j, value in enumerate(self._vocabularies[field])}
      block = np.zeros((len(doc_indices), len(index)), dtype=np.float32)
      for row, d in enumerate(doc_indices):
        for category in self._categories(field, corpus.doc_fields[field][d]):
          if category in index:
            block[row, index[category]] = 1.0
      blocks.append(block)
    for field in self.config.numeric_fields:
      mean, std = self._numeric_stats[field]
      values = np.array([self._parse_numeric(field, corpus.doc_fields[field][d], corpus.doc_ids[d])
                         for d in doc_indices])
      missing = np.isnan(values)
      blocks.append(np.stack([np.where(missing, 0.0, (values - mean) / std), missing.astype(np.float64)],
                             axis=1)
                    .astype(np.float32))
    return np.concatenate(blocks, axis=1) if blocks else np.zeros((len(doc_indices), 0), np.float32)

  def similarity_features(self, query: str, corpus: RankingCorpus, doc_indices=None) -> np.ndarray:
    """The query-text similarities of Φ; float32 [num_selected_docs, num_text_fields * num_similarities]."""
    self._require_fitted()
    doc_indices = np.arange(corpus.num_docs) if doc_indices is None else np.asarray(doc_indices, np.int64)
    columns = []
    for field in self.config.text_fields:
      texts = [corpus.doc_fields[field][d] for d in doc_indices]
      for name in self.config.similarities:
        if name in EMBEDDING_SIMILARITIES and self._embedding is None:
          raise ValueError(f"The {name!r} similarity needs a text encoder; none was given.")
        if name == "embedding":
          columns.append(self._embedding.scores(query, texts))
        elif name == "embedding_feedback":
          columns.append(self._embedding.feedback_scores(query, texts, corpus.doc_fields[field],
                                                         self.config.feedback_k))
        elif name == "embedding_neighbors":
          columns.append(self._embedding.neighbor_scores(query, texts, corpus.doc_fields[field],
                                                         self.config.neighbor_k))
        else:
          columns.append(self._text_models[field][name].scores(query, texts))
    if not columns:
      return np.zeros((len(doc_indices), 0), np.float32)
    return np.stack(columns, axis=1).astype(np.float32)

  def query_features(self, query: str, corpus: RankingCorpus, doc_indices=None) -> np.ndarray:
    """Φ(query, d) for the selected documents (all by default); float32 [num_selected_docs, num_features]."""
    return np.concatenate([self.document_features(corpus, doc_indices),
                           self.similarity_features(query, corpus, doc_indices)], axis=1)

  def transform(self, corpus: RankingCorpus) -> FeatureLists:
    """Φ rows of every judgment, one list per judged query (query order; file order within a query)."""
    self._require_fitted()
    doc_features = self.document_features(corpus)
    rows, relevance, sizes, query_ids, texts, doc_ids = [], [], [], [], [], []
    for q in corpus.judged_queries():
      judgments = np.nonzero(corpus.judgment_query == q)[0]
      docs = corpus.judgment_doc[judgments]
      rows.append(np.concatenate([doc_features[docs],
                                  self.similarity_features(corpus.query_texts[q], corpus, docs)], axis=1))
      relevance.append(corpus.relevance[judgments])
      sizes.append(len(judgments))
      query_ids.append(corpus.query_ids[q])
      texts.append(corpus.query_texts[q])
      doc_ids += [corpus.doc_ids[d] for d in docs]
    names = self.feature_names
    return FeatureLists(
        features=np.concatenate(rows) if rows else np.zeros((0, len(names)), np.float32),
        relevance=np.concatenate(relevance) if relevance else np.zeros(0, np.float32),
        list_offsets=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]), query_ids=query_ids,
        doc_ids=doc_ids, feature_names=names, query_texts=texts)

  def to_dict(self) -> dict:
    """JSON-serializable fitted state (config, vocabularies, statistics); embeddings are not stored."""
    self._require_fitted()
    return {
        "config": dataclasses.asdict(self.config),
        "vocabularies": self._vocabularies,
        "numeric_stats": {field: list(stats) for field, stats in self._numeric_stats.items()},
        "text_models": {field: {name: model.to_dict() for name, model in models.items()}
                        for field, models in self._text_models.items()},
    }

  @classmethod
  def from_dict(cls, state: dict, embed=None) -> "FeatureMapper":
    """Restores `to_dict` output; `embed` must be the same encoder when "embedding" is used."""
    mapper = cls(FeatureConfig(**state["config"]), embed=embed)
    mapper._vocabularies = {field: list(values) for field, values in state["vocabularies"].items()}
    mapper._numeric_stats = {field: (float(mean), float(std))
                             for field, (mean, std) in state["numeric_stats"].items()}
    model_types = {"bm25": text_similarity.Bm25, "tfidf": text_similarity.TfidfCosine}
    mapper._text_models = {field: {name: model_types[name].from_dict(model) for name, model in models.items()}
                           for field, models in state["text_models"].items()}
    mapper._fitted = True
    return mapper
