"""Tests for rank4class_engine.progress: the progress line, durations, and the reporter's log and output."""

import io
import json
import os

import numpy as np
import tensorflow as tf

from rank4class_engine import progress


class FormatTest(tf.test.TestCase):

  def test_format_duration(self):
    self.assertEqual(progress.format_duration(75.2), "1:15")
    self.assertEqual(progress.format_duration(3725), "1:02:05")
    self.assertEqual(progress.format_duration(float("nan")), "?")

  def test_progress_line_holds_every_part(self):
    line = progress.progress_line(200, 600, 0.41271, 5120.4, 42.0, {"ndcg_5": 0.97312}, ("ndcg_5", 0.98, 100))
    self.assertEqual(line, "step 200/600 (33%)  loss 0.4127  5,120 ex/s  ETA 0:42  val ndcg_5=0.9731  "
                     "best ndcg_5=0.9800 @100")

  def test_progress_line_leaves_out_unknown_parts(self):
    self.assertEqual(progress.progress_line(0, 10, None, None, None), "step 0/10 (0%)")


class ProgressReporterTest(tf.test.TestCase):

  def test_logs_events_and_prints_a_line_per_validation(self):
    log_path = os.path.join(self.create_tempdir().full_path, "progress.jsonl")
    stream = io.StringIO()  # Not a TTY: full lines.
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    reporter = progress.ProgressReporter(total_steps=20, global_batch_size=4, log_path=log_path,
                                         shown_metrics=("mae",), stream=stream)

    class FakeValidation(tf.keras.callbacks.Callback):  # What the engine's validation does.
      def on_epoch_end(self, epoch, logs=None):
        logs["val_mae"] = 0.5 / (epoch + 1)
        reporter.record_validation(10 * (epoch + 1), logs)

    x = np.ones([8, 2], np.float32)
    model.fit(tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(4).repeat(), epochs=2, steps_per_epoch=10,
              callbacks=[FakeValidation(), reporter], verbose=0)
    with open(log_path) as f:
      events = [json.loads(line) for line in f]
    self.assertEqual([e["event"] for e in events], ["train_begin", "eval", "eval", "train_end"])
    self.assertEqual([e["step"] for e in events], [0, 10, 20, 20])
    self.assertAllClose([e["val_mae"] for e in events[1:3]], [0.5, 0.25])
    lines = stream.getvalue().splitlines()
    self.assertRegex(lines[-1], r"^step 20/20 \(100%\)  loss \d+\.\d{4}  [\d,]+ ex/s  ETA 0:00  val mae=0\.2500$")
    self.assertGreater(reporter.examples_per_second, 0)

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
              callbacks=[progress.ProgressReporter(total_steps=1, global_batch_size=4, verbose=0, stream=stream)])
    self.assertEqual(stream.getvalue(), "")


if __name__ == "__main__":
  tf.test.main()
