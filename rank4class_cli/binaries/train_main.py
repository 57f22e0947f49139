r"""Trains a Rank4Class model (instance encoder, class encoder, interaction, ranking loss) on real data.

Sample command lines:

  rank4class-train --dataset=reuters_r8 --text_mode=frozen --interaction=latent_cross --hidden_width=128 \
      --loss=approx_ndcg --optimizer=adam --learning_rate=1e-3 --train_steps=2000 --eval_every=200 \
      --model_dir=/tmp/r8_lc_approx

  rank4class-train --train_files=reviews.csv --text_column=review --label_column=rating --bad_rows=skip \
      --loss=softmax --interaction=dot --epochs=5 --model_dir=/tmp/run

  rank4class-train --train_files=news.csv --class_encoder=metadata --class_texts=class_texts.csv \
      --model_dir=/tmp/run_texts

  rank4class-train --input_format=elwc --train_files=train.elwc --validation_files=val.elwc \
      --label_vocab=classes.txt --label_key=relevance --loss=approx_ndcg --model_dir=/tmp/run_elwc

Strategy: MirroredStrategy over the visible GPUs, or MultiWorkerMirroredStrategy when TF_CONFIG lists workers.
Killed and restarted with the same --model_dir, a run resumes from its last checkpoint. The best model on the
validation split is exported to <model_dir>/export.
"""

import dataclasses
import functools
import os

from absl import flags

from rank4class.evaluation import baselines as baselines_lib
from rank4class.evaluation import evaluation_report as evaluation_report_lib
from rank4class.inference import calibration as calibration_lib
from rank4class.modeling import class_encoders
from rank4class.training import train as train_lib
from rank4class.training import training_data as data_lib
from rank4class.training import tuning
from rank4class.training import zero_shot_choice as zero_shot_choice_lib
from rank4class_cli import cli, model_flags, terminal
from rank4class_data import bad_rows, file_formats, row_tables
from rank4class_data.validation import refuse_output_over_inputs
from rank4class_encoders import embedding_cache, text_encoder
from rank4class_engine import distribute, learning_rates, precision, trainer

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
              "class encoder embeds them with the frozen MiniLM); classes it lists that the data lacks are "
              "noted, not trained.")
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
_FT = train_lib.FINETUNE_OPTIMIZER
define.string("optimizer", None, "Optimizer: " + ", ".join(train_lib.OPTIMIZERS) + ". Default: adam; "
              f"{_FT.type} with --text_mode=finetune.")
define.float("learning_rate", None, "Learning rate (the peak of --lr_schedule). Default: 1e-3; "
             f"{_FT.learning_rate:g} with --text_mode=finetune (the fine-tuning recipe of BERT and Hugging "
             f"Face's Trainer); {train_lib.TFIDF_OPTIMIZER.learning_rate:g} with --text_mode=tfidf (a linear "
             f"layer on sparse TF-IDF); {train_lib.HYBRID_OPTIMIZER.learning_rate:g} with "
             "--text_mode=hybrid.")
define.float("weight_decay", None, f"Weight decay of adamw. Default: 1e-4; {_FT.weight_decay:g} with "
             "--text_mode=finetune.")
define.string("lr_schedule", None, "Learning-rate schedule: constant, or linear (decay to 0 over the run). "
              f"Default: constant; {_FT.schedule} with --text_mode=finetune.")
define.float("warmup_fraction", None, "Share of the steps over which the rate rises linearly from 0. "
             f"Default: 0; {_FT.warmup_fraction:g} with --text_mode=finetune.")
define.integer("batch_size", 32, "Global batch size.")
define.integer("train_steps", None, "Training steps. Default (neither this nor --epochs): 3 epochs, at least "
               "1,000 and at most 20,000 steps.")
define.float("epochs", None, "Passes over the training data (instead of --train_steps).")
define.integer("eval_every", 100, "Steps between validation runs.")
define.integer("checkpoint_every", None, "Steps between resumption checkpoints (default: at validations, at "
               "most every 30 s; 0: none).")
define.integer("steps_per_execution", 0, "Steps per tf.function call; 0: the engine chooses from the "
               "measured step time.")
define.preemption_flag()
define.enum("precision", precision.FLOAT32, precision.POLICIES, "Compute dtype policy; mixed_bfloat16 on "
            "CPU/TPU, mixed_float16 on GPU. Scores, losses and metrics stay float32.")
define.string("best_metric", "ndcg_5", "Validation metric choosing the exported model (loss, top_1_error, "
              "top_5_error, ndcg_1, ndcg_5, mrr, accuracy).")
define.enum("validation_loss", "auto", train_lib.VALIDATION_LOSS, "Whether validation also computes the loss "
            "over all classes (TensorBoard, --best_metric=loss). auto: when read, and for pairwise_logistic, "
            "approx_ndcg and gumbel_approx_ndcg (O(C^2) memory per instance) up to "
            f"{train_lib.QUADRATIC_LOSS_CLASSES} classes; never from "
            f"{train_lib.CHUNKED_VALIDATION_CLASSES:,} classes on. The terminal says what "
            "validation computes.")
define.string("model_dir", None, "Output folder (checkpoints, logs, config.json, export/).")
define.integer("seed", 0, "Seed of the weights and data order.")
define.string("strategy", "auto", "tf.distribute strategy: " + ", ".join(distribute.STRATEGIES) + ".")
define.bool("export", True, "Export the best model as a SavedModel.")
define.bool("calibrate", True, "Fit a temperature and conformal class sets on the validation split and "
            "export them: rank4class-predict then writes probabilities (--nocalibrate: scores only).")
define.bool("tune", False,
            "Search the learning rate (" + ", ".join(f"{r:g}" for r in tuning.HEAD_LEARNING_RATES)
            + "; fine-tuning: " + ", ".join(f"{r:g}" for r in tuning.FINETUNE_LEARNING_RATES) + "; tfidf: "
            + ", ".join(f"{r:g}" for r in tuning.TFIDF_LEARNING_RATES) + ") and --hidden_width ("
            + ", ".join(str(w) for w in tuning.WIDTHS) + "; fine-tuning: the given width) on the validation "
            f"split first: each trial trains in <model_dir>/{tuning.TUNE_DIR}/, the best --best_metric "
            "chooses the final run's settings, the table goes to the terminal and "
            f"<model_dir>/{tuning.REPORT_FILE}; the test split is read by the final run only.")
define.bool("baselines", True, "Fit the baselines on the same split and report them beside the model: the "
            "majority class, TF-IDF + logistic regression on raw texts, logistic regression on the frozen "
            "embeddings, features or pixels (C chosen on the validation split; nearest class centroids from "
            "500 classes on), with a 'model vs best baseline' line.")
define.bool("linear_candidate", True, "After training, also validate the logistic regression of the model's "
            "own inputs (frozen embeddings or features standardised; with --text_mode=hybrid their TF-IDF "
            "beside them; C by validation log-loss), with --text_mode=auto also that of TF-IDF beside the "
            "embeddings, and export whichever of them and the trained model is best on --best_metric (one "
            "line says which); one-hot classes, the dot interaction, fewer than 500 classes.")
define.integer("patience", train_lib.DEFAULT_PATIENCE, "With the default length (neither --train_steps nor "
               "--epochs) and a constant learning rate, the validation chooses how long to train: at least 3 "
               f"epochs (at least {train_lib.DEFAULT_MIN_STEPS} steps), then stop at the first validation "
               f"whose best is this many validations old, at most {train_lib.PATIENCE_LENGTH_FACTOR} times "
               "that length; the best step is kept. 0: the default length exactly.")
define.string("zero_shot_holdout", "auto", "Classes are texts (--class_encoder=metadata, cosine towers): the "
              "share of the training classes held out of a second training, the zero-shot model's, whose "
              "validation on them chooses its step and how much of the untrained cosine it keeps (saved in "
              "<model_dir>/zero_shot; rank4class-export --kind=zero_shot exports it). auto: a tenth of the "
              "classes, at least 5, from 10 classes on; 0: no zero-shot model; or a share in (0, 0.5].")
define.integer("verbose", 2, "0: silent; 1 or 2: a progress line (step, loss, examples/s, ETA, validation).")
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


def config_from_flags(f: flags.FlagValues) -> train_lib.Rank4ClassTrainConfig:
  """Builds the Rank4ClassTrainConfig from parsed flags.

  Raises:
    ValueError: naming the flag, for values the config rejects.
  """
  data = data_lib.DataConfig(
      dataset=f.dataset, train_files=f.train_files, validation_files=f.validation_files,
      test_files=f.test_files,
      label_vocab=f.label_vocab, input_format=f.input_format, feature_key=f.feature_key,
      label_key=f.label_key,
      rows=cli.row_conversion(f), class_id_key=f.class_id_key, unlisted_classes=f.unlisted_classes,
      text_mode=f.text_mode,
      validation_fraction=f.validation_fraction, max_train_examples=f.max_train_examples,
      max_test_examples=f.max_test_examples, max_seq_length=f.max_seq_length, class_texts=f.class_texts,
      text_precision=f.text_precision)
  if f.class_texts and f.class_encoder != class_encoders.METADATA:
    raise ValueError(f"--class_texts={f.class_texts} needs --class_encoder={class_encoders.METADATA} (the "
                     f"class encoder that embeds class texts), got --class_encoder={f.class_encoder}")
  optimizer = {data_lib.FINETUNE: train_lib.FINETUNE_OPTIMIZER,
               data_lib.TFIDF: train_lib.TFIDF_OPTIMIZER,
               data_lib.HYBRID: train_lib.HYBRID_OPTIMIZER}.get(f.text_mode, train_lib.OptimizerConfig())
  given = {field: value for field, value in (("type", f.optimizer), ("learning_rate", f.learning_rate),
                                             ("weight_decay", f.weight_decay), ("schedule", f.lr_schedule),
                                             ("warmup_fraction", f.warmup_fraction)) if value is not None}
  optimizer = dataclasses.replace(optimizer, **given)
  if f.train_steps is not None and f.epochs is not None:
    raise ValueError("give --train_steps or --epochs, not both")
  run = train_lib.RunConfig(
      batch_size=f.batch_size, train_steps=f.train_steps, epochs=f.epochs, eval_every=f.eval_every,
      checkpoint_every=f.checkpoint_every, steps_per_execution=f.steps_per_execution,
      best_metric=f.best_metric,
      validation_loss=f.validation_loss, strategy=f.strategy, seed=f.seed, precision=f.precision,
      verbose=f.verbose, preemption_grace_seconds=f.preemption_grace_seconds, patience=f.patience)
  outputs = train_lib.OutputsConfig(
      export=f.export, baselines=f.baselines, calibrate=f.calibrate, linear_candidate=f.linear_candidate,
      zero_shot_holdout=_zero_shot_holdout(f.zero_shot_holdout))
  return train_lib.Rank4ClassTrainConfig(model_dir=f.model_dir, data=data, model=model_flags.model_config(f),
                                         optimizer=optimizer, run=run, outputs=outputs)


def _zero_shot_holdout(value: str) -> float | None:
  """--zero_shot_holdout: "auto" -> None, else a share in [0, 0.5]."""
  if value == "auto":
    return None
  try:
    return float(value)
  except ValueError:
    raise ValueError(f"--zero_shot_holdout={value}: expected 'auto' or a share in [0, 0.5] (0: "
                     "none)") from None


_CHOICE_LABELS = {train_lib.TRAINED_CHOICE: "the trained model",
                  train_lib.LINEAR_CHOICE: "the logistic regression of the model's inputs",
                  train_lib.TFIDF_LINEAR_CHOICE: "the logistic regression of TF-IDF beside the "
                                                 "frozen embeddings"}


def choice_line(choice: dict) -> str:
  """"Chosen on validation (ndcg_5, higher is better): the trained model (step 700) 0.9755, against the
  logistic regression of the model's inputs (C=0.01) 0.9664."."""
  def described(name: str) -> str:
    if name == train_lib.TRAINED_CHOICE:
      return f"{_CHOICE_LABELS[name]} (step {choice['trained_step']}) {choice['values'][name]:.4f}"
    fit = choice["fits"][name]
    weight = f", embedding weight {fit['embedding_weight']:g}" if "embedding_weight" in fit else ""
    value = choice["values"][name]
    shown = "-" if value is None else f"{value:.4f}"
    return (f"{_CHOICE_LABELS[name]} (C={fit['inverse_regularization']:g} by validation "
            f"log-loss{weight}) {shown}")

  others = [described(name) for name in choice["values"] if name != choice["chosen"]]
  better = "lower" if choice["mode"] == "min" else "higher"
  return (f"Chosen on validation ({choice['metric']}, {better} is better): "
          f"{described(choice['chosen'])}, against "
          + " and ".join(others) + ".")


def print_result(result: train_lib.Rank4ClassTrainResult,
                 config: train_lib.Rank4ClassTrainConfig | None = None, stream=None) -> None:
  """Prints each phase's time on its own line (data, embedding, the training loop, export, test), the best
  validation result, the test report's table when present, and (with `config`) the `rank4class-predict`
  command to run next. Written to `stream` when given, else to stdout (`terminal.out`)."""
  write = stream.write if stream is not None else functools.partial(terminal.out, end="")
  phases = result.phase_seconds
  if "data" in phases:
    write(f"Read the data in {phases['data']:.1f} s.\n")
  if result.embedded_texts:
    write(f"Embedded {result.embedded_texts:,} texts in {phases.get('embedding', 0.0):.1f} s "
          f"({embedding_cache.source_note(result.embedded_texts, result.computed_texts)}).\n")
  loop = phases.get("loop", result.seconds)  # Runs finished before the phases were timed: the whole run.
  write(f"{trainer.trained_line(result.steps, loop)}; best val "
        f"{result.best_metric}={result.best_value} at step {result.best_step}.\n")
  if result.stopped_early and config is not None:
    write(f"Stopped at step {result.steps}, chosen on validation: no better {result.best_metric} in "
          f"the {config.run.patience} validations after step {result.best_step} "
          f"(--patience={config.run.patience}; 0 trains the default length exactly).\n")
  if result.choice is not None:
    write(choice_line(result.choice) + "\n")
  if result.zero_shot is not None:
    write(zero_shot_choice_lib.choice_line(result.zero_shot) + "\n")
  if result.export_dir:
    exported = f" in {phases['export']:.1f} s" if "export" in phases else ""
    write(f"Exported the best model to {result.export_dir}{exported}.\n")
    if config is not None:
      write(predict_hint(result, config) + "\n")
  if result.test_report is not None:
    evaluated = f" (evaluated in {phases['test']:.1f} s)" if "test" in phases else ""
    write(f"Test split{evaluated}:\n" + evaluation_report_lib.format_table(result.test_report) + "\n")
  if result.calibration is not None:
    calibrated = f" (in {phases['calibration']:.1f} s)" if "calibration" in phases else ""
    write(calibration_lib.summary_line(result.calibration) + f"{calibrated}.\n")
    warning = calibration_lib.warning_line(result.calibration)
    if warning:
      write(warning + "\n")
  if result.baselines is not None:
    model_metrics = (
      result.test_report["metrics"] if result.test_report is not None else result.validation_metrics
    )
    # The baselines' notes name config fields (the library's words): written as this binary's flags.
    write(cli.flag_words(baselines_lib.format_lines(result.baselines, model_metrics), FLAGS))


def predict_hint(result: train_lib.Rank4ClassTrainResult, config: train_lib.Rank4ClassTrainConfig) -> str:
  """The `rank4class-predict` command for the trained model: runs as printed once its one placeholder, the
  input path, is given. It carries the training flags that reading rows of the same layout needs (format,
  columns, bad-row policy); the placeholder names the input the model reads (an image folder, rows, text
  lines)."""
  data = config.data
  rows = data.rows
  trained_on_rows = data_lib.resolved_input_format(data) == data_lib.ROWS and not os.path.isdir(
      data.train_files or "")
  options: list[tuple[str, object]] = []
  if result.input_kind == data_lib.IMAGE_INPUT:
    placeholder = "<image folder>"
  elif result.input_kind == data_lib.DENSE_INPUT:
    if trained_on_rows and rows.feature_columns:
      placeholder = "<rows>"
      options.append(("feature_columns", ",".join(rows.feature_columns)))
    else:  # Dense features without named columns (LibSVM, TFRecords): the converter's records carry them.
      placeholder = "<rank4class-convert .tfrecord>"
  elif trained_on_rows:
    placeholder = "<rows>"
    if rows.text_column not in (row_tables.AUTO, None, ""):
      options.append(("text_column", rows.text_column))
  else:
    placeholder = "<texts or rows>"
  if trained_on_rows and placeholder == "<rows>":
    if rows.input_format != row_tables.AUTO:
      options.append(("input_format", rows.input_format))
    if rows.label_column != row_tables.AUTO:
      options.append(("label_column", rows.label_column))
  if trained_on_rows and rows.bad_rows != bad_rows.FAIL:
    options.append(("bad_rows", rows.bad_rows))
    if rows.max_bad_rows is not None:
      options.append(("max_bad_rows", rows.max_bad_rows))
  return cli.next_command("rank4class-predict", [("model_dir", result.model_dir), ("input", placeholder),
                                                 *options, ("output", "predictions.csv")])


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
