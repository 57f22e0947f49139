"""Rank4Class with many classes: training examples/s and peak memory, full lists vs sampled lists, and exact
full-class evaluation (chunked) instances/s, for C in {100, 1k, 10k, 100k}.

Every measurement runs in its own process (its peak resident memory is that process's `ru_maxrss`, TensorFlow
and the data included: compare rows, not absolute values). Inputs are synthetic 384-float vectors (the frozen
MiniLM embeddings Rank4Class trains on for text), an MLP instance encoder (384 -> 128), one-hot class
embeddings, TF-Ranking's softmax loss, Adam, lazy Adam or Adagrad, batch 64; "sampled K" draws K-1 uniform
negatives per instance, "shared" K-1 for the whole batch (`rank4class.modeling.class_sampling`). Evaluation
ranks all C classes for batches of 256 instances in chunks of 4,096 classes
(`rank4class.evaluation.full_class_evaluation`). The table's ratio column divides each training row's
examples/s by the same variant's at C = 100 (the goal: sampled lists keep >= 0.5x at C = 100,000).

Sample command line:
  python bench/many_classes.py --num_classes=100,1000,10000,100000 --interactions=dot,latent_cross
"""

import json
import os
import resource
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

flags.DEFINE_list("num_classes", ["100", "1000", "10000", "100000"], "Class counts.")
flags.DEFINE_list("interactions", ["dot", "latent_cross"], "Interactions to measure.")
flags.DEFINE_list("list_sizes", ["full", "64", "256", "64s", "256s"], "Training lists: full, sampled list "
                  "sizes K (K-1 negatives per instance), or K with an 's' (K-1 negatives "
                  "shared by the batch).")
flags.DEFINE_list("optimizers", ["adam", "lazy_adam"], "Optimizers of the training rows: Adam's "
                  "moment decay touches every class embedding each step; lazy Adam "
                  "(rank4class_engine.optimization.lazy_adam) and Adagrad update only the looked-up rows.")
flags.DEFINE_float("seconds", 3.0, "Approximate timed seconds per measurement (after a warm-up).")
flags.DEFINE_integer("batch_size", 64, "Training examples per step.")
flags.DEFINE_integer("eval_batch_size", 256, "Evaluation instances per batch.")
flags.DEFINE_integer("chunk_size", 4096, "Classes scored at once by the evaluation.")
flags.DEFINE_string("child", None, "Internal: one measurement's JSON spec.")
FLAGS = flags.FLAGS

_DIM = 384


def _model(num_classes: int, interaction: str, list_size: str):
  from rank4class.modeling import class_encoders, class_sampling, encoders, interactions
  from rank4class.modeling import model as model_lib
  shared = list_size.endswith("s")  # "64s": one draw of negatives per batch.
  sampler = None if list_size == "full" else class_sampling.ClassSampler(
      num_classes, "uniform", int(list_size.rstrip("s")) - 1, shared=shared)
  hidden = {} if interaction == "dot" else {"hidden_units": (64, 64)}
  return model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(128,)),
                                   class_encoders.get("one_hot", num_classes=num_classes),
                                   interactions.get(interaction, **hidden), class_sampler=sampler)


def _measure(spec: dict) -> dict:
  import numpy as np

  from rank4class.inference import full_class_scoring
  from rank4class_engine.optimization import losses

  # isort: split
  import tensorflow as tf  # After the toolkit, whose package import runs the stack check first.

  tf.keras.utils.set_random_seed(0)
  rng = np.random.default_rng(0)
  num_classes = spec["num_classes"]
  model = _model(num_classes, spec["interaction"], spec["list_size"])
  model(tf.zeros([1, _DIM]))
  if spec["kind"] == "eval":
    x = tf.constant(rng.normal(size=[FLAGS.eval_batch_size, _DIM]).astype(np.float32))
    y = tf.constant(rng.integers(0, num_classes, FLAGS.eval_batch_size), tf.int32)
    ranks = tf.function(lambda x, y: full_class_scoring.chunked_top_k(model, x, 5, FLAGS.chunk_size, y)[2])
    ranks(x, y)  # Warm-up: tracing.
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < FLAGS.seconds or count < 2:
      ranks(x, y).numpy()
      count += 1
    rate = count * FLAGS.eval_batch_size / (time.perf_counter() - start)
  else:
    steps = 10
    from rank4class_engine.optimization import lazy_adam
    optimizer = lazy_adam.LazyAdam(1e-3) if spec["optimizer"] == "lazy_adam" else tf.keras.optimizers.get(
        {"class_name": spec["optimizer"], "config": {"learning_rate": 1e-3}})
    model.compile(optimizer, losses.get("softmax"), steps_per_execution=steps)
    x = rng.normal(size=[FLAGS.batch_size * steps, _DIM]).astype(np.float32)
    y = rng.integers(0, num_classes, FLAGS.batch_size * steps)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(FLAGS.batch_size).repeat().prefetch(2)
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)  # Warm-up: tracing.
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < FLAGS.seconds or runs < 1:
      model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
      runs += 1
    rate = runs * steps * FLAGS.batch_size / (time.perf_counter() - start)
  return {**spec, "per_second": rate, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv):
  del argv
  if FLAGS.child:
    print(json.dumps(_measure(json.loads(FLAGS.child))))
    return
  specs = [{"kind": "train", "num_classes": int(c), "interaction": i, "list_size": k, "optimizer": o}
           for o in FLAGS.optimizers for i in FLAGS.interactions for k in FLAGS.list_sizes
           for c in FLAGS.num_classes if o == "adam" or k != "full"]  # Full lists: dense gradients, Adam.
  specs += [{"kind": "eval", "num_classes": int(c), "interaction": i, "list_size": "full", "optimizer": "-"}
            for i in FLAGS.interactions for c in FLAGS.num_classes]
  passed = [f"--{name}={FLAGS[name].serialize().split('=', 1)[1]}" for name in
            ("seconds", "batch_size", "eval_batch_size", "chunk_size")]
  results = []
  for spec in specs:
    done = subprocess.run([sys.executable, __file__, f"--child={json.dumps(spec)}", *passed],
                          capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(
                              os.path.abspath(__file__)))))
    if done.returncode != 0:
      print(f"failed: {spec}: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
      continue
    results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"measured {results[-1]}", file=sys.stderr)
  base = {(r["kind"], r["interaction"], r["list_size"], r["optimizer"]): r["per_second"] for r in results
          if r["num_classes"] == min(int(c) for c in FLAGS.num_classes)}
  print(f"\nload average at the end: {os.getloadavg()[0]:.2f} (2 cores)\n")
  print("| what | optimizer | interaction | lists | classes | per second | vs C = " + FLAGS.num_classes[0]
        + " | peak memory (MB) |")
  print("|---|---|---|---|---:|---:|---:|---:|")
  for r in results:
    ratio = r["per_second"] / base[(r["kind"], r["interaction"], r["list_size"], r["optimizer"])]
    lists = "all classes, chunks of " + str(FLAGS.chunk_size) if r["kind"] == "eval" else (
        "full" if r["list_size"] == "full" else f"sampled K={r['list_size'].rstrip('s')}"
        + (", shared" if r["list_size"].endswith("s") else ""))
    unit = "instances" if r["kind"] == "eval" else "examples"
    print(f"| {'evaluation' if r['kind'] == 'eval' else 'training'} ({unit}/s) | {r['optimizer']} | "
          f"{r['interaction']} | {lists} | "
          f"{r['num_classes']:,} | {r['per_second']:,.0f} | {ratio:.2f} | {r['peak_mb']:,.0f} |")


if __name__ == "__main__":
  app.run(main)
