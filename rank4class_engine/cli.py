"""Command-line plumbing shared by every binary: per-binary flag registries, flag validators naming the allowed
values, and a flags parser that reports a bad flag in one line (exit 2) instead of a traceback."""

import sys
from collections.abc import Callable

import tensorflow as tf
from absl import flags
from absl import logging as absl_logging


def one_of(name: str, allowed: tuple[str, ...] | list[str]) -> tuple[Callable[[object], bool], str]:
  """A flag validator whose message names the allowed values."""
  allowed = tuple(allowed)
  return (lambda value: value is None or value in allowed,
          f"--{name} must be one of {', '.join(allowed)}")


def register_choices(flag_values: flags.FlagValues, choices: dict[str, tuple[str, ...]]) -> None:
  """Registers `one_of` validators on `flag_values` for each flag name -> allowed values."""
  for name, allowed in choices.items():
    checker, message = one_of(name, allowed)
    flags.register_validator(name, checker, message, flag_values=flag_values)


def make_flags_parser(flag_values: flags.FlagValues, program: str, doc: str,
                      check: Callable[[flags.FlagValues], object] | None = None
                      ) -> Callable[[list[str]], list[str]]:
  """An `app.run` flags parser that reads `flag_values` and reports a bad flag in one line.

  `--help` prints `doc` and the flags. Any flags error (unknown flag, bad value, missing required flag), and
  any ValueError or FileNotFoundError of `check(flag_values)` (the flags->config function), prints
  `<program>: error: <message>` on stderr and exits with status 2.
  """

  def parse(argv: list[str]) -> list[str]:
    if any(arg in ("--help", "-h", "-?", "--helpshort", "--helpfull") for arg in argv[1:]):
      sys.stdout.write(doc + "\nflags:\n" + flag_values.get_help() + "\n")
      sys.exit(0)
    quiet_logs(argv)
    flag_values.unparse_flags()
    try:
      rest = flag_values(argv, known_only=True)
      rest = flags.FLAGS(rest)  # absl's own flags (logging); anything else is unknown.
      if check is not None:
        check(flag_values)
    except (flags.Error, ValueError, FileNotFoundError) as e:
      sys.stderr.write(f"{program}: error: {e}\n")
      sys.exit(2)
    return rest

  return parse


def quiet_logs(argv: list[str]) -> None:
  """Keeps TensorFlow's and absl's INFO chatter (SavedModel writes, conversions) off the console unless the
  user asked for it with --verbosity / -v."""
  if not any(arg.startswith(("--verbosity", "-v")) for arg in argv[1:]):
    absl_logging.set_verbosity(absl_logging.WARNING)
    tf.get_logger().setLevel("ERROR")
