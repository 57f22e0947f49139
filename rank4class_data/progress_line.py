"""The one progress line of long loops (conversion, embedding, prediction, training): on a terminal one line
rewritten in place; in a log or a pipe one full line at most every few seconds. Silent until the work has
taken a while, so short runs and tests print nothing."""

import sys
import time
from typing import TextIO

# Seconds between two rewrites of the line on a terminal (the first one after this long).
DEFAULT_EVERY_SECONDS = 2.0
# Seconds between two full lines when the stream is not a terminal (logs, CI, pipes): at least this many.
LOG_EVERY_SECONDS = 5.0
# Carriage return, then erase the line: a shorter text leaves no tail of the longer one it replaces.
_REWRITE = "\r\x1b[2K"


def is_terminal(stream: TextIO) -> bool:
  """Whether `stream` is an interactive terminal (a closed or odd stream is not)."""
  try:
    return bool(stream.isatty())
  except (AttributeError, ValueError, OSError):
    return False


class ProgressLine:
  """A throttled progress line on `stream` (stderr by default).

  On a terminal, `show` rewrites one line in place (carriage return, line cleared) and `close` ends it with a
  newline. Elsewhere (a log file, CI, a pipe) every `show` writes a whole newline-terminated line, and `due`
  is true at most every `max(every, LOG_EVERY_SECONDS)` seconds, so a log gets a line every few seconds, never
  lines run together.

  Usage: `if line.due(): line.show(text)` inside the loop, `line.close()` after it.

  Args:
    every: Seconds between lines on a terminal (the first one after this long); 0 makes every call due, on a
      terminal or not.
    stream: Where to write; None for `sys.stderr` at each write (so redirections made later apply).
    log_every: Seconds between lines off a terminal; default `max(every, LOG_EVERY_SECONDS)` (0 when `every`
      is 0).
  """

  def __init__(self, every: float = DEFAULT_EVERY_SECONDS, stream: TextIO | None = None,
               log_every: float | None = None):
    self.start = self._shown = time.perf_counter()
    self._every = every
    if log_every is None:
      log_every = max(every, LOG_EVERY_SECONDS) if every > 0 else 0.0
    self._log_every = log_every
    self._stream = stream
    self._open = False  # A terminal line written and not yet ended.
    self.visible = False  # Some line was shown.

  @property
  def stream(self) -> TextIO:
    return self._stream or sys.stderr

  @property
  def terminal(self) -> bool:
    """Whether the stream is a terminal (the line is rewritten in place)."""
    return is_terminal(self.stream)

  @property
  def elapsed(self) -> float:
    return time.perf_counter() - self.start

  def due(self) -> bool:
    """Whether the interval (terminal: `every`; otherwise `log_every`) passed since the start or the last
    line."""
    every = self._every if self.terminal else self._log_every
    return time.perf_counter() - self._shown >= every

  def show(self, text: str) -> None:
    """Shows `text`: rewrites the terminal line, or writes one full line elsewhere."""
    stream = self.stream
    if is_terminal(stream):
      stream.write(_REWRITE + text)
      self._open = True
    else:
      stream.write(text + "\n")
    stream.flush()
    self._shown = time.perf_counter()
    self.visible = True

  def close(self) -> None:
    """Ends a terminal line left open (a newline), so the next message starts on its own line."""
    if self._open:
      self.stream.write("\n")
      self.stream.flush()
      self._open = False
    self.visible = False
