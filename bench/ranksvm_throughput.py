"""Benchmark: throughput and memory of the RankSVM trainer (`pairwise.ranksvm.ranksvm`) on synthetic ranking
lists.

Generates --num_queries lists of --list_size documents with --num_features features (Gaussian, with
per-feature offsets and scales so that standardization matters) and graded relevance 0..3: the quartile of a
hidden linear score plus Gaussian noise. After an untimed warm-up on a few queries (TF start-up, kernel
loading) it times:

  transform  `pair_transform.pairs_within_queries` + `pairwise_differences` (best of --repeats), pairs/s.
  full       `ranksvm.train_ranksvm(lists, RankSVMConfig(batch_size=None))`: the Newton solver
             (`pairwise.ranksvm.ranksvm_solver`) to --tolerance (at most --max_iterations), pair-iterations/s.
  minibatch  `train_ranksvm` with `RankSVMConfig(batch_size=B, num_epochs=E)` (tf.data), pairs/s.

Both trainer rows are end to end (standardization, pair indices, tracing of the step function included); each
has a "marginal" row, the difference to the faster of two 1-iteration (1-epoch) runs, which leaves out those
fixed costs ("-" where noise makes it negative); the short runs' "not converged" warnings are not shown. How
each solver ended (iterations, relative duality gap, converged) is printed below the table. Every row gives
wall and process CPU seconds (user + system, all threads): on a shared machine the CPU figures are the stable
ones. "RSS start → phase peak" is the resident set before the phase and its peak during it (VmHWM reset
through /proc/self/clear_refs first). The mini-batch phase runs first, before any differences are
materialized; memory the allocator keeps from one phase can still hide what a later one needs, so for clean
per-phase figures run one phase per process (--phases). The process peak is ru_maxrss (which those resets
lower on Linux, so the phase peaks count too). The held-out pair accuracy
(`rank4class_engine.statistics.ranking_metrics.pair_accuracy`, mean over queries) of each trained model on a
second synthetic set (same hidden weights) is a sanity check (> 0.6).

  python bench/ranksvm_throughput.py
  python bench/ranksvm_throughput.py --phases=full    # one phase alone: its own memory figure
  python bench/ranksvm_throughput.py --num_queries=5000 --list_size=40 --num_epochs=2
"""

import argparse
import contextlib
import dataclasses
import io
import os
import resource
import sys
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import process_memory  # noqa: E402  (bench/ is sys.path[0] when this file runs)

from pairwise.ranksvm import pair_transform, ranksvm  # noqa: E402
from rank4class_data.ranking.feature_lists import FeatureLists  # noqa: E402
from rank4class_engine.statistics import ranking_metrics  # noqa: E402

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf  # noqa: E402

_MIB = 1024 * 1024
PHASES = ("transform", "full", "minibatch")  # Table order.
DEFAULT_PHASES = "minibatch,transform,full"  # Run order: see the memory note in the module docstring.


@dataclasses.dataclass
class Timing:
  wall_s: float
  cpu_s: float


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


def heldout_pair_accuracy(model: tf.keras.Model, lists: FeatureLists) -> float:
  """Mean over queries of `ranking_metrics.pair_accuracy` (pessimistic ties) of the model's scores."""
  scores, mask = ranking_metrics.ragged_to_padded(ranksvm.score_rows(model, lists.features),
                                                  lists.list_offsets)
  labels, _ = ranking_metrics.ragged_to_padded(lists.relevance, lists.list_offsets)
  return float(np.nanmean(ranking_metrics.pair_accuracy(labels, scores, mask)))


def measure(fn: Callable[..., object], *args) -> tuple[object, Timing]:
  """Runs fn(*args); its wall and process CPU seconds."""
  wall, cpu = time.perf_counter(), time.process_time()
  result = fn(*args)
  return result, Timing(time.perf_counter() - wall, time.process_time() - cpu)


def _rate(work: float, seconds: float) -> str:
  return f"{work / seconds:,.0f}" if seconds > 0 else "-"


def _row(name: str, work: float, unit: str, timing: Timing,
         memory: tuple[int | None, int | None] = (None, None)) -> str:
  rss = "-" if None in memory else f"{memory[0] / _MIB:,.0f} → {memory[1] / _MIB:,.0f}"
  return (f"| {name} | {work:,.0f} {unit} | {timing.wall_s:.2f} | {timing.cpu_s:.2f} | "
          f"{_rate(work, timing.wall_s)} | {_rate(work, timing.cpu_s)} | {rss} |")


def _marginal(long: Timing, short: Timing) -> Timing:
  return Timing(long.wall_s - short.wall_s, long.cpu_s - short.cpu_s)


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--num_queries", type=int, default=2000)
  parser.add_argument("--list_size", type=int, default=20)
  parser.add_argument("--num_features", type=int, default=32)
  parser.add_argument("--noise", type=float, default=0.5, help="Noise std; the hidden score has variance 1.")
  parser.add_argument("--heldout_queries", type=int, default=500)
  parser.add_argument("--c", type=float, default=1.0, help="SVM trade-off C.")
  parser.add_argument("--loss", default="hinge", choices=ranksvm.LOSS_NAMES)
  parser.add_argument("--tolerance", type=float, default=1e-6, help="Newton: relative duality gap to reach.")
  parser.add_argument("--max_iterations", type=int, default=200, help="Newton steps at most.")
  parser.add_argument("--batch_size", type=int, default=1024, help="Pairs per mini-batch step.")
  parser.add_argument("--num_epochs", type=int, default=5)
  parser.add_argument("--repeats", type=int, default=3, help="Runs of the pair transform (best is kept).")
  parser.add_argument("--phases", default=DEFAULT_PHASES,
                      help=f"Comma-separated, run in this order, from {PHASES}.")
  parser.add_argument("--threads", type=int, default=0, help="TF intra/inter-op threads; 0: TF default.")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  phases = [phase for phase in args.phases.split(",") if phase]
  if not phases or set(phases) - set(PHASES):
    parser.error(f"--phases must name some of {PHASES}, got {args.phases!r}.")
  if min(args.num_queries, args.heldout_queries, args.max_iterations, args.num_epochs, args.repeats) < 1:
    parser.error("--num_queries, --heldout_queries, --max_iterations, --num_epochs and --repeats must be "
                 ">= 1.")
  if args.list_size < 2:
    parser.error("--list_size must be >= 2 to form pairs.")
  # Every train_ranksvm call builds new tf.functions by design; TF's retracing warning about it is noise here.
  tf.get_logger().setLevel("ERROR")
  if args.threads:
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
  load_before = os.getloadavg()

  hidden = np.random.default_rng(args.seed).normal(size=args.num_features)
  hidden /= np.linalg.norm(hidden)
  train = synthetic_lists(args.num_queries, args.list_size, hidden, args.noise, args.seed + 10, "train-")
  heldout = synthetic_lists(args.heldout_queries, args.list_size, hidden, args.noise, args.seed + 20, "held-")
  common = {"c": args.c, "loss": args.loss, "tolerance": args.tolerance, "seed": args.seed}
  configs = {
      "full": ranksvm.RankSVMConfig(batch_size=None, max_iterations=args.max_iterations, **common),
      "minibatch": ranksvm.RankSVMConfig(batch_size=args.batch_size, num_epochs=args.num_epochs, **common),
  }
  # Fixed costs + 1 iteration / epoch.
  short = {"full": {"max_iterations": 1}, "minibatch": {"num_epochs": 1}}

  def quiet_train(lists: FeatureLists, config: ranksvm.RankSVMConfig) -> ranksvm.RankSVMResult:
    with contextlib.redirect_stderr(io.StringIO()):  # The short runs' "not converged" lines.
      return ranksvm.train_ranksvm(lists, config)

  # Warm-up on a few queries: TF start-up and kernel loading. Each train_ranksvm call still traces its step
  # function anew; the marginal rows leave that out.
  small = train.select(list(range(min(20, args.num_queries))))
  for phase in phases:
    if phase in configs:
      quiet_train(small, dataclasses.replace(configs[phase], **short[phase]))
  baseline_rss = process_memory.rss("VmRSS")
  max_rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Before any VmHWM reset lowers it.

  def transform(standardized: np.ndarray) -> int:
    pairs = pair_transform.pairs_within_queries(train.relevance, train.list_offsets, train.query_ids,
                                                seed=args.seed)
    x, _ = pair_transform.pairwise_differences(standardized, pairs)
    return x.shape[0]

  timings: dict[str, tuple[Timing, Timing | None]] = {}
  memory: dict[str, tuple[int | None, int | None]] = {}  # Phase -> (RSS before it, peak RSS during it).
  accuracy: dict[str, float] = {}
  solvers: dict[str, dict] = {}  # Phase -> the trained model's solver report.
  num_pairs = None
  for phase in phases:
    start_rss = process_memory.rss("VmRSS")
    reset = process_memory.reset_peak_rss()
    short_time = None
    if phase == "transform":
      # The trainer transforms standardized features; so does this phase.
      mean, scale, _ = ranksvm.standardization(train.features)
      standardized = ((train.features - mean) / scale).astype(np.float32)
      runs = [measure(transform, standardized) for _ in range(args.repeats)]
      count, best = min(runs, key=lambda run: run[1].wall_s)
      del standardized
    else:
      # The short run twice, keeping the faster: the first call on the full-size data is slower (page faults,
      # allocator growth), which would otherwise pass for fixed cost.
      short_config = dataclasses.replace(configs[phase], **short[phase])
      short_time = min((measure(quiet_train, train, short_config)[1] for _ in range(2)),
                       key=lambda timing: timing.wall_s)
      result, best = measure(ranksvm.train_ranksvm, train, configs[phase])
      count = result.num_pairs
      accuracy[phase] = heldout_pair_accuracy(result.model, heldout)
      solvers[phase] = result.solver
      del result
    memory[phase] = (start_rss, process_memory.rss("VmHWM") if reset else None)
    assert num_pairs is None or count == num_pairs, (phase, count, num_pairs)
    num_pairs = count
    timings[phase] = (best, short_time)
  load_after = os.getloadavg()

  epochs, batch = args.num_epochs, args.batch_size
  steps = solvers["full"]["iterations"] if "full" in solvers else 0
  print(f"{args.num_queries:,} queries x {args.list_size} docs x {args.num_features} features -> "
        f"{num_pairs:,} pairs ({num_pairs * args.num_features * 4 / _MIB:,.0f} MiB of float32 differences "
        f"when materialized; pair indices + signs {num_pairs * 20 / _MIB:,.0f} MiB); {os.cpu_count()} CPU "
        f"cores; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after.")
  if baseline_rss is not None:
    print(f"RSS after data generation and warm-up: {baseline_rss / _MIB:,.0f} MiB.")
  print()
  print("| phase | work | wall s | CPU s | per wall s | per CPU s | RSS start → phase peak MiB |")
  print("|---|---:|---:|---:|---:|---:|---:|")
  for phase in PHASES:
    if phase not in timings:
      continue
    best, short_time = timings[phase]
    if phase == "transform":
      print(_row(f"pair transform (best of {args.repeats})", num_pairs, "pairs", best, memory[phase]))
    elif phase == "full":
      print(_row(f"Newton, {steps} iterations, end to end", num_pairs * steps, "pair-iterations", best,
                 memory[phase]))
      if steps > 1:
        print(_row(f"Newton, marginal ({steps} - 1 iterations)", num_pairs * (steps - 1), "pair-iterations",
                   _marginal(best, short_time)))
    else:
      print(_row(f"mini-batch {batch}, {epochs} epochs, end to end", num_pairs * epochs, "pairs", best,
                 memory[phase]))
      if epochs > 1:
        print(_row(f"mini-batch {batch}, marginal ({epochs} - 1 epochs)", num_pairs * (epochs - 1), "pairs",
                   _marginal(best, short_time)))
  print()
  # Linux reports ru_maxrss in KiB and lowers it with each VmHWM reset, so take the phase peaks into account.
  max_rss = max([max_rss_kib * 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024]
                + [peak for _, peak in memory.values() if peak is not None])
  print(f"Process peak RSS (ru_maxrss and the phase peaks): {max_rss / _MIB:,.0f} MiB.")
  for phase, report in solvers.items():
    print(f"{phase}: {report['method']}, {report['iterations']} iterations/steps, primal objective "
          f"{report['primal_objective']:.10g}, relative duality gap {report['relative_gap']:.3g} (tolerance "
          f"{report['tolerance']:.3g}): {'converged' if report['converged'] else 'NOT converged'}.")
  if accuracy:
    print(f"Held-out pair accuracy ({args.heldout_queries:,} queries): "
          + ", ".join(f"{name} {value:.4f}" for name, value in accuracy.items()) + ".")
  for name, value in accuracy.items():
    assert value > 0.6, f"{name} held-out pair accuracy {value:.4f} <= 0.6: the trainer did not learn."
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
