"""The graded 20 Newsgroups query sets: one seeded draw of queries and graded candidates, viewed either as a
query-document relevance table (RankSVM's features) or as "query | passage" items (the margin Transformer).

No learning-to-rank set with graded judgments ships in any installable package, so one is derived,
deterministically from `NewsgroupsQrelsConfig` (every draw uses one `np.random.default_rng(seed)`, in the
order below), from one split of 20 Newsgroups as loaded by
`rank4class_data.datasets.load_text_classification`:

1. Grades. For a query taken from newsgroup g, a document of newsgroup g has grade 2; of another newsgroup of
   g's top-level hierarchy, grade 1; otherwise grade 0. Hierarchies (`HIERARCHIES`): comp, rec, sci,
   talk.politics, religion (alt.atheism, soc.religion.christian, talk.religion.misc) and misc (misc.forsale).
2. Queries. Newsgroups are visited round-robin in sorted name order; query k comes from newsgroup k mod 20
   and is a document drawn uniformly among that newsgroup's not-yet-drawn documents with at least
   `query_num_words + min_doc_words` words. The query text approximates its subject line (the data set's
   texts start with it): the first `query_num_words` words after dropping a leading "re", cut before the
   first "in article" or "writes" that comes after at least two words. Query documents never appear as
   candidates of any query.
3. Candidates. Each query gets `list_size` distinct documents: `num_grade2` drawn without replacement from
   its newsgroup, `num_grade1` from the other newsgroups of its hierarchy (misc has no other newsgroup, so
   misc.forsale queries get grade-0 documents instead), and the rest from outside the hierarchy; documents
   with fewer than `min_doc_words` words are never drawn. The list is then shuffled, so list order carries no
   grade information. A document may be a candidate of several queries.
4. Documents. The document table is the union of all candidates in data-set row order, with id
   "<split>-<row>" and three fields: "text", the document's first `doc_num_words` words (what a text encoder
   with a short window sees); "body", the whole document (for lexical matching over all of it); and
   "subject", its subject words by the query rule of step 2. The newsgroup name is not a field, so it cannot
   leak into features.
5. Split. The query ids are permuted; the first round(num_queries * (1 - heldout_fraction)) are training
   queries, the others held out.

Steps 2 and 3 are `draw_queries`; `build_newsgroups_qrels` adds steps 4 and 5 (the qrels table).
`query_passage_items` is the other view of the same table, for models that read query and document as one
sequence (the paper's MS MARCO input, §4.4): one group per query, one item per judgment in step 3's list
order, "<query text> | <document text>", labelled with its grade.
"""

import dataclasses

import numpy as np

from rank4class_data.datasets import classification
from rank4class_data.ranking.grouped_items import QUERY_PASSAGE_SEPARATOR, GroupedItems
from rank4class_data.ranking.ranking_corpus import RankingCorpus
from rank4class_data.validation import check_choice, check_range

HIERARCHIES = {
    "comp": ("comp.graphics", "comp.os.ms-windows.misc", "comp.sys.ibm.pc.hardware", "comp.sys.mac.hardware",
             "comp.windows.x"),
    "rec": ("rec.autos", "rec.motorcycles", "rec.sport.baseball", "rec.sport.hockey"),
    "sci": ("sci.crypt", "sci.electronics", "sci.med", "sci.space"),
    "talk.politics": ("talk.politics.guns", "talk.politics.mideast", "talk.politics.misc"),
    "religion": ("alt.atheism", "soc.religion.christian", "talk.religion.misc"),
    "misc": ("misc.forsale",),
}
_HIERARCHY_OF = {group: hierarchy for hierarchy, groups in HIERARCHIES.items() for group in groups}
TEXT_FIELD = "text"
SUBJECT_FIELD = "subject"
BODY_FIELD = "body"


def hierarchy_of(newsgroup: str) -> str:
  """Top-level hierarchy of a newsgroup name, e.g. "sci.med" -> "sci"; ValueError for an unknown name."""
  check_choice("newsgroup", newsgroup, sorted(_HIERARCHY_OF))
  return _HIERARCHY_OF[newsgroup]


def relevance_grade(query_newsgroup: str, doc_newsgroup: str) -> int:
  """2 for the same newsgroup, 1 for the same hierarchy, else 0."""
  if query_newsgroup == doc_newsgroup:
    return 2
  return 1 if hierarchy_of(query_newsgroup) == hierarchy_of(doc_newsgroup) else 0


@dataclasses.dataclass
class NewsgroupsQrelsConfig:
  """How the graded set is drawn (see the module docstring for the exact procedure).

  Attributes:
    split: "train" or "test" split of 20 Newsgroups.
    num_queries: Number of queries.
    list_size: Candidates per query.
    num_grade2: Same-newsgroup candidates per query.
    num_grade1: Same-hierarchy candidates per query (grade 0 instead for misc.forsale).
    query_num_words: Words of the query text.
    doc_num_words: Words of each document kept as its text.
    min_doc_words: Documents shorter than this are never drawn as candidates.
    heldout_fraction: Fraction of queries held out, in (0, 1).
    seed: The one seed of every draw.
    query_subject_only: Cut the query before "in article" / "writes" (step 2); False keeps the first
      `query_num_words` words whatever they are.
  """

  split: str = "train"
  num_queries: int = 40
  list_size: int = 30
  num_grade2: int = 10
  num_grade1: int = 10
  query_num_words: int = 10
  doc_num_words: int = 100
  min_doc_words: int = 20
  heldout_fraction: float = 0.5
  seed: int = 0
  query_subject_only: bool = True

  def __post_init__(self):
    check_range("num_queries", self.num_queries, 2, integer=True)  # Train and held out.
    for name in ("list_size", "query_num_words", "doc_num_words"):
      check_range(name, getattr(self, name), 1, integer=True)
    for name in ("num_grade2", "num_grade1", "min_doc_words"):
      check_range(name, getattr(self, name), 0, integer=True)
    if self.num_grade2 + self.num_grade1 > self.list_size:
      raise ValueError(f"num_grade2 + num_grade1 = {self.num_grade2 + self.num_grade1} exceeds list_size "
                       f"{self.list_size}.")
    check_range("heldout_fraction", self.heldout_fraction, 0, 1, low_inclusive=False, high_inclusive=False)


@dataclasses.dataclass
class NewsgroupsQrels:
  """The graded set.

  Attributes:
    corpus: Documents (fields "text", "body" and "subject"), queries and relevance grades 0/1/2.
    train_query_ids: Training queries.
    heldout_query_ids: Held-out queries.
    query_newsgroups: Query id -> newsgroup of the document it was taken from.
    query_source_ids: Query id -> id ("<split>-<row>") of the document it was taken from (never a candidate).
  """

  corpus: RankingCorpus
  train_query_ids: list[str]
  heldout_query_ids: list[str]
  query_newsgroups: dict[str, str]
  query_source_ids: dict[str, str]


def subject_words(words: list[str], num_words: int, cut: bool = True) -> list[str]:
  """The leading subject words of a cleaned 20 Newsgroups text (see step 2 of the module docstring)."""
  if words and words[0] == "re":
    words = words[1:]
  words = words[:num_words]
  for end in range(2, len(words) if cut else 0):
    if words[end] == "writes" or words[end:end + 2] == ["in", "article"]:
      return words[:end]
  return words


@dataclasses.dataclass
class NewsgroupsDraw:
  """Queries and their graded candidate lists as rows of one split (steps 2 and 3 of the module docstring).

  Attributes:
    words: Each document's words (the text split on whitespace).
    newsgroup_of_row: Newsgroup name of each document.
    query_rows: int64 [num_queries] row of the document each query is taken from.
    judgment_query: int64 [num_judgments] query index of each judgment, queries in order, each query's
      candidates in their shuffled list order.
    judgment_row: int64 [num_judgments] row of the judged document.
    grades: int64 [num_judgments] relevance grade 0, 1 or 2.
  """

  words: list[list[str]]
  newsgroup_of_row: np.ndarray
  query_rows: np.ndarray
  judgment_query: np.ndarray
  judgment_row: np.ndarray
  grades: np.ndarray


def draw_queries(config: NewsgroupsQrelsConfig, texts: list[str], labels, class_names: list[str],
                 rng: np.random.Generator) -> NewsgroupsDraw:
  """Draws the queries and their graded candidates (steps 2 and 3) with `rng`, the one generator of the set.

  Raises:
    ValueError: when a newsgroup has too few documents for the requested sizes, or a class name is not a
      20 Newsgroups name.
  """
  labels = np.asarray(labels, dtype=np.int64)
  if len(texts) != len(labels):
    raise ValueError(f"{len(texts)} texts for {len(labels)} labels.")
  for name in class_names:
    hierarchy_of(name)
  words = [text.split() for text in texts]
  lengths = np.array([len(w) for w in words])
  groups = sorted(set(class_names[i] for i in np.unique(labels)))
  group_of_row = np.array([class_names[i] for i in labels], dtype=object)

  # 2. Queries, round-robin over newsgroups.
  query_rows, used = [], set()
  for k in range(config.num_queries):
    group = groups[k % len(groups)]
    pool = [r for r in np.nonzero((group_of_row == group) & (lengths >= config.query_num_words +
                                                              config.min_doc_words))[0] if r not in used]
    if not pool:
      raise ValueError(f"Newsgroup {group!r} has no document left to draw query {k} from.")
    row = int(pool[rng.integers(len(pool))])
    used.add(row)
    query_rows.append(row)

  # 3. Candidates.
  candidate_ok = (lengths >= config.min_doc_words) & ~np.isin(np.arange(len(texts)), query_rows)
  hierarchy_of_row = np.array([hierarchy_of(g) for g in group_of_row], dtype=object)
  judgment_query, judgment_row, grades = [], [], []
  for k, row in enumerate(query_rows):
    group, hierarchy = group_of_row[row], hierarchy_of_row[row]
    same_group = np.nonzero(candidate_ok & (group_of_row == group))[0]
    same_hierarchy = np.nonzero(candidate_ok & (hierarchy_of_row == hierarchy) & (group_of_row != group))[0]
    other = np.nonzero(candidate_ok & (hierarchy_of_row != hierarchy))[0]
    num_grade1 = config.num_grade1 if same_hierarchy.size else 0
    num_grade0 = config.list_size - config.num_grade2 - num_grade1
    chosen = []
    for pool, count, grade in ((same_group, config.num_grade2, 2), (same_hierarchy, num_grade1, 1),
                               (other, num_grade0, 0)):
      if count > pool.size:
        raise ValueError(f"Query {k} ({group}) needs {count} grade-{grade} documents but only "
                         f"{pool.size} exist.")
      chosen += [(int(r), grade) for r in rng.choice(pool, size=count, replace=False)]
    for position in rng.permutation(len(chosen)):
      judgment_query.append(k)
      judgment_row.append(chosen[position][0])
      grades.append(chosen[position][1])

  return NewsgroupsDraw(words=words, newsgroup_of_row=group_of_row,
                        query_rows=np.asarray(query_rows, np.int64),
                        judgment_query=np.asarray(judgment_query, np.int64),
                        judgment_row=np.asarray(judgment_row, np.int64), grades=np.asarray(grades, np.int64))


def build_newsgroups_qrels(config: NewsgroupsQrelsConfig | None = None, texts: list[str] | None = None,
                           labels=None, class_names: list[str] | None = None) -> NewsgroupsQrels:
  """Draws the graded query-document set (steps 2 to 5 of the module docstring).

  Args:
    config: Sizes and seed; defaults to `NewsgroupsQrelsConfig()`.
    texts: Optional documents (with `labels` and `class_names`) instead of loading `config.split` of 20
      Newsgroups through `rank4class_data.datasets.load_text_classification`; for tests.
    labels: int [num_texts] ids into `class_names`.
    class_names: Newsgroup names.

  Raises:
    ValueError: when a newsgroup has too few documents for the requested sizes, or a class name is not a
      20 Newsgroups name.
  """
  config = config or NewsgroupsQrelsConfig()
  if texts is None:
    data = classification.load_text_classification("20newsgroups", config.split)
    texts, labels, class_names = data.texts, data.labels, data.class_names
  rng = np.random.default_rng(config.seed)
  draw = draw_queries(config, texts, labels, class_names, rng)
  words, query_rows, judgment_row = draw.words, draw.query_rows, draw.judgment_row
  group_of_row = draw.newsgroup_of_row

  # 4. Documents.
  doc_rows = sorted(set(judgment_row))
  doc_index = {r: i for i, r in enumerate(doc_rows)}
  query_ids = [f"q{k + 1:03d}" for k in range(config.num_queries)]
  corpus = RankingCorpus(
      doc_ids=[f"{config.split}-{r:05d}" for r in doc_rows],
      doc_fields={TEXT_FIELD: [" ".join(words[r][:config.doc_num_words]) for r in doc_rows],
                  BODY_FIELD: [" ".join(words[r]) for r in doc_rows],
                  SUBJECT_FIELD: [" ".join(subject_words(words[r],
                                                         config.query_num_words)) for r in doc_rows]},
      query_ids=query_ids,
      query_texts=[" ".join(subject_words(words[r], config.query_num_words, config.query_subject_only))
                   for r in query_rows],
      judgment_query=draw.judgment_query, judgment_doc=np.asarray([doc_index[r] for r in judgment_row]),
      relevance=draw.grades.astype(np.float64), label_kind="relevance")

  # 5. Split.
  order = rng.permutation(config.num_queries)
  num_train = int(round(config.num_queries * (1.0 - config.heldout_fraction)))
  num_train = min(max(num_train, 1), config.num_queries - 1)
  return NewsgroupsQrels(
      corpus=corpus, train_query_ids=[query_ids[i] for i in sorted(order[:num_train])],
      heldout_query_ids=[query_ids[i] for i in sorted(order[num_train:])],
      query_newsgroups={query_ids[k]: str(group_of_row[row]) for k, row in enumerate(query_rows)},
      query_source_ids={query_ids[k]: f"{config.split}-{row:05d}" for k, row in enumerate(query_rows)})


def query_passage_items(qrels: NewsgroupsQrels, first_group_id: int = 0) -> GroupedItems:
  """The graded set as "query | passage" items: one group per query (`first_group_id` + query index), one item
  per judgment, "<query text> | <document text>", labels and class labels = grades.

  Group names are the query texts.
  """
  corpus = qrels.corpus
  texts = corpus.doc_fields[TEXT_FIELD]
  features = [corpus.query_texts[q] + QUERY_PASSAGE_SEPARATOR + texts[d]
              for q, d in zip(corpus.judgment_query, corpus.judgment_doc, strict=True)]
  grades = np.asarray(corpus.relevance, np.int64)
  return GroupedItems(features=features, labels=grades.astype(np.float64),
                      group_ids=first_group_id + np.asarray(corpus.judgment_query, np.int64),
                      class_labels=grades, group_names=list(corpus.query_texts))
