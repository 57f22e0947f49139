"""Fault injection for the run-directory guarantees: runs a binary in this process, which kills itself
(SIGKILL, Ctrl-C's SIGINT, or a scheduler's SIGTERM) at a named boundary of a training run, or
(sigint_in_loop) inside a long loop of any binary.

  python -m tests.rank4class_engine.fault_injection <fault> <n> <binary module> [flags...]

kills the process at the n-th (1-based) occurrence of `fault` (see FAULTS); `run_binary` runs that from a
test. The faults hook the engine (and the progress line of long loops), not the binary, so they are the same
for every family (rank4class-train, pairwise-train). The process kills itself at an exact point instead of
being killed from outside at a time, so the tests do not depend on timing.
"""

import contextlib
import json
import os
import runpy
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from unittest import mock

FAULTS = {
    "after_checkpoint": "SIGKILL just after the n-th checkpoint is committed",
    "during_validation": "SIGKILL inside the n-th validation (metrics computed, nothing recorded)",
    "during_best_weights": "SIGKILL while the n-th best weights are written (staged, not yet in place)",
    "during_export": "SIGKILL while the n-th export is written (its files staged, not yet in place)",
    "before_result": "SIGKILL after the export is in place, before the result is written",
    "sigint_in_training": "SIGINT (Ctrl-C) after the n-th execution of training steps",
    "sigint_after_checkpoint": "SIGINT (Ctrl-C) just after the n-th checkpoint is committed",
    "sigterm_in_training": "SIGTERM (a scheduler's preemption) after the n-th execution of training steps",
    "sigterm_during_validation": "SIGTERM inside the n-th validation (metrics computed, nothing recorded)",
    "sigterm_during_export": "SIGTERM while the n-th export is written (its files staged, not yet in place)",
    "sigint_in_loop": "SIGINT (Ctrl-C) at the n-th progress check of a long loop (rows converted, batches "
                      "predicted or evaluated, texts embedded: rank4class_data.progress_line)",
}


def _counter(n: int, act: Callable[[], None]) -> Callable[[], None]:
  calls = [0]

  def tick() -> None:
    calls[0] += 1
    if calls[0] == n:
      act()

  return tick


def _kill() -> None:
  sys.stdout.flush()
  sys.stderr.flush()
  os.kill(os.getpid(), signal.SIGKILL)


def _interrupt() -> None:
  os.kill(os.getpid(), signal.SIGINT)  # Python raises KeyboardInterrupt at the next bytecode, as for Ctrl-C.


def _terminate() -> None:
  os.kill(os.getpid(), signal.SIGTERM)


def _install(fault: str, n: int) -> contextlib.ExitStack:
  """Patches the engine so that `fault` happens at its n-th occurrence."""
  # Imported here: the binary under test imports TensorFlow and the toolkit in its own order.
  from rank4class_data import progress_line, validation
  from rank4class_engine.loop import checkpoints, progress, trainer
  from rank4class_engine.runs import run_directory

  stack = contextlib.ExitStack()
  tick = _counter(n, _interrupt if fault.startswith("sigint") else _terminate if fault.startswith("sigterm")
                  else _kill)
  if fault in ("after_checkpoint", "sigint_after_checkpoint"):
    save = trainer.Checkpoints.save

    def save_then_kill(self, step, state):
      save(self, step, state)
      tick()

    stack.enter_context(mock.patch.object(trainer.Checkpoints, "save", save_then_kill))
  elif fault in ("during_validation", "sigterm_during_validation"):
    init = trainer._Validation.__init__  # pylint: disable=protected-access

    def init_with_fault(self, config, validate, *args, **kwargs):
      def validate_then_kill(model):
        metrics = validate(model)
        tick()
        return metrics
      init(self, config, validate_then_kill if validate else None, *args, **kwargs)

    stack.enter_context(mock.patch.object(trainer._Validation, "__init__", init_with_fault))
  elif fault in ("during_best_weights", "during_export", "sigterm_during_export"):
    # The folder's files are all written into the staging folder; the kill comes before it is renamed.
    @contextlib.contextmanager
    def staged_then_kill(path: str) -> Iterator[str]:
      with validation.atomic_directory(path) as staging:
        yield staging
        tick()

    # The best weights are written by the engine's checkpoints module (`rank4class_engine.loop.checkpoints`).
    modules = [checkpoints] if fault == "during_best_weights" else [run_directory]
    if fault.endswith("during_export"):
      import rank4class.inference.serving  # noqa: PLC0415  (only when the binary under test has it)
      modules.append(rank4class.inference.serving)
    for module in modules:
      stack.enter_context(mock.patch.object(module, "atomic_directory", staged_then_kill))
  elif fault == "before_result":
    stack.enter_context(mock.patch.object(run_directory.RunDirectory, "finish", lambda self, result: tick()))
  elif fault in ("sigint_in_training", "sigterm_in_training"):
    batch_end = progress.ProgressReporter.on_train_batch_end

    def batch_end_then_interrupt(self, batch, logs=None):
      batch_end(self, batch, logs)
      tick()

    stack.enter_context(mock.patch.object(progress.ProgressReporter, "on_train_batch_end",
                                          batch_end_then_interrupt))
  elif fault == "sigint_in_loop":
    due = progress_line.ProgressLine.due

    def due_after_interrupt(self):
      tick()
      return due(self)

    stack.enter_context(mock.patch.object(progress_line.ProgressLine, "due", due_after_interrupt))
  else:
    raise ValueError(f"Unknown fault {fault!r}; known: {', '.join(FAULTS)}.")
  return stack


def run_binary(module: str, flags: list[str], fault: str | None = None, n: int = 1,
               timeout: float = 600) -> subprocess.CompletedProcess:
  """Runs `python -m <module> <flags>` in a subprocess (with `fault` at its n-th occurrence); returns it with
  its captured stdout and stderr.

  TensorFlow runs as deterministically as it can there (TF_DETERMINISTIC_OPS=1, TF_ENABLE_ONEDNN_OPTS=0). Even
  so, two uninterrupted processes may differ in the last bits (e.g. sparse embedding updates on CPU), so tests
  compare processes within a tolerance; the engine's own resume is compared bit for bit in one process
  (tests/rank4class_engine/loop/trainer_test.py).
  """
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  command = ([sys.executable, "-m", "tests.rank4class_engine.fault_injection", fault, str(n), module]
             if fault else [sys.executable, "-m", module])
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_DETERMINISTIC_OPS="1", TF_ENABLE_ONEDNN_OPTS="0",
             PYTHONPATH=root)
  return subprocess.run(command + flags, capture_output=True, text=True, timeout=timeout, env=env, cwd=root)


def train_begin_steps(progress_path: str) -> list[int]:
  """The step each process of a run started training from, in its progress log (`progress.jsonl`) as resumes
  cut it back to their checkpoint: a process's start is lost with it when no checkpoint followed."""
  with open(progress_path, encoding="utf-8") as f:
    return [event["step"] for event in map(json.loads, f) if event["event"] == "train_begin"]


def main() -> None:
  fault, n, module = sys.argv[1], int(sys.argv[2]), sys.argv[3]
  sys.argv = [module, *sys.argv[4:]]
  # As `python -m <module>` would: the toolkit quiets TensorFlow's C++ logs and warnings for its binaries
  # and pools TensorFlow's CPU memory.
  from rank4class_data import stack  # pylint: disable=import-outside-toplevel
  command_line = [sys.executable, "-m", *sys.argv]
  stack.quiet_native_logs_of_binaries(command_line)
  stack.pooled_cpu_memory_of_binaries(command_line)
  # Python installs its Ctrl-C handler only where SIGINT is not ignored at start, and a process started from a
  # background shell job (`cmd &`, nohup, some CI runners) starts with it ignored: the self-sent SIGINT would
  # then vanish and the run finish. Restore the handler an interactive `python -m` has, so every fault is
  # delivered.
  signal.signal(signal.SIGINT, signal.default_int_handler)
  with _install(fault, n):
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
  main()
