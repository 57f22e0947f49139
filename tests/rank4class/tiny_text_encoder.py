"""The tiny random BERT of the zero-shot and class-text tests: a 13-word vocabulary, one layer of width 16."""

import tempfile

from rank4class_encoders import bert_conversion, text_encoder

# isort: split
import tensorflow as tf

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "big", "small", "dog", "cat",
         "bird", "fish", "tree"]


class TinyTextEncoderTestCase(tf.test.TestCase):
  """Exports the encoder once per test class: `cls.handles` (its preprocess and encoder SavedModels) and
  `cls.text`, its `TextEncoderConfig` of 8 tokens; the export is removed after the class."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls._tmp = tempfile.TemporaryDirectory()
    cls.handles = bert_conversion.export_random_bert(cls._tmp.name, VOCAB, hidden_size=16, num_layers=1,
                                                     num_heads=2, intermediate_size=32)
    cls.text = text_encoder.TextEncoderConfig(cls.handles.preprocess, cls.handles.encoder, max_seq_length=8)

  @classmethod
  def tearDownClass(cls):
    cls._tmp.cleanup()
    super().tearDownClass()
