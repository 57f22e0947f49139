"""The training engine against a bare Keras `fit` for the pairwise margin model, on cached-embedding-sized
inputs.

Run: python bench/pairwise_engine_throughput.py [--steps=1000] [--repeats=3]

Model: `pairwise_train.training_model` as `pairwise-train --encoder=precomputed` builds it: 384-d float items
(the size of cached MiniLM embeddings), the paper's context-aggregating MLP head, margin loss, AdamW, group
batching (4 lists of 20 items a step, all 190 pairs of each list formed in-graph); 100 groups of 20 training
items with grades 0-2 from a fixed random linear problem, 25 validation groups. Rows, each a fresh model in a
process-warm repetition (the first repetition is dropped):
  bare fit        `TrainingModel.fit(steps_per_epoch=steps, epochs=1)` with the engine's chosen
                  steps_per_execution (same for all rows), no callbacks, no validation.
  engine, bare    `trainer.fit` without validation, checkpoints or TensorBoard.
  engine, full    `trainer.fit` as `pairwise_train.train` runs it: validation (`evaluation.evaluate`: NDCG@10,
                  MAP, MRR, pair accuracies, Kendall tau on the validation lists) every --eval_every steps,
                  best weights on pair_accuracy_raw, checkpoints at validations, TensorBoard, progress log.
Wall seconds include tracing, as in a real run; the ratio is bare fit seconds / variant seconds (relative
throughput); "fixed cost" is a variant's seconds minus the steps' share at the bare fit's steady rate (a
second `fit` call on the same model).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import ratio_table  # noqa: E402  (bench/ is sys.path[0] when this file runs)

import pairwise  # noqa: E402,F401  (before any tf.keras use: selects Keras 2 on the current stack)
from pairwise.margin import evaluation, pairwise_train  # noqa: E402
from pairwise.margin.configs import (  # noqa: E402
    EncoderConfig,
    PairwiseConfig,
    PairwiseTrainConfig,
    default_optimizer,
)
from rank4class_data import stack  # noqa: E402
from rank4class_data.ranking.grouped_items import GroupedItems  # noqa: E402
from rank4class_engine.loop import trainer  # noqa: E402

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf  # noqa: E402

DIM, GROUP_SIZE, LISTS_PER_BATCH = 384, 20, 4


def _items(num_groups: int, seed: int) -> GroupedItems:
  rng = np.random.default_rng(seed)
  direction = np.random.default_rng(0).normal(size=DIM)
  features = rng.normal(size=[num_groups * GROUP_SIZE, DIM]).astype(np.float32)
  signal = features @ direction / np.sqrt(DIM) + rng.normal(size=len(features))
  grades = np.digitize(signal, np.quantile(signal, [1 / 3, 2 / 3])).astype(np.float64)
  return GroupedItems(features=features, labels=grades,
                      group_ids=np.repeat(np.arange(num_groups), GROUP_SIZE))


def _config(steps: int) -> PairwiseConfig:
  return PairwiseConfig(encoder=EncoderConfig(kind="precomputed"),
                        train=PairwiseTrainConfig(list_size=GROUP_SIZE, lists_per_batch=LISTS_PER_BATCH,
                                                  train_steps=steps,
                                                  optimizer=replace(default_optimizer(), learning_rate=1e-3)))


def _model(config: PairwiseConfig, items: GroupedItems):
  tf.keras.utils.set_random_seed(0)
  return pairwise_train.training_model(config, items, tf.distribute.get_strategy())


def _time(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
  parser.add_argument("--steps", type=int, default=1000)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--eval_every", type=int, default=100)
  args = parser.parse_args(argv)
  train_items, validation_items = _items(100, seed=1), _items(25, seed=2)
  config = _config(args.steps)

  def dataset():
    return pairwise_train.training_dataset(train_items, config.train, args.steps)

  load = os.getloadavg()
  results: dict[str, list[float]] = {"bare fit": [], "engine, bare": [], "engine, full": []}
  spe_used, steady, accuracy = [], [], []
  for repeat in range(args.repeats + 1):
    with tempfile.TemporaryDirectory() as root:
      full = trainer.EngineConfig(run_dir=os.path.join(root, "full"), train_steps=args.steps,
                                  eval_every=args.eval_every, checkpoint_every=args.eval_every,
                                  best_metric="pair_accuracy_raw",
                                  global_batch_size=LISTS_PER_BATCH, verbose=0)
      ranker, model = _model(config, train_items)

      def validate(unused_model, ranker=ranker):
        return evaluation.scalars(evaluation.evaluate(ranker, validation_items, config.eval))

      def run_full(model=model, full=full, validate=validate):
        result = trainer.fit(model, dataset(), full, validate=validate)
        spe_used.append(result.steps_per_execution)
        accuracy.append(result.best_value)

      seconds_full = _time(run_full)
      spe = spe_used[-1]
      lean = trainer.EngineConfig(run_dir=os.path.join(root, "lean"), train_steps=args.steps,
                                  eval_every=args.eval_every, checkpoint_every=0,
                                  global_batch_size=LISTS_PER_BATCH,
                                  steps_per_execution=spe, tensorboard=False, verbose=0)
      _, model = _model(config, train_items)
      seconds_lean = _time(lambda m=model, lean=lean: trainer.fit(m, dataset(), lean))
      _, model = _model(config, train_items)
      model.steps_per_execution = spe
      seconds_bare = _time(lambda m=model: m.fit(dataset(), steps_per_epoch=args.steps, epochs=1, verbose=0))
      steady.append(_time(lambda m=model: m.fit(dataset(), steps_per_epoch=args.steps, epochs=1, verbose=0)))
    if repeat:  # The first repetition warms the process (imports, first graphs) and is dropped.
      for name, seconds in zip(results, (seconds_bare, seconds_lean, seconds_full), strict=True):
        results[name].append(seconds)
  steady_seconds = statistics.median(steady[1:])
  print(stack.check_tensorflow_stack().summary())
  print(f"load average before {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f}, after "
        f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs; {args.steps} steps of "
        f"{LISTS_PER_BATCH} lists x {GROUP_SIZE} items, validation every {args.eval_every}; "
        f"steps_per_execution chosen by the engine: {spe_used[1:]}; best validation pair accuracy "
        f"{accuracy[1:]}; medians of {args.repeats}")
  ratio_table.print_ratio_table(results, steady_seconds, args.steps, "steps/s")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
