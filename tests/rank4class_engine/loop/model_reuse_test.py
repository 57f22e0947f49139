"""Tests for rank4class_engine.loop.model_reuse: a pooled model trains to the numbers of a fresh one, or is
not reused."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class_engine.loop import model_reuse
from rank4class_engine.optimization import losses as losses_lib

_RNG = np.random.default_rng(0)
_X = _RNG.normal(size=(64, 6)).astype(np.float32)
_Y = (_X[:, 0] + _X[:, 1] > 0).astype(np.int64) + (_X[:, 2] > 1).astype(np.int64)


def _noisy_loss(labels, logits):
  """Cross-entropy plus a draw from a stateful random op (as a Gumbel sampler or Keras dropout has)."""
  loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
  return loss + 0.0 * tf.random.uniform([], seed=1)


def _model(seed: int, learning_rate: float = 1e-2, optimizer: str = "adam", units: int = 8,
           loss=None) -> tf.keras.Model:
  """A fresh compiled model with its weights created, seeded as a run seeds it."""
  tf.keras.utils.set_random_seed(seed)
  model = tf.keras.Sequential([tf.keras.layers.Dense(units, activation="relu"), tf.keras.layers.Dense(3)])
  model.build([None, 6])
  make = {"adam": tf.keras.optimizers.Adam, "adagrad": tf.keras.optimizers.Adagrad}[optimizer]
  model.compile(make(learning_rate), loss or tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                steps_per_execution=4)
  return model


def _fit(model: tf.keras.Model) -> list[np.ndarray]:
  data = tf.data.Dataset.from_tensor_slices((_X, _Y)).shuffle(64, seed=0).repeat().batch(16)
  model.fit(data, steps_per_epoch=12, epochs=1, verbose=0)
  return model.get_weights()


class ModelPoolTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters("adam", "adagrad")  # Adagrad's slots start at 0.1, not 0: copied, not zeroed.
  def test_a_reused_model_trains_to_the_weights_of_a_fresh_one_without_tracing_again(self, optimizer):
    pool = model_reuse.ModelPool()
    first = pool.take("cell", _model(0, 1e-2, optimizer))
    self.assertFalse(first.reused)
    _fit(first.model)
    pool.release(first)
    second = pool.take("cell", _model(1, 3e-3, optimizer))
    self.assertTrue(second.reused)
    self.assertIs(second.model, first.model)
    self.assertEqual(int(second.model.optimizer.iterations), 0)
    self.assertAllClose(second.model.optimizer.learning_rate, 3e-3)
    reused_weights = _fit(second.model)
    # Traced by the first run.
    self.assertEqual(second.model.train_function.experimental_get_tracing_count(), 1)
    self.assertEqual(int(second.model.optimizer.iterations), 12)
    fresh_weights = _fit(_model(1, 3e-3, optimizer))
    for reused, fresh in zip(reused_weights, fresh_weights, strict=True):
      self.assertAllClose(reused, fresh, atol=1e-6)
    # The second run did start elsewhere: the first run's weights are another model's.
    self.assertNotAllClose(reused_weights[0], _fit(_model(0, 1e-2, optimizer))[0])
    self.assertEqual(pool.reused_runs, 1)

  def test_a_train_function_with_a_stateful_random_op_is_never_reused(self):
    pool = model_reuse.ModelPool()
    first = pool.take("cell", _model(0, loss=_noisy_loss))
    _fit(first.model)
    self.assertEqual(model_reuse.stateful_random_ops(first.model.train_function), {"RandomUniform"})
    pool.release(first)
    second = pool.take("cell", _model(1, loss=_noisy_loss))
    self.assertFalse(second.reused)
    self.assertIsNot(second.model, first.model)

  def test_gumbel_draws_are_live_and_the_tie_shuffling_softmax_never_reads_is_not(self):
    # TF-Ranking's SoftmaxLoss computes ranks with shuffled ties (a RandomUniform op) that it reads only with
    # lambda weights: a dead op, which TensorFlow prunes, does not stop reuse.
    loss = losses_lib.make_loss(losses_lib.LossConfig(type=losses_lib.GUMBEL_APPROX_NDCG, seed=3))
    traced = tf.function(lambda labels, scores: loss(labels, scores))
    traced(tf.constant([[1.0, 0.0, 0.0]]), tf.constant([[0.3, 0.2, 0.1]]))
    self.assertNotEmpty(model_reuse.stateful_random_ops(traced))
    softmax = losses_lib.make_loss(losses_lib.LossConfig(type=losses_lib.SOFTMAX))
    traced = tf.function(lambda labels, scores: softmax(labels, scores))
    traced(tf.constant([[1.0, 0.0, 0.0]]), tf.constant([[0.3, 0.2, 0.1]]))
    self.assertEmpty(model_reuse.stateful_random_ops(traced))

  @parameterized.named_parameters(
      ("other_layer_config", dict(units=5)),
      ("other_optimizer", dict(optimizer="adagrad")),
  )
  def test_another_architecture_or_optimizer_under_the_same_key_is_not_reused(self, changes):
    pool = model_reuse.ModelPool()
    first = pool.take("cell", _model(0))
    _fit(first.model)
    pool.release(first)
    second = pool.take("cell", _model(0, **changes))
    self.assertFalse(second.reused)
    self.assertIsNot(second.model, first.model)

  def test_a_learning_rate_schedule_is_not_reused(self):
    def scheduled(seed):
      model = _model(seed)
      schedule = tf.keras.optimizers.schedules.ExponentialDecay(1e-2, 10, 0.5)
      model.compile(tf.keras.optimizers.Adam(schedule), model.loss, steps_per_execution=4)
      return model
    pool = model_reuse.ModelPool()
    first = pool.take("cell", scheduled(0))
    _fit(first.model)
    pool.release(first)
    self.assertFalse(pool.take("cell", scheduled(1)).reused)

  def test_an_untrained_model_is_not_kept_and_the_oldest_key_leaves_a_full_pool(self):
    pool = model_reuse.ModelPool(capacity=1)
    pool.release(pool.take("a", _model(0)))  # Never trained: no train function to reuse.
    self.assertFalse(pool.take("a", _model(0)).reused)
    for key in ("a", "b"):
      entry = pool.take(key, _model(0))
      _fit(entry.model)
      pool.release(entry)
    self.assertFalse(pool.take("a", _model(0)).reused)  # Pushed out by "b".
    self.assertTrue(pool.take("b", _model(0)).reused)
    with self.assertRaisesRegex(ValueError, "`capacity` must be an integer >= 1, got 0"):
      model_reuse.ModelPool(capacity=0)


if __name__ == "__main__":
  tf.test.main()
