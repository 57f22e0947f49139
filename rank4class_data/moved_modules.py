"""Old import paths of moved modules, kept for one minor version as deprecated aliases without stub files.

Each package's `__init__` declares its moved names (`alias({"rank4class.modeling.image_augmentation":
"rank4class.modeling.image_encoder"})`); one finder on `sys.meta_path` answers them. Importing an old name
imports the new module, warns once (`DeprecationWarning`), and enters the same module object under the old
name in `sys.modules`: a class is defined and Keras-registered once, and `isinstance` holds across both
names.
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings

# Old dotted name -> the new module.
MOVED: dict[str, str] = {}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Finds the old names of `MOVED` and loads each as its new module (the same object)."""

  def __init__(self):
    self._new_specs: dict[str, importlib.machinery.ModuleSpec] = {}

  def find_spec(self, fullname, path=None, target=None):
    if fullname not in MOVED:
      return None
    return importlib.machinery.ModuleSpec(fullname, self, is_package=False)

  def create_module(self, spec):
    new = MOVED[spec.name]
    warnings.warn(f"{spec.name} is deprecated and will be removed in the next minor version; import {new} "
                  "instead.", DeprecationWarning, stacklevel=2)
    module = importlib.import_module(new)
    self._new_specs[spec.name] = module.__spec__
    return module

  def exec_module(self, module):
    """Nothing to run (the new module ran when it was imported); the import system set `__spec__` to the old
    name's, so the new module gets its own back."""
    if module.__spec__.name in self._new_specs:
      module.__spec__ = self._new_specs.pop(module.__spec__.name)


_FINDER = _MovedModuleFinder()


def alias(moved: dict[str, str]) -> None:
  """Declares old dotted names -> new modules, and puts the one finder on `sys.meta_path` (once)."""
  MOVED.update(moved)
  if _FINDER not in sys.meta_path:
    # Before any finder that could still see an old file (an editable install).
    sys.meta_path.insert(0, _FINDER)


def old_attribute(package: str, name: str):
  """A package's attribute that was a moved submodule (`rank4class.image_augmentation` after `import
  rank4class`), imported through its old name; AttributeError for any other name (a package `__getattr__`
  calls this)."""
  if f"{package}.{name}" in MOVED:
    return importlib.import_module(f"{package}.{name}")
  raise AttributeError(f"module {package!r} has no attribute {name!r}")
