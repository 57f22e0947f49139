"""Benchmark: full-batch RankSVM (`pairwise.ranksvm.ranksvm`, default settings) against LightGBM's lambdarank,
one run.

Generates --num_queries training lists (default 5,000 × 20 documents = 100k rows) and --heldout_queries
held-out lists of --num_features features, with graded relevance 0..4: a hidden linear score of the features
plus Gaussian noise (and, with --nonlinear > 0, that weight of a nonlinear term: products and absolute values
of feature pairs), cut at global quantiles so that grades 0..4 take 40, 25, 15, 12 and 8 % of the documents,
as in web-search sets where most documents are irrelevant. Features get per-column offsets and scales spanning
orders of magnitude (RankSVM standardizes them; trees do not care). At --nonlinear=0 the linear ranker is the
right model class, so this compares the two solvers where a linear model is the honest choice; raise
--nonlinear to see what trees gain when it is not.

After an untimed warm-up on a few queries (TensorFlow start-up, the scorer model's first build, LightGBM's
library load) it times, side by side:

  ranksvm   `ranksvm.train_ranksvm(train, RankSVMConfig())`: what `pairwise-ranksvm --mode=train` runs on the
            loaded rows (standardization, within-query pairs, the Newton solver of
            `pairwise.ranksvm.ranksvm_solver` to its certified duality gap, the Keras scorer), all at the
            defaults: C=1, hinge, tolerance 1e-6, at most 200 Newton iterations, full batch.
  lightgbm  `lightgbm.LGBMRanker(objective="lambdarank")` at its defaults (100 trees of 31 leaves, learning
            rate 0.1, all cores), `fit` on the same rows and query groups; and again with n_jobs=1, since
            on a busy machine OpenMP's threads can make the default several times slower, not faster.

Each row reports wall and process CPU seconds (best of --repeats), NDCG@10 on the held-out queries
(`rank4class_engine.statistics.ranking_metrics.ndcg`, exponential gain, ties counted pessimistically, queries
without a relevant document left out), and memory. Memory: RankSVM is run once more under `tracemalloc` (NumPy
reports its buffers to it), giving the peak bytes allocated above what was live at the start of
`train_ranksvm` (end to end) and of `ranksvm_solver.solve` (the solver alone), as multiples of the training
data, rows × features × 8 bytes (float64, the dtype the solver works in; the float32 input is half that).
LightGBM allocates in C++, out of tracemalloc's sight; for both the rise of the resident set during the timed
fit (VmHWM reset through /proc/self/clear_refs) is printed as well, a rough figure (the allocator reuses
memory freed earlier). The solver's convergence (iterations, relative duality gap against its tolerance) is
printed below the table.

LightGBM is an optional dependency (`pip install lightgbm`, or the "bench" extra of setup.py); without it
the LightGBM row is left out.

  python bench/ranksvm_vs_lightgbm.py
  python bench/ranksvm_vs_lightgbm.py --nonlinear=0.5        # a target trees can model better
  python bench/ranksvm_vs_lightgbm.py --num_queries=1000     # a quick run
"""

import argparse
import contextlib
import dataclasses
import io
import os
import sys
import time
import tracemalloc
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import process_memory  # noqa: E402  (bench/ is sys.path[0] when this file runs)

from pairwise.ranksvm import ranksvm, ranksvm_solver  # noqa: E402
from rank4class_data.ranking.feature_lists import FeatureLists  # noqa: E402
from rank4class_engine.statistics import ranking_metrics  # noqa: E402

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf  # noqa: E402

try:
  import lightgbm  # noqa: E402
except ImportError:  # Optional: the comparison row is left out.
  lightgbm = None

_MIB = 1024 * 1024
GRADE_SHARES = (0.40, 0.25, 0.15, 0.12, 0.08)  # Documents per grade 0..4.
NDCG_CUTOFF = 10


@dataclasses.dataclass
class Timing:
  wall_s: float
  cpu_s: float


def synthetic_lists(num_queries: int, list_size: int, hidden: np.ndarray, noise: float, nonlinear: float,
                    seed: int, prefix: str) -> FeatureLists:
  """Lists graded 0..4 (`GRADE_SHARES`) by global quantiles of z·hidden + nonlinear·g(z) + noise·ε."""
  rng = np.random.default_rng(seed)
  num_features = hidden.shape[0]
  num_rows = num_queries * list_size
  z = rng.normal(size=[num_rows, num_features])
  score = z @ hidden + noise * rng.normal(size=num_rows)
  if nonlinear:
    # Interactions and a V shape: no linear function of z captures them; scaled to unit variance.
    score += nonlinear * (z[:, 0] * z[:, 1] + (np.abs(z[:, 2]) - np.sqrt(2 / np.pi)) / np.sqrt(1 - 2 / np.pi)
                          + z[:, 3] * z[:, 4]) / np.sqrt(3.0)
  relevance = np.digitize(score, np.quantile(score, np.cumsum(GRADE_SHARES)[:-1]))
  # Offsets and scales spanning orders of magnitude (from the hidden weights' seed: the same for every split).
  offset = np.random.default_rng(int(hidden.size) + 1).normal(size=num_features) * 10.0
  scale = np.exp(np.random.default_rng(int(hidden.size) + 2).normal(size=num_features))
  return FeatureLists(
      features=(z * scale + offset).astype(np.float32), relevance=relevance.astype(np.float32),
      list_offsets=np.arange(0, num_rows + 1, list_size, dtype=np.int64),
      query_ids=[f"{prefix}q{q}" for q in range(num_queries)],
      doc_ids=[f"{prefix}d{i}" for i in range(num_rows)],
      feature_names=[f"f{j}" for j in range(num_features)])


def heldout_ndcg(lists: FeatureLists, scores: np.ndarray) -> float:
  """Mean NDCG@10 over held-out lists with a relevant document (exponential gain, pessimistic ties)."""
  labels, mask = ranking_metrics.ragged_to_padded(lists.relevance, lists.list_offsets)
  padded, _ = ranking_metrics.ragged_to_padded(scores, lists.list_offsets)
  values = ranking_metrics.ndcg(labels, padded, mask, topn=NDCG_CUTOFF)
  return float(np.nanmean(values))


def timed(fn: Callable[[], object], repeats: int) -> tuple[object, Timing, int | None]:
  """The result of the fastest of `repeats` calls of fn(), its wall and CPU seconds, and the largest rise of
  the resident set during a call (None where /proc cannot tell)."""
  best, result, rise = None, None, None
  for _ in range(repeats):
    start_rss = process_memory.rss("VmRSS") if process_memory.reset_peak_rss() else None
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    timing = Timing(time.perf_counter() - wall, time.process_time() - cpu)
    peak = process_memory.rss("VmHWM")
    if start_rss is not None and peak is not None:
      rise = max(rise or 0, peak - start_rss)
    if best is None or timing.wall_s < best.wall_s:
      best, result = timing, value
  return result, best, rise


def traced_ranksvm(lists: FeatureLists, config: ranksvm.RankSVMConfig) -> tuple[int, int]:
  """Peak bytes NumPy and Python allocate above the start: (train_ranksvm end to end, the solver alone)."""
  solve = ranksvm_solver.solve
  marks = {}

  def traced_solve(*args, **kwargs):
    current, marks["before_solver"] = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    try:
      return solve(*args, **kwargs)
    finally:
      marks["solver"] = tracemalloc.get_traced_memory()[1] - current

  tracemalloc.start()
  ranksvm.ranksvm_solver.solve = traced_solve
  try:
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    with contextlib.redirect_stderr(io.StringIO()):
      ranksvm.train_ranksvm(lists, config)
    # The peak since the solver started, or the one before it (reset_peak inside the solver forgot that one).
    end_to_end = max(tracemalloc.get_traced_memory()[1], marks["before_solver"]) - base
  finally:
    ranksvm.ranksvm_solver.solve = solve
    tracemalloc.stop()
  return end_to_end, marks["solver"]


def _row(name: str, timing: Timing, ndcg: float, memory: str, rss_rise: int | None, notes: str) -> str:
  rss = "-" if rss_rise is None else f"{rss_rise / _MIB:,.0f}"
  return (f"| {name} | {timing.wall_s:.2f} | {timing.cpu_s:.2f} | {ndcg:.4f} | {memory} | {rss} | {notes} |")


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--num_queries", type=int, default=5000, help="Training queries.")
  parser.add_argument("--list_size", type=int, default=20, help="Documents per query.")
  parser.add_argument("--num_features", type=int, default=50)
  parser.add_argument("--heldout_queries", type=int, default=1000)
  parser.add_argument("--noise", type=float, default=0.5,
                      help="Noise std; the hidden linear score has variance 1.")
  parser.add_argument("--nonlinear", type=float, default=0.0,
                      help="Weight of a unit-variance nonlinear term in the hidden score (0: linear).")
  parser.add_argument("--repeats", type=int, default=1, help="Timed runs of each trainer (best is kept).")
  parser.add_argument("--memory", type=int, default=1, help="1: one more RankSVM run under tracemalloc.")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  if min(args.num_queries, args.heldout_queries, args.repeats, args.num_features) < 1:
    parser.error("--num_queries, --heldout_queries, --repeats and --num_features must be >= 1.")
  if args.list_size < 2:
    parser.error("--list_size must be >= 2 to form pairs.")
  if args.nonlinear and args.num_features < 5:
    parser.error("--nonlinear needs --num_features >= 5.")
  tf.get_logger().setLevel("ERROR")
  load_before = os.getloadavg()

  hidden = np.random.default_rng(args.seed).normal(size=args.num_features)
  hidden /= np.linalg.norm(hidden)
  train = synthetic_lists(args.num_queries, args.list_size, hidden, args.noise, args.nonlinear,
                          args.seed + 10, "train-")
  heldout = synthetic_lists(args.heldout_queries, args.list_size, hidden, args.noise, args.nonlinear,
                            args.seed + 20, "held-")
  config = ranksvm.RankSVMConfig()  # The defaults of `pairwise-ranksvm`: full batch, Newton.

  def fit_ranksvm(lists: FeatureLists = train) -> ranksvm.RankSVMResult:
    with contextlib.redirect_stderr(io.StringIO()) as stderr:
      result = ranksvm.train_ranksvm(lists, config)
    sys.stderr.write(stderr.getvalue())  # An unconverged run's warning, shown.
    return result

  def fit_lightgbm(lists: FeatureLists = train, threads: int = -1):
    ranker = lightgbm.LGBMRanker(objective="lambdarank", random_state=args.seed, verbose=-1, n_jobs=threads)
    return ranker.fit(lists.features, lists.relevance, group=np.diff(lists.list_offsets))

  small = train.select(list(range(min(20, args.num_queries))))
  with contextlib.redirect_stderr(io.StringIO()):
    fit_ranksvm(small)
  if lightgbm is not None:
    fit_lightgbm(small)

  svm, svm_time, svm_rss = timed(fit_ranksvm, args.repeats)
  svm_ndcg = heldout_ndcg(heldout, ranksvm.score_rows(svm.model, heldout.features))
  lgb = {}  # Threads -> (timing, NDCG, RSS rise).
  if lightgbm is not None:
    for threads in (-1, 1):
      trees, lgb_time, lgb_rss = timed(lambda threads=threads: fit_lightgbm(train, threads), args.repeats)
      lgb[threads] = (lgb_time, heldout_ndcg(heldout, trees.predict(heldout.features)), lgb_rss)
  traced = traced_ranksvm(train, config) if args.memory else None
  load_after = os.getloadavg()

  data_bytes = train.features.shape[0] * train.features.shape[1] * 8
  memory = "-" if traced is None else (f"{traced[0] / _MIB:,.0f} MiB = {traced[0] / data_bytes:.2f}x "
                                       f"(solver {traced[1] / _MIB:,.0f} MiB = "
                                       f"{traced[1] / data_bytes:.2f}x)")
  report = svm.solver
  print(f"{args.num_queries:,} training queries x {args.list_size} documents x {args.num_features} features "
        f"= {train.features.shape[0]:,} rows ({data_bytes / _MIB:,.1f} MiB as float64), {svm.num_pairs:,} "
        f"pairs; {args.heldout_queries:,} held-out queries; nonlinear weight {args.nonlinear:g}, noise "
        f"{args.noise:g}; {os.cpu_count()} CPU cores; load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after; numpy {np.__version__}, tensorflow {tf.__version__}"
        + (f", lightgbm {lightgbm.__version__}." if lightgbm is not None else "; lightgbm not installed."))
  print()
  print(f"| trainer | wall s | CPU s | NDCG@{NDCG_CUTOFF} held out | peak traced memory above the start "
        "(x float64 data) | RSS rise MiB | notes |")
  print("|---|---:|---:|---:|---|---:|---|")
  print(_row("RankSVM, defaults (full batch, Newton)", svm_time, svm_ndcg, memory, svm_rss,
             f"{report['iterations']} iterations, relative gap {report['relative_gap']:.2g} "
             f"({'converged' if report['converged'] else 'NOT converged'})"))
  names = {-1: "LightGBM lambdarank, defaults (100 trees, all cores)", 1: "LightGBM lambdarank, n_jobs=1"}
  for threads, (lgb_time, lgb_ndcg, lgb_rss) in lgb.items():
    print(_row(names[threads], lgb_time, lgb_ndcg, "-", lgb_rss, "100 trees of 31 leaves"))
  if lgb:
    print()
  for threads, (lgb_time, lgb_ndcg, _) in lgb.items():
    print(f"RankSVM / {names[threads].split(',')[0]}{' n_jobs=1' if threads == 1 else ''}: seconds "
          f"{svm_time.wall_s / lgb_time.wall_s:.2f}x wall, {svm_time.cpu_s / lgb_time.cpu_s:.2f}x CPU (speed "
          f"{lgb_time.wall_s / svm_time.wall_s:.2f}x LightGBM's); NDCG@{NDCG_CUTOFF} {svm_ndcg:.4f} against "
          f"{lgb_ndcg:.4f} ({svm_ndcg - lgb_ndcg:+.4f}).")
  print(f"Solver: {report['method']}, {report['iterations']} iterations, {report['seconds']:.2f} s, primal "
        f"objective {report['primal_objective']:.10g}, duality gap {report['duality_gap']:.3g}, relative "
        f"{report['relative_gap']:.3g} (tolerance {report['tolerance']:.3g}): "
        f"{'converged' if report['converged'] else 'NOT converged'}.")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
