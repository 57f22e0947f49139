r"""The many-class study: full class lists vs sampled ones (each sampler) for SoftmaxCE and two ranking losses,
on WordNet's noun hypernyms (thousands of classes), frozen MiniLM embeddings, several seeds.

Every run trains `rank4class.train` on the same splits (validation carved from train; the test split is scored
over all classes: exact ranks, `full_class_evaluation`), so the table compares list construction only.
Full lists with the pairwise logistic or ApproxNDCG loss cost O(C^2) per instance (pairs, or approximate ranks
over all pairs) and are not run at thousands of classes: that cost is what sampled lists remove.

  python -m rank4class.many_class_study --output_dir=out/many_classes --seeds=0,1 --train_steps=3000

Writes `results.json` (every run) and `results.md` (mean ± std over seeds per loss and list construction),
then (seed 0) the two-stage comparison (a full-softmax dot model retrieves M classes, a latent-cross model
trained on sampled lists re-ranks them: recall@M and metrics against the ranker scoring every class) and the
zero-shot comparison (a model whose classes are their texts, trained on the seen classes, ranks the 389 held-out
classes by their texts, against the nearest class text by frozen-embedding cosine), into `two_stage.json`,
`zero_shot.json` and `results.md`.
"""

import json
import os
import sys
import time

import numpy as np
import tensorflow as tf
from absl import flags

from rank4class import class_encoders, class_sampling, encoders, interactions, two_stage, zero_shot
from rank4class import model as model_lib
from rank4class import train as train_lib
from rank4class import training_data as data_lib
from rank4class_data import datasets
from rank4class_data.validation import write_json
from rank4class_encoders import text_embeddings
from rank4class_engine import cli, losses

DATASET = "wordnet_hypernyms"
# (loss, sampler or None for full lists, list size K); in_batch lists are the batch.
GRID = (
    (losses.SOFTMAX, None, None), (losses.SOFTMAX, class_sampling.UNIFORM, 64),
    (losses.SOFTMAX, class_sampling.LOG_UNIFORM, 64), (losses.SOFTMAX, class_sampling.EMPIRICAL, 64),
    (losses.SOFTMAX, class_sampling.IN_BATCH, None),
    (losses.APPROX_NDCG, class_sampling.UNIFORM, 64), (losses.APPROX_NDCG, class_sampling.IN_BATCH, None),
    (losses.PAIRWISE_LOGISTIC, class_sampling.UNIFORM, 64), (losses.PAIRWISE_LOGISTIC, class_sampling.IN_BATCH, None),
)


def _lists(sampler: str | None, k: int | None, batch_size: int) -> str:
  if sampler is None:
    return "full"
  return f"{sampler} K={k if k else batch_size}"


def run_config(output_dir: str, loss: str, sampler: str | None, k: int | None, seed: int, steps: int,
               batch_size: int, learning_rate: float, interaction: str = interactions.DOT,
               class_encoder: class_encoders.ClassEncoderConfig | None = None, export: bool = False,
               name: str | None = None) -> train_lib.TrainConfig:
  """One run: MLP (256) on frozen MiniLM embeddings, one-hot classes (or `class_encoder`), dot interaction (or
  `interaction`: latent cross with two layers of 256)."""
  name = name or f"{loss}-{_lists(sampler, k, batch_size).replace(' ', '').replace('=', '')}-seed{seed}"
  return train_lib.TrainConfig(
      model_dir=os.path.join(output_dir, "runs", name), data=data_lib.DataConfig(dataset=DATASET, max_seq_length=64),
      model=model_lib.Rank4ClassConfig(
          instance_encoder=encoders.InstanceEncoderConfig(type="mlp", mlp=encoders.MlpEncoderConfig((256,))),
          class_encoder=class_encoder or class_encoders.ClassEncoderConfig(type=class_encoders.ONE_HOT),
          interaction=interactions.InteractionConfig(type=interaction, hidden_units=(256, 256)),
          loss=losses.LossConfig(type=loss),
          sampling=class_sampling.SamplingConfig(sampler, (k or 64) - 1)),
      optimizer=train_lib.OptimizerConfig(type="adam", learning_rate=learning_rate), batch_size=batch_size,
      train_steps=steps, eval_every=max(steps // 4, 1), best_metric="top_1_error", seed=seed, export=export,
      verbose=0)


def run(output_dir: str, seeds: list[int], steps: int, batch_size: int = 64, learning_rate: float = 1e-3,
        stream=None) -> list[dict]:
  """Runs the grid (finished runs are read back) and writes results.json and results.md."""
  stream = stream or sys.stderr
  data = data_lib.prepare_data(data_lib.DataConfig(dataset=DATASET, max_seq_length=64))  # Embedded once.
  records = []
  for loss, sampler, k in GRID:
    for seed in seeds:
      config = run_config(output_dir, loss, sampler, k, seed, steps, batch_size, learning_rate)
      start = time.perf_counter()
      result = train_lib.train(config, data)
      test = result.test_report["metrics"]
      records.append({"loss": loss, "lists": _lists(sampler, k, batch_size), "seed": seed,
                      "seconds": time.perf_counter() - start, "num_classes": len(data.class_names),
                      **{m: test[m] for m in ("top_1_error", "top_5_error", "ndcg_5", "mrr")}})
      stream.write(f"{loss} {records[-1]['lists']} seed {seed}: top-1 error {test['top_1_error']:.4f}, "
                   f"{records[-1]['seconds']:.1f}s\n")
  write_json(os.path.join(output_dir, "results.json"), records)
  with open(os.path.join(output_dir, "results.md"), "w", encoding="utf-8") as f:
    f.write(markdown_table(records))
  return records


def _trained(config: train_lib.TrainConfig, data) -> tuple[model_lib.Rank4ClassModel, dict]:
  result = train_lib.train(config, data)
  return tf.keras.models.load_model(result.export_dir), result.test_report["metrics"]


def two_stage_study(output_dir: str, steps: int, batch_size: int = 64, learning_rate: float = 1e-3,
                    candidates: tuple[int, ...] = (10, 50, 200)) -> dict:
  """Dot retriever (full softmax) + latent-cross ranker (softmax on uniform lists of 64), seed 0."""
  data = data_lib.prepare_data(data_lib.DataConfig(dataset=DATASET, max_seq_length=64))
  retriever, _ = _trained(run_config(output_dir, losses.SOFTMAX, None, None, 0, steps, batch_size, learning_rate,
                                     export=True, name="two_stage-retriever-dot-full"), data)
  ranker, _ = _trained(run_config(output_dir, losses.SOFTMAX, class_sampling.UNIFORM, 64, 0, steps, batch_size,
                                  learning_rate, interactions.LATENT_CROSS, export=True,
                                  name="two_stage-ranker-latent_cross-uniformK64"), data)
  test = data.test.make_dataset(256, shuffle=False, repeat=False, seed=0)
  reports = {m: two_stage.two_stage_report(retriever, ranker, test, m) for m in candidates}
  retriever_alone = two_stage.two_stage_report(retriever, retriever, test, candidates[0])["exhaustive"]
  out = {"retriever_exhaustive": retriever_alone, "by_num_candidates": reports}
  write_json(os.path.join(output_dir, "two_stage.json"), out)
  return out


def zero_shot_study(output_dir: str, steps: int, batch_size: int = 64, learning_rate: float = 1e-3) -> dict:
  """Classes as their texts (frozen MiniLM + a trained projection), softmax on uniform lists of 64, seed 0."""
  data_config = data_lib.DataConfig(dataset=DATASET, max_seq_length=64)
  data = data_lib.prepare_data(data_config)
  task = datasets.hypernym_task()
  frozen = data_lib.frozen_text_encoder(data_config, data.text_handles)
  metadata = class_encoders.ClassEncoderConfig(type=class_encoders.METADATA, metadata=class_encoders.MetadataClassEncoderConfig(
      text=frozen, class_texts=list(task.class_texts), output_dim=256))
  model, seen = _trained(run_config(output_dir, losses.SOFTMAX, class_sampling.UNIFORM, 64, 0, steps, batch_size,
                                    learning_rate, class_encoder=metadata, export=True,
                                    name="zero_shot-metadata-uniformK64"), data)
  instances = text_embeddings.embed_texts(list(task.zero_shot_texts), frozen)
  class_vectors = text_embeddings.embed_texts(list(task.zero_shot_class_texts), frozen)
  labels = np.asarray(task.zero_shot_labels)
  out = {"seen_classes_test": seen,
         "zero_shot": zero_shot.zero_shot_report(model, instances, labels, list(task.zero_shot_class_texts)),
         "nearest_class_text": zero_shot.nearest_text_baseline(instances, class_vectors, labels)}
  write_json(os.path.join(output_dir, "zero_shot.json"), out)
  return out


def markdown_table(records: list[dict]) -> str:
  """Mean ± std over seeds (x100) per loss and list construction, with seconds per run."""
  lines = [f"WordNet noun hypernyms, {records[0]['num_classes']:,} classes, exact ranks over all classes; "
           f"mean ± std over {len({r['seed'] for r in records})} seeds (x100).", "",
           "| loss | training lists | top-1 error | top-5 error | NDCG@5 | MRR | seconds / run |",
           "|---|---|---:|---:|---:|---:|---:|"]
  groups: dict[tuple[str, str], list[dict]] = {}
  for r in records:
    groups.setdefault((r["loss"], r["lists"]), []).append(r)
  for (loss, lists), group in groups.items():
    cells = [f"{100 * np.mean([r[m] for r in group]):.2f} ± {100 * np.std([r[m] for r in group]):.2f}"
             for m in ("top_1_error", "top_5_error", "ndcg_5", "mrr")]
    lines.append(f"| {loss} | {lists} | {' | '.join(cells)} | {np.mean([r['seconds'] for r in group]):.1f} |")
  return "\n".join(lines) + "\n"


PROGRAM = "rank4class-many-class-study"
FLAGS = flags.FlagValues()  # Its own flags, so several binaries can be imported in one process.
define = cli.FlagDefiner(FLAGS)
define.string("output_dir", "many_class_study", "Folder for runs, results.json and results.md.")
define.list("seeds", ["0", "1"], "Model seeds.")
define.integer("train_steps", 3000, "Training steps per run.")
define.integer("batch_size", 64, "Batch size (the in-batch lists' size).")
define.float("learning_rate", 1e-3, "Adam learning rate.")
parse_flags = cli.make_flags_parser(FLAGS, PROGRAM, __doc__, lambda f: cli.int_tuple("seeds", f.seeds))


def main(argv):
  del argv
  records = run(FLAGS.output_dir, list(cli.int_tuple("seeds", FLAGS.seeds)), FLAGS.train_steps, FLAGS.batch_size,
                FLAGS.learning_rate)
  print(markdown_table(records))
  print(json.dumps(two_stage_study(FLAGS.output_dir, FLAGS.train_steps, FLAGS.batch_size, FLAGS.learning_rate),
                   indent=1, default=str))
  print(json.dumps(zero_shot_study(FLAGS.output_dir, FLAGS.train_steps, FLAGS.batch_size, FLAGS.learning_rate),
                   indent=1, default=str))
  print(json.dumps({"results": os.path.join(FLAGS.output_dir, "results.json")}))


if __name__ == "__main__":
  cli.run(main, parse_flags)
