"""The documents and code speak of the product: versions, commits and dates, never of how it was made.

A reader can look up a version, a commit or a date, and no other name for when a change was made, so the words
of any other such name are refused in README.md, CHANGELOG.md, CITATION.cff, docs/**/*.md (the user guide and
the references too) and every .py file of the packages, bench/ and scripts/. Write the date ("2026-11-26"),
the commit ("264370b") or the version instead. Pure text scanning.
"""

import pathlib
import re
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Words about how the project was made, not about the product. Kept precise: "stop" alone (preemption, early
# stopping), "issue" as a verb and TensorFlow's Session are product vocabulary and must not match.
PATTERNS = (
    r"\bstops?[- ]?#?\d+",  # a numbered milestone, with or without a hyphen, plural too
    r"\bissues?[- ]?#?\d+",  # a numbered ticket, with or without "#"
    r"\b(?:this|next|previous|last) stop\b",  # a milestone named by its place in the sequence
    r"\bhelpers?(?:'s?|s')? (?:sessions?|runs?|jobs?|studies|training|tests?|editing)\b",
    r"\bother helpers\b",
    r"\b(?:previous|next|another|other|this|my|earlier|later) sessions?(?:'s?|s')?(?=\W|$)",
    r"\b(?:between|across) sessions\b",
    r"\bin the session\b",
    r"\bmy own\b",
    r"\bthe (?:engine )?issue(?:'s| gives| names| measured| asks| says)",
)
REGEXES = tuple(re.compile(pattern, re.IGNORECASE) for pattern in PATTERNS)

# Lines allowed to keep a match: (path, the line's text, stripped). Empty, and to stay so: rewrite the line
# instead (test_allow_list_has_no_stale_entries fails on an entry whose line is gone).
ALLOWED: frozenset[tuple[str, str]] = frozenset()

PACKAGES = ("rank4class", "rank4class_data", "rank4class_encoders", "rank4class_engine",
            "rank4class_cli", "pairwise")


def scanned_files(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
  """README.md, CHANGELOG.md, CITATION.cff, docs/**/*.md, and every .py file of the packages (any top-level
  package too), bench/ and scripts/."""
  files = [root / "README.md", root / "CHANGELOG.md", root / "CITATION.cff",
           *sorted((root / "docs").rglob("*.md"))]
  packages = set(PACKAGES) | {p.parent.name for p in root.glob("*/__init__.py") if p.parent.name != "tests"}
  for folder in sorted(packages) + ["bench", "scripts"]:
    files += sorted((root / folder).rglob("*.py"))
  return [f for f in files if f.is_file()]


def process_words(text: str) -> list[tuple[int, str, str]]:
  """(line number, matched words, the line stripped) for each line that speaks of how the project was made."""
  hits = []
  for number, line in enumerate(text.splitlines(), 1):
    for regex in REGEXES:
      match = regex.search(line)
      if match:
        hits.append((number, match.group(0), line.strip()))
        break
  return hits


def tree_hits(root: pathlib.Path = ROOT) -> list[tuple[str, int, str, str]]:
  hits = []
  for path in scanned_files(root):
    relative = path.relative_to(root).as_posix()
    for number, words, line in process_words(path.read_text(encoding="utf-8")):
      hits.append((relative, number, words, line))
  return hits


class ProcessVocabularyTest(unittest.TestCase):

  def test_the_patterns_catch_process_words(self):
    for text in ("Re-measured at stop 17", "the stop-32 default", "no GPU was lent to stops 32-35",
                 "Issue 25 item 4.", "(issue #26)", "what this stop changed", "to trim at the next stop",
                 "shared with a helper's runs", "while other helpers' jobs ran",
                 "another session's WordNet runs",
                 "The previous session's run", "differed within noise between sessions", "my own test runs",
                 "The issue's bar", "since the engine issue's clean-up"):
      self.assertTrue(process_words(text), text)

  def test_the_patterns_leave_product_vocabulary_alone(self):
    for text in ("the loop stops after the current execution", "The stop's step is checkpointed.",
                 "early stopping after 5 validations", "tf.compat.v1.Session() runs the graph",
                 "with tf.compat.v1.Session() as session:", "the export issues one request per batch",
                 "a test helper for ELWC lists", "the sibling benchmarks' helpers import",
                 "stop at one step, checkpoint it together", "--preemption_grace_seconds=20"):
      self.assertFalse(process_words(text), text)

  def test_the_scan_covers_docs_packages_bench_and_scripts(self):
    scanned = {path.relative_to(ROOT).as_posix() for path in scanned_files()}
    for expected in ("README.md", "CHANGELOG.md", "docs/RESULTS.md", "docs/BENCHMARKS.md",
                     "docs/guide/README.md", "docs/guide/many_classes.md", "docs/reference/cli.md",
                     "rank4class/training/train_config.py", "pairwise/ranksvm/ranksvm.py",
                     "bench/cli_vs_bare_fit.py", "scripts/gen_build.py"):
      self.assertIn(expected, scanned)

  def test_no_process_words_in_docs_or_code(self):
    new = [f"{path}:{number}: [{words}] {line}" for path, number, words, line in tree_hits()
           if (path, line) not in ALLOWED]
    self.assertEqual(new, [], "Speak of the product: a date, a commit or a version, not how it was made "
                     "(stop N, issue N, session, helper):\n" + "\n".join(new))

  def test_allow_list_has_no_stale_entries(self):
    found = {(path, line) for path, _, _, line in tree_hits()}
    stale = sorted(entry for entry in ALLOWED if entry not in found)
    self.assertEqual(stale, [], "These lines were fixed or changed: delete their entries from ALLOWED")


if __name__ == "__main__":
  unittest.main()
