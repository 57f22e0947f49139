"""Checks that the Bazel BUILD files name every module and test, match the imports, and load in Bazel."""

import importlib.util
import pathlib
import shutil
import subprocess
import unittest

import tensorflow as tf

from rank4class_data import stack

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gen_build", ROOT / "scripts" / "gen_build.py")
gen_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_build)


# The BUILD files follow the imports of the same source files on every stack (~18 s on 2 busy cores): the
# reference stack's check covers them.
@unittest.skipUnless(stack.check_tensorflow_stack().name == stack.REFERENCE,
                     "the BUILD files are the same source's on every stack; checked on the reference stack")
class BuildFilesTest(tf.test.TestCase):

  def test_every_module_and_test_file_has_a_target(self):
    self.assertEqual(gen_build.missing_targets(ROOT), [])

  def test_missing_target_is_reported(self):
    root = pathlib.Path(self.create_tempdir().full_path)
    (root / "rank4class").mkdir()
    (root / "rank4class" / "listed.py").write_text("")
    (root / "rank4class" / "unlisted.py").write_text("")
    (root / "tests" / "rank4class").mkdir(parents=True)
    (root / "tests" / "rank4class" / "unlisted_test.py").write_text("")
    (root / "rank4class" / "BUILD").write_text('py_library(name = "listed", srcs = '
                                               '["listed.py"], deps = [])\n')
    self.assertEqual(gen_build.missing_targets(root),
                     ["rank4class/unlisted.py", "tests/rank4class/unlisted_test.py"])

  def test_build_files_are_up_to_date_with_imports(self):
    files = gen_build.expected_build_files()
    stale = [p for p, text in files.items() if (ROOT / p).read_text() != text]
    self.assertEqual(stale, [], "run: python scripts/gen_build.py")

  def test_bazel_query_loads_every_package(self):
    if shutil.which("bazel") is None:
      self.skipTest("bazel is not installed (Debian: apt-get install bazel-bootstrap)")
    result = subprocess.run(["bazel", "--batch", "query", "//..."], cwd=ROOT, capture_output=True, text=True,
                            timeout=600, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    labels = set(result.stdout.split())
    self.assertIn("//:toolkit", labels)
    self.assertIn("//tests:build_test", labels)


if __name__ == "__main__":
  tf.test.main()
