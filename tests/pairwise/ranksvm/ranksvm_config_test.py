"""Tests for pairwise.ranksvm.ranksvm_config: config validation and config.json keys (the configs of the
binary's flags: tests/rank4class_cli/binaries/ranksvm_main_test.py)."""

import dataclasses

import tensorflow as tf
from absl.testing import parameterized

from pairwise.ranksvm import ranksvm_config


class RankingDataConfigTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("csv_without_dir", {"format": "csv"}, "--input_format=csv needs --input, the folder"),
      ("libsvm_without_path", {"format": "libsvm"}, "--input_format=libsvm needs --input"),
      ("unknown_format", {"format": "parquet"}, r"`format` must be one of \[.*'libsvm'.*\], got 'parquet'"),
      ("empty_label_key", {"format": "elwc", "data_path": "x", "elwc_label_key": ""}, "--label_key"),
      ("bad_duplicates", {"format": "libsvm", "data_path": "x", "libsvm_duplicates": "first"}, "'first'"),
  )
  def test_bad_values_raise_naming_the_flag(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      ranksvm_config.RankingDataConfig(**kwargs)

  def test_config_json_keys(self):
    # A model's config.json is `dataclasses.asdict(RankSVMMainConfig)`: these keys are its format.
    config = dataclasses.asdict(ranksvm_config.RankSVMMainConfig(
        mode="evaluate", data=ranksvm_config.RankingDataConfig(format="libsvm", data_path="x")))
    self.assertEqual(list(config), ["mode", "model_dir", "data", "features", "encoder", "svm", "evaluation",
                                    "query", "query_id", "top_k", "display_field"])
    self.assertEqual(list(config["data"]), ["format", "data_dir", "data_path", "layout", "newsgroups",
                                            "elwc_label_key", "elwc_feature_names", "libsvm_duplicates",
                                            "feature_columns", "bad_rows", "rows_format"])
    self.assertEqual(config["data"]["layout"]["label_kind"], "relevance")
    self.assertEqual(list(config["svm"]),
                     ["c", "loss", "tolerance", "max_iterations", "batch_size", "num_epochs",
                                           "learning_rate", "final_learning_rate", "max_pairs_per_query",
                                           "skip_unpairable_queries", "seed"])
    self.assertEqual(config["data"]["bad_rows"],
                     {"policy": "fail", "max_bad_rows": None, "rejects_path": None})
    self.assertEqual(config["encoder"], {"name": "none", "max_seq_length": 128})


class RankSVMMainConfigTest(tf.test.TestCase):

  def test_bad_rows_format_raises_naming_the_flag(self):
    with self.assertRaisesRegex(ValueError, r"`rows_format` must be one of \['auto', 'csv'.*\], got 'txt'"):
      ranksvm_config.RankingDataConfig(format="rows", data_path="x", rows_format="txt")

  def test_bad_top_k_raises(self):
    with self.assertRaisesRegex(ValueError, "`top_k` must be an integer >= 1, got 0"):
      ranksvm_config.RankSVMMainConfig(
          mode="evaluate", data=ranksvm_config.RankingDataConfig(format="libsvm", data_path="x"), top_k=0)

  def test_old_evaluation_config_name_is_the_new_class(self):
    self.assertIs(ranksvm_config.EvaluationConfig, ranksvm_config.RankSVMEvaluationConfig)


if __name__ == "__main__":
  tf.test.main()
