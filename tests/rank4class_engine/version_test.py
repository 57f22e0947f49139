"""Tests for rank4class_engine.version: one version, the same in the packages, the metadata, setup.py,
CHANGELOG.md and CITATION.cff; the release files (LICENSE, py.typed) are there. Text reads, no training."""

import importlib.metadata
import pathlib
import re
import unittest

import pairwise
import rank4class
from rank4class_engine import version

ROOT = pathlib.Path(__file__).resolve().parents[2]
DISTRIBUTION = "rank4class-toolkit"  # setup.py's name=
PACKAGES = ("rank4class", "pairwise", "rank4class_data", "rank4class_encoders", "rank4class_engine",
            "rank4class_cli")


def setup_py_version() -> str:
  """The version setup.py installs, parsed as setup.py's read_version parses version.py (setup.py is not
  run)."""
  text = (ROOT / "rank4class_engine" / "version.py").read_text(encoding="utf-8")
  match = re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)
  if match is None:
    raise AssertionError("rank4class_engine/version.py has no line `__version__ = \"X.Y.Z\"`")
  return match.group(1)


class VersionTest(unittest.TestCase):

  def test_packages_expose_the_one_version(self):
    self.assertEqual(rank4class.__version__, version.__version__)
    self.assertEqual(pairwise.__version__, version.__version__)

  def test_version_is_semantic_and_not_the_placeholder(self):
    self.assertRegex(version.__version__, r"^\d+\.\d+\.\d+$")
    self.assertNotEqual(version.__version__, "0.1.0")

  def test_setup_py_reads_version_py(self):
    self.assertIn("version=read_version()", (ROOT / "setup.py").read_text(encoding="utf-8"))
    self.assertEqual(setup_py_version(), version.__version__)

  def test_installed_metadata_has_the_version(self):
    try:
      installed = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
      self.skipTest(f"{DISTRIBUTION} is not installed (the tests run from a checkout)")
    if installed != version.__version__:
      # An editable install keeps the metadata of its last `pip install -e .`; a reinstall writes what
      # setup.py reads, which is what is compared then.
      self.assertEqual(setup_py_version(), version.__version__,
                       f"installed metadata says {installed}; reinstall with `pip install -e . --no-deps`")
      return
    self.assertEqual(installed, version.__version__)


class ReleaseFilesTest(unittest.TestCase):

  def test_changelog_first_release_is_the_version(self):
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\](.*)$", text, re.MULTILINE)
    self.assertEqual(headings[0], ("Unreleased", ""))
    name, after = headings[1]  # The first released version: `## [X.Y.Z] - YYYY-MM-DD`.
    self.assertRegex(after, r"^ - \d{4}-\d{2}-\d{2}$")
    self.assertEqual(name, version.__version__)

  def test_citation_version_is_the_version(self):
    text = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    self.assertRegex(text, r"(?m)^cff-version: 1\.2\.0$")
    match = re.search(r"^version: ['\"]?([^'\"\s]+)['\"]?$", text, re.MULTILINE)
    self.assertIsNotNone(match, "CITATION.cff has no top-level `version:`")
    self.assertEqual(match.group(1), version.__version__)

  def test_license_is_apache_2(self):
    lines = [line.strip() for line in (ROOT / "LICENSE").read_text(encoding="utf-8").strip().splitlines()[:3]]
    self.assertEqual(lines, ["Apache License", "Version 2.0, January 2004", "http://www.apache.org/licenses/"])

  def test_every_package_has_py_typed(self):
    missing = [package for package in PACKAGES if not (ROOT / package / "py.typed").is_file()]
    self.assertEqual(missing, [])


if __name__ == "__main__":
  unittest.main()
