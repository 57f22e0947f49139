"""Pairwise ranking: the margin-ranking Transformer ("rank over class", `pairwise.margin`), Joachims' RankSVM
(`pairwise.ranksvm`) and their experiments (`pairwise.studies`)."""

from rank4class_data import moved_modules as _moved_modules
from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

# 0.7's flat modules (`pairwise.ranksvm`, now a folder, re-exports its module's names instead).
_moved_modules.alias({
    "pairwise.aggregate": "pairwise.margin.aggregate",
    "pairwise.class_conversion": "pairwise.studies.class_conversion",
    "pairwise.configs": "pairwise.margin.configs",
    "pairwise.evaluation": "pairwise.margin.evaluation",
    "pairwise.features": "pairwise.ranksvm.features",
    "pairwise.group_batching": "pairwise.margin.group_batching",
    "pairwise.item_data": "pairwise.margin.item_data",
    "pairwise.listwise": "pairwise.margin.listwise",
    "pairwise.margin_model": "pairwise.margin.margin_model",
    "pairwise.pair_transform": "pairwise.ranksvm.pair_transform",
    "pairwise.pairs": "pairwise.margin.pairs",
    "pairwise.pairwise_main": "rank4class_cli.binaries.pairwise_main",
    "pairwise.pairwise_train": "pairwise.margin.pairwise_train",
    "pairwise.ranking_metrics": "rank4class_engine.ranking_metrics",
    "pairwise.ranksvm_config": "pairwise.ranksvm.ranksvm_config",
    "pairwise.ranksvm_main": "rank4class_cli.binaries.ranksvm_main",
    "pairwise.ranksvm_solver": "pairwise.ranksvm.ranksvm_solver",
    "pairwise.ranksvm_workflow": "pairwise.studies.ranksvm_workflow",
    "pairwise.runs": "pairwise.margin.runs",
    "pairwise.text_similarity": "pairwise.ranksvm.text_similarity",
})

# The text encoder of exports with one (TextEncoder, registered as "rank4class", and TF Text's ops), so they
# load after `import pairwise` alone.
import rank4class_encoders  # noqa: E402,F401
from pairwise import ranksvm  # noqa: E402,F401  The package, which imports its module ranksvm and re-exports its names.

# Importing the modules registers their Keras objects, so `tf.keras.models.load_model` needs no
# custom_objects.
from pairwise.margin import aggregate, listwise, margin_model  # noqa: E402,F401
from rank4class_engine.version import __version__  # noqa: E402,F401
