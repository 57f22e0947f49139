"""The library's lines for the person running a command: `say` (stderr), `out` (results on stdout).

A developer's details are not terminal lines: each module logs them to its own stdlib logger,
`logging.getLogger(__name__)`, which the binaries' absl handler shows at the verbosity the user picks. Both
functions look the stream up when called, so a binary's wrapped stderr (which writes config fields as its
flags) and a test's captured one receive the line.
"""

import sys


def say(line: str) -> None:
  """Writes `line` (what was read, what was chosen, a warning to see) to `sys.stderr`, ends it with a newline
  when it has none, and flushes. A condition such as `verbose` stays with the caller."""
  stream = sys.stderr
  stream.write(line if line.endswith("\n") else line + "\n")
  stream.flush()


def out(text: str, end: str = "\n") -> None:
  """Writes `text` and then `end` (as `print` does) to `sys.stdout`, and flushes: a result to print."""
  stream = sys.stdout
  stream.write(text + end)
  stream.flush()
