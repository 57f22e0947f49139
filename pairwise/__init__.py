"""Pairwise ranking: the margin-ranking Transformer ("rank over class") and Joachims' RankSVM."""

from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()
