"""Runs every test file in its own pytest process, two at a time, and prints one closing tally.

Why one process per file: the absl binaries under test each define their flags in the process-global
`absl.flags.FLAGS` (two binaries may both define `--model_dir`), and TensorFlow's collective ops allow one
MirroredStrategy set-up per process without key clashes. Per-file processes keep the test files independent.

  python scripts/run_tests.py [--jobs=2] [paths...]   # default: every tests/**/*_test.py
"""

import argparse
import concurrent.futures
import pathlib
import re
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
_COUNT = re.compile(r"(\d+) (passed|failed|error|errors|skipped)")


def _run_file(path: pathlib.Path) -> tuple[pathlib.Path, int, str, str, float]:
  start = time.time()
  result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
                          cwd=ROOT, capture_output=True, text=True, check=False)
  # pytest's closing tally is the last line of stdout; stderr (TensorFlow's logs) goes after it.
  return path, result.returncode, result.stdout + result.stderr, result.stdout, time.time() - start


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--jobs", type=int, default=2)
  parser.add_argument("paths", nargs="*")
  args = parser.parse_args()
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
