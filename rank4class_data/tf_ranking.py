"""TF-Ranking on both stacks: `from rank4class_data.tf_ranking import tfr`, then `tfr.keras.losses`, as usual.

What the toolkit uses of TF-Ranking 0.5.5 is `tfr.keras.losses`, `tfr.keras.metrics`, `tfr.losses_impl`,
`tfr.metrics_impl` and `tfr.data` (ELWC parsing). On the reference stack `tfr` is `import tensorflow_ranking`
as released. On the current stack that import fails: the package's `__init__` imports every module, among them
the estimator ones, which need `tf.estimator` (removed in TensorFlow 2.16). The modules above do not need it,
so here they are loaded from the installed package's own files without running the package `__init__`: the
packages `tensorflow_ranking`, `tensorflow_ranking.python` and `tensorflow_ranking.python.keras` are entered
in `sys.modules` as empty packages pointing at the installed folders, then the modules are imported normally.
No TF-Ranking code is copied or rewritten.

`tensorflow_ranking/python/data.py` imports `tf.estimator` at its top but only uses it in
`build_ranking_serving_input_receiver_fn` (an estimator serving receiver, which the toolkit never calls).
While that one module is imported, a placeholder `tensorflow.estimator` stands in; it raises a clear error if
anything touches it, and it is taken out of `sys.modules` again right after.

On the current stack, `import tensorflow_ranking` after this module gives the same partial package: only the
modules listed in `CURRENT_STACK_MODULES`, none of the estimator, `tfr.keras.layers`/`pipeline`/`model` ones.
"""

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types

from rank4class_data import stack

# The TF-Ranking modules the current stack loads, in dependency order.
CURRENT_STACK_MODULES = (
    "tensorflow_ranking.python.utils",
    "tensorflow_ranking.python.losses_impl",
    "tensorflow_ranking.python.metrics_impl",
    "tensorflow_ranking.python.keras.utils",
    "tensorflow_ranking.python.keras.losses",
    "tensorflow_ranking.python.keras.metrics",
    "tensorflow_ranking.python.data",
)
_PACKAGES = ("tensorflow_ranking", "tensorflow_ranking.python", "tensorflow_ranking.python.keras")


class _NoEstimator(types.ModuleType):
  """Stands in for `tensorflow.estimator` while TF-Ranking's data.py is imported on TensorFlow >= 2.16."""

  def __getattr__(self, name: str):
    raise AttributeError(
        f"tf.estimator.{name} is not available: TensorFlow >= 2.16 has no tf.estimator, so TF-Ranking's "
        "estimator serving receivers (tfr.data.build_*_serving_input_receiver_fn) do not run on the current "
        "stack. Export Keras SavedModel signatures instead (rank4class.inference.serving).")


def _empty_package(name: str, path: str) -> types.ModuleType:
  """A package module whose `__init__` is not run: submodules import from `path`."""
  spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
  spec.submodule_search_locations = [path]
  package = importlib.util.module_from_spec(spec)
  package.__path__ = [path]
  package.__doc__ = f"{name}, loaded by rank4class_data.tf_ranking without its __init__ (current stack)."
  return package


def _load_without_package_init() -> types.ModuleType:
  """Loads `CURRENT_STACK_MODULES` from the installed TF-Ranking and returns its top-level package."""
  if "tensorflow_ranking.python.keras.losses" in sys.modules:
    return sys.modules["tensorflow_ranking"]
  spec = importlib.util.find_spec("tensorflow_ranking")  # Finds the folder; runs no code of the package.
  if spec is None or not spec.submodule_search_locations:
    raise ImportError("tensorflow-ranking is not installed; on the current stack install it with "
                      "`pip install --no-deps tensorflow-ranking==0.5.5` (scripts/install.sh does).")
  root = list(spec.submodule_search_locations)[0]
  for name in _PACKAGES:
    if name not in sys.modules:
      relative = name.split(".")[1:]
      package = _empty_package(name, os.path.join(root, *relative))
      sys.modules[name] = package
      if relative:
        parent, leaf = name.rsplit(".", 1)
        setattr(sys.modules[parent], leaf, package)
  import tensorflow  # pylint: disable=g-import-not-at-top

  placeholder = None
  if "tensorflow.estimator" not in sys.modules and not hasattr(tensorflow, "estimator"):
    placeholder = _NoEstimator("tensorflow.estimator")
    sys.modules["tensorflow.estimator"] = placeholder
  try:
    for name in CURRENT_STACK_MODULES:
      importlib.import_module(name)
  finally:
    if placeholder is not None and sys.modules.get("tensorflow.estimator") is placeholder:
      del sys.modules["tensorflow.estimator"]
  top = sys.modules["tensorflow_ranking"]
  python = sys.modules["tensorflow_ranking.python"]
  # The names `import tensorflow_ranking` exports (its `from tensorflow_ranking.python import *`).
  for attribute in ("data", "keras", "losses_impl", "metrics_impl", "utils"):
    setattr(top, attribute, getattr(python, attribute))
  return top


def _load() -> types.ModuleType:
  if stack.check_tensorflow_stack().name == stack.REFERENCE:
    import tensorflow_ranking  # pylint: disable=g-import-not-at-top

    return tensorflow_ranking
  return _load_without_package_init()


tfr = _load()
