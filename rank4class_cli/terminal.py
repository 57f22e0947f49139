"""The binaries' terminal output: `out` for results on stdout, `err` for lines on stderr.

Both go through `rank4class_data.messages`, the library's one path to the terminal, so a binary's lines and
the library's meet on the same streams, looked up when written: stderr is the binary's stream that writes
config fields as its flags while `main` runs (`cli.flag_words_on_stderr`), or a test's capture.
"""

from rank4class_data import messages


def out(text: str, end: str = "\n") -> None:
  """Writes a result, `text` then `end` (as `print` does), to stdout and flushes."""
  messages.out(text, end)


def err(line: str) -> None:
  """Writes `line` to stderr, ending it with a newline when it has none, and flushes."""
  messages.say(line)
