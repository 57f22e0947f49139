"""One path to the terminal. Library modules write lines through `rank4class_data.messages` (`say` on stderr,
`out` for a result on stdout) and log a developer's details to their stdlib logger
(`logging.getLogger(__name__)`); absl's logging is the binaries' concern. The binaries write through
`rank4class_cli.terminal` (`out`, `err`), which goes through `messages` too. This test reads every library
module and every binary (`ast`) and fails naming file and line of a `print(` or a `sys.stdout.write` /
`sys.stderr.write` outside those two modules, and of an import of absl's logging in the library.

`rank4class_cli/launch.py` is not a binary: the console scripts' entry point imports the standard library only
(it answers `--help` without TensorFlow), so it writes the stored help text to `sys.stdout` itself.

Not flagged: writing to a stream handed in by the caller (the progress line's `stream`, rewritten in place on
a terminal and defaulting to `sys.stderr` when it writes; a study's `stream`), which is how tests and callers
capture those lines.
"""

import ast
import pathlib

from absl.testing import absltest

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIBRARY_PACKAGES = ("rank4class", "rank4class_data", "rank4class_engine", "rank4class_encoders", "pairwise")
# The one library module that writes to sys.stdout and sys.stderr.
LIBRARY_WRITER = "rank4class_data/messages.py"
# The binaries (docs/ARCHITECTURE.md: every module of rank4class_cli/binaries/, and the flag plumbing and the
# terminal module beside them) and the one of them that writes.
BINARY_FOLDER = "rank4class_cli/binaries"
BINARY_MODULES = ("rank4class_cli/cli.py", "rank4class_cli/model_flags.py", "rank4class_cli/terminal.py")
BINARY_WRITER = "rank4class_cli/terminal.py"


def _is_std_write(node: ast.AST) -> bool:
  """`sys.stdout.write` or `sys.stderr.write`, called or passed on."""
  return (isinstance(node, ast.Attribute) and node.attr == "write" and isinstance(node.value, ast.Attribute)
          and node.value.attr in ("stdout", "stderr") and isinstance(node.value.value, ast.Name)
          and node.value.value.id == "sys")


def _imports_absl_logging(node: ast.AST) -> bool:
  if isinstance(node, ast.Import):
    return any(alias.name == "absl.logging" or alias.name.startswith("absl.logging.") for alias in node.names)
  if isinstance(node, ast.ImportFrom) and node.module:
    return (node.module == "absl" and any(alias.name == "logging" for alias in node.names)
            or node.module == "absl.logging" or node.module.startswith("absl.logging."))
  return False


def terminal_writes(source: str, path: str, absl_logging: bool = True) -> list[str]:
  """`path:line: what` for each `print(`, `sys.std*.write` and (with `absl_logging`) import of absl's
  logging in `source`."""
  found = []
  for node in ast.walk(ast.parse(source, path)):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
      found.append((node.lineno, "print("))
    elif _is_std_write(node):
      found.append((node.lineno, f"sys.{node.value.attr}.write"))
    elif absl_logging and _imports_absl_logging(node):
      found.append((node.lineno, "absl logging import"))
  return [f"{path}:{line}: {what}" for line, what in sorted(found)]


def _scan(paths: list[pathlib.Path], allowed: str, absl_logging: bool) -> list[str]:
  found = []
  for path in paths:
    relative = path.relative_to(ROOT).as_posix()
    if relative != allowed:
      found.extend(terminal_writes(path.read_text(encoding="utf-8"), relative, absl_logging))
  return sorted(found)


def library_terminal_writes() -> list[str]:
  return _scan([path for package in LIBRARY_PACKAGES for path in sorted((ROOT / package).rglob("*.py"))],
               LIBRARY_WRITER, absl_logging=True)


def binary_terminal_writes() -> list[str]:
  paths = [*sorted((ROOT / BINARY_FOLDER).glob("*.py")), *(ROOT / module for module in BINARY_MODULES)]
  return _scan(paths, BINARY_WRITER, absl_logging=False)


class TerminalOutputTest(absltest.TestCase):

  def test_library_writes_through_messages_and_logs_through_stdlib_logging(self):
    self.assertEqual(library_terminal_writes(), [])

  def test_binaries_write_through_the_terminal_module(self):
    self.assertEqual(binary_terminal_writes(), [])

  def test_the_scan_finds_each_kind_of_write(self):
    source = ("import sys\n"
              "from absl import logging\n"
              "import absl.logging as absl_logging\n"
              "print('x')\n"
              "sys.stderr.write('y\\n')\n"
              "warn = sys.stdout.write\n"
              "stream = sys.stderr\n"
              "stream.write('z\\n')\n"
              "import logging\n")
    self.assertEqual(terminal_writes(source, "m.py"), [
        "m.py:2: absl logging import", "m.py:3: absl logging import", "m.py:4: print(",
        "m.py:5: sys.stderr.write", "m.py:6: sys.stdout.write"])
    self.assertEqual(terminal_writes(source, "m.py", absl_logging=False),
                     ["m.py:4: print(", "m.py:5: sys.stderr.write", "m.py:6: sys.stdout.write"])


if __name__ == "__main__":
  absltest.main()
