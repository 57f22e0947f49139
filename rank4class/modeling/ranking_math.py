"""Pure tensor math of Rank4Class (labels to relevance, all-class interactions, top-k classes) and the NumPy
class centroids a one-hot class encoder may start at."""

import functools
from collections.abc import Callable, Iterable

import numpy as np
import tensorflow as tf

from rank4class_data.validation import check_range


def validate_class_ids(class_ids: tf.Tensor, num_classes: int) -> tf.Tensor:
  """Checks that class ids are integers in [0, num_classes) and returns them as int32 `[batch_size]`.

  Keras may hand labels over as floats (`[batch_size, 1]` float32 after `compile`'s rank matching), so float
  tensors are accepted when every value is a whole number. Out-of-range ids raise; they are never masked.

  Args:
    class_ids: Integer (or whole-number float) tensor `[batch_size]` or `[batch_size, 1]`.
    num_classes: Number of classes, at least 1.

  Returns:
    int32 tensor `[batch_size]`.

  Raises:
    ValueError: If `num_classes` < 1 or `class_ids` has a shape other than `[batch_size]`/`[batch_size, 1]`.
    tf.errors.InvalidArgumentError: At run time, naming the bad ids and `num_classes`, if an id is negative,
      not a whole number, or >= `num_classes`.
  """
  check_range("num_classes", num_classes, 1, integer=True)
  class_ids = tf.convert_to_tensor(class_ids)
  rank = class_ids.shape.rank
  if rank == 2 and class_ids.shape[-1] == 1:
    class_ids = tf.squeeze(class_ids, axis=-1)
  elif rank != 1:
    raise ValueError(
      f"class ids must have shape [batch_size] or [batch_size, 1], got shape {class_ids.shape}."
    )
  checks = []
  if class_ids.dtype.is_floating:
    checks.append(tf.debugging.assert_equal(
      class_ids,
      tf.round(class_ids),
      message=f"class ids must be whole numbers in [0, {num_classes}); got a fractional id",
    ))
  elif not class_ids.dtype.is_integer:
    raise ValueError(f"class ids must be integers, got dtype {class_ids.dtype.name}.")
  message = f"class ids must be in [0, num_classes={num_classes})"
  checks.append(tf.debugging.assert_non_negative(class_ids,
                                                 message=message + "; got a negative id", summarize=16))
  checks.append(tf.debugging.assert_less(
    class_ids,
    tf.cast(num_classes, class_ids.dtype),
    message=message + "; got an id >= num_classes",
    summarize=16,
  ))
  # In a graph the checks run before anything uses the ids (a gather would fail first, less clearly).
  with tf.control_dependencies([c for c in checks if c is not None]):
    return tf.cast(class_ids, tf.int32)


def class_ids_to_relevance(class_ids: tf.Tensor, num_classes: int, dtype: tf.DType = tf.float32) -> tf.Tensor:
  """Turns class ids into one-hot relevance labels over the classes, the list items of Rank4Class (§3.2).

  Args:
    class_ids: Integer tensor `[batch_size]` or `[batch_size, 1]` with values in [0, num_classes).
    num_classes: Number of classes (the list size).
    dtype: Floating dtype of the result.

  Returns:
    Tensor `[batch_size, num_classes]`: 1 at the true class, 0 elsewhere.

  Raises:
    tf.errors.InvalidArgumentError: If an id is out of range (see `validate_class_ids`).
  """
  return tf.one_hot(validate_class_ids(class_ids, num_classes), depth=num_classes, dtype=dtype)


def latent_cross(instances: tf.Tensor, classes: tf.Tensor) -> tf.Tensor:
  """Element-wise products of every instance with its classes, by broadcasting (no loop over classes).

  Args:
    instances: `[batch_size, dim]`.
    classes: `[num_classes, dim]` (every instance meets every class), or `[batch_size, list_size, dim]` (each
      instance meets its own list of classes, e.g. sampled ones).

  Returns:
    `[batch_size, num_classes or list_size, dim]` with `out[b, i] = instances[b] * classes[i]` (or
    `classes[b, i]`).
  """
  classes = tf.convert_to_tensor(classes)
  return instances[:, tf.newaxis, :] * (classes if classes.shape.rank == 3 else classes[tf.newaxis, :, :])


def concat_dense(
  instances: tf.Tensor, classes: tf.Tensor, kernel: tf.Tensor, bias: tf.Tensor | None
) -> tf.Tensor:
  """`concat([h_b, c_i]) @ kernel + bias` for every (instance, class) pair without materializing the concat.

  With `kernel = [W_h; W_c]` split at the instance dimension, `[h, c] W = h W_h + c W_c`, so the first layer
  of a concat MLP costs `[batch_size, units] + [num_classes, units]` matmuls and one broadcast add instead of
  a `[batch_size * num_classes, dim_h + dim_c]` matmul.

  Args:
    instances: `[batch_size, dim_h]`.
    classes: `[num_classes, dim_c]`, or per-instance lists `[batch_size, list_size, dim_c]`.
    kernel: `[dim_h + dim_c, units]`.
    bias: `[units]` or None.

  Returns:
    `[batch_size, num_classes or list_size, units]`.
  """
  classes = tf.convert_to_tensor(classes)
  dim_h = instances.shape[-1]
  from_instances = tf.matmul(instances, kernel[:dim_h])  # [batch_size, units]
  from_classes = tf.tensordot(classes, kernel[dim_h:], axes=1)  # [(batch_size,) num_classes, units]
  if bias is not None:
    from_classes += bias
  if classes.shape.rank == 2:
    from_classes = from_classes[tf.newaxis, :, :]
  return from_instances[:, tf.newaxis, :] + from_classes


def top_k_classes(scores: tf.Tensor, k: int) -> tuple[tf.Tensor, tf.Tensor]:
  """The `k` best-scored classes per instance, best first.

  Args:
    scores: `[batch_size, num_classes]`.
    k: Number of classes to return, 1 <= k <= num_classes (when the class count is static).

  Returns:
    `(class_ids, top_scores)`: int32 `[batch_size, k]` and `[batch_size, k]`.

  Raises:
    ValueError: If `k` < 1 or exceeds the static number of classes.
  """
  num_classes = scores.shape[-1]
  if k < 1 or (num_classes is not None and k > num_classes):
    raise ValueError(f"`k` must be in [1, num_classes={num_classes}], got {k}.")
  top_scores, class_ids = tf.math.top_k(scores, k=k, sorted=True)
  return class_ids, top_scores


@functools.lru_cache(maxsize=16)
def traced_relevance(num_classes: int) -> Callable[[tf.Tensor], tf.Tensor]:
  """`class_ids_to_relevance` for `num_classes`, as a `tf.function` traced once per process: the eager ops of
  one conversion cost a validation batch ~4 ms on the reference stack, the traced call a fraction of that."""
  return tf.function(lambda class_ids: class_ids_to_relevance(class_ids, num_classes),
                     input_signature=[tf.TensorSpec([None], tf.int64)], autograph=False)


def with_untrained_share(trained: tf.Tensor, untrained: tf.Tensor, share: float) -> tf.Tensor:
  """`[sqrt(1 - share) * trained, sqrt(share) * untrained]` along the last axis: for unit-length vectors on
  both sides of a dot product, the dot of two such vectors is `(1 - share) * cos(trained) + share *
  cos(untrained)`, a mix of a trained tower's cosine and the untrained (frozen) embeddings' cosine.

  Example: with_untrained_share([[1., 0.]], [[0., 1.]], 0.25) -> [[0.866, 0., 0., 0.5]].
  """
  check_range("share", share, 0.0, 1.0)
  trained = tf.convert_to_tensor(trained)
  untrained = tf.cast(untrained, trained.dtype)
  return tf.concat([tf.cast((1.0 - share) ** 0.5, trained.dtype) * trained,
                    tf.cast(share ** 0.5, trained.dtype) * untrained], axis=-1)


def class_centroids(batches: Iterable[tuple[np.ndarray, np.ndarray]],
                    num_classes: int) -> tuple[np.ndarray, np.ndarray]:
  """Each class's unit-length centroid: the mean of its rows scaled to length 1, as the nearest class centroid
  baseline computes it (`rank4class.evaluation.baselines`), in one pass over `batches` (a split read batch by
  batch: only the `[num_classes, d]` sums are held).

  Example:
    class_centroids([(np.array([[3., 0.], [1., 2.], [0., 5.]]), np.array([0, 0, 1]))], 3)
    # ([[0.894, 0.447], [0., 1.], [0., 0.]], [2, 1, 0])

  Args:
    batches: (features `[n, ...]` (flattened to `[n, d]`), class ids int `[n]`) pairs.
    num_classes: Number of classes C.

  Returns:
    (float32 `[num_classes, d]`: unit-length rows, the zero vector for a class without rows (it scores 0
    against every instance at first); int64 `[num_classes]`: rows per class).

  Raises:
    ValueError: For no rows, class ids outside [0, num_classes) or not one per row, or non-finite features.
  """
  sums, counts = None, np.zeros(num_classes, np.int64)
  for features, labels in batches:
    features = np.asarray(features, np.float64)
    features = features.reshape(len(features), -1)
    labels = np.asarray(labels)
    if labels.shape != (len(features),) or not np.issubdtype(labels.dtype, np.integer):
      raise ValueError(f"Class centroids need one integer class id per row; got labels of shape "
                       f"{list(labels.shape)} ({labels.dtype}) for {len(features)} rows.")
    if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
      raise ValueError(f"Class ids must lie in [0, {num_classes}); got {labels.min()}..{labels.max()}.")
    if not np.all(np.isfinite(features)):
      raise ValueError("Class centroids need finite features.")
    if sums is None:
      sums = np.zeros((num_classes, features.shape[1]), np.float64)
    np.add.at(sums, labels, features)
    counts += np.bincount(labels, minlength=num_classes)
  if sums is None or not counts.sum():
    raise ValueError("Class centroids need at least one training row.")
  norms = np.linalg.norm(sums, axis=1, keepdims=True)
  centroids = np.divide(sums, norms, out=np.zeros_like(sums), where=norms > 0)
  return centroids.astype(np.float32), counts
