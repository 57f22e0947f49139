"""The training engine shared by `rank4class` and `pairwise`: the ranking-loss registry, strategy choice, the
fit loop with validation, best weights, resumable checkpoints, progress and TensorBoard, run-directory
locking, mixed precision, and config.json (config dataclasses <-> JSON dicts)."""

from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

from rank4class_engine import configs, distribute, losses, precision, progress, run_lock, trainer  # noqa: E402,F401
