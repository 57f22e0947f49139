"""The library's messages name settings as config fields, never as flags: the library is also called from
Python, where flags do not exist, and the binaries write a backticked field as their flag
(`rank4class_cli.cli.flag_words`). This test reads every string of the library packages (docstrings aside)
and fails naming file and line of a `--name`, unless the string is a full command (a binary's or pip's)."""

import ast
import pathlib
import re

import tensorflow as tf

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIBRARY_PACKAGES = ("rank4class", "rank4class_data", "rank4class_engine", "rank4class_encoders", "pairwise")
# A full command, whose flags a string may name: a toolkit binary, pip or the install script followed by
# its flags ("rank4class-embedding-cache --clear", "pip install --no-deps x", "install.sh --stack=current").
FULL_COMMAND = re.compile(r"(\brank4class-[a-z-]+|\bpairwise-[a-z]+|\bpip install|scripts/install\.sh)"
                          r"(?: +--?[\w.-]+(?:=[^\s`]*)?)+")
FLAG = re.compile(r"(?<![\w-])--(?:[a-z][a-z0-9_]*|\{)")


def _docstrings(tree: ast.AST) -> set[int]:
  """The ids of the docstring nodes of a module and its classes and functions."""
  ids = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
      first = node.body[0]
      if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        ids.add(id(first.value))
  return ids


def _strings(tree: ast.AST):
  """(line, text) of each string literal outside docstrings; an f-string's values are written `{}`."""
  docstrings = _docstrings(tree)
  inside_fstrings = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.JoinedStr):
      inside_fstrings.update(id(value) for value in node.values)
      yield node.lineno, "".join(value.value if isinstance(value, ast.Constant) else "{}"
                                 for value in node.values)
  for node in ast.walk(tree):
    if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        and id(node) not in inside_fstrings):
      yield node.lineno, node.value


def flag_names_in_library(packages=LIBRARY_PACKAGES) -> list[str]:
  """`path:line: text` of each library string naming a flag outside a full command."""
  found = []
  for package in packages:
    for path in sorted((ROOT / package).rglob("*.py")):
      relative = path.relative_to(ROOT).as_posix()
      tree = ast.parse(path.read_text(encoding="utf-8"))
      for line, text in _strings(tree):
        if FLAG.search(FULL_COMMAND.sub("", text)):
          found.append(f"{relative}:{line}: {text!r}")
  return sorted(set(found))


class LibraryMessagesTest(tf.test.TestCase):

  def test_library_strings_name_config_fields_not_flags(self):
    self.assertEqual(flag_names_in_library(), [])

  def test_the_scan_finds_a_flag_and_allows_full_commands(self):
    tree = ast.parse('"""Module doc: --doc_flag is fine."""\n'
                     'A = "set --text_mode=frozen"\n'
                     'B = f"name it with --{flag}"\n'
                     'C = "run rank4class-convert --input=x first; `pip install --no-deps y`"\n'
                     'D = "`text_mode`=frozen, ratio 2--3"\n'
                     'E = "the vocabulary (rank4class-convert), or --label_vocab"\n')
    flagged = [line for line, text in _strings(tree) if FLAG.search(FULL_COMMAND.sub("", text))]
    self.assertEqual(sorted(flagged), [2, 3, 6])


if __name__ == "__main__":
  tf.test.main()
