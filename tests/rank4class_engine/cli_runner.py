"""Runs a binary in this process the way its console script does: flags, then `main` under `cli.guard`."""

import contextlib
import dataclasses
import io
import types

from rank4class_engine import cli


@dataclasses.dataclass
class BinaryRun:
  """What a binary run left: exit status (0 when it returned), stdout and stderr."""

  code: int
  stdout: str
  stderr: str


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
