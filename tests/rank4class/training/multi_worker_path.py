"""One worker of a linear path trained under MultiWorkerMirroredStrategy, for `linear_path_test`:

  TF_CONFIG=... python -m tests.rank4class.training.multi_worker_path <run_dir> <result.npz>

trains the path of `path_inputs()` and writes the chosen head's C, weights and biases and the steps tried to
`result.npz`; with
no TF_CONFIG, the one-device run of the same path.
"""

import sys

import numpy as np

from rank4class.training import linear_path
from rank4class_engine import distribute

HEADS = (0.01, 0.1, 1.0)
# 2 epochs: 6 steps of 40, short of convergence, so the path trains once more (200 steps) on every worker.
CONFIG = linear_path.PathConfig(epochs=2, batch_size=40, full_batch_rows=0)


def path_inputs() -> linear_path.PathInputs:
  """Three overlapping Gaussian blobs: 120 training rows, 60 validation rows."""
  rng = np.random.default_rng(0)
  labels = np.repeat(np.arange(3), 40)
  x = (np.eye(3)[labels] * 2 + rng.normal(0, 2.0, (120, 3))).astype(np.float32)
  validation_labels = np.repeat(np.arange(3), 20)
  validation = (np.eye(3)[validation_labels] * 2 + rng.normal(0, 2.0, (60, 3))).astype(np.float32)
  return linear_path.PathInputs({linear_path.DENSE_KEY: x}, labels, {linear_path.DENSE_KEY: validation},
                                validation_labels, 3)


def main(argv: list[str]) -> None:
  run_dir, result_path = argv[1], argv[2]
  strategy = distribute.make_strategy("auto")
  path = linear_path.fit_path(path_inputs(), linear_path.dense_heads(HEADS), CONFIG,
                              linear_path.scratch_dir(run_dir, strategy, "path"), strategy)
  np.savez(result_path, c=path.head.inverse_regularization, weights=path.weights, bias=path.bias,
           steps_tried=np.array(path.fit["steps_tried"]))


if __name__ == "__main__":
  main(sys.argv)
