"""The training engine shared by `rank4class` and `pairwise`, in subpackages by concept:

- `loop`: the fit loop (`loop.trainer`) and its parts: the engine's settings and answer, steps per execution,
  checkpoints and best weights, progress and TensorBoard, preemption and the workers' stop agreement, dropout
  that resumes, and a traced model handed to the next run.
- `optimization`: the optimizer factory, lazy Adam, learning-rate schedules, mixed precision, the ranking-loss
  registry.
- `runs`: the run-directory lifecycle, its lock, and config.json (config dataclasses <-> JSON dicts).
- `statistics`: ranking metrics in NumPy, the one-standard-error rule, the mean ± std over seeds.

At the top: strategy choice (`distribute`) and the toolkit's version. The flat module names
(`rank4class_engine.trainer`, ...) are deprecated aliases of the moved modules until 0.10.0
(`rank4class_data.moved_modules`).
"""

from rank4class_data import moved_modules as _moved_modules
from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

# 0.9: 0.8's flat modules moved into subpackages; their flat paths are deprecated aliases until 0.10.0. (The
# trainer's parts and the one-standard-error rule, added since and never released flat, have no alias.)
_SUBPACKAGES = {
    "loop": ("model_reuse", "preemption", "progress", "resumable_dropout", "trainer"),
    "optimization": ("lazy_adam", "learning_rates", "losses", "optimizers", "precision"),
    "runs": ("configs", "run_directory", "run_lock"),
    "statistics": ("ranking_metrics", "seed_statistics"),
}
_moved_modules.alias({f"{__name__}.{module}": f"{__name__}.{subpackage}.{module}"
                      for subpackage, modules in _SUBPACKAGES.items() for module in modules})

# The modules `import rank4class_engine` has always loaded: the loop, the loss registry (its Keras objects),
# mixed precision, config.json, the run lock. Module imports, not `from ... import`: the package holds its
# subpackages, never the flat module names.
import rank4class_engine.distribute  # noqa: E402,F401
import rank4class_engine.loop.progress  # noqa: E402,F401
import rank4class_engine.loop.trainer  # noqa: E402,F401
import rank4class_engine.optimization.losses  # noqa: E402,F401
import rank4class_engine.optimization.precision  # noqa: E402,F401
import rank4class_engine.runs.configs  # noqa: E402,F401
import rank4class_engine.runs.run_lock  # noqa: E402,F401


def __getattr__(name: str):
  """`rank4class_engine.<flat module name>` after `import rank4class_engine`: the moved module, through its
  deprecated alias."""
  return _moved_modules.old_attribute(__name__, name)
