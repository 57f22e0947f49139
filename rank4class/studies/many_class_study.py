r"""The many-class study: full class lists vs sampled ones (each sampler) for SoftmaxCE and two ranking
losses, on WordNet's noun hypernyms (thousands of classes), frozen MiniLM embeddings, several seeds.

Every run trains `rank4class.training.train` on the same splits (validation carved from train; the test split
is scored over all classes: exact ranks, `full_class_evaluation`), so the table compares list construction
only. Full lists with the pairwise logistic or ApproxNDCG loss cost O(C^2) per instance (pairs, or approximate
ranks over all pairs) and are not run at thousands of classes: that cost is what sampled lists remove.

  rank4class-many-class-study --output_dir=out/many_classes --seeds=0,1 --train_steps=3000
  rank4class-many-class-study --output_dir=out/many_classes --parts=hard_negatives,scale --train_steps=2000

Writes `results.json` (every run) and `results.md` (mean ± std over seeds per loss and list construction),
then the two-stage comparison (seed 0: a full-softmax dot model retrieves M classes, a latent-cross model
trained on sampled lists re-ranks them: recall@M and metrics against the ranker scoring every class) into
`two_stage.json`, and the zero-shot comparison (seeds 0-2: a model whose classes are their texts, both towers
starting at the frozen embeddings' cosine, trained on the seen classes, ranks the 389 held-out classes by
their texts, against the nearest class text by frozen-embedding cosine) into `zero_shot.json` and
`zero_shot.md`.
"""

import dataclasses
import os
import sys

import numpy as np
import tensorflow as tf

from rank4class.evaluation import baselines as baselines_lib
from rank4class.inference import two_stage, zero_shot
from rank4class.modeling import class_encoders, class_sampling, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class.training import train as train_lib
from rank4class.training import training_data as data_lib
from rank4class_data import datasets
from rank4class_data.validation import write_json
from rank4class_encoders import text_embeddings
from rank4class_encoders import text_encoder as text_encoder_lib
from rank4class_engine.optimization import losses
from rank4class_engine.statistics import seed_statistics

DATASET = "wordnet_hypernyms"
# (loss, sampler or None for full lists, list size K); in_batch lists are the batch.
GRID = (
    (losses.SOFTMAX, None, None), (losses.SOFTMAX, class_sampling.UNIFORM, 64),
    (losses.SOFTMAX, class_sampling.LOG_UNIFORM, 64), (losses.SOFTMAX, class_sampling.EMPIRICAL, 64),
    (losses.SOFTMAX, class_sampling.IN_BATCH, None),
    (losses.APPROX_NDCG, class_sampling.UNIFORM, 64), (losses.APPROX_NDCG, class_sampling.IN_BATCH, None),
    (losses.PAIRWISE_LOGISTIC, class_sampling.UNIFORM, 64),
    (losses.PAIRWISE_LOGISTIC, class_sampling.IN_BATCH, None),
)


def _lists(sampler: str | None, k: int | None, batch_size: int) -> str:
  if sampler is None:
    return "full"
  return f"{sampler} K={k if k else batch_size}"


def run_config(output_dir: str, loss: str, sampler: str | None, k: int | None, seed: int, steps: int,
               batch_size: int, learning_rate: float, interaction: str = interactions.DOT,
               class_encoder: class_encoders.ClassEncoderConfig | None = None, export: bool = False,
               name: str | None = None, dataset: str = DATASET, hard_negatives: int = 0, width: int = 256,
               data: data_lib.DataConfig | None = None, validations: int = 4,
               shared_negatives: bool = False) -> train_lib.Rank4ClassTrainConfig:
  """One run: MLP (`width`) on frozen MiniLM embeddings, one-hot classes (or `class_encoder`), dot interaction
  (or `interaction`: latent cross / concat with two layers of `width`); `hard_negatives` of the K-1 negatives
  mined from the model (refreshed every 100 steps, 1,024 classes at a time); `validations` over the run."""
  data = data or data_lib.DataConfig(dataset=dataset, max_seq_length=64)
  dataset = data.dataset
  if name is None:
    hard = (f"-hard{hard_negatives}" if hard_negatives else "") + ("-shared" if shared_negatives else "")
    name = f"{loss}-{_lists(sampler, k, batch_size).replace(' ', '').replace('=', '')}{hard}-seed{seed}"
    name = (
      name if dataset == DATASET and interaction == interactions.DOT else f"{dataset}-{interaction}-{name}"
    )
  return train_lib.Rank4ClassTrainConfig(
      model_dir=os.path.join(output_dir, "runs", name), data=data,
      model=model_lib.Rank4ClassConfig(
          instance_encoder=encoders.InstanceEncoderConfig(type="mlp",
                                                          mlp=encoders.MlpEncoderConfig((width,))),
          class_encoder=class_encoder or class_encoders.ClassEncoderConfig(type=class_encoders.ONE_HOT),
          interaction=interactions.InteractionConfig(type=interaction, hidden_units=(width, width)),
          loss=losses.LossConfig(type=loss),
          sampling=class_sampling.SamplingConfig(sampler, (k or 64) - 1, hard_negatives=hard_negatives,
                                                 shared_negatives=shared_negatives)),
      optimizer=train_lib.OptimizerConfig(type="adam", learning_rate=learning_rate),
      run=train_lib.RunConfig(batch_size=batch_size, train_steps=steps,
                              eval_every=max(steps // validations, 1),
                              best_metric="top_1_error", seed=seed, verbose=0),
      # The grid's baselines are fitted once (`run`); it compares trained models, never a regression in their
      # place; its zero-shot rows measure the run's own model (`zero_shot_study`).
      outputs=train_lib.OutputsConfig(export=export, baselines=False, linear_candidate=False,
                                      zero_shot_holdout=0.0))


def run(output_dir: str, seeds: list[int], steps: int, batch_size: int = 64, learning_rate: float = 1e-3,
        stream=None) -> list[dict]:
  """Runs the grid (finished runs are read back) and writes results.json and results.md."""
  stream = stream or sys.stderr
  data = data_lib.prepare_data(data_lib.DataConfig(dataset=DATASET, max_seq_length=64))  # Embedded once.
  records = [_record(run_config(output_dir, loss, sampler, k, seed, steps, batch_size, learning_rate), data,
                     stream, loss=loss, lists=_lists(sampler, k, batch_size), seed=seed)
             for loss, sampler, k in GRID for seed in seeds]
  baselines = baselines_lib.compute_or_note(baselines_lib.BaselineConfig(), data)
  return _write(output_dir, "results", records, ("loss", "lists"), baselines)


def _record(config: train_lib.Rank4ClassTrainConfig, data, stream, **fields) -> dict:
  result = train_lib.train(config, data)
  test = result.test_report["metrics"]
  record = {**fields, "seconds": result.seconds, "num_classes": len(data.class_names),
            "train_examples_per_second": result.examples_per_second,
            **{m: test[m] for m in ("top_1_error", "top_5_error", "ndcg_5", "mrr")}}
  stream.write(f"{fields}: top-1 error {test['top_1_error']:.4f}, {record['seconds']:.1f}s\n")
  return record


def _write(output_dir: str, stem: str, records: list[dict], by: tuple[str, ...],
           baselines: dict | None = None) -> list[dict]:
  """Writes `<stem>.json` (every run) and `<stem>.md` (`markdown_table` grouped `by`, then the `baselines`
  report's table when given: `rank4class.evaluation.baselines`); returns `records`."""
  write_json(os.path.join(output_dir, f"{stem}.json"), records)
  with open(os.path.join(output_dir, f"{stem}.md"), "w", encoding="utf-8") as f:
    f.write(markdown_table(records, by=by))
    if baselines is not None:
      f.write("\n" + "\n".join(baselines_lib.markdown_table(baselines, BASELINE_METRICS)) + "\n")
  if baselines is not None:
    write_json(os.path.join(output_dir, f"{stem}.baselines.json"), baselines)
  return records


BASELINE_METRICS = (("top_1_error", "top-1 error"), ("top_5_error", "top-5 error"), ("ndcg_5", "NDCG@5"),
                    ("mrr", "MRR"))


# The scale grid's data: every hypernym (14,823 classes); 2,000 validation and 3,000 test glosses, so that
# ranking all classes through an MLP interaction (C x width^2 per instance) stays within minutes on 2 cores.
SCALE_DATA = data_lib.DataConfig(dataset=datasets.WORDNET_HYPERNYMS_ALL, max_seq_length=64,
                                 max_validation_examples=2000, max_test_examples=3000)
SCALE_WIDTH = 64


def scale_study(output_dir: str, steps: int, batch_size: int = 64, learning_rate: float = 1e-3,
                stream=None) -> list[dict]:
  """Every loss x interaction on 14,823 classes (`SCALE_DATA`), uniform lists of 64, width 64, seed 0, two
  validations, plus the full softmax (dot) for reference; writes scale.json and scale.md."""
  stream = stream or sys.stderr
  data = data_lib.prepare_data(SCALE_DATA)
  common = {"data": SCALE_DATA, "width": SCALE_WIDTH, "validations": 2}
  records = [_record(run_config(output_dir, losses.SOFTMAX, None, None, 0, steps, batch_size, learning_rate,
                                name="scale-dot-softmax-full", **common), data, stream, loss=losses.SOFTMAX,
                     lists="full", interaction=interactions.DOT, seed=0)]
  for interaction in interactions.INTERACTION_NAMES:
    for loss in losses.LOSS_NAMES:
      config = run_config(output_dir, loss, class_sampling.UNIFORM, 64, 0, steps, batch_size, learning_rate,
                          interaction, name=f"scale-{interaction}-{loss}-uniformK64", **common)
      records.append(_record(config, data, stream, loss=loss, lists="uniform K=64", interaction=interaction,
                             seed=0))
  return _write(output_dir, "scale", records, ("interaction", "loss", "lists"))


def hard_negative_study(output_dir: str, seeds: list[int], steps: int, batch_size: int = 64,
                        learning_rate: float = 1e-3, hard: int = 16, stream=None) -> list[dict]:
  """Softmax on uniform lists of 64: per-instance negatives, `hard` of them mined (dot: mining scores 1,024
  classes x C per refresh, a matrix product), or negatives shared by the batch; on both WordNet tasks; writes
  hard_negatives.json and hard_negatives.md."""
  stream = stream or sys.stderr
  records = []
  for dataset in (DATASET, datasets.WORDNET_HYPERNYMS_ALL):
    data = data_lib.prepare_data(data_lib.DataConfig(dataset=dataset, max_seq_length=64))
    for interaction in (interactions.DOT,):
      for num_hard, shared in ((0, False), (hard, False), (0, True)):
        for seed in seeds:
          config = run_config(output_dir, losses.SOFTMAX, class_sampling.UNIFORM, 64, seed, steps, batch_size,
                              learning_rate, interaction, dataset=dataset, hard_negatives=num_hard,
                              shared_negatives=shared)
          lists = (f"{interaction}, uniform K=64" + (f" ({num_hard} hard)" if num_hard else "")
                   + (" (shared by the batch)" if shared else ""))
          records.append(_record(config, data, stream, loss=losses.SOFTMAX, lists=lists, dataset=dataset,
                                 seed=seed))
  return _write(output_dir, "hard_negatives", records, ("dataset", "lists"))


def _trained(config: train_lib.Rank4ClassTrainConfig, data) -> tuple[model_lib.Rank4ClassModel, dict]:
  result = train_lib.train(config, data)
  return tf.keras.models.load_model(result.export_dir), result.test_report["metrics"]


# M of the first stage's recall@M curve (one exact pass of the retriever gives them all).
RECALL_CURVE = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


def two_stage_study(output_dir: str, steps: int, batch_size: int = 64, learning_rate: float = 1e-3,
                    candidates: tuple[int, ...] = (10, 20, 50, 200)) -> dict:
  """Dot retriever (full softmax) + latent-cross ranker (softmax on uniform lists of 64), seed 0: the
  retriever's recall@M curve (`RECALL_CURVE`), and the two-stage metrics at each of `candidates` against the
  ranker over every class."""
  data = data_lib.prepare_data(data_lib.DataConfig(dataset=DATASET, max_seq_length=64))
  retriever, _ = _trained(run_config(output_dir, losses.SOFTMAX, None, None, 0, steps, batch_size,
                                     learning_rate, export=True, name="two_stage-retriever-dot-full"), data)
  ranker, _ = _trained(run_config(output_dir, losses.SOFTMAX, class_sampling.UNIFORM, 64, 0, steps,
                                  batch_size, learning_rate, interactions.LATENT_CROSS, export=True,
                                  name="two_stage-ranker-latent_cross-uniformK64"), data)
  test = data.test.make_dataset(256, shuffle=False, repeat=False, seed=0)
  reports = {m: two_stage.two_stage_report(retriever, ranker, test, m) for m in candidates}
  retriever_alone = two_stage.two_stage_report(retriever, retriever, test, candidates[0])["exhaustive"]
  curve = two_stage.recall_curve(retriever, test, RECALL_CURVE)
  out = {"retriever_exhaustive": retriever_alone, "recall_at_m": curve, "by_num_candidates": reports}
  write_json(os.path.join(output_dir, "two_stage.json"), out)
  return out


# The zero-shot method: both towers start at MiniLM's space (identity-initialised residual projections over
# unit-length embeddings), a cosine interaction at this temperature, no per-class bias: the untrained model is
# the nearest- class-text baseline, and training on the seen classes moves it only as far as the loss asks; in
# small steps (a tenth of the study's learning rate: on seed 0, 1e-4 gave 31.1% top-1 error on the unseen
# classes, 3e-4 31.2%, 1e-3 33.8%, against the baseline's 37.3%).
ZERO_SHOT_SEEDS = (0, 1, 2)
ZERO_SHOT_TEMPERATURE = train_lib.COSINE_TOWERS_TEMPERATURE
ZERO_SHOT_LEARNING_RATE_SCALE = 0.1
ZERO_SHOT_METRICS = ("top_1_error", "top_5_error", "ndcg_5", "mrr")


def zero_shot_config(output_dir: str, seed: int, steps: int, batch_size: int, learning_rate: float,
                     text: text_encoder_lib.TextEncoderConfig, class_texts: list[str],
                     width: int = 256) -> train_lib.Rank4ClassTrainConfig:
  """The zero-shot run: classes are their texts through the frozen `text` encoder, l2-normalised, then `x + W
  x` (`W` initialised at zeros), unit length; instances are frozen embeddings through `x + MLP(x)` (one hidden
  layer of `width`, the output layer initialised at zeros), unit length; a dot product divided by
  `ZERO_SHOT_TEMPERATURE` (a cosine), no class bias; softmax on uniform lists of 64."""
  config = run_config(output_dir, losses.SOFTMAX, class_sampling.UNIFORM, 64, seed, steps, batch_size,
                      learning_rate,
                      class_encoder=class_encoders.ClassEncoderConfig(type=class_encoders.METADATA),
                      export=True, name=f"zero_shot-residual_cosine-uniformK64-seed{seed}", width=width)
  config.model = train_lib.with_cosine_towers(config.model, text, list(class_texts))
  return config


def zero_shot_study(output_dir: str, steps: int, batch_size: int = 64, learning_rate: float = 1e-3,
                    seeds: tuple[int, ...] = ZERO_SHOT_SEEDS) -> dict:
  """`zero_shot_config` trained on the seen classes per seed (Adam at `learning_rate` x
  `ZERO_SHOT_LEARNING_RATE_SCALE`), then ranking the held-out classes by their texts, next to the nearest
  class text (cosine of frozen MiniLM embeddings; untrained, the same every seed); writes zero_shot.json (a
  row per seed, mean and std) and zero_shot.md."""
  data_config = data_lib.DataConfig(dataset=DATASET, max_seq_length=64)
  data = data_lib.prepare_data(data_config)
  task = datasets.hypernym_task()
  frozen = data_lib.frozen_text_encoder(data_config, data.text_handles)
  instances = text_embeddings.embed_texts(list(task.zero_shot_texts), frozen)
  class_vectors = text_embeddings.embed_texts(list(task.zero_shot_class_texts), frozen)
  labels = np.asarray(task.zero_shot_labels)
  baseline = zero_shot.nearest_text_baseline(instances, class_vectors, labels)["metrics"]
  rows = []
  for seed in seeds:
    model, seen = _trained(zero_shot_config(output_dir, seed, steps, batch_size,
                                            learning_rate * ZERO_SHOT_LEARNING_RATE_SCALE, frozen,
                                            list(task.class_texts)), data)
    trained = zero_shot.zero_shot_report(model, instances, labels,
                                         list(task.zero_shot_class_texts))["metrics"]
    rows.append({"seed": seed, "trained": trained, "nearest_class_text": baseline, "seen_classes_test": seen})
  summary = {kind: {m: dataclasses.asdict(seed_statistics.SeedStatistics.of([r[kind][m] for r in rows]))
                    for m in ZERO_SHOT_METRICS}
             for kind in ("trained", "nearest_class_text", "seen_classes_test")}
  out = {"method": "residual cosine towers from MiniLM's space (zero_shot_config)", "steps": steps,
         "learning_rate": learning_rate * ZERO_SHOT_LEARNING_RATE_SCALE,
         "num_unseen_classes": len(task.zero_shot_class_texts), "num_instances": int(len(labels)),
         "temperature": ZERO_SHOT_TEMPERATURE, "runs": rows, "summary": summary}
  write_json(os.path.join(output_dir, "zero_shot.json"), out)
  with open(os.path.join(output_dir, "zero_shot.md"), "w", encoding="utf-8") as f:
    f.write(zero_shot_table(rows))
  return out


def zero_shot_table(rows: list[dict]) -> str:
  """Per seed and mean ± std (x100): the trained model and the nearest class text, ranking the unseen
  classes."""
  lines = ["| ranking the unseen classes | seed | top-1 error | top-5 error | NDCG@5 | MRR |",
           "|---|---:|---:|---:|---:|---:|"]
  for kind, label in (("trained", "trained model"), ("nearest_class_text", "nearest class text (untrained)")):
    for r in rows:
      lines.append(f"| {label} | {r['seed']} | "
                   + " | ".join(f"{100 * r[kind][m]:.2f}" for m in ZERO_SHOT_METRICS) + " |")
    lines.append(f"| {label} | mean ± std | " + " | ".join(
        seed_statistics.SeedStatistics.of([100 * r[kind][m] for r in rows]).format()
        for m in ZERO_SHOT_METRICS)
                 + " |")
  return "\n".join(lines) + "\n"


def markdown_table(records: list[dict], by: tuple[str, ...] = ("loss", "lists")) -> str:
  """Mean ± std over seeds (x100) per group of the `by` fields, with seconds per run."""
  classes = sorted({r["num_classes"] for r in records})
  lines = [f"WordNet noun hypernyms, {' / '.join(f'{c:,}' for c in classes)} classes, exact ranks over all "
           f"classes; mean ± std over {len({r['seed'] for r in records})} seeds (x100).", "",
           f"| {' | '.join(by)} | top-1 error | top-5 error | NDCG@5 | MRR | seconds / run |",
           f"|{'---|' * len(by)}---:|---:|---:|---:|---:|"]
  groups: dict[tuple[str, ...], list[dict]] = {}
  for r in records:
    groups.setdefault(tuple(r[field] for field in by), []).append(r)
  for key, group in groups.items():
    cells = [seed_statistics.SeedStatistics.of([100 * r[m] for r in group]).format()
             for m in ("top_1_error", "top_5_error", "ndcg_5", "mrr")]
    lines.append(f"| {' | '.join(key)} | {' | '.join(cells)} | "
                 f"{np.mean([r['seconds'] for r in group]):.1f} |")
  return "\n".join(lines) + "\n"
