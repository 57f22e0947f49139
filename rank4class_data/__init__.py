"""Input layer of the toolkit: TFRecord and ELWC I/O, converters and real-data loaders.

Installed as `rank4class_data` (the repository folder is `data/`).
"""

from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()
