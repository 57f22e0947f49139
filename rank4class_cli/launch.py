"""The console scripts: each answers `--help` from `help.json` (the binaries' own help texts, stored by
`scripts/gen_help.py`) without importing TensorFlow, ~0.05 s instead of 6-9 s, and otherwise imports its
binary's module and runs it (`<module>.run()`).

Only the standard library is imported here: TensorFlow and the packages come with the binary's module, whose
package import runs the stack check first as always. tests/rank4class_cli/launch_test.py checks that every
console script of setup.py is listed here and that each stored text equals the one its binary prints.
"""

import gc
import importlib
import json
import os
import sys
from collections.abc import Callable

# Console script -> the module whose `run()` is the binary.
PROGRAMS = {
    "rank4class-convert": "rank4class_cli.binaries.convert_main",
    "rank4class-convert-encoder": "rank4class_cli.binaries.convert_encoder_main",
    "rank4class-embedding-cache": "rank4class_cli.binaries.embedding_cache_main",
    "rank4class-train": "rank4class_cli.binaries.train_main",
    "rank4class-evaluate": "rank4class_cli.binaries.evaluate_main",
    "rank4class-predict": "rank4class_cli.binaries.predict_main",
    "rank4class-export": "rank4class_cli.binaries.export_main",
    "rank4class-study": "rank4class_cli.binaries.study_main",
    "rank4class-many-class-study": "rank4class_cli.binaries.many_class_study_main",
    "pairwise-train": "rank4class_cli.binaries.pairwise_main",
    "pairwise-ranksvm": "rank4class_cli.binaries.ranksvm_main",
}
# The arguments that make a binary print its help (rank4class_cli.cli.HELP_ARGUMENTS, which imports
# TensorFlow; the launch test checks the two are equal).
HELP_ARGUMENTS = ("--help", "-h", "-?", "--helpshort", "--helpfull")
HELP_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "help.json")


def stored_help(program: str) -> str | None:
  """The stored help text of `program`, or None when help.json is missing or lacks it."""
  try:
    with open(HELP_FILE, encoding="utf-8") as f:
      return json.load(f).get(program)
  except (OSError, ValueError):
    return None


def launch(program: str) -> None:
  """Runs the console script `program` on `sys.argv`."""
  if any(arg in HELP_ARGUMENTS for arg in sys.argv[1:]):
    text = stored_help(program)
    if text is not None:
      sys.stdout.write(text)
      sys.exit(0)
  # The import allocates ~1M objects and frees almost none: the collector's passes over them are wasted (~0.5
  # s of CPU on 2 cores, a fifth of the start-up), so it is off until the import is done.
  gc.disable()
  try:
    binary = importlib.import_module(PROGRAMS[program])
  finally:
    gc.enable()
  # The ~1M objects TensorFlow's import leaves are never garbage; out of the collector's reach, its full
  # collections during the run cost ~0.3 s less per process (docs/BENCHMARKS.md).
  gc.freeze()
  binary.run()


def _script(program: str) -> Callable[[], None]:
  """The console script function of `program` (setup.py's entry points name these)."""

  def script() -> None:
    launch(program)

  return script


convert = _script("rank4class-convert")
convert_encoder = _script("rank4class-convert-encoder")
embedding_cache = _script("rank4class-embedding-cache")
train = _script("rank4class-train")
evaluate = _script("rank4class-evaluate")
predict = _script("rank4class-predict")
export = _script("rank4class-export")
study = _script("rank4class-study")
many_class_study = _script("rank4class-many-class-study")
pairwise_train = _script("pairwise-train")
pairwise_ranksvm = _script("pairwise-ranksvm")
