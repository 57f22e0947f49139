"""A small search over learning rate and width on the validation split (`rank4class-train --tune`): each
setting trains as a run of its own under `<model_dir>/tune/`, the best validation result chooses the settings
of the run in `<model_dir>`, and the table of every trial is kept beside it (`tune_report.json`) and printed.

The test split is never read by the search: trials skip the test report, the export, the baselines and the
calibration; only the final run evaluates on the test split, once.
"""

import dataclasses
import math
import os
from typing import Any

from rank4class.modeling import model as model_lib
from rank4class.training import train as train_lib
from rank4class.training import training_data as data_lib
from rank4class_data.validation import check_range, check_widths, write_json
from rank4class_engine.loop import model_reuse

TUNE_DIR = "tune"
REPORT_FILE = "tune_report.json"
# Learning rates tried by default: a head trained from scratch (frozen embeddings, TF-IDF, features, images),
# and a pre-trained encoder fine-tuned (BERT's paper searched 2e-5..5e-5).
HEAD_LEARNING_RATES = (3e-4, 1e-3, 3e-3)
FINETUNE_LEARNING_RATES = (2e-5, 3e-5, 5e-5)
# A projection of sparse TF-IDF vectors, alone or beside the frozen embeddings' MLP (`train.TFIDF_OPTIMIZER`,
# `train.HYBRID_OPTIMIZER`).
TFIDF_LEARNING_RATES = (3e-3, 1e-2, 3e-2)
WIDTHS = (128, 512)


@dataclasses.dataclass
class TuneConfig:
  """The grid of the search.

  Attributes:
    learning_rates: Learning rates tried; None: `FINETUNE_LEARNING_RATES` for a fine-tuned text encoder,
      `TFIDF_LEARNING_RATES` for TF-IDF and hybrid text, else `HEAD_LEARNING_RATES`.
    widths: Widths tried for the MLP instance encoder, the TF-IDF projection and the interaction's MLP layers
      (`with_width`); None: `WIDTHS`, or only the configured width for a fine-tuned text encoder.
  """

  learning_rates: tuple[float, ...] | None = None
  widths: tuple[int, ...] | None = None

  def __post_init__(self):
    if self.learning_rates is not None:
      if not self.learning_rates:
        raise ValueError(f"`learning_rates` must list at least one rate, got {self.learning_rates}.")
      for rate in self.learning_rates:
        check_range("learning_rates", rate, 0, low_inclusive=False)
    if self.widths is not None:
      self.widths = check_widths("widths", self.widths)


def with_width(model: model_lib.Rank4ClassConfig, width: int) -> model_lib.Rank4ClassConfig:
  """`model` with `width` as each layer of the MLP instance encoder and of the interaction's MLP, and as the
  TF-IDF projection (what `rank4class-train --hidden_width` sets; the layer counts are kept)."""
  encoder = model.instance_encoder
  encoder = dataclasses.replace(
      encoder, mlp=dataclasses.replace(encoder.mlp, hidden_units=(width,) * len(encoder.mlp.hidden_units)),
      tfidf=dataclasses.replace(encoder.tfidf, output_dim=width))
  interaction = dataclasses.replace(model.interaction,
                                    hidden_units=(width,) * len(model.interaction.hidden_units))
  return dataclasses.replace(model, instance_encoder=encoder, interaction=interaction)


def _configured_width(model: model_lib.Rank4ClassConfig) -> int:
  return (
    model.interaction.hidden_units[0]
    if model.interaction.hidden_units
    else model.instance_encoder.mlp.hidden_units[0]
  )


def grid(config: train_lib.Rank4ClassTrainConfig, tune: TuneConfig) -> list[tuple[float, int]]:
  """The (learning rate, width) pairs tried for `config`."""
  finetune = config.data.text_mode == data_lib.FINETUNE
  rates = tune.learning_rates or {data_lib.FINETUNE: FINETUNE_LEARNING_RATES,
                                  data_lib.TFIDF: TFIDF_LEARNING_RATES,
                                  data_lib.HYBRID: TFIDF_LEARNING_RATES}.get(config.data.text_mode,
                                                                             HEAD_LEARNING_RATES)
  widths = tune.widths or ((_configured_width(config.model),) if finetune else WIDTHS)
  return [(rate, width) for width in widths for rate in rates]


def trial_config(
  config: train_lib.Rank4ClassTrainConfig, rate: float, width: int
) -> train_lib.Rank4ClassTrainConfig:
  """One trial: `config` with the rate and width, in its own folder under `<model_dir>/tune/`, and only what
  model selection needs (no export, test report, baselines, calibration or logistic-regression candidates)."""
  return dataclasses.replace(
      config, model_dir=os.path.join(config.model_dir, TUNE_DIR, f"lr{rate:g}-w{width}"),
      optimizer=dataclasses.replace(config.optimizer, learning_rate=rate),
      model=with_width(config.model, width),
      run=dataclasses.replace(config.run, tensorboard=False, verbose=0),
      # The search tunes the trained model; the final run validates the regressions and trains the zero-shot
      # model.
      outputs=train_lib.OutputsConfig(export=False, evaluate_test=False, baselines=False, calibrate=False,
                                      linear_candidate=False, zero_shot_holdout=0.0))


def tune(config: train_lib.Rank4ClassTrainConfig, tune_config: TuneConfig,
         data: data_lib.PreparedData | None = None,
         progress=None, overwrite: bool = False) -> tuple[train_lib.Rank4ClassTrainConfig, dict[str, Any]]:
  """Trains every trial of `grid` (finished trials are read back) and returns the config of the final run (the
  best trial's rate and width, `config`'s folder and outputs) and the report written to
  `<model_dir>/tune_report.json`.

  Args:
    config: The run the user asked for.
    tune_config: The grid.
    data: Prepared data to reuse (one preparation serves every trial); None prepares it once here.
    progress: Optional callable taking one line of text per finished trial.
    overwrite: A trial folder holding a run of another config starts afresh instead of being refused.

  Raises:
    ValueError: When no trial gives a finite validation value (every one diverged).
  """
  data = data if data is not None else data_lib.prepare_data(config.data)
  mode = train_lib.metric_mode(config.run.best_metric)
  models = model_reuse.ModelPool()  # The trials of one width train one traced model.
  rows = []
  for rate, width in grid(config, tune_config):
    result = train_lib.train(trial_config(config, rate, width), data, overwrite=overwrite, models=models)
    value = result.best_value
    rows.append({"learning_rate": rate, "width": width, "best_step": result.best_step,
                 config.run.best_metric: value, "seconds": result.seconds})
    if progress:
      progress(f"Tune: learning rate {rate:g}, width {width}: best validation {config.run.best_metric} = "
               f"{value} at step {result.best_step} ({result.seconds:.0f} s)")
  finite = [row for row in rows if row[config.run.best_metric] is not None
            and math.isfinite(row[config.run.best_metric])]
  if not finite:
    raise ValueError(f"Every trial of the search diverged (no finite validation {config.run.best_metric}): "
                     f"{[(r['learning_rate'], r['width']) for r in rows]}.")
  sign = 1.0 if mode == "min" else -1.0
  best = min(finite, key=lambda row: (sign * row[config.run.best_metric], row["learning_rate"], row["width"]))
  chosen = dataclasses.replace(config, optimizer=dataclasses.replace(config.optimizer,
                                                                     learning_rate=best["learning_rate"]),
                               model=with_width(config.model, best["width"]))
  report = {"metric": config.run.best_metric, "mode": mode, "trials": rows,
            "chosen": {"learning_rate": best["learning_rate"], "width": best["width"]}}
  os.makedirs(config.model_dir, exist_ok=True)
  write_json(os.path.join(config.model_dir, REPORT_FILE), report)
  return chosen, report


def format_table(report: dict[str, Any]) -> str:
  """The trials as a plain-text table, the chosen one marked."""
  metric, chosen = report["metric"], report["chosen"]
  lines = [f"Search on the validation split ({metric}, {'lower' if report['mode'] == 'min' else 'higher'} is "
           "better):", f"{'learning rate':>14}{'width':>8}{metric:>16}{'best step':>11}{'seconds':>9}"]
  for row in report["trials"]:
    mark = (
      "  <- chosen"
      if (row["learning_rate"], row["width"]) == (chosen["learning_rate"], chosen["width"])
      else ""
    )
    value = row[metric]
    shown = "-" if value is None else f"{value:.4f}"
    lines.append(f"{row['learning_rate']:>14g}{row['width']:>8}{shown:>16}{row['best_step'] or '-':>11}"
                 f"{row['seconds']:>9.0f}{mark}")
  return "\n".join(lines) + "\n"
