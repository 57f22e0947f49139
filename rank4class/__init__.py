"""Rank4Class: multiclass classification as ranking the classes for each instance, on TF-Ranking."""

from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

import rank4class_encoders  # noqa: E402,F401  The text encoders (TextEncoder is registered as "rank4class").
import rank4class_engine  # noqa: E402,F401  The loss registry (RescaledMeanSquaredLoss is registered as "rank4class").

# Importing the modules registers their Keras objects, so `tf.keras.models.load_model` needs no custom_objects.
from rank4class import (  # noqa: E402,F401
    class_encoders,
    encoders,
    interactions,
    metrics,
    model,
    ranking_math,
    serving,
)
from rank4class_engine.version import __version__  # noqa: E402,F401
