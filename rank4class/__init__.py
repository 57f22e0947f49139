"""Rank4Class: multiclass classification as ranking the classes for each instance, on TF-Ranking.

Subpackages, bottom to top: `modeling` (encoders, interactions, the model), `inference` (exports, serving,
calibration, full-class scoring), `evaluation` (metrics, evaluators, reports, baselines), `training` (data,
model setup, the run), `studies` (the experiments). 0.9.0 removed the flat module names of 0.7
(`rank4class.model`, ...); the image augmentation's old paths stay deprecated aliases of the image encoder's
module until 0.10.0 (`rank4class_data.moved_modules`).
"""

from rank4class_data import moved_modules as _moved_modules
from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

# 0.9: the image augmentation (`RandomShift`, `translate`) is part of the image encoder's module; its old
# paths (0.8's and 0.7's) are deprecated aliases until 0.10.0. 0.9.0 removed the other 0.7 paths.
_moved_modules.alias({
    "rank4class.image_augmentation": "rank4class.modeling.image_encoder",
    "rank4class.modeling.image_augmentation": "rank4class.modeling.image_encoder",
})

# Importing the modules registers their Keras objects, so `tf.keras.models.load_model` needs no custom_objects
# (the metrics matter to `load_model` with compile=True): the text encoders (TextEncoder is registered as
# "rank4class"), the loss registry (RescaledMeanSquaredLoss too) and the modules below. Module imports, not
# `from ... import`: the package holds its subpackages, never 0.7's flat module names.
import rank4class.evaluation.metrics  # noqa: E402,F401
import rank4class.inference.serving  # noqa: E402,F401
import rank4class.modeling.class_encoders  # noqa: E402,F401
import rank4class.modeling.class_sampling  # noqa: E402,F401
import rank4class.modeling.encoders  # noqa: E402,F401
import rank4class.modeling.hybrid_text_encoder  # noqa: E402,F401
import rank4class.modeling.image_encoder  # noqa: E402,F401
import rank4class.modeling.instance_encoder  # noqa: E402,F401
import rank4class.modeling.interactions  # noqa: E402,F401
import rank4class.modeling.mlp_encoder  # noqa: E402,F401
import rank4class.modeling.model  # noqa: E402,F401
import rank4class.modeling.ranking_math  # noqa: E402,F401
import rank4class.modeling.text_instance_encoder  # noqa: E402,F401
import rank4class.modeling.tfidf_encoder  # noqa: E402,F401
import rank4class_encoders  # noqa: E402,F401
import rank4class_engine  # noqa: E402,F401
from rank4class_engine.version import __version__  # noqa: E402,F401


def __getattr__(name: str):
  """`rank4class.image_augmentation` after `import rank4class`: the image encoder's module, through its
  deprecated alias."""
  return _moved_modules.old_attribute(__name__, name)
