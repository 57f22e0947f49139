"""The run, optimizer and outputs flags of `rank4class-train` (`define_run_flags`, `define_output_flags`) and
`config_from_flags`, which reads every flag of the binary back into a `Rank4ClassTrainConfig`."""

import dataclasses

from absl import flags

from rank4class.modeling import class_encoders
from rank4class.training import train as train_lib
from rank4class.training import training_data as data_lib
from rank4class_cli import cli, model_flags
from rank4class_engine import distribute
from rank4class_engine.optimization import precision

_FT = train_lib.FINETUNE_OPTIMIZER


def define_run_flags(define: cli.FlagDefiner) -> None:
  """The optimizer (`OptimizerConfig`) and the run (`RunConfig`): length, validation, checkpoints, devices."""
  define.string("optimizer", None, "Optimizer: " + ", ".join(train_lib.OPTIMIZERS) + ". Default: adam; "
                f"{_FT.type} with --text_mode=finetune.")
  define.float("learning_rate", None, "Learning rate (the peak of --lr_schedule). Default: 1e-3; "
               f"{_FT.learning_rate:g} with --text_mode=finetune (the fine-tuning recipe of BERT and "
               f"Hugging Face's Trainer); {train_lib.TFIDF_OPTIMIZER.learning_rate:g} with --text_mode=tfidf "
               f"(a linear layer on sparse TF-IDF); {train_lib.HYBRID_OPTIMIZER.learning_rate:g} with "
               "--text_mode=hybrid.")
  define.float("weight_decay", None, f"Weight decay of adamw. Default: 1e-4; {_FT.weight_decay:g} with "
               "--text_mode=finetune.")
  define.string("lr_schedule", None, "Learning-rate schedule: constant, or linear (decay to 0 over the run). "
                f"Default: constant; {_FT.schedule} with --text_mode=finetune.")
  define.float("warmup_fraction", None, "Share of the steps over which the rate rises linearly from 0. "
               f"Default: 0; {_FT.warmup_fraction:g} with --text_mode=finetune.")
  define.integer("batch_size", 32, "Global batch size.")
  define.integer("train_steps", None, "Training steps. Default (neither this nor --epochs): 3 epochs, at "
                 "least 1,000 and at most 20,000 steps.")
  define.float("epochs", None, "Passes over the training data (instead of --train_steps).")
  define.integer("eval_every", 100, "Steps between validation runs.")
  define.integer("checkpoint_every", None, "Steps between resumption checkpoints (default: at validations, "
                 "at most every 30 s; 0: none).")
  define.integer("steps_per_execution", 0, "Steps per tf.function call; 0: the engine chooses from the "
                 "measured step time.")
  define.preemption_flag()
  define.enum("precision", precision.FLOAT32, precision.POLICIES, "Compute dtype policy; mixed_bfloat16 on "
              "CPU/TPU, mixed_float16 on GPU. Scores, losses and metrics stay float32.")
  define.string("best_metric", "ndcg_5", "Validation metric choosing the exported model (loss, top_1_error, "
                "top_5_error, ndcg_1, ndcg_5, mrr, accuracy).")
  define.enum("validation_loss", "auto", train_lib.VALIDATION_LOSS, "Whether validation also computes the "
              "loss over all classes (TensorBoard, --best_metric=loss). auto: when read, and for "
              "pairwise_logistic, approx_ndcg and gumbel_approx_ndcg (O(C^2) memory per instance) up to "
              f"{train_lib.QUADRATIC_LOSS_CLASSES} classes; never from "
              f"{train_lib.CHUNKED_VALIDATION_CLASSES:,} classes on. The terminal says what "
              "validation computes.")
  define.integer("seed", 0, "Seed of the weights and data order.")
  define.string("strategy", "auto", "tf.distribute strategy: " + ", ".join(distribute.STRATEGIES) + ".")
  define.integer("patience", train_lib.DEFAULT_PATIENCE, "With the default length (neither --train_steps nor "
                 "--epochs) and a constant learning rate, the validation chooses how long to train: at least "
                 f"3 epochs (at least {train_lib.DEFAULT_MIN_STEPS} steps), then stop at the first "
                 "validation whose best is this many validations old, at most "
                 f"{train_lib.PATIENCE_LENGTH_FACTOR} times that length; the best step is kept. 0: the "
                 "default length exactly.")
  define.enum("few_shot", "auto", train_lib.FEW_SHOT_MODES, "Few labelled rows per class: every row trains "
              "the logistic regression of the frozen embeddings centred at the classes' texts "
              "(--class_texts, else the class names), and cross-validation on the rows chooses between it, "
              "the nearest class text and plain logistic regression; no validation split is carved. auto: "
              "when the median class has at most 32 labelled rows, on frozen text with the default model "
              "and length (no --validation_files, --train_steps or --epochs); on: asked for; off: never.")
  define.integer("verbose", 2,
                 "0: silent; 1 or 2: a progress line (step, loss, examples/s, ETA, validation).")


def define_output_flags(define: cli.FlagDefiner) -> None:
  """What a run leaves besides its checkpoints (`OutputsConfig`): the export, calibration, baselines, the
  linear candidate and the zero-shot model."""
  define.bool("export", True, "Export the best model as a SavedModel.")
  define.bool("calibrate", True, "Fit a temperature and conformal class sets on the validation split and "
              "export them: rank4class-predict then writes probabilities (--nocalibrate: scores only).")
  define.bool("baselines", True, "Fit the baselines on the same split and report them beside the model, "
              "scikit-learn's defaults as a user writes them, each with its fit time: the majority class, "
              "TF-IDF + logistic regression on raw texts, TF-IDF 1-2-grams + LinearSVC, logistic regression "
              "on the frozen embeddings, features or pixels (nearest class centroids from 500 classes on), "
              "with a 'model vs best baseline' line.")
  define.bool("linear_candidate", True, "After training, also train by the engine and validate the logistic "
              "regression of the model's own inputs (frozen embeddings or features standardised; with "
              "--text_mode=hybrid their TF-IDF beside them; its L2 strength chosen on validation log-loss), "
              "with --text_mode=auto also that of TF-IDF beside the embeddings, and export the better "
              "regression unless the trained model is better on --best_metric beyond one standard error "
              "(one line says which); any class encoder and interaction, fewer than 500 classes. From 500 "
              "classes on, a run whose classes are texts (on frozen text or features) also trains the same "
              "run without them (one-hot classes) and exports it when it is better beyond one standard "
              "error.")
  define.string("zero_shot_holdout", "auto", "Classes are texts (--class_encoder=metadata, cosine towers): "
                "the share of the training classes held out of a second training, the zero-shot model's, "
                "whose validation on them chooses its step and how much of the untrained cosine it keeps "
                "(saved in <model_dir>/zero_shot; rank4class-export --kind=zero_shot exports it). auto: a "
                "tenth of the classes, at least 5, from 10 classes on; 0: no zero-shot model; or a share "
                "in (0, 0.5].")


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
  if f.class_texts and f["class_encoder"].present and f.class_encoder != class_encoders.METADATA:
    raise ValueError(f"--class_texts={f.class_texts} needs --class_encoder={class_encoders.METADATA} (the "
                     f"class encoder that embeds class texts), got --class_encoder={f.class_encoder}")
  optimizer = _optimizer_config(f)
  if f.train_steps is not None and f.epochs is not None:
    raise ValueError("give --train_steps or --epochs, not both")
  run = train_lib.RunConfig(
      batch_size=f.batch_size, train_steps=f.train_steps, epochs=f.epochs, eval_every=f.eval_every,
      checkpoint_every=f.checkpoint_every, steps_per_execution=f.steps_per_execution,
      best_metric=f.best_metric,
      validation_loss=f.validation_loss, strategy=f.strategy, seed=f.seed, precision=f.precision,
      verbose=f.verbose, preemption_grace_seconds=f.preemption_grace_seconds, patience=f.patience,
      few_shot=f.few_shot)
  outputs = train_lib.OutputsConfig(
      export=f.export, baselines=f.baselines, calibrate=f.calibrate, linear_candidate=f.linear_candidate,
      zero_shot_holdout=_zero_shot_holdout(f.zero_shot_holdout))
  model = model_flags.model_config(f)
  if f.class_texts and not f["class_encoder"].present:  # A class-texts file: the classes are their texts.
    model = dataclasses.replace(model, class_encoder=dataclasses.replace(model.class_encoder,
                                                                         type=class_encoders.METADATA))
  return train_lib.Rank4ClassTrainConfig(model_dir=f.model_dir, data=data, model=model, optimizer=optimizer,
                                         run=run, outputs=outputs)


def _optimizer_config(f: flags.FlagValues) -> train_lib.OptimizerConfig:
  """The text mode's optimizer defaults, with the optimizer flags given replacing theirs."""
  optimizer = {data_lib.FINETUNE: train_lib.FINETUNE_OPTIMIZER,
               data_lib.TFIDF: train_lib.TFIDF_OPTIMIZER,
               data_lib.HYBRID: train_lib.HYBRID_OPTIMIZER}.get(f.text_mode, train_lib.OptimizerConfig())
  given = {field: value for field, value in (("type", f.optimizer), ("learning_rate", f.learning_rate),
                                             ("weight_decay", f.weight_decay), ("schedule", f.lr_schedule),
                                             ("warmup_fraction", f.warmup_fraction)) if value is not None}
  return dataclasses.replace(optimizer, **given)


def _zero_shot_holdout(value: str) -> float | None:
  """--zero_shot_holdout: "auto" -> None, else a share in [0, 0.5]."""
  if value == "auto":
    return None
  try:
    return float(value)
  except ValueError:
    raise ValueError(f"--zero_shot_holdout={value}: expected 'auto' or a share in [0, 0.5] (0: "
                     "none)") from None
