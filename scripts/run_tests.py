"""Runs the test suite with plain pytest, once per stack, and prints one closing tally line per stack and a
total.

Each stack runs `<its python> -m pytest -n <jobs> tests` (pytest-xdist workers; every worker runs many test
files in one process) in its own virtual environment, `.venv-<stack>` (scripts/install.sh --stack=both).

  python scripts/run_tests.py --stacks=reference,current [--jobs=3] [pytest args...]
  python scripts/run_tests.py [--jobs=3] [pytest args...]     # this interpreter's stack only

Three workers by default, also on 2 cores: many tests wait on child processes (the binaries killed and
resumed, the fresh-process SavedModel loads, two local workers), and a third worker fills that time (reference
stack from a fresh clone: 628 s with 2 workers, 477 s with 3; docs/BENCHMARKS.md).

Without arguments after the options, the whole of `tests/` runs; anything else is passed to pytest (paths,
-k).
"""

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped)")


def _tally(summary: str) -> list[int]:
  """[passed, failed (errors included), skipped] from pytest's closing line."""
  counts = {"passed": 0, "failed": 0, "skipped": 0}
  for number, kind in _COUNT.findall(summary):
    counts["failed" if kind.startswith("error") else kind] += int(number)
  return [counts["passed"], counts["failed"], counts["skipped"]]


def _run_pytest(python: str, jobs: int, args: list[str]) -> tuple[int, list[int]]:
  """Runs pytest under `python`, echoing its output; returns (exit code, [passed, failed, skipped])."""
  command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(["-n", str(jobs)] if jobs > 1 else []),
             *(args or ["tests"])]
  # absltest's create_tempdir() uses $TEST_TMPDIR, by default the fixed /tmp/absl_testing: a private one per
  # run keeps concurrent suites (two stacks, two checkouts) out of each other's test folders.
  with tempfile.TemporaryDirectory(prefix="rank4class-tests-") as test_tmpdir:
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=dict(os.environ, TEST_TMPDIR=test_tmpdir))
    summary = ""
    for line in process.stdout:
      print(line, end="", flush=True)
      if _COUNT.search(line) and re.search(r" in [\d.]+s", line):
        summary = line
    code = process.wait()
  counts = _tally(summary)
  if code != 0 and counts[1] == 0:
    counts[1] = 1  # pytest failed without a failing test (collection error, no test collected: exit 5).
  return code, counts


def main() -> int:
  parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
  parser.add_argument("--jobs", type=int, default=3, help="pytest-xdist workers per stack (1: one process)")
  parser.add_argument("--stacks", default="", help="comma-separated: run the suite once per .venv-<stack>")
  options, pytest_args = parser.parse_known_args()
  runs = [
    (stack, ROOT / f".venv-{stack}" / "bin" / "python") for stack in options.stacks.split(",") if stack
  ] or [("this", pathlib.Path(sys.executable))]
  lines, totals, code = [], [0, 0, 0], 0
  for stack, python in runs:
    start = time.time()
    if not python.exists():
      print(f"run_tests: {python} is missing; run `bash scripts/install.sh --test --stack=both` first",
            flush=True)
      status, counts = 1, [0, 1, 0]
    else:
      print(f"\n=== {stack} stack ({python}) ===", flush=True)
      status, counts = _run_pytest(str(python), options.jobs, pytest_args)
    code |= status != 0
    totals = [t + n for t, n in zip(totals, counts, strict=True)]
    lines.append(f"{stack}: {counts[0]} passed, {counts[1]} failed, {counts[2]} skipped "
                 f"({time.time() - start:.0f} s)")
  print()
  for line in lines:
    print(line)
  print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
  return 1 if code else 0


if __name__ == "__main__":
  sys.exit(main())
