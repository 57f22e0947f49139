r"""Exports a trained Rank4Class model for many-class serving: two-stage scoring or classes given as texts.

Sample command lines:

  # A dot model retrieves 200 classes over all of them, the latent-cross model re-ranks those: one signature.
  rank4class-export --kind=two_stage --model_dir=/tmp/ranker --retriever_dir=/tmp/dot --num_candidates=200 \
      --export_dir=/tmp/two_stage

  # A model whose classes are texts (--class_encoder=metadata) ranks the class texts sent with each request.
  rank4class-export --kind=zero_shot --model_dir=/tmp/text_classes --export_dir=/tmp/zero_shot

  # Both are served and evaluated like a training run's export, from raw inputs (a zero-shot export ranks its
  # training classes, or those of --class_texts: classes unseen in training too).
  rank4class-predict --model_dir=/tmp/zero_shot --class_texts=new_classes.csv --input=texts.txt --output=p.csv
  rank4class-evaluate --model_dir=/tmp/two_stage --input=test.csv

Each export holds its inputs description (rank4class_inputs.json: kind, raw input, frozen text encoder,
classes). Serve without the toolkit with `tf.saved_model.load(export_dir).signatures["serving_default"]`:
two_stage takes `inputs` and returns class_ids, class_names, scores and candidate_ids ("candidates": the M
candidates and the ranker's scores of them); zero_shot takes `inputs` and `class_texts` and returns scores,
class_indices, class_texts and top_scores ("embed_class_texts" and "score_classes": a class set embedded once,
then scored per request), and needs `import tensorflow_text` (its class tower tokenizes).
"""

from absl import flags

from rank4class.inference import export as export_lib
from rank4class.inference import served
from rank4class_cli import cli, terminal
from rank4class_data.validation import refuse_output_over_inputs

PROGRAM = "rank4class-export"
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.
define = cli.FlagDefiner(FLAGS)

define.enum("kind", export_lib.TWO_STAGE, export_lib.KINDS, "two_stage: retrieve with --retriever_dir, "
            "re-rank with --model_dir; zero_shot: rank class texts given at serving time.")
define.string("model_dir", None,
              "The trained model: training model_dir (uses <model_dir>/export) or SavedModel.")
define.string("retriever_dir", None, "two_stage: the first-stage model (same classes), e.g. a dot model.")
define.string("export_dir", None, "Folder of the new SavedModel (replaced whole if it exists).")
define.integer("num_candidates", 200, "two_stage: classes the first stage passes on.")
define.integer("top_k", 5, "Classes returned per instance.")
define.integer("chunk_size", 4096, "two_stage: classes the first stage scores at once (memory bound).")
flags.mark_flags_as_required(["model_dir", "export_dir"], flag_values=FLAGS)
# The config fields whose flag has another name, as library messages name them (`cli.flag_words` writes them
# as these flags); every other field is spelled as its flag. `config_from_flags` below reads these flags.
define.field_flags({"model_path": "model_dir", "retriever_path": "retriever_dir"})


def config_from_flags(f: flags.FlagValues) -> export_lib.ExportConfig:
  """The export the flags ask for; ValueError names a bad value."""
  if f.kind == export_lib.TWO_STAGE and not f.retriever_dir:
    raise ValueError("--kind=two_stage needs --retriever_dir (the first-stage model, e.g. a dot model)")
  for name in ("num_candidates", "top_k", "chunk_size"):
    if getattr(f, name) < 1:
      raise ValueError(f"--{name}={getattr(f, name)} must be positive")
  return export_lib.ExportConfig(model_path=f.model_dir, export_dir=f.export_dir, kind=f.kind,
                                 retriever_path=f.retriever_dir, num_candidates=f.num_candidates,
                                 top_k=f.top_k, chunk_size=f.chunk_size)


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, config_from_flags)


def check_outputs(config: export_lib.ExportConfig) -> None:
  """ValueError when the new SavedModel's folder (replaced whole) is, or holds, a model it is made from."""
  retriever = config.retriever_path
  refuse_output_over_inputs(
      {}, {"--model_dir": [served.model_folder(config.model_path)],
           "--retriever_dir": [served.model_folder(retriever)] if retriever else None},
      replaced={"--export_dir": config.export_dir})


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  config = config_from_flags(FLAGS)
  check_outputs(config)
  summary = export_lib.export(config)
  what = (f"the run's zero-shot model ({summary['source']}, chosen on classes held out of its training)"
          if summary["source"] != config.model_path else f"over {summary['num_classes']:,} classes")
  terminal.out(f"Exported {summary['kind']} {what} to {summary['export_dir']}: "
        f"inputs {', '.join(summary['inputs'])} -> {', '.join(summary['outputs'])}")
  terminal.out(predict_hint(config))


def predict_hint(config: export_lib.ExportConfig) -> str:
  """The `rank4class-predict` command for the new export; runs as printed once its input is given (a zero-shot
  export ranks its training classes, or with --class_texts=FILE any others)."""
  input_kind = served.read_inputs(config.export_dir).input
  placeholder = {served.IMAGE: "<image folder>", served.DENSE: "<rank4class-convert .tfrecord>"}.get(
      input_kind, "<texts or rows>")
  return cli.next_command("rank4class-predict", [("model_dir", config.export_dir), ("input", placeholder),
                                                 ("output", "predictions.csv")])


def run() -> None:
  """Console script `rank4class-export`."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
