"""Config dataclasses <-> JSON dicts: the config.json written next to checkpoints."""

import dataclasses
import json
import types
import typing
from typing import Any


def to_dict(config: Any) -> dict[str, Any]:
  """A (nested) config dataclass as a JSON-ready dict: nested dataclasses become dicts, tuples lists.

  Raises:
    TypeError: For a field value JSON cannot hold.
  """
  return json.loads(json.dumps(dataclasses.asdict(config)))


def from_dict(cls: type, values: dict[str, Any]) -> Any:
  """Rebuilds a (nested) config dataclass from `to_dict`'s output (a parsed config.json).

  Field values are converted by the type hints: nested dataclasses from dicts, tuples from lists (also inside
  Optionals, lists, tuples and dicts). Fields missing from `values` take their defaults, so a config.json
  written before a field existed still loads.

  Raises:
    ValueError: For a key that the dataclass (or a nested one) has no field for, naming the key and where it
      was found, or for a nested dataclass given something other than a dict.
  """
  return _from_dict(cls, values, cls.__name__)


def _from_dict(cls: type, values: Any, where: str) -> Any:
  if not isinstance(values, dict):
    raise ValueError(f"{where}: expected a dict of {cls.__name__} fields, got {values!r}.")
  fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
  unknown = sorted(set(values) - set(fields))
  if unknown:
    raise ValueError(f"{where}: {cls.__name__} has no field(s) {unknown}; expected some of {sorted(fields)}.")
  hints = typing.get_type_hints(cls)
  return cls(**{name: _from_value(hints[name], value, f"{where}.{name}") for name, value in values.items()})


def _from_value(hint: Any, value: Any, where: str) -> Any:
  if value is None:
    return None
  origin = typing.get_origin(hint)
  args = typing.get_args(hint)
  if origin in (typing.Union, types.UnionType):
    options = [arg for arg in args if arg is not type(None)]
    dataclass_options = [arg for arg in options if dataclasses.is_dataclass(arg)]
    # A dict goes to the dataclass option, anything else to the first other one.
    if isinstance(value, dict) and dataclass_options:
      return _from_value(dataclass_options[0], value, where)
    others = [arg for arg in options if not dataclasses.is_dataclass(arg)] or options
    return _from_value(others[0], value, where)
  if dataclasses.is_dataclass(hint):
    return _from_dict(hint, value, where)
  if origin is tuple and isinstance(value, list | tuple):
    if len(args) == 2 and args[1] is Ellipsis:
      return tuple(_from_value(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
    if args and len(args) == len(value):
      items = enumerate(zip(args, value, strict=True))
      return tuple(_from_value(arg, item, f"{where}[{i}]") for i, (arg, item) in items)
    return tuple(value)
  if origin is list and isinstance(value, list | tuple):
    item_hint = args[0] if args else Any
    return [_from_value(item_hint, item, f"{where}[{i}]") for i, item in enumerate(value)]
  if origin is dict and isinstance(value, dict) and len(args) == 2:
    return {key: _from_value(args[1], item, f"{where}[{key!r}]") for key, item in value.items()}
  return value
