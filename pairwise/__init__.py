"""Pairwise ranking: the margin-ranking Transformer ("rank over class") and Joachims' RankSVM."""

from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

# Importing the modules registers their Keras objects, so `tf.keras.models.load_model` needs no custom_objects.
from pairwise import aggregate, listwise, margin_model, ranksvm  # noqa: E402,F401
