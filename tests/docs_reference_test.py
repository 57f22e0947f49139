"""The references cannot rot: docs/reference/cli.md equals what scripts/gen_reference.py writes from the
binaries' stored help and names every console script of setup.py, and the API reference renders a page per
package."""

import ast
import importlib.util
import os
import pathlib
import tempfile
import time
import unittest

from rank4class_data import stack

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
gen_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_reference)


def console_scripts(setup_py: pathlib.Path = ROOT / "setup.py") -> list[str]:
  """The console script names of setup.py's entry_points, read from its syntax tree (nothing is run)."""
  for node in ast.walk(ast.parse(setup_py.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Dict):
      for key, value in zip(node.keys, node.values, strict=True):
        if isinstance(key, ast.Constant) and key.value == "console_scripts":
          return [element.value.split("=", 1)[0].strip() for element in value.elts]
  raise AssertionError("setup.py declares no console_scripts")


class CliReferenceTest(unittest.TestCase):

  def test_the_file_equals_what_the_script_writes(self):
    on_disk = gen_reference.CLI_REFERENCE.read_text(encoding="utf-8")
    self.assertEqual(on_disk, gen_reference.cli_reference(),
                     "docs/reference/cli.md is stale: run python scripts/gen_reference.py --noapi")

  def test_every_console_script_has_a_section(self):
    text = gen_reference.CLI_REFERENCE.read_text(encoding="utf-8")
    scripts = console_scripts()
    self.assertGreaterEqual(len(scripts), 11)
    for script in scripts:
      self.assertIn(f"\n## {script}\n", text)

  def test_a_help_text_with_backticks_keeps_its_fence_closed(self):
    texts = {program: "flags:\n  --x: ``` inside" for program in gen_reference.launch.PROGRAMS}
    self.assertIn("\n````text\nflags:", gen_reference.cli_reference(texts))

  def test_a_missing_help_text_is_named(self):
    with self.assertRaisesRegex(ValueError, "no help text for rank4class-convert"):
      gen_reference.cli_reference({"pairwise-train": "help"})


# Rendering imports every module of the six packages and writes ~130 pages: ~15 s on 2 busy cores. The pages
# come from the same source files on both stacks, so the reference stack's check covers them.
@unittest.skipUnless(stack.check_tensorflow_stack().name == stack.REFERENCE,
                     "the API reference renders the same source on every stack; built on the reference stack")
class ApiReferenceTest(unittest.TestCase):

  def test_every_package_and_the_central_modules_have_a_page(self):
    with tempfile.TemporaryDirectory() as folder:
      start = time.monotonic()
      # Raises when a module fails to import; the highlighted source is pygments', not the docstrings'.
      problems = gen_reference.render_api(pathlib.Path(folder), show_source=False)
      seconds = time.monotonic() - start
      self.assertEqual(problems, [])
      for page in (*(f"{package}.html" for package in gen_reference.PACKAGES),
                   "rank4class/modeling/model.html",
                   "rank4class_engine/loop/trainer.html", "pairwise/ranksvm.html",
                   "rank4class_cli/binaries/train_main.html",
                   "rank4class_data/records/input_pipeline.html", "rank4class_encoders/text_encoder.html"):
        self.assertTrue(os.path.isfile(os.path.join(folder, page)), page)
      model_page = pathlib.Path(folder, "rank4class", "modeling", "model.html").read_text(encoding="utf-8")
      self.assertIn("Rank4ClassModel", model_page)
      print(f"API reference rendered in {seconds:.1f} s")


if __name__ == "__main__":
  unittest.main()
