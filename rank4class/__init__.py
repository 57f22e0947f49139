"""Rank4Class: multiclass classification as ranking the classes for each instance, on TF-Ranking."""

from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()
