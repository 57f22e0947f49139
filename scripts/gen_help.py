"""Writes the console scripts' stored help texts (rank4class_cli/help.json) from the binaries, or checks them.

Each console script answers `--help` from that file without importing TensorFlow (rank4class_cli.launch); the
text is the binary's own (`parse_flags.help_text()`: its docstring and flags, wrapped at absl's default 80
columns, as when its output is not a terminal).

  python scripts/gen_help.py           # rewrite rank4class_cli/help.json
  python scripts/gen_help.py --check   # exit 1 naming the binaries whose stored help is stale
"""

import contextlib
import importlib
import io
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rank4class_cli import launch  # noqa: E402


def help_texts() -> dict[str, str]:
  """Program -> the help text its binary prints."""
  texts = {}
  for program, module in launch.PROGRAMS.items():
    parse_flags = importlib.import_module(module).parse_flags
    with contextlib.redirect_stdout(io.StringIO()):  # Not a terminal: absl wraps at its default width.
      texts[program] = parse_flags.help_text()
  return texts


def rendered(texts: dict[str, str]) -> str:
  return json.dumps(texts, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> int:
  text = rendered(help_texts())
  path = pathlib.Path(launch.HELP_FILE)
  if "--check" in sys.argv[1:]:
    stored = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    stale = [program for program, help_text in json.loads(text).items() if stored.get(program) != help_text]
    stale += [program for program in stored if program not in launch.PROGRAMS]
    if stale:
      print(f"{path.relative_to(ROOT)} is stale for {', '.join(sorted(stale))}: run python "
            "scripts/gen_help.py")
      return 1
    return 0
  path.write_text(text, encoding="utf-8")
  print(f"wrote {path.relative_to(ROOT)} ({len(launch.PROGRAMS)} binaries)")
  return 0


if __name__ == "__main__":
  sys.exit(main())
