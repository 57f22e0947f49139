"""Benchmark: batch evaluation throughput of `rank4class.evaluation.evaluate` on frozen-embedding TFRecords.

Writes `--num_records` tf.Examples holding 384-d frozen MiniLM-sized embedding vectors (real cached R8
embeddings from ~/.cache/rank4class/embeddings when present, tiled; else Gaussian vectors) with R8's 8
classes, exports a Rank4Class model reading them (MLP instance encoder + interaction), and times
`evaluate.evaluate` after one warm-up pass (tracing). Reports instances/s and the share of wall time the
evaluation loop spent waiting for the input pipeline.

  python bench/evaluate_throughput.py
  python bench/evaluate_throughput.py --num_records=400000 --batch_sizes=4096,16384 --interaction=latent_cross
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

from rank4class.evaluation import evaluate
from rank4class.inference import serving
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_data.records import tfrecords
from rank4class_encoders import embedding_cache

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf

DIM = 384
NUM_CLASSES = 8


def _base_vectors(seed: int) -> tuple[np.ndarray, str]:
  """Distinct embedding rows to tile: real MiniLM embeddings from the embedding cache when it holds some, else
  Gaussian vectors."""
  store_path = os.path.join(os.path.expanduser(embedding_cache.DEFAULT_CACHE_DIR), embedding_cache.STORE_FILE)
  if os.path.exists(store_path):
    base = embedding_cache.open_store().vectors_of_size(DIM, limit=100_000)
    if len(base):
      return base, f"{len(base)} cached MiniLM embeddings, tiled"
  return np.random.default_rng(seed).normal(size=[4096, DIM]).astype(
    np.float32
  ) * 0.1, "Gaussian vectors, tiled"


def _write_records(root: str, num_records: int, num_files: int) -> tuple[str, str]:
  """Record i holds base vector i mod len(base) and label i mod NUM_CLASSES."""
  base, source = _base_vectors(seed=0)
  schema = tfrecords.ExampleSchema(
    text_key=None, dense_key="features", dense_dim=DIM, num_classes=NUM_CLASSES
  )
  # Serialize each distinct (vector, label) pair once: protobuf runs in pure Python here and is slow.
  period = min(int(np.lcm(len(base), NUM_CLASSES)), num_records)
  serialized = [
    tfrecords.encode_instance(
      tfrecords.ClassificationInstance(label=i % NUM_CLASSES, dense=base[i % len(base)]), schema
    ).SerializeToString()
    for i in range(period)
  ]
  for shard, rows in enumerate(np.array_split(np.arange(num_records), num_files)):
    tfrecords.write_tfrecord(
      os.path.join(root, f"embeddings-{shard:03d}.tfrecord"), (serialized[i % period] for i in rows)
    )
  return os.path.join(root, "embeddings-*.tfrecord"), source


def _export(root: str, interaction: str, width: int) -> str:
  model = model_lib.Rank4ClassModel(
    encoders.get("mlp", hidden_units=(width,)),
    class_encoders.get("one_hot", num_classes=NUM_CLASSES),
    interactions.get(interaction, **({} if interaction == "dot" else {"hidden_units": (width, width)})),
    class_names=[f"class_{i}" for i in range(NUM_CLASSES)],
  )
  model(tf.zeros([2, DIM]))
  return serving.export_saved_model(model, os.path.join(root, "export"))


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--num_records", type=int, default=200_000)
  parser.add_argument("--num_files", type=int, default=4)
  parser.add_argument("--batch_sizes", default="1024,4096,16384")
  parser.add_argument("--interaction", default="dot", choices=interactions.INTERACTION_NAMES)
  parser.add_argument("--width", type=int, default=128)
  parser.add_argument("--repeats", type=int, default=2)
  args = parser.parse_args(argv)

  with tempfile.TemporaryDirectory() as root:
    start = time.perf_counter()
    pattern, source = _write_records(root, args.num_records, args.num_files)
    export_dir = _export(root, args.interaction, args.width)
    print(
      f"Wrote {args.num_records} records ({source}) in {time.perf_counter() - start:.1f}s; model: "
      f"MLP({args.width}) + {args.interaction}, {NUM_CLASSES} classes; {os.cpu_count()} CPU cores."
    )
    print(f"{'batch':>7} {'instances/s':>12} {'steady inst/s':>14} {'input share':>12} {'steady input':>13} "
          f"{'wall (s)':>9}")
    for batch_size in (int(b) for b in args.batch_sizes.split(",")):
      config = evaluate.EvaluateConfig(
        model_path=export_dir, data_files=pattern, batch_size=batch_size, report_path=""
      )
      evaluate.evaluate(config)  # Warm-up: loads the model and traces the functions.
      best = None
      for _ in range(args.repeats):
        report = evaluate.evaluate(config)
        if best is None or report["timing"]["instances_per_second"] > best["timing"]["instances_per_second"]:
          best = report
      timing = best["timing"]
      assert best["n"] == args.num_records, best["n"]
      print(
        f"{batch_size:>7} {timing['instances_per_second']:>12,.0f} "
        f"{timing['steady_instances_per_second']:>14,.0f} {100 * timing['input_fraction']:>11.1f}% "
        f"{100 * timing['steady_input_fraction']:>12.1f}% {timing['seconds']:>9.2f}"
      )
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
