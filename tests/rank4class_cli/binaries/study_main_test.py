"""Tests for the rank4class-study binary: presets, overrides and one-line flag errors."""

import os
import subprocess
import sys

import tensorflow as tf
from absl.testing import parameterized

from rank4class_cli.binaries import study_main
from tests.rank4class_cli.cli_runner import parse_error


def _parse(argv: list[str]) -> tuple[int, str]:
  """Runs the binary's flag parser; returns (exit code, stderr)."""
  return parse_error(study_main, argv)


class StudyMainTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    study_main.FLAGS.unparse_flags()
    super().tearDown()

  def test_quick_preset_by_default(self):
    study_main.parse_flags(["prog", "--output_dir=/o"])
    config = study_main.config_from_flags(study_main.FLAGS)
    self.assertEqual(config.output_dir, "/o")
    self.assertEqual([d.name for d in config.datasets], ["reuters_r8"])
    self.assertEqual(config.finetune, [])

  def test_finetune_flag_covers_every_text_data_set(self):
    study_main.parse_flags(["prog", "--output_dir=/o",
                            "--datasets=digits,reuters_r8,20newsgroups", "--finetune"])
    config = study_main.config_from_flags(study_main.FLAGS)
    self.assertEqual([ft.dataset for ft in config.finetune], ["reuters_r8", "20newsgroups"])

  def test_text_mode_and_baselines_flags(self):
    study_main.parse_flags(["prog", "--output_dir=/o", "--datasets=digits,election_tweets",
                            "--text_mode=finetune", "--nobaselines"])
    config = study_main.config_from_flags(study_main.FLAGS)
    self.assertEqual([(d.name, d.text_mode) for d in config.datasets],
                     [("digits", "frozen"), ("election_tweets", "finetune")])  # Images keep theirs.
    self.assertFalse(config.baselines)

  def test_overrides_replace_the_preset_values(self):
    study_main.parse_flags(["prog", "--preset=full", "--datasets=digits,reuters_r8", "--losses=softmax,mse",
                            "--interactions=dot", "--seeds=0,1,2,3", "--learning_rates=0.01",
                            "--hidden_widths=64", "--train_steps=50", "--nofinetune"])
    config = study_main.config_from_flags(study_main.FLAGS)
    self.assertEqual([d.name for d in config.datasets], ["digits", "reuters_r8"])
    self.assertEqual(config.losses, ("softmax", "mse"))
    self.assertEqual(config.interactions, ("dot",))
    self.assertEqual(config.seeds, (0, 1, 2, 3))
    self.assertEqual((config.learning_rates, config.hidden_widths), ((0.01,), (64,)))
    self.assertEqual([(d.train_steps, d.eval_every) for d in config.datasets], [(50, 50), (50, 50)])
    self.assertEqual(config.finetune, [])

  @parameterized.named_parameters(
      ("preset", ["--preset=huge"], "--preset=huge", "quick, full"),
      ("loss", ["--losses=softmax,hinge"], "'hinge'", "softmax, pairwise_logistic"),
      ("interaction", ["--interactions=bilinear"], "'bilinear'", "dot, latent_cross, concat"),
      ("dataset", ["--datasets=mnist"], "'mnist'", "reuters_r8, 20newsgroups, wordnet_hypernyms, "
       "wordnet_hypernyms_all, reuters_r52, election_tweets, friends_speakers, drug_review_sentiment, "
       "fashion_mnist, digits"),
      ("seeds", ["--seeds=a"], "--seeds=a", "integers"),
  )
  def test_bad_flags_are_one_line_errors(self, argv, value, allowed):
    code, stderr = _parse(argv)
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1, msg=stderr)
    self.assertIn(value, stderr)
    self.assertIn(allowed, stderr)


class RunTimeBadInputTest(tf.test.TestCase):

  def test_output_dir_that_is_a_file_is_one_line_and_exit_1(self):
    output = self.create_tempfile("results.txt", content="not a folder").full_path
    result = subprocess.run([sys.executable, "-m", "rank4class_cli.binaries.study_main",
                             f"--output_dir={output}"],
                            capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    self.assertEqual(result.returncode, 1, msg=result.stderr[-2000:])
    self.assertNotIn("Traceback", result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("rank4class-study: error:")]
    self.assertEqual(errors, [f"rank4class-study: error: output_dir {output} is a file; expected a folder "
                              "(new or a study's earlier output)"], msg=result.stderr[-2000:])
    with open(output, encoding="utf-8") as f:
      self.assertEqual(f.read(), "not a folder")  # Left as it was.


if __name__ == "__main__":
  tf.test.main()
