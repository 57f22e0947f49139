"""Tests for rank4class_engine.optimization.lazy_adam: sparse updates touch the looked-up rows only, as Adam
would."""

import numpy as np
import tensorflow as tf

from rank4class_engine.optimization import lazy_adam


def _sparse_step(optimizer, table: tf.Variable, ids: list[int]) -> None:
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(tf.square(tf.gather(table, ids) - 1.0))
  optimizer.apply_gradients([(tape.gradient(loss, table), table)])


class LazyAdamTest(tf.test.TestCase):

  def test_rows_not_looked_up_stay_and_looked_up_rows_follow_adam(self):
    start = np.arange(12, dtype=np.float32).reshape([4, 3]) / 10
    lazy, dense = tf.Variable(start), tf.Variable(start)
    lazy_optimizer, adam = lazy_adam.LazyAdam(0.1), tf.keras.optimizers.Adam(0.1)
    _sparse_step(lazy_optimizer, lazy, [2, 0, 2])  # Row 2 twice: its gradients add up.
    _sparse_step(adam, dense, [2, 0, 2])
    self.assertAllClose(lazy.numpy()[[0, 2]], dense.numpy()[[0, 2]])  # First step: the same update.
    self.assertAllEqual(lazy.numpy()[[1, 3]], start[[1, 3]])
    before = lazy.numpy()
    adam_before = dense.numpy()
    _sparse_step(lazy_optimizer, lazy, [1])
    _sparse_step(adam, dense, [1])
    self.assertAllEqual(lazy.numpy()[[0, 2, 3]], before[[0, 2, 3]])  # Lazy: untouched rows do not move.
    self.assertNotAllClose(dense.numpy()[[0, 2]], adam_before[[0, 2]])  # Adam moves them on their momentum.

  def test_dense_gradients_are_adams_and_config_round_trips(self):
    lazy, dense = tf.Variable([1.0, -2.0]), tf.Variable([1.0, -2.0])
    for optimizer, variable in ((lazy_adam.LazyAdam(0.05), lazy), (tf.keras.optimizers.Adam(0.05), dense)):
      for _ in range(3):
        optimizer.apply_gradients([(2 * variable.read_value(), variable)])
    self.assertAllClose(lazy, dense)
    restored = tf.keras.optimizers.deserialize(tf.keras.optimizers.serialize(lazy_adam.LazyAdam(0.05)))
    self.assertIsInstance(restored, lazy_adam.LazyAdam)
    with self.assertRaisesRegex(ValueError, "amsgrad"):
      lazy_adam.LazyAdam(amsgrad=True)


if __name__ == "__main__":
  tf.test.main()
