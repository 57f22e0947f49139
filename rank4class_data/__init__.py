"""Input layer of the toolkit: TFRecord and ELWC I/O, converters and real-data loaders.

Installed as `rank4class_data` (the repository folder is `data/`).
"""

from rank4class_data import moved_modules as _moved_modules
from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

_moved_modules.alias({
    "rank4class_data.convert_main": "rank4class_cli.binaries.convert_main",
})
