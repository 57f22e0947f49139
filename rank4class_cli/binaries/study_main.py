r"""Runs the Rank4Class reproduction study (losses x interactions, several seeds) and prints its tables.

Sample command lines:

  rank4class-study --preset=quick --output_dir=/tmp/rank4class_study       # minutes on 2 CPU cores

  rank4class-study --preset=full --output_dir=/tmp/rank4class_study_full   # hours: R8, 20NG, Fashion-MNIST

  rank4class-study --preset=quick --losses=softmax,approx_ndcg --interactions=dot,latent_cross --seeds=0,1,2 \
      --output_dir=/tmp/small_study

The quick preset converts MiniLM to TF Hub SavedModels (once, cached), embeds a stratified subset of Reuters
R8 (cached), tunes each of the 15 cells' learning rate on a validation split carved from train, trains 2 seeds
and evaluates the best-on-validation model of each on the test split. A rerun skips finished runs.
"""

from absl import flags

from rank4class.modeling import class_encoders as class_encoders_lib
from rank4class.modeling import interactions as interactions_lib
from rank4class.studies import study as study_lib
from rank4class.training import training_data as data_lib
from rank4class_cli import cli
from rank4class_engine.optimization import losses as losses_lib

PROGRAM = "rank4class-study"
FLAGS = flags.FlagValues()  # This binary's own flags, so several binaries can be imported in one process.
define = cli.FlagDefiner(FLAGS)

define.string("preset", "quick", "Study preset: " + ", ".join(study_lib.PRESETS) + ".")
define.string("output_dir", "rank4class_study", "Folder for runs, results.json, results.md and plots.")
define.list("datasets", None, "Override the preset's data sets: " + ", ".join(data_lib.DATASETS) + ".")
define.list("losses", None, "Override the losses: " + ", ".join(losses_lib.LOSS_NAMES) + ".")
define.list("interactions", None, "Override the interactions: "
            + ", ".join(interactions_lib.INTERACTION_NAMES) + ".")
define.list("seeds", None, "Override the model seeds, e.g. 0,1,2.")
define.list("learning_rates", None, "Override the learning rates tuned on validation.")
define.list("hidden_widths", None, "Override the MLP widths tuned on validation.")
define.integer("train_steps", None, "Override every data set's training steps.")
define.integer("max_train_examples", None, "Override every data set's training subset size.")
define.bool("finetune", None, "Force fine-tuned MiniLM runs (baseline and best frozen cell) on for every "
            "text data set of the study, or off with --nofinetune.")
define.string("text_mode", None,
              "Override every text data set's mode: " + ", ".join(data_lib.TEXT_MODES) + ".")
define.string("class_init", class_encoders_lib.AUTO_INIT,
              "How every run starts its one-hot class embeddings: "
              + ", ".join(class_encoders_lib.CLASS_INITS) + " (rank4class-train's --class_init).")
define.float("logit_adjustment", 0.0, "tau of every run's logit-adjusted loss (rank4class-train's "
             "--logit_adjustment; 0: off).")
define.bool("baselines", True, "Fit the baselines outside Rank4Class once per data set (majority class, "
            "TF-IDF + logistic regression, logistic regression on the frozen embeddings or pixels) and "
            "report them beside the grid in results.md and the plots.")

cli.register_choices(FLAGS, {"preset": study_lib.PRESETS, "text_mode": data_lib.TEXT_MODES,
                             "class_init": class_encoders_lib.CLASS_INITS})


def _check_list(name: str, values: list[str] | None, allowed: tuple[str, ...]) -> None:
  for value in values or []:
    if value not in allowed:
      raise ValueError(f"--{name}: {value!r} is not one of {', '.join(allowed)}")


def _numbers(name: str, values: list[str], kind: type) -> tuple:
  try:
    return tuple(kind(v) for v in values)
  except ValueError:
    noun = "integers" if kind is int else "numbers"
    raise ValueError(f"--{name}={','.join(values)} must be a comma-separated list of {noun}") from None


def config_from_flags(f: flags.FlagValues) -> study_lib.StudyConfig:
  """The preset with the flags' overrides.

  Raises:
    ValueError: naming the flag and the allowed values, for a bad value.
  """
  _check_list("datasets", f.datasets, data_lib.DATASETS)
  _check_list("losses", f.losses, losses_lib.LOSS_NAMES)
  _check_list("interactions", f.interactions, interactions_lib.INTERACTION_NAMES)
  config = study_lib.preset(f.preset, f.output_dir)
  if f.datasets:
    known = {d.name: d for d in config.datasets}
    config.datasets = [known.get(name, study_lib.StudyDataset(name)) for name in f.datasets]
  if f.losses:
    config.losses = tuple(f.losses)
  if f.interactions:
    config.interactions = tuple(f.interactions)
  if f.seeds:
    config.seeds = _numbers("seeds", f.seeds, int)
  if f.learning_rates:
    config.learning_rates = _numbers("learning_rates", f.learning_rates, float)
  if f.hidden_widths:
    config.hidden_widths = _numbers("hidden_widths", f.hidden_widths, int)
  for dataset in config.datasets:
    if f.train_steps is not None:
      dataset.train_steps = f.train_steps
      dataset.eval_every = min(dataset.eval_every, f.train_steps)
    if f.max_train_examples is not None:
      dataset.max_train_examples = f.max_train_examples
    if f.text_mode is not None and dataset.name in data_lib.TEXT_DATASETS:
      dataset.text_mode = f.text_mode
  if f.finetune is not None:
    config.finetune = [study_lib.FinetuneConfig(d.name) for d in config.datasets
                       if d.name in data_lib.TEXT_DATASETS] if f.finetune else []
  config.baselines = f.baselines
  config.class_init = f.class_init
  config.logit_adjustment = f.logit_adjustment
  config.__post_init__()  # Re-validates the overridden fields.
  return config


parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, config_from_flags)


def main(argv: list[str]) -> None:
  del argv  # Flags were parsed by `parse_flags`.
  study_lib.run_study(config_from_flags(FLAGS))


def run() -> None:
  """Console script `rank4class-study`."""
  cli.run(main, parse_flags)


if __name__ == "__main__":
  run()
