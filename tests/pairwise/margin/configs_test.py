"""Tests for pairwise.margin.configs: validation and the config.json round trip."""

import json

import tensorflow as tf

from pairwise.margin import configs
from rank4class_engine.optimization import optimizers


class ConfigTest(tf.test.TestCase):

  def test_listwise_needs_group_batching(self):
    with self.assertRaisesRegex(ValueError, "batching='groups'"):
      configs.PairwiseConfig(model=configs.ModelConfig(objective="softmax"),
                             train=configs.PairwiseTrainConfig(batching="pairs"))

  def test_precompute_needs_text_encoder(self):
    with self.assertRaisesRegex(ValueError, "precompute"):
      configs.EncoderConfig(kind="hashed_bow", precompute=True)

  def test_the_input_format_of_the_users_files(self):
    rows = configs.ItemDataConfig(dataset="rows", data_files="r.txt", group_column="g", input_format="tsv")
    self.assertEqual((rows.input_format, rows.rows_format), ("tsv", "tsv"))
    self.assertEqual(configs.ItemDataConfig(dataset="rows", data_files="r.csv", group_column="g").rows_format,
                     "auto")
    with self.assertRaisesRegex(ValueError, r"^`input_format`=csv does not fit `dataset`=elwc: ELWC lists "
                                r"are `input_format`=elwc\.$"):
      configs.ItemDataConfig(dataset="elwc", data_files="l.tfrecord", input_format="csv")
    with self.assertRaisesRegex(ValueError, r"`input_format` must be one of \['auto', 'elwc', 'rows', 'csv', "
                                r"'tsv', 'jsonl', 'tab'\], got 'libsvm'"):
      configs.ItemDataConfig(input_format="libsvm")
    self.assertEqual([configs.files_dataset(files, name) for files, name in (
        ("a.csv,b.csv", "auto"), ("l.tfrecord", "auto"), ("l.data", "auto"), ("x.txt", "tsv"),
        ("x.csv", "elwc"))], ["rows", "elwc", "elwc", "rows", "elwc"])

  def test_unknown_names_raise(self):
    with self.assertRaisesRegex(ValueError, "pivot"):
      configs.ItemDataConfig(pivot="user")
    with self.assertRaisesRegex(ValueError, "objective"):
      configs.ModelConfig(objective="lambdamart")
    with self.assertRaisesRegex(ValueError, "list_size"):
      configs.PairwiseTrainConfig(list_size=1)

  def test_names_and_ranges_used_only_later_raise_when_the_config_is_made(self):
    # Evaluation settings are read after training, the pooling when the encoder is built: refused up front.
    for config, message in (
        (lambda: configs.PairwiseEvaluationConfig(gain="log"),
         r"`gain` must be one of \['exponential', 'linear'\], got 'log'"),
        (lambda: configs.PairwiseEvaluationConfig(tie_breaking="random"),
         r"`tie_breaking` must be one of \['pessimistic', "),
        (lambda: configs.PairwiseEvaluationConfig(topn=0), "`topn` must be an integer >= 1, got 0"),
        (lambda: configs.PairwiseEvaluationConfig(max_pairs_per_batch=0),
         "`max_pairs_per_batch` must be >= 1, got 0"),
        (lambda: configs.EncoderConfig(pooling="max"),
         r"`pooling` must be one of \['cls', 'mean'\], got 'max'"),
        (lambda: configs.ModelConfig(dropout=1.0), r"`dropout` must be in \[0, 1\), got 1.0"),
        (lambda: configs.ModelConfig(head="deep"), r"`head` must be one of \['mlp', 'linear'\], got 'deep'"),
        (lambda: configs.PairwiseTrainConfig(batching="lists"),
         r"`batching` must be one of \['groups', 'pairs'\]"),
        (lambda: configs.EncoderConfig(kind="bm25"),
         r"`kind` must be one of \['text_encoder', 'hashed_bow', "),
        (lambda: configs.PairwiseTrainConfig(optimizer=optimizers.OptimizerConfig(learning_rate=0.0)),
         "`learning_rate` must be > 0, got 0.0"),
        (lambda: configs.PairwiseTrainConfig(preemption_grace_seconds=-1.0),
         "`preemption_grace_seconds` must be >= 0, got -1.0"),
    ):
      with self.assertRaisesRegex(ValueError, message):
        config()

  def test_dict_round_trip(self):
    config = configs.PairwiseConfig(model=configs.ModelConfig(head="linear", num_classes=3),
                                    train=configs.PairwiseTrainConfig(model_dir="/x", seed=4))
    self.assertEqual(configs.PairwiseConfig.from_dict(json.loads(json.dumps(config.to_dict()))), config)

  def test_unknown_section_raises(self):
    with self.assertRaisesRegex(ValueError, "optimizer"):
      configs.PairwiseConfig.from_dict({"optimizer": {}})

  def test_unknown_field_raises_naming_it(self):
    with self.assertRaisesRegex(ValueError,
                                r"PairwiseConfig.model: ModelConfig has no field\(s\) \['heads'\]"):
      configs.PairwiseConfig.from_dict({"model": {"heads": "mlp"}})

  def test_missing_sections_and_fields_take_defaults_and_tuples_come_back(self):
    config = configs.PairwiseConfig.from_dict({"data": {"passages_per_grade": [1, 2, 3]}})
    self.assertEqual(config.data.passages_per_grade, (1, 2, 3))
    self.assertEqual(config.train, configs.PairwiseTrainConfig())



class OptimizerSectionTest(tf.test.TestCase):
  """The train section holds the engine's OptimizerConfig; a config.json written before 0.9.0, whose AdamW
  settings were fields of the train section, still loads."""

  # The train section of a config.json written by 0.8.0.
  FLAT = {"model_dir": "/run", "train_steps": 60, "learning_rate": 5e-3, "beta_1": 0.8, "beta_2": 0.99,
          "epsilon": 1e-6, "weight_decay": 0.1, "global_clipnorm": 0.0}

  def test_default_is_the_papers_adamw(self):
    optimizer = configs.PairwiseTrainConfig().optimizer
    self.assertEqual((optimizer.type, optimizer.learning_rate, optimizer.weight_decay, optimizer.epsilon,
                      optimizer.global_clipnorm), (optimizers.ADAMW, 4e-5, 0.01, 1e-8, 1.0))
    self.assertEqual(optimizer.exclude_from_decay, optimizers.NO_DECAY_NAMES)

  def test_flat_optimizer_fields_load_into_the_optimizer(self):
    config = configs.PairwiseConfig.from_dict({"train": dict(self.FLAT)})
    self.assertEqual(config.train.optimizer, optimizers.OptimizerConfig(
        type=optimizers.ADAMW, learning_rate=5e-3, weight_decay=0.1, beta_1=0.8, beta_2=0.99, epsilon=1e-6,
        global_clipnorm=None, exclude_from_decay=optimizers.NO_DECAY_NAMES))  # A clip norm of 0 meant none.
    self.assertEqual((config.train.model_dir, config.train.train_steps), ("/run", 60))
    self.assertEqual(configs.PairwiseTrainConfig.from_dict(dict(self.FLAT)), config.train)

  def test_a_default_flat_config_compares_equal_to_the_default_config(self):
    flat_defaults = {"learning_rate": 4e-5, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-8,
                     "weight_decay": 0.01, "global_clipnorm": 1.0}
    old = configs.PairwiseConfig.from_dict({"train": flat_defaults}).to_dict()
    self.assertEqual(old, configs.PairwiseConfig().to_dict())  # So a run of 0.8.0 resumes.

  def test_flat_fields_beside_an_optimizer_raise_naming_them(self):
    with self.assertRaisesRegex(ValueError, r"not also as the fields \['learning_rate'\]"):
      configs.PairwiseConfig.from_dict({"train": {"learning_rate": 1e-3, "optimizer": {"type": "adamw"}}})

  def test_old_names_are_the_new_classes(self):
    self.assertIs(configs.TrainConfig, configs.PairwiseTrainConfig)
    self.assertIs(configs.EvalConfig, configs.PairwiseEvaluationConfig)


if __name__ == "__main__":
  tf.test.main()
