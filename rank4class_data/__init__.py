"""Input layer of the toolkit: TFRecord and ELWC I/O, row files and their cache, converters, the
classification data a run reads (`classification_data`) and the real-data loaders (`datasets/`).

The repository's `data/` folder is not this package: it holds the example files `scripts/make_example_data.py`
writes.
"""

from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()
