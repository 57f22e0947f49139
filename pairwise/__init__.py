"""Pairwise ranking: the margin-ranking Transformer ("rank over class") and Joachims' RankSVM."""

from rank4class_data import moved_modules as _moved_modules
from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

_moved_modules.alias({
    "pairwise.pairwise_main": "rank4class_cli.binaries.pairwise_main",
    "pairwise.ranksvm_main": "rank4class_cli.binaries.ranksvm_main",
})

# The text encoder of exports with one (TextEncoder, registered as "rank4class", and TF Text's ops), so they load
# after `import pairwise` alone.
import rank4class_encoders  # noqa: E402,F401

# Importing the modules registers their Keras objects, so `tf.keras.models.load_model` needs no custom_objects.
from pairwise import aggregate, listwise, margin_model, ranksvm  # noqa: E402,F401
from rank4class_engine.version import __version__  # noqa: E402,F401
