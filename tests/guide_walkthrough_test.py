"""Runs the user guide's code as printed: every command of the many-class walk-through
(docs/guide/many_classes.md; a fresh folder as the working directory, this test's environment's binaries for
`.venv/bin/`), then checks what each wrote; the few-shot walk-through (docs/guide/few_shot.md) as one shell
script (both on the current stack); and the README's Python block on a small calibrated export."""

import contextlib
import csv
import io
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile
import unittest

import numpy as np

from rank4class.inference import calibration, serving
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_data import moved_modules, stack
from rank4class_engine.optimization import losses

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf

ROOT = pathlib.Path(__file__).resolve().parents[1]
MARKER = "<!-- many-class-walkthrough -->"
GUIDE_PAGE = ROOT / "docs" / "guide" / "many_classes.md"
BIN = os.path.dirname(sys.executable)
PYTHON_MARKER = "<!-- python-api -->"
FEW_SHOT_MARKER = "<!-- few-shot-walkthrough -->"
FEW_SHOT_PAGE = ROOT / "docs" / "guide" / "few_shot.md"
# The export path the README's Python block names; the test puts a real export there.
README_EXPORT = '"out/features/export"'


def walkthrough_commands(page: str) -> list[str]:
  """The commands of the fenced block after `MARKER`: comments dropped, continuation lines joined."""
  block = shell_block(page, MARKER)
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


def shell_block(page: str, marker: str) -> str:
  """The fenced shell block after `marker`, as printed."""
  return page.split(marker, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]


def python_block(readme: str) -> str:
  """The fenced Python block after `PYTHON_MARKER`."""
  return readme.split(PYTHON_MARKER, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


class ReadmePythonTest(tf.test.TestCase):
  """The README's Python block, run as printed on a small calibrated export of a two-feature model."""

  def test_the_block_ranks_and_gives_probabilities(self):
    block = python_block((ROOT / "README.md").read_text(encoding="utf-8"))
    self.assertLessEqual(len(block.splitlines()), 15)
    self.assertIn(README_EXPORT, block)
    for old in moved_modules.MOVED:  # The current import paths, never a deprecated alias of a moved module.
      package, _, leaf = old.rpartition(".")
      self.assertNotRegex(block, rf"(from {re.escape(package)} import {leaf}\b|\b{re.escape(old)}\b)", old)
    tf.keras.utils.set_random_seed(0)
    class_names = ["earn", "acq", "trade"]
    model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)),
                                      class_encoders.get("one_hot", num_classes=3), interactions.get("dot"),
                                      class_names=class_names)
    rng = np.random.default_rng(0)
    features = rng.normal(size=(60, 2)).astype(np.float32)
    labels = np.argmax(features @ np.array([[1.0, -1.0, 0.0], [0.0, 1.0, -1.0]], np.float32), axis=1)
    model.compile("adam", loss=losses.get("softmax"))
    model.fit(features, labels, epochs=2, batch_size=16, verbose=0)
    export_dir = serving.export_saved_model(model, os.path.join(self.create_tempdir().full_path, "export"),
                                            top_k=3, calibration=calibration.Calibration.fit(model(features),
                                                                                             labels))
    namespace = {}
    with contextlib.redirect_stdout(io.StringIO()) as printed:
      exec(compile(block.replace(README_EXPORT, repr(export_dir)), "README.md (python-api)", "exec"),
           namespace)
    expected_ids, _ = model.rank(namespace["x"], k=2)
    expected = [[class_names[i] for i in row] for row in expected_ids.numpy()]
    self.assertEqual(namespace["ranking"].names.tolist(), expected)
    self.assertEqual(namespace["class_ids"].numpy().tolist(), expected_ids.numpy().tolist())
    probabilities = namespace["ranking"].probabilities
    self.assertEqual(probabilities.shape, (2, 2))
    self.assertTrue(np.all(probabilities[:, 0] >= probabilities[:, 1])
                    and np.all(probabilities.sum(axis=1) <= 1))
    self.assertIn(str(expected[0]), printed.getvalue())


# The guide's walk-throughs are the suite's longest tests (the many-class one's ten processes ~135 s of CPU
# on 2 cores with the embeddings cached, the few-shot one's ~38 s): they run on the current stack, the one a
# new install gets; every binary and export kind they use is also tested on both stacks by its own tests
# (train_main_test, export_test, served_test, zero_shot_choice_test, few_shot_run_test).
ON_THE_CURRENT_STACK = unittest.skipUnless(
    stack.check_tensorflow_stack().name == stack.CURRENT,
    "the guide's walk-throughs run on the current stack; their binaries are tested on both")


@ON_THE_CURRENT_STACK
class ManyClassWalkthroughTest(unittest.TestCase):

  def test_every_command_runs_as_printed_and_beats_chance(self):
    commands = walkthrough_commands(GUIDE_PAGE.read_text(encoding="utf-8"))
    self.assertEqual(len(commands), 10)
    with tempfile.TemporaryDirectory() as folder:
      env = {**os.environ, "PYTHONPATH": str(ROOT)}
      for command in commands:
        args = shlex.split(command)
        self.assertTrue(args[0].startswith(".venv/bin/"), command)
        args[0] = os.path.join(BIN, args[0][len(".venv/bin/"):])
        done = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True,
                              timeout=600, check=False)
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


@ON_THE_CURRENT_STACK
class FewShotWalkthroughTest(unittest.TestCase):

  def test_the_block_runs_as_printed_and_its_words_hold(self):
    page = FEW_SHOT_PAGE.read_text(encoding="utf-8")
    block = shell_block(page, FEW_SHOT_MARKER)
    self.assertIn(".venv/bin/rank4class-train", block)
    with tempfile.TemporaryDirectory() as folder:
      os.symlink(ROOT / "data", os.path.join(folder, "data"))  # The install's real files, as the page reads.
      done = subprocess.run(["bash", "-e", "-c", block.replace(".venv/bin/", BIN + "/")], cwd=folder,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                            timeout=600, check=False)
      self.assertEqual(done.returncode, 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
      said = done.stdout + done.stderr
      # Step 1's first line, as the page prints it.
      self.assertIn("Few-shot: 64 labelled rows in 8 classes (8-8 a class, median 8); every row trains", said)
      out = pathlib.Path(folder, "out", "few_shot")
      result = json.loads((out / "run" / "train_result.json").read_text(encoding="utf-8"))
      error = result["test_report"]["metrics"]["top_1_error"]
      self.assertEqual(result["test_report"]["n"], 185)
      baselines = {row["name"]: row["metrics"]["top_1_error"] for row in result["baselines"]["rows"]}
      self.assertEqual(len(baselines), 4)
      self.assertLess(error, min(baselines.values()))  # "better by ... points" than every baseline.
      with open(out / "predictions.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
      # "Step 2 writes `crude` first for the first line and `acq` for the second."
      self.assertEqual([row["class_1"] for row in rows], ["crude", "acq"])


if __name__ == "__main__":
  unittest.main()
