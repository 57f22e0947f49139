r"""Trains a Rank4Class model (instance encoder, class encoder, interaction, ranking loss) on real data.

Sample command lines:

  rank4class-train --dataset=reuters_r8 --text_mode=frozen --interaction=latent_cross --hidden_width=128 \
      --loss=approx_ndcg --optimizer=adam --learning_rate=1e-3 --train_steps=2000 --eval_every=200 \
      --model_dir=/tmp/r8_lc_approx

  rank4class-train --train_files=reviews.csv --text_column=review --label_column=rating --bad_rows=skip \
      --loss=softmax --interaction=dot --epochs=5 --model_dir=/tmp/run

  rank4class-train --train_files=news.csv --class_encoder=metadata --class_texts=class_texts.csv \
      --model_dir=/tmp/run_texts

  rank4class-train --train_files=few.csv --class_texts=classes.csv --model_dir=/tmp/few_shot

  rank4class-train --input_format=elwc --train_files=train.elwc --validation_files=val.elwc \
      --label_vocab=classes.txt --label_key=relevance --loss=approx_ndcg --model_dir=/tmp/run_elwc

Strategy: MirroredStrategy over the visible GPUs, or MultiWorkerMirroredStrategy when TF_CONFIG lists workers.
Killed and restarted with the same --model_dir, a run resumes from its last checkpoint. The best model on the
validation split is exported to <model_dir>/export.
"""

import functools
import os

from absl import flags

from rank4class.training import train as train_lib
from rank4class.training import training_data as data_lib
from rank4class.training import tuning
from rank4class_cli import cli, model_flags, terminal, train_flags, train_output
from rank4class_data import file_formats
from rank4class_data.validation import refuse_output_over_inputs
from rank4class_encoders import text_encoder
from rank4class_engine import distribute
from rank4class_engine.optimization import learning_rates

PROGRAM = "rank4class-train"
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.
define = cli.FlagDefiner(FLAGS)

define.string("dataset", None, "Named real data set: " + ", ".join(data_lib.DATASETS) + ".")
define.string("train_files", None, "Training data (instead of --dataset): the converter's TFRecords, ELWC, "
              "rows (.csv .tsv .jsonl .libsvm .tab; comma-separated globs) or a folder of class-named image "
              "subfolders (rows and images: converted once and cached).")
define.string("validation_files", None, "Validation split, same format; default: carved from --train_files "
              "(stratified, --validation_fraction).")
define.string("test_files", None, "Optional test split, same format (with --train_files).")
define.string("label_vocab", None, "The converter's vocabulary JSON of the TFRecords (default: beside the "
              "first training file); rows: fixes the class ids; elwc: that JSON or one class name per line.")
define.string("class_texts", None, "CSV/TSV/JSONL with columns class,text: one text per class (the metadata "
              "class encoder embeds them with the frozen MiniLM; given without --class_encoder, the class "
              "encoder is metadata; a few-shot run centres its regression at them); classes it lists that "
              "the data lacks are noted, not trained.")
define.enum("input_format", data_lib.AUTO, data_lib.INPUT_FORMATS,
            "Format of --train_files. " + file_formats.help_text(
    data_lib.INPUT_FORMATS, {data_lib.AUTO: "rows for row-file extensions, else example",
                             data_lib.ROWS: "row files of any row format, each told by its extension",
                             data_lib.ELWC: "ELWC TFRecords: per instance a list of candidate classes with "
                                            "relevance labels"}))
define.row_conversion_flags()
define.string("feature_key", None,
              "elwc: context feature with the instance (default 'text', else 'features').")
define.string("label_key", "label", "elwc: the candidates' relevance feature.")
define.string("class_id_key", "class_id", "elwc: the candidates' class id feature.")
define.enum("unlisted_classes", "irrelevant", list(data_lib.UNLISTED_CLASSES), "elwc: classes a list does "
            "not name are relevance 0 (irrelevant), or left out of the loss and metrics (unjudged).")
define.string("text_mode", data_lib.AUTO_TEXT, "Text inputs: 'auto' (the 'frozen' model trained, then it or "
              "the logistic regression of the embeddings, or of TF-IDF beside them, whichever is best on "
              "validation; one line says which), 'frozen' (cached MiniLM embeddings), 'finetune' "
              "(MiniLM trained end to end), 'tfidf' (TF-IDF of word n-grams in the model, the vocabulary "
              "learned on the training texts, then a projection to --hidden_width; --tfidf_* flags) or "
              "'hybrid' (both views side by side: that TF-IDF projection concatenated with an MLP of "
              "--hidden_width on the cached MiniLM embedding; the export reads raw text and runs the frozen "
              "MiniLM itself).")
define.float("validation_fraction", 0.1, "Share of the train split held out for validation.")
define.integer("max_train_examples", None, "Optional stratified subset of the training rows.")
define.integer("max_test_examples", None, "Optional stratified subset of the test rows.")
define.integer("max_seq_length", 128, "Tokens per document for the text encoder.")
define.enum("text_precision", text_encoder.AUTO_PRECISION, text_encoder.PRECISIONS, "What the frozen text "
            "encoder computes in: auto picks bfloat16 on a CPU with bfloat16 instructions (AVX512-BF16, AMX) "
            "when no GPU is visible, else float32, and the run records its choice; bfloat16 matmuls run "
            "1.6-2.4x the float32 rate there, vectors at cosine >= 0.9999 to float32.")
model_flags.define_model_flags(define)
train_flags.define_run_flags(define)
train_flags.define_output_flags(define)
define.string("model_dir", None, "Output folder (checkpoints, logs, config.json, export/).")
define.bool("tune", False,
            "Search the learning rate (" + ", ".join(f"{r:g}" for r in tuning.HEAD_LEARNING_RATES)
            + "; fine-tuning: " + ", ".join(f"{r:g}" for r in tuning.FINETUNE_LEARNING_RATES) + "; tfidf: "
            + ", ".join(f"{r:g}" for r in tuning.TFIDF_LEARNING_RATES) + ") and --hidden_width ("
            + ", ".join(str(w) for w in tuning.WIDTHS) + "; fine-tuning: the given width) on the validation "
            f"split first: each trial trains in <model_dir>/{tuning.TUNE_DIR}/, the best --best_metric "
            "chooses the final run's settings, the table goes to the terminal and "
            f"<model_dir>/{tuning.REPORT_FILE}; the test split is read by the final run only.")
define.bool("overwrite_model_dir", False, "When --model_dir holds a run of other settings, remove its run "
            "files and start afresh (default: refuse, naming the changed settings; the same "
            "settings resume).")


cli.register_choices(FLAGS, {"dataset": data_lib.DATASETS, "text_mode": data_lib.TEXT_MODES,
                             "optimizer": train_lib.OPTIMIZERS, "lr_schedule": learning_rates.SCHEDULES,
                             "strategy": distribute.STRATEGIES, **model_flags.CHOICES})
flags.mark_flag_as_required("model_dir", flag_values=FLAGS)

flags.register_multi_flags_validator(
    ["dataset", "train_files"], lambda f: (f["dataset"] is None) != (f["train_files"] is None),
    "give exactly one of --dataset (" + ", ".join(data_lib.DATASETS) + ") or --train_files",
    flag_values=FLAGS)


# The config fields (as the library's messages name them) whose flag has another name; the others are the flag
# of their last part (`run.validation_loss` is --validation_loss).
define.field_flags({
    "overwrite": "overwrite_model_dir", "class_encoder.towers": "class_text_towers",
    "class_encoder.init": "class_init", "class_encoder.type": "class_encoder",
    "instance_encoder.type": "instance_encoder", "interaction.type": "interaction", "loss.type": "loss",
    "optimizer.type": "optimizer", "optimizer.schedule": "lr_schedule", "sampling.sampler": "class_sampler",
    "run.tensorboard": None, "run.devices": None, "outputs.serving_top_k": None,
    "outputs.evaluate_test": None,
})


config_from_flags = train_flags.config_from_flags
choice_line, predict_hint = train_output.choice_line, train_output.predict_hint
# The baselines' notes name config fields (the library's words): written as this binary's flags.
print_result = functools.partial(train_output.print_result, flag_values=FLAGS)


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, config_from_flags)


def check_outputs(config: train_lib.Rank4ClassTrainConfig) -> None:
  """ValueError when --model_dir is a training input (a file or a folder), a run file written there is one, or
  its export/ (replaced whole) holds one."""
  data, run = config.data, config.model_dir
  refuse_output_over_inputs(
      {"--model_dir": [os.path.join(run, name) for name in (train_lib.CONFIG_FILE, train_lib.RESULT_FILE,
                                                             train_lib.TEST_REPORT_FILE,
                                                             train_lib.TEST_PER_CLASS_FILE,
                                                            tuning.REPORT_FILE)]},
      {"--train_files": data.train_files, "--validation_files": data.validation_files,
       "--test_files": data.test_files, "--label_vocab": [data.label_vocab] if data.label_vocab else None,
       "--class_texts": [data.class_texts] if data.class_texts else None},
      folders={"--model_dir": run},
      replaced={"--model_dir": os.path.join(run, train_lib.EXPORT_DIR) if config.outputs.export else None})


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  config = config_from_flags(FLAGS)
  check_outputs(config)
  data = None
  if FLAGS.tune:
    data = data_lib.prepare_data(config.data)  # Once, for every trial and the final run.
    config, report = tuning.tune(config, tuning.TuneConfig(), data,
                                 progress=terminal.err if config.run.verbose else None,
                                 overwrite=FLAGS.overwrite_model_dir)
    terminal.out(tuning.format_table(report), end="")
  print_result(train_lib.train(config, data, overwrite=FLAGS.overwrite_model_dir), config)


def run() -> None:
  """Console script `rank4class-train`."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
