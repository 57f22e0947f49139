"""Tests for rank4class.training.run_outputs: the baselines fitted beside the run."""

from unittest import mock

import tensorflow as tf

from rank4class.evaluation import baselines
from rank4class.training import run_outputs, training_data


def _without_times(report: dict) -> list[tuple[str, dict]]:
  return [(row["name"], row["metrics"]) for row in report["rows"]]


class BackgroundBaselinesTest(tf.test.TestCase):

  def test_the_report_beside_the_run_is_the_one_computed_in_its_place(self):
    data = training_data.prepare_data(training_data.DataConfig(dataset="digits"))
    background = run_outputs.BackgroundBaselines(data, (1, 5))
    in_place = baselines.compute_or_note(baselines.BaselineConfig(), data, (1, 5))
    report = background.report()
    self.assertEqual(_without_times(report), _without_times(in_place))
    self.assertEqual([name for name, _ in _without_times(report)], ["majority", "pixels_lr"])
    self.assertLess(report["rows"][1]["metrics"]["top_1_error"], 0.1)
    self.assertGreater(background.seconds, 0.0)

  def test_a_failure_beside_the_run_is_raised_where_the_run_waits_for_the_report(self):
    data = training_data.prepare_data(training_data.DataConfig(dataset="digits"))
    with mock.patch.object(baselines, "compute_or_note", side_effect=RuntimeError("solver crashed")):
      background = run_outputs.BackgroundBaselines(data, (1, 5))
      with self.assertRaisesRegex(RuntimeError, "solver crashed"):
        background.report()


if __name__ == "__main__":
  tf.test.main()
