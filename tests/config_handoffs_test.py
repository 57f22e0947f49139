"""Tests for scripts/config_handoffs.py: one short `rank4class-train` run on digits, followed through its
calls, hands the whole training config on at most 40 times through at most 15 modules (`docs/ARCHITECTURE.md`,
configs by part) that are the binary, the run and the config's own, and its parts go through at most 15
modules."""

import pathlib
import subprocess
import sys
import unittest

from rank4class_data import stack

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _rows(table: str) -> dict[str, list[int]]:
  """The table's rows: object -> [hand-offs, calls made, functions, modules]."""
  rows = {}
  for line in table.splitlines():
    cells = [c.strip() for c in line.strip("|").split("|")]
    if len(cells) == 5 and cells[1].isdigit():
      rows[cells[0]] = [int(c) for c in cells[1:]]
  return rows


# The run follows the same source on every stack (~25 s on 2 busy cores): the reference stack's run covers it.
@unittest.skipUnless(stack.check_tensorflow_stack().name == stack.REFERENCE,
                     "the hand-offs are the same source's on every stack; followed on the reference stack")
class ConfigHandOffsTest(unittest.TestCase):

  def test_the_whole_config_is_handed_on_within_the_figures(self):
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "config_handoffs.py"),
         "--flags=--dataset=digits --train_steps=20 --eval_every=10 --verbose=0",
         "--list=Rank4ClassTrainConfig"], cwd=ROOT, capture_output=True, text=True, check=True)
    rows = _rows(done.stdout)
    whole, every = rows["Rank4ClassTrainConfig"], rows["any of them"]
    self.assertGreater(whole[0], 5)  # The hook sees the hand-offs: the binary to train to _train at least.
    self.assertLessEqual(whole[0], 40)
    self.assertLessEqual(whole[3], 15)
    self.assertLessEqual(every[3], 15)
    for part in ("DataConfig", "Rank4ClassConfig", "OptimizerConfig", "RunConfig", "OutputsConfig"):
      self.assertGreater(rows[part][0], 0, part)
    listed = [line for line in done.stdout.splitlines() if line.endswith(" (Rank4ClassTrainConfig)")]
    self.assertEqual(len(listed), whole[0])
    self.assertIn("rank4class.training.train._train (Rank4ClassTrainConfig)", "\n".join(listed))
    # No data, encoder, model or evaluation module receives the whole config: only the binary (its module and
    # its result lines, rank4class_cli/train_output), the run and the config's own module, and the engine's
    # config file I/O.
    receivers = {line.split(" -> ")[1].split(" (")[0] for line in listed}
    modules = {name.rsplit(".", 1)[0].split(".Rank4ClassTrainConfig")[0] for name in receivers}
    allowed = {"rank4class_cli.binaries.train_main", "rank4class_cli.train_output",
               "rank4class.training.train", "rank4class.training.train_config",
               "rank4class_engine.runs.configs"}
    self.assertLessEqual(modules, allowed, receivers)


if __name__ == "__main__":
  unittest.main()
