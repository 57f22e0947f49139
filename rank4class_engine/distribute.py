"""Picks the tf.distribute strategy for training and says which worker writes the outputs."""

import json
import os

import tensorflow as tf

from rank4class_data.validation import check_choice
from rank4class_engine.runs import run_directory

STRATEGIES = ("auto", "mirrored", "multi_worker", "one_device")

# One MirroredStrategy per device list and process. Each new MirroredStrategy restarts its collective-op keys,
# so a second one over the same devices (a study's next run, the next test) can meet the first one's keys and
# TensorFlow aborts every collective of the process ("Shape mismatch in the collective instance 100"). A
# strategy holds no model state, so reusing it is safe.
_MIRRORED: dict[tuple[str, ...], tf.distribute.MirroredStrategy] = {}


def _tf_config() -> dict:
  raw = os.environ.get("TF_CONFIG", "")
  if not raw:
    return {}
  try:
    return json.loads(raw)
  except json.JSONDecodeError as e:
    raise ValueError(
      f"TF_CONFIG is not valid JSON ({e}); expected e.g. "
      '{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": 0}}'
    ) from e


def num_workers_in_tf_config() -> int:
  """Number of worker (and chief) tasks that TF_CONFIG lists; 0 when TF_CONFIG is unset."""
  cluster = _tf_config().get("cluster", {})
  return len(cluster.get("worker", [])) + len(cluster.get("chief", []))


def make_strategy(name: str = "auto", devices: list[str] | None = None) -> tf.distribute.Strategy:
  """Builds a strategy by name.

  "auto" is MultiWorkerMirroredStrategy when TF_CONFIG lists more than one worker, MirroredStrategy over the
  visible GPUs when there are two or more, and otherwise (one GPU, or the CPU) TensorFlow's default strategy:
  one device needs no replicas, and a MirroredStrategy of one device cost every step its cross-replica
  machinery (the bare Keras fit of a small model took 0.8-1.3 s for 1,000 steps under it against 0.2-0.3 s
  under the default strategy, 2 CPU cores, docs/BENCHMARKS.md).

  Args:
    name: One of STRATEGIES.
    devices: For "mirrored": explicit devices, e.g. ["/cpu:0", "/cpu:1"] for logical CPU replicas in tests.

  Returns:
    The strategy; "mirrored" returns the process's one strategy over those devices (see `_MIRRORED`); "auto"
    on one device the default strategy (`tf.distribute.get_strategy()` outside any scope).

  Raises:
    ValueError: For an unknown name, or "multi_worker" without a TF_CONFIG cluster.
  """
  check_choice("strategy", name, STRATEGIES)
  if name == "auto":
    if num_workers_in_tf_config() > 1:
      name = "multi_worker"
    elif devices is None and len(tf.config.list_logical_devices("GPU")) < 2:
      return tf.distribute.get_strategy()
    else:
      name = "mirrored"
  if name == "multi_worker":
    if num_workers_in_tf_config() == 0:
      raise ValueError("strategy 'multi_worker' needs TF_CONFIG with a cluster of workers; it is unset.")
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "one_device":
    return tf.distribute.OneDeviceStrategy("/gpu:0" if tf.config.list_logical_devices("GPU") else "/cpu:0")
  if devices is None:
    gpus = tf.config.list_logical_devices("GPU")
    devices = [d.name for d in gpus] if gpus else ["/cpu:0"]
  key = tuple(tf.DeviceSpec.from_string(d).to_string() for d in devices)
  if key not in _MIRRORED:
    _MIRRORED[key] = tf.distribute.MirroredStrategy(list(devices))
  return _MIRRORED[key]


def is_chief(strategy: tf.distribute.Strategy) -> bool:
  """Whether this process writes checkpoints, logs and exports (every process but multi-worker non-chiefs)."""
  resolver = getattr(strategy.extended, "_cluster_resolver", None)
  if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return True
  task_type, task_id = resolver.task_type, resolver.task_id
  if task_type is None:
    return True
  has_chief = "chief" in resolver.cluster_spec().as_dict()
  return task_type == "chief" or (not has_chief and task_type == "worker" and task_id == 0)


def output_dir(model_dir: str, strategy: tf.distribute.Strategy, subdir: str = "") -> str:
  """Where this process writes: `model_dir/subdir` on the chief, a private scratch folder on other workers.

  Multi-worker saving must run on every worker (it is collective), but only the chief's files are kept.
  """
  path = os.path.join(model_dir, subdir) if subdir else model_dir
  if is_chief(strategy):
    return path
  resolver = strategy.extended._cluster_resolver  # pylint: disable=protected-access
  return os.path.join(model_dir, run_directory.WORKERS_DIR,
                      f"{resolver.task_type}_{resolver.task_id}", subdir)


def sum_over_workers(strategy: tf.distribute.Strategy, values: list[float]) -> list[float]:
  """`values` summed over the workers of a multi-worker strategy (a collective: every worker calls it at the
  same point of its run); the values themselves under any other strategy."""
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return list(values)
  with strategy.scope():
    total = strategy.reduce(tf.distribute.ReduceOp.SUM, tf.constant(values, tf.float32), axis=None)
  return [float(v) for v in total.numpy()]
