"""Tests for rank4class_data.rows.libsvm: the line parser and sparse rows made dense."""

import numpy as np
import tensorflow as tf

from rank4class_data.rows import libsvm
from rank4class_data.validation import DataError


class LibsvmTest(tf.test.TestCase):

  def test_parse_line(self):
    parsed = libsvm.parse_line("2 qid:7 1:0.5 3:-1 # docid = d1", "f", 1, 1)
    self.assertEqual((parsed.label, parsed.qid, parsed.features, parsed.comment),
                     ("2", "7", {1: 0.5, 3: -1.0}, "docid = d1"))
    self.assertEqual(libsvm.parse_line("1 2:1 2:3", "f", 1, 1, "sum").features, {2: 4.0})
    with self.assertRaises(DataError):
      libsvm.parse_line("1 2:1 2:3", "f", 1, 1)

  def test_dense_features(self):
    dense = libsvm.dense_features([{1: 0.5, 3: 2.0}, {}, {2: -1.0}], 4)
    self.assertEqual(dense.dtype, np.float32)
    self.assertAllEqual(dense, [[0.5, 0, 2, 0], [0, 0, 0, 0], [0, -1, 0, 0]])


if __name__ == "__main__":
  tf.test.main()
