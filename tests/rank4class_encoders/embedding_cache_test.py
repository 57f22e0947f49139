"""Tests for rank4class_encoders.embedding_cache: equal to the encoder, keyed cache, TFRecords, frozen heads."""

import io
import os
from unittest import mock

import numpy as np
import tensorflow as tf

from rank4class_encoders import embedding_cache, text_encoder
from tests.rank4class_encoders.tiny_bert import tiny_handles

TEXTS = [
  "the cat sat on the mat .",
  "a dog",
  "the dogs ran in a park !",
  "sad",
  "the cat is happy",
  "a dog is sad",
  "cats",
]


def tiny_config(**kwargs) -> text_encoder.TextEncoderConfig:
  handles = tiny_handles()
  return text_encoder.TextEncoderConfig(
    handles.preprocess, handles.encoder, **{"max_seq_length": 16, **kwargs}
  )


class EmbedTextsTest(tf.test.TestCase):
  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.encoder = text_encoder.make_text_encoder(tiny_config())

  def test_equals_the_encoder_in_input_order(self):
    # Batches of 3 regroup the texts by length and drop padding columns; the vectors must not change.
    got = embedding_cache.embed_texts(self.encoder, TEXTS, batch_size=3)
    self.assertEqual(got.shape, (len(TEXTS), 16))
    self.assertAllClose(got, self.encoder(tf.constant(TEXTS)), atol=1e-5)

  def test_long_runs_show_a_progress_line_and_short_ones_stay_silent(self):
    with mock.patch("sys.stderr", new_callable=io.StringIO) as stderr:
      embedding_cache.compute_embeddings(self.encoder, TEXTS, batch_size=3)
    self.assertEqual(stderr.getvalue(), "")  # Well under PROGRESS_SECONDS.
    with mock.patch.object(embedding_cache, "PROGRESS_SECONDS", 0.0), \
        mock.patch("sys.stderr", new_callable=io.StringIO) as stderr:
      embedding_cache.compute_embeddings(self.encoder, TEXTS, batch_size=3)
    lines = stderr.getvalue().split("\r")[1:]
    self.assertEqual([line.split(" (")[0] for line in lines],
                     ["embedding texts: 3/7", "embedding texts: 6/7", "embedding texts: 7/7"])
    self.assertRegex(lines[-1], r"^embedding texts: 7/7 \([\d,]+ texts/s, 0 s left\)\n$")

  def test_cache_hit_skips_building_and_running_the_encoder(self):
    cache = self.create_tempdir().full_path
    first = embedding_cache.embed_texts(tiny_config(), TEXTS, cache_dir=cache)
    with (
      mock.patch.object(text_encoder, "make_text_encoder", side_effect=AssertionError("built")),
      mock.patch.object(embedding_cache, "compute_embeddings", side_effect=AssertionError("ran")),
    ):
      second = embedding_cache.embed_texts(tiny_config(), TEXTS, cache_dir=cache)
    self.assertAllEqual(first, second)
    key = embedding_cache.embedding_cache_key(tiny_config(), TEXTS)
    # Only the cache file and its description: no temporary files are left behind.
    self.assertSameElements(os.listdir(cache), [f"embeddings-{key}.npy", f"embeddings-{key}.json"])

  def test_key_depends_on_texts_length_pooling_and_weights(self):
    key = embedding_cache.embedding_cache_key(tiny_config(), TEXTS)
    self.assertEqual(
      embedding_cache.embedding_cache_key(self.encoder, TEXTS), key
    )  # Frozen instance = config.
    self.assertNotEqual(embedding_cache.embedding_cache_key(tiny_config(), TEXTS[::-1]), key)
    self.assertNotEqual(embedding_cache.embedding_cache_key(tiny_config(max_seq_length=8), TEXTS), key)
    self.assertNotEqual(embedding_cache.embedding_cache_key(tiny_config(pooling="cls"), TEXTS), key)
    tuned = text_encoder.make_text_encoder(tiny_config(trainable=True))
    tuned_key = embedding_cache.embedding_cache_key(tuned, TEXTS)
    tuned.trainable_weights[0].assign_add(tf.ones_like(tuned.trainable_weights[0]))
    self.assertNotEqual(embedding_cache.embedding_cache_key(tuned, TEXTS), tuned_key)

  def test_writes_tfrecord_with_labels(self):
    path = os.path.join(self.create_tempdir().full_path, "embeddings.tfrecord")
    labels = np.arange(len(TEXTS)) % 2
    embeddings = embedding_cache.embed_texts(self.encoder, TEXTS, tfrecord_path=path, labels=labels)
    got, got_labels = embedding_cache.read_embeddings_tfrecord(path, dim=16, with_labels=True)
    self.assertAllEqual(got, embeddings)
    self.assertAllEqual(got_labels, labels)

  def test_empty_text_list_gives_empty_matrix(self):
    self.assertEqual(embedding_cache.embed_texts(self.encoder, []).shape, (0, 16))

  def test_bad_inputs_raise(self):
    with self.assertRaisesRegex(ValueError, "row 1 is int"):
      embedding_cache.embed_texts(self.encoder, ["a", 3])
    with self.assertRaisesRegex(ValueError, "must be a TextEncoder or a TextEncoderConfig, got str"):
      embedding_cache.embed_texts("encoder", ["a"])
    with self.assertRaisesRegex(ValueError, "`batch_size` must be positive, got 0"):
      embedding_cache.embed_texts(self.encoder, ["a"], batch_size=0)

  def test_frozen_head_trains_on_cached_embeddings(self):
    tf.keras.utils.set_random_seed(0)  # Head init and fit's shuffling, whatever ran before.
    rng = np.random.default_rng(0)
    animals = rng.integers(0, 2, size=64)
    moods = rng.choice(["happy", "sad"], size=64)
    texts = [
      f"the {'dog' if animal else 'cat'} is {mood}" for animal, mood in zip(animals, moods, strict=True)
    ]
    embeddings = embedding_cache.embed_texts(tiny_config(), texts, cache_dir=self.create_tempdir().full_path)
    head = tf.keras.Sequential([tf.keras.layers.Dense(2)])
    head.compile(
      tf.keras.optimizers.Adam(0.1),
      tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=["accuracy"],
    )
    history = head.fit(embeddings / embeddings.std(), animals, epochs=30, batch_size=64, verbose=0)
    majority = max(animals.mean(), 1 - animals.mean())
    self.assertGreater(history.history["accuracy"][-1], majority + 0.2)


class TfRecordTest(tf.test.TestCase):
  def test_round_trip_without_labels(self):
    path = os.path.join(self.create_tempdir().full_path, "x.tfrecord")
    embeddings = np.array([[1.0, 2.0], [3.0, 4.5]], np.float32)
    embedding_cache.write_embeddings_tfrecord(path, embeddings)
    got, labels = embedding_cache.read_embeddings_tfrecord(path, dim=2)
    self.assertAllEqual(got, embeddings)
    self.assertIsNone(labels)
    self.assertEqual(os.listdir(os.path.dirname(path)), ["x.tfrecord"])

  def test_bad_shapes_raise(self):
    path = os.path.join(self.create_tempdir().full_path, "x.tfrecord")
    with self.assertRaisesRegex(ValueError, r"must be \[num_texts, dim\], got shape \(3,\)"):
      embedding_cache.write_embeddings_tfrecord(path, np.zeros([3]))
    with self.assertRaisesRegex(ValueError, r"`labels` must have shape \(2,\), got \(3,\)"):
      embedding_cache.write_embeddings_tfrecord(path, np.zeros([2, 4]), labels=np.zeros([3]))

  def test_missing_file_raises(self):
    with self.assertRaisesRegex(FileNotFoundError, "does not exist"):
      embedding_cache.read_embeddings_tfrecord("/no/such.tfrecord", dim=2)


if __name__ == "__main__":
  tf.test.main()
