"""Follows the training config through the calls of one `rank4class-train` run, as the run makes them, and
counts its hand-offs: the places in the project's code that pass it, or one of its parts, to a function.

  .venv/bin/python scripts/config_handoffs.py --flags="--dataset=digits --train_steps=40" \
      [--list=Rank4ClassTrainConfig]

The binary's `main` runs in this process under a profile hook (`sys.setprofile`). Every call into a function
of the project's packages whose parameters hold a `Rank4ClassTrainConfig` (the whole config, `self` of its
methods included), or one of its parts (`DataConfig`, `Rank4ClassConfig`, `OptimizerConfig`, `RunConfig`,
`OutputsConfig`), is one hand-off of that object, counted once per calling line and callee however often the
run makes it. Per object the table gives the hand-offs, the calls made, the functions that receive it and
their modules; `--list` prints every hand-off (of the whole config, or of any of them) as
`caller file:line -> callee module.function (object)`. Nothing the run writes is kept (its model directory
is a temporary folder).

What it counts is what the run reached: a branch the flags do not take (a TFRecord input, the tuning search)
adds nothing.
"""

import argparse
import collections
import functools
import os
import pathlib
import shlex
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("rank4class", "rank4class_cli", "rank4class_data", "rank4class_encoders", "rank4class_engine",
            "pairwise")
WHOLE = "Rank4ClassTrainConfig"
ANY = "any of them"
PARTS = ("DataConfig", "Rank4ClassConfig", "OptimizerConfig", "RunConfig", "OutputsConfig")


@functools.cache
def _module(filename: str) -> str | None:
  """The dotted module of a project file; None outside the packages (tests, site-packages, the stdlib)."""
  path = pathlib.Path(filename)
  if not path.is_absolute() or ROOT not in path.parents:
    return None
  relative = path.relative_to(ROOT).with_suffix("")
  if relative.parts[0] not in PACKAGES:
    return None
  return ".".join(relative.parts)


class HandOffs:
  """The profile hook: records (object kind, caller file:line, callee) for each call of a project function
  whose parameters hold a traced object."""

  def __init__(self, kinds: dict[type, str]):
    self.kinds = kinds
    self.edges: dict[str, set[tuple[str, str, str]]] = collections.defaultdict(set)
    self.calls: collections.Counter = collections.Counter()

  def __call__(self, frame, event, arg):
    del arg
    if event != "call":
      return
    code = frame.f_code
    module = _module(code.co_filename)
    if module is None:
      return
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs.
    values = []
    for name in code.co_varnames[:count]:
      value = frame.f_locals.get(name)
      values.extend(value if isinstance(value, (tuple, list)) else
                    value.values() if isinstance(value, dict) else [value])
    kinds = {self.kinds[type(v)] for v in values if type(v) in self.kinds}
    if not kinds:
      return
    caller = frame.f_back
    where = (f"{os.path.relpath(caller.f_code.co_filename, ROOT)}:{caller.f_lineno}"
             if caller is not None else "?")
    callee = f"{module}.{getattr(code, 'co_qualname', code.co_name)}"
    for kind in kinds:
      self.edges[kind].add((where, callee, module))
      self.calls[kind] += 1
    self.calls[ANY] += 1


def _kinds() -> dict[type, str]:
  from rank4class.modeling import model as model_lib
  from rank4class.training import train_config, training_data
  from rank4class_engine.optimization import optimizers
  types = {WHOLE: train_config.Rank4ClassTrainConfig, "DataConfig": training_data.DataConfig,
           "Rank4ClassConfig": model_lib.Rank4ClassConfig, "OptimizerConfig": optimizers.OptimizerConfig,
           "RunConfig": train_config.RunConfig, "OutputsConfig": train_config.OutputsConfig}
  return {cls: name for name, cls in types.items()}


def run(flag_line: str, model_dir: str) -> HandOffs:
  """Runs `rank4class-train <flag_line> --model_dir=<model_dir>` under the hook."""
  from rank4class_cli.binaries import train_main
  argv = ["rank4class-train", *shlex.split(flag_line), f"--model_dir={model_dir}"]
  train_main.FLAGS(argv)
  hook = HandOffs(_kinds())
  sys.setprofile(hook)
  try:
    train_main.main(argv)
  finally:
    sys.setprofile(None)
  return hook


def table(hook: HandOffs) -> str:
  lines = ["| object | hand-offs (calling line -> function) | calls made | functions | modules |",
           "|---|---:|---:|---:|---:|"]
  every = set().union(*hook.edges.values()) if hook.edges else set()
  for kind, edges in [(k, hook.edges.get(k, set())) for k in (WHOLE, *PARTS)] + [(ANY, every)]:
    lines.append(f"| {kind} | {len(edges)} | {hook.calls[kind]} | {len({e[1] for e in edges})} "
                 f"| {len({e[2] for e in edges})} |")
  return "\n".join(lines) + "\n"


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--flags", default="--dataset=digits --train_steps=40",
                      help="rank4class-train's flags, less --model_dir")
  parser.add_argument("--list", choices=(WHOLE, ANY),
                      help="print every hand-off of the whole config, or of it and its parts")
  args = parser.parse_args()
  with tempfile.TemporaryDirectory() as model_dir:
    hook = run(args.flags, model_dir)
  sys.stdout.write(table(hook))
  if args.list:
    for where, callee, kind in sorted((*edge[:2], kind) for kind, edges in hook.edges.items()
                                      if args.list in (ANY, kind) for edge in edges):
      sys.stdout.write(f"{where} -> {callee} ({kind})\n")


if __name__ == "__main__":
  main()
