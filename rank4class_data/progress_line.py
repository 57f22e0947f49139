"""A progress line on the terminal for long loops (conversion, embedding, prediction): rewritten in place at
most every few seconds, and only once the work has taken that long, so short runs and tests stay silent."""

import sys
import time
from typing import TextIO

# Seconds between progress lines (the first one after this long).
DEFAULT_EVERY_SECONDS = 2.0


class ProgressLine:
  """Throttled `\\r`-rewritten line on `stream` (stderr by default).

  Usage: `if line.due(): line.show(text)` inside the loop, `line.close()` after it.

  Args:
    every: Seconds between lines; 0 shows every `show`.
    stream: Where to write; None for `sys.stderr` at each write (so redirections made later apply).
  """

  def __init__(self, every: float = DEFAULT_EVERY_SECONDS, stream: TextIO | None = None):
    self.start = self._shown = time.perf_counter()
    self._every = every
    self._stream = stream
    self.visible = False

  @property
  def elapsed(self) -> float:
    return time.perf_counter() - self.start

  def due(self) -> bool:
    """Whether `every` seconds passed since the start or the last line."""
    return time.perf_counter() - self._shown >= self._every

  def show(self, text: str) -> None:
    stream = self._stream or sys.stderr
    stream.write("\r" + text)
    stream.flush()
    self._shown = time.perf_counter()
    self.visible = True

  def close(self) -> None:
    """Ends the line (a newline) when one was shown."""
    if self.visible:
      (self._stream or sys.stderr).write("\n")
      self.visible = False
