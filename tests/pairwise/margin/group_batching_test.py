"""Tests for pairwise.margin.group_batching: list/pair pipelines and the group-batched pair graph."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from pairwise.margin import group_batching, margin_model, pairs
from rank4class_data.ranking.grouped_items import GroupedItems
from rank4class_encoders import bert_conversion, text_encoder

_WORDS = ["good", "bad", "great", "awful", "pill", "day", "night", "fine", "worse", "best"]


def _items(num_groups=5, per_group=7, seed=0):
  rng = np.random.default_rng(seed)
  texts = [" ".join(rng.choice(_WORDS, 4)) for _ in range(num_groups * per_group)]
  labels = rng.integers(0, 3, size=len(texts)).astype(float)
  return GroupedItems(texts, labels, np.repeat(np.arange(num_groups), per_group),
                            class_labels=labels.astype(np.int64))


def _list_pairs_to_pair_set(rows: np.ndarray, flips: np.ndarray, labels: np.ndarray,
                            min_label_gap: float = 0.0) -> pairs.PairSet:
  """The valid pairs a group-batched step on (`rows`, `flips`) trains on, as item rows in the same order: the
  per-pair oracle of the equivalence tests.

  Args:
    rows: int [num_lists, n] item rows (`pairs.PADDING_INDEX` = padding).
    flips: bool [num_lists, P] orientations.
    labels: float [num_items] labels of the item table.
    min_label_gap: As in training.

  Returns:
    A `pairs.PairSet` ordered by (list, pair position), the order of `group_pair_scores`.
  """
  rows = np.asarray(rows)
  mask = rows >= 0
  list_labels = np.where(mask, np.asarray(labels, np.float64)[np.maximum(rows, 0)], pairs.PADDING_LABEL)
  oriented = pairs.oriented_list_pairs(list_labels, mask, min_label_gap, flips)
  valid = oriented["valid"].numpy()
  list_index = np.nonzero(valid)[0]
  left = rows[list_index, oriented["left"].numpy()[valid]]
  right = rows[list_index, oriented["right"].numpy()[valid]]
  return pairs.PairSet(left=left.astype(np.int64), right=right.astype(np.int64),
                       pair_labels=oriented["pair_labels"].numpy()[valid].astype(np.float32))


class _CountingEncoder(tf.keras.layers.Layer):
  """Wraps an encoder and counts the items it encodes (not serializable; tests only)."""

  def __init__(self, inner, **kwargs):
    super().__init__(**kwargs)
    self.inner = inner
    self.count = tf.Variable(0, trainable=False, dtype=tf.int64)

  def call(self, inputs, training=None):
    self.count.assign_add(tf.shape(inputs, out_type=tf.int64)[0])
    return self.inner(inputs, training=training)


def _per_pair_loss(model, texts, pair_set, margin, training):
  """The reference computation: encode both passages of every pair, then the mean margin loss."""
  left = tf.gather(texts, pair_set.left)
  right = tf.gather(texts, pair_set.right)
  scores = model((left, right), training=training)
  return tf.reduce_mean(pairs.margin_ranking_loss(scores[:, 0], scores[:, 1], pair_set.pair_labels, margin))


def _group_loss(model, table, rows, flips, margin, training):
  lists = table.gather_lists(tf.constant(rows))
  out = group_batching.group_pair_scores(model, lists["items"], lists["mask"], lists["labels"],
                                         tf.constant(flips), training=training)
  return tf.reduce_mean(pairs.margin_ranking_loss(out["scores"][:, 0], out["scores"][:, 1],
                                                  out["pair_labels"], margin))


class DatasetsTest(tf.test.TestCase):

  def test_list_dataset_shapes_and_valid_lists(self):
    items = _items()
    batches = list(group_batching.list_dataset(items, list_size=4, lists_per_batch=3, num_batches=5, seed=0))
    self.assertLen(batches, 5)
    self.assertEqual(batches[0]["rows"].shape, (3, 4))
    self.assertEqual(batches[0]["flips"].shape, (3, 6))
    for batch in batches:
      for row in batch["rows"].numpy():
        real = row[row >= 0]
        self.assertLen(set(items.group_ids[real]), 1)
        self.assertGreater(np.ptp(items.labels[real]), 0)

  def test_list_dataset_is_seeded(self):
    items = _items()
    first = next(iter(group_batching.list_dataset(items, 4, 2, 3, seed=5)))
    again = next(iter(group_batching.list_dataset(items, 4, 2, 3, seed=5)))
    self.assertAllEqual(first["rows"], again["rows"])
    self.assertAllEqual(first["flips"], again["flips"])

  def test_list_dataset_without_valid_pairs_raises(self):
    items = GroupedItems(["a", "b"], np.array([1.0, 1.0]), np.array([0, 0]))
    with self.assertRaisesRegex(ValueError, "different labels"):
      group_batching.list_dataset(items, 4, 1, 1, seed=0)

  def test_list_size_one_raises(self):
    with self.assertRaisesRegex(ValueError, "list_size"):
      group_batching.list_dataset(_items(), 1, 1, 1, seed=0)

  def test_pair_dataset_labels_match_items(self):
    items = _items()
    batch = next(iter(group_batching.pair_dataset(items, batch_size=16, num_batches=2, seed=0)))
    left, right = batch["left"].numpy(), batch["right"].numpy()
    self.assertAllEqual(items.group_ids[left], items.group_ids[right])
    self.assertAllEqual(batch["pair_labels"], np.where(items.labels[left] > items.labels[right], 1.0, -1.0))

  def test_gather_lists_pads_labels_with_minus_one(self):
    table = group_batching.ItemTable.from_items(_items())
    out = table.gather_lists(tf.constant([[0, 1, -1]]))
    self.assertAllEqual(out["mask"], [[True, True, False]])
    self.assertEqual(out["labels"][0, 2], -1.0)
    self.assertEqual(out["items"].dtype, tf.string)


class ListPairsToPairSetTest(tf.test.TestCase):

  def test_hand_example(self):
    # One list [row 3 (label 0), row 1 (label 2), padding]; pair (0,1) flipped -> left row 1, right row 3,
    # E=+1.
    labels = np.array([5.0, 2.0, 5.0, 0.0])
    pair_set = _list_pairs_to_pair_set(np.array([[3, 1, -1]]), np.array([[True, False, False]]), labels)
    self.assertAllEqual(pair_set.left, [1])
    self.assertAllEqual(pair_set.right, [3])
    self.assertAllEqual(pair_set.pair_labels, [1.0])


class GroupBatchedEquivalenceTest(tf.test.TestCase, parameterized.TestCase):
  """Group-batched loss == per-pair loss on the same pairs (same order and orientation)."""

  def _batch(self, items, list_size=7, lists=3):
    return next(iter(group_batching.list_dataset(items, list_size, lists, 1, seed=2)))

  @parameterized.named_parameters(("inference_mode", False, 0.2, True),
                                  ("train_mode_dropout_off", True, 0.0, True),
                                  ("linear_head", True, 0.0, False))
  def test_loss_and_gradients_match_per_pair(self, training, dropout, mlp):
    # training=True with dropout 0 keeps BatchNorm in training mode: the compacted valid pairs form the same
    # batch, in the same order, as per-pair training, so the batch statistics agree too.
    tf.keras.utils.set_random_seed(0)
    items = _items()
    model = margin_model.PairwiseRanker(margin_model.HashedBagOfWordsEncoder(64, 8),
                                        head="mlp" if mlp else "linear", dropout=dropout)
    table = group_batching.ItemTable.from_items(items)
    batch = self._batch(items)
    pair_set = _list_pairs_to_pair_set(batch["rows"].numpy(), batch["flips"].numpy(), items.labels)
    self.assertGreater(len(pair_set), 10)
    with tf.GradientTape(persistent=True) as tape:
      grouped = _group_loss(model, table, batch["rows"].numpy(), batch["flips"].numpy(), 2.0, training)
      per_pair = _per_pair_loss(model, table.features, pair_set, 2.0, training)
    self.assertAllClose(grouped, per_pair, atol=1e-6, rtol=1e-6)
    for g1, g2 in zip(tape.gradient(grouped, model.trainable_variables),
                      tape.gradient(per_pair, model.trainable_variables), strict=True):
      self.assertAllClose(tf.convert_to_tensor(g1), tf.convert_to_tensor(g2), atol=1e-5, rtol=1e-5)

  def test_separate_encoders_match_per_pair(self):
    tf.keras.utils.set_random_seed(0)
    items = _items()
    model = margin_model.PairwiseRanker(margin_model.HashedBagOfWordsEncoder(64, 8), separate_encoders=True)
    table = group_batching.ItemTable.from_items(items)
    batch = self._batch(items)
    pair_set = _list_pairs_to_pair_set(batch["rows"].numpy(), batch["flips"].numpy(), items.labels)
    grouped = _group_loss(model, table, batch["rows"].numpy(), batch["flips"].numpy(), 2.0, False)
    self.assertAllClose(grouped, _per_pair_loss(model, table.features, pair_set, 2.0, False), atol=1e-6)

  def test_random_bert_encoder_matches_per_pair(self):
    handles = bert_conversion.export_random_bert(self.create_tempdir().full_path,
                                                ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + _WORDS, hidden_size=16,
                                                num_layers=1, num_heads=2, intermediate_size=32)
    encoder = text_encoder.TextEncoder(handles.preprocess, handles.encoder, trainable=True, max_seq_length=8)
    model = margin_model.PairwiseRanker(encoder)
    items = _items(num_groups=2, per_group=6)
    table = group_batching.ItemTable.from_items(items)
    batch = self._batch(items, list_size=6, lists=2)
    pair_set = _list_pairs_to_pair_set(batch["rows"].numpy(), batch["flips"].numpy(), items.labels)
    grouped = _group_loss(model, table, batch["rows"].numpy(), batch["flips"].numpy(), 2.0, False)
    self.assertAllClose(grouped, _per_pair_loss(model, table.features, pair_set, 2.0, False), atol=1e-6)

  def test_group_batching_encodes_each_item_once(self):
    items = _items()
    counting = _CountingEncoder(margin_model.HashedBagOfWordsEncoder(64, 8))
    model = margin_model.PairwiseRanker(counting)
    table = group_batching.ItemTable.from_items(items)
    batch = self._batch(items)
    rows = batch["rows"].numpy()
    pair_set = _list_pairs_to_pair_set(rows, batch["flips"].numpy(), items.labels)
    _group_loss(model, table, rows, batch["flips"].numpy(), 2.0, False)
    grouped_count = int(counting.count.numpy())
    self.assertEqual(grouped_count, int(np.sum(rows >= 0)))
    counting.count.assign(0)
    _per_pair_loss(model, table.features, pair_set, 2.0, False)
    self.assertEqual(int(counting.count.numpy()), 2 * len(pair_set))
    self.assertGreater(2 * len(pair_set), 2 * grouped_count)


if __name__ == "__main__":
  tf.test.main()
