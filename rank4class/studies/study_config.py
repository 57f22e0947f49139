"""The Rank4Class study's settings (Tables 7-12): the paper's grid of losses x interactions, the data sets and
their training, fine-tuning, the "quick" and "full" presets, and the record of one finished run."""

import dataclasses

from rank4class.modeling import class_encoders as class_encoders_lib
from rank4class.modeling import interactions as interactions_lib
from rank4class.training import training_data as data_lib
from rank4class_data.validation import check_choice, check_range
from rank4class_engine.optimization import losses as losses_lib

# The paper's grid (App. D): five losses x three interactions.
LOSSES = (losses_lib.SOFTMAX, losses_lib.PAIRWISE_LOGISTIC, losses_lib.APPROX_NDCG,
          losses_lib.GUMBEL_APPROX_NDCG, losses_lib.MSE)
INTERACTIONS = (interactions_lib.DOT, interactions_lib.LATENT_CROSS, interactions_lib.CONCAT)
# The reference cell of the significance marks and of fine-tuning's "baseline" cell.
BASELINE = (losses_lib.SOFTMAX, interactions_lib.DOT)
PRESETS = ("quick", "full")
RESULTS_JSON = "results.json"


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
    check_choice("dataset", self.name, data_lib.DATASETS)


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

  def __post_init__(self):
    check_choice("dataset", self.dataset, data_lib.TEXT_DATASETS)  # Fine-tuning needs a text data set.


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
    baselines: Fit the baselines outside Rank4Class (`rank4class.evaluation.baselines`: majority class,
      TF-IDF + logistic regression, logistic regression on the frozen embeddings or pixels) once per data set,
      on the same splits, and report them beside the grid in the tables and plots.
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
  check_choice("preset", name, PRESETS)
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
