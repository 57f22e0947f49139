"""Tests for pairwise.margin.configs: validation and the config.json round trip."""

import json

import tensorflow as tf

from pairwise.margin import configs


class ConfigTest(tf.test.TestCase):

  def test_listwise_needs_group_batching(self):
    with self.assertRaisesRegex(ValueError, "batching='groups'"):
      configs.PairwiseConfig(model=configs.ModelConfig(objective="softmax"),
                             train=configs.TrainConfig(batching="pairs"))

  def test_precompute_needs_text_encoder(self):
    with self.assertRaisesRegex(ValueError, "precompute"):
      configs.EncoderConfig(kind="hashed_bow", precompute=True)

  def test_unknown_names_raise(self):
    with self.assertRaisesRegex(ValueError, "pivot"):
      configs.ItemDataConfig(pivot="user")
    with self.assertRaisesRegex(ValueError, "objective"):
      configs.ModelConfig(objective="lambdamart")
    with self.assertRaisesRegex(ValueError, "list_size"):
      configs.TrainConfig(list_size=1)

  def test_names_and_ranges_used_only_later_raise_when_the_config_is_made(self):
    # Evaluation settings are read after training, the pooling when the encoder is built: refused up front.
    for config, message in (
        (lambda: configs.EvalConfig(gain="log"), r"`gain` must be one of \['exponential', 'linear'\], got 'log'"),
        (lambda: configs.EvalConfig(tie_breaking="random"), r"`tie_breaking` must be one of \['pessimistic', "),
        (lambda: configs.EvalConfig(topn=0), "`topn` must be an integer >= 1, got 0"),
        (lambda: configs.EvalConfig(max_pairs_per_batch=0), "`max_pairs_per_batch` must be >= 1, got 0"),
        (lambda: configs.EncoderConfig(pooling="max"), r"`pooling` must be one of \['cls', 'mean'\], got 'max'"),
        (lambda: configs.ModelConfig(dropout=1.0), r"`dropout` must be in \[0, 1\), got 1.0"),
        (lambda: configs.ModelConfig(head="deep"), r"`head` must be one of \['mlp', 'linear'\], got 'deep'"),
        (lambda: configs.TrainConfig(batching="lists"), r"`batching` must be one of \['groups', 'pairs'\]"),
        (lambda: configs.EncoderConfig(kind="bm25"), r"`kind` must be one of \['text_encoder', 'hashed_bow', "),
        (lambda: configs.TrainConfig(learning_rate=0.0), "`learning_rate` must be > 0, got 0.0"),
        (lambda: configs.TrainConfig(preemption_grace_seconds=-1.0),
         "`preemption_grace_seconds` must be >= 0, got -1.0"),
    ):
      with self.assertRaisesRegex(ValueError, message):
        config()

  def test_dict_round_trip(self):
    config = configs.PairwiseConfig(model=configs.ModelConfig(head="linear", num_classes=3),
                                    train=configs.TrainConfig(model_dir="/x", seed=4))
    self.assertEqual(configs.PairwiseConfig.from_dict(json.loads(json.dumps(config.to_dict()))), config)

  def test_unknown_section_raises(self):
    with self.assertRaisesRegex(ValueError, "optimizer"):
      configs.PairwiseConfig.from_dict({"optimizer": {}})

  def test_unknown_field_raises_naming_it(self):
    with self.assertRaisesRegex(ValueError, r"PairwiseConfig.model: ModelConfig has no field\(s\) \['heads'\]"):
      configs.PairwiseConfig.from_dict({"model": {"heads": "mlp"}})

  def test_missing_sections_and_fields_take_defaults_and_tuples_come_back(self):
    config = configs.PairwiseConfig.from_dict({"data": {"passages_per_grade": [1, 2, 3]}})
    self.assertEqual(config.data.passages_per_grade, (1, 2, 3))
    self.assertEqual(config.train, configs.TrainConfig())


if __name__ == "__main__":
  tf.test.main()
