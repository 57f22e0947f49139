"""Two stages against the ranker over every class: instances/s of the top 5 at 10,000 and 100,000 classes.

The speedup of the two-stage signature (`rank4class.inference.two_stage`: a dot model retrieves M classes
over all C, exact and chunked; the latent-cross ranker scores those M only) over the same ranker scoring all C
classes (exact, chunked: `full_class_scoring.chunked_top_k`, what evaluation and a many-class ranker need).
Models as in bench/many_classes.py: 384-float inputs (frozen MiniLM's size), MLP instance encoder 384 -> 128,
one-hot classes, latent cross with two layers of 64; untrained weights (the cost does not depend on them).
Both paths are the exported functions' own code, called as `tf.function`s on batches of 256 after one warm-up
call.

Run: python bench/two_stage_speed.py [--num_classes=10000,100000] [--candidates=50,200] [--repeats=3]
"""

import argparse
import os
import statistics
import time

import numpy as np

from rank4class.inference import full_class_scoring, two_stage
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf


def _model(num_classes: int, interaction: str, seed: int) -> model_lib.Rank4ClassModel:
  tf.keras.utils.set_random_seed(seed)
  hidden = {} if interaction == "dot" else {"hidden_units": (64, 64)}
  model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(128,)),
                                    class_encoders.get("one_hot", num_classes=num_classes),
                                    interactions.get(interaction, **hidden))
  model(tf.zeros([1, 384]))
  return model


def _seconds(function, inputs, repeats: int) -> float:
  function(inputs)  # Traces.
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    outputs = function(inputs)
    tf.nest.map_structure(lambda t: t.numpy(), outputs)
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def main() -> None:
  parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
  parser.add_argument("--num_classes", default="10000,100000")
  parser.add_argument("--candidates", default="50,200")
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  inputs = tf.constant(np.random.default_rng(0).normal(size=[args.batch, 384]).astype(np.float32))
  print(f"load average {os.getloadavg()[0]:.2f}; batch {args.batch}; instances/s (median of {args.repeats})")
  print("| classes | ranker over all classes | two stages, M | instances/s | speedup |")
  print("|---:|---:|---:|---:|---:|")
  for num_classes in (int(c) for c in args.num_classes.split(",")):
    retriever, ranker = _model(num_classes, "dot", 0), _model(num_classes, "latent_cross", 1)
    exhaustive = tf.function(lambda x, ranker=ranker: full_class_scoring.chunked_top_k(ranker, x, 5)[:2])
    full_rate = args.batch / _seconds(exhaustive, inputs, args.repeats)
    for m in (int(c) for c in args.candidates.split(",")):
      module = two_stage.TwoStageModule(retriever, ranker, m, top_k=5)
      rate = args.batch / _seconds(module.serve, inputs, args.repeats)
      print(f"| {num_classes:,} | {full_rate:,.0f} | {m} | {rate:,.0f} | {rate / full_rate:.1f}x |",
            flush=True)


if __name__ == "__main__":
  main()
