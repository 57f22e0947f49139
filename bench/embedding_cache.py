"""Benchmark: `rank4class-predict` on texts the embedding cache holds, against the model's own time.

Exports a Rank4Class model trained-on-frozen-embeddings style (its input: a text encoder's vectors, recorded
in the export as `rank4class-train` does), stores one vector per text in a fresh embedding cache (as training
leaves them), then times `rank4class.inference.predict.predict` — the code path of `rank4class-predict` — on
those texts twice, side by side after a warm-up: through the cache, and with the vectors handed over from
memory (the model's own time: reading rows, scoring, writing predictions). Also times the raw lookup and the
encoder on a sample of misses, for scale.

  python bench/embedding_cache.py
  python bench/embedding_cache.py --num_texts=100000 --batch_size=1024
"""

import argparse
import os
import sys
import tempfile
import time
from unittest import mock

import numpy as np

from rank4class.inference import predict, serving
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_encoders import bert_conversion, embedding_cache, text_embeddings, text_encoder

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf

NUM_CLASSES = 8
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "grain", "crude", "oil", "ship", "trade",
         "earn", "money"]


def _export(root: str, encoder: text_encoder.TextEncoderConfig, dim: int) -> str:
  model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(128,)),
                                    class_encoders.get("one_hot", num_classes=NUM_CLASSES),
                                    interactions.get("dot"),
                                    class_names=[f"class_{i}" for i in range(NUM_CLASSES)])
  model(tf.zeros([2, dim]))
  return serving.export_saved_model(model, os.path.join(root, "export"), frozen_text_encoder=encoder)


def _best(run, repeats: int) -> float:
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
  return min(times)


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--num_texts", type=int, default=50_000)
  parser.add_argument("--batch_size", type=int, default=256, help="rank4class-predict's --batch_size")
  parser.add_argument("--dim", type=int, default=384, help="vector width (MiniLM's 384)")
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args(argv)

  with tempfile.TemporaryDirectory() as root:
    handles = bert_conversion.export_random_bert(os.path.join(root, "bert"), VOCAB, hidden_size=args.dim,
                                                 num_layers=1, num_heads=2, intermediate_size=64)
    encoder = text_encoder.TextEncoderConfig(handles.preprocess, handles.encoder, pooling="mean",
                                             max_seq_length=32)
    export_dir = _export(root, encoder, args.dim)
    cache = os.path.join(root, "cache")
    texts = [f"document {i}: crude oil and grain trade, ship {i % 97}" for i in range(args.num_texts)]
    vectors = np.random.default_rng(0).normal(size=[len(texts), args.dim]).astype(np.float32)
    identity = embedding_cache.encoder_identity(encoder)
    start = time.perf_counter()
    embedding_cache.open_store(cache).insert(embedding_cache.text_keys(identity, texts), vectors, identity)
    stored = time.perf_counter() - start
    lines = os.path.join(root, "texts.txt")
    with open(lines, "w", encoding="utf-8") as f:
      f.write("\n".join(texts) + "\n")
    predictor = predict.Predictor(export_dir, cache)
    config = predict.PredictConfig(export_dir, lines, os.path.join(root, "p.csv"), batch_size=args.batch_size,
                                   embedding_cache_dir=cache, progress=False)
    table = dict(zip(texts, vectors, strict=True))

    def from_memory(batch, frozen, cache_dir=None):
      return np.stack([table[text] for text in batch])

    predict.predict(config, predictor)  # Warm-up: traces the scoring function.
    with mock.patch.object(embedding_cache, "compute_embeddings",
                           side_effect=AssertionError("a text was missing")):
      cached = _best(lambda: predict.predict(config, predictor), args.repeats)
    with mock.patch.object(text_embeddings, "embed_texts", side_effect=from_memory):
      own = _best(lambda: predict.predict(config, predictor), args.repeats)
    lookup = _best(lambda: text_embeddings.embed_texts(texts, encoder, cache), args.repeats)
    text_embeddings.embed_texts([f"warm-up {text}" for text in texts[:64]], encoder, cache)  # Load and trace.
    sample = [f"new {text}" for text in texts[:512]]
    start = time.perf_counter()
    text_embeddings.embed_texts(sample, encoder, cache)
    encoder_seconds = (time.perf_counter() - start) / len(sample) * len(texts)
    load = os.getloadavg()
    print(f"{len(texts):,} texts, {args.dim}-d vectors, predict batch {args.batch_size}; {os.cpu_count()} "
          f"CPU cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; stored in {stored:.2f} s")
    print(f"{'predict, vectors from memory (model own)':<46} {own:>8.2f} s")
    print(f"{'predict, vectors from the embedding cache':<46} {cached:>8.2f} s   {cached / own:.2f}x")
    print(f"{'lookup of all texts in one call':<46} {lookup:>8.2f} s")
    print(f"{'encoder (1-layer random BERT), extrapolated':<46} {encoder_seconds:>8.2f} s")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
