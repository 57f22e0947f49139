"""Checks every module's imports (`ast`) against docs/ARCHITECTURE.md's table "What may import what".

Rules (each failure names the file, the line and the rule):
  layers: a library package imports only the packages below it (`MAY_IMPORT`); rank4class and pairwise never
    each other; inside each family a subpackage imports only the subpackages below it
    (`SUBPACKAGE_MAY_IMPORT`); no library module imports an experiment or a binary, and none imports
    rank4class_cli.
  binaries: the binaries (the modules of rank4class_cli/binaries/, and every module of rank4class_cli beside
    them but its entry points: cli.py, model_flags.py, a binary's flags and output), experiments
    (`EXPERIMENT_FOLDERS`), bench/ and scripts/ may import every
    library package; the binaries, bench/ and scripts/ import rank4class_cli (scripts/gen_help.py reads its
    list of programs), the experiments do not.
  cli: rank4class_cli's entry points (`launch.py`, `__init__.py`) import the standard library only. Their one
    late import of toolkit code is rank4class_cli.launch's `importlib.import_module` of a binary by name once
    `--help` is ruled out: a call, not an import statement, so nothing here exempts it.
  moved: no toolkit file imports a module by the deprecated old path of a moved module
    (rank4class_data.moved_modules.MOVED: `rank4class.modeling.image_augmentation` for
    `rank4class.modeling.image_encoder`); the aliases are for users.
  keras / tf_ranking: no module, tests/ included, imports `keras` (Keras 3) or `tensorflow_ranking`;
    TF-Ranking comes from rank4class_data.tf_ranking, the one module that loads it.
  stack first: no TensorFlow-family import (tensorflow, tensorflow_*, tf_keras) runs before the first import
    of a library package, whose `__init__` runs rank4class_data.stack.check_tensorflow_stack() (on the current
    stack it sets TF_USE_LEGACY_KERAS=1 before anything resolves tf.keras). A module inside a library package
    has its package's `__init__` run first; bench/ and scripts/ files must import the toolkit first
    themselves.

  late: the six packages import at the top of a module only; a third-party library is imported by the module
    that uses it, which the modules that do not need it do not import. The two exceptions (`LATE_IMPORTS`):
    rank4class_data/stack.py and tf_ranking.py import TensorFlow (and TF-Ranking) in functions, since the
    stack check must run before TensorFlow loads.

Imports inside functions (of bench/ and scripts/, and the two exceptions) count like the others: the layers
hold for them, and a TensorFlow-family import in a function needs a toolkit import before it in that function
(or its enclosing ones) or at module level. A bench/ sibling module (bench/ is sys.path[0] when a benchmark
runs) counts as a toolkit import when its own module-level imports start with one.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import pathlib
import re
import sys

import tensorflow as tf

import pairwise  # noqa: F401  With rank4class: fills moved_modules.MOVED with every package's old names.
import rank4class  # noqa: F401
from rank4class_data import moved_modules

ROOT = pathlib.Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"

# The library packages, bottom to top, and the toolkit packages each may import besides itself.
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "rank4class_data": (),
    "rank4class_engine": ("rank4class_data",),
    "rank4class_encoders": ("rank4class_data", "rank4class_engine"),
    "rank4class": ("rank4class_data", "rank4class_engine", "rank4class_encoders"),
    "pairwise": ("rank4class_data", "rank4class_engine", "rank4class_encoders"),
}
LIBRARY_PACKAGES = tuple(MAY_IMPORT)
# Inside each family, bottom to top: each subpackage and the subpackages of its family it may import besides
# itself (docs/ARCHITECTURE.md's table "What may import what, inside the two families").
SUBPACKAGE_MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "rank4class.modeling": (),
    "rank4class.inference": ("rank4class.modeling",),
    "rank4class.evaluation": ("rank4class.modeling", "rank4class.inference"),
    "rank4class.training": ("rank4class.modeling", "rank4class.inference", "rank4class.evaluation"),
    "rank4class.studies": ("rank4class.modeling", "rank4class.inference", "rank4class.evaluation",
                           "rank4class.training"),
    "pairwise.margin": (),
    "pairwise.ranksvm": (),
    "pairwise.studies": ("pairwise.margin", "pairwise.ranksvm"),
}
CLI_PACKAGE = "rank4class_cli"
TOOLKIT_PACKAGES = (*LIBRARY_PACKAGES, CLI_PACKAGE)
# Experiments: library-shaped modules above the library (docs/ARCHITECTURE.md's diagram): the studies/
# folders.
EXPERIMENT_FOLDERS = ("rank4class/studies", "pairwise/studies")
# The binaries: every module of this folder, and the flag plumbing and output beside it (every other module of
# rank4class_cli but its entry points).
BINARY_FOLDER = "rank4class_cli/binaries"
CLI_ENTRY_POINTS = ("rank4class_cli/__init__.py", "rank4class_cli/launch.py")
TOOL_FOLDERS = ("bench", "scripts")
TF_RANKING_MODULE = "rank4class_data/tf_ranking.py"
# The package modules that import inside functions: the stack check runs before TensorFlow loads.
LATE_IMPORTS = ("rank4class_data/stack.py", TF_RANKING_MODULE)
# What the table covers, and tests/ for the keras and tensorflow_ranking rules only.
CHECKED_FOLDERS = (*TOOLKIT_PACKAGES, *TOOL_FOLDERS, "tests")
STANDARD_LIBRARY = frozenset(sys.stdlib_module_names) | {"__future__"}

LIBRARY, BINARY, EXPERIMENT, TOOL, CLI, TEST, OTHER = ("library", "binary", "experiment", "tool", "cli",
                                                       "test", "other")


@dataclasses.dataclass(frozen=True)
class Violation:
  path: str
  line: int
  rule: str
  message: str

  def __str__(self) -> str:
    return f"{self.path}:{self.line}: [{self.rule}] {self.message}"


@dataclasses.dataclass(frozen=True)
class _Import:
  line: int
  module: str  # Dotted name of the imported module (a submodule when `from package import submodule`).
  scope: tuple[int, ...]  # ids of the enclosing functions, outermost first; () at module level.


def kind_of(path: str) -> str:
  """The row of the table a file (a path relative to the repository, with /) belongs to."""
  parts = path.split("/")
  if parts[0] == "tests":
    return TEST
  if parts[0] in TOOL_FOLDERS:
    return TOOL
  if path.startswith(BINARY_FOLDER + "/"):
    return BINARY
  if parts[0] == CLI_PACKAGE:
    return CLI if path in CLI_ENTRY_POINTS else BINARY
  if parts[0] in LIBRARY_PACKAGES:
    if any(path.startswith(folder + "/") for folder in EXPERIMENT_FOLDERS):
      return EXPERIMENT
    return LIBRARY
  return OTHER


def subpackage_of(module: str) -> str | None:
  """The subpackage of a dotted module name (`rank4class.modeling.model` -> `rank4class.modeling`), None for
  one outside them (a package's `__init__`)."""
  for subpackage in SUBPACKAGE_MAY_IMPORT:
    if module == subpackage or module.startswith(subpackage + "."):
      return subpackage
  return None


def module_path(module: str, root: pathlib.Path = ROOT) -> str | None:
  """The repository path of a toolkit module's file (`a.b` -> a/b.py or a/b/__init__.py), None if none."""
  relative = module.replace(".", "/")
  for candidate in (f"{relative}.py", f"{relative}/__init__.py"):
    if (root / candidate).is_file():
      return candidate
  return None


def _imports(tree: ast.Module, path: str, root: pathlib.Path) -> list[_Import]:
  """Every Import / ImportFrom node, in source order, with the functions around it."""
  found = []
  package = path.split("/")[:-1]

  def visit(node: ast.AST, scope: tuple[int, ...]) -> None:
    for child in ast.iter_child_nodes(node):
      if isinstance(child, ast.Import):
        found.extend(_Import(child.lineno, alias.name, scope) for alias in child.names)
      elif isinstance(child, ast.ImportFrom):
        base = child.module or ""
        if child.level:
          base = ".".join([*package[:len(package) - child.level + 1], *([base] if base else [])])
        for alias in child.names:
          submodule = f"{base}.{alias.name}" if base else alias.name
          # `from package import submodule` imports the submodule; `from module import name` the module.
          found.append(_Import(child.lineno,
                               submodule if module_path(submodule, root) or submodule in moved_modules.MOVED
                              else base, scope))
      inner = (*scope, id(child)) if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                        ast.Lambda)) else scope
      visit(child, inner)

  visit(tree, ())
  return sorted(found, key=lambda i: i.line)


def _is_tensorflow(module: str) -> bool:
  top = module.split(".")[0]
  return top in ("tensorflow", "tf_keras") or top.startswith("tensorflow_")


@functools.cache
def _sibling_starts_toolkit(path: str, root: pathlib.Path) -> bool:
  """Whether a bench/ or scripts/ module's first module-level toolkit-or-TensorFlow import is a toolkit
  one."""
  tree = ast.parse((root / path).read_text(encoding="utf-8"))
  for item in _imports(tree, path, root):
    if item.scope:
      continue
    if item.module.split(".")[0] in LIBRARY_PACKAGES:
      return True
    if _is_tensorflow(item.module):
      return False
  return False


def _sibling(module: str, path: str, root: pathlib.Path) -> str | None:
  """bench/x.py's `import y` of bench/y.py (its folder is sys.path[0] when it runs): that file's path."""
  folder = path.rsplit("/", 1)[0]
  candidate = f"{folder}/{module}.py"
  return candidate if "." not in module and (root / candidate).is_file() else None


def check_source(source: str, path: str, root: pathlib.Path = ROOT) -> list[Violation]:
  """The violations of the table in one file's `source`; `path` (relative to `root`) decides its row."""
  kind = kind_of(path)
  if kind == OTHER:
    return []
  tree = ast.parse(source, filename=path)
  imports = _imports(tree, path, root)
  own = path.split("/")[0]
  own_subpackage = subpackage_of(path.removesuffix(".py").replace("/", "."))
  violations = []

  def add(item: _Import, rule: str, message: str) -> None:
    late = " (inside a function)" if item.scope else ""
    violations.append(Violation(path, item.line, rule, f"imports {item.module}{late}: {message}"))

  for item in imports:
    top = item.module.split(".")[0]
    if item.scope and kind in (LIBRARY, BINARY, EXPERIMENT, CLI) and path not in LATE_IMPORTS:
      add(item, "late", "import at the top of the module; a library only some paths need goes in a module of "
          "its own that the other paths do not import")
      continue
    if top == "keras":
      add(item, "keras",
          "no module imports keras (Keras 3); use tf.keras, which the stack check makes Keras 2")
      continue
    if top == "tensorflow_ranking" and path != TF_RANKING_MODULE:
      add(item, "tf_ranking",
          f"TF-Ranking comes from rank4class_data.tf_ranking.tfr only ({TF_RANKING_MODULE})")
      continue
    if item.module in moved_modules.MOVED and top in TOOLKIT_PACKAGES and kind != TEST:
      add(item, "moved", f"an old path kept for users only; import {moved_modules.MOVED[item.module]}")
      continue
    if kind == TEST:
      continue
    if kind == CLI:
      if top not in STANDARD_LIBRARY and top != CLI_PACKAGE:
        add(item, "cli", "rank4class_cli imports the standard library only (launch imports a binary by name "
            "with importlib once --help is ruled out)")
      continue
    if top not in TOOLKIT_PACKAGES:
      continue  # The standard library, third-party libraries, bench/ siblings.
    target = module_path(item.module, root)
    target_kind = kind_of(target) if target else LIBRARY
    if kind == LIBRARY:
      if top in ("rank4class", "pairwise") and own in ("rank4class", "pairwise") and top != own:
        add(item, "layers", "rank4class and pairwise never import each other")
      elif top != own and top not in MAY_IMPORT[own]:
        allowed = ", ".join(MAY_IMPORT[own]) or "no other toolkit package"
        add(item, "layers", f"{own} imports only the packages below it ({allowed})")
      elif (own_subpackage and subpackage_of(item.module) not in (None, own_subpackage)
            and subpackage_of(item.module) not in SUBPACKAGE_MAY_IMPORT[own_subpackage]):
        allowed = ", ".join(SUBPACKAGE_MAY_IMPORT[own_subpackage]) or f"no other {own} subpackage"
        add(item, "layers", f"{own_subpackage} imports only the subpackages below it ({allowed})")
      elif target_kind in (EXPERIMENT, BINARY):
        what = "an experiment" if target_kind == EXPERIMENT else "a binary"
        add(item, "layers", f"a library module never imports {what} ({target}); the binary or the experiment "
            "composes the library instead")
    elif top == CLI_PACKAGE and kind not in (TOOL, BINARY):
      add(item, "binaries", "only the binaries, bench/ and scripts/ import rank4class_cli (the console "
          "scripts import binaries, not the reverse)")

  # Stack first: a module inside a library package has its package's __init__ (the stack check) run first.
  if kind in (TEST, CLI):
    return violations
  # rank4class_cli/binaries/__init__.py runs the stack check too; rank4class_cli's own __init__ does not.
  implicit = ((own in LIBRARY_PACKAGES or path.startswith(BINARY_FOLDER + "/"))
              and not path.endswith("/__init__.py"))

  def starts_toolkit(item: _Import) -> bool:
    if item.module.split(".")[0] in LIBRARY_PACKAGES:
      return True
    sibling = _sibling(item.module, path, root) if kind == TOOL else None
    return sibling is not None and sibling != path and _sibling_starts_toolkit(sibling, root)

  module_level_start = any(starts_toolkit(i) for i in imports if not i.scope)
  for index, item in enumerate(imports):
    if implicit or not _is_tensorflow(item.module):
      continue
    before = [i for i in imports[:index] if i.line < item.line]
    if not item.scope:
      started = any(starts_toolkit(i) for i in before if not i.scope)
    else:
      started = module_level_start or any(starts_toolkit(i) for i in before
                                          if i.scope == item.scope[:len(i.scope)])
    if not started:
      add(item, "stack first", "import a library package first (e.g. `import rank4class_data`): its __init__ "
          "runs the stack check, which must come before TensorFlow")
  return violations


def checked_files(root: pathlib.Path = ROOT) -> list[str]:
  return sorted(p.relative_to(root).as_posix() for folder in CHECKED_FOLDERS
                for p in (root / folder).rglob("*.py"))


def check_tree(root: pathlib.Path = ROOT) -> list[Violation]:
  return [v for path in checked_files(root) for v in check_source((root / path).read_text(encoding="utf-8"),
                                                                  path, root)]


def architecture_table(text: str) -> list[tuple[list[str], list[str]]]:
  """The rows of docs/ARCHITECTURE.md's "What may import what" table: (backticked names of the first column,
  backticked names of the second)."""
  section = text.split("## What may import what", 1)[1].split("\n## ", 1)[0]
  rows = []
  for line in section.splitlines():
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
    if len(cells) == 2 and not set(cells[0]) <= set("-: ") and cells[0] != "package":
      rows.append((re.findall(r"`([^`]+)`", cells[0]), re.findall(r"`([^`]+)`", cells[1])))
  return rows


class CheckerTest(tf.test.TestCase):
  """The checker on synthetic sources: one passing file, and one failing file per rule."""

  def _rules(self, source: str, path: str) -> list[tuple[int, str]]:
    return [(v.line, v.rule) for v in check_source(source, path)]

  def test_a_module_that_follows_the_table_passes(self):
    source = ("import os\n\nimport numpy as np\nimport tensorflow as tf\nfrom sklearn import linear_model\n\n"
              "from rank4class_data import stack\nfrom rank4class_engine.optimization import losses\n")
    self.assertEqual(self._rules(source, "rank4class_encoders/new_module.py"), [])
    self.assertEqual(self._rules("from pairwise.margin import pairs\n", "pairwise/new_module.py"), [])

  def test_a_package_importing_one_above_it_fails(self):
    violations = check_source("import os\nfrom rank4class_encoders import text_encoder\n",
                              "rank4class_engine/new_module.py")
    self.assertEqual([(v.path, v.line, v.rule) for v in violations], [("rank4class_engine/new_module.py", 2,
                                                                      "layers")])
    self.assertIn("rank4class_engine imports only the packages below it (rank4class_data)",
                  str(violations[0]))
    self.assertTrue(str(violations[0]).startswith("rank4class_engine/new_module.py:2: [layers] imports "
                                                  "rank4class_encoders.text_encoder"))

  def test_an_import_inside_a_function_counts(self):
    violations = check_source("def f():\n  import rank4class\n", "bench/new_bench.py")
    self.assertEqual([(v.line, v.rule) for v in violations], [])
    violations = check_source("import rank4class\n\n\ndef f():\n  import rank4class_cli.terminal\n",
                              "rank4class/new_module.py")
    self.assertEqual([(v.line, v.rule) for v in violations], [(5, "late")])
    self.assertIn("(inside a function)", violations[0].message)

  def test_a_package_module_imports_at_its_top_only(self):
    source = "import os\n\n\ndef f():\n  from sklearn import linear_model\n"
    for path in ("rank4class_encoders/new_module.py", "rank4class/studies/new_module.py",
                 "rank4class_cli/binaries/new_main.py", "rank4class_cli/launch.py"):
      self.assertEqual(self._rules(source, path), [(5, "late")], msg=path)
    self.assertEqual(self._rules(source, "scripts/new_script.py"), [])
    for path in LATE_IMPORTS:
      self.assertEqual(self._rules("def f():\n  import tensorflow\n", path), [], msg=path)

  def test_rank4class_and_pairwise_never_import_each_other(self):
    self.assertEqual(self._rules("from pairwise.margin import pairs\n", "rank4class/new_module.py"),
                     [(1, "layers")])
    self.assertEqual(self._rules("\nimport rank4class.modeling.model\n", "pairwise/new_module.py"),
                     [(2, "layers")])
    self.assertIn("never import each other", str(check_source("import pairwise\n", "rank4class/x.py")[0]))

  def test_a_library_module_never_imports_an_experiment_or_a_binary(self):
    experiment = check_source("from pairwise.studies import class_conversion\n", "pairwise/new_module.py")
    self.assertEqual([(v.line, v.rule) for v in experiment], [(1, "layers")])
    self.assertIn("an experiment (pairwise/studies/class_conversion.py)", experiment[0].message)
    study = check_source("from rank4class.studies import study\n", "rank4class/new_module.py")
    self.assertIn("an experiment (rank4class/studies/study.py)", study[0].message)
    binary = check_source("from rank4class_cli.binaries import train_main\n",
                          "rank4class/training/new_module.py")
    self.assertEqual([(v.line, v.rule) for v in binary], [(1, "layers")])
    # The same imports from a binary are fine: binaries compose the library and the experiments.
    self.assertEqual(self._rules("from pairwise.margin import runs\n"
                                 "from pairwise.studies import class_conversion\n"
                                 "from rank4class.studies import study\n",
                                 "rank4class_cli/binaries/new_main.py"), [])

  def test_a_rank4class_subpackage_imports_only_the_ones_below_it(self):
    self.assertEqual(self._rules("from rank4class.modeling import model\n"
                                 "from rank4class.evaluation import metrics\n",
                                 "rank4class/training/new_module.py"), [])
    violations = check_source("from rank4class.modeling import model\n"
                              "from rank4class.evaluation import metrics\n",
                              "rank4class/inference/new_module.py")
    self.assertEqual([(v.line, v.rule) for v in violations], [(2, "layers")])
    self.assertIn("rank4class.inference imports only the subpackages below it (rank4class.modeling)",
                  violations[0].message)
    self.assertEqual(self._rules("from rank4class.inference import served\n",
                                 "rank4class/modeling/new_module.py"),
                     [(1, "layers")])
    self.assertEqual(self._rules("from rank4class.training import train\n",
                                 "rank4class/studies/new_module.py"), [])

  def test_an_old_module_path_is_refused(self):
    source = "from rank4class.modeling import image_augmentation\nimport rank4class.image_augmentation\n"
    self.assertEqual(self._rules(source, "rank4class/training/new_module.py"), [(1, "moved"), (2, "moved")])
    self.assertEqual(self._rules("from rank4class import image_augmentation\n", "bench/new_bench.py"),
                     [(1, "moved")])
    # 0.8's flat rank4class_data modules (0.9 moved them into subpackages).
    source = ("from rank4class_data import tfrecords\nimport rank4class_data.row_cache\n"
              "from rank4class_data.convert import convert_to_tfrecord\n")
    self.assertEqual(self._rules(source, "rank4class/training/new_module.py"),
                     [(1, "moved"), (2, "moved"), (3, "moved")])
    self.assertEqual(self._rules("from rank4class_data.records import tfrecords\n", "scripts/new_script.py"),
                     [])
    # 0.8's flat rank4class_engine modules (0.9 moved them into subpackages).
    source = ("from rank4class_engine import trainer\nimport rank4class_engine.run_lock\n"
              "from rank4class_engine.losses import get\nfrom rank4class_engine import distribute\n")
    self.assertEqual(self._rules(source, "pairwise/margin/new_module.py"),
                     [(1, "moved"), (2, "moved"), (3, "moved")])
    self.assertEqual(self._rules("from rank4class_engine.loop import trainer\n", "bench/new_bench.py"), [])

  def test_a_binary_may_use_the_cli_whatever_package_it_comes_from(self):
    # rank4class_cli/binaries/convert_main.py (rank4class-convert, the data package's binary):
    # rank4class_cli.cli parses its flags, which the data package's library modules may not import.
    source = "from rank4class_data.conversion import convert\nfrom rank4class_cli import cli\n"
    self.assertEqual(kind_of("rank4class_cli/binaries/convert_main.py"), BINARY)
    self.assertEqual(kind_of("rank4class_cli/cli.py"), BINARY)
    self.assertEqual(kind_of("rank4class_cli/new_flags.py"), BINARY)  # Any module beside the entry points.
    self.assertEqual(self._rules(source, "rank4class_cli/binaries/convert_main.py"), [])
    self.assertEqual(self._rules(source, "rank4class_data/conversion/convert.py"), [(2, "layers")])

  def test_only_binaries_bench_and_scripts_import_the_console_scripts(self):
    self.assertEqual(self._rules("from rank4class_cli import launch\n", "scripts/new_script.py"), [])
    self.assertEqual(self._rules("from rank4class_cli import cli\n", "rank4class_cli/binaries/new_main.py"),
                     [])
    self.assertEqual(self._rules("from rank4class_cli import cli\n", "rank4class/studies/new_module.py"),
                     [(1, "binaries")])
    self.assertEqual(self._rules("from rank4class_cli import launch\n", "pairwise/new_module.py"),
                     [(1, "layers")])

  def test_the_console_scripts_import_the_standard_library_only(self):
    self.assertEqual(self._rules("import importlib\nimport json\nfrom rank4class_cli import terminal\n",
                                 "rank4class_cli/launch.py"), [])
    self.assertEqual(self._rules("import json\nimport numpy\ndef f():\n"
                                 "  from rank4class_engine.loop import trainer\n",
                                 "rank4class_cli/launch.py"), [(2, "cli"), (4, "late")])
    self.assertEqual(self._rules("import numpy\n", "rank4class_cli/__init__.py"), [(1, "cli")])

  def test_nobody_imports_keras(self):
    for path in ("rank4class/new_module.py", "bench/new_bench.py", "tests/rank4class/new_test.py"):
      self.assertEqual(self._rules("import tensorflow as tf\nfrom keras import layers\n"
                                   if path.startswith("tests") else "import rank4class\nimport keras\n",
                                   path), [(2, "keras")], msg=path)

  def test_tensorflow_ranking_only_through_rank4class_data_tf_ranking(self):
    source = "import tensorflow_ranking as tfr\n"
    self.assertEqual(self._rules(source, "rank4class/new_module.py"), [(1, "tf_ranking")])
    self.assertEqual(self._rules(source, "tests/rank4class/new_test.py"), [(1, "tf_ranking")])
    self.assertEqual(self._rules("def f():\n  from tensorflow_ranking.python import keras\n",
                                 TF_RANKING_MODULE), [])

  def test_tensorflow_before_the_toolkit_fails_the_stack_check_rule(self):
    for name in ("tensorflow as tf", "tensorflow_hub as hub", "tensorflow_text", "tf_keras"):
      source = f"import os\nimport {name}\n\nimport rank4class\n"
      self.assertEqual(self._rules(source, "bench/new_bench.py"), [(2, "stack first")], msg=name)
      self.assertEqual(self._rules(source, "scripts/new_script.py"), [(2, "stack first")], msg=name)
    self.assertEqual(self._rules("import rank4class\nimport tensorflow as tf\n", "bench/new_bench.py"), [])
    # rank4class_cli's __init__ runs no stack check.
    self.assertEqual(self._rules("import rank4class_cli\nimport tensorflow\n", "scripts/x.py"),
                     [(2, "stack first")])
    # A package's __init__ must run the check first; its other modules have it run before them.
    self.assertEqual(self._rules("import tensorflow\nfrom rank4class_data import stack\n",
                                 "pairwise/__init__.py"),
                     [(1, "stack first")])
    self.assertEqual(self._rules("import tensorflow\n", "pairwise/new_module.py"), [])
    # tests/ are checked for keras and tensorflow_ranking only (tests/conftest.py imports the toolkit first).
    self.assertEqual(self._rules("import tensorflow\nimport rank4class\n", "tests/rank4class/x_test.py"), [])

  def test_tensorflow_inside_a_function_needs_the_toolkit_before_it(self):
    late = "import os\n\n\ndef f():\n  import tensorflow as tf\n  import rank4class\n"
    self.assertEqual(self._rules(late, "bench/new_bench.py"), [(5, "stack first")])
    first = "import os\n\n\ndef f():\n  import rank4class\n\n  def g():\n    import tensorflow\n"
    self.assertEqual(self._rules(first, "bench/new_bench.py"), [])
    elsewhere = "def f():\n  import rank4class\n\n\ndef g():\n  import tensorflow\n"
    self.assertEqual(self._rules(elsewhere, "bench/new_bench.py"), [(6, "stack first")])
    self.assertEqual(self._rules("import rank4class_data\n\n\ndef f():\n  import tensorflow\n",
                                 "bench/new_bench.py"), [])

  def test_a_bench_sibling_counts_when_it_imports_the_toolkit_first(self):
    root = pathlib.Path(self.create_tempdir().full_path)
    (root / "bench").mkdir()
    (root / "bench" / "helper.py").write_text("import rank4class\nimport tensorflow\n")
    (root / "bench" / "plain.py").write_text("import statistics\n")
    self.assertEqual([v.rule for v in check_source("import helper\nimport tensorflow\n", "bench/a.py", root)],
                     [])
    self.assertEqual([v.rule for v in check_source("import plain\nimport tensorflow\n", "bench/a.py", root)],
                     ["stack first"])


class ImportTableTest(tf.test.TestCase):
  """The tree follows the table, and the table in docs/ARCHITECTURE.md still says what this test checks."""

  def test_every_module_follows_the_table(self):
    files = checked_files()
    # Not vacuous: every checked folder has files, and they hold many imports.
    for folder in CHECKED_FOLDERS:
      self.assertTrue(any(f.startswith(folder + "/") for f in files), msg=folder)
    self.assertGreater(len(files), 200)
    violations = check_tree()
    self.assertEmpty(violations, msg="\n" + "\n".join(map(str, violations)))

  def test_the_experiments_are_files_the_architecture_names(self):
    text = ARCHITECTURE.read_text(encoding="utf-8")
    for folder in EXPERIMENT_FOLDERS:
      self.assertTrue((ROOT / folder).is_dir(), msg=folder)
      self.assertIn(f"{folder}/", text)
    self.assertTrue((ROOT / TF_RANKING_MODULE).is_file())

  def test_the_architecture_table_names_the_packages_this_test_checks(self):
    rows = architecture_table(ARCHITECTURE.read_text(encoding="utf-8"))
    self.assertEqual([names for names, _ in rows], [
        ["rank4class_data"], ["rank4class_engine"], ["rank4class_encoders"], ["rank4class", "pairwise"],
        ["rank4class_cli/binaries/", "rank4class_cli/", "bench/", "scripts/"],
        ["rank4class_cli/launch.py"]])

    def toolkit(names: list[str], row: list[str]) -> set[str]:
      return {n.split(".")[0] for n in names if n.split(".")[0] in TOOLKIT_PACKAGES} - set(row)

    for names, may_import in rows[:4]:
      for package in names:
        self.assertEqual(toolkit(may_import, names), set(MAY_IMPORT[package]), msg=package)
    self.assertEqual(toolkit(rows[4][1], []), set(TOOLKIT_PACKAGES))
    self.assertEqual(toolkit(rows[5][1], []), set())
    self.assertIn("tests/import_table_test.py", ARCHITECTURE.read_text(encoding="utf-8"))

  def test_the_subpackage_table_is_the_one_this_test_checks(self):
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("### What may import what, inside the two families", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for line in section.splitlines():
      cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
      names = re.findall(r"`((?:rank4class|pairwise)/[a-z_]+)`", cells[0]) if len(cells) == 2 else []
      for name in names:
        family, subpackage = name.replace("/", "."), name.split("/")[0]
        below = re.findall(r"`([a-z_]+)`", cells[1])
        every = f"every {subpackage} subpackage" in cells[1]
        rows[family] = (
          tuple(s for s in SUBPACKAGE_MAY_IMPORT if s.startswith(subpackage + ".") and s != family)
          if every
          else tuple(f"{subpackage}.{b}" for b in below if not b.startswith("rank4class_"))
        )
    self.assertEqual(rows, SUBPACKAGE_MAY_IMPORT)


if __name__ == "__main__":
  tf.test.main()
