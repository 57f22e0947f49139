"""End-to-end tests of the rank4class-convert-encoder binary."""

import json
import os

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
from absl import app, flags
from absl.testing import flagsaver

from rank4class import convert_encoder_main, hub_conversion

FLAGS = flags.FLAGS
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "##s", "."]


def write_tiny_checkpoint(directory: str, seed: int = 0) -> dict[str, np.ndarray]:
  config = hub_conversion.BertArchitecture(
    vocab_size=len(VOCAB),
    hidden_size=8,
    num_layers=1,
    num_heads=2,
    intermediate_size=16,
    max_position_embeddings=32,
  )
  weights = hub_conversion.random_bert_weights(config, seed)
  hub_conversion.write_hugging_face_bert(directory, config, weights, VOCAB)
  return weights


class ConvertEncoderMainTest(tf.test.TestCase):
  def setUp(self):
    super().setUp()
    FLAGS.mark_as_parsed()

  def test_converts_into_output_dir_and_writes_config(self):
    checkpoint, output = self.create_tempdir().full_path, self.create_tempdir().full_path
    weights = write_tiny_checkpoint(checkpoint, seed=4)
    with flagsaver.flagsaver(checkpoint_dir=checkpoint, output_dir=output, default_seq_length=16):
      convert_encoder_main.main(["convert_encoder_main"])
    encoder = hub.load(os.path.join(output, "encoder"))
    variables = {v.name.split(":")[0]: v.numpy() for v in encoder.variables}
    self.assertAllEqual(variables["layer_0/intermediate/kernel"], weights["layer_0/intermediate/kernel"])
    inputs = hub.load(os.path.join(output, "preprocess"))(tf.constant(["The cats sat."]))
    self.assertAllEqual(inputs["input_word_ids"][0], [2, 5, 6, 10, 7, 11, 3] + [0] * 9)
    self.assertEqual(encoder(inputs)["pooled_output"].shape, [1, 8])
    config = json.load(open(os.path.join(output, "config.json")))
    self.assertEqual(
      config,
      {"checkpoint_dir": checkpoint, "output_dir": output, "cache_dir": None, "default_seq_length": 16},
    )

  def test_without_output_dir_converts_once_into_the_cache(self):
    checkpoint, cache = self.create_tempdir().full_path, self.create_tempdir().full_path
    write_tiny_checkpoint(checkpoint)
    with flagsaver.flagsaver(checkpoint_dir=checkpoint, cache_dir=cache):
      first = convert_encoder_main.convert(convert_encoder_main.config_from_flags())
      second = convert_encoder_main.convert(convert_encoder_main.config_from_flags())
    self.assertEqual(first, second)
    self.assertStartsWith(first.encoder, cache)
    self.assertTrue(os.path.isfile(os.path.join(first.encoder, "saved_model.pb")))

  def test_default_checkpoint_is_minilm(self):
    with flagsaver.flagsaver(checkpoint_dir=None):
      config = convert_encoder_main.config_from_flags()
    self.assertEqual(config.checkpoint_dir, hub_conversion.minilm_checkpoint_dir())

  def test_missing_checkpoint_dir_raises(self):
    with flagsaver.flagsaver(checkpoint_dir="/no/such/bert", output_dir=self.create_tempdir().full_path):
      with self.assertRaisesRegex(FileNotFoundError, "'/no/such/bert' does not exist"):
        convert_encoder_main.main(["convert_encoder_main"])

  def test_default_seq_length_without_output_dir_raises(self):
    with flagsaver.flagsaver(checkpoint_dir="/unused", default_seq_length=64):
      with self.assertRaisesRegex(ValueError, "--default_seq_length needs --output_dir"):
        convert_encoder_main.convert(convert_encoder_main.config_from_flags())

  def test_extra_arguments_raise(self):
    with self.assertRaises(app.UsageError):
      convert_encoder_main.main(["convert_encoder_main", "stray"])


if __name__ == "__main__":
  tf.test.main()
