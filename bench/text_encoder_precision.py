"""The frozen MiniLM encoder against Hugging Face transformers on PyTorch, on the same texts and threads.

Run: python bench/text_encoder_precision.py [--texts=1500] [--trials=3] [--threads=2]

Texts: half 2016 election tweets, half Reuters news (R8 test split) cut to 600 characters, both installed with
the toolkit's data. Every path sorts the texts by length, runs batches of `--batch_size` padded to the batch's
longest text (at most 128 tokens) and mean-pools over the mask:
- "toolkit float32" and "toolkit bfloat16": `embedding_cache.compute_embeddings` (tokenization inside the
  graph included) with `TextEncoder(precision=...)`;
- "transformers float32" (the anchor): `BertModel` on PyTorch CPU in a child process, fast tokenizer included;
  PyTorch and TensorFlow would share OpenMP threads in one process.
Trials of the three paths are interleaved; each path's median texts/s is reported with its ratio to the
anchor, the least cosine of its vectors to the anchor's, and the machine's load average. PyTorch and
transformers install from the package registry (`pip install torch transformers`).
"""

import json
import os
import subprocess
import sys
import textwrap
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402

from rank4class_data.datasets import classification  # noqa: E402
from rank4class_encoders import bert_conversion, embedding_cache, text_encoder  # noqa: E402

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("texts", 1500, "Texts per trial (half tweets, half news paragraphs).")
flags.DEFINE_integer("trials", 3, "Interleaved trials of each path; the median is reported.")
flags.DEFINE_integer("threads", 2, "Intra-op threads of TensorFlow and PyTorch alike.")
flags.DEFINE_integer("batch_size", 64, "Texts per forward pass.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per text at most.")

# The anchor: reads a JSON list of texts from the file in argv[1], then on each "run" line of stdin embeds
# them and prints the seconds; "vectors <path>" saves the last vectors.
_TORCH_WORKER = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import torch, transformers
    checkpoint, texts_path, threads, batch_size, max_length = sys.argv[1:6]
    torch.set_num_threads(int(threads))
    texts = json.load(open(texts_path))
    order = np.argsort([-len(t) for t in texts], kind="stable")
    tokenizer = transformers.BertTokenizerFast.from_pretrained(checkpoint)
    model = transformers.BertModel.from_pretrained(checkpoint).eval()
    def embed():
      out = np.zeros([len(texts), model.config.hidden_size], np.float32)
      with torch.inference_mode():
        for start in range(0, len(texts), int(batch_size)):
          rows = order[start:start + int(batch_size)]
          batch = tokenizer([texts[i] for i in rows], padding=True, truncation=True, max_length=int(max_length),
                            return_tensors="pt")
          hidden = model(**batch).last_hidden_state
          mask = batch["attention_mask"].unsqueeze(-1).float()
          out[rows] = ((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).numpy()
      return out
    vectors = embed()  # Warm-up.
    print("ready", flush=True)
    for line in sys.stdin:
      if line.startswith("run"):
        start = time.perf_counter(); vectors = embed(); print(time.perf_counter() - start, flush=True)
      elif line.startswith("vectors"):
        np.save(line.split()[1], vectors); print("saved", flush=True)
""")  # noqa: E501


def benchmark_texts(count: int) -> list[str]:
  tweets = classification.load_text_classification("election_tweets", "test").texts
  news = classification.load_text_classification("reuters_r8", "test").texts
  half = count // 2
  if len(tweets) < count - half or len(news) < half:
    raise ValueError(f"--texts={count} needs {count - half} tweets and {half} news texts.")
  return [str(t) for t in tweets[: count - half]] + [str(t)[:600] for t in news[:half]]


def least_cosine(a: np.ndarray, b: np.ndarray) -> float:
  return float(np.min(np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)))


def main(argv):
  del argv
  tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
  tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
  texts = benchmark_texts(FLAGS.texts)
  checkpoint = bert_conversion.minilm_checkpoint_dir()
  handles = bert_conversion.cached_conversion(checkpoint)
  encoders = {
    f"toolkit {precision}": text_encoder.TextEncoder(
      handles.preprocess, handles.encoder, max_seq_length=FLAGS.max_seq_length, precision=precision
    )
    for precision in (text_encoder.FLOAT32, text_encoder.BFLOAT16)
  }
  folder = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"text_encoder_precision_{os.getpid()}")
  os.makedirs(folder, exist_ok=True)
  texts_path = os.path.join(folder, "texts.json")
  with open(texts_path, "w") as f:
    json.dump(texts, f)
  worker = subprocess.Popen(
    [sys.executable, "-c", _TORCH_WORKER, checkpoint, texts_path, str(FLAGS.threads), str(FLAGS.batch_size),
     str(FLAGS.max_seq_length)],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
  )
  if worker.stdout.readline().strip() != "ready":
    raise RuntimeError("The PyTorch worker did not start; is `pip install torch transformers` done?")
  anchor = "transformers float32"
  seconds = {name: [] for name in (*encoders, anchor)}
  vectors = {name: embedding_cache.compute_embeddings(e, texts, FLAGS.batch_size)
             for name, e in encoders.items()}
  loads = []
  for _ in range(FLAGS.trials):
    for name, encoder in encoders.items():
      start = time.perf_counter()
      embedding_cache.compute_embeddings(encoder, texts, FLAGS.batch_size)
      seconds[name].append(time.perf_counter() - start)
    worker.stdin.write("run\n")
    worker.stdin.flush()
    seconds[anchor].append(float(worker.stdout.readline()))
    loads.append(os.getloadavg()[0])
  worker.stdin.write(f"vectors {os.path.join(folder, 'anchor.npy')}\n")
  worker.stdin.flush()
  worker.stdout.readline()
  worker.stdin.close()
  worker.wait()
  vectors[anchor] = np.load(os.path.join(folder, "anchor.npy"))
  rate = {name: len(texts) / float(np.median(values)) for name, values in seconds.items()}
  print(f"{len(texts):,} texts, {FLAGS.threads} threads, batches of {FLAGS.batch_size}, <= "
        f"{FLAGS.max_seq_length} tokens, median of {FLAGS.trials} interleaved trials; load average "
        f"{min(loads):.1f}-{max(loads):.1f}; TensorFlow {tf.__version__}; CPU bfloat16 instructions: "
        f"{text_encoder.cpu_has_bfloat16()}")
  print(f"{'path':<22} {'texts/s':>8} {'vs anchor':>10} {'least cosine to anchor':>24}")
  for name in (anchor, *encoders):
    print(f"{name:<22} {rate[name]:>8.1f} {rate[name] / rate[anchor]:>9.2f}x "
          f"{least_cosine(vectors[name], vectors[anchor]):>24.6f}")
  print(f"toolkit bfloat16 vs toolkit float32: {rate['toolkit bfloat16'] / rate['toolkit float32']:.2f}x, "
        f"least cosine {least_cosine(vectors['toolkit bfloat16'], vectors['toolkit float32']):.6f}")


if __name__ == "__main__":
  app.run(main)
