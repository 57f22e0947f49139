"""Runs a binary in this process the way its console script does (flags, then `main` under `cli.guard`), or
only builds its config from flags."""

import contextlib
import dataclasses
import io
import types

from rank4class_cli import cli


@dataclasses.dataclass
class BinaryRun:
  """What a binary run left: exit status (0 when it returned), stdout and stderr."""

  code: int
  stdout: str
  stderr: str


def parsed_config(binary: types.ModuleType, argv: list[str]):
  """The config `binary.config_from_flags` builds from `argv` (the binary's flags are reset afterwards)."""
  binary.parse_flags([binary.parse_flags.program, *argv])
  try:
    return binary.config_from_flags(binary.FLAGS)
  finally:
    binary.FLAGS.unparse_flags()


def run_binary(binary: types.ModuleType, argv: list[str]) -> BinaryRun:
  """Parses `argv` with `binary.parse_flags` and runs `binary.main` as `cli.run` would, capturing its output.

  The binary's flags are reset afterwards, so tests can run it again with other flags.
  """
  program = binary.parse_flags.program
  out, err = io.StringIO(), io.StringIO()
  code = 0
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
      rest = binary.parse_flags([program, *argv])
      cli.guard(binary.main, program, binary.FLAGS)(rest)
    except SystemExit as e:
      code = 0 if e.code is None else e.code
    finally:
      binary.FLAGS.unparse_flags()
  return BinaryRun(code, out.getvalue(), err.getvalue())


def parse_error(binary: types.ModuleType, argv: list[str]) -> tuple[int, str]:
  """Runs only `binary.parse_flags` on `argv`; returns (exit status, stderr): 0 and "" when the flags parse.

  The binary's flags are reset afterwards."""
  err = io.StringIO()
  with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    try:
      binary.parse_flags([binary.parse_flags.program, *argv])
    except SystemExit as e:
      return e.code, err.getvalue()
    finally:
      binary.FLAGS.unparse_flags()
  return 0, err.getvalue()
