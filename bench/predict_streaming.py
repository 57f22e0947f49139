"""rank4class-predict on new texts against the frozen encoder's own rate, and its memory at two input sizes.

Run: python bench/predict_streaming.py [--rows=4000] [--text_precision=auto]

Trains a small frozen-MiniLM model once (Reuters R8, 500 rows, cached embeddings), then writes `--rows` texts
that no embedding cache holds (2016 election tweets and Reuters news cut to 600 characters, each with a
numbered prefix) and measures, side by side:
- the encoder alone: `embedding_cache.compute_embeddings` over those texts in this process (batches of 64);
- `rank4class-predict` as a process on a CSV of them, with an empty embedding cache, start-up included; its
  rate is rows / wall seconds, and its peak resident memory (the child's ru_maxrss);
- the same command on half the rows: memory that stays flat in the number of rows gives about the same peak.
Prints the ratio of the predict rate to the encoder's and the machine's load average.
"""

import csv
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

from rank4class_data.datasets import classification  # noqa: E402
from rank4class_encoders import embedding_cache, text_embeddings, text_encoder  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("rows", 4000, "New text rows to predict (the memory run uses half of them too).")
flags.DEFINE_enum("text_precision", text_encoder.AUTO_PRECISION, text_encoder.PRECISIONS,
                  "The frozen encoder's precision, for the model and the encoder-alone run (default: the "
                  "binary's).")
flags.DEFINE_string("work_dir", None, "Folder for the model, inputs and outputs (default: a temporary one).")


def new_texts(count: int) -> list[str]:
  tweets = classification.load_text_classification("election_tweets", "train").texts
  news = classification.load_text_classification("reuters_r8", "train").texts
  pool = [str(t) for t in tweets] + [str(t)[:600] for t in news]
  # A numbered prefix makes every text one no cache holds.
  return [f"{i}. {pool[i % len(pool)]}" for i in range(count)]


# Runs argv[1:] and prints its peak resident KiB: a fresh parent per command, so no other child's peak counts.
_PEAK = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
         "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
         "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def run_process(command: list[str]) -> tuple[float, float]:
  """(wall seconds, peak resident MiB) of a child process."""
  start = time.perf_counter()
  peak = subprocess.run([sys.executable, "-c", _PEAK, *command], check=True, capture_output=True,
                        text=True).stdout
  return time.perf_counter() - start, int(peak) / 1024


def main(argv):
  del argv
  work = FLAGS.work_dir or tempfile.mkdtemp(prefix="predict_streaming_")
  bin_dir = os.path.dirname(sys.executable)
  model_dir = os.path.join(work, "model")
  if not os.path.isdir(os.path.join(model_dir, "export")):
    subprocess.run(
      [os.path.join(bin_dir, "rank4class-train"), "--dataset=reuters_r8", "--max_train_examples=500",
       "--max_test_examples=100", "--train_steps=100", "--eval_every=100", "--baselines=false",
       "--linear_candidate=false", "--calibrate=false", f"--text_precision={FLAGS.text_precision}",
       f"--model_dir={model_dir}", "--verbose=0"],
      check=True, stdout=subprocess.DEVNULL)
  texts = new_texts(FLAGS.rows)
  inputs = {}
  for rows in (FLAGS.rows // 2, FLAGS.rows):
    inputs[rows] = os.path.join(work, f"texts_{rows}.csv")
    with open(inputs[rows], "w", newline="", encoding="utf-8") as f:
      writer = csv.writer(f)
      writer.writerow(["text"])
      writer.writerows([t] for t in texts[:rows])

  handles = text_embeddings.minilm_handles()
  encoder = text_encoder.TextEncoder(handles.preprocess, handles.encoder, precision=FLAGS.text_precision)
  embedding_cache.compute_embeddings(encoder, texts[:64])  # Traces the graph, as predict's first batch does.
  start = time.perf_counter()
  embedding_cache.compute_embeddings(encoder, texts)
  encoder_rate = len(texts) / (time.perf_counter() - start)

  results = {}
  for rows in (FLAGS.rows // 2, FLAGS.rows):
    cache = tempfile.mkdtemp(prefix="cache_", dir=work)
    results[rows] = run_process(
      [os.path.join(bin_dir, "rank4class-predict"), f"--model_dir={model_dir}", f"--input={inputs[rows]}",
       f"--output={os.path.join(work, f'predictions_{rows}.csv')}", f"--embedding_cache_dir={cache}"])
  seconds, peak = results[FLAGS.rows]
  half_peak = results[FLAGS.rows // 2][1]
  print(f"{FLAGS.rows:,} new text rows, precision {FLAGS.text_precision}, load average "
        f"{os.getloadavg()[0]:.1f}")
  print(f"encoder alone (in process):      {encoder_rate:8.1f} texts/s")
  print(f"rank4class-predict (process):     {FLAGS.rows / seconds:8.1f} rows/s = "
        f"{FLAGS.rows / seconds / encoder_rate:.2f}x the encoder, {seconds:.1f} s with start-up")
  print(f"peak resident memory: {half_peak:,.0f} MiB at {FLAGS.rows // 2:,} rows, {peak:,.0f} MiB at "
        f"{FLAGS.rows:,} rows")


if __name__ == "__main__":
  app.run(main)
