"""Tests for rank4class_engine.loop.trainer: cadence, best weights, resumption, tracing, strategies,
precision."""

import json
import os
import signal
import tempfile
import time
from typing import Any
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_data import validation
from rank4class_engine import distribute
from rank4class_engine.loop import trainer
from rank4class_engine.optimization import precision
from rank4class_engine.runs import run_lock
from tests.rank4class_engine import multi_worker_fit

_RNG = np.random.default_rng(0)
_W = _RNG.normal(size=[8, 4])
_X_TRAIN = _RNG.normal(size=[512, 8]).astype(np.float32)
_X_VAL = _RNG.normal(size=[256, 8]).astype(np.float32)
_Y_TRAIN = np.argmax(_X_TRAIN @ _W, axis=1)
_Y_VAL = np.argmax(_X_VAL @ _W, axis=1)


def _model(strategy: tf.distribute.Strategy | None = None) -> tf.keras.Model:
  strategy = strategy or tf.distribute.get_strategy()
  with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input([8]), tf.keras.layers.Dense(16, activation="relu"),
                                 tf.keras.layers.Dense(4)])
    model.compile(tf.keras.optimizers.Adam(0.01),
                  tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return model


def _train_dataset(batch_size: int = 32) -> tf.data.Dataset:
  return tf.data.Dataset.from_tensor_slices((_X_TRAIN, _Y_TRAIN)).shuffle(512,
                                                                          seed=0).repeat().batch(batch_size)


def _accuracy(model: tf.keras.Model) -> dict[str, float]:
  return {"accuracy": float(np.mean(np.argmax(model.predict(_X_VAL, verbose=0), axis=1) == _Y_VAL))}


def _config(run_dir: str, **kwargs) -> trainer.EngineConfig:
  return trainer.EngineConfig(**{"run_dir": run_dir, "train_steps": 60, "eval_every": 20,
                                 "best_metric": "accuracy", "global_batch_size": 32, "verbose": 0, **kwargs})


class FitTest(tf.test.TestCase):

  def test_trains_the_steps_keeps_the_best_validation_and_beats_chance(self):
    tf.keras.utils.set_random_seed(0)  # Weights and data order fixed, whatever ran before in this process.
    run_dir = self.create_tempdir().full_path
    model = _model()
    result = trainer.fit(model, _train_dataset(), _config(run_dir), validate=_accuracy)
    self.assertEqual(result.steps, 60)
    self.assertEqual([h["step"] for h in result.history], [20, 40, 60])
    values = [h["val_accuracy"] for h in result.history]
    self.assertEqual(result.best_value, max(values))
    self.assertEqual(result.best_step, 20 * (int(np.argmax(values)) + 1))
    self.assertAllClose(_accuracy(model)["accuracy"], result.best_value)  # The best weights are in the model.
    self.assertGreater(result.best_value, 0.6)  # Chance: about 0.25.
    with open(os.path.join(run_dir, trainer.BEST_DIR, trainer.BEST_STATE_FILE)) as f:
      self.assertEqual(json.load(f)["step"], result.best_step)

  def test_automatic_steps_per_execution_never_retraces(self):
    bare = _model()
    bare.fit(_train_dataset(), steps_per_epoch=100, epochs=2, verbose=0)
    model = _model()
    # A target no step time can reach: the tuner's choice is the whole cadence (100) however slow or loaded
    # the machine is, so the test never depends on the clock (test_choice covers the timing arithmetic).
    result = trainer.fit(model, _train_dataset(), _config(self.create_tempdir().full_path, train_steps=200,
                                                          eval_every=100, checkpoint_every=0,
                                                          target_execution_seconds=1e6), validate=_accuracy)
    self.assertEqual(result.steps, 200)
    self.assertGreater(result.steps_per_execution, 1)
    self.assertEqual(100 % result.steps_per_execution, 0)
    # Changing steps_per_execution and validating twice trace the train function once. A bare Keras fit traces
    # it twice: its first trace creates the optimizer's variables, which the engine builds before `fit`.
    self.assertEqual(model.train_function.experimental_get_tracing_count(), 1)
    self.assertEqual(bare.train_function.experimental_get_tracing_count(), 2)

  def test_fixed_steps_per_execution_is_used(self):
    model = _model()
    result = trainer.fit(model, _train_dataset(),
                         _config(self.create_tempdir().full_path, steps_per_execution=5), validate=_accuracy)
    self.assertEqual((result.steps, result.steps_per_execution), (60, 5))

  def test_writes_progress_log_and_tensorboard(self):
    run_dir = self.create_tempdir().full_path
    trainer.fit(_model(), _train_dataset(), _config(run_dir), validate=_accuracy)
    with open(os.path.join(run_dir, trainer.PROGRESS_FILE)) as f:
      events = [json.loads(line) for line in f]
    self.assertEqual([e["event"] for e in events], ["train_begin", "eval", "eval", "eval", "train_end"])
    self.assertIn("val_accuracy", events[1])
    self.assertNotEmpty(tf.io.gfile.glob(os.path.join(run_dir, trainer.LOG_DIR, "validation", "events.*")))

  def test_trains_exactly_the_asked_steps_and_validates_the_last(self):
    result = trainer.fit(_model(), _train_dataset(), _config(self.create_tempdir().full_path, train_steps=50),
                         validate=_accuracy)
    self.assertEqual(result.steps, 50)  # Not rounded up to the cadence (60).
    self.assertEqual([h["step"] for h in result.history], [20, 40, 50])

  def test_exact_steps_with_a_fixed_execution_length_that_overshoots(self):
    result = trainer.fit(_model(), _train_dataset(), _config(self.create_tempdir().full_path, train_steps=47,
                                                             steps_per_execution=10), validate=_accuracy)
    self.assertEqual((result.steps, result.steps_per_execution), (47, 10))  # 4 x 10 + 7, then 10 again.
    self.assertEqual([h["step"] for h in result.history], [20, 40, 47])

  def test_run_killed_at_a_validation_resumes_at_the_checkpoint_before_it(self):
    run_dir = self.create_tempdir().full_path

    class Crash(tf.keras.callbacks.Callback):
      def on_epoch_end(self, epoch, logs=None):
        if epoch == 1:  # Step 20: validated, not yet checkpointed (callbacks run before the checkpoint).
          raise KeyboardInterrupt("simulated kill at step 20")

    config = _config(run_dir, checkpoint_every=10)
    with self.assertRaises(KeyboardInterrupt):
      trainer.fit(_model(), _train_dataset(), config, validate=_accuracy, callbacks=[Crash()])
    result = trainer.fit(_model(), _train_dataset(), config, validate=_accuracy)
    self.assertEqual((result.resumed_from_step, result.steps), (10, 60))
    # The validation of step 20 is not lost: it runs again after the resume.
    self.assertEqual([h["step"] for h in result.history], [20, 40, 60])

  def test_run_killed_inside_an_epoch_resumes_at_its_checkpoint(self):
    run_dir = self.create_tempdir().full_path

    class Crash(tf.keras.callbacks.Callback):
      def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) == 35:
          raise KeyboardInterrupt("simulated kill at step 35")

    config = _config(run_dir, checkpoint_every=10, steps_per_execution=5)
    with self.assertRaises(KeyboardInterrupt):
      trainer.fit(_model(), _train_dataset(), config, validate=_accuracy, callbacks=[Crash()])
    result = trainer.fit(_model(), _train_dataset(), config, validate=_accuracy)
    self.assertEqual((result.resumed_from_step, result.steps), (30, 60))  # No step repeated or skipped.
    self.assertEqual([h["step"] for h in result.history], [20, 40, 60])  # The whole run's validations.

  def test_lock_held_by_the_caller_is_shared(self):
    run_dir = self.create_tempdir().full_path
    with run_lock.RunDirectoryLock(run_dir):  # As rank4class.training.train holds it around the engine.
      result = trainer.fit(_model(), _train_dataset(), _config(run_dir, train_steps=20), validate=_accuracy)
    self.assertEqual(result.steps, 20)

  def test_validate_start_records_step_0_which_stays_best_when_training_makes_it_worse(self):
    run_dir = self.create_tempdir().full_path
    model = _model()
    # A start that training cannot beat: the kernel that labels the data (validation accuracy 1.0) and a
    # learning rate that wrecks it.
    model.set_weights([np.concatenate([np.eye(8), -np.eye(8)], axis=1), np.zeros(16),
                       np.concatenate([_W, -_W]), np.zeros(4)])
    # relu(x) W - relu(-x) W = x W: the labelling function.
    self.assertEqual(_accuracy(model)["accuracy"], 1.0)
    model.optimizer.learning_rate.assign(5.0)
    result = trainer.fit(model, _train_dataset(), _config(run_dir, validate_start=True), validate=_accuracy)
    self.assertEqual([record["step"] for record in result.history], [0, 20, 40, 60])
    self.assertEqual(result.history[0]["val_accuracy"], 1.0)
    self.assertLess(max(record["val_accuracy"] for record in result.history[1:]), 1.0)
    self.assertEqual((result.best_step, result.best_value), (0, 1.0))
    # The start's weights are back in the model.
    self.assertAllEqual(np.argmax(model(_X_VAL, training=False).numpy(), axis=1), _Y_VAL)
    events = [json.loads(line) for line in open(os.path.join(run_dir, "progress.jsonl"), encoding="utf-8")]
    self.assertEqual([e["step"] for e in events if e["event"] == "eval"], [0, 20, 40, 60])

  def test_validate_start_is_not_repeated_by_a_resumed_run(self):
    run_dir = self.create_tempdir().full_path
    calls = []

    def validate(model):
      calls.append(1)
      return _accuracy(model)

    trainer.fit(_model(), _train_dataset(), _config(run_dir, train_steps=40, validate_start=True),
                validate=validate)
    self.assertLen(calls, 3)  # Steps 0, 20, 40.
    calls.clear()
    result = trainer.fit(_model(), _train_dataset(), _config(run_dir, train_steps=60, validate_start=True),
                         validate=validate)
    self.assertLen(calls, 1)  # Step 60 only: the run resumed at 40 with its history.
    self.assertEqual([record["step"] for record in result.history], [0, 20, 40, 60])

  def test_patience_stops_after_the_best_is_that_many_validations_old_and_a_rerun_finds_it_done(self):
    run_dir = self.create_tempdir().full_path
    # A validation score that peaks at step 30, whatever the weights: patience 3 (30 steps) and at least 50
    # steps stop training at 60, the first validation at least 30 steps after the best and at or past 50.
    scores = {10: 0.5, 20: 0.6, 30: 0.9, 40: 0.8, 50: 0.85, 60: 0.7}
    steps_seen = []

    def validate(model):
      step = int(model.optimizer.iterations.numpy())
      steps_seen.append(step)
      return {"accuracy": scores.get(step, 0.0)}

    config = _config(run_dir, train_steps=200, eval_every=10, patience=3, min_steps=50)
    result = trainer.fit(_model(), _train_dataset(), config, validate=validate)
    self.assertEqual((result.steps, result.best_step, result.stopped_early), (60, 30, True))
    self.assertEqual(steps_seen, [10, 20, 30, 40, 50, 60])
    with open(os.path.join(run_dir, "backup", "checkpoint"), encoding="utf-8") as f:
      self.assertIn("60", f.read())  # The stop's step is checkpointed.
    steps_seen.clear()
    again = trainer.fit(_model(), _train_dataset(), config, validate=validate)
    self.assertEqual((again.steps, again.best_step, again.stopped_early, steps_seen), (60, 30, True, []))
    # min_steps holds a stop back: the best at 10 would stop at 40, but not before 50.
    scores.update({10: 0.95})
    early = trainer.fit(_model(), _train_dataset(), _config(self.create_tempdir().full_path, train_steps=200,
                                                            eval_every=10, patience=3, min_steps=50),
                        validate=validate)
    self.assertEqual((early.steps, early.best_step), (50, 10))
    # Without patience every step is trained.
    full = trainer.fit(_model(), _train_dataset(), _config(self.create_tempdir().full_path, train_steps=80,
                                                           eval_every=10), validate=validate)
    self.assertEqual((full.steps, full.stopped_early), (80, False))

  def test_best_metric_without_validation_raises(self):
    with self.assertRaisesRegex(ValueError, "`best_metric` 'accuracy' needs a `validate` function"):
      trainer.fit(_model(), _train_dataset(), _config(self.create_tempdir().full_path))

  def test_without_best_metric_keeps_the_last_weights(self):
    result = trainer.fit(_model(), _train_dataset(), _config(self.create_tempdir().full_path, best_metric=""))
    self.assertEqual((result.steps, result.best_step, result.best_metrics), (60, None, {}))

  def test_two_replicas_train_the_same_steps(self):
    tf.keras.utils.set_random_seed(0)  # Weights and data order fixed, whatever ran before in this process.
    strategy = distribute.make_strategy("mirrored", ["/cpu:0", "/cpu:1"])
    model = _model(strategy)
    dataset = strategy.experimental_distribute_dataset(_train_dataset(32))
    result = trainer.fit(model, dataset, _config(self.create_tempdir().full_path), strategy,
                         validate=_accuracy)
    self.assertEqual(result.steps, 60)
    self.assertGreater(result.best_value, 0.6)


def _stream(start_step: int) -> tf.data.Dataset:
  return _train_dataset().skip(start_step)


class ResumeEqualsUninterruptedTest(tf.test.TestCase, parameterized.TestCase):
  """A run killed anywhere and resumed ends with the weights, validations and best of an uninterrupted run."""

  _uninterrupted: tuple[trainer.FitResult, list] | None = None

  def setUp(self):
    super().setUp()  # Seeds TensorFlow (the data order): the same in every test, so computed once, here.
    cls = type(self)
    if cls._uninterrupted is None:
      cls.initial = _model().get_weights()
      model = cls._fresh_model()
      result = trainer.fit(model, _stream, _config(self.create_tempdir().full_path, train_steps=70,
                                                   checkpoint_every=10, steps_per_execution=5),
                           validate=_accuracy)
      cls._uninterrupted = result, model.get_weights()
    self.result, self.weights = cls._uninterrupted

  @classmethod
  def _fresh_model(cls) -> tf.keras.Model:
    model = _model()
    model.set_weights(cls.initial)
    return model

  def _resume_after(self, kill: tf.keras.callbacks.Callback | None = None,
                    validate_kill_step: int | None = None,
                    checkpoint_kill_step: int | None = None) -> tuple[trainer.FitResult, tf.keras.Model]:
    run_dir = self.create_tempdir().full_path
    config = _config(run_dir, train_steps=70, checkpoint_every=10, steps_per_execution=5)

    def validate(model):
      if int(model.optimizer.iterations.numpy()) == validate_kill_step:
        raise KeyboardInterrupt("killed during validation")
      return _accuracy(model)

    save = trainer.Checkpoints.save

    def save_then_kill(checkpoints, step, state):
      save(checkpoints, step, state)
      if step == checkpoint_kill_step:
        raise KeyboardInterrupt("killed after a checkpoint")

    with self.assertRaises(KeyboardInterrupt), mock.patch.object(trainer.Checkpoints, "save",
                                                                 save_then_kill):
      trainer.fit(self._fresh_model(), _stream, config, validate=validate, callbacks=[kill] if kill else [])
    model = self._fresh_model()
    result = trainer.fit(model, _stream, config, validate=_accuracy)
    return result, model

  def _assert_equals_uninterrupted(self, result: trainer.FitResult, model: tf.keras.Model) -> None:
    self.assertEqual(result.steps, 70)
    self.assertEqual(result.history, self.result.history)  # Steps, training losses and validations.
    self.assertEqual((result.best_step, result.best_value), (self.result.best_step, self.result.best_value))
    for resumed, uninterrupted in zip(model.get_weights(), self.weights, strict=True):
      self.assertAllClose(resumed, uninterrupted, rtol=1e-6, atol=1e-6)

  def test_killed_after_a_checkpoint(self):
    result, model = self._resume_after(checkpoint_kill_step=30)
    self.assertEqual(result.resumed_from_step, 30)
    self._assert_equals_uninterrupted(result, model)

  def test_killed_during_a_validation(self):
    result, model = self._resume_after(validate_kill_step=40)
    self.assertEqual(result.resumed_from_step, 30)
    self._assert_equals_uninterrupted(result, model)

  def test_killed_inside_an_epoch(self):

    class Kill(tf.keras.callbacks.Callback):
      def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) == 55:
          raise KeyboardInterrupt("killed at step 55")

    result, model = self._resume_after(kill=Kill())
    self.assertEqual(result.resumed_from_step, 50)
    self._assert_equals_uninterrupted(result, model)

  def test_killed_after_the_last_checkpoint_trains_nothing_again(self):
    result, model = self._resume_after(checkpoint_kill_step=70)
    self.assertEqual(result.resumed_from_step, 70)
    self._assert_equals_uninterrupted(result, model)

  def test_progress_log_holds_each_event_once_after_a_resume(self):
    run_dir = self.create_tempdir().full_path
    config = _config(run_dir, train_steps=70, checkpoint_every=10, steps_per_execution=5)

    def validate(model):
      if int(model.optimizer.iterations.numpy()) == 60:
        raise KeyboardInterrupt("killed during validation")
      return _accuracy(model)

    with self.assertRaises(KeyboardInterrupt):
      trainer.fit(self._fresh_model(), _stream, config, validate=validate)
    trainer.fit(self._fresh_model(), _stream, config, validate=_accuracy)
    with open(os.path.join(run_dir, trainer.PROGRESS_FILE)) as f:
      events = [(e["event"], e["step"]) for e in map(json.loads, f)]
    # The first process's train_begin, its validations up to the checkpoint of step 50, then the resumed
    # run's.
    self.assertEqual(events,
                     [("train_begin", 0), ("eval", 20), ("eval", 40), ("train_begin", 50), ("eval", 60),
                              ("eval", 70), ("train_end", 70)])


class _SignalAt(tf.keras.callbacks.Callback):
  """Sends a signal to this process after the execution that ends at `step` (as a scheduler or Ctrl-C
  would)."""

  def __init__(self, step: int, signal_number: int):
    super().__init__()
    self._step = step
    self._signal_number = signal_number

  def on_train_batch_end(self, batch, logs=None):
    if int(self.model.optimizer.iterations.numpy()) == self._step:
      os.kill(os.getpid(), self._signal_number)


class PreemptionTest(tf.test.TestCase, parameterized.TestCase):
  """SIGTERM or SIGINT during training: the checkpoint of the step reached, `TrainingInterrupted`, and a
  resume that equals an uninterrupted run (weights, validations, progress events)."""

  _uninterrupted: tuple[trainer.FitResult, list, list] | None = None

  def setUp(self):
    super().setUp()
    cls = type(self)
    if cls._uninterrupted is None:
      cls.initial = _model().get_weights()
      model = cls._fresh_model()
      run_dir = self.create_tempdir().full_path
      result = trainer.fit(model, _stream, self._config(run_dir), validate=_accuracy)
      cls._uninterrupted = result, model.get_weights(), self._events(run_dir)
    self.result, self.weights, self.events = cls._uninterrupted

  @classmethod
  def _fresh_model(cls) -> tf.keras.Model:
    model = _model()
    model.set_weights(cls.initial)
    return model

  @staticmethod
  def _config(run_dir: str, **kwargs) -> trainer.EngineConfig:
    # Checkpoints at validations (epochs of 20 steps), one step per execution: a signal stops inside an epoch.
    return _config(run_dir, **{"train_steps": 70, "steps_per_execution": 1, **kwargs})

  @staticmethod
  def _events(run_dir: str) -> list[tuple[str, int]]:
    with open(os.path.join(run_dir, trainer.PROGRESS_FILE)) as f:
      return [(e["event"], e["step"]) for e in map(json.loads, f)]

  def _assert_equals_uninterrupted(self, result: trainer.FitResult, model: tf.keras.Model) -> None:
    self.assertEqual(result.steps, 70)
    self.assertEqual([h["step"] for h in result.history], [h["step"] for h in self.result.history])
    for resumed, uninterrupted in zip(result.history, self.result.history, strict=True):
      self.assertEqual(sorted(resumed), sorted(uninterrupted))
      self.assertEqual(resumed["val_accuracy"], uninterrupted["val_accuracy"])
      # The loss since the last validation sums the parts of a stopped epoch: the last bits may differ.
      self.assertAllClose(resumed["loss"], uninterrupted["loss"], rtol=1e-6)
    self.assertEqual((result.best_step, result.best_value), (self.result.best_step, self.result.best_value))
    for resumed, uninterrupted in zip(model.get_weights(), self.weights, strict=True):
      self.assertAllClose(resumed, uninterrupted, rtol=1e-6, atol=1e-6)

  @parameterized.parameters(signal.SIGTERM, signal.SIGINT)
  def test_signal_inside_an_epoch_checkpoints_that_step_and_resumes_equal(self, signal_number):
    run_dir = self.create_tempdir().full_path
    with self.assertRaises(trainer.TrainingInterrupted) as stopped:
      trainer.fit(self._fresh_model(), _stream, self._config(run_dir), validate=_accuracy,
                  callbacks=[_SignalAt(37, signal_number)])
    self.assertEqual((stopped.exception.step, stopped.exception.checkpoint_step), (37, 37))
    self.assertEqual(stopped.exception.signal_number, signal_number)
    self.assertEqual(str(stopped.exception), f"stopped at step 37 of the run in {run_dir}; rerun the same "
                                             "command to resume from the checkpoint of step 37")
    model = self._fresh_model()
    result = trainer.fit(model, _stream, self._config(run_dir), validate=_accuracy)
    self.assertEqual(result.resumed_from_step, 37)
    self._assert_equals_uninterrupted(result, model)
    # The stopped run's events to its checkpoint, then the resumed run's: one train_begin, one train_end.
    self.assertEqual(self._events(run_dir),
                     [("train_begin", 0), ("eval", 20), ("train_begin", 37), ("eval", 40),
                                             ("eval", 60), ("eval", 70), ("train_end", 70)])
    self.assertEqual(self.events, [("train_begin", 0), ("eval", 20), ("eval", 40), ("eval", 60), ("eval", 70),
                                   ("train_end", 70)])

  def test_signal_with_automatic_execution_length_resumes_equal(self):
    run_dir = self.create_tempdir().full_path

    class SignalAfter(tf.keras.callbacks.Callback):
      def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= 9 and not sent:
          sent.append(True)
          os.kill(os.getpid(), signal.SIGTERM)

    sent = []
    config = self._config(run_dir, steps_per_execution=0, target_execution_seconds=1e6)
    with self.assertRaises(trainer.TrainingInterrupted) as stopped:
      trainer.fit(self._fresh_model(), _stream, config, validate=_accuracy, callbacks=[SignalAfter()])
    step = stopped.exception.step
    # While the engine times executions of 2 steps, inside the first epoch (steps 1-20).
    self.assertBetween(step, 9, 12)
    self.assertEqual(stopped.exception.checkpoint_step, step)
    model = self._fresh_model()
    result = trainer.fit(model, _stream, config, validate=_accuracy)
    self.assertEqual(result.resumed_from_step, step)
    self._assert_equals_uninterrupted(result, model)

  def test_signal_during_a_validation_checkpoints_after_it_and_resumes_equal(self):
    run_dir = self.create_tempdir().full_path

    def validate(model):
      metrics = _accuracy(model)
      if int(model.optimizer.iterations.numpy()) == 40:
        os.kill(os.getpid(), signal.SIGTERM)
      return metrics

    with self.assertRaises(trainer.TrainingInterrupted) as stopped:
      trainer.fit(self._fresh_model(), _stream, self._config(run_dir), validate=validate)
    self.assertEqual((stopped.exception.step, stopped.exception.checkpoint_step), (40, 40))
    model = self._fresh_model()
    result = trainer.fit(model, _stream, self._config(run_dir), validate=_accuracy)
    self.assertEqual(result.resumed_from_step, 40)
    self._assert_equals_uninterrupted(result, model)

  def test_a_loop_that_does_not_stop_within_the_grace_is_interrupted(self):
    run_dir = self.create_tempdir().full_path

    def validate(model):
      if int(model.optimizer.iterations.numpy()) == 40:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)  # A validation longer than the grace.
      return _accuracy(model)

    start = time.monotonic()
    with self.assertRaises(trainer.TrainingInterrupted) as stopped:
      trainer.fit(self._fresh_model(), _stream, self._config(run_dir, preemption_grace_seconds=0.2,
                                                             checkpoint_seconds=0), validate=validate)
    self.assertLess(time.monotonic() - start, 50)
    # The last checkpoint stands: step 20's (step 40's comes after its validation, which was interrupted).
    self.assertEqual((stopped.exception.step, stopped.exception.checkpoint_step), (40, 20))
    self.assertEqual(stopped.exception.signal_number, signal.SIGTERM)

  def test_previous_handlers_are_restored_after_fit(self):
    handler = lambda signal_number, frame: None  # noqa: E731
    previous = signal.signal(signal.SIGTERM, handler)
    try:
      sigint = signal.getsignal(signal.SIGINT)
      trainer.fit(_model(), _stream, _config(self.create_tempdir().full_path, train_steps=20),
                  validate=_accuracy)
      self.assertIs(signal.getsignal(signal.SIGTERM), handler)
      with self.assertRaises(trainer.TrainingInterrupted):
        trainer.fit(_model(), _stream, _config(self.create_tempdir().full_path, train_steps=20,
                                               steps_per_execution=1),
                    validate=_accuracy, callbacks=[_SignalAt(5, signal.SIGTERM)])
      self.assertIs(signal.getsignal(signal.SIGTERM), handler)
      self.assertIs(signal.getsignal(signal.SIGINT), sigint)
    finally:
      signal.signal(signal.SIGTERM, previous)

  def test_fit_parts_of_a_resume_inside_an_epoch(self):
    config = trainer.EngineConfig(run_dir="/r", train_steps=70, eval_every=20)
    self.assertEqual(trainer._fit_parts(37, config), [(37, 0, 1, 3), (40, 2, 4, 20)])  # pylint: disable=protected-access
    self.assertEqual(trainer._fit_parts(40, config), [(40, 2, 4, 20)])  # pylint: disable=protected-access
    self.assertEqual(trainer._fit_parts(65, config), [(65, 0, 1, 5)])  # pylint: disable=protected-access


class BestWeightsTest(tf.test.TestCase):

  def test_a_kill_while_best_weights_are_replaced_keeps_the_previous_ones(self):
    run_dir = self.create_tempdir().full_path
    model = _model()
    trainer.fit(model, _train_dataset(), _config(run_dir, train_steps=20, checkpoint_seconds=0),
                validate=_accuracy)
    best_dir = os.path.join(run_dir, trainer.BEST_DIR)
    with open(os.path.join(best_dir, trainer.BEST_STATE_FILE)) as f:
      before = f.read()
    # Killed between the two renames of the replacement: the old best/ set aside, the new one not in place.
    aside = os.path.join(run_dir, ".best.abcd1234.old")
    os.makedirs(aside)
    os.rename(best_dir, os.path.join(aside, "best"))
    os.makedirs(os.path.join(run_dir, ".best.efgh5678.tmp"))  # The new one, half written.
    self.assertEqual(validation.remove_stale_temporaries(run_dir),
                     [".best.abcd1234.old", ".best.efgh5678.tmp"])
    with open(os.path.join(best_dir, trainer.BEST_STATE_FILE)) as f:
      self.assertEqual(f.read(), before)
    self.assertEqual(sorted(n for n in os.listdir(run_dir) if n.startswith(".best")), [])


class MixedPrecisionTest(tf.test.TestCase):

  def test_bfloat16_compute_keeps_float32_variables_and_trains(self):
    tf.keras.utils.set_random_seed(0)  # Weights and data order fixed, whatever ran before in this process.
    with precision.policy_scope(precision.MIXED_BFLOAT16):
      model = _model()
    self.assertEqual(tf.keras.mixed_precision.global_policy().name, "float32")  # Restored.
    self.assertEqual(model.layers[0].compute_dtype, "bfloat16")
    self.assertEqual(model.layers[0].kernel.dtype, tf.float32)
    result = trainer.fit(model, _train_dataset(), _config(self.create_tempdir().full_path),
                         validate=_accuracy)
    self.assertGreater(result.best_value, 0.6)

  def test_unknown_policy_raises(self):
    with self.assertRaisesRegex(ValueError, r"`precision` must be one of \['float32', 'mixed_bfloat16', "
                                r"'mixed_float16'\], got 'float8'"):
      with precision.policy_scope("float8"):
        pass


class MultiWorkerPreemptionTest(tf.test.TestCase, parameterized.TestCase):
  """Two worker processes (tests/rank4class_engine/multi_worker_fit.py: 12 steps, validation and checkpoint
  every
  4) stopped by a signal that one of them receives."""

  @staticmethod
  def _run(run_dir: str, faults: dict[int, tuple[str, int]] | None = None) -> tuple[list[int], list[str],
                                                                                     list[dict[str, Any]]]:
    """Each worker's exit status, output and (when it succeeded) result."""
    with tempfile.TemporaryDirectory() as result_dir:
      runs = multi_worker_fit.run_workers(run_dir, result_dir, faults)
      codes, outputs = [code for code, _ in runs], [output for _, output in runs]
      results = []
      for i, code in enumerate(codes):
        if code:
          results.append({})
          continue
        with np.load(os.path.join(result_dir, f"worker_{i}.npz")) as result:
          results.append(dict(result))
    return codes, outputs, results

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    with tempfile.TemporaryDirectory() as run_dir:
      codes, outputs, cls.uninterrupted = cls._run(run_dir)
    assert codes == [0, 0], "\n---\n".join(outputs)

  def _stop(self, run_dir: str, worker: int, fault: str, executions: int, code: int, what: str,
            step: int) -> None:
    """Runs both workers until `fault` reaches `worker` after its `executions`-th execution (one step each);
    checks that both stop at `step` with the same one line and a checkpoint of that step."""
    codes, outputs, _ = self._run(run_dir, {worker: (fault, executions)})
    self.assertEqual(codes, [code, code], msg="\n---\n".join(outputs))
    line = (f"multi-worker-fit: {what}; stopped at step {step} of the run in {run_dir}; rerun the same "
            f"command to resume from the checkpoint of step {step}.")
    for output in outputs:
      self.assertEqual(output.strip().splitlines()[-1], line)
    self.assertEqual(trainer.Checkpoints(_model(), os.path.join(run_dir, "backup")).latest_step(), step)
    with open(os.path.join(run_dir, "backup", f"state-{step}.json")) as f:
      self.assertEqual([record["step"] for record in json.load(f)["history"]], [4])

  def test_both_workers_stop_at_one_step_twice_and_resume_equal(self):
    run_dir = self.create_tempdir().full_path
    # The non-chief worker receives SIGTERM after its 5th execution: both stop at step 5, inside an epoch.
    self._stop(run_dir, 1, "sigterm_in_training", 5, 143, "terminated", 5)
    # Resumed at step 5, the chief receives Ctrl-C's SIGINT after its 2nd execution: both stop at step 7.
    self._stop(run_dir, 0, "sigint_in_training", 2, 130, "interrupted", 7)

    codes, outputs, resumed = self._run(run_dir)
    self.assertEqual(codes, [0, 0], msg="\n---\n".join(outputs))
    uninterrupted = self.uninterrupted
    self.assertEqual([int(r["resumed_from_step"]) for r in resumed + uninterrupted], [7, 7, 0, 0])
    # The same steps on the same batches, summed over the same two workers in the same order: equal bit for
    # bit.
    for name in ("arr_0", "arr_1"):
      for result in resumed:
        np.testing.assert_array_equal(result[name], uninterrupted[0][name])
    history, expected = json.loads(str(resumed[0]["history"])), json.loads(str(uninterrupted[0]["history"]))
    self.assertEqual([r["step"] for r in history], [4, 8, 12])
    self.assertEqual([r["val_mse"] for r in history], [r["val_mse"] for r in expected])
    # The training loss averaged over 4 steps is summed in another order when resumed inside an epoch.
    np.testing.assert_allclose([r["loss"] for r in history], [r["loss"] for r in expected], rtol=1e-6)
    self.assertLess(history[-1]["val_mse"], history[0]["val_mse"] / 4)  # It learns: 6.49 -> 1.23.


if __name__ == "__main__":
  tf.test.main()
