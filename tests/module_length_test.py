"""Keeps the toolkit's modules short: every module of the six packages is at most `MAX_MODULE_LINES` lines,
every binary (a module of rank4class_cli/binaries/) at most `MAX_BINARY_LINES`: a binary defines its flags and
calls the library, and a longer module is split by concept (its public names re-exported where callers import
them).

`OVER_THE_LIMIT` names the modules still being split; each must still be over the limit, so the list shrinks
as they are.

Pure Python: no TensorFlow import, so it runs in well under a second.
"""

from __future__ import annotations

import pathlib

from absl.testing import absltest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("rank4class", "pairwise", "rank4class_data", "rank4class_encoders", "rank4class_engine",
            "rank4class_cli")
BINARY_FOLDER = "rank4class_cli/binaries"
MAX_MODULE_LINES = 500
MAX_BINARY_LINES = 250
# Modules over the limit while they are being split (none).
OVER_THE_LIMIT = frozenset()


def limit_of(path: str) -> int:
  """The most lines the module at `path` (relative to the repository, with /) may have."""
  return MAX_BINARY_LINES if path.startswith(BINARY_FOLDER + "/") else MAX_MODULE_LINES


def long_modules(root: pathlib.Path = ROOT) -> dict[str, int]:
  """Path -> line count of every module of the packages over its limit."""
  found = {}
  for package in PACKAGES:
    for file in sorted((root / package).rglob("*.py")):
      path = file.relative_to(root).as_posix()
      lines = len(file.read_text(encoding="utf-8").splitlines())
      if lines > limit_of(path):
        found[path] = lines
  return found


class LimitTest(absltest.TestCase):

  def test_a_binary_has_the_smaller_limit(self):
    self.assertEqual(limit_of("rank4class_cli/binaries/train_main.py"), MAX_BINARY_LINES)
    self.assertEqual(limit_of("rank4class_cli/train_flags.py"), MAX_MODULE_LINES)
    self.assertEqual(limit_of("rank4class_engine/loop/trainer.py"), MAX_MODULE_LINES)

  def test_a_long_module_is_named_with_its_length(self):
    root = pathlib.Path(self.create_tempdir().full_path)
    (root / "rank4class_cli" / "binaries").mkdir(parents=True)
    (root / "rank4class_cli" / "binaries" / "long_main.py").write_text("x = 1\n" * (MAX_BINARY_LINES + 1))
    (root / "rank4class_cli" / "short.py").write_text("x = 1\n" * (MAX_BINARY_LINES + 1))
    self.assertEqual(long_modules(root), {"rank4class_cli/binaries/long_main.py": MAX_BINARY_LINES + 1})


class ModuleLengthTest(absltest.TestCase):

  def test_modules_and_binaries_are_short(self):
    over = {path: lines for path, lines in long_modules().items() if path not in OVER_THE_LIMIT}
    self.assertEqual(over, {}, f"modules over {MAX_MODULE_LINES} lines or binaries over {MAX_BINARY_LINES}: "
                     "split them by concept (a binary: flag tables and result printing into rank4class_cli "
                     "modules or the library)")

  def test_the_modules_being_split_are_still_over_the_limit(self):
    long = long_modules()
    for path in sorted(OVER_THE_LIMIT):
      self.assertTrue((ROOT / path).is_file(), msg=path)
      self.assertIn(path, long, msg=f"{path} is within its limit now: remove it from OVER_THE_LIMIT")


if __name__ == "__main__":
  absltest.main()
