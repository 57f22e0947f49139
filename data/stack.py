"""Fails fast, with a clear message, when the installed TensorFlow cannot run TF-Ranking 0.5.5."""

import importlib.metadata

_MAX_TF = (2, 16)


def _major_minor(version: str) -> tuple[int, int]:
  parts = version.split(".")
  return int(parts[0]), int(parts[1])


def check_tensorflow_stack() -> None:
  """Raises ImportError unless TensorFlow < 2.16 with Keras 2 as `tf.keras` is installed.

  TF-Ranking 0.5.5 imports `tf.estimator` (gone in TF 2.16) and builds Keras 2 layers; with Keras 3 as
  `tf.keras` its layers and ours would be different classes. The check reads package metadata first so that a
  too-new TensorFlow is reported before anything imports `tensorflow_ranking`.

  Raises:
    ImportError: naming the installed versions and the supported stack.
  """
  try:
    tf_version = importlib.metadata.version("tensorflow")
  except importlib.metadata.PackageNotFoundError:
    tf_version = None
  if tf_version is not None and _major_minor(tf_version) >= _MAX_TF:
    raise ImportError(
        f"tensorflow {tf_version} is installed, but this toolkit needs tensorflow<2.16 (2.15.1 is tested): "
        "tensorflow-ranking 0.5.5 imports tf.estimator and Keras 2. Install with `pip install -e .`, which "
        "pins tensorflow==2.15.1.")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  if _major_minor(tf.__version__) >= _MAX_TF:
    raise ImportError(f"tensorflow {tf.__version__} is imported, but this toolkit needs tensorflow<2.16.")
  version_fn = getattr(tf.keras, "version", None)
  keras_version = version_fn() if version_fn else getattr(tf.keras, "__version__", "2")
  if str(keras_version).startswith("3"):
    raise ImportError(
        f"tf.keras is Keras {keras_version}; this toolkit and tensorflow-ranking 0.5.5 need Keras 2 "
        "(tensorflow 2.15.1). Unset TF_USE_LEGACY_KERAS tricks and install the pinned stack.")
