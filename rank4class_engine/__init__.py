"""The training engine shared by `rank4class` and `pairwise`: strategy choice, the fit loop with validation,
best weights, resumable checkpoints, progress and TensorBoard, run-directory locking, mixed precision, and the
binaries' flag parsing."""

from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

from rank4class_engine import cli, distribute, precision, progress, run_lock, trainer  # noqa: E402,F401
