"""A model whose train function is already traced, handed to the next run of the same architecture.

A study trains one architecture many times (other seeds, other learning rates). Every new Keras model traces
its train function again, and for a short run that tracing is most of the run (a ranking loss's gradient
graph: 1-3 s on 2 CPU cores, docs/BENCHMARKS.md). `ModelPool.take` gives the next run the model an earlier run
traced, set to exactly the state the run's own freshly built model starts in:

- the weights (trainable and not: dropout counters too) are copied from the fresh model, which the caller
  built as it would without the pool (same seed, same code), so the initial weights are those of a fresh run;
- the optimizer's variables (iterations and slots) are copied from the fresh optimizer built on the fresh
  model's weights, and its learning rate is the fresh optimizer's;
- the model is reused only when nothing else differs: the same pool key (the caller's: the run config without
  the fields that change no traced graph, and the same data object), the same model config (layer seeds
  included), the same optimizer config apart from the learning rate, the same variable shapes, and a train
  function that holds no live stateful random op (`stateful_random_ops`: a Gumbel sampler, Keras dropout, a
  class sampler, whose random stream would go on from the earlier run instead of starting afresh, and the
  run's numbers would depend on what ran before it).

Otherwise the fresh model itself is used, and kept for the next run. A run through the pool therefore gives
the numbers of a run without it (`tests/rank4class_engine/loop/model_reuse_test.py` compares the two).

Example:
  pool = ModelPool()
  for lr in (1e-3, 3e-3):
    tf.keras.utils.set_random_seed(0)
    entry = pool.take(key, build_and_compile(lr))  # The second time: the first model, reset.
    entry.model.fit(...)
    pool.release(entry)
"""

import dataclasses
import json
from typing import Any

import numpy as np
import tensorflow as tf

from rank4class_data.validation import check_range
from rank4class_engine.loop import trainer

# Op types that draw from a random state kept outside the model's weights. Their stateless counterparts
# ("StatelessRandom*", seeded by tensors) are deterministic given their inputs and may stay.
_STATEFUL_RANDOM_OPS = frozenset({
    "Multinomial", "ParameterizedTruncatedNormal", "RandomCrop", "RandomGamma", "RandomPoisson",
    "RandomPoissonV2",
    "RandomShuffle", "RandomStandardNormal", "RandomUniform", "RandomUniformInt", "TruncatedNormal",
    "RngSkip",
    "RngReadAndSkip", "StatefulRandomBinomial", "StatefulStandardNormal", "StatefulStandardNormalV2",
    "StatefulTruncatedNormal", "StatefulUniform", "StatefulUniformFullInt", "StatefulUniformInt"})


def stateful_random_ops(function: Any) -> set[str]:
  """The stateful random op types whose draws reach an output or a side effect (a variable update) of a traced
  `tf.function`, through nested functions and loops.

  A random op whose value nothing uses is left out: TF-Ranking's losses compute ranks with shuffled ties that
  only some of their options read (`sort_by_scores` in SoftmaxLoss without lambda weights), and TensorFlow
  prunes such an op before it runs.

  Raises:
    ValueError: when `function` has no traced graph to read.
  """
  concrete = function._list_all_concrete_functions()  # pylint: disable=protected-access
  if not concrete:
    raise ValueError("The function has not been traced.")
  found: set[str] = set()
  for fn in concrete:
    library = {f.signature.name: f for f in fn.graph.as_graph_def().library.function}
    library[fn.function_def.signature.name] = fn.function_def
    found |= _live_random_ops(fn.function_def.signature.name, library, {})
  return found


def _callees(node: Any) -> list[str]:
  names = []
  for value in node.attr.values():
    if value.func.name:
      names.append(value.func.name)
    names.extend(f.name for f in value.list.func)
  return names


def _live_random_ops(name: str, library: dict[str, Any], memo: dict[str, set[str]]) -> set[str]:
  """The random ops live in function `name`: reachable backwards from its outputs and control outputs."""
  if name in memo:
    return memo[name]
  memo[name] = set()  # Recursion guard.
  function = library.get(name)
  if function is None:
    return memo[name]
  nodes = {node.name: node for node in function.node_def}
  pending = [ref.lstrip("^").split(":")[0] for ref in (*function.ret.values(),
                                                       *function.control_ret.values())]
  live: set[str] = set()
  while pending:
    node_name = pending.pop()
    if node_name in live or node_name not in nodes:
      continue  # Not a node: a function argument.
    live.add(node_name)
    pending.extend(ref.lstrip("^").split(":")[0] for ref in nodes[node_name].input)
  found = set()
  for node_name in live:
    node = nodes[node_name]
    if node.op in _STATEFUL_RANDOM_OPS:
      found.add(node.op)
    for callee in _callees(node):
      found |= _live_random_ops(callee, library, memo)
  memo[name] = found
  return found


def _optimizer_config(optimizer: tf.keras.optimizers.Optimizer) -> str:
  config = dict(optimizer.get_config())
  config.pop("learning_rate", None)
  return json.dumps(config, sort_keys=True, default=str)


def _model_config(model: tf.keras.Model) -> str:
  """The model's config with its layers' names (numbered per process: "dense_3") replaced by their order of
  appearance, wherever they occur (a functional model's connections name its layers)."""
  config = model.get_config()
  names: dict[str, str] = {}

  def collect(value: Any) -> None:
    if isinstance(value, dict):
      if isinstance(value.get("name"), str):
        names.setdefault(value["name"], f"<name {len(names)}>")
      for key in sorted(value):
        collect(value[key])
    elif isinstance(value, (list, tuple)):
      for item in value:
        collect(item)

  def rename(value: Any) -> Any:
    if isinstance(value, dict):
      return {key: rename(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
      return [rename(item) for item in value]
    return names.get(value, value) if isinstance(value, str) else value

  collect(config)
  return json.dumps(rename(config), sort_keys=True, default=str)


@dataclasses.dataclass
class PoolEntry:
  """A model the pool handed out.

  Attributes:
    key: The caller's key.
    model: The model to train: reset to the fresh model's state, or the fresh model itself.
    reused: Whether `model` is an earlier run's (its functions already traced).
    extras: The caller's objects tied to this model (e.g. its traced score function), kept with it.
    reusable: Set by `ModelPool.release`: whether the pool kept the model for the next run of its key.
  """

  key: str
  model: tf.keras.Model
  reused: bool
  extras: dict[str, Any] = dataclasses.field(default_factory=dict)
  reusable: bool = False


class ModelPool:
  """The last `capacity` trained models by key, each reused for the next run of its key (one run at a
  time)."""

  def __init__(self, capacity: int = 2):
    check_range("capacity", capacity, 1, integer=True)
    self._capacity = capacity
    self._entries: dict[str, PoolEntry] = {}
    self.reused_runs = 0

  def take(self, key: str, fresh: tf.keras.Model) -> PoolEntry:
    """The model for a run: the pooled model of `key` set to `fresh`'s state when it may stand in for it (see
    the module's docstring), else `fresh` itself.

    Args:
      key: What must be equal for two runs to share a model, apart from what this function compares itself.
      fresh: The run's compiled model, built as the run would build it without the pool (weights created).
    """
    # The optimizer's variables, as the first step would create them: copied from here into a pooled model,
    # and for a fresh one created before its train function is traced (else the first trace creates them, and
    # `tf.function` traces once more on a later call).
    if not hasattr(fresh.optimizer, "build"):  # A legacy optimizer: never pooled.
      return PoolEntry(key, fresh, False)
    trainer.build_optimizer(fresh, fresh.distribute_strategy)
    entry = self._entries.pop(key, None)
    if entry is not None and entry.reusable and _compatible(entry.model, fresh) and _copy_state(fresh,
                                                                                                entry.model):
      self.reused_runs += 1
      return PoolEntry(key, entry.model, True, entry.extras)
    return PoolEntry(key, fresh, False)

  def release(self, entry: PoolEntry) -> None:
    """Keeps the model of a finished run for the next run of its key, when its train function may be
    reused."""
    train_function = getattr(entry.model, "train_function", None)
    if train_function is None:
      return
    try:
      entry.reusable = not stateful_random_ops(train_function)
    except ValueError:
      return
    if not entry.reusable:
      return
    self._entries.pop(entry.key, None)
    self._entries[entry.key] = entry
    while len(self._entries) > self._capacity:
      self._entries.pop(next(iter(self._entries)))


def _compatible(pooled: tf.keras.Model, fresh: tf.keras.Model) -> bool:
  if type(pooled) is not type(fresh) or type(pooled.optimizer) is not type(fresh.optimizer):
    return False
  if _model_config(pooled) != _model_config(fresh) or \
      _optimizer_config(pooled.optimizer) != _optimizer_config(fresh.optimizer):
    return False
  for optimizer in (pooled.optimizer, fresh.optimizer):  # A schedule, not a value: part of the traced graph.
    if not isinstance(optimizer.get_config().get("learning_rate"), (int, float, np.floating)):
      return False
  shapes = lambda variables: [tuple(v.shape) for v in variables]  # noqa: E731
  return shapes(pooled.weights) == shapes(fresh.weights)


def _copy_state(fresh: tf.keras.Model, pooled: tf.keras.Model) -> bool:
  """`pooled` gets `fresh`'s weights and the state of `fresh`'s (built, unused) optimizer; False, with nothing
  changed, when the optimizers' variables differ in number or shape."""
  source, target = list(fresh.optimizer.variables), list(pooled.optimizer.variables)
  if [tuple(v.shape) for v in source] != [tuple(v.shape) for v in target]:
    return False
  pooled.set_weights(fresh.get_weights())
  for variable, value in zip(target, source, strict=True):
    variable.assign(value)
  pooled.optimizer.learning_rate = fresh.optimizer.learning_rate.numpy()
  return True
