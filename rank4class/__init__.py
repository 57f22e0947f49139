"""Rank4Class: multiclass classification as ranking the classes for each instance, on TF-Ranking."""

from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

# Importing the modules registers their Keras objects, so `tf.keras.models.load_model` needs no custom_objects.
from rank4class import (  # noqa: E402,F401
    class_encoders,
    encoders,
    interactions,
    losses,
    metrics,
    model,
    ranking_math,
    serving,
    text_encoder,
)
