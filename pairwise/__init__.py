"""Pairwise ranking: the margin-ranking Transformer ("rank over class", `pairwise.margin`), Joachims' RankSVM
(`pairwise.ranksvm`) and their experiments (`pairwise.studies`). 0.9.0 removed the flat module names of 0.7
(`pairwise.margin_model`, ...)."""

from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

# Importing the modules registers their Keras objects, so `tf.keras.models.load_model` needs no
# custom_objects; the text encoder of exports with one (TextEncoder, registered as "rank4class", and TF Text's
# ops) comes with rank4class_encoders, so they load after `import pairwise` alone. Module imports, not
# `from ... import`: the package holds its subpackages, never 0.7's flat module names.
import pairwise.margin.aggregate  # noqa: E402,F401
import pairwise.margin.listwise  # noqa: E402,F401
import pairwise.margin.margin_model  # noqa: E402,F401
import rank4class_encoders  # noqa: E402,F401
from pairwise import ranksvm  # noqa: E402,F401  The package: it imports its module ranksvm, re-exports its names.
from rank4class_engine.version import __version__  # noqa: E402,F401
