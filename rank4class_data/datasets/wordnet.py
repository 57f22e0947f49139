"""WordNet 3.0 nouns as a many-class text classification task: a noun's gloss, classified into its hypernym.

The data is Princeton WordNet's noun data file as Debian's `wordnet-base` package installs it
(`/usr/share/wordnet/data.noun`, format `wndb(5WN)`). Every noun synset with a hypernym pointer ('@') is an
instance; its class is the synset its FIRST '@' pointer names. Instance hypernyms ('@i', e.g. "Paris" is an
instance of "national capital") are ignored, so a synset with only '@i' pointers (and a root like "entity")
is no instance. Texts:

- instance: the synset's gloss as in the file, stripped: its definition followed by its `; "example"`
  sentences, e.g. `a member of the genus Canis ...; "the dog barked all night"`;
- class: the hypernym's lemmas (underscores read as spaces, comma-joined), ": ", then the hypernym's gloss,
  e.g. `canine, canid: any of various fissiped mammals with nonretractile claws ...`;
- class name: `<first lemma of the hypernym>.<its 8-digit synset offset>`, e.g. "canine.02083346" (the offset
  makes it unique).

`build_hypernym_task` derives the splits deterministically from `WordNetConfig` (one
`np.random.default_rng(seed)`, drawn in this order):

1. Classes: hypernyms with at least `min_members` member synsets; with `max_classes`, only that many of the
   largest (ties broken by offset). They are sorted by class name.
2. Zero-shot classes: round(`zero_shot_fraction` * kept classes) of them (half rounds up; at most all but
   one), drawn by one permutation. Their members form the zero-shot split; the other classes are seen
   classes, with ids in class-name order.
3. Test members: for each seen class in id order, round(`test_fraction` * members) of them (at most all but
   one, so every class keeps a training member), drawn by one permutation of the class's members.

Every split lists its synsets in file (offset) order.

Size on WordNet 3.0 (82,115 noun synsets, 74,389 with an '@' pointer, 1,422 of those with several), default
fractions and seed 0, measured:

| min_members | seen classes | zero-shot classes | train  | test  | zero-shot |
|-------------|--------------|-------------------|--------|-------|-----------|
| 10          | 1,334        | 148               | 25,931 | 6,440 | 3,110     |
| 5           | 3,498        | 389               | 36,878 | 9,035 | 4,988     |

Some glosses repeat verbatim across synsets (e.g. "a variety of aster" 18 times), so a test gloss can equal a
training gloss.
"""

import csv
import dataclasses
import math
import os
import re
from collections import defaultdict

import numpy as np

from rank4class_data.validation import DataError, atomic_output, check_range, require_file

WORDNET_DIR = "/usr/share/wordnet"
WORDNET_INSTALL = "install it with `apt-get install wordnet-base`"
NOUN_FILE = "data.noun"
HYPERNYM = "@"  # '@i' (instance hypernym) is a different pointer symbol and is ignored.

_OFFSET = re.compile(r"\d{8}")
_MARKER = re.compile(r"\([^()]*\)$")  # syntactic marker such as "(a)"; only adjectives carry one


@dataclasses.dataclass
class Synset:
  """One noun synset of a WordNet data file.

  Attributes:
    offset: 8-digit synset offset as written, e.g. "02084071"; unique within the file.
    lemmas: Words in file order, with '_' for spaces as in the file and any "(...)" marker stripped.
    gloss: Everything after '|', stripped: the definition, then `; "example"` sentences.
    hypernyms: Offsets named by the synset's '@' pointers, in file order ('@i' pointers left out).
  """

  offset: str
  lemmas: list[str]
  gloss: str
  hypernyms: list[str]


@dataclasses.dataclass
class WordNetConfig:
  """Which hypernym classes `build_hypernym_task` keeps and how it splits them.

  Attributes:
    data_dir: Folder holding `data.noun`.
    min_members: Keep classes with at least this many member synsets (>= 1).
    max_classes: If set, keep only this many of the largest kept classes (ties by offset), for quick runs.
    test_fraction: Per seen class, share of members held out for test, in [0, 1); at least one member stays
      in train.
    zero_shot_fraction: Share of kept classes held out entirely, in [0, 1); their members form the zero-shot
      split.
    seed: Seed of `np.random.default_rng` for both draws.
  """

  data_dir: str = WORDNET_DIR
  min_members: int = 10
  max_classes: int | None = None
  test_fraction: float = 0.2
  zero_shot_fraction: float = 0.1
  seed: int = 0


@dataclasses.dataclass
class HypernymTask:
  """Glosses labelled with their hypernym: seen classes split into train/test, plus zero-shot classes.

  Attributes:
    class_names: Seen classes in id order (sorted), e.g. "canine.02083346".
    class_texts: "lemma, lemma: gloss" of each seen class, same order.
    train_texts: Glosses of training synsets.
    train_labels: int64 [n_train], ids into `class_names`.
    test_texts: Glosses of test synsets (of the seen classes).
    test_labels: int64 [n_test], ids into `class_names`.
    zero_shot_class_names: Held-out classes in id order (sorted), disjoint from `class_names`.
    zero_shot_class_texts: Their class texts, same order.
    zero_shot_texts: Glosses of all members of the held-out classes.
    zero_shot_labels: int64 [n_zero_shot], ids into `zero_shot_class_names`.
  """

  class_names: list[str]
  class_texts: list[str]
  train_texts: list[str]
  train_labels: np.ndarray
  test_texts: list[str]
  test_labels: np.ndarray
  zero_shot_class_names: list[str]
  zero_shot_class_texts: list[str]
  zero_shot_texts: list[str]
  zero_shot_labels: np.ndarray


def _parse_line(path: str, text: str, row: int, line: int) -> Synset:
  """Parses one data line of a noun file; `row` and `line` locate it for errors."""

  def error(problem: str, field: str, expected: str) -> DataError:
    return DataError(path, problem, row=row, line=line, field=field, expected=expected)

  head, bar, gloss = text.partition("|")
  if not bar:
    raise error("no '|' before the gloss", "gloss", "'| <gloss>' at the end of the line")
  fields = head.split()
  if len(fields) < 4:
    raise error(f"{len(fields)} fields before '|'", "w_cnt",
                "synset_offset lex_filenum ss_type w_cnt word lex_id ... p_cnt ...")
  offset, lex_filenum, ss_type, w_cnt = fields[:4]
  if not _OFFSET.fullmatch(offset):
    raise error(f"synset offset {offset!r}", "synset_offset", "8 decimal digits")
  if not re.fullmatch(r"\d{2}", lex_filenum):
    raise error(f"lexicographer file number {lex_filenum!r}", "lex_filenum", "2 decimal digits")
  if ss_type != "n":
    raise error(f"synset type {ss_type!r}", "ss_type", "'n' (a noun file)")
  if not re.fullmatch(r"[0-9a-fA-F]{2}", w_cnt) or int(w_cnt, 16) == 0:
    raise error(f"word count {w_cnt!r}", "w_cnt", "a 2-digit hexadecimal number > 0")
  num_words = int(w_cnt, 16)
  p_cnt_at = 4 + 2 * num_words
  if len(fields) <= p_cnt_at:
    raise error(f"{len(fields) - 4} fields after w_cnt {w_cnt}", "word",
                f"{num_words} word/lex_id pairs, then p_cnt")
  lemmas = [_MARKER.sub("", word) for word in fields[4:p_cnt_at:2]]
  p_cnt = fields[p_cnt_at]
  if not re.fullmatch(r"\d{3}", p_cnt):
    raise error(f"pointer count {p_cnt!r}", "p_cnt", "a 3-digit decimal number")
  pointers = fields[p_cnt_at + 1:]
  if len(pointers) != 4 * int(p_cnt):
    raise error(f"{len(pointers)} fields after p_cnt {p_cnt}", "ptr",
                f"{int(p_cnt)} pointers of 4 fields (symbol offset pos source/target)")
  hypernyms = []
  for i in range(0, len(pointers), 4):
    symbol, target, pos, _ = pointers[i:i + 4]
    if not _OFFSET.fullmatch(target):
      raise error(f"pointer target {target!r}", "ptr", "an 8-digit synset offset")
    if symbol == HYPERNYM:
      if pos != "n":
        raise error(f"hypernym {target} has part of speech {pos!r}", "ptr", "'n'")
      hypernyms.append(target)
  gloss = gloss.strip()
  if not gloss:
    raise error("empty gloss", "gloss", "a definition after '|'")
  return Synset(offset=offset, lemmas=lemmas, gloss=gloss, hypernyms=hypernyms)


def read_noun_synsets(path: str) -> dict[str, Synset]:
  """Reads a WordNet noun data file (`wndb(5WN)` format) into its synsets.

  Lines starting with two spaces (the licence header) and blank lines are skipped. A data line reads
  `synset_offset lex_filenum ss_type w_cnt word lex_id [word lex_id...] p_cnt [ptr...] | gloss`, with w_cnt
  hexadecimal, p_cnt a 3-digit decimal and each pointer `pointer_symbol synset_offset pos source/target`.

  Args:
    path: The data file, e.g. /usr/share/wordnet/data.noun.

  Returns:
    Synsets by offset, in file order.

  Raises:
    FileNotFoundError: when the file is missing, with the command that installs it.
    DataError: for a malformed line, a repeated offset, or a hypernym ('@') offset the file lacks, naming the
      data row and line.
  """
  require_file(path, WORDNET_INSTALL)
  synsets: dict[str, Synset] = {}
  where: dict[str, tuple[int, int]] = {}
  row = 0
  with open(path, encoding="utf-8") as f:
    for line, text in enumerate(f, start=1):
      if text.startswith("  ") or not text.strip():
        continue
      row += 1
      synset = _parse_line(path, text, row, line)
      if synset.offset in synsets:
        first_line = where[synset.offset][1]
        raise DataError(path, f"synset offset {synset.offset} repeated (first on line {first_line})", row=row,
                        line=line, field="synset_offset", expected="unique offsets")
      synsets[synset.offset] = synset
      where[synset.offset] = (row, line)
  for synset in synsets.values():
    for hypernym in synset.hypernyms:
      if hypernym not in synsets:
        row, line = where[synset.offset]
        raise DataError(path, f"hypernym {hypernym} of synset {synset.offset} is not in the file", row=row,
                        line=line, field="ptr", expected="'@' pointers to synsets of this file")
  return synsets


def class_name(synset: Synset) -> str:
  """`<first lemma>.<offset>`, e.g. "canine.02083346": the unique name of a hypernym class."""
  return f"{synset.lemmas[0]}.{synset.offset}"


def class_text(synset: Synset) -> str:
  """The hypernym's lemmas (underscores as spaces, comma-joined), ": ", and its gloss."""
  return ", ".join(lemma.replace("_", " ") for lemma in synset.lemmas) + ": " + synset.gloss


def _round_half_up(x: float) -> int:
  return int(math.floor(x + 0.5))


def _check_config(config: WordNetConfig) -> None:
  check_range("min_members", config.min_members, 1, integer=True)
  if config.max_classes is not None:
    check_range("max_classes", config.max_classes, 1, integer=True)
  for name in ("test_fraction", "zero_shot_fraction"):
    check_range(name, getattr(config, name), 0.0, 1.0, high_inclusive=False)


def build_hypernym_task(config: WordNetConfig) -> HypernymTask:
  """Builds the hypernym classification task from `config.data_dir`/data.noun (see the module docstring).

  Args:
    config: Class filter, split fractions and seed.

  Returns:
    Seen classes with train/test glosses, and held-out classes with their zero-shot glosses.

  Raises:
    ValueError: for a config value out of range.
    FileNotFoundError: when data.noun is missing, with the command that installs it.
    DataError: for a malformed data file.
  """
  _check_config(config)
  synsets = read_noun_synsets(os.path.join(config.data_dir, NOUN_FILE))
  members: dict[str, list[str]] = defaultdict(list)
  for synset in synsets.values():
    if synset.hypernyms:
      members[synset.hypernyms[0]].append(synset.offset)
  kept = [offset for offset, group in members.items() if len(group) >= config.min_members]
  if config.max_classes is not None:
    kept = sorted(kept, key=lambda offset: (-len(members[offset]), offset))[:config.max_classes]
  kept.sort(key=lambda offset: class_name(synsets[offset]))

  rng = np.random.default_rng(config.seed)
  num_zero_shot = min(_round_half_up(config.zero_shot_fraction * len(kept)), max(len(kept) - 1, 0))
  zero_shot_ids = set(rng.permutation(len(kept))[:num_zero_shot].tolist())
  seen = [offset for i, offset in enumerate(kept) if i not in zero_shot_ids]
  zero_shot = [offset for i, offset in enumerate(kept) if i in zero_shot_ids]

  split_of: dict[str, tuple[str, int]] = {}  # member offset -> (split, class id)
  for label, offset in enumerate(seen):
    group = members[offset]
    num_test = min(_round_half_up(config.test_fraction * len(group)), len(group) - 1)
    test = set(rng.permutation(len(group))[:num_test].tolist())
    for i, member in enumerate(group):
      split_of[member] = ("test" if i in test else "train", label)
  for label, offset in enumerate(zero_shot):
    for member in members[offset]:
      split_of[member] = ("zero_shot", label)

  texts: dict[str, list[str]] = {"train": [], "test": [], "zero_shot": []}
  labels: dict[str, list[int]] = {"train": [], "test": [], "zero_shot": []}
  for offset, synset in synsets.items():
    if offset in split_of:
      split, label = split_of[offset]
      texts[split].append(synset.gloss)
      labels[split].append(label)
  return HypernymTask(
      class_names=[class_name(synsets[offset]) for offset in seen],
      class_texts=[class_text(synsets[offset]) for offset in seen],
      train_texts=texts["train"], train_labels=np.asarray(labels["train"], np.int64),
      test_texts=texts["test"], test_labels=np.asarray(labels["test"], np.int64),
      zero_shot_class_names=[class_name(synsets[offset]) for offset in zero_shot],
      zero_shot_class_texts=[class_text(synsets[offset]) for offset in zero_shot],
      zero_shot_texts=texts["zero_shot"], zero_shot_labels=np.asarray(labels["zero_shot"], np.int64))


def write_task_files(task: HypernymTask, folder: str, max_per_class: int | None = None) -> dict[str, str]:
  """Writes the task as a user's files would be (the README's many-class walk-through): `train.csv` and
  `test.csv` (columns text, label: class names), `classes.csv` (columns class, text: the seen classes' texts),
  `new_classes.csv` and `new.csv` (the held-out classes' texts and their glosses), `new.txt` (those glosses,
  one a line). With `max_per_class`, each class keeps its first that many train, test and new glosses.

  Returns:
    {file stem: path}. Every file is written whole or not at all.
  """
  def capped(texts: list[str], labels: np.ndarray, names: list[str]) -> list[tuple[str, str]]:
    kept, seen = [], defaultdict(int)
    for text, label in zip(texts, labels.tolist(), strict=True):
      if max_per_class is None or seen[label] < max_per_class:
        seen[label] += 1
        kept.append((text, names[label]))
    return kept

  tables = {
      "train": (("text", "label"), capped(task.train_texts, task.train_labels, task.class_names)),
      "test": (("text", "label"), capped(task.test_texts, task.test_labels, task.class_names)),
      "classes": (("class", "text"), list(zip(task.class_names, task.class_texts, strict=True))),
      "new_classes": (("class", "text"), list(zip(task.zero_shot_class_names, task.zero_shot_class_texts,
                                                  strict=True))),
      "new": (("text", "label"),
              capped(task.zero_shot_texts, task.zero_shot_labels, task.zero_shot_class_names)),
  }
  os.makedirs(folder, exist_ok=True)
  paths = {}
  for stem, (header, rows) in tables.items():
    paths[stem] = os.path.join(folder, f"{stem}.csv")
    with atomic_output(paths[stem]) as f:
      writer = csv.writer(f, lineterminator="\n")
      writer.writerow(header)
      writer.writerows(rows)
  paths["new_lines"] = os.path.join(folder, "new.txt")
  with atomic_output(paths["new_lines"]) as f:
    f.write("".join(" ".join(text.split()) + "\n" for text, _ in tables["new"][1]))
  return paths
