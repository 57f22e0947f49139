"""Training progress: a line on the terminal (step, loss, examples/s, ETA, last validation) and a JSON log."""

import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

import tensorflow as tf


def format_duration(seconds: float) -> str:
  """`75.2` -> "1:15", `3725` -> "1:02:05", NaN or inf -> "?"."""
  if not math.isfinite(seconds) or seconds < 0:
    return "?"
  minutes, secs = divmod(int(round(seconds)), 60)
  hours, minutes = divmod(minutes, 60)
  return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_line(step: int, total_steps: int, loss: float | None, examples_per_second: float | None,
                  eta_seconds: float | None, validation: Mapping[str, float] | None = None,
                  best: tuple[str, float, int] | None = None) -> str:
  """One progress line, e.g. `step 200/600 (33%)  loss 0.4127  5,120 ex/s  ETA 0:42  val ndcg_5=0.9731`.

  Args:
    step: Optimizer steps done.
    total_steps: Steps the run will take.
    loss: Mean training loss since the last validation, or None.
    examples_per_second: Training throughput, or None before it is known.
    eta_seconds: Seconds left, or None before it is known.
    validation: The last validation metrics to show (already chosen), or None.
    best: (metric, value, step) of the best validation so far, or None.
  """
  parts = [f"step {step}/{total_steps} ({100 * step / max(total_steps, 1):.0f}%)"]
  if loss is not None and math.isfinite(loss):
    parts.append(f"loss {loss:.4f}")
  if examples_per_second is not None:
    parts.append(f"{examples_per_second:,.0f} ex/s")
  if eta_seconds is not None:
    parts.append(f"ETA {format_duration(eta_seconds)}")
  if validation:
    parts.append("val " + " ".join(f"{k}={v:.4f}" for k, v in validation.items()))
  if best is not None:
    parts.append(f"best {best[0]}={best[1]:.4f} @{best[2]}")
  return "  ".join(parts)


def truncate_log(path: str, length: int) -> None:
  """Cuts the JSON log at `path` back to `length` bytes (what it held at a checkpoint), so a resumed run's events
  follow the checkpoint's instead of repeating the ones logged after it."""
  if os.path.exists(path) and os.path.getsize(path) > length:
    with open(path, "r+b") as f:
      f.truncate(length)


class ProgressReporter(tf.keras.callbacks.Callback):
  """Shows training progress on the terminal and appends events to a JSON-lines log.

  The terminal line is rewritten in place (carriage return) at most every `interval_seconds` on a TTY; when
  the stream is not a TTY (a log file, CI), a full line is printed at most every `interval_seconds * 10` and
  after every validation. Throughput is measured from the end of the first execution, so tracing is not
  counted. Reads the step from the optimizer, so a resumed run continues its count.

  Log events (one JSON object per line): `train_begin` (step, total_steps), `eval` (step, loss, the
  validation metrics, examples/s; written by `record_validation`), `train_end` (step, seconds).

  Args:
    total_steps: Steps the run will take in all.
    global_batch_size: Examples per step over all replicas (for examples/s).
    log_path: JSON-lines file to append to, or None.
    shown_metrics: Validation metric names to show on the line (the best metric first).
    best: Callable returning (metric, value, step) of the best validation so far, or None.
    verbose: 0 writes the log only; 1 also the terminal line.
    stream: Where the line goes (default stderr, so a binary's results on stdout stay machine-readable).
    interval_seconds: Minimum seconds between two terminal updates.
  """

  def __init__(self, total_steps: int, global_batch_size: int, log_path: str | None = None,
               shown_metrics: tuple[str, ...] = (), best: Callable[[], tuple[str, float, int] | None] | None = None,
               verbose: int = 1, stream: TextIO | None = None, interval_seconds: float = 1.0):
    super().__init__()
    self._total_steps = total_steps
    self._batch_size = global_batch_size
    self._log_path = log_path
    self._shown = shown_metrics
    self._best = best or (lambda: None)
    self._verbose = verbose
    self._stream = stream or sys.stderr
    self._interval = interval_seconds
    self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
    self.initial_step = 0
    self.examples_per_second: float | None = None
    self._timing_start: tuple[float, int] | None = None
    self._last_print = 0.0
    self._validation: dict[str, float] = {}
    self._open_line = False
    # Batch logs stay tensors (no host sync per execution); the loss is read only when a line is printed.
    self._supports_tf_logs = True

  def _step(self) -> int:
    return int(tf.keras.backend.get_value(self.model.optimizer.iterations))

  def log(self, record: dict[str, Any]) -> None:
    if self._log_path is not None:
      with open(self._log_path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")

  def _rate_and_eta(self, step: int) -> tuple[float | None, float | None]:
    if self._timing_start is None or step <= self._timing_start[1]:
      return None, None
    start_time, start_step = self._timing_start
    steps_per_second = (step - start_step) / max(time.perf_counter() - start_time, 1e-9)
    return steps_per_second * self._batch_size, (self._total_steps - step) / steps_per_second

  def _show(self, step: int, loss: float | None, final: bool) -> None:
    if not self._verbose:
      return
    rate, eta = self._rate_and_eta(step)
    line = progress_line(step, self._total_steps, loss, rate, eta, self._validation, self._best())
    if self._tty:
      self._stream.write("\r\x1b[2K" + line + ("\n" if final else ""))
      self._open_line = not final
    else:
      self._stream.write(line + "\n")
    self._stream.flush()
    self._last_print = time.perf_counter()

  def on_train_begin(self, logs=None):
    self.initial_step = self._step()
    self._started = time.perf_counter()
    self.log({"event": "train_begin", "step": self.initial_step, "total_steps": self._total_steps,
              "time": time.time()})
    if self._verbose and self.initial_step:
      self._stream.write(f"Resuming at step {self.initial_step} of {self._total_steps}.\n")

  def on_train_batch_end(self, batch, logs=None):
    if self._timing_start is None:
      self._timing_start = (time.perf_counter(), self._step())  # After the first execution: tracing excluded.
      return
    interval = self._interval if self._tty else self._interval * 10
    if self._verbose and time.perf_counter() - self._last_print >= interval:
      loss = (logs or {}).get("loss")
      self._show(self._step(), None if loss is None else float(loss), final=False)

  def record_validation(self, step: int, logs: Mapping[str, float]) -> None:
    """Logs an `eval` event (the training logs since the last validation and the validation metrics) and shows a
    full line; the engine calls it at every validation step."""
    logs = {k: float(v) for k, v in logs.items()}
    self._validation = {name: logs[f"val_{name}"] for name in self._shown if f"val_{name}" in logs}
    rate, _ = self._rate_and_eta(step)
    self.examples_per_second = rate if rate is not None else self.examples_per_second
    self.log({"event": "eval", "step": step, "examples_per_second": rate, **logs})
    self._show(step, logs.get("loss"), final=True)

  def log_bytes(self) -> int:
    """The length of the JSON log now (0 without one): a checkpoint records it, a resume truncates to it."""
    if self._log_path is None or not os.path.exists(self._log_path):
      return 0
    return os.path.getsize(self._log_path)

  def close_line(self) -> None:
    """Ends a progress line left open on a TTY (before another message, e.g. after Ctrl-C)."""
    if self._open_line:
      self._stream.write("\n")
      self._stream.flush()
      self._open_line = False

  def on_train_end(self, logs=None):
    self.close_line()
    self.log({"event": "train_end", "step": self._step(), "seconds": time.perf_counter() - self._started,
              "time": time.time()})
