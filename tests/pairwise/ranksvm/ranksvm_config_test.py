"""Tests for pairwise.ranksvm.ranksvm_config: config validation, config.json keys, and configs from flag values."""

import dataclasses

import tensorflow as tf
from absl.testing import parameterized

from pairwise.ranksvm import ranksvm_config
from rank4class_cli.binaries import ranksvm_main


def _flag_values(**overrides) -> dict:
  """The binary's flag defaults with `overrides`: what `config_from_flag_values` receives."""
  return {**{name: ranksvm_main.FLAGS[name].default for name in ranksvm_main.FLAGS}, **overrides}


class RankingDataConfigTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("csv_without_dir", {"format": "csv"}, "needs --data_dir"),
      ("libsvm_without_path", {"format": "libsvm"}, "--data_format=libsvm needs --data_path"),
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
    self.assertEqual(list(config["svm"]), ["c", "loss", "tolerance", "max_iterations", "batch_size", "num_epochs",
                                           "learning_rate", "final_learning_rate", "max_pairs_per_query",
                                           "skip_unpairable_queries", "seed"])
    self.assertEqual(config["data"]["bad_rows"], {"policy": "fail", "max_bad_rows": None, "rejects_path": None})
    self.assertEqual(config["encoder"], {"name": "none", "max_seq_length": 128})


class ConfigFromFlagValuesTest(tf.test.TestCase):

  def test_flag_values_fill_the_nested_configs(self):
    config = ranksvm_config.config_from_flag_values(_flag_values(
        mode="train", model_dir="/tmp/m", data_dir="/data", multi_hot_fields=["system:/", "kind:|"],
        text_fields=["title"], label_kind="relevance", ng_seed=3, c=0.5, topn=5, gain="linear"))
    self.assertEqual(config.features.multi_hot_fields, {"system": "/", "kind": "|"})
    self.assertEqual(config.features.similarities, ["bm25", "tfidf"])
    self.assertEqual((config.data.format, config.data.data_dir, config.data.layout.label_kind),
                     ("csv", "/data", "relevance"))
    self.assertEqual(config.data.newsgroups.seed, 3)
    self.assertEqual((config.svm.c, config.evaluation.metrics.topn, config.evaluation.gain), (0.5, 5, "linear"))

  def test_defaults_read_relevance_and_solve_by_newton(self):
    config = ranksvm_config.config_from_flag_values(_flag_values(
        mode="evaluate", data_format="rows", data_path="runs.csv", rows_format="tsv", tolerance=1e-8,
        max_iterations=50))
    self.assertEqual((config.data.layout.label_column, config.data.layout.label_kind), ("label", "relevance"))
    self.assertEqual(config.data.rows_format, "tsv")
    self.assertEqual((config.svm.tolerance, config.svm.max_iterations, config.svm.batch_size), (1e-8, 50, None))

  def test_bad_rows_format_raises_naming_the_flag(self):
    with self.assertRaisesRegex(ValueError, r"`rows_format` must be one of \['auto', 'csv'.*\], got 'txt'"):
      ranksvm_config.RankingDataConfig(format="rows", data_path="x", rows_format="txt")

  def test_bad_top_k_raises(self):
    with self.assertRaisesRegex(ValueError, "`top_k` must be an integer >= 1, got 0"):
      ranksvm_config.RankSVMMainConfig(
          mode="evaluate", data=ranksvm_config.RankingDataConfig(format="libsvm", data_path="x"), top_k=0)

  def test_no_document_fields_means_no_feature_config(self):
    config = ranksvm_config.config_from_flag_values(_flag_values(
        mode="evaluate", data_format="libsvm", data_path="lists.txt"))
    self.assertIsNone(config.features)

  def test_malformed_multi_hot_item_raises(self):
    with self.assertRaisesRegex(ValueError, r"--multi_hot_fields item 'system' must be field:separator"):
      ranksvm_config.parse_multi_hot(["system"])


if __name__ == "__main__":
  tf.test.main()
