"""One worker of a MultiWorkerMirroredStrategy training run through the engine, and `run_workers`, which runs
two of them on 127.0.0.1 (optionally with a fault of `fault_injection` in some), for the multi-worker tests.

  TF_CONFIG=... python -m tests.rank4class_engine.multi_worker_fit <run_dir> <result.npz> [grace_seconds]

trains a linear regression on 64 fixed examples (global batch 8, one step per execution, validation every 4
steps, best weights on the validation error) and writes, on success, the final weights and the validation
history to `result.npz`. Run through `cli.guard` as a binary is: a stop by SIGTERM or SIGINT exits 143 or 130
with one line.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf
from absl import flags

from rank4class_cli import cli
from rank4class_engine import distribute
from rank4class_engine.loop import trainer

_RNG = np.random.default_rng(0)
_X = _RNG.normal(size=[64, 4]).astype(np.float32)
_Y = (_X @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32) + 0.1).astype(np.float32)


def _validate(model: tf.keras.Model) -> dict[str, float]:
  # The model called eagerly: no collective, so each worker validates on its own.
  return {"mse": float(np.mean((model(_X).numpy() - _Y) ** 2))}


def main(argv: list[str]) -> None:
  run_dir, result_path = argv[1], argv[2]
  grace_seconds = float(argv[3]) if len(argv) > 3 else 20.0
  strategy = distribute.make_strategy("multi_worker")
  with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input([4]), tf.keras.layers.Dense(1, kernel_initializer="zeros")])
    model.compile(tf.keras.optimizers.SGD(0.05), "mse")
  dataset = tf.data.Dataset.from_tensor_slices((_X, _Y)).repeat().batch(8)
  options = tf.data.Options()
  options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
  config = trainer.EngineConfig(run_dir, train_steps=12, eval_every=4, checkpoint_every=4,
                                best_metric="mse", best_mode="min", steps_per_execution=1,
                                global_batch_size=8,
                                tensorboard=False, verbose=0, preemption_grace_seconds=grace_seconds)
  result = trainer.fit(model, lambda start: dataset.skip(start).with_options(options), config, strategy,
                       validate=_validate)
  np.savez(result_path, *model.get_weights(), history=json.dumps(result.history),
           resumed_from_step=result.resumed_from_step)


def _free_ports(count: int) -> list[int]:
  """`count` distinct free ports: all sockets stay bound until every port is chosen, so two cannot
  coincide."""
  sockets = [socket.socket() for _ in range(count)]
  try:
    for s in sockets:
      s.bind(("127.0.0.1", 0))
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def run_workers(run_dir: str, result_dir: str, faults: dict[int, tuple[str, int]] | None = None,
                timeout: float = 300) -> list[tuple[int, str]]:
  """Runs two workers of one run in `run_dir`; worker i has fault `faults[i]` = (fault, n) of
  `fault_injection`.

  Returns each worker's (exit status, output); worker i's result is `result_dir/worker_<i>.npz`.
  """
  faults = faults or {}
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  ports = _free_ports(2)
  processes, logs = [], []
  for index in range(2):
    tf_config = {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                 "task": {"type": "worker", "index": index}}
    env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TF_CPP_MIN_LOG_LEVEL="3",
               TF_DETERMINISTIC_OPS="1", TF_ENABLE_ONEDNN_OPTS="0", PYTHONPATH=root)
    command = [sys.executable, "-m", "tests.rank4class_engine.multi_worker_fit", run_dir,
               os.path.join(result_dir, f"worker_{index}.npz")]
    if index in faults:
      fault, n = faults[index]
      command[2:3] = ["tests.rank4class_engine.fault_injection", fault, str(n),
                      "tests.rank4class_engine.multi_worker_fit"]
    log = tempfile.TemporaryFile("w+")
    logs.append(log)
    processes.append(subprocess.Popen(command, env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT))
  try:
    codes = [p.wait(timeout=timeout) for p in processes]  # A safety net only: the workers end on their own.
  finally:
    for p in processes:
      if p.poll() is None:
        p.kill()
  outputs = []
  for log in logs:
    log.seek(0)
    outputs.append(log.read())
    log.close()
  return list(zip(codes, outputs, strict=True))


if __name__ == "__main__":
  cli.guard(main, "multi-worker-fit", flags.FlagValues())(sys.argv)
