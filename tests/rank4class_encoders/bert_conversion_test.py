"""Tests for rank4class_encoders.bert_conversion: checkpoint conversion, the conversion cache, random
exports."""

import json
import os
import shutil
import tempfile
from unittest import mock

import tensorflow as tf
import tensorflow_hub as hub
from absl.testing import parameterized

from rank4class_encoders import bert_conversion, bert_encoder, bert_weights
from tests.rank4class_encoders.tiny_bert import TINY_VOCAB, write_tiny_checkpoint


class ConversionTest(tf.test.TestCase):
  """One tiny random Hugging Face checkpoint, converted once through the cache."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.temp = tempfile.mkdtemp()
    cls.checkpoint = os.path.join(cls.temp, "checkpoint")
    cls.cache = os.path.join(cls.temp, "cache")
    cls.config = write_tiny_checkpoint(cls.checkpoint, seed=3)
    cls.handles = bert_conversion.cached_conversion(cls.checkpoint, cls.cache)
    cls.encoder = hub.load(cls.handles.encoder)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.temp, ignore_errors=True)
    super().tearDownClass()

  def test_round_trip_keeps_weights_and_vocab(self):
    want = bert_weights.random_bert_weights(self.config, seed=3)
    got = {v.name.split(":")[0]: v.numpy() for v in self.encoder.variables}
    self.assertSameElements(got, want)
    for name, value in want.items():
      self.assertAllEqual(got[name], value)
    preprocessor = hub.load(self.handles.preprocess)
    self.assertAllEqual(
      preprocessor.tokenize(tf.constant(["The cats sat."])).to_list(), [[[5], [6, 11], [7], [13]]]
    )
    info = json.load(open(os.path.join(os.path.dirname(self.handles.encoder), "conversion.json")))
    self.assertEqual(info["architecture"]["num_layers"], 2)
    self.assertIn("model.safetensors", info["source_files"])

  def test_second_call_reuses_the_conversion(self):
    with mock.patch.object(
      bert_conversion, "convert_bert_checkpoint", side_effect=AssertionError("reconverted")
    ):
      again = bert_conversion.cached_conversion(self.checkpoint, self.cache)
    self.assertEqual(again, self.handles)
    self.assertEqual(os.listdir(self.cache), [bert_conversion.conversion_cache_key(self.checkpoint)])

  def test_incomplete_entry_is_redone(self):
    cache = self.create_tempdir().full_path
    entry = os.path.join(cache, bert_conversion.conversion_cache_key(self.checkpoint))
    os.makedirs(os.path.join(entry, "encoder"))  # A crashed run's leftovers.

    def fake_conversion(unused_checkpoint_dir, output_dir):  # A copy stands in for a second real conversion.
      shutil.copytree(os.path.dirname(self.handles.encoder), output_dir, dirs_exist_ok=True)

    with mock.patch.object(bert_conversion, "convert_bert_checkpoint",
                           side_effect=fake_conversion) as convert:
      handles = bert_conversion.cached_conversion(self.checkpoint, cache)
    convert.assert_called_once()
    self.assertTrue(os.path.isfile(os.path.join(handles.encoder, "saved_model.pb")))
    self.assertEqual(os.listdir(cache), [os.path.basename(entry)])  # No temporary folders left.

  def test_changed_weights_change_the_key(self):
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint, seed=0)
    key = bert_conversion.conversion_cache_key(checkpoint)
    write_tiny_checkpoint(checkpoint, seed=1)
    self.assertNotEqual(bert_conversion.conversion_cache_key(checkpoint), key)

  def test_tensorflow_version_changes_the_key(self):
    # A SavedModel written on the current stack (TF 2.21) need not load on the reference stack (TF 2.15).
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint, seed=0)
    key = bert_conversion.conversion_cache_key(checkpoint)
    with mock.patch.object(tf, "__version__", "2.99.0"):
      self.assertNotEqual(bert_conversion.conversion_cache_key(checkpoint), key)
    self.assertEqual(bert_conversion.conversion_cache_key(checkpoint), key)


class BadCheckpointTest(tf.test.TestCase, parameterized.TestCase):
  @parameterized.parameters("vocab.txt", "model.safetensors", "config.json")
  def test_missing_file_is_named(self, name):
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint)
    os.remove(os.path.join(checkpoint, name))
    with self.assertRaisesRegex(FileNotFoundError, f"lacks {name}"):
      bert_conversion.convert_bert_checkpoint(checkpoint, self.create_tempdir().full_path)

  def test_missing_directory_raises(self):
    with self.assertRaisesRegex(FileNotFoundError, "does not exist"):
      bert_conversion.cached_conversion("/nonexistent/checkpoint")

  def test_non_bert_config_raises(self):
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint)
    config_path = os.path.join(checkpoint, "config.json")
    config = json.load(open(config_path))
    config["model_type"] = "roberta"
    json.dump(config, open(config_path, "w"))
    with self.assertRaisesRegex(ValueError, "model_type 'roberta'.*only BERT"):
      bert_conversion.convert_bert_checkpoint(checkpoint, self.create_tempdir().full_path)

  def test_weights_for_fewer_layers_raise(self):
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint)
    config_path = os.path.join(checkpoint, "config.json")
    config = json.load(open(config_path))
    config["num_hidden_layers"] = 3
    json.dump(config, open(config_path, "w"))
    with self.assertRaisesRegex(ValueError, "lacks 16 BERT tensors.*encoder.layer.2"):
      bert_conversion.convert_bert_checkpoint(checkpoint, self.create_tempdir().full_path)

  def test_vocab_size_mismatch_raises(self):
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint)
    with open(os.path.join(checkpoint, "vocab.txt"), "a", encoding="utf-8") as f:
      f.write("extra\n")
    with self.assertRaisesRegex(
      ValueError, "vocab.txt has 25 word pieces but config.json says vocab_size=24"
    ):
      bert_conversion.convert_bert_checkpoint(checkpoint, self.create_tempdir().full_path)

  def test_corrupt_weights_raise(self):
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint)
    with open(os.path.join(checkpoint, "model.safetensors"), "wb") as f:
      f.write(b"not safetensors")
    with self.assertRaisesRegex(ValueError, "model.safetensors is not a readable safetensors file"):
      bert_conversion.convert_bert_checkpoint(checkpoint, self.create_tempdir().full_path)

  def test_vocab_without_special_token_raises(self):
    with self.assertRaisesRegex(ValueError, r"lacks the special token '\[CLS\]'"):
      bert_conversion.export_random_bert(self.create_tempdir().full_path, ["[PAD]", "[UNK]", "[SEP]", "a"])


class DefaultSeqLengthTest(tf.test.TestCase, parameterized.TestCase):
  @parameterized.parameters(2, 65, 16.0)
  def test_bad_default_seq_length_raises(self, length):
    checkpoint = self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint)
    with self.assertRaisesRegex(ValueError,
                                rf"`default_seq_length` must be an integer in \[3, 64\], got {length}\."):
      bert_conversion.convert_bert_checkpoint(checkpoint, self.create_tempdir().full_path,
                                              default_seq_length=length)


class ExportRandomBertTest(tf.test.TestCase):
  def test_export_is_a_deterministic_function_of_the_arguments(self):
    output_dir = self.create_tempdir().full_path
    with mock.patch.dict(bert_conversion._RANDOM_EXPORTS, clear=True):  # pylint: disable=protected-access
      handles = bert_conversion.export_random_bert(
        output_dir, TINY_VOCAB, hidden_size=8, num_layers=3, num_heads=2, intermediate_size=16, seed=5
      )
      encoder = hub.load(handles.encoder)
      config = bert_encoder.BertArchitecture(
        vocab_size=len(TINY_VOCAB), hidden_size=8, num_layers=3, num_heads=2, intermediate_size=16
      )
      want = bert_weights.random_bert_weights(config, seed=5)
      other_seed = bert_weights.random_bert_weights(config, seed=6)
      got = {v.name.split(":")[0]: v.numpy() for v in encoder.variables}
      for name, value in want.items():
        self.assertAllEqual(got[name], value)
      self.assertNotAllClose(want["layer_0/intermediate/kernel"], other_seed["layer_0/intermediate/kernel"])
      outputs = encoder(hub.load(handles.preprocess)(tf.constant(["the cat", "a dog!"])))
      self.assertEqual(outputs["sequence_output"].shape, [2, 128, 8])
      self.assertEqual(outputs["pooled_output"].shape, [2, 8])
      self.assertLen(outputs["encoder_outputs"], 3)
      # The same arguments again are served from the first export, with identical outputs.
      again = bert_conversion.export_random_bert(
        self.create_tempdir().full_path,
        TINY_VOCAB,
        hidden_size=8,
        num_layers=3,
        num_heads=2,
        intermediate_size=16,
        seed=5,
      )
      self.assertNotEqual(again.encoder, handles.encoder)
      inputs = {
        "input_word_ids": tf.constant([[2, 5, 3]]),
        "input_mask": tf.ones([1, 3], tf.int32),
        "input_type_ids": tf.zeros([1, 3], tf.int32),
      }
      self.assertAllEqual(hub.load(again.encoder)(inputs)["pooled_output"], encoder(inputs)["pooled_output"])

  def test_bad_architecture_raises(self):
    with self.assertRaisesRegex(ValueError, "hidden_size` 10 is not divisible by `num_heads` 3"):
      bert_conversion.export_random_bert(
        self.create_tempdir().full_path, TINY_VOCAB, hidden_size=10, num_heads=3
      )


class MiniLMCheckpointDirTest(tf.test.TestCase):
  def test_points_at_the_package_model(self):
    directory = bert_conversion.minilm_checkpoint_dir()
    for name in bert_conversion.REQUIRED_CHECKPOINT_FILES:
      self.assertTrue(os.path.isfile(os.path.join(directory, name)), name)


if __name__ == "__main__":
  tf.test.main()
