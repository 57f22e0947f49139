"""Training progress: a line on the terminal (step, loss, recent examples/s, ETA, last validation) and a JSON
log."""

import json
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

import tensorflow as tf

from rank4class_data import write_failures
from rank4class_data.progress_line import LOG_EVERY_SECONDS, ProgressLine


def format_duration(seconds: float) -> str:
  """`75.2` -> "1:15", `3725` -> "1:02:05", NaN or inf -> "?"."""
  if not math.isfinite(seconds) or seconds < 0:
    return "?"
  minutes, secs = divmod(int(round(seconds)), 60)
  hours, minutes = divmod(minutes, 60)
  return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_line(step: int, total_steps: int, loss: float | None, examples_per_second: float | None,
                  eta_seconds: float | None, validation: Mapping[str, float] | None = None,
                  best: tuple[str, float, int] | None = None, at_most: bool = False) -> str:
  """One progress line, e.g. `step 200/600 (33%)  loss 0.4127  5,120 ex/s  ETA 0:42  val ndcg_5=0.9731`, or
  with `at_most` (validation may stop the run sooner: patience) `step 200/≤600 (33%)  ...  ETA ≤0:42`.

  Args:
    step: Optimizer steps done.
    total_steps: Steps the run will take.
    loss: Mean training loss since the last validation, or None.
    examples_per_second: Training throughput, or None before it is known.
    eta_seconds: Seconds left, or None before it is known.
    validation: The last validation metrics to show (already chosen), or None.
    best: (metric, value, step) of the best validation so far, or None.
    at_most: `total_steps` is the most the run takes, not what it will take.
  """
  bound = "≤" if at_most else ""
  parts = [f"step {step}/{bound}{total_steps} ({100 * step / max(total_steps, 1):.0f}%)"]
  if loss is not None and math.isfinite(loss):
    parts.append(f"loss {loss:.4f}")
  if examples_per_second is not None:
    parts.append(f"{examples_per_second:,.0f} ex/s")
  if eta_seconds is not None:
    parts.append(f"ETA {bound}{format_duration(eta_seconds)}")
  if validation:
    parts.append("val " + " ".join(f"{k}={v:.4f}" for k, v in validation.items()))
  if best is not None:
    parts.append(f"best {best[0]}={best[1]:.4f} @{best[2]}")
  return "  ".join(parts)


def truncate_log(path: str, length: int) -> None:
  """Cuts the JSON log at `path` back to `length` bytes (what it held at a checkpoint), so a resumed run's
  events follow the checkpoint's instead of repeating the ones logged after it."""
  if os.path.exists(path) and os.path.getsize(path) > length:
    with open(path, "r+b") as f:
      f.truncate(length)


class ProgressReporter(tf.keras.callbacks.Callback):
  """Shows training progress on the terminal and appends events to a JSON-lines log.

  The terminal line is `rank4class_data.progress_line.ProgressLine`'s: on a terminal one line rewritten in
  place at most every `interval_seconds`; in a log file, CI or a pipe one full line at most every
  `log_interval_seconds`. Either way the line is also shown after every validation, with its metrics, and the
  last step is shown once (by the last validation). Examples/s is the throughput since the previous line,
  measured over training alone (validations and checkpoints left out); the ETA divides the steps left by the
  rate since the end of the first execution (tracing left out, validations included, as the rest of the run
  will have them). Reads the step from the optimizer, so a resumed run continues its count.

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
    interval_seconds: Minimum seconds between two updates of the line on a terminal.
    log_interval_seconds: Minimum seconds between two lines off a terminal (default
      `rank4class_data.progress_line.LOG_EVERY_SECONDS`).
    eval_every: Steps between validations, whose own line replaces the periodic one at those steps; None when
      unknown.
    at_most: `total_steps` is an upper bound (validation may end the run sooner): the line says "≤".
  """

  def __init__(self, total_steps: int, global_batch_size: int, log_path: str | None = None,
               shown_metrics: tuple[str, ...] = (),
               best: Callable[[], tuple[str, float, int] | None] | None = None,
               verbose: int = 1, stream: TextIO | None = None, interval_seconds: float = 1.0,
               log_interval_seconds: float | None = None, eval_every: int | None = None,
               at_most: bool = False):
    super().__init__()
    self._at_most = at_most
    self._total_steps = total_steps
    self._batch_size = global_batch_size
    self._log_path = log_path
    self._shown = shown_metrics
    self._best = best or (lambda: None)
    self._verbose = verbose
    self._line = ProgressLine(interval_seconds, stream,
                              LOG_EVERY_SECONDS if log_interval_seconds is None else log_interval_seconds)
    self._eval_every = eval_every
    self.initial_step = 0
    self.examples_per_second: float | None = None
    self._timing_start: tuple[float, int] | None = None  # (time, step) after the first execution.
    self._window: tuple[float, int] | None = None  # (time, step) where the current examples/s window starts.
    self._window_rate: float | None = None
    self._last_batch_end = 0.0
    self._validated = False  # A validation ran in this Keras epoch: the next window starts after the epoch.
    self._validation: dict[str, float] = {}
    # Batch logs stay tensors (no host sync per execution); the loss is read only when a line is printed.
    self._supports_tf_logs = True
    # Set by a caller that runs one training as several Keras `fit` calls (a run resumed inside an epoch): one
    # train_begin event for the first and one train_end for the last.
    self.training_continues = False
    self._started: float | None = None

  def _step(self) -> int:
    return int(tf.keras.backend.get_value(self.model.optimizer.iterations))

  def log(self, record: dict[str, Any]) -> None:
    if self._log_path is not None:
      write_failures.append_line(self._log_path, json.dumps(record, sort_keys=True))

  def _cumulative_rate(self, step: int, now: float) -> float | None:
    """Steps per second since the end of the first execution (validations included), or None."""
    if self._timing_start is None or step <= self._timing_start[1]:
      return None
    start_time, start_step = self._timing_start
    return (step - start_step) / max(now - start_time, 1e-9)

  def _recent_rate(self, step: int, end: float) -> float | None:
    """Examples per second over the window ending at `end` (the last batch's end); the previous window's rate
    when this one holds no step."""
    if self._window is not None and step > self._window[1]:
      self._window_rate = (step - self._window[1]) / max(end - self._window[0], 1e-9) * self._batch_size
    return self._window_rate

  def _show(self, step: int, loss: float | None) -> None:
    now = time.perf_counter()
    rate = self._recent_rate(step, self._last_batch_end or now)
    steps_per_second = self._cumulative_rate(step, now)
    eta = (self._total_steps - step) / steps_per_second if steps_per_second else None
    self._window = (now, step)
    if self._verbose:
      self._line.show(progress_line(step, self._total_steps, loss, rate, eta, self._validation, self._best(),
                                    self._at_most))

  def on_train_begin(self, logs=None):
    if self._started is not None:
      return  # A later `fit` of the same training.
    self.initial_step = self._step()
    self._started = time.perf_counter()
    self.log({"event": "train_begin", "step": self.initial_step, "total_steps": self._total_steps,
              "time": time.time()})
    if self._verbose and self.initial_step:
      self._line.stream.write(f"Resuming at step {self.initial_step} of {'at most ' if self._at_most else ''}"
                              f"{self._total_steps}.\n")

  def on_train_batch_end(self, batch, logs=None):
    self._last_batch_end = time.perf_counter()
    if self._timing_start is None:
      self._timing_start = self._window = (self._last_batch_end, self._step())  # Tracing excluded.
      return
    if not self._verbose or not self._line.due():
      return
    step = self._step()
    if step >= self._total_steps or (self._eval_every and step % self._eval_every == 0):
      return  # The validation at this step shows its own line.
    loss = (logs or {}).get("loss")
    self._show(step, None if loss is None else float(loss))

  def record_validation(self, step: int, logs: Mapping[str, float]) -> None:
    """Logs an `eval` event (the training logs since the last validation and the validation metrics) and shows
    the line with them; the engine calls it at every validation step."""
    logs = {k: float(v) for k, v in logs.items()}
    self._validation = {name: logs[f"val_{name}"] for name in self._shown if f"val_{name}" in logs}
    steps_per_second = self._cumulative_rate(step, time.perf_counter())
    rate = None if steps_per_second is None else steps_per_second * self._batch_size
    self.examples_per_second = rate if rate is not None else self.examples_per_second
    self.log({"event": "eval", "step": step, "examples_per_second": rate, **logs})
    self._show(step, logs.get("loss"))
    self._validated = True

  def on_epoch_end(self, epoch, logs=None):
    if self._validated:  # After the validation and the checkpoint: the next window times training alone.
      self._window = (time.perf_counter(), self._step())
      self._validated = False

  def log_bytes(self) -> int:
    """The length of the JSON log now (0 without one): a checkpoint records it, a resume truncates to it."""
    if self._log_path is None or not os.path.exists(self._log_path):
      return 0
    return os.path.getsize(self._log_path)

  def close_line(self) -> None:
    """Ends a progress line left open on a terminal (before another message, e.g. after Ctrl-C)."""
    self._line.close()

  def on_train_end(self, logs=None):
    self.close_line()
    if self.training_continues:
      return
    record = {"event": "train_end", "step": self._step(), "seconds": time.perf_counter() - self._started,
              "time": time.time()}
    if getattr(self.model, "steps_per_execution", None) is not None:  # What the engine ran (or chose) last.
      record["steps_per_execution"] = int(self.model.steps_per_execution.numpy())
    self.log(record)
