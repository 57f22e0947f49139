"""The reproduction study of Rank4Class (Tables 7-12): losses x interactions on real data, several seeds.

The study's settings and presets live in `rank4class.studies.study_config`, its tables, plots, significance
marks and results.md in `rank4class.studies.study_report`; their names are importable from here too
(`study.StudyConfig`, `study.preset`, `study.markdown_tables`).
"""

import dataclasses
import json
import math
import os
import sys
import time
from typing import Any

import numpy as np

from rank4class.evaluation import baselines as baselines_lib
from rank4class.modeling import class_encoders as class_encoders_lib
from rank4class.modeling import encoders as encoders_lib
from rank4class.modeling import interactions as interactions_lib
from rank4class.modeling import model as model_lib
from rank4class.studies.study_config import (  # noqa: F401  Re-exported: callers use `study.<name>`.
  BASELINE,
  INTERACTIONS,
  LOSSES,
  PRESETS,
  RESULTS_JSON,
  FinetuneConfig,
  RunRecord,
  StudyConfig,
  StudyDataset,
  preset,
)
from rank4class.studies.study_report import (  # noqa: F401  Re-exported: callers use `study.<name>`.
  INTERACTION_LABELS,
  LOSS_LABELS,
  REPORTED_METRICS,
  RESULTS_MD,
  CellSummary,
  baseline_table,
  markdown_tables,
  plot,
  significance_rule,
  summarize,
  welch_significant,
  write_outputs,
)
from rank4class.training import train as train_lib
from rank4class.training import training_data as data_lib
from rank4class_data import write_failures
from rank4class_data.messages import out
from rank4class_data.validation import write_json
from rank4class_engine.loop import model_reuse
from rank4class_engine.optimization import losses as losses_lib
from rank4class_engine.runs import configs as engine_configs


def _mode(dataset: StudyDataset) -> str:
  return dataset.text_mode if dataset.name in data_lib.TEXT_DATASETS else "image"


def data_config(dataset: StudyDataset, validation_fraction: float, text_mode: str | None = None,
                max_seq_length: int | None = None) -> data_lib.DataConfig:
  return data_lib.DataConfig(
      dataset=dataset.name, text_mode=text_mode or dataset.text_mode, validation_fraction=validation_fraction,
      max_train_examples=dataset.max_train_examples, max_validation_examples=dataset.max_validation_examples,
      max_test_examples=dataset.max_test_examples, max_seq_length=max_seq_length or dataset.max_seq_length)


def run_config(study: StudyConfig, dataset: StudyDataset, loss: str, interaction: str, width: int, lr: float,
               seed: int, finetune: FinetuneConfig | None = None) -> train_lib.Rank4ClassTrainConfig:
  """The Rank4ClassTrainConfig of one run of the grid (or of a fine-tuned run when `finetune` is given)."""
  mode = "finetune" if finetune else _mode(dataset)
  init = "" if study.class_init == class_encoders_lib.AUTO_INIT else f"-init_{study.class_init}"
  init += f"-la{study.logit_adjustment:g}" if study.logit_adjustment else ""
  run_name = f"{loss}-{interaction}{init}/w{width}-lr{lr:g}-seed{seed}"
  model_dir = os.path.join(study.output_dir, "runs", dataset.name, mode, run_name)
  encoder = encoders_lib.InstanceEncoderConfig(
      type=train_lib.AUTO_ENCODER, mlp=encoders_lib.MlpEncoderConfig(hidden_units=(width,)),
      image=encoders_lib.ImageEncoderConfig(filters=tuple(dataset.cnn_filters), pooling="max"))
  if mode == data_lib.HYBRID:  # Both branches of --hidden_width, as rank4class-train sets them.
    encoder.tfidf = encoders_lib.TfidfEncoderConfig(output_dim=width)
  model = model_lib.Rank4ClassConfig(
      instance_encoder=encoder,
      class_encoder=class_encoders_lib.ClassEncoderConfig(init=study.class_init),
      interaction=interactions_lib.InteractionConfig(type=interaction, hidden_units=(width, width)),
      loss=losses_lib.LossConfig(type=loss), logit_adjustment=study.logit_adjustment)
  steps, eval_every, batch_size = dataset.train_steps, dataset.eval_every, dataset.batch_size
  spe = math.gcd(study.steps_per_execution, eval_every)
  data = data_config(dataset, study.validation_fraction)
  if finetune:
    steps, eval_every, batch_size, spe = finetune.train_steps, finetune.eval_every, finetune.batch_size, 1
    data = data_config(dataset, study.validation_fraction, data_lib.FINETUNE, finetune.max_seq_length)
  return train_lib.Rank4ClassTrainConfig(
      model_dir=model_dir, data=data, model=model, optimizer=train_lib.OptimizerConfig(learning_rate=lr),
      run=train_lib.RunConfig(batch_size=batch_size, train_steps=steps, eval_every=eval_every,
                              checkpoint_every=0,
                              steps_per_execution=spe, best_metric=study.tuning_metric, strategy="auto",
                              seed=seed, tensorboard=False, verbose=0),
      # The study fits the baselines once per data set, and compares trained models (losses x interactions),
      # never a regression in their place.
      outputs=train_lib.OutputsConfig(export=False, baselines=False, linear_candidate=False,
                                      zero_shot_holdout=0.0))


def _record(config: train_lib.Rank4ClassTrainConfig, result: train_lib.Rank4ClassTrainResult, dataset: str,
            mode: str) -> RunRecord:
  return RunRecord(
      dataset=dataset, mode=mode, loss=config.model.loss.type, interaction=config.model.interaction.type,
      hidden_width=config.model.interaction.hidden_units[0], learning_rate=config.optimizer.learning_rate,
      seed=config.run.seed, validation=result.validation_metrics,
      test=result.test_report["metrics"] if result.test_report else {}, model_dir=config.model_dir,
      seconds=result.seconds)


def _log(message: str) -> None:
  out(f"[study {time.strftime('%H:%M:%S')}] {message}")


class StudyRunner:
  """Runs the grid, tuning each cell on validation, and keeps every finished run in results.json."""

  def __init__(self, config: StudyConfig):
    self.config = config
    self.records: list[RunRecord] = []
    self.failures: list[dict[str, str]] = []
    self._data: dict[tuple, data_lib.PreparedData] = {}
    # Data set name -> `baselines.compute` report: fitted once, on the first prepared splits of the data set
    # (every mode shares the split: the same split seed, fraction and subsets).
    self.baselines: dict[str, dict[str, Any]] = {}
    # The runs of a cell (other seeds and learning rates) train one model, traced once (same numbers).
    self._models = model_reuse.ModelPool()

  def _prepared(self, config: train_lib.Rank4ClassTrainConfig) -> data_lib.PreparedData:
    key = json.dumps(engine_configs.to_dict(config.data), sort_keys=True)
    if key not in self._data:
      if config.data.dataset in data_lib.TEXT_DATASETS:
        _log(f"preparing {config.data.dataset} ({config.data.text_mode}): converting MiniLM and embedding "
             "the texts on the first run (both cached on disk)...")
      start = time.time()
      self._data[key] = data_lib.prepare_data(config.data)
      mode = config.data.text_mode if config.data.dataset in data_lib.TEXT_DATASETS else "image"
      _log(f"prepared {config.data.dataset} ({mode}) in {time.time() - start:.0f}s: "
           f"{len(self._data[key].train)} train / {len(self._data[key].validation)} validation / "
           f"{len(self._data[key].test)} test")
      if self.config.baselines and config.data.dataset not in self.baselines:
        start = time.time()
        report = baselines_lib.compute_or_note(baselines_lib.BaselineConfig(),
                                               data_lib.embedding_view(self._data[key]),
                                               tuple(config.model.metric_ks))
        self.baselines[config.data.dataset] = report
        _log(f"baselines of {config.data.dataset} in {time.time() - start:.0f}s: " + "; ".join(
            f"{row['label']} top1err={row['metrics']['top_1_error']:.4f}" for row in report.get("rows", [])))
    return self._data[key]

  def run(self, config: train_lib.Rank4ClassTrainConfig, dataset: str, mode: str) -> RunRecord | None:
    """Trains one run (or reads it back when finished); a failing run is logged and recorded, and the study
    goes on (hours of other runs are not lost to one error). A write the file system refuses (a full disk)
    stops the study: every later run would meet it too, and the rerun skips the finished runs."""
    try:
      result = train_lib.train(config, self._prepared(config), models=self._models)
    except Exception as e:  # pylint: disable=broad-except
      if write_failures.find(e) is not None:
        raise
      _log(f"FAILED {config.model_dir}: {type(e).__name__}: {e}")
      self.failures.append({"model_dir": config.model_dir, "error": f"{type(e).__name__}: {e}"})
      self.save()
      return None
    record = _record(config, result, dataset, mode)
    self.records.append(record)
    self.save()
    _log(f"{dataset}/{mode} {record.loss}+{record.interaction} w={record.hidden_width} "
         f"lr={record.learning_rate:g} seed={record.seed}: val "
         f"{self.config.tuning_metric}={record.validation.get(self.config.tuning_metric, float('nan')):.4f} "
         f"test top1err={record.test.get('top_1_error', float('nan')):.4f} ({record.seconds:.0f}s)")
    return record

  def save(self) -> None:
    write_json(os.path.join(self.config.output_dir, RESULTS_JSON),
               {"config": engine_configs.to_dict(self.config),
                "runs": [dataclasses.asdict(r) for r in self.records], "failures": self.failures,
                "baselines": self.baselines})

  def run_cell(self, dataset: StudyDataset, loss: str, interaction: str) -> list[RunRecord]:
    """Tunes (width, learning rate) with the first seed on validation, then runs the other seeds."""
    study = self.config
    mode = _mode(dataset)
    tuning = [self.run(run_config(study, dataset, loss, interaction, w, lr, study.seeds[0]),
                       dataset.name, mode)
              for w in study.hidden_widths for lr in study.learning_rates]
    tuning = [r for r in tuning if r is not None]
    if not tuning:
      return []
    better = (min if train_lib.metric_mode(study.tuning_metric) == "min" else max)
    best = better(tuning, key=lambda r: r.validation.get(study.tuning_metric, float("nan")))
    others = [self.run(run_config(study, dataset, loss, interaction, best.hidden_width,
                                  best.learning_rate, seed),
                       dataset.name, mode) for seed in study.seeds[1:]]
    return [best] + [r for r in others if r is not None]

  def run_all(self) -> list[RunRecord]:
    """Runs everything; returns the records of the chosen (tuned) runs, all seeds."""
    chosen: list[RunRecord] = []
    study = self.config
    for dataset in study.datasets:
      for loss in study.losses:
        for interaction in study.interactions:
          chosen += self.run_cell(dataset, loss, interaction)
          write_outputs(study, chosen, self.records, self.failures, self.baselines)
      # Fine-tuning right after its data set's frozen grid, which picks the "best" cell to fine-tune.
      for ft in study.finetune:
        if ft.dataset == dataset.name:
          chosen += self.run_finetune(ft, chosen)
        write_outputs(study, chosen, self.records, self.failures, self.baselines)
    return chosen

  def run_finetune(self, ft: FinetuneConfig, frozen: list[RunRecord]) -> list[RunRecord]:
    study = self.config
    dataset = next((d for d in study.datasets if d.name == ft.dataset), StudyDataset(ft.dataset))
    cells = []
    if "baseline" in ft.cells:
      cells.append(BASELINE)
    if "best" in ft.cells:
      candidates = [r for r in frozen if r.dataset == ft.dataset and r.mode == data_lib.FROZEN]
      if candidates:
        best = select_best_cell(candidates, study.tuning_metric)
        if best not in cells:
          cells.append(best)
    records = []
    for loss, interaction in cells:
      width = next((r.hidden_width for r in frozen if r.dataset == ft.dataset and (r.loss, r.interaction)
                    == (loss, interaction)), study.hidden_widths[0])
      for seed in ft.seeds:
        config = run_config(study, dataset, loss, interaction, width, ft.learning_rate, seed, finetune=ft)
        records.append(self.run(config, dataset.name, data_lib.FINETUNE))
    return [r for r in records if r is not None]


def select_best_cell(records: list[RunRecord], metric: str) -> tuple[str, str]:
  """The (loss, interaction) with the best mean validation `metric` (never the test split)."""
  by_cell: dict[tuple[str, str], list[float]] = {}
  for r in records:
    by_cell.setdefault((r.loss, r.interaction), []).append(r.validation.get(metric, float("nan")))
  sign = -1.0 if train_lib.metric_mode(metric) == "min" else 1.0
  return max(by_cell, key=lambda cell: sign * float(np.nanmean(by_cell[cell])))



def run_study(config: StudyConfig, stream=None) -> list[RunRecord]:
  """Runs the study, writes results.json/results.md/plots into `config.output_dir`, prints the tables."""
  stream = stream or sys.stdout
  start = time.time()
  if os.path.exists(config.output_dir) and not os.path.isdir(config.output_dir):
    raise NotADirectoryError(f"output_dir {config.output_dir} is a file; expected a folder (new or a study's "
                             "earlier output)")
  runner = StudyRunner(config)
  chosen = runner.run_all()
  path, _ = write_outputs(config, chosen, runner.records, runner.failures, runner.baselines)
  with open(path, encoding="utf-8") as f:
    stream.write(f.read())
  stream.write(f"\nStudy finished in {time.time() - start:.0f}s; results in {config.output_dir}\n")
  return chosen
