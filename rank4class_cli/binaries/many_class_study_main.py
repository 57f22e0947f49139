r"""Runs the many-class study on WordNet's noun hypernyms and prints its tables (docs/RESULTS.md).

Sample command lines:

  rank4class-many-class-study --output_dir=out/many_classes --seeds=0,1 --train_steps=2000

  rank4class-many-class-study --output_dir=out/many_classes --parts=hard_negatives,scale --seeds=0,1 \
      --train_steps=2000

Parts: the grid (full class lists against each class sampler, SoftmaxCE and two ranking losses, several
seeds), two stages (a retriever's top M re-ranked), zero-shot (held-out classes ranked by their texts, against
the nearest class text), hard negatives, and every loss x interaction at 14,823 classes (scale). Each writes
its results into --output_dir (results.json, results.md, two_stage.json, zero_shot.json); a rerun skips
finished runs.
"""

import json

from absl import flags

from rank4class.studies import many_class_study as study_lib
from rank4class_cli import cli, terminal

PROGRAM = "rank4class-many-class-study"
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.
define = cli.FlagDefiner(FLAGS)
define.string("output_dir", "many_class_study", "Folder for runs, results.json and results.md.")
define.list("seeds", ["0", "1"], "Model seeds.")
define.integer("train_steps", 3000, "Training steps per run.")
define.integer("batch_size", 64, "Batch size (the in-batch lists' size).")
define.float("learning_rate", 1e-3, "Adam learning rate.")
PARTS = ("grid", "two_stage", "zero_shot", "hard_negatives", "scale")
define.list("parts", list(PARTS), "Which parts to run: the samplers x losses grid, two stages, zero-shot, "
            "hard negatives (both tasks), every loss x interaction at 14,823 classes (scale).")


def check_flags(f: flags.FlagValues) -> None:
  """ValueError naming the flag for bad seeds, steps, batch size, learning rate or parts."""
  cli.int_tuple("seeds", f.seeds)
  for name in ("train_steps", "batch_size"):
    if f[name].value < 1:
      raise ValueError(f"--{name}={f[name].value} must be a positive integer")
  if f.learning_rate <= 0:
    raise ValueError(f"--learning_rate={f.learning_rate} must be positive")
  unknown = [p for p in f.parts if p not in PARTS]
  if unknown or not f.parts:
    raise ValueError(f"--parts={','.join(f.parts)}: unknown {unknown}; allowed: {', '.join(PARTS)}")


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, check_flags)


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  seeds, out = list(cli.int_tuple("seeds", FLAGS.seeds)), FLAGS.output_dir
  common = (FLAGS.train_steps, FLAGS.batch_size, FLAGS.learning_rate)
  if "grid" in FLAGS.parts:
    terminal.out(study_lib.markdown_table(study_lib.run(out, seeds, *common)))
  if "two_stage" in FLAGS.parts:
    terminal.out(json.dumps(study_lib.two_stage_study(out, *common), indent=1, default=str))
  if "zero_shot" in FLAGS.parts:
    terminal.out(json.dumps(study_lib.zero_shot_study(out, *common), indent=1, default=str))
  if "hard_negatives" in FLAGS.parts:
    terminal.out(study_lib.markdown_table(study_lib.hard_negative_study(out, seeds, *common),
                                          by=("dataset", "lists")))
  if "scale" in FLAGS.parts:
    terminal.out(study_lib.markdown_table(study_lib.scale_study(out, *common),
                                          by=("interaction", "loss", "lists")))


def run() -> None:
  """Console script `rank4class-many-class-study`."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
