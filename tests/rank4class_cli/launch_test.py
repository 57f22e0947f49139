"""Tests for rank4class_cli.launch: every console script listed, `--help` from the stored texts without
TensorFlow (and equal to what the binary itself prints), everything else handed to the binary's module."""

import ast
import contextlib
import gc
import importlib
import io
import json
import os
import pathlib
import subprocess
import sys
from unittest import mock

import tensorflow as tf

from rank4class_cli import cli, launch

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _console_scripts() -> dict[str, str]:
  """setup.py's console scripts: name -> "module:function"."""
  for node in ast.walk(ast.parse((ROOT / "setup.py").read_text())):
    if isinstance(node, ast.Dict):
      for key, value in zip(node.keys, node.values, strict=True):
        if isinstance(key, ast.Constant) and key.value == "console_scripts":
          return dict(entry.value.split("=", 1) for entry in value.elts)
  raise AssertionError("setup.py has no console_scripts")


class LaunchTest(tf.test.TestCase):

  def test_every_console_script_launches_its_binary(self):
    scripts = _console_scripts()
    self.assertEqual(set(scripts), set(launch.PROGRAMS))
    for program, target in scripts.items():
      module, function = target.split(":")
      self.assertEqual(module, "rank4class_cli.launch", program)
      with mock.patch.object(launch, "launch") as launched:
        getattr(launch, function)()
      launched.assert_called_once_with(program)
      self.assertTrue(hasattr(importlib.import_module(launch.PROGRAMS[program]), "run"), program)

  def test_help_arguments_are_the_binaries(self):
    self.assertEqual(launch.HELP_ARGUMENTS, cli.HELP_ARGUMENTS)

  def test_stored_help_is_what_each_binary_prints(self):
    with open(launch.HELP_FILE, encoding="utf-8") as f:
      stored = json.load(f)
    self.assertEqual(set(stored), set(launch.PROGRAMS))
    for program, module in launch.PROGRAMS.items():
      parse_flags = importlib.import_module(module).parse_flags
      printed = io.StringIO()
      with contextlib.redirect_stdout(printed), self.assertRaises(SystemExit) as exit_:
        parse_flags([program, "--help"])
      self.assertEqual(exit_.exception.code, 0)
      self.assertEqual(stored[program], printed.getvalue(),
                       f"{program}: rank4class_cli/help.json is stale; run python scripts/gen_help.py")
      self.assertIn("--model_dir" if "train" in program else "flags:", stored[program])

  def test_help_prints_the_stored_text_without_importing_tensorflow(self):
    code = ("import sys\nsys.argv = ['rank4class-train', '--learning_rate=0.1', '-h']\n"
            "from rank4class_cli import launch\n"
            "try:\n  launch.train()\nexcept SystemExit as e:\n"
            "  sys.stderr.write(f'exit={e.code} tensorflow={\"tensorflow\" in sys.modules}')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                            check=False, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    self.assertEqual(result.stderr.strip().splitlines()[-1], "exit=0 tensorflow=False")
    self.assertEqual(result.stdout, launch.stored_help("rank4class-train"))

  def test_without_a_stored_text_the_binary_answers(self):
    # A missing help.json (or a program it lacks) falls back to the binary's module, which prints its own
    # help.
    binary = mock.Mock()
    with mock.patch.object(launch, "HELP_FILE", os.path.join(self.get_temp_dir(), "missing.json")), \
        mock.patch.object(sys, "argv", ["rank4class-train", "--help"]), \
        mock.patch.object(importlib, "import_module", return_value=binary) as imported:
      launch.launch("rank4class-train")
    imported.assert_called_once_with("rank4class_cli.binaries.train_main")
    binary.run.assert_called_once_with()
    gc.unfreeze()

  def test_other_arguments_run_the_binary(self):
    binary = mock.Mock()
    with mock.patch.object(sys, "argv", ["pairwise-ranksvm", "--mode=train", "--help_me=1"]), \
        mock.patch.object(importlib, "import_module", return_value=binary) as imported:
      launch.launch("pairwise-ranksvm")
    imported.assert_called_once_with("rank4class_cli.binaries.ranksvm_main")
    binary.run.assert_called_once_with()
    self.assertGreater(gc.get_freeze_count(), 0)  # The imports' objects are out of the collector's reach.
    gc.unfreeze()


if __name__ == "__main__":
  tf.test.main()
