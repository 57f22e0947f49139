"""Rank4Class training lists from ELWC: per instance, its candidate classes with graded relevance.

The ELWC layout (the one `rank4class-evaluate --input_format=elwc` reads): the list's context holds the
instance (a text, or a dense feature vector), each example is one candidate class with an int64 class id and a
relevance label. TF-Ranking users write such files with `tensorflow_serving.apis.input_pb2`; the label key and
the feature names are settings, since every writer names them its own way.

Each list becomes one row of a relevance matrix over all classes `[num_rows, num_classes]`: listed classes get
their label; classes the list does not name get `unlisted_relevance` (0: judged irrelevant; -1: not judged,
so TF-Ranking's losses and metrics skip them as padding).
"""

import dataclasses
import math

import numpy as np

from rank4class_data import label_vocabulary
from rank4class_data.records import elwc, tfrecords
from rank4class_data.validation import DataError, check_choice, check_range

TEXT = "text"
DENSE = "dense"
UNLISTED_ZERO = 0.0
UNLISTED_MASKED = -1.0  # TF-Ranking's padding label.
_DEFAULT_KEYS = (tfrecords.TEXT_KEY, tfrecords.DENSE_KEY)


@dataclasses.dataclass
class ClassListsConfig:
  """How to read Rank4Class lists from ELWC files.

  Attributes:
    file_pattern: Comma-separated globs of ELWC TFRecord files.
    num_classes: Number of classes; class ids must lie in [0, num_classes).
    feature_key: Context feature holding the instance (text: bytes; dense: floats); None for "text" or, when
      the context has no "text", "features" (the converter's names).
    label_key: Example feature holding the relevance (one number >= 0).
    class_id_key: Example feature holding the candidate's class id (one integer).
    unlisted_relevance: Relevance of the classes a list does not name: 0 (irrelevant) or -1 (not judged).
  """

  file_pattern: str
  num_classes: int
  feature_key: str | None = None
  label_key: str = elwc.LABEL_KEY
  class_id_key: str = "class_id"
  unlisted_relevance: float = UNLISTED_ZERO

  def __post_init__(self):
    check_range("num_classes", self.num_classes, 2, integer=True)
    check_choice("unlisted_relevance", self.unlisted_relevance, (UNLISTED_ZERO, UNLISTED_MASKED))


@dataclasses.dataclass
class ClassLists:
  """Lists read into memory.

  Attributes:
    kind: TEXT or DENSE.
    features: Texts (object array `[n]`) or float32 vectors `[n, d]`.
    relevance: float32 `[n, num_classes]`.
  """

  kind: str
  features: np.ndarray
  relevance: np.ndarray


def _instance(feature, path: str, row: int, key: str) -> tuple[str, str | list[float]]:
  kind = feature.WhichOneof("kind")
  if kind == "bytes_list" and feature.bytes_list.value:
    return TEXT, " ".join(v.decode("utf-8") for v in feature.bytes_list.value)
  if kind == "float_list" and feature.float_list.value:
    return DENSE, list(feature.float_list.value)
  raise DataError(path, f"the context has {key!r} as {kind or 'an empty feature'}", row=row, field=key,
                  expected="the instance as text (bytes_list) or a dense vector (float_list)")


def read_class_lists(config: ClassListsConfig) -> ClassLists:
  """Reads every list of `config.file_pattern` (in file order) into a relevance matrix.

  Raises:
    FileNotFoundError: naming the pattern when no file matches.
    DataError: naming file, list (row), example and feature for: a context without the instance feature (its
      features are listed), an instance of another kind or size than the first list's, an empty list, an
      example without the class id or label, a class id outside [0, num_classes), a label that is not one
      number >= 0, a class listed twice in one list, or a list without a positive label.
  """
  kinds, features, rows, key = set(), [], [], None
  for path in tfrecords.InputConfig(config.file_pattern).files():
    for row, elwc_list in enumerate(elwc.read_elwc(path), start=1):
      context = elwc_list.context.features.feature
      key = key or config.feature_key or next((k for k in _DEFAULT_KEYS if k in context), _DEFAULT_KEYS[0])
      if key not in context:
        names = {k: v.WhichOneof("kind") for k, v in sorted(context.items())}
        raise DataError(path, f"the context has no {key!r} (its features: {names})", row=row, field=key,
                        expected="the instance in the context; name it with `feature_key`")
      kind, value = _instance(context[key], path, row, key)
      if features and (kind not in kinds or (kind == DENSE and len(value) != len(features[0]))):
        first = f"a vector of {len(features[0])}" if DENSE in kinds else "text"
        got = f"a vector of {len(value)}" if kind == DENSE else "text"
        raise DataError(path, f"the instance is {got} but the first list's is {first}", row=row, field=key,
                        expected="the same kind and size of instance in every list")
      kinds.add(kind)
      features.append(value)
      rows.append(_relevance(elwc_list, config, path, row))
  if not rows:
    raise DataError(config.file_pattern, "no lists", expected="at least one ELWC list")
  feature_array = np.asarray(features, dtype=object) if TEXT in kinds else np.asarray(features, np.float32)
  return ClassLists(kinds.pop(), feature_array, np.stack(rows).astype(np.float32))


def _relevance(elwc_list, config: ClassListsConfig, path: str, row: int) -> np.ndarray:
  if not elwc_list.examples:
    raise DataError(path, "empty list (no examples)", row=row, field="examples",
                    expected="at least one candidate class per list")
  relevance = np.full([config.num_classes], config.unlisted_relevance, np.float32)
  listed = set()
  for position, example in enumerate(elwc_list.examples, start=1):
    values = example.features.feature
    where = f"example {position}"
    for key, setting in ((config.class_id_key, "class_id_key"), (config.label_key, "label_key")):
      if key not in values:
        names = {k: v.WhichOneof("kind") for k, v in sorted(values.items())}
        raise DataError(path, f"{where} has no {key!r} (its features: {names})", row=row, field=key,
                        expected=f"it in every example; name it with `{setting}`")
    class_id = elwc.one_number(values[config.class_id_key], path, row, config.class_id_key, where)
    if class_id != int(class_id) or not 0 <= class_id < config.num_classes:
      raise DataError(path, f"{where} has class id {class_id:g}", row=row, field=config.class_id_key,
                      expected=f"an integer class id in [0, {config.num_classes})")
    if class_id in listed:
      raise DataError(path, f"{where} lists class {int(class_id)} a second time", row=row,
                      field=config.class_id_key, expected="each class at most once per list")
    label = elwc.one_number(values[config.label_key], path, row, config.label_key, where)
    if not math.isfinite(label) or label < 0:
      raise DataError(path, f"{where} has label {label}", row=row, field=config.label_key,
                      expected="one relevance number >= 0")
    listed.add(class_id)
    relevance[int(class_id)] = label
  if not np.any(relevance > 0):
    raise DataError(path, "no candidate has a positive label", row=row, field=config.label_key,
                    expected="at least one relevant class (label > 0) per list to learn from")
  return relevance


def read_class_names(path: str) -> list[str]:
  """Class names in id order, from the converter's vocabulary JSON or a file with one name per line (the
  converter's own reader, `label_vocabulary.LabelVocabulary.from_file`), at least two of them.

  Raises:
    FileNotFoundError / DataError: for a missing file, bad JSON, an empty or repeated name (naming its line),
      or fewer than two names.
  """
  names = label_vocabulary.LabelVocabulary.from_file(path).classes
  if len(names) < 2:
    raise DataError(path, f"{len(names)} class name(s)", expected="at least two classes")
  return names
