"""Conversion to the classification TFRecords: row files and image folders converted (and back), a
conversion's files (the TFRecord with its vocabulary beside it), and the cache of conversions made for
training."""
