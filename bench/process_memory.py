"""Resident memory of this process from /proc (Linux), for the benchmarks' peak-memory columns."""


def reset_peak_rss() -> bool:
  """Resets VmHWM (the peak RSS) to the current RSS (Linux >= 4.0); False where that is not possible."""
  try:
    with open("/proc/self/clear_refs", "w") as f:
      f.write("5")
    return True
  except OSError:
    return False


def rss(key: str) -> int | None:
  """VmRSS (current) or VmHWM (peak) of this process in bytes, from /proc/self/status."""
  try:
    with open("/proc/self/status") as f:
      for line in f:
        if line.startswith(key + ":"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return None
