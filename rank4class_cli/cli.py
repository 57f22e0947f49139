"""Command-line plumbing shared by every binary: per-binary flag registries, flag validators naming the
allowed values, a flags parser that reports a bad flag in one line (exit 2), and `run`, which reports bad
input met while running (a bad row, a missing file, a busy run directory) in one line (exit 1), and a write
the file system refused (a full disk, the file-size limit, a quota, a read-only or forbidden folder) in one
line naming the path (exit 74), instead of a traceback.

A binary is: `FLAGS = flags.FlagValues()` with its own flags (defined through `FlagDefiner(FLAGS)`),
`config_from_flags(FLAGS)`, then

  parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, config_from_flags)
  def run(): cli.run(main, parse_flags)

`--debug` (defined on every binary's flags) shows the traceback instead of the one line. A renamed flag keeps
its old name as a deprecated alias (`FlagDefiner.alias`): the old name works, with one warning line on stderr.

Library messages name settings as their config fields, in backticks (`data.text_mode`, `overwrite`): the
library is also called from Python, where flags do not exist. `flag_words` is the one place that writes such a
field as the binary's flag when a line reaches the terminal (the errors `make_flags_parser` and `guard`
print, and every line written to stderr while `main` runs): a binary declares the fields whose flag has
another name in a table (`FlagDefiner.field_flags`, beside its `config_from_flags`); a field spelled as one of
the binary's flags (`seed`, `data.validation_fraction`) is that flag; any other field stays as written.
"""

import contextlib
import re
import shlex
import signal
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence

import rank4class_data  # noqa: F401  Its __init__ runs the stack check, which comes before TensorFlow.

# isort: split
import tensorflow as tf
from absl import app, flags
from absl import logging as absl_logging

from rank4class_cli import terminal
from rank4class_data import write_failures
from rank4class_data.conversion import row_cache
from rank4class_data.records.elwc import located_undecodable_list
from rank4class_data.records.tfrecords import (
  located_data_loss,
  located_data_problem,
  located_unparsable_example,
)
from rank4class_data.rows import bad_rows, row_tables
from rank4class_engine.loop import preemption
from rank4class_engine.runs.run_lock import RunDirectoryBusyError

# What running a binary raises for the user's input rather than for a defect of ours: the toolkit's own data
# errors (rank4class_data.validation's DataError and FieldError are ValueErrors), config checks (ValueError
# naming the flag or field), missing or unreadable files and folders, and a run directory another run holds.
# A ValueError of a defect is reported the same way; `--debug` shows its traceback.
INPUT_ERRORS = (ValueError, OSError, RunDirectoryBusyError)
DEBUG_FLAG = "debug"
# A run stopped by Ctrl-C (SIGINT) exits as shells report a process ended by it: 128 + 2; by SIGTERM (a
# training run's `TrainingInterrupted.signal_number`), 128 + 15.
INTERRUPTED_EXIT_CODE = preemption.exit_code(signal.SIGINT)
# The arguments that make a binary print its help (the console scripts answer them from the stored texts,
# rank4class_cli.launch.HELP_ARGUMENTS).
HELP_ARGUMENTS = ("--help", "-h", "-?", "--helpshort", "--helpfull")
# A value the user replaces in a printed command ("<run folder>"): left unquoted.
PLACEHOLDER = re.compile(r"<[^<>]+>")
# The version whose release removes the deprecated flag names (`FlagDefiner.alias`), deprecated in 0.9.0.
ALIASES_REMOVED_IN = "0.10.0"
# Each flag registry's deprecated names: FlagValues -> {old name: new name}.
_ALIASES: "weakref.WeakKeyDictionary[flags.FlagValues, dict[str, str]]" = weakref.WeakKeyDictionary()
# A command-line word naming a flag as absl reads it: -name or --name, with =value or not.
_FLAG_WORD = re.compile(r"^--?([A-Za-z_][\w.-]*)(=.*)?$", re.DOTALL)
# A config field as library messages name it: backticked, dotted for a nested field (`data.text_mode`).
_FIELD = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)`")
# Each flag registry's table of the config fields whose flag has another name: FlagValues -> {field: flag, or
# None for no flag}.
_FIELD_FLAGS: "weakref.WeakKeyDictionary[flags.FlagValues, dict[str, str | None]]" = (
    weakref.WeakKeyDictionary())


class FlagDefiner:
  """Defines flags on one binary's own registry: `define.string(name, default, help)` is
  `flags.DEFINE_string(name, default, help, flag_values=registry)`, likewise integer, float, bool, list and
  enum (extra keyword arguments pass through)."""

  def __init__(self, flag_values: flags.FlagValues):
    self._flag_values = flag_values

  def _define(self, define: Callable[..., object], *args, **kwargs) -> None:
    define(*args, flag_values=self._flag_values, **kwargs)

  def string(self, *args, **kwargs) -> None:
    self._define(flags.DEFINE_string, *args, **kwargs)

  def integer(self, *args, **kwargs) -> None:
    self._define(flags.DEFINE_integer, *args, **kwargs)

  def float(self, *args, **kwargs) -> None:
    self._define(flags.DEFINE_float, *args, **kwargs)

  def bool(self, *args, **kwargs) -> None:
    self._define(flags.DEFINE_bool, *args, **kwargs)

  def list(self, *args, **kwargs) -> None:
    self._define(flags.DEFINE_list, *args, **kwargs)

  def enum(self, *args, **kwargs) -> None:
    self._define(flags.DEFINE_enum, *args, **kwargs)

  def alias(self, old: str, new: str) -> None:
    """`--old` as a deprecated name of the defined flag `--new` (removed in 0.10.0, `ALIASES_REMOVED_IN`):
    given, it sets `--new` and prints `--old is deprecated; use --new (same meaning).` on stderr; given beside
    `--new` (or beside another old name of it) it is a flags error. `--help` lists the old names."""
    if new not in self._flag_values:
      raise ValueError(f"--{old} cannot be an alias of --{new}, which is not defined")
    if old in self._flag_values:
      raise ValueError(f"--{old} is a flag of its own; it cannot also be an alias of --{new}")
    _ALIASES.setdefault(self._flag_values, {})[old] = new

  def field_flags(self, table: dict[str, str | None]) -> None:
    """Declares which flag sets each config field of `table` (dotted path as library messages spell it, or its
    last part for every path ending in it -> flag name, or None for a field no flag sets), for the fields not
    spelled as their flag: `flag_words` writes a backticked field of a message as its flag. Each named flag
    must be defined."""
    for field, flag in table.items():
      if flag is not None and flag not in self._flag_values:
        raise ValueError(f"field {field!r} names --{flag}, which is not defined")
    _FIELD_FLAGS.setdefault(self._flag_values, {}).update(table)

  def bad_row_flags(self, rejects: bool = True,
                    rejects_default: str = "<output stem>" + bad_rows.REJECTS_SUFFIX
                    ) -> None:
    """--bad_rows and --max_bad_rows (and --rejects, defaulting to `rejects_default`): the bad-row policy that
    `bad_row_policy` reads back."""
    self.enum("bad_rows", bad_rows.FAIL, bad_rows.POLICIES, "A bad row stops the run (fail), or is left out "
              "and listed with file, row, line and reason in a JSONL rejects file (skip).")
    self.integer("max_bad_rows", None, "skip: stop (writing nothing) when more rows than this are bad; "
                 "default: no limit.")
    if rejects:
      self.string("rejects", None, f"skip: the JSONL file listing rejected rows; default: {rejects_default}.")


  def preemption_flag(self) -> None:
    """--preemption_grace_seconds of the training binaries
    (`trainer.EngineConfig.preemption_grace_seconds`)."""
    self.float("preemption_grace_seconds", 20.0, "Seconds a run has after SIGTERM or SIGINT to finish its "
               "current step and write a checkpoint there (exit 143 or 130; the same command resumes from "
               "that step); a second signal or the end of the grace interrupts at once.")

  def row_conversion_flags(self) -> None:
    """The flags of `row_cache.RowConversion` (how training converts row files and image folders):
    --text_column, --label_column, --feature_columns, --image_size, --image_channels and the bad-row flags."""
    self.string("text_column", row_tables.AUTO,
                "rows: text column (auto: .tab's string column, else 'text').")
    self.string("label_column", row_tables.AUTO,
                "rows: class column (auto: .tab's class column, else 'label').")
    self.list("feature_columns", [], "rows: numeric columns forming a dense feature vector.")
    self.list("image_size", [],
              "image folders: height,width every image is resized to; default: all one size.")
    self.integer("image_channels", None, "image folders: 1 or 3 channels; default: the first image's.")
    self.bad_row_flags(rejects=False)


def aliases(flag_values: flags.FlagValues) -> dict[str, str]:
  """The deprecated flag names of `flag_values` (`FlagDefiner.alias`): old name -> new name."""
  return dict(_ALIASES.get(flag_values, {}))


def flag_words(message: str, flag_values: flags.FlagValues) -> str:
  """`message` with each backticked config field written as the flag that sets it: the field's flag in the
  binary's table (`FlagDefiner.field_flags`), looked up by its whole path, then by its last part
  (`data.data_path` finds "data_path"), else the flag spelled as that last part (`data.validation_fraction` ->
  --validation_fraction) when the binary defines one; a field without a flag stays as written.

  Example (a binary whose table maps "data_path" to "input"):
    flag_words("`format`=rows needs `data_path`; `seed` must be >= 0", FLAGS)
    # "`format`=rows needs --input; --seed must be >= 0" (no --format flag: the field stays)
  """
  table = _FIELD_FLAGS.get(flag_values, {})

  def flag(match: re.Match) -> str:
    field = match[1]
    name = field.rsplit(".", 1)[-1]
    for key in (field, name):
      if key in table:
        return match[0] if table[key] is None else f"--{table[key]}"
    return f"--{name}" if name in flag_values and name != DEBUG_FLAG else match[0]

  return _FIELD.sub(flag, message)


class _FlagWordsStream:
  """A text stream (the terminal's stderr) that writes each line through `flag_words`."""

  def __init__(self, stream, flag_values: flags.FlagValues):
    self._stream = stream
    self._flag_values = flag_values

  def write(self, text: str) -> int:
    self._stream.write(flag_words(text, self._flag_values))
    return len(text)

  def __getattr__(self, name: str):
    return getattr(self._stream, name)


@contextlib.contextmanager
def flag_words_on_stderr(flag_values: flags.FlagValues) -> Iterator[None]:
  """Within: every line written to `sys.stderr` goes through `flag_words` (restored afterwards)."""
  stderr = sys.stderr
  sys.stderr = _FlagWordsStream(stderr, flag_values)
  try:
    yield
  finally:
    sys.stderr = stderr


def resolve_aliases(argv: Sequence[str], flag_values: flags.FlagValues,
                    warn: Callable[[str], object] | None = None) -> list[str]:
  """`argv` with each deprecated flag name written as its new name, and one warning line per old name given.

  Reads the words absl reads as flags (`--name`, `-name`, `=value` or not, `--noname` for a bool) up to `--`;
  `warn` writes a line (default: to stderr).

  Raises:
    flags.Error: when a flag is given under two of its names (old and new, or two old ones), naming them.
  """
  renamed = aliases(flag_values)
  if not renamed:
    return list(argv)
  new_names = set(renamed.values())
  spellings: dict[str, set[str]] = {}  # New name -> the names it was given under.
  warned: list[str] = []
  out = list(argv[:1])
  for i, word in enumerate(argv[1:], start=1):
    if word == "--":
      out.extend(argv[i:])
      break
    match = _FLAG_WORD.match(word)
    name = match[1] if match else None
    negated = False
    if name is not None and name not in renamed and name not in new_names and name.startswith("no"):
      negated, name = True, name[2:]  # --noname of a bool.
    if name in renamed:
      new = renamed[name]
      spellings.setdefault(new, set()).add(name)
      if name not in warned:
        warned.append(name)
      dashes = word[:len(word) - len(word.lstrip("-"))]
      out.append(dashes + ("no" if negated else "") + new + (match[2] or ""))
      continue
    if name in new_names:
      spellings.setdefault(name, set()).add(name)
    out.append(word)
  for new, names in spellings.items():
    old_names = " and ".join(f"--{name}" for name in sorted(names - {new}))
    if new in names and len(names) > 1:
      raise flags.Error(f"{old_names} "
                        f"{'is the deprecated name' if len(names) == 2 else 'are deprecated names'} of "
                        f"--{new}: give --{new} only, not both")
    if len(names) > 1:
      raise flags.Error(f"{old_names} are deprecated names of one flag, --{new}: give --{new} once")
  warn = warn or terminal.err
  for old in warned:
    warn(f"--{old} is deprecated; use --{renamed[old]} (same meaning).\n")
  return out


def row_conversion(f: flags.FlagValues) -> row_cache.RowConversion:
  """The conversion of the flags `FlagDefiner.row_conversion_flags` defined."""
  return row_cache.RowConversion(
      text_column=f.text_column, label_column=f.label_column, feature_columns=f.feature_columns,
      bad_rows=f.bad_rows, max_bad_rows=f.max_bad_rows,
      image_size=int_tuple("image_size", f.image_size) or None, image_channels=f.image_channels)


def bad_row_policy(f: flags.FlagValues) -> bad_rows.BadRowPolicy:
  """The policy of the flags `FlagDefiner.bad_row_flags` defined."""
  return bad_rows.BadRowPolicy(f.bad_rows, f.max_bad_rows, f["rejects"].value if "rejects" in f else None)


def next_command(program: str, flag_values: Sequence[tuple[str, object]]) -> str:
  """`Next: program --name=value ...`, the command a binary suggests after its work: it runs as printed once
  its one placeholder (`PLACEHOLDER`, e.g. `<run folder>`) is replaced; the other values are shell-quoted."""
  words = [program]
  for name, value in flag_values:
    text = str(value)
    words.append(f"--{name}=" + (text if PLACEHOLDER.fullmatch(text) else shlex.quote(text)))
  return "Next: " + " ".join(words)


def int_tuple(name: str, values: list[str]) -> tuple[int, ...]:
  """The integers of list flag `--name`; a ValueError naming the flag when one is not an integer."""
  try:
    return tuple(int(v) for v in values)
  except ValueError:
    raise ValueError(f"--{name}={','.join(values)} must be a comma-separated list of integers") from None


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

  `--help` (or `--helpshort`/`--helpfull`) prints `doc` and the binary's flags with their defaults; `--debug`
  is added to them, and the deprecated names (`FlagDefiner.alias`) after them; an old name given is read as
  its new one, with one warning line. Any flags error (unknown flag, bad value, missing required flag, a
  positional argument, a flag given under two of its names), and any ValueError or FileNotFoundError of
  `check(flag_values)` (the flags->config function), prints `<program>: error: <message>` on stderr and exits
  with status 2.
  """

  if DEBUG_FLAG not in flag_values:
    flags.DEFINE_bool(DEBUG_FLAG, False, "Show the Python traceback of an error instead of one line.",
                      flag_values=flag_values)

  def help_text() -> str:
    renamed = aliases(flag_values)
    deprecated = "".join(f"  --{old}: use --{new} (same meaning)\n" for old, new in sorted(renamed.items()))
    return (
      doc
      + "\nflags:\n"
      + flag_values.get_help()
      + "\n"
      + (f"\ndeprecated flag names (removed in {ALIASES_REMOVED_IN}):\n{deprecated}" if deprecated else "")
    )

  def parse(argv: list[str]) -> list[str]:
    if any(arg in HELP_ARGUMENTS for arg in argv[1:]):
      terminal.out(help_text(), end="")
      sys.exit(0)
    quiet_logs(argv)
    flag_values.unparse_flags()
    try:
      argv = resolve_aliases(argv, flag_values)
      rest = flag_values(argv, known_only=True)
      rest = flags.FLAGS(rest)  # absl's own flags (logging); anything else is unknown.
      if len(rest) > 1:
        raise flags.Error(f"unexpected arguments {rest[1:]}: every input is a --flag (see --help)")
      if check is not None:
        check(flag_values)
    except (flags.Error, ValueError, FileNotFoundError) as e:
      terminal.err(flag_words(f"{program}: error: {e}", flag_values))
      sys.exit(2)
    return rest

  parse.program = program
  parse.flag_values = flag_values
  parse.help_text = help_text  # What --help prints (scripts/gen_help.py stores it for the console scripts).
  return parse


def error_line(program: str, error: BaseException) -> str:
  """`<program>: error: <message>` on one line (a DataError's message already names file, row and field)."""
  message = " ".join(str(error).split()) or type(error).__name__
  if isinstance(error, OSError) and error.filename is not None and str(error.filename) not in message:
    message = f"{error.filename}: {message}"
  return f"{program}: error: {message}"


def guard(main: Callable[[list[str]], object], program: str, flag_values: flags.FlagValues
          ) -> Callable[[list[str]], object]:
  """`main` with the user's input errors reported as one line on stderr and exit status 1, a write the file
  system refused as one line and exit status 74, and Ctrl-C as one line and exit status 130 (a training run's
  line says where it resumes; a training run stopped by SIGTERM exits 143).

  Input errors are those `input_error_line` names. A refused write (a full disk, the file-size limit, a
  quota, a read-only file system, a folder this user may not write: `rank4class_data.write_failures`, in
  Python's, TensorFlow's and SQLite's errors) names the path, what the file system said and what to do
  (`write_failure_line`). With `--debug` the error propagates (traceback). Anything else (a defect) propagates
  too.

  The config fields a message or a line on stderr names are written as the binary's flags (`flag_words`).
  """

  def fail(error: BaseException, message: str, code: int = 1) -> None:
    if DEBUG_FLAG in flag_values and flag_values[DEBUG_FLAG].value:
      raise error
    sys.stdout.flush()
    terminal.err(message)  # Within `guarded`: stderr writes the fields as flags (`flag_words_on_stderr`).
    sys.exit(code)

  def guarded(argv: list[str]):
    with flag_words_on_stderr(flag_values):
      return run_main(argv)

  def run_main(argv: list[str]):
    try:
      return main(argv)
    except KeyboardInterrupt as e:  # Ctrl-C: outputs are written whole or not at all; training resumes.
      detail = " ".join(str(e).split())
      signal_number = getattr(e, "signal_number", signal.SIGINT)  # A training run's TrainingInterrupted.
      what = "interrupted" if signal_number == signal.SIGINT else "terminated"
      fail(e, f"{program}: {what}" + (f"; {detail}" if detail else "; nothing was left half-written") + ".",
           preemption.exit_code(signal_number))
    except Exception as e:  # One line when it is the user's (or the file system's); a defect propagates.
      failure = write_failures.find(e)
      if failure is not None:
        fail(e, write_failure_line(program, failure), write_failures.WRITE_FAILED_EXIT_CODE)
      line = input_error_line(program, e)
      if line is None:
        raise
      fail(e, line)

  return guarded


# Binaries whose rerun resumes where a refused write stopped them -> what the rerun does.
_RERUNS = {
    "rank4class-train": "training resumes from its last checkpoint",
    "pairwise-train": "training resumes from its last checkpoint",
    "rank4class-study": "finished runs are not trained again",
}


def write_failure_line(program: str, failure: write_failures.WriteFailure) -> str:
  """`<program>: error: <path>: <what the file system said>; <what to do> and rerun the same command[: <what
  the rerun resumes>].`"""
  rerun = _RERUNS.get(program)
  return failure.line(program, f": {rerun}" if rerun else "")


def input_error_line(program: str, error: Exception) -> str | None:
  """The one line of an input error, or None for a defect.

  Input errors are INPUT_ERRORS, a bad record found inside a tf.data pipeline (TensorFlow's
  InvalidArgumentError carrying a located `rank4class_data.records.tfrecords.assert_valid` or parse message),
  an unreadable TFRecord met by a pipeline (TensorFlow's DataLossError, which names no file: reported as the
  file and record `rank4class_data.records.tfrecords.located_data_loss` finds), a record that is no proto of
  the pipeline's kind (TensorFlow's parse errors name no file, and one quoting bytes that are not UTF-8
  arrives as a UnicodeDecodeError: reported as the record `located_unparsable_example` /
  `located_undecodable_list` find), and TensorFlow's out-of-memory error (`out_of_memory`).
  """
  problem = None
  if isinstance(error, UnicodeDecodeError):  # An input error (a ValueError); TensorFlow's, when quoted.
    problem = located_unparsable_example(error)
    return f"{program}: error: {problem}" if problem else error_line(program, error)
  if isinstance(error, INPUT_ERRORS):
    return error_line(program, error)
  if isinstance(error, tf.errors.InvalidArgumentError):
    problem = located_data_problem(error) or located_unparsable_example(error)
  elif isinstance(error, tf.errors.DataLossError):
    problem = located_undecodable_list(error) or located_data_loss(error)
  elif isinstance(error, tf.errors.ResourceExhaustedError):
    problem = out_of_memory(error)
  return None if problem is None else f"{program}: error: {problem}"


_ALLOCATION = re.compile(r"OOM when allocating tensor with (shape\[[\d,]*\]) and type (\w+)")
_NODE = re.compile(r"\{\{node ([^}]+)\}\}")


def out_of_memory(error: tf.errors.ResourceExhaustedError) -> str:
  """One line for TensorFlow's out-of-memory error: the tensor it could not allocate and the op that asked."""
  allocation, node = _ALLOCATION.search(error.message), _NODE.search(error.message)
  what = f"a float tensor of {allocation[1]}" if allocation and allocation[2] == "float" else \
      (f"a {allocation[2]} tensor of {allocation[1]}" if allocation else "a tensor")
  where = f" (op {node[1]})" if node else ""
  return (f"out of memory allocating {what}{where}; expected a smaller batch (--batch_size) or fewer classes "
          "per list; --debug shows the traceback.")


def run(main: Callable[[list[str]], object], parse_flags: Callable[[list[str]], list[str]]) -> None:
  """Runs a binary: its flags through `parse_flags` (from `make_flags_parser`), then `main` under `guard`.

  A write past the file-size limit (`ulimit -f`) raises EFBIG, reported in one line, rather than the
  process being killed by SIGXFSZ (ignored, as Python's own start-up does; set again for embedded
  interpreters)."""
  signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  app.run(guard(main, parse_flags.program, parse_flags.flag_values), flags_parser=parse_flags)


def quiet_logs(argv: list[str]) -> None:
  """Keeps TensorFlow's and absl's INFO chatter (SavedModel writes, conversions) off the console unless the
  user asked for it with --verbosity / -v."""
  if not any(arg.startswith(("--verbosity", "-v")) for arg in argv[1:]):
    absl_logging.set_verbosity(absl_logging.WARNING)
    tf.get_logger().setLevel("ERROR")
