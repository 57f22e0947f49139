"""Training throughput of Rank4Class (dot / latent cross / concat) relative to the classic softmax classifier.

Both sides share the instance encoder, optimizer (Adam), batch and data; the classic model is
`Sequential([encoder, Dense(num_classes)])` with sparse softmax cross entropy on integer labels, Rank4Class is
`Rank4ClassModel(encoder, OneHotClassEncoder, interaction)` with TF-Ranking's SoftmaxLoss on the same integer
labels (converted to one-hot relevance, with range checks, inside its train step). The extra variant
"classic_ranking_loss" is the classic model trained with that same TF-Ranking loss on one-hot labels, to
separate the cost of the loss from that of the architecture. Warm-up (tracing) is
excluded; repetitions are interleaved across variants so background load hits them alike. The table gives
examples per wall-clock second and per CPU-second of this process (user + system), best and median over the
repetitions, with their ratios to the classic model. On a shared machine the CPU-time figures are the stable
ones (run with --threads=1 so no thread spins while waiting); wall-clock figures swing with other jobs.

Sample command line:
  python bench/rank4class_throughput.py --encoders=mlp,small_cnn --num_classes=20,1000 --repeats=5
"""

import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402

from rank4class.modeling import class_encoders, encoders, interactions  # noqa: E402
from rank4class.modeling import model as model_lib  # noqa: E402
from rank4class_engine.optimization import losses  # noqa: E402

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf  # noqa: E402

flags.DEFINE_list(
  "encoders",
  ["mlp", "small_cnn"],
  "Instance encoders: mlp (64 features -> 256 -> 256) and/or small_cnn (32x32x3 images, conv 32/64/128).",
)
flags.DEFINE_list("num_classes", ["20", "1000"], "Class counts to measure.")
VARIANTS = ("classic", "classic_ranking_loss", *interactions.INTERACTION_NAMES)
flags.DEFINE_list("variants", list(VARIANTS), f"Models to compare, from {VARIANTS}.")
flags.DEFINE_integer("batch_size", 256, "Examples per training step.")
flags.DEFINE_integer("hidden_units", 64, "Width of both MLP layers of latent_cross/concat (paper: 64-512).")
flags.DEFINE_integer(
  "steps_per_execution", 2, "Keras steps_per_execution (the timed step count is a multiple)."
)
flags.DEFINE_float("seconds_per_run", 0.5, "Approximate length of one timed run.")
flags.DEFINE_integer("repeats", 5, "Timed runs per variant, interleaved across variants.")
flags.DEFINE_integer("seed", 0, "Seed of the synthetic data and the weights.")
flags.DEFINE_integer(
  "threads",
  1,
  "TF intra- and inter-op threads (1: CPU-time ratios are not blurred by spinning threads); 0 "
  "keeps TensorFlow's defaults.",
)

FLAGS = flags.FLAGS

_MLP_FEATURES = 64
_IMAGE_SHAPE = (32, 32, 3)


def make_encoder(name: str) -> encoders.InstanceEncoder:
  if name == "mlp":
    return encoders.get("mlp", hidden_units=(256, 256))
  if name == "small_cnn":
    return encoders.get("image", backbone="small_cnn", filters=(32, 64, 128), rescale=1.0 / 255.0)
  raise ValueError(f"Unknown encoder {name!r}; expected mlp or small_cnn.")


def make_dataset(encoder: str, num_classes: int, batch_size: int, seed: int) -> tf.data.Dataset:
  rng = np.random.default_rng(seed)
  n = batch_size * 8
  if encoder == "mlp":
    x = rng.normal(size=[n, _MLP_FEATURES]).astype(np.float32)
  else:
    x = rng.integers(0, 256, size=[n, *_IMAGE_SHAPE]).astype(np.uint8)
  y = rng.integers(0, num_classes, size=[n]).astype(np.int64)
  return (
    tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch_size, drop_remainder=True).prefetch(4)
  )


def make_model(
  variant: str, encoder: str, num_classes: int, hidden_units: int, steps_per_execution: int
) -> tf.keras.Model:
  if variant in ("classic", "classic_ranking_loss"):
    model = tf.keras.Sequential([make_encoder(encoder), tf.keras.layers.Dense(num_classes)])
    loss = (
      tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
      if variant == "classic"
      else losses.get("softmax")
    )
  else:
    kwargs = {} if variant == "dot" else {"hidden_units": (hidden_units, hidden_units)}
    model = model_lib.Rank4ClassModel(
      make_encoder(encoder),
      class_encoders.get("one_hot", num_classes=num_classes),
      interactions.get(variant, **kwargs),
    )
    loss = losses.get("softmax")
  model.compile(tf.keras.optimizers.Adam(1e-3), loss, steps_per_execution=steps_per_execution)
  return model


def time_fit(model: tf.keras.Model, dataset: tf.data.Dataset, steps: int) -> tuple[float, float]:
  """(wall seconds, CPU seconds) for `steps` training steps (fit's first call traces; callers warm up
  first)."""
  start, start_cpu = time.perf_counter(), time.process_time()
  model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0)
  return time.perf_counter() - start, time.process_time() - start_cpu


def measure(encoder: str, num_classes: int) -> dict[str, dict[str, list[float]]]:
  """{"wall": {variant: examples/s}, "cpu": {variant: examples per CPU-second}} over `--repeats` runs."""
  spe = FLAGS.steps_per_execution
  dataset = make_dataset(encoder, num_classes, FLAGS.batch_size, FLAGS.seed)
  one_hot = dataset.map(lambda x, y: (x, tf.one_hot(y, num_classes)))  # for "classic_ranking_loss"
  datasets = {
    variant: one_hot if variant == "classic_ranking_loss" else dataset for variant in FLAGS.variants
  }
  models, steps = {}, {}
  for variant in FLAGS.variants:
    tf.keras.utils.set_random_seed(FLAGS.seed)
    models[variant] = make_model(variant, encoder, num_classes, FLAGS.hidden_units, spe)
    time_fit(models[variant], datasets[variant], spe)  # warm-up: tracing and graph optimization
    step_seconds = time_fit(models[variant], datasets[variant], spe)[0] / spe
    steps[variant] = max(spe, spe * round(FLAGS.seconds_per_run / step_seconds / spe))
  rates = {clock: {variant: [] for variant in FLAGS.variants} for clock in ("wall", "cpu")}
  for _ in range(FLAGS.repeats):
    for variant in FLAGS.variants:
      wall, cpu = time_fit(models[variant], datasets[variant], steps[variant])
      rates["wall"][variant].append(steps[variant] * FLAGS.batch_size / wall)
      rates["cpu"][variant].append(steps[variant] * FLAGS.batch_size / cpu)
  return rates


def format_table(results: dict[tuple[str, int], dict[str, dict[str, list[float]]]]) -> str:
  lines = [
    "| encoder | classes | model | ex/s wall (best) | ratio wall (best) | ex/CPU-s (best) | ratio CPU (best) "
    "| ratio CPU (median) |",
    "|---|---:|---|---:|---:|---:|---:|---:|",
  ]
  for (encoder, num_classes), rates in results.items():
    wall, cpu = rates["wall"], rates["cpu"]
    for variant in wall:
      ratios = ["-", "-", "-"]
      if "classic" in wall:
        ratios = [
          f"{max(wall[variant]) / max(wall['classic']):.3f}",
          f"{max(cpu[variant]) / max(cpu['classic']):.3f}",
          f"{statistics.median(cpu[variant]) / statistics.median(cpu['classic']):.3f}",
        ]
      lines.append(
        f"| {encoder} | {num_classes} | {variant} | {max(wall[variant]):,.0f} | {ratios[0]} | "
        f"{max(cpu[variant]):,.0f} | {ratios[1]} | {ratios[2]} |"
      )
  return "\n".join(lines)


def main(argv):
  del argv
  if FLAGS.threads:
    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
  for name in FLAGS.variants:
    if name not in VARIANTS:
      raise ValueError(f"Unknown variant {name!r}; expected one of {VARIANTS}.")
  results = {}
  for encoder in FLAGS.encoders:
    for num_classes in (int(c) for c in FLAGS.num_classes):
      results[(encoder, num_classes)] = measure(encoder, num_classes)
      print(f"done: {encoder}, {num_classes} classes", flush=True)
  load = os.getloadavg()
  print(
    f"\nthreads {FLAGS.threads or 'default'}, batch {FLAGS.batch_size}, MLP interaction width "
    f"{FLAGS.hidden_units}x2, {FLAGS.repeats} repeats, "
    f"TF {tf.__version__}, {os.cpu_count()} CPUs, load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}"
  )
  print(format_table(results))


def run():
  app.run(main)


if __name__ == "__main__":
  run()
