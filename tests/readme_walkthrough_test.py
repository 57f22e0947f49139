"""Runs every command of the README's many-class walk-through as printed (a fresh folder as the working directory,
this test's environment's binaries for `.venv/bin/`), then checks what each wrote."""

import csv
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[1]
MARKER = "<!-- many-class-walkthrough -->"
BIN = os.path.dirname(sys.executable)


def walkthrough_commands(readme: str) -> list[str]:
  """The commands of the fenced block after `MARKER`: comments dropped, continuation lines joined."""
  block = readme.split(MARKER, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
  commands, current = [], ""
  for line in block.splitlines():
    if not current and (not line.strip() or line.lstrip().startswith("#")):
      continue
    current += line.rstrip()
    if current.endswith("\\"):
      current = current[:-1].rstrip() + " "
      continue
    commands.append(re.sub(r"\s+", " ", current.strip()))
    current = ""
  return commands


class ReadmeWalkthroughTest(unittest.TestCase):

  def test_every_command_runs_as_printed_and_beats_chance(self):
    commands = walkthrough_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    self.assertEqual(len(commands), 10)
    with tempfile.TemporaryDirectory() as folder:
      env = {**os.environ, "PYTHONPATH": str(ROOT)}
      for command in commands:
        args = shlex.split(command)
        self.assertTrue(args[0].startswith(".venv/bin/"), command)
        args[0] = os.path.join(BIN, args[0][len(".venv/bin/"):])
        done = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False)
        self.assertEqual(done.returncode, 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
      out = pathlib.Path(folder, "out", "wordnet")

      def report_of(name: str) -> dict:
        return json.loads((out / name).read_text(encoding="utf-8"))

      full = report_of("text_classes/eval_report.json")  # In the model_dir, by rank4class-evaluate.
      with open(out / "test.csv", encoding="utf-8") as f:
        test_rows = len(list(csv.DictReader(f)))
      self.assertEqual((full["n"], len(full["class_counts"])), (test_rows, 135))
      self.assertLess(full["metrics"]["top_5_error"], 1 - 5 / 135 - 0.3)  # Far better than chance.
      staged = report_of("two_stage.eval_report.json")  # Beside an export folder that is not a model_dir's.
      self.assertEqual((staged["kind"], staged["num_candidates"], staged["n"]), ("two_stage", 20, full["n"]))
      self.assertGreater(staged["recall_at_m"], 0.5)
      zero = report_of("zero_shot.eval_report.json")
      self.assertEqual((zero["kind"], len(zero["class_counts"])), ("zero_shot", 15))
      self.assertLess(zero["metrics"]["top_1_error"], 1 - 1 / 15 - 0.1)  # Better than chance over 15 classes.
      with open(out / "two_stage_predictions.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
      self.assertEqual(len(rows), full["n"])
      with open(out / "zero_shot_predictions.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
      with open(out / "new_classes.csv", encoding="utf-8") as f:
        new_classes = {row["class"] for row in csv.DictReader(f)}
      self.assertEqual(len(new_classes), 15)
      self.assertTrue(rows and all(row["class_1"] in new_classes for row in rows))


if __name__ == "__main__":
  unittest.main()
