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
import os
import sys

from absl import flags

from rank4class import class_encoders, model_flags, tuning
from rank4class import train as train_lib
from rank4class import training_data as data_lib
from rank4class_data import file_formats
from rank4class_data.validation import refuse_output_over_inputs
from rank4class_engine import cli, distribute, learning_rates, precision

PROGRAM = "rank4class-train"
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.
define = cli.FlagDefiner(FLAGS)

define.string("dataset", None, "Named real data set: " + ", ".join(data_lib.DATASETS) + ".")
define.string("train_files", None, "Training data (instead of --dataset): the converter's TFRecords, ELWC, rows "
              "(.csv .tsv .jsonl .libsvm .tab; comma-separated globs) or a folder of class-named image "
              "subfolders (rows and images: converted once and cached).")
define.string("validation_files", None, "Validation split, same format; default: carved from --train_files "
              "(stratified, --validation_fraction).")
define.string("test_files", None, "Optional test split, same format (with --train_files).")
define.string("label_vocab", None, "The converter's vocabulary JSON of the TFRecords (default: beside the "
              "first training file); rows: fixes the class ids; elwc: that JSON or one class name per line.")
define.string("class_texts", None, "CSV/TSV/JSONL with columns class,text: one text per class (the metadata class "
              "encoder embeds them with the frozen MiniLM); classes it lists that the data lacks are noted, not "
              "trained.")
define.enum("input_format", data_lib.AUTO, data_lib.INPUT_FORMATS, "Format of --train_files. " + file_formats.help_text(
    data_lib.INPUT_FORMATS, {data_lib.AUTO: "rows for row-file extensions, else example",
                             data_lib.ROWS: "row files of any row format, each told by its extension",
                             data_lib.ELWC: "ELWC TFRecords: per instance a list of candidate classes with relevance "
                                            "labels"}))
define.row_conversion_flags()
define.string("feature_key", None, "elwc: context feature with the instance (default 'text', else 'features').")
define.string("label_key", "label", "elwc: the candidates' relevance feature.")
define.string("class_id_key", "class_id", "elwc: the candidates' class id feature.")
define.enum("unlisted_classes", "irrelevant", list(data_lib.UNLISTED_CLASSES), "elwc: classes a list does "
            "not name are relevance 0 (irrelevant), or left out of the loss and metrics (unjudged).")
define.string("text_mode", data_lib.AUTO_TEXT, "Text inputs: 'auto' (the 'frozen' model trained, then it or the "
              "logistic regression of the embeddings, or of TF-IDF beside them, whichever is best on validation; "
              "one line says which), 'frozen' (cached MiniLM embeddings), 'finetune' "
              "(MiniLM trained end to end), 'tfidf' (TF-IDF of word n-grams in the model, the vocabulary learned on "
              "the training texts, then a projection to --hidden_width; --tfidf_* flags) or 'hybrid' (both views "
              "side by side: that TF-IDF projection concatenated with an MLP of --hidden_width on the cached MiniLM "
              "embedding; the export reads raw text and runs the frozen MiniLM itself).")
define.float("validation_fraction", 0.1, "Share of the train split held out for validation.")
define.integer("max_train_examples", None, "Optional stratified subset of the training rows.")
define.integer("max_test_examples", None, "Optional stratified subset of the test rows.")
define.integer("max_seq_length", 128, "Tokens per document for the text encoder.")
model_flags.define_model_flags(define)
_FT = train_lib.FINETUNE_OPTIMIZER
define.string("optimizer", None, "Optimizer: " + ", ".join(train_lib.OPTIMIZERS) + f". Default: adam; {_FT.type} "
              "with --text_mode=finetune.")
define.float("learning_rate", None, f"Learning rate (the peak of --lr_schedule). Default: 1e-3; {_FT.learning_rate:g} "
             "with --text_mode=finetune (the fine-tuning recipe of BERT and Hugging Face's Trainer); "
             f"{train_lib.TFIDF_OPTIMIZER.learning_rate:g} with --text_mode=tfidf (a linear layer on sparse TF-IDF); "
             f"{train_lib.HYBRID_OPTIMIZER.learning_rate:g} with --text_mode=hybrid.")
define.float("weight_decay", None, f"Weight decay of adamw. Default: 1e-4; {_FT.weight_decay:g} with "
             "--text_mode=finetune.")
define.string("lr_schedule", None, "Learning-rate schedule: constant, or linear (decay to 0 over the run). Default: "
              f"constant; {_FT.schedule} with --text_mode=finetune.")
define.float("warmup_fraction", None, "Share of the steps over which the rate rises linearly from 0. Default: 0; "
             f"{_FT.warmup_fraction:g} with --text_mode=finetune.")
define.integer("batch_size", 32, "Global batch size.")
define.integer("train_steps", None, "Training steps. Default (neither this nor --epochs): 3 epochs, at least "
               "1,000 and at most 20,000 steps.")
define.float("epochs", None, "Passes over the training data (instead of --train_steps).")
define.integer("eval_every", 100, "Steps between validation runs.")
define.integer("checkpoint_every", None, "Steps between resumption checkpoints (default: at validations, at "
               "most every 30 s; 0: none).")
define.integer("steps_per_execution", 0, "Steps per tf.function call; 0: the engine chooses from the measured "
               "step time.")
define.preemption_flag()
define.enum("precision", precision.FLOAT32, precision.POLICIES, "Compute dtype policy; mixed_bfloat16 on "
            "CPU/TPU, mixed_float16 on GPU. Scores, losses and metrics stay float32.")
define.string("best_metric", "ndcg_5", "Validation metric choosing the exported model (loss, top_1_error, "
              "top_5_error, ndcg_1, ndcg_5, mrr, accuracy).")
define.enum("validation_loss", "auto", train_lib.VALIDATION_LOSS, "Whether validation also computes the loss "
            "over all classes (TensorBoard, --best_metric=loss). auto: when read, and for pairwise_logistic, "
            "approx_ndcg and gumbel_approx_ndcg (O(C^2) memory per instance) up to "
            f"{train_lib.QUADRATIC_LOSS_CLASSES} classes; never from {train_lib.CHUNKED_VALIDATION_CLASSES:,} "
            "classes on. The terminal says what validation computes.")
define.string("model_dir", None, "Output folder (checkpoints, logs, config.json, export/).")
define.integer("seed", 0, "Seed of the weights and data order.")
define.string("strategy", "auto", "tf.distribute strategy: " + ", ".join(distribute.STRATEGIES) + ".")
define.bool("export", True, "Export the best model as a SavedModel.")
define.bool("calibrate", True, "Fit a temperature and conformal class sets on the validation split and export them: "
            "rank4class-predict then writes probabilities (--nocalibrate: scores only).")
define.bool("tune", False, "Search the learning rate (" + ", ".join(f"{r:g}" for r in tuning.HEAD_LEARNING_RATES)
            + "; fine-tuning: " + ", ".join(f"{r:g}" for r in tuning.FINETUNE_LEARNING_RATES) + "; tfidf: "
            + ", ".join(f"{r:g}" for r in tuning.TFIDF_LEARNING_RATES) + ") and --hidden_width ("
            + ", ".join(str(w) for w in tuning.WIDTHS) + "; fine-tuning: the given width) on the validation split "
            f"first: each trial trains in <model_dir>/{tuning.TUNE_DIR}/, the best --best_metric chooses the final "
            f"run's settings, the table goes to the terminal and <model_dir>/{tuning.REPORT_FILE}; the test split is "
            "read by the final run only.")
define.bool("baselines", True, "Fit the baselines on the same split and report them beside the model: the "
            "majority class, TF-IDF + logistic regression on raw texts, logistic regression on the frozen "
            "embeddings, features or pixels (C chosen on the validation split; nearest class centroids from 500 "
            "classes on), with a 'model vs best baseline' line.")
define.bool("linear_candidate", True, "After training, also validate the logistic regression of the model's own "
            "inputs (frozen embeddings or features standardised; with --text_mode=hybrid their TF-IDF beside them; C "
            "by validation log-loss), with --text_mode=auto also that of TF-IDF beside the embeddings, and export "
            "whichever of them and the trained model is best on --best_metric (one line says which); one-hot "
            "classes, the dot interaction, fewer than 500 classes.")
define.integer("patience", train_lib.DEFAULT_PATIENCE, "With the default length (neither --train_steps nor "
               "--epochs) and a constant learning rate, the validation chooses how long to train: at least 3 epochs "
               f"(at least {train_lib.DEFAULT_MIN_STEPS} steps), then stop at the first validation whose best is this "
               f"many validations old, at most {train_lib.PATIENCE_LENGTH_FACTOR} times that length; the best step "
               "is kept. 0: the default length exactly.")
define.string("zero_shot_holdout", "auto", "Classes are texts (--class_encoder=metadata, cosine towers): the share "
              "of the training classes held out of a second training, the zero-shot model's, whose validation on "
              "them chooses its step and how much of the untrained cosine it keeps (saved in <model_dir>/zero_shot; "
              "rank4class-export --kind=zero_shot exports it). auto: a tenth of the classes, at least 5, from 10 "
              "classes on; 0: no zero-shot model; or a share in (0, 0.5].")
define.integer("verbose", 2, "0: silent; 1 or 2: a progress line (step, loss, examples/s, ETA, validation).")
define.bool("overwrite_model_dir", False, "When --model_dir holds a run of other settings, remove its run files "
            "and start afresh (default: refuse, naming the changed settings; the same settings resume).")


cli.register_choices(FLAGS, {"dataset": data_lib.DATASETS, "text_mode": data_lib.TEXT_MODES,
                             "optimizer": train_lib.OPTIMIZERS, "lr_schedule": learning_rates.SCHEDULES, "strategy": distribute.STRATEGIES,
                             **model_flags.CHOICES})
flags.mark_flag_as_required("model_dir", flag_values=FLAGS)

flags.register_multi_flags_validator(
    ["dataset", "train_files"], lambda f: (f["dataset"] is None) != (f["train_files"] is None),
    "give exactly one of --dataset (" + ", ".join(data_lib.DATASETS) + ") or --train_files", flag_values=FLAGS)


def config_from_flags(f: flags.FlagValues) -> train_lib.TrainConfig:
  """Builds the TrainConfig from parsed flags.

  Raises:
    ValueError: naming the flag, for values the config rejects.
  """
  data = data_lib.DataConfig(
      dataset=f.dataset, train_files=f.train_files, validation_files=f.validation_files, test_files=f.test_files,
      label_vocab=f.label_vocab, input_format=f.input_format, feature_key=f.feature_key, label_key=f.label_key,
      rows=cli.row_conversion(f), class_id_key=f.class_id_key, unlisted_classes=f.unlisted_classes, text_mode=f.text_mode,
      validation_fraction=f.validation_fraction, max_train_examples=f.max_train_examples,
      max_test_examples=f.max_test_examples, max_seq_length=f.max_seq_length, class_texts=f.class_texts)
  if f.class_texts and f.class_encoder != class_encoders.METADATA:
    raise ValueError(f"--class_texts={f.class_texts} needs --class_encoder={class_encoders.METADATA} (the class "
                     f"encoder that embeds class texts), got --class_encoder={f.class_encoder}")
  optimizer = {data_lib.FINETUNE: train_lib.FINETUNE_OPTIMIZER,
               data_lib.TFIDF: train_lib.TFIDF_OPTIMIZER,
               data_lib.HYBRID: train_lib.HYBRID_OPTIMIZER}.get(f.text_mode, train_lib.OptimizerConfig())
  given = {field: value for field, value in (("type", f.optimizer), ("learning_rate", f.learning_rate),
                                             ("weight_decay", f.weight_decay), ("schedule", f.lr_schedule),
                                             ("warmup_fraction", f.warmup_fraction)) if value is not None}
  optimizer = dataclasses.replace(optimizer, **given)
  if f.train_steps is not None and f.epochs is not None:
    raise ValueError("give --train_steps or --epochs, not both")
  return train_lib.TrainConfig(
      model_dir=f.model_dir, data=data, model=model_flags.model_config(f), optimizer=optimizer,
      batch_size=f.batch_size,
      train_steps=f.train_steps, epochs=f.epochs, eval_every=f.eval_every, checkpoint_every=f.checkpoint_every,
      steps_per_execution=f.steps_per_execution, best_metric=f.best_metric, strategy=f.strategy, seed=f.seed,
      export=f.export, verbose=f.verbose, precision=f.precision, validation_loss=f.validation_loss,
      baselines=f.baselines, calibrate=f.calibrate, linear_candidate=f.linear_candidate,
      preemption_grace_seconds=f.preemption_grace_seconds, zero_shot_holdout=_zero_shot_holdout(f.zero_shot_holdout),
      patience=f.patience)


def _zero_shot_holdout(value: str) -> float | None:
  """--zero_shot_holdout: "auto" -> None, else a share in [0, 0.5]."""
  if value == "auto":
    return None
  try:
    return float(value)
  except ValueError:
    raise ValueError(f"--zero_shot_holdout={value}: expected 'auto' or a share in [0, 0.5] (0: none)") from None


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, config_from_flags)


def check_outputs(config: train_lib.TrainConfig) -> None:
  """ValueError when --model_dir is a training input (a file or a folder), a run file written there is one, or its
  export/ (replaced whole) holds one."""
  data, run = config.data, config.model_dir
  refuse_output_over_inputs(
      {"--model_dir": [os.path.join(run, name) for name in (train_lib.CONFIG_FILE, train_lib.RESULT_FILE,
                                                             train_lib.TEST_REPORT_FILE,
                                                             train_lib.TEST_PER_CLASS_FILE, tuning.REPORT_FILE)]},
      {"--train_files": data.train_files, "--validation_files": data.validation_files,
       "--test_files": data.test_files, "--label_vocab": [data.label_vocab] if data.label_vocab else None,
       "--class_texts": [data.class_texts] if data.class_texts else None},
      folders={"--model_dir": run},
      replaced={"--model_dir": os.path.join(run, train_lib.EXPORT_DIR) if config.export else None})


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  config = config_from_flags(FLAGS)
  check_outputs(config)
  data = None
  if FLAGS.tune:
    data = data_lib.prepare_data(config.data)  # Once, for every trial and the final run.
    say = (lambda line: sys.stderr.write(line + "\n")) if config.verbose else None
    config, report = tuning.tune(config, tuning.TuneConfig(), data, progress=say, overwrite=FLAGS.overwrite_model_dir)
    sys.stdout.write(tuning.format_table(report))
  train_lib.print_result(train_lib.train(config, data, overwrite=FLAGS.overwrite_model_dir), config)


def run() -> None:
  """Console script `rank4class-train`."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
