"""Runs every test file in its own pytest process, two at a time, and prints one closing tally.

Why one process per file: the absl binaries under test each define their flags in the process-global
`absl.flags.FLAGS` (two binaries may both define `--model_dir`), and TensorFlow's collective ops allow one
MirroredStrategy set-up per process without key clashes. Per-file processes keep the test files independent.

  python scripts/run_tests.py [--jobs=2] [paths...]   # default: every tests/**/*_test.py
  python scripts/run_tests.py --stacks=reference,current [paths...]
      # the suite once per stack, each with its own .venv-<stack>/bin/python (scripts/install.sh --stack=both),
      # one closing tally line per stack ("reference: N passed, N failed, N skipped") and a total line.
"""

import argparse
import concurrent.futures
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
_COUNT = re.compile(r"(\d+) (passed|failed|error|errors|skipped)")


def _run_file(path: pathlib.Path) -> tuple[pathlib.Path, int, str, str, float]:
  start = time.time()
  # absltest's create_tempdir() uses $TEST_TMPDIR, by default the fixed /tmp/absl_testing: a private one per
  # file keeps concurrent suites (two stacks, two checkouts) from writing into each other's test folders.
  with tempfile.TemporaryDirectory(prefix="rank4class-tests-") as test_tmpdir:
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
                            cwd=ROOT, capture_output=True, text=True, check=False,
                            env=dict(os.environ, TEST_TMPDIR=test_tmpdir))
  # pytest's closing tally is the last line of stdout; stderr (TensorFlow's logs) goes after it.
  return path, result.returncode, result.stdout + result.stderr, result.stdout, time.time() - start


_TALLY = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped$")


def _run_stacks(stacks: list[str], jobs: int, paths: list[str]) -> int:
  """Runs this script under each stack's virtual environment; prints a tally line per stack, then the total."""
  totals = [0, 0, 0]
  lines = []
  code = 0
  for stack in stacks:
    python = ROOT / f".venv-{stack}" / "bin" / "python"
    if not python.exists():
      print(f"run_tests: {python} is missing; run `bash scripts/install.sh --test --stack=both` first", flush=True)
      lines.append(f"{stack}: 0 passed, 1 failed, 0 skipped")
      totals[1] += 1
      code = 1
      continue
    print(f"\n=== {stack} stack ({python}) ===", flush=True)
    process = subprocess.Popen([str(python), __file__, f"--jobs={jobs}", *paths], cwd=ROOT, stdout=subprocess.PIPE,
                               text=True)
    tally = None
    for line in process.stdout:
      print(line, end="", flush=True)
      match = _TALLY.match(line.strip())
      tally = match.groups() if match else tally
    code |= process.wait() != 0
    counts = [int(n) for n in tally] if tally else [0, 1, 0]
    totals = [t + n for t, n in zip(totals, counts, strict=True)]
    lines.append(f"{stack}: {counts[0]} passed, {counts[1]} failed, {counts[2]} skipped")
  print()
  for line in lines:
    print(line)
  print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
  return 1 if code else 0


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--jobs", type=int, default=2)
  parser.add_argument("--stacks", default="", help="comma-separated: run the suite once per stack's .venv-<stack>")
  parser.add_argument("paths", nargs="*")
  args = parser.parse_args()
  if args.stacks:
    return _run_stacks(args.stacks.split(","), args.jobs, args.paths)
  files = [pathlib.Path(p).resolve() for p in args.paths] or sorted((ROOT / "tests").rglob("*_test.py"))
  totals = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
  failed_files = []
  start = time.time()
  with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
    for path, code, output, stdout, seconds in pool.map(_run_file, files):
      summary = stdout.strip().splitlines()[-1] if stdout.strip() else ""
      for number, kind in _COUNT.findall(summary):
        totals["error" if kind.startswith("error") else kind] += int(number)
      relative = path.relative_to(ROOT)
      # Exit 5 means pytest collected nothing: a test file with no test is a defect, not a pass.
      if code != 0:
        failed_files.append(str(relative))
        print(f"FAIL {relative} (exit {code}, {seconds:.0f} s)\n{output[-6000:]}", flush=True)
      else:
        print(f"ok   {relative} ({seconds:.0f} s): {summary}", flush=True)
  print(f"\n{len(files)} test files in {time.time() - start:.0f} s; failing files: {failed_files or 'none'}")
  failed = totals["failed"] + totals["error"] + (len(failed_files) if not totals["failed"] + totals["error"] else 0)
  print(f"{totals['passed']} passed, {failed} failed, {totals['skipped']} skipped")
  return 1 if failed_files else 0


if __name__ == "__main__":
  sys.exit(main())
