"""Runs the linter configured in pyproject.toml over the whole tree, so style drift fails the suite."""

import pathlib
import shutil
import subprocess
import sys

import tensorflow as tf

ROOT = pathlib.Path(__file__).resolve().parents[1]


class LintTest(tf.test.TestCase):

  def test_ruff_finds_nothing(self):
    ruff = shutil.which("ruff") or str(pathlib.Path(sys.executable).parent / "ruff")
    if not pathlib.Path(ruff).exists():
      self.skipTest("ruff is not installed (it comes with the `test` extra)")
    result = subprocess.run([ruff, "check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            check=False)
    self.assertEqual(result.returncode, 0, result.stdout[-3000:] + result.stderr[-1000:])


if __name__ == "__main__":
  tf.test.main()
