"""Latency of one zero-shot request after loading: 32 new texts against 1,000 classes given as texts, on CPU.

A request of 32 instances against 1,000 classes after loading, goal <= 50 ms. The export is a
zero-shot export as `rank4class-export --kind=zero_shot` writes it (frozen MiniLM instances through an MLP of
256, classes as WordNet hypernym texts through the frozen MiniLM and a projection to 256, dot interaction;
untrained weights: the latency does not depend on them), served through `rank4class.inference.served` as
`rank4class-predict` serves it. Measured:
- loading the export, and embedding the class set once (cold: through the class tower; warm: the cache);
- per request, median over --repeats requests of 32 texts never seen before (so the instance embedding is
  computed, not read from the cache): the texts through the frozen MiniLM, then the scores of 1,000 classes
  and the top 5;
- the same request with the instance embeddings already cached (a repeated text), i.e. scoring alone.

Run: python bench/zero_shot_request.py [--classes=1000] [--batch=32] [--repeats=20]
"""

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

from rank4class.inference import served, zero_shot
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_data import datasets
from rank4class_encoders import text_embeddings, text_encoder

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf


def main() -> None:
  parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
  parser.add_argument("--classes", type=int, default=1000)
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--repeats", type=int, default=20)
  args = parser.parse_args()
  task = datasets.hypernym_task()
  handles = text_embeddings.minilm_handles()
  frozen = text_encoder.TextEncoderConfig(handles.preprocess, handles.encoder, max_seq_length=64)
  texts = task.class_texts[:args.classes]
  names = task.class_names[:args.classes]
  queries = task.test_texts
  with tempfile.TemporaryDirectory() as root:
    cache = os.path.join(root, "cache")
    start = time.perf_counter()
    model = model_lib.Rank4ClassModel(
        encoders.get("mlp", hidden_units=(256,)),
        class_encoders.get("metadata", class_texts=texts[:2],
                           text=text_encoder.TextEncoderConfig(handles.preprocess, handles.encoder,
                                                               max_seq_length=64),
                           output_dim=256),
        interactions.get("dot"), class_names=names[:2])
    model(tf.zeros([1, 384]))
    export_dir = zero_shot.export_zero_shot(model, os.path.join(root, "zero_shot"),
                                            frozen_text_encoder=frozen)
    print(f"export written in {time.perf_counter() - start:.1f} s")
    table = os.path.join(root, "classes.csv")
    with open(table, "w", encoding="utf-8") as f:
      f.write("class,text\n" + "".join(f'{n},"{t.replace(chr(34), chr(39))}"\n' for n, t in zip(names, texts,
                                                                                                strict=True)))
    for state in ("cold", "warm"):
      start = time.perf_counter()
      loaded = served.load(export_dir, table, cache)
      loaded_at = time.perf_counter()
      vectors = loaded.class_vectors
      print(f"{state}: load {loaded_at - start:.2f} s, class set of {len(vectors):,} embedded "
            f"{time.perf_counter() - loaded_at:.2f} s")
    offset, new_text, cached = 0, [], []
    loaded.top_k(loaded.model_inputs(queries[:args.batch]), 5)  # Traces the scoring signature once.
    for _ in range(args.repeats):
      # A request id appended: texts the embedding cache cannot hold from another run.
      batch = [f"{text} (request {offset // args.batch} {time.time_ns()})" for text in
               queries[offset:offset + args.batch]]
      offset += args.batch
      start = time.perf_counter()
      ids, _ = loaded.top_k(loaded.model_inputs(batch), 5)
      new_text.append(time.perf_counter() - start)
      start = time.perf_counter()
      again, _ = loaded.top_k(loaded.model_inputs(batch), 5)
      cached.append(time.perf_counter() - start)
      assert np.array_equal(ids, again)
    print(f"request of {args.batch} new texts x {len(names):,} classes: median "
          f"{1000 * statistics.median(new_text):.1f} ms (min {1000 * min(new_text):.1f}); instance "
          f"embeddings cached: median {1000 * statistics.median(cached):.1f} ms (min "
          f"{1000 * min(cached):.1f}); load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
  main()
