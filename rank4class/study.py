"""The reproduction study of Rank4Class (Tables 7-12): losses x interactions on real data, several seeds."""

import dataclasses
import json
import math
import os
import sys
import time
from typing import Any

import numpy as np

from rank4class import baselines as baselines_lib
from rank4class import class_encoders as class_encoders_lib
from rank4class import encoders as encoders_lib
from rank4class import interactions as interactions_lib
from rank4class import model as model_lib
from rank4class import train as train_lib
from rank4class import training_data as data_lib
from rank4class_data.validation import atomic_output, check_choice, check_range, write_json
from rank4class_engine import configs as engine_configs
from rank4class_engine import losses as losses_lib
from rank4class_engine import model_reuse
from rank4class_engine.seed_statistics import SeedStatistics

# The paper's grid (App. D): five losses x three interactions.
LOSSES = (losses_lib.SOFTMAX, losses_lib.PAIRWISE_LOGISTIC, losses_lib.APPROX_NDCG,
          losses_lib.GUMBEL_APPROX_NDCG, losses_lib.MSE)
INTERACTIONS = (interactions_lib.DOT, interactions_lib.LATENT_CROSS, interactions_lib.CONCAT)
LOSS_LABELS = {losses_lib.SOFTMAX: "SoftmaxCE", losses_lib.PAIRWISE_LOGISTIC: "PairLogLoss",
               losses_lib.APPROX_NDCG: "ApproxNDCG", losses_lib.GUMBEL_APPROX_NDCG: "Gumbel-ApproxNDCG",
               losses_lib.MSE: "MSE", losses_lib.RESCALED_MSE: "MSE (rescaled)"}
INTERACTION_LABELS = {interactions_lib.DOT: "dot product", interactions_lib.LATENT_CROSS: "LC+MLP",
                      interactions_lib.CONCAT: "Concat+MLP"}
# The paper's metrics, reported x100: (metric name, label, lower is better).
REPORTED_METRICS = (("top_1_error", "Top-1 Error", True), ("top_5_error", "Top-5 Error", True),
                    ("ndcg_5", "NDCG@5", False))
BASELINE = (losses_lib.SOFTMAX, interactions_lib.DOT)
PRESETS = ("quick", "full")
RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"


@dataclasses.dataclass
class StudyDataset:
  """One data set of the study and how its models are trained.

  Attributes:
    name: A name in `training_data.DATASETS`.
    text_mode: "frozen" (cached MiniLM embeddings + MLP), "finetune", "tfidf" or "hybrid" (TF-IDF beside the
      cached embeddings) for text data sets (`training_data.TEXT_MODES`).
    max_train_examples: Optional stratified subset of the training rows (after the validation split).
    max_validation_examples: Optional stratified subset of the validation rows.
    max_test_examples: Optional stratified subset of the test rows.
    max_seq_length: Tokens per document for MiniLM.
    batch_size: Global batch size (the paper: 32 for text, 64 for images).
    train_steps: Steps per run.
    eval_every: Steps between validation runs (the best one on validation is kept).
    cnn_filters: Conv widths of the small CNN (image data sets).
  """

  name: str
  text_mode: str = data_lib.FROZEN
  max_train_examples: int | None = None
  max_validation_examples: int | None = None
  max_test_examples: int | None = None
  max_seq_length: int = 128
  batch_size: int = 32
  train_steps: int = 1000
  eval_every: int = 200
  cnn_filters: tuple[int, ...] = (32, 64, 128)  # rank4class-train's --cnn_filters.

  def __post_init__(self):
    if self.name not in data_lib.DATASETS:
      raise ValueError(f"Unknown dataset {self.name!r}; allowed: {', '.join(data_lib.DATASETS)}.")


@dataclasses.dataclass
class FinetuneConfig:
  """Fine-tuned MiniLM runs (the encoder trained end to end) for a few cells of one text data set.

  They run right after that data set's frozen grid, which picks the "best" cell.

  Attributes:
    dataset: The text data set (its subsets as in the frozen grid's `StudyDataset` of the same name).
    cells: "baseline" (SoftmaxCE + dot) and/or "best" (the frozen cell with the best mean validation NDCG@5).
    seeds: Seeds per cell.
    train_steps: Steps per run.
    eval_every: Steps between validation runs.
    batch_size: Global batch size.
    learning_rate: Adam learning rate of the whole model.
    max_seq_length: Tokens per document.
  """

  dataset: str = "reuters_r8"
  cells: tuple[str, ...] = ("baseline", "best")
  seeds: tuple[int, ...] = (0,)
  train_steps: int = 400
  eval_every: int = 100
  batch_size: int = 16
  learning_rate: float = 5e-5
  max_seq_length: int = 64


@dataclasses.dataclass
class StudyConfig:
  """The grid, the seeds and the tuning of the study.

  Attributes:
    output_dir: Where runs (one model_dir each), results.json, results.md and the plots go. A rerun skips the
      runs already finished there.
    datasets: The data sets.
    losses: Loss names (the paper's five by default).
    interactions: Interaction names (dot, LC+MLP, concat+MLP).
    seeds: Model seeds per cell (the data split is fixed: `split_seed` 0).
    hidden_widths: Widths tried for the MLPs (interaction and instance encoder), tuned per cell on validation.
    learning_rates: Adam learning rates tuned per cell on validation.
    tuning_metric: Validation metric choosing the hyper-parameters and the best checkpoint.
    validation_fraction: Share of the train split held out for validation.
    steps_per_execution: Steps per tf.function call (speed on CPU).
    finetune: Fine-tuned runs, at most one entry per text data set of `datasets`.
    baselines: Fit the baselines outside Rank4Class (`rank4class.baselines`: majority class, TF-IDF + logistic
      regression, logistic regression on the frozen embeddings or pixels) once per data set, on the same splits,
      and report them beside the grid in the tables and plots.
    class_init: How every run starts its one-hot class embeddings (`class_encoders.ClassEncoderConfig.init`);
      other than "auto" it is part of each run's folder name.
    logit_adjustment: tau of every run's logit-adjusted loss (`model.LogitAdjustment`; 0: off); other than 0
      it is part of each run's folder name.
  """

  output_dir: str
  datasets: list[StudyDataset] = dataclasses.field(default_factory=lambda: [StudyDataset("reuters_r8")])
  losses: tuple[str, ...] = LOSSES
  interactions: tuple[str, ...] = INTERACTIONS
  seeds: tuple[int, ...] = (0, 1)
  hidden_widths: tuple[int, ...] = (128,)
  learning_rates: tuple[float, ...] = (1e-3, 3e-3)
  tuning_metric: str = "ndcg_5"
  validation_fraction: float = 0.1
  steps_per_execution: int = 50
  finetune: list[FinetuneConfig] = dataclasses.field(default_factory=list)
  baselines: bool = True
  class_init: str = class_encoders_lib.AUTO_INIT
  logit_adjustment: float = 0.0

  def __post_init__(self):
    check_range("logit_adjustment", self.logit_adjustment, 0.0)
    check_choice("class_init", self.class_init, class_encoders_lib.CLASS_INITS)
    for name in self.losses:
      check_choice("losses", name, losses_lib.LOSS_NAMES)
    for name in self.interactions:
      check_choice("interactions", name, interactions_lib.INTERACTION_NAMES)
    if not self.seeds or not self.hidden_widths or not self.learning_rates:
      raise ValueError("`seeds`, `hidden_widths` and `learning_rates` must not be empty.")
    names = [ft.dataset for ft in self.finetune]
    for name in names:
      if name not in data_lib.TEXT_DATASETS:
        raise ValueError(f"Fine-tuning needs a text data set ({', '.join(data_lib.TEXT_DATASETS)}), got {name!r}.")
    if len(set(names)) != len(names):
      raise ValueError(f"At most one fine-tuning entry per data set; got {names}.")


def preset(name: str, output_dir: str) -> StudyConfig:
  """The "quick" study (README main job: R8 with frozen MiniLM embeddings, 15 cells x 2 seeds, minutes on 2
  CPU cores) or the "full" one (R8 frozen then fine-tuned MiniLM for the baseline and the best frozen cell,
  Fashion-MNIST with a small CNN, 20 Newsgroups frozen then fine-tuned likewise; 3 seeds for the grids, 1 for
  fine-tuning; hours on 2 CPU cores).

  Raises:
    ValueError: For an unknown preset.
  """
  if name == "quick":
    return StudyConfig(
        output_dir=output_dir,
        datasets=[StudyDataset("reuters_r8", max_train_examples=1500, max_validation_examples=400,
                               max_test_examples=1200, train_steps=300, eval_every=100, batch_size=32)],
        seeds=(0, 1), hidden_widths=(128,), learning_rates=(1e-3, 3e-3))
  if name == "full":
    return StudyConfig(
        output_dir=output_dir,
        datasets=[StudyDataset("reuters_r8", train_steps=1500, eval_every=250),
                  StudyDataset("fashion_mnist", batch_size=64, train_steps=1500, eval_every=500,
                               max_validation_examples=2000),
                  StudyDataset("20newsgroups", train_steps=3000, eval_every=500)],
        seeds=(0, 1, 2), hidden_widths=(128,), learning_rates=(1e-3, 3e-3),
        finetune=[FinetuneConfig("reuters_r8"), FinetuneConfig("20newsgroups")])
  raise ValueError(f"Unknown preset {name!r}; allowed: {', '.join(PRESETS)}.")


@dataclasses.dataclass
class RunRecord:
  """One finished training run of the study.

  Attributes:
    dataset: Data set name.
    mode: "frozen" / "finetune" for text, "image" for images.
    loss: Loss name.
    interaction: Interaction name.
    hidden_width: MLP width.
    learning_rate: Learning rate.
    seed: Model seed.
    validation: Validation metrics at the best step.
    test: Test metrics of the best-on-validation model.
    model_dir: The run's folder.
    seconds: Training wall time.
  """

  dataset: str
  mode: str
  loss: str
  interaction: str
  hidden_width: int
  learning_rate: float
  seed: int
  validation: dict[str, float]
  test: dict[str, float]
  model_dir: str
  seconds: float


def _mode(dataset: StudyDataset) -> str:
  return dataset.text_mode if dataset.name in data_lib.TEXT_DATASETS else "image"


def data_config(dataset: StudyDataset, validation_fraction: float, text_mode: str | None = None,
                max_seq_length: int | None = None) -> data_lib.DataConfig:
  return data_lib.DataConfig(
      dataset=dataset.name, text_mode=text_mode or dataset.text_mode, validation_fraction=validation_fraction,
      max_train_examples=dataset.max_train_examples, max_validation_examples=dataset.max_validation_examples,
      max_test_examples=dataset.max_test_examples, max_seq_length=max_seq_length or dataset.max_seq_length)


def run_config(study: StudyConfig, dataset: StudyDataset, loss: str, interaction: str, width: int, lr: float,
               seed: int, finetune: FinetuneConfig | None = None) -> train_lib.TrainConfig:
  """The TrainConfig of one run of the grid (or of a fine-tuned run when `finetune` is given)."""
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
  return train_lib.TrainConfig(
      model_dir=model_dir, data=data, model=model, optimizer=train_lib.OptimizerConfig(learning_rate=lr),
      batch_size=batch_size, train_steps=steps, eval_every=eval_every, checkpoint_every=0,
      steps_per_execution=spe, best_metric=study.tuning_metric, strategy="auto", seed=seed, export=False,
      tensorboard=False, verbose=0, baselines=False)  # The study fits the baselines once per data set.


def _record(config: train_lib.TrainConfig, result: train_lib.TrainResult, dataset: str, mode: str) -> RunRecord:
  return RunRecord(
      dataset=dataset, mode=mode, loss=config.model.loss.type, interaction=config.model.interaction.type,
      hidden_width=config.model.interaction.hidden_units[0], learning_rate=config.optimizer.learning_rate,
      seed=config.seed, validation=result.validation_metrics,
      test=result.test_report["metrics"] if result.test_report else {}, model_dir=config.model_dir,
      seconds=result.seconds)


def _log(message: str) -> None:
  print(f"[study {time.strftime('%H:%M:%S')}] {message}", flush=True)


class StudyRunner:
  """Runs the grid, tuning each cell on validation, and keeps every finished run in results.json."""

  def __init__(self, config: StudyConfig):
    self.config = config
    self.records: list[RunRecord] = []
    self.failures: list[dict[str, str]] = []
    self._data: dict[tuple, data_lib.PreparedData] = {}
    # Data set name -> `baselines.compute` report: fitted once, on the first prepared splits of the data set (every
    # mode shares the split: the same split seed, fraction and subsets).
    self.baselines: dict[str, dict[str, Any]] = {}
    # The runs of a cell (other seeds and learning rates) train one model, traced once (same numbers).
    self._models = model_reuse.ModelPool()

  def _prepared(self, config: train_lib.TrainConfig) -> data_lib.PreparedData:
    key = json.dumps(engine_configs.to_dict(config.data), sort_keys=True)
    if key not in self._data:
      if config.data.dataset in data_lib.TEXT_DATASETS:
        _log(f"preparing {config.data.dataset} ({config.data.text_mode}): converting MiniLM and embedding the "
             "texts on the first run (both cached on disk)...")
      start = time.time()
      self._data[key] = data_lib.prepare_data(config.data)
      mode = config.data.text_mode if config.data.dataset in data_lib.TEXT_DATASETS else "image"
      _log(f"prepared {config.data.dataset} ({mode}) in {time.time() - start:.0f}s: "
           f"{len(self._data[key].train)} train / {len(self._data[key].validation)} validation / "
           f"{len(self._data[key].test)} test")
      if self.config.baselines and config.data.dataset not in self.baselines:
        start = time.time()
        report = baselines_lib.compute_or_note(baselines_lib.BaselineConfig(),
                                               data_lib.embedding_view(self._data[key]), tuple(config.model.metric_ks))
        self.baselines[config.data.dataset] = report
        _log(f"baselines of {config.data.dataset} in {time.time() - start:.0f}s: " + "; ".join(
            f"{row['label']} top1err={row['metrics']['top_1_error']:.4f}" for row in report.get("rows", [])))
    return self._data[key]

  def run(self, config: train_lib.TrainConfig, dataset: str, mode: str) -> RunRecord | None:
    """Trains one run (or reads it back when finished); a failing run is logged and recorded, and the study
    goes on (hours of other runs are not lost to one error)."""
    try:
      result = train_lib.train(config, self._prepared(config), models=self._models)
    except Exception as e:  # pylint: disable=broad-except
      _log(f"FAILED {config.model_dir}: {type(e).__name__}: {e}")
      self.failures.append({"model_dir": config.model_dir, "error": f"{type(e).__name__}: {e}"})
      self.save()
      return None
    record = _record(config, result, dataset, mode)
    self.records.append(record)
    self.save()
    _log(f"{dataset}/{mode} {record.loss}+{record.interaction} w={record.hidden_width} lr={record.learning_rate:g} "
         f"seed={record.seed}: val {self.config.tuning_metric}={record.validation.get(self.config.tuning_metric, float('nan')):.4f} "
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
    tuning = [self.run(run_config(study, dataset, loss, interaction, w, lr, study.seeds[0]), dataset.name, mode)
              for w in study.hidden_widths for lr in study.learning_rates]
    tuning = [r for r in tuning if r is not None]
    if not tuning:
      return []
    better = (min if train_lib.metric_mode(study.tuning_metric) == "min" else max)
    best = better(tuning, key=lambda r: r.validation.get(study.tuning_metric, float("nan")))
    others = [self.run(run_config(study, dataset, loss, interaction, best.hidden_width, best.learning_rate, seed),
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


# --- Statistics and reporting --------------------------------------------------------------------------------


@dataclasses.dataclass
class CellSummary:
  """Mean and sample standard deviation (x100) of one metric of one cell over seeds.

  Attributes:
    values: Per-seed values x100.
    mean: Mean.
    std: Sample standard deviation (ddof=1; 0 for one seed).
  """

  values: list[float]
  mean: float
  std: float

  @classmethod
  def of(cls, values: list[float]) -> "CellSummary":
    array = np.asarray(values, np.float64) * 100.0
    statistics = SeedStatistics.of(array)
    return cls(array.tolist(), statistics.mean, statistics.std)


def welch_significant(a: CellSummary, b: CellSummary) -> bool | None:
  """Whether means differ by more than 2 standard errors of the difference (Welch): |m_a - m_b| >
  2 * sqrt(s_a^2 / n_a + s_b^2 / n_b). None when either side has fewer than two seeds."""
  if len(a.values) < 2 or len(b.values) < 2:
    return None
  standard_error = math.sqrt(a.std ** 2 / len(a.values) + b.std ** 2 / len(b.values))
  return abs(a.mean - b.mean) > 2.0 * standard_error


def summarize(records: list[RunRecord]) -> dict[tuple[str, str, str], dict[tuple[str, str], dict[str, CellSummary]]]:
  """{(dataset, mode): {(loss, interaction): {metric: CellSummary}}} of the test metrics."""
  grouped: dict[tuple, dict[tuple, list[RunRecord]]] = {}
  for r in records:
    grouped.setdefault((r.dataset, r.mode), {}).setdefault((r.loss, r.interaction), []).append(r)
  return {key: {cell: {m: CellSummary.of([r.test[m] for r in runs]) for m, _, _ in REPORTED_METRICS}
                for cell, runs in cells.items()}
          for key, cells in grouped.items()}


def _cell_text(summary: CellSummary, baseline: CellSummary | None, lower_is_better: bool, best: bool) -> str:
  text = f"{summary.mean:.2f} ± {summary.std:.2f}" if len(summary.values) > 1 else f"{summary.mean:.2f}"
  if best:
    text = f"**{text}**"
  if baseline is not None and summary is not baseline:
    significant = welch_significant(summary, baseline)
    if significant:
      improved = summary.mean < baseline.mean if lower_is_better else summary.mean > baseline.mean
      text += " ▲" if improved else " ▼"
  return text


def markdown_tables(records: list[RunRecord], losses: tuple[str, ...], interactions: tuple[str, ...],
                    baselines: dict[str, dict[str, Any]] | None = None) -> str:
  """One table per (data set, mode) in the layout of the paper's Tables 7-12 (mean ± std over seeds, x100), each
  followed by the data set's baselines outside Rank4Class (`baselines`, by data set name) and the line "best
  cell X vs best baseline Y"."""
  parts = []
  for (dataset, mode), cells in summarize(records).items():
    cell_losses = [name for name in losses if any(c[0] == name for c in cells)]
    cell_interactions = [i for i in interactions if any(c[1] == i for c in cells)]
    seeds = sorted({r.seed for r in records if (r.dataset, r.mode) == (dataset, mode)})
    parts.append(f"#### {dataset} ({mode}), {len(seeds)} seed(s)\n")
    header = "| Metric | Interaction | " + " | ".join(LOSS_LABELS[name] for name in cell_losses) + " |"
    parts += [header, "|" + "---|" * (2 + len(cell_losses))]
    baseline = cells.get(BASELINE)
    for metric, label, lower in REPORTED_METRICS:
      means = [s[metric].mean for s in cells.values()]
      best_mean = min(means) if lower else max(means)
      for i, interaction in enumerate(cell_interactions):
        row = [label if i == 0 else "", INTERACTION_LABELS[interaction]]
        for loss in cell_losses:
          summary = cells.get((loss, interaction), {}).get(metric)
          if summary is None:
            row.append("–")
          else:
            row.append(_cell_text(summary, baseline[metric] if baseline else None, lower,
                                  summary.mean == best_mean))
        parts.append("| " + " | ".join(row) + " |")
    parts.append("")
    if baselines and dataset in baselines:
      parts += baseline_table(baselines[dataset], cells)
  return "\n".join(parts)


def baseline_table(report: dict[str, Any], cells: dict[tuple[str, str], dict[str, CellSummary]]) -> list[str]:
  """Markdown lines: the baselines' test metrics (x100; one fit each, deterministic, so no spread) and the best
  Rank4Class cell (by mean test top-1 error) against the best baseline."""
  lines = baselines_lib.markdown_table(report, tuple((m, label) for m, label, _ in REPORTED_METRICS))
  if "skipped" in report:
    return [*lines, ""]
  best = baselines_lib.best_row(report)
  if best is not None and cells:
    cell, summary = min(cells.items(), key=lambda item: item[1]["top_1_error"].mean)
    difference = summary["top_1_error"].mean - 100 * best["metrics"]["top_1_error"]
    lines.append(f"Best Rank4Class cell ({LOSS_LABELS[cell[0]]} + {INTERACTION_LABELS[cell[1]]}) top-1 error "
                 f"{summary['top_1_error'].mean:.2f} vs best baseline ({best['label']}) "
                 f"{100 * best['metrics']['top_1_error']:.2f}: {'better' if difference < 0 else 'worse'} by "
                 f"{abs(difference):.2f} points.")
  lines.append("")
  return lines


def significance_rule() -> str:
  return ("Cells show mean ± sample std over seeds of the test metric x100, each seed's model chosen on the "
          "validation split. **Bold**: best mean in the block. ▲/▼: better/worse than the SoftmaxCE + dot "
          "baseline by more than 2 standard errors of the difference (Welch: |Δ| > 2·sqrt(s₁²/n₁ + s₂²/n₂)); "
          "no mark: within noise.")


def plot(records: list[RunRecord], losses: tuple[str, ...], interactions: tuple[str, ...],
         output_dir: str, baselines: dict[str, dict[str, Any]] | None = None) -> list[str]:
  """One PNG per (data set, mode): grouped bars (mean ± std over seeds) per metric, the data set's baselines
  outside Rank4Class as horizontal lines; returns the paths."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  paths = []
  for (dataset, mode), cells in summarize(records).items():
    cell_losses = [name for name in losses if any(c[0] == name for c in cells)]
    cell_interactions = [i for i in interactions if any(c[1] == i for c in cells)]
    figure, axes = plt.subplots(1, len(REPORTED_METRICS), figsize=(5 * len(REPORTED_METRICS), 4))
    width = 0.8 / max(len(cell_interactions), 1)
    for axis, (metric, label, lower) in zip(axes, REPORTED_METRICS, strict=True):
      for j, interaction in enumerate(cell_interactions):
        xs, means, stds = [], [], []
        for i, loss in enumerate(cell_losses):
          summary = cells.get((loss, interaction), {}).get(metric)
          if summary is not None:
            xs.append(i + (j - (len(cell_interactions) - 1) / 2) * width)
            means.append(summary.mean)
            stds.append(summary.std)
        axis.bar(xs, means, width, yerr=stds, capsize=2, label=INTERACTION_LABELS[interaction])
      axis.set_xticks(range(len(cell_losses)))
      axis.set_xticklabels([LOSS_LABELS[name] for name in cell_losses], rotation=30, ha="right", fontsize=8)
      axis.set_title(f"{label} ({'lower' if lower else 'higher'} is better)")
      values = [s[metric].mean for s in cells.values()]
      for k, row in enumerate((baselines or {}).get(dataset, {}).get("rows", [])):
        axis.axhline(100 * row["metrics"][metric], color=f"C{len(cell_interactions) + k}", linestyle="--",
                     linewidth=1, label=row["label"])
        if row["name"] != baselines_lib.MAJORITY:  # The axis spans the learned baselines; the majority may be off.
          values.append(100 * row["metrics"][metric])
      spread = max(values) - min(values)
      axis.set_ylim(max(0.0, min(values) - 2 * spread - 0.5), max(values) + 2 * spread + 0.5)
    axes[0].legend(fontsize=8)
    figure.suptitle(f"Rank4Class study: {dataset} ({mode}), test metrics x100, mean ± std over seeds")
    figure.tight_layout()
    path = os.path.join(output_dir, f"study_{dataset}_{mode}.png")
    with atomic_output(path, "wb") as f:
      figure.savefig(f, format="png", dpi=110)
    plt.close(figure)
    paths.append(path)
  return paths


def write_outputs(config: StudyConfig, chosen: list[RunRecord], all_records: list[RunRecord] | None = None,
                  failures: list[dict[str, str]] | None = None,
                  baselines: dict[str, dict[str, Any]] | None = None) -> tuple[str, list[str]]:
  """Writes results.md (tables with their baselines, the significance rule, the chosen hyper-parameters) and the
  plots."""
  os.makedirs(config.output_dir, exist_ok=True)
  tables = markdown_tables(chosen, config.losses, config.interactions, baselines)
  plots = plot(chosen, config.losses, config.interactions, config.output_dir, baselines)
  lines = [tables, significance_rule(), "", "Chosen hyper-parameters (tuned on validation with the first seed):",
           "", "| Data set | Mode | Loss | Interaction | Width | Learning rate | Mean run time (s) |",
           "|---|---|---|---|---|---|---|"]
  seen = set()
  for r in chosen:
    key = (r.dataset, r.mode, r.loss, r.interaction)
    if key in seen:
      continue
    seen.add(key)
    times = [x.seconds for x in chosen if (x.dataset, x.mode, x.loss, x.interaction) == key]
    lines.append(f"| {r.dataset} | {r.mode} | {LOSS_LABELS[r.loss]} | {INTERACTION_LABELS[r.interaction]} | "
                 f"{r.hidden_width} | {r.learning_rate:g} | {np.mean(times):.0f} |")
  if all_records is not None:
    lines += ["", f"Runs trained (tuning included): {len(all_records)}; total training time "
              f"{sum(r.seconds for r in all_records):.0f}s."]
  for failure in failures or []:
    lines.append(f"FAILED run {failure['model_dir']}: {failure['error']}")
  lines += ["", "Plots: " + ", ".join(os.path.basename(p) for p in plots), ""]
  path = os.path.join(config.output_dir, RESULTS_MD)
  with atomic_output(path) as f:
    f.write("\n".join(lines))
  return path, plots


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
