"""End-to-end tests of the rank4class-convert-encoder binary."""

import json
import os

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub

from rank4class_cli.binaries import convert_encoder_main
from rank4class_encoders import bert_conversion, bert_encoder, bert_weights
from tests.rank4class_cli.cli_runner import parsed_config, run_binary

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "##s", "."]


def write_tiny_checkpoint(directory: str, seed: int = 0) -> dict[str, np.ndarray]:
  config = bert_encoder.BertArchitecture(
    vocab_size=len(VOCAB),
    hidden_size=8,
    num_layers=1,
    num_heads=2,
    intermediate_size=16,
    max_position_embeddings=32,
  )
  weights = bert_weights.random_bert_weights(config, seed)
  bert_weights.write_hugging_face_bert(directory, config, weights, VOCAB)
  return weights


def _config(argv: list[str]) -> convert_encoder_main.ConvertEncoderConfig:
  return parsed_config(convert_encoder_main, argv)


class ConvertEncoderMainTest(tf.test.TestCase):

  def test_converts_into_output_dir_and_writes_config(self):
    checkpoint, output = self.create_tempdir().full_path, self.create_tempdir().full_path
    weights = write_tiny_checkpoint(checkpoint, seed=4)
    result = run_binary(convert_encoder_main, [f"--checkpoint_dir={checkpoint}", f"--output_dir={output}",
                                               "--default_seq_length=16"])
    self.assertEqual((result.code, result.stderr), (0, ""))
    self.assertEqual(result.stdout.splitlines(), [f"preprocess_handle: {output}/preprocess",
                                                  f"encoder_handle: {output}/encoder"])
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
    config = _config([f"--checkpoint_dir={checkpoint}", f"--cache_dir={cache}"])
    first = convert_encoder_main.convert(config)
    second = convert_encoder_main.convert(config)
    self.assertEqual(first, second)
    self.assertStartsWith(first.encoder, cache)
    self.assertTrue(os.path.isfile(os.path.join(first.encoder, "saved_model.pb")))

  def test_default_checkpoint_is_minilm(self):
    self.assertEqual(_config([]).checkpoint_dir, bert_conversion.minilm_checkpoint_dir())

  def test_missing_checkpoint_dir_is_one_line_and_exit_1(self):
    result = run_binary(convert_encoder_main, ["--checkpoint_dir=/no/such/bert",
                                               f"--output_dir={self.create_tempdir().full_path}"])
    self.assertEqual(result.code, 1)
    self.assertEqual(result.stderr.splitlines(), [result.stderr.strip()])
    self.assertRegex(result.stderr, r"^rank4class-convert-encoder: error: .*'/no/such/bert' does not exist")

  def test_default_seq_length_without_output_dir_is_a_flag_error(self):
    result = run_binary(convert_encoder_main, ["--checkpoint_dir=/unused", "--default_seq_length=64"])
    self.assertEqual(result.code, 2)
    self.assertEqual(result.stderr, "rank4class-convert-encoder: error: --default_seq_length needs "
                     "--output_dir: cached conversions use the default length.\n")

  def test_extra_arguments_are_a_flag_error(self):
    result = run_binary(convert_encoder_main, ["stray"])
    self.assertEqual(result.code, 2)
    self.assertRegex(result.stderr, r"^rank4class-convert-encoder: error: unexpected arguments \['stray'\]")


if __name__ == "__main__":
  tf.test.main()
