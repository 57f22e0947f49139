"""Throughput of the text-encoder path (MiniLM-L6) against the machine's measured matmul peak.

Run: python bench/text_encoder_throughput.py [--batch_size=32] [--seq_length=64] [--trials=5]

Prints, for each path, examples/s, achieved GFLOP/s (FLOPs counted from the model's shapes) and that rate
divided by the best float32 matmul rate measured in the same run. Trials of each measurement are interleaved
and the best one is kept, so load from other processes hurts the peak and the model alike. A second ratio
divides FLOPs per CPU-second of this process (all its threads) instead of per wall-clock second: on a machine
shared with other jobs it measures the code's efficiency rather than its share of the cores.
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402

from rank4class_encoders import bert_conversion, bert_encoder, text_encoder  # noqa: E402

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("batch_size", 32, "Examples per step.")
flags.DEFINE_integer("seq_length", 64, "Tokens per example (every example fills it).")
flags.DEFINE_integer("trials", 5, "Interleaved trials of each measurement; the best is reported.")
flags.DEFINE_float("trial_seconds", 4.0, "Minimum duration of one trial.")
flags.DEFINE_string("checkpoint_dir", None, "Hugging Face BERT directory (default: all-MiniLM-L6-v2).")


def encoder_forward_flops(architecture: bert_encoder.BertArchitecture, seq_length: int) -> float:
  """Matmul FLOPs of one example's forward pass (2 per multiply-add; embeddings and softmax not counted)."""
  s, h, i = seq_length, architecture.hidden_size, architecture.intermediate_size
  per_layer = 2 * s * h * 3 * h + 2 * s * h * h + 2 * 2 * s * h * i + 2 * 2 * s * s * h
  return architecture.num_layers * per_layer + 2 * h * h  # + the pooler on the first token.


def timed(step, min_seconds: float) -> tuple[float, float]:
  """(wall-clock seconds, CPU seconds of this process) per call of `step`, over at least `min_seconds`."""
  calls, start, start_cpu = 0, time.perf_counter(), time.process_time()
  while True:
    result = step()
    calls += 1
    if time.perf_counter() - start >= min_seconds and calls >= 2:
      np.asarray(result)  # Waits for the last step.
      return (time.perf_counter() - start) / calls, (time.process_time() - start_cpu) / calls


def long_texts(count: int) -> list[str]:
  """Real reviews repeated so that every text has at least `--seq_length` word pieces."""
  base = (
    "I have suffered with migraines for over 40 years. I take zomig nasal spray when I get these "
    "annoyances, and once I use it the migraine is 90-95% better in 15 minutes and gone in an hour. "
  )
  return [f"{index} " + base * 4 for index in range(count)]


def main(argv):
  del argv
  checkpoint_dir = FLAGS.checkpoint_dir or bert_conversion.minilm_checkpoint_dir()
  architecture = bert_encoder.BertArchitecture.from_hugging_face_config(
    os.path.join(checkpoint_dir, "config.json")
  )
  handles = bert_conversion.cached_conversion(checkpoint_dir)
  batch, seq = FLAGS.batch_size, FLAGS.seq_length
  texts = tf.constant(long_texts(batch))

  frozen = text_encoder.TextEncoder(handles.preprocess, handles.encoder, max_seq_length=seq)
  if int(tf.reduce_min(tf.reduce_sum(frozen.preprocess(texts)["input_mask"], 1))) != seq:
    raise ValueError(f"The benchmark texts do not fill {seq} tokens; FLOP counts would be wrong.")
  forward = tf.function(lambda x: frozen(x, training=False))

  tuned = text_encoder.TextEncoder(handles.preprocess, handles.encoder, trainable=True, max_seq_length=seq)
  head = tf.keras.layers.Dense(2)
  labels = tf.constant(np.arange(batch) % 2)

  def make_train_step(optimizer):
    @tf.function
    def train_step(x, y):
      with tf.GradientTape() as tape:
        logits = head(tuned(x, training=True))
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
      variables = tuned.trainable_variables + head.trainable_variables
      optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
      return loss

    return lambda: train_step(texts, labels)

  matmul = tf.function(lambda a, b: tf.matmul(a, b))
  square = {size: tf.random.normal([size, size]) for size in (1024, 2048)}
  training_flops = 3 * batch * encoder_forward_flops(architecture, seq)
  measurements = {
    f"matmul {size}x{size}": (lambda size=size: matmul(square[size], square[size]), 2.0 * size**3, 1)
    for size in square
  }
  measurements["forward, embedding caching"] = (
    lambda: forward(texts),
    batch * encoder_forward_flops(architecture, seq),
    batch,
  )
  measurements["training step, Keras Adam"] = (
    make_train_step(tf.keras.optimizers.Adam(1e-5)),
    training_flops,
    batch,
  )
  measurements["training step, fused Adam"] = (
    make_train_step(tf.keras.optimizers.legacy.Adam(1e-5)),
    training_flops,
    batch,
  )
  for step, _, _ in measurements.values():  # Traces and warms up.
    np.asarray(step())
  best_wall = {name: float("inf") for name in measurements}
  best_cpu = {name: float("inf") for name in measurements}
  for _ in range(FLAGS.trials):
    for name, (step, _, _) in measurements.items():
      wall, cpu = timed(step, FLAGS.trial_seconds)
      best_wall[name], best_cpu[name] = min(best_wall[name], wall), min(best_cpu[name], cpu)

  matmuls = [name for name in measurements if name.startswith("matmul")]
  peak_wall = max(measurements[name][1] / best_wall[name] for name in matmuls)
  peak_cpu = max(measurements[name][1] / best_cpu[name] for name in matmuls)
  print(
    f"TensorFlow {tf.__version__}, {os.cpu_count()} CPUs, batch {batch}, {seq} tokens, "
    f"{architecture.num_layers} layers x {architecture.hidden_size} hidden, best of {FLAGS.trials} trials; "
    f"peak = best matmul"
  )
  print(
    f"| {'path':<28} | {'examples/s':>10} | {'GFLOP/s':>8} | {'÷ peak':>6} | {'GFLOP/CPU-s':>11} | "
    f"{'÷ peak (CPU time)':>17} |"
  )
  print(f"|{'-' * 30}|{'-' * 12}|{'-' * 10}|{'-' * 8}|{'-' * 13}|{'-' * 19}|")
  for name, (_, flops, examples) in measurements.items():
    rate, cpu_rate = flops / best_wall[name], flops / best_cpu[name]
    per_second = f"{examples / best_wall[name]:.1f}" if examples > 1 else "-"
    print(
      f"| {name:<28} | {per_second:>10} | {rate / 1e9:>8.1f} | {rate / peak_wall:>6.2f} | "
      f"{cpu_rate / 1e9:>11.1f} | {cpu_rate / peak_cpu:>17.2f} |"
    )
  return 0


if __name__ == "__main__":
  sys.exit(app.run(main))
