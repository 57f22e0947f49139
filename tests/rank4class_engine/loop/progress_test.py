"""Tests for rank4class_engine.loop.progress: the progress line, durations, and the reporter's log and
output."""

import io
import json
import os
import re

import numpy as np
import tensorflow as tf

from rank4class_engine.loop import progress


class Terminal(io.StringIO):
  """A captured stream that says it is a terminal."""

  def isatty(self) -> bool:
    return True


def _fit_with_validations(stream, steps: int = 20, eval_every: int = 10, **reporter_args):
  """Fits a tiny model for `steps` steps (one step an execution) with a fake validation every `eval_every`
  steps, the way the engine's does; returns the reporter."""
  model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
  model.compile("sgd", "mse")
  reporter = progress.ProgressReporter(total_steps=steps, global_batch_size=4, shown_metrics=("mae",),
                                       stream=stream, eval_every=eval_every, **reporter_args)

  class FakeValidation(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
      logs["val_mae"] = 0.5 / (epoch + 1)
      reporter.record_validation(eval_every * (epoch + 1), logs)

  x = np.ones([8, 2], np.float32)
  model.fit(tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(4).repeat(), epochs=steps // eval_every,
            steps_per_epoch=eval_every, callbacks=[FakeValidation(), reporter], verbose=0)
  return reporter


class FormatTest(tf.test.TestCase):

  def test_format_duration(self):
    self.assertEqual(progress.format_duration(75.2), "1:15")
    self.assertEqual(progress.format_duration(3725), "1:02:05")
    self.assertEqual(progress.format_duration(float("nan")), "?")

  def test_progress_line_holds_every_part(self):
    line = progress.progress_line(200, 600, 0.41271, 5120.4, 42.0, {"ndcg_5": 0.97312}, ("ndcg_5", 0.98, 100))
    self.assertEqual(line, "step 200/600 (33%)  loss 0.4127  5,120 ex/s  ETA 0:42  val ndcg_5=0.9731  "
                     "best ndcg_5=0.9800 @100")

  def test_progress_line_of_a_run_validation_may_stop_says_at_most(self):
    line = progress.progress_line(200, 600, None, None, 42.0, at_most=True)
    self.assertEqual(line, "step 200/≤600 (33%)  ETA ≤0:42")

  def test_progress_line_leaves_out_unknown_parts(self):
    self.assertEqual(progress.progress_line(0, 10, None, None, None), "step 0/10 (0%)")


class ProgressReporterTest(tf.test.TestCase):

  def test_one_training_in_two_fits_logs_one_begin_and_one_end(self):
    log_path = os.path.join(self.create_tempdir().full_path, "progress.jsonl")
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    reporter = progress.ProgressReporter(total_steps=10, global_batch_size=4, log_path=log_path, verbose=0)
    x = np.ones([8, 2], np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(4).repeat()
    reporter.training_continues = True  # A resumed run's rest of an epoch (3 steps), then its whole epochs.
    model.fit(dataset, epochs=1, steps_per_epoch=3, callbacks=[reporter], verbose=0)
    reporter.training_continues = False
    model.fit(dataset, epochs=1, steps_per_epoch=7, callbacks=[reporter], verbose=0)
    with open(log_path) as f:
      events = [(e["event"], e["step"]) for e in map(json.loads, f)]
    self.assertEqual(events, [("train_begin", 0), ("train_end", 10)])

  def test_logs_events_and_prints_a_line_per_validation(self):
    log_path = os.path.join(self.create_tempdir().full_path, "progress.jsonl")
    stream = io.StringIO()  # Not a TTY: full lines.
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse", steps_per_execution=5)
    reporter = progress.ProgressReporter(total_steps=20, global_batch_size=4, log_path=log_path,
                                         shown_metrics=("mae",), stream=stream)

    class FakeValidation(tf.keras.callbacks.Callback):  # What the engine's validation does.
      def on_epoch_end(self, epoch, logs=None):
        logs["val_mae"] = 0.5 / (epoch + 1)
        reporter.record_validation(10 * (epoch + 1), logs)

    x = np.ones([8, 2], np.float32)
    model.fit(tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(4).repeat(), epochs=2,
              steps_per_epoch=10, callbacks=[FakeValidation(), reporter], verbose=0)
    with open(log_path) as f:
      events = [json.loads(line) for line in f]
    self.assertEqual([e["event"] for e in events], ["train_begin", "eval", "eval", "train_end"])
    self.assertEqual([e["step"] for e in events], [0, 10, 20, 20])
    # What the loop ran at the end (benchmarks read it).
    self.assertEqual(events[-1]["steps_per_execution"], 5)
    self.assertAllClose([e["val_mae"] for e in events[1:3]], [0.5, 0.25])
    lines = stream.getvalue().splitlines()
    self.assertRegex(lines[-1],
                     r"^step 20/20 \(100%\)  loss \d+\.\d{4}  [\d,]+ ex/s  ETA 0:00  val mae=0\.2500$")
    self.assertGreater(reporter.examples_per_second, 0)

  def test_off_a_terminal_lines_are_whole_and_each_step_shows_once(self):
    stream = io.StringIO()  # A log, CI, a pipe.
    _fit_with_validations(stream, interval_seconds=0.0, log_interval_seconds=0.0)  # A line at every step.
    output = stream.getvalue()
    self.assertNotIn("\r", output)
    self.assertTrue(output.endswith("\n"))
    steps = [int(re.match(r"step (\d+)/20 ", line)[1]) for line in output.splitlines()]
    self.assertEqual(steps, list(range(2, 21)))  # From the second execution (the first traces); each once.
    for line in output.splitlines()[:-1]:
      self.assertRegex(line, r"  [\d,]+ ex/s  ETA \d+:\d\d")
    self.assertEqual(output.count("step 20/20"), 1)  # The last step, once.
    self.assertRegex(output.splitlines()[-1], r"^step 20/20 \(100%\)  loss \d+\.\d{4}  [\d,]+ ex/s  ETA "
                     r"0:00  val mae=0\.2500$")

  def test_off_a_terminal_lines_are_throttled_but_every_validation_shows(self):
    stream = io.StringIO()
    _fit_with_validations(stream, steps=30, interval_seconds=0.0, log_interval_seconds=3600.0)
    steps = [int(re.match(r"step (\d+)/30 ", line)[1]) for line in stream.getvalue().splitlines()]
    self.assertEqual(steps, [10, 20, 30])

  def test_on_a_terminal_one_line_is_rewritten_in_place(self):
    stream = Terminal()
    _fit_with_validations(stream, interval_seconds=0.0)
    output = stream.getvalue()
    self.assertEqual(output.count("\n"), 1)
    self.assertTrue(output.endswith("val mae=0.2500\n"))
    lines = output[:-1].split("\r\x1b[2K")
    self.assertEqual(lines[0], "")
    self.assertLen(lines[1:], 19)  # Steps 2..20, each once.
    self.assertEqual(output.count("step 20/20"), 1)

  def test_examples_per_second_is_over_the_recent_window(self):
    reporter = progress.ProgressReporter(total_steps=100, global_batch_size=10, verbose=0)
    reporter._window = (0.0, 0)
    self.assertAllClose(reporter._recent_rate(20, 1.0), 200.0)  # 20 steps of 10 in 1 s.
    reporter._window = (1.0, 20)
    self.assertAllClose(reporter._recent_rate(30, 3.0), 50.0)  # A slower window: not the average, 100.
    reporter._window = (3.0, 30)
    self.assertAllClose(reporter._recent_rate(30, 4.0), 50.0)  # No step in it: the last window's.

  def test_truncate_log_drops_the_events_after_a_checkpoint(self):
    log_path = os.path.join(self.create_tempdir().full_path, "progress.jsonl")
    with open(log_path, "w") as f:
      f.write('{"step": 10}\n')
    length = os.path.getsize(log_path)
    with open(log_path, "a") as f:
      f.write('{"step": 20}\n')
    progress.truncate_log(log_path, length)
    with open(log_path) as f:
      self.assertEqual(f.read(), '{"step": 10}\n')
    progress.truncate_log(log_path, 10 * length)  # Never grows a file.
    self.assertEqual(os.path.getsize(log_path), length)

  def test_silent_reporter_prints_nothing(self):
    stream = io.StringIO()
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x = np.ones([4, 2], np.float32)
    model.fit(x, x[:, :1], epochs=1, verbose=0,
              callbacks=[progress.ProgressReporter(total_steps=1, global_batch_size=4, verbose=0,
                                                   stream=stream)])
    self.assertEqual(stream.getvalue(), "")


if __name__ == "__main__":
  tf.test.main()
