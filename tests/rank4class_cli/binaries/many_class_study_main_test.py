"""Tests for the rank4class-many-class-study binary: one-line flag errors, and its parts run from the
console."""

import tensorflow as tf
from absl.testing import parameterized

from rank4class_cli.binaries import many_class_study_main
from tests.rank4class_cli.cli_runner import parse_error


class ManyClassStudyMainTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    many_class_study_main.FLAGS.unparse_flags()
    super().tearDown()

  def test_defaults_parse(self):
    many_class_study_main.parse_flags(["prog", "--output_dir=/o", "--seeds=0,2", "--parts=zero_shot"])
    self.assertEqual((many_class_study_main.FLAGS.output_dir, list(many_class_study_main.FLAGS.parts)),
                     ("/o", ["zero_shot"]))

  @parameterized.named_parameters(
      ("unknown_part", ["--parts=grids,scale"], "--parts=grids,scale: unknown ['grids']"),
      ("bad_seed", ["--seeds=0,x"], "--seeds"),
      ("no_steps", ["--train_steps=0"], "--train_steps=0 must be a positive integer"),
      ("bad_rate", ["--learning_rate=0"], "--learning_rate=0.0 must be positive"),
  )
  def test_bad_flags_are_one_line_errors(self, argv, expected):
    code, stderr = parse_error(many_class_study_main, argv)
    self.assertEqual(code, 2)
    self.assertLen(stderr.strip().splitlines(), 1, msg=stderr)
    self.assertIn(expected, stderr)


if __name__ == "__main__":
  tf.test.main()
