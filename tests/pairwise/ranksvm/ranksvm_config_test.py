"""Tests for pairwise.ranksvm.ranksvm_config: config validation and config.json keys (the configs of the
binary's flags: tests/rank4class_cli/binaries/ranksvm_main_test.py)."""

import dataclasses

import tensorflow as tf
from absl.testing import parameterized

from pairwise.ranksvm import ranksvm_config


class RankingDataConfigTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("corpus_without_dir", {"format": "corpus"}, "`format`=corpus needs `data_dir`, the folder"),
      ("libsvm_without_path", {"format": "libsvm"}, "`format`=libsvm needs `data_path`"),
      ("tsv_without_path", {"format": "tsv"}, "`format`=tsv needs `data_path`"),
      ("two_row_formats", {"format": "csv", "data_path": "x", "rows_format": "tsv"},
       "`format`=csv and `rows_format`=tsv name two row formats"),
      ("unknown_format", {"format": "parquet"}, r"`format` must be one of \[.*'libsvm'.*\], got 'parquet'"),
      ("empty_label_key", {"format": "elwc", "data_path": "x", "elwc_label_key": ""}, "`elwc_label_key`"),
      ("bad_duplicates", {"format": "libsvm", "data_path": "x", "libsvm_duplicates": "first"}, "'first'"),
  )
  def test_bad_values_raise_naming_the_field(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      ranksvm_config.RankingDataConfig(**kwargs)

  def test_a_row_format_is_rows_of_that_format(self):
    config = ranksvm_config.RankingDataConfig(format="jsonl", data_path="runs.txt")
    self.assertEqual((config.format, config.rows_format), ("rows", "jsonl"))

  def test_csv_of_a_config_json_before_0_9_is_the_corpus(self):
    config = ranksvm_config.RankingDataConfig(format="csv", data_dir="/data")
    self.assertEqual((config.format, config.data_dir, config.data_path), ("corpus", "/data", None))

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

  def test_bad_rows_format_raises_naming_the_field(self):
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
