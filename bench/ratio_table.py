"""The table the engine benchmarks print: each variant's median seconds, throughput, ratio to the first
variant (the bare fit) and fixed cost over the steady rate."""

import statistics


def print_ratio_table(results: dict[str, list[float]], steady_seconds: float, work: float, unit: str) -> None:
  """Prints a Markdown table.

  Args:
    results: Variant name -> wall seconds of each repetition; the first variant is the baseline.
    steady_seconds: Seconds of the same work in a second call on a warm model (no tracing): a run's share at
      the steady rate, subtracted to give the fixed cost.
    work: Units of work per run (examples, or steps).
    unit: Throughput column header, e.g. "examples/s".
  """
  print(f"| variant | seconds | {unit} | ratio to bare fit | fixed cost (s) |")
  print("|---|---:|---:|---:|---:|")
  baseline = statistics.median(next(iter(results.values())))
  for name, values in results.items():
    seconds = statistics.median(values)
    print(f"| {name} | {seconds:.2f} | {work / seconds:,.0f} | {baseline / seconds:.2f} | "
          f"{seconds - steady_seconds:.2f} |")
  print(f"| bare fit, second call (steady) | {steady_seconds:.2f} | {work / steady_seconds:,.0f} | "
        f"{baseline / steady_seconds:.2f} | 0.00 |")
