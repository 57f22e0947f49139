"""Tests for rank4class.training.run_outputs: the baselines fitted beside the run, on a thread or in a
process of their own."""

import os
import signal
from unittest import mock

import tensorflow as tf

from rank4class.evaluation import baselines
from rank4class.training import run_outputs, training_data


def _without_times(report: dict) -> list[tuple[str, dict]]:
  return [(row["name"], row["metrics"]) for row in report["rows"]]


def _crashing_fit(data, ks):  # Module-level: the baselines' process unpickles it by name.
  raise RuntimeError(f"solver crashed on {len(data.train.labels)} rows, ks {ks}")


def _refuse_to_load():
  raise ValueError("these baselines do not load in the process")


class _UnloadableFit:
  """A fit that pickles in the run and fails to unpickle in the baselines' process."""

  def __reduce__(self):
    return (_refuse_to_load, ())

  def __call__(self, data, ks):
    raise AssertionError("never called: it does not load")


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

  def test_in_a_process_of_their_own_the_report_is_the_one_computed_in_its_place(self):
    data = training_data.prepare_data(training_data.DataConfig(dataset="digits"))
    background = run_outputs.BackgroundBaselines(data, (1, 5), in_process=True)
    self.assertIsNotNone(background._process)  # Started from this (the main) thread.
    # Ctrl-C reaches the run alone: the process started with SIGINT ignored, while it imports.
    os.kill(background._process.pid, signal.SIGINT)
    in_place = baselines.compute_or_note(baselines.BaselineConfig(), data, (1, 5))
    self.assertEqual(_without_times(background.report()), _without_times(in_place))
    self.assertGreater(background.seconds, 0.0)
    self.assertEqual(background._process.exitcode, 0)

  def test_a_failure_in_the_process_is_raised_where_the_run_waits_for_the_report(self):
    data = training_data.prepare_data(training_data.DataConfig(dataset="digits"))
    background = run_outputs.BackgroundBaselines(data, (1, 5), fit=_crashing_fit, in_process=True)
    with self.assertRaisesRegex(RuntimeError, r"solver crashed on 1,?\d+ rows, ks \(1, 5\)"):
      background.report()

  def test_a_killed_process_is_said_in_the_report_and_the_run_goes_on(self):
    data = training_data.prepare_data(training_data.DataConfig(dataset="digits"))
    background = run_outputs.BackgroundBaselines(data, (1, 5), in_process=True)
    os.kill(background._process.pid, signal.SIGKILL)
    self.assertEqual(background.report(), {"skipped": "failed: the baselines' process ended without a report "
                                                      "(exit code -9)"})

  def test_the_process_starts_without_the_data_which_a_thread_sends_after(self):
    # The data pickled into the start would hold the run until the new interpreter's imports are done.
    data = training_data.prepare_data(training_data.DataConfig(dataset="digits"))
    started = []
    spawn = run_outputs._SPAWN.Process

    def process(**kwargs):
      started.append(kwargs["args"])
      return spawn(**kwargs)

    with mock.patch.object(run_outputs._SPAWN, "Process", side_effect=process):
      background = run_outputs.BackgroundBaselines(data, (1, 5), in_process=True)
    self.assertEqual([[type(a).__name__ for a in args] for args in started], [["Connection", "Connection"]])
    in_place = baselines.compute_or_note(baselines.BaselineConfig(), data, (1, 5))
    self.assertEqual(_without_times(background.report()), _without_times(in_place))

  def test_data_that_does_not_load_in_the_process_is_raised_where_the_run_waits(self):
    data = training_data.prepare_data(training_data.DataConfig(dataset="digits"))
    background = run_outputs.BackgroundBaselines(data, (1, 5), fit=_UnloadableFit(), in_process=True)
    with self.assertRaisesRegex(ValueError, "do not load in the process"):
      background.report()
    self.assertEqual(background._process.exitcode, 0)

  def test_data_that_does_not_pickle_is_fitted_on_a_thread(self):
    data = training_data.prepare_data(training_data.DataConfig(dataset="digits"))
    background = run_outputs.BackgroundBaselines(
        data, (1, 5), fit=lambda d, ks: {"rows": len(d.train.labels)}, in_process=True)
    self.assertIsNone(background._process)
    self.assertEqual(background.report(), {"rows": len(data.train.labels)})

  def test_the_training_rows_choose_thread_or_process(self):
    data = training_data.prepare_data(training_data.DataConfig(dataset="digits"))  # 1,257 training rows.
    self.assertLess(len(data.train.labels), run_outputs.PROCESS_FROM_ROWS)
    with mock.patch.object(run_outputs, "PROCESS_FROM_ROWS", len(data.train.labels)):
      self.assertIsNotNone(run_outputs.BackgroundBaselines(data, (1, 5))._process)
    with mock.patch.object(run_outputs, "PROCESS_FROM_ROWS", len(data.train.labels) + 1):
      background = run_outputs.BackgroundBaselines(data, (1, 5))
      self.assertIsNone(background._process)
      self.assertIsNotNone(background._thread)
      background.report()


if __name__ == "__main__":
  tf.test.main()
