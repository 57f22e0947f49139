"""The binaries of the toolkit (`*_main.py`): flags parsed into a config, one library call, exit."""

from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()
