"""Lazy Adam: Adam whose sparse updates touch only the rows a step looked up.

Keras' Adam decays both moments of every row of an embedding table at every step, even when the gradient is
sparse (`tf.IndexedSlices` from a gather): with sampled class lists over C = 100,000 classes that dense work,
O(C x d) per step, is most of the step. Here a sparse gradient updates the moments and the weights of its rows
only (TF Addons' LazyAdam semantics: a row's moments decay only at the steps that look it up); dense gradients
get Keras' Adam unchanged.
"""

import tensorflow as tf


@tf.keras.utils.register_keras_serializable(package="rank4class")
class LazyAdam(tf.keras.optimizers.Adam):
  """`tf.keras.optimizers.Adam` with lazy sparse updates (see the module doc); same arguments, no amsgrad."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    if self.amsgrad:
      raise ValueError("LazyAdam does not support amsgrad.")

  def update_step(self, gradient, variable):
    if not isinstance(gradient, tf.IndexedSlices):
      return super().update_step(gradient, variable)
    lr = tf.cast(self.learning_rate, variable.dtype)
    step = tf.cast(self.iterations + 1, variable.dtype)
    beta_1 = tf.cast(self.beta_1, variable.dtype)
    beta_2 = tf.cast(self.beta_2, variable.dtype)
    alpha = lr * tf.sqrt(1 - tf.pow(beta_2, step)) / (1 - tf.pow(beta_1, step))
    key = self._var_key(variable)
    m = self._momentums[self._index_dict[key]]
    v = self._velocities[self._index_dict[key]]
    # A row looked up several times in the step gets the sum of its gradients, as in the dense update.
    rows, positions = tf.unique(gradient.indices)
    values = tf.math.unsorted_segment_sum(gradient.values, positions, tf.shape(rows)[0])
    m_rows = tf.gather(m, rows) * beta_1 + values * (1 - beta_1)
    v_rows = tf.gather(v, rows) * beta_2 + tf.square(values) * (1 - beta_2)
    m.scatter_update(tf.IndexedSlices(m_rows, rows))
    v.scatter_update(tf.IndexedSlices(v_rows, rows))
    variable.scatter_sub(tf.IndexedSlices(m_rows * alpha / (tf.sqrt(v_rows) + self.epsilon), rows))
