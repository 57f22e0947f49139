"""Input layer of the toolkit, in subpackages by concept:

- `records`: TFRecord files, the tf.data input pipeline, classification `tf.Example` records, ELWC lists and
  ELWC class lists.
- `rows`: row files (CSV, TSV, JSONL, LibSVM, Orange `.tab`), the LibSVM line parser, the bad-row policy, the
  class-texts file.
- `conversion`: rows and image folders converted to TFRecords (and back), a conversion's files, the row cache.
- `ranking`: grouped ranking data (items in groups, grouped rows, feature lists, CSV ranking corpora).
- `datasets`: the named real data sets.

At the top: the stack check, TF-Ranking access, the file-format registry, validation and atomic writes, write
failures, the library's terminal lines and progress line, label vocabularies, stratified splits, the
classification data a run reads (`classification_data`), the labelled records evaluation reads, and the moved
modules' old names. The flat module names of 0.8 (`rank4class_data.tfrecords`, ...) are deprecated aliases of
the moved modules until 0.10.0 (`rank4class_data.moved_modules`).

The repository's `data/` folder is not this package: it holds the example files `scripts/make_example_data.py`
writes.
"""

from rank4class_data import moved_modules as _moved_modules
from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

# 0.9: the flat modules moved into subpackages; their 0.8 paths are deprecated aliases until 0.10.0.
_SUBPACKAGES = {
    "records": ("class_lists", "elwc", "input_pipeline", "tfrecord_files", "tfrecords"),
    "rows": ("bad_rows", "class_texts", "libsvm", "row_tables"),
    "conversion": ("conversion_files", "convert", "image_folders", "row_cache"),
    "ranking": ("feature_lists", "grouped_items", "grouped_rows", "ranking_corpus"),
}
_moved_modules.alias({f"{__name__}.{module}": f"{__name__}.{subpackage}.{module}"
                      for subpackage, modules in _SUBPACKAGES.items() for module in modules})


def __getattr__(name: str):
  """`rank4class_data.<0.8 module name>` after `import rank4class_data`: the moved module, through its
  deprecated alias."""
  return _moved_modules.old_attribute(__name__, name)
