"""Benchmark: throughput and memory of the RankSVM trainer (`pairwise.ranksvm`) on synthetic ranking lists.

Generates --num_queries lists of --list_size documents with --num_features features (Gaussian, with per-feature
offsets and scales so that standardization matters) and graded relevance 0..3: the quartile of a hidden linear
score plus Gaussian noise. Then times, after an untimed warm-up on a few queries (TF start-up, kernel loading):

  pair transform   `pair_transform.pairs_within_queries` + `pairwise_differences` (best of --repeats), pairs/s.
  full batch       `ranksvm.train_ranksvm(lists, RankSVMConfig(batch_size=None, num_steps=N))`, pair-steps/s.
  mini-batch       `train_ranksvm` with `RankSVMConfig(batch_size=B, num_epochs=E)` (tf.data), pairs/s.

Both trainer rows are end to end (standardization, pair indices, tracing of the step function included); each
has a "marginal" row, the difference to a 1-step (1-epoch) run, which leaves out those fixed costs. Every row
gives wall and process CPU seconds (user + system, all threads): on a shared machine the CPU figures are the
stable ones. "phase peak RSS" is the peak resident set of the phase alone (VmHWM reset through
/proc/self/clear_refs before it); the mini-batch phase runs first, so memory the allocator kept from the
materialized pair set cannot inflate its figure. The held-out pair accuracy of both trained models on a second
synthetic set (same hidden weights) is a sanity check.

  python bench/ranksvm_throughput.py
  python bench/ranksvm_throughput.py --num_queries=5000 --list_size=40 --full_batch_steps=50 --num_epochs=2
"""

import argparse
import dataclasses
import os
import resource
import sys
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from pairwise import pair_transform, ranksvm  # noqa: E402
from pairwise.ranking_data import FeatureLists  # noqa: E402

_MIB = 1024 * 1024


@dataclasses.dataclass
class Timing:
  wall_s: float
  cpu_s: float
  phase_peak_rss: int | None  # bytes; None where VmHWM cannot be reset.


def synthetic_lists(num_queries: int, list_size: int, hidden: np.ndarray, noise: float, seed: int,
                    prefix: str) -> FeatureLists:
  """Lists whose relevance is the quartile (0..3) of z·hidden + noise, z the unscaled features."""
  rng = np.random.default_rng(seed)
  num_features = hidden.shape[0]
  num_rows = num_queries * list_size
  z = rng.normal(size=[num_rows, num_features])
  score = z @ hidden + noise * rng.normal(size=num_rows)
  relevance = np.digitize(score, np.quantile(score, [0.25, 0.5, 0.75]))
  # Offsets and scales spanning orders of magnitude, undone by the trainer's standardization.
  offset = np.random.default_rng(seed + 1).normal(size=num_features) * 10.0
  scale = np.exp(np.random.default_rng(seed + 2).normal(size=num_features))
  return FeatureLists(
      features=(z * scale + offset).astype(np.float32), relevance=relevance.astype(np.float32),
      list_offsets=np.arange(0, num_rows + 1, list_size, dtype=np.int64),
      query_ids=[f"{prefix}q{q}" for q in range(num_queries)],
      doc_ids=[f"{prefix}d{i}" for i in range(num_rows)],
      feature_names=[f"f{j}" for j in range(num_features)])


def pair_accuracy(model: tf.keras.Model, lists: FeatureLists) -> float:
  """Share of within-query preference pairs the model orders correctly (ties count half)."""
  scores = ranksvm.score_rows(model, lists.features)
  better, worse, _ = pair_transform.preference_pairs(lists.relevance, lists.list_offsets, unpairable="skip")
  diff = scores[better] - scores[worse]
  return float(np.mean((diff > 0) + 0.5 * (diff == 0)))


def _reset_peak_rss() -> bool:
  try:
    with open("/proc/self/clear_refs", "w") as f:
      f.write("5")  # Resets VmHWM (the peak RSS) to the current RSS; Linux >= 4.0.
    return True
  except OSError:
    return False


def _vm_hwm() -> int | None:
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith("VmHWM:"):
        return int(line.split()[1]) * 1024
  return None


def measure(fn: Callable[[], object]) -> tuple[object, Timing]:
  reset = _reset_peak_rss()
  wall, cpu = time.perf_counter(), time.process_time()
  result = fn()
  timing = Timing(time.perf_counter() - wall, time.process_time() - cpu, _vm_hwm() if reset else None)
  return result, timing


def _row(name: str, work: float, unit: str, timing: Timing) -> str:
  rss = "-" if timing.phase_peak_rss is None else f"{timing.phase_peak_rss / _MIB:,.0f}"
  return (f"| {name} | {work:,.0f} {unit} | {timing.wall_s:.2f} | {timing.cpu_s:.2f} | "
          f"{work / timing.wall_s:,.0f} | {work / max(timing.cpu_s, 1e-9):,.0f} | {rss} |")


def _marginal(long: Timing, short: Timing) -> Timing:
  return Timing(long.wall_s - short.wall_s, long.cpu_s - short.cpu_s, None)


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--num_queries", type=int, default=2000)
  parser.add_argument("--list_size", type=int, default=20)
  parser.add_argument("--num_features", type=int, default=32)
  parser.add_argument("--noise", type=float, default=0.5, help="Noise std next to a unit-variance hidden score.")
  parser.add_argument("--heldout_queries", type=int, default=500)
  parser.add_argument("--full_batch_steps", type=int, default=200)
  parser.add_argument("--batch_size", type=int, default=1024, help="Pairs per mini-batch step.")
  parser.add_argument("--num_epochs", type=int, default=3)
  parser.add_argument("--repeats", type=int, default=3, help="Runs of the pair transform (best is kept).")
  parser.add_argument("--threads", type=int, default=0, help="TF intra/inter-op threads; 0 keeps the default.")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  if min(args.num_queries, args.heldout_queries, args.full_batch_steps, args.num_epochs, args.repeats) < 1:
    parser.error("--num_queries, --heldout_queries, --full_batch_steps, --num_epochs and --repeats must be >= 1.")
  if args.list_size < 2:
    parser.error("--list_size must be >= 2 to form pairs.")
  if args.threads:
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
  load_before = os.getloadavg()

  hidden = np.random.default_rng(args.seed).normal(size=args.num_features)
  hidden /= np.linalg.norm(hidden)
  train = synthetic_lists(args.num_queries, args.list_size, hidden, args.noise, args.seed + 10, "train-")
  heldout = synthetic_lists(args.heldout_queries, args.list_size, hidden, args.noise, args.seed + 20, "heldout-")
  full_config = ranksvm.RankSVMConfig(batch_size=None, num_steps=args.full_batch_steps, seed=args.seed)
  mini_config = ranksvm.RankSVMConfig(batch_size=args.batch_size, num_epochs=args.num_epochs, seed=args.seed)

  # Warm-up on a few queries: TF start-up and kernel loading. Each train_ranksvm call still traces anew,
  # which the marginal rows leave out.
  small = train.select(list(range(min(20, args.num_queries))))
  ranksvm.train_ranksvm(small, dataclasses.replace(full_config, num_steps=2))
  ranksvm.train_ranksvm(small, dataclasses.replace(mini_config, num_epochs=1))
  baseline_rss = _vm_hwm()

  # Mini-batch first: it never materializes the differences, so its phase peak is not inflated by them.
  mini_1, mini_1_time = measure(lambda: ranksvm.train_ranksvm(train, dataclasses.replace(mini_config, num_epochs=1)))
  mini, mini_time = measure(lambda: ranksvm.train_ranksvm(train, mini_config))

  # The trainer transforms standardized features; so does this phase.
  mean, scale, _ = ranksvm.standardization(train.features)
  standardized = ((train.features - mean) / scale).astype(np.float32)

  def transform():
    pairs = pair_transform.pairs_within_queries(train.relevance, train.list_offsets, train.query_ids,
                                                seed=args.seed)
    return pair_transform.pairwise_differences(standardized, pairs)

  transform_runs = [measure(transform) for _ in range(args.repeats)]
  (x, _), transform_time = min(transform_runs, key=lambda run: run[1].wall_s)
  num_pairs, diff_bytes = x.shape[0], x.nbytes
  del x, transform_runs

  full_1, full_1_time = measure(lambda: ranksvm.train_ranksvm(train, dataclasses.replace(full_config, num_steps=1)))
  full, full_time = measure(lambda: ranksvm.train_ranksvm(train, full_config))
  assert full.num_pairs == mini.num_pairs == num_pairs, (full.num_pairs, mini.num_pairs, num_pairs)
  del mini_1, full_1

  accuracy = {"full batch": pair_accuracy(full.model, heldout), "mini-batch": pair_accuracy(mini.model, heldout)}
  load_after = os.getloadavg()

  steps, epochs = args.full_batch_steps, args.num_epochs
  print(f"{args.num_queries:,} queries x {args.list_size} docs x {args.num_features} features -> {num_pairs:,} "
        f"pairs (differences {diff_bytes / _MIB:,.0f} MiB materialized; pair indices + signs "
        f"{num_pairs * 20 / _MIB:,.0f} MiB); {os.cpu_count()} CPU cores; load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after.")
  if baseline_rss is not None:
    print(f"RSS after data generation and warm-up: {baseline_rss / _MIB:,.0f} MiB.")
  print()
  print("| phase | work | wall s | CPU s | per wall s | per CPU s | phase peak RSS MiB |")
  print("|---|---:|---:|---:|---:|---:|---:|")
  print(_row(f"pair transform (best of {args.repeats})", num_pairs, "pairs", transform_time))
  print(_row(f"full batch, {steps} steps, end to end", num_pairs * steps, "pair-steps", full_time))
  if steps > 1:
    print(_row(f"full batch, marginal ({steps} - 1 steps)", num_pairs * (steps - 1), "pair-steps",
               _marginal(full_time, full_1_time)))
  print(_row(f"mini-batch {args.batch_size}, {epochs} epochs, end to end", num_pairs * epochs, "pairs",
             mini_time))
  if epochs > 1:
    print(_row(f"mini-batch {args.batch_size}, marginal ({epochs} - 1 epochs)", num_pairs * (epochs - 1), "pairs",
               _marginal(mini_time, mini_1_time)))
  print()
  print(f"Process peak RSS (ru_maxrss): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB.")
  print("Held-out pair accuracy ({:,} queries): {}.".format(
      args.heldout_queries, ", ".join(f"{name} {value:.4f}" for name, value in accuracy.items())))
  for name, value in accuracy.items():
    assert value > 0.6, f"{name} held-out pair accuracy {value:.4f} <= 0.6: the trainer did not learn."
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
