"""Keeps the library's functions short: every function or method in the six library packages (binaries
included) is at most `MAX_LINES` lines long, from its `def` to its last line, docstring included.

A longer one is allowed only when the line right above its `def` (or above its first decorator) is a comment
starting `# Long:` that says why splitting it would obscure it, e.g.
`# Long: one Transformer layer's steps in order; splitting them hides the data flow.`

Pure Python (`ast`): no TensorFlow import, so it runs in well under a second.
"""

from __future__ import annotations

import ast
import pathlib

from absl.testing import absltest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("rank4class", "pairwise", "rank4class_data", "rank4class_encoders", "rank4class_engine",
            "rank4class_cli")
MAX_LINES = 60
WAIVER = "# Long:"


def long_functions(source: str, path: str, max_lines: int = MAX_LINES) -> list[str]:
  """`path:line name (N lines)` for each function in `source` longer than `max_lines` without a waiver."""
  lines = source.splitlines()
  found = []
  for node in ast.walk(ast.parse(source, path)):
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      continue
    length = node.end_lineno - node.lineno + 1
    if length <= max_lines:
      continue
    first = min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])
    above = lines[first - 2].strip() if first > 1 else ""
    if above.startswith(WAIVER) and above[len(WAIVER):].strip():
      continue
    found.append(f"{path}:{node.lineno} {node.name} ({length} lines)")
  return found


class LongFunctionsTest(absltest.TestCase):

  def test_a_short_function_passes(self):
    self.assertEqual(long_functions("def f():\n  return 1\n", "m.py", max_lines=2), [])

  def test_a_long_function_is_named_with_its_line_and_length(self):
    source = "x = 1\n\ndef f():\n  a = 1\n  return a\n"
    self.assertEqual(long_functions(source, "m.py", max_lines=2), ["m.py:3 f (3 lines)"])

  def test_a_long_method_counts(self):
    source = "class C:\n  def f(self):\n    a = 1\n    return a\n"
    self.assertEqual(long_functions(source, "m.py", max_lines=2), ["m.py:2 f (3 lines)"])

  def test_a_comment_that_says_why_waives_it(self):
    source = "# Long: one formula.\ndef f():\n  a = 1\n  return a\n"
    self.assertEqual(long_functions(source, "m.py", max_lines=2), [])

  def test_the_comment_goes_above_the_first_decorator(self):
    above = "# Long: one formula.\n@staticmethod\ndef f():\n  a = 1\n  return a\n"
    between = "@staticmethod\n# Long: one formula.\ndef f():\n  a = 1\n  return a\n"
    self.assertEqual(long_functions(above, "m.py", max_lines=2), [])
    self.assertEqual(long_functions(between, "m.py", max_lines=2), ["m.py:3 f (3 lines)"])

  def test_a_comment_without_a_reason_does_not(self):
    source = "# Long:\ndef f():\n  a = 1\n  return a\n"
    self.assertEqual(long_functions(source, "m.py", max_lines=2), ["m.py:2 f (3 lines)"])


class LibraryFunctionLengthTest(absltest.TestCase):

  def test_library_functions_are_at_most_60_lines_or_say_why(self):
    offenders = []
    for package in PACKAGES:
      for path in sorted((ROOT / package).rglob("*.py")):
        offenders += long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    self.assertEqual(offenders, [], f"functions over {MAX_LINES} lines: split them into named steps, or put "
                     f"a `{WAIVER} <why>` comment right above the def (or its first decorator):\n"
                     + "\n".join(offenders))

  def test_packages_exist(self):
    for package in PACKAGES:
      self.assertTrue((ROOT / package / "__init__.py").exists(), package)


if __name__ == "__main__":
  absltest.main()
