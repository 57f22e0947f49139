"""Tests for rank4class.training.zero_shot_choice: the classes held out, the data split by them, the held-out
validation over untrained shares, and a training run's zero-shot model end to end."""

import contextlib
import dataclasses
import io
import json
import os

import numpy as np
import tensorflow as tf

from rank4class.inference import zero_shot
from rank4class.modeling import model as model_lib
from rank4class.modeling import ranking_math
from rank4class.modeling.mlp_encoder import MlpEncoder
from rank4class.training import train, zero_shot_choice
from rank4class.training import training_data as data_lib
from rank4class_encoders import text_embeddings
from tests.rank4class import tiny_text_encoder


class HeldOutClassesTest(tf.test.TestCase):

  def test_auto_holds_out_a_tenth_and_at_least_five_from_ten_classes_on(self):
    counts = {c: len(zero_shot_choice.auto_held_out(c, None, 0)) for c in (5, 9, 10, 15, 60, 630)}
    self.assertEqual(counts, {5: 0, 9: 0, 10: 5, 15: 5, 60: 6, 630: 63})
    self.assertEqual(len(zero_shot_choice.auto_held_out(630, 0.0, 0)), 0)
    self.assertEqual(len(zero_shot_choice.auto_held_out(20, 0.2, 0)), 4)
    self.assertEqual(len(zero_shot_choice.auto_held_out(3, 0.5, 0)), 0)  # 2 would leave 1 to train on.

  def test_held_out_ids_are_sorted_distinct_and_seeded(self):
    held = zero_shot_choice.held_out_classes(100, 0.1, 7)
    self.assertAllEqual(held, np.sort(np.unique(held)))
    self.assertAllEqual(held, zero_shot_choice.held_out_classes(100, 0.1, 7))
    self.assertNotAllEqual(held, zero_shot_choice.held_out_classes(100, 0.1, 8))


class SplitHeldOutTest(tf.test.TestCase):

  def test_seen_classes_renumbered_and_held_out_rows_of_train_and_validation(self):
    x = np.arange(7, dtype=np.float32)[:, None] * np.ones([1, 2], np.float32)
    data = data_lib.PreparedData(
        class_names=["a", "b", "c", "d"], input_kind=data_lib.EMBEDDING_INPUT,
        train=data_lib.ArraySplit(x[:5], np.array([0, 1, 2, 3, 1])),
        validation=data_lib.ArraySplit(x[5:], np.array([3, 0])), test=None,
        class_texts=["text a", "text b", "text c", "text d"])
    split = zero_shot_choice.split_held_out(data, np.array([1, 3]))
    self.assertEqual((split.seen.class_names, split.seen.class_texts), (["a", "c"], ["text a", "text c"]))
    self.assertAllEqual(split.seen.train.labels, [0, 1])  # a, c
    self.assertAllEqual(split.seen.train.features[:, 0], [0, 2])
    self.assertAllEqual(split.seen.validation.labels, [0])
    self.assertAllEqual(split.seen.validation.features[:, 0], [6])
    # Rows 1 (b), 3 (d), 4 (b) of train, then row 5 (d) of validation; labels index the held-out classes.
    self.assertAllEqual(split.instances[:, 0], [1, 3, 4, 5])
    self.assertAllEqual(split.labels, [0, 1, 0, 1])
    self.assertEqual((split.class_names, split.class_texts), (["b", "d"], ["text b", "text d"]))

  def test_without_class_texts_the_class_names_are_the_texts(self):
    data = data_lib.PreparedData(["a", "b", "c"], data_lib.EMBEDDING_INPUT,
                                 data_lib.ArraySplit(np.zeros([3, 1]), np.array([0, 1, 2])),
                                 data_lib.ArraySplit(np.zeros([3, 1]), np.array([0, 1, 2])), None)
    split = zero_shot_choice.split_held_out(data, np.array([1]))
    self.assertEqual((split.seen.class_texts, split.class_texts), (["a", "c"], ["b"]))

  def test_labels_not_in_memory_are_refused(self):
    data = data_lib.PreparedData(["a", "b"], data_lib.EMBEDDING_INPUT,
                                 data_lib.ArraySplit(np.zeros([2, 2]), np.zeros([2, 2], np.float32)),
                                 data_lib.ArraySplit(np.zeros([2, 2]), np.zeros([2, 2], np.float32)), None)
    with self.assertRaisesRegex(ValueError, "one class id each"):
      zero_shot_choice.split_held_out(data, np.array([1]))


class UntrainedShareTest(tf.test.TestCase):

  def test_hand_computed(self):
    self.assertAllClose(ranking_math.with_untrained_share([[1., 0.]], [[0., 1.]], 0.25),
                        [[0.75 ** 0.5, 0., 0., 0.5]])
    with self.assertRaises(ValueError):
      ranking_math.with_untrained_share([[1.]], [[1.]], 1.5)

  def test_mlp_output_mixes_the_cosines_of_two_such_vectors(self):
    tf.keras.utils.set_random_seed(0)
    x = tf.random.normal([3, 4])
    plain = MlpEncoder(hidden_units=(5,), residual=True, l2_normalize=True)
    trained = plain(x)
    for w in plain.trainable_weights:
      w.assign(tf.random.normal(w.shape))
    mixed = MlpEncoder.from_config({**plain.get_config(), "untrained_share": 0.3})
    mixed(x)
    mixed.set_weights(plain.get_weights())
    trained, unit = plain(x), tf.math.l2_normalize(x, axis=-1)
    self.assertEqual(mixed.output_dim, 8)
    self.assertAllClose(tf.matmul(mixed(x), mixed(x), transpose_b=True),
                        0.7 * tf.matmul(trained, trained, transpose_b=True)
                        + 0.3 * tf.matmul(unit, unit, transpose_b=True), atol=1e-5)
    with self.assertRaisesRegex(ValueError, "needs `residual`"):
      MlpEncoder(hidden_units=(5,), untrained_share=0.5)


class ZeroShotValidationTest(tiny_text_encoder.TinyTextEncoderTestCase):

  def _model(self, seen: list[str], share: float = 0.0) -> model_lib.Rank4ClassModel:
    config = train.with_cosine_towers(model_lib.Rank4ClassConfig(
        instance_encoder=dataclasses.replace(model_lib.Rank4ClassConfig().instance_encoder, type="mlp"),
        class_encoder=dataclasses.replace(model_lib.Rank4ClassConfig().class_encoder, type="metadata")),
        self.text, seen)
    config = dataclasses.replace(
        config, instance_encoder=dataclasses.replace(config.instance_encoder, mlp=dataclasses.replace(
            config.instance_encoder.mlp, hidden_units=(8,), untrained_share=share)),
        class_encoder=dataclasses.replace(config.class_encoder, metadata=dataclasses.replace(
            config.class_encoder.metadata, untrained_share=share)))
    return model_lib.build_model(config, seen)

  def test_untrained_start_is_the_nearest_text_then_the_best_share_is_chosen_and_built_in(self):
    seen, unseen = ["a big dog", "a small cat", "a tree"], ["a bird", "a fish", "a big tree", "a small dog"]
    glosses = ["a small bird", "a big fish", "a tree", "a dog", "a big cat", "small fish", "a bird", "fish"]
    x = text_embeddings.embed_texts(glosses, self.text, self.create_tempdir().full_path)
    unseen_vectors = text_embeddings.embed_texts(unseen, self.text, self.create_tempdir().full_path)
    labels = np.array([0, 1, 2, 3, 0, 1, 0, 1])
    split = zero_shot_choice.HeldOutSplit(seen=None, held_out=np.arange(4), instances=x, labels=labels,
                                          class_names=unseen, class_texts=unseen)
    tf.keras.utils.set_random_seed(0)
    model = self._model(seen)
    model(x)
    validate = zero_shot_choice.ZeroShotValidation(split, unseen_vectors, "mrr", ks=(1, 2))
    untrained = zero_shot.nearest_text_baseline(x, unseen_vectors, labels, ks=(1, 2))["metrics"]
    start = validate(model)
    # At the start every share gives the same scores: the first share (0) is kept, and all equal the baseline.
    self.assertEqual(start["zero_shot_untrained_share"], 0.0)
    self.assertAllClose(start["zero_shot_mrr"], untrained["mrr"])
    self.assertAllClose(start["zero_shot_untrained_mrr"], untrained["mrr"])
    # Moved away from the start: the chosen share is the best of the mixes, computed here by hand.
    for w in model.trainable_weights:
      w.assign(tf.random.normal(w.shape, stddev=0.5))
    moved = validate(model)
    trained = model.text_class_scores(x, unseen).numpy() * train.COSINE_TOWERS_TEMPERATURE
    unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)  # noqa: E731
    cosines = unit(x) @ unit(unseen_vectors).T
    by_share = {s: zero_shot.full_class_scoring.rank_metrics(zero_shot.served.strictly_higher_ranks(
        (1 - s) * trained + s * cosines, labels), (1, 2))["mrr"] for s in zero_shot_choice.UNTRAINED_SHARES}
    best = max(by_share.values())
    self.assertAllClose(moved["zero_shot_mrr"], best)
    self.assertGreaterEqual(moved["zero_shot_mrr"], untrained["mrr"] - 1e-9)
    share = moved["zero_shot_untrained_share"]
    self.assertAllClose(by_share[share], best)
    # The same weights with the share built into both towers score the mix itself (over the temperature).
    mixed = self._model(seen, share)
    mixed(x)
    mixed.set_weights(model.get_weights())
    self.assertAllClose(mixed.text_class_scores(x, unseen).numpy() * train.COSINE_TOWERS_TEMPERATURE,
                        (1 - share) * trained + share * cosines, atol=1e-4)


_TOPICS = {
    "sport": ["the team won the match", "a goal in the final minute", "the players trained hard"],
    "cooking": ["bake the bread for an hour", "chop the onions and fry them", "a recipe for soup"],
    "music": ["the band played a new song", "she sang at the concert", "guitar and drums on stage"],
    "weather": ["heavy rain tomorrow morning", "a sunny and warm afternoon", "snow storms in the north"],
    "health": ["the doctor treated the patient", "take the medicine twice a day",
               "exercise keeps the heart fit"],
    "travel": ["we flew to rome for a week", "the hotel was near the beach", "book the train tickets early"],
    "finance": ["the bank raised interest rates", "stocks fell on the market", "save money for retirement"],
    "school": ["the pupils sat their exam", "the teacher marked the homework",
               "a new classroom for the kids"],
    "pets": ["the puppy chased its tail", "feed the cat twice a day", "the parrot learned new words"],
    "space": ["the rocket reached orbit", "astronauts on the space station",
              "a telescope found a new planet"],
}


class TrainedZeroShotModelTest(tf.test.TestCase):
  """rank4class-train with classes as texts trains the zero-shot model beside the run's model, and a zero-shot
  export of the run serves it."""

  def test_run_trains_chooses_and_exports_the_zero_shot_model(self):
    root = self.create_tempdir().full_path
    with open(os.path.join(root, "train.csv"), "w") as f:
      f.write("text,label\n"
              + "".join(f"{text},{topic}\n" for topic, texts in _TOPICS.items() for text in texts
                                       for _ in range(2)))
    with open(os.path.join(root, "texts.csv"), "w") as f:
      f.write("class,text\n" + "".join(f"{topic},news about {topic}\n" for topic in _TOPICS))
    config = train.Rank4ClassTrainConfig(
        model_dir=os.path.join(root, "run"),
        data=data_lib.DataConfig(train_files=os.path.join(root, "train.csv"),
                                 class_texts=os.path.join(root, "texts.csv"),
                                 validation_fraction=0.34, row_cache_dir=os.path.join(root, "rows"),
                                 embedding_cache_dir=os.path.join(root, "embeddings")),
        model=dataclasses.replace(model_lib.Rank4ClassConfig(), class_encoder=dataclasses.replace(
            model_lib.Rank4ClassConfig().class_encoder, type="metadata")),
        train_steps=30, eval_every=10, batch_size=8, tensorboard=False, baselines=False, calibrate=False,
        linear_candidate=False,  # The zero-shot model is under test, not the run's model choice.
        verbose=1)
    with contextlib.redirect_stderr(io.StringIO()):
      result = train.train(config)
    record = result.zero_shot
    self.assertEqual((record["num_held_out_classes"], record["num_held_out_rows"]), (5, 30))
    self.assertIn(record["untrained_share"], zero_shot_choice.UNTRAINED_SHARES)
    self.assertIn(record["step"], (0, 10, 20, 30))
    with open(os.path.join(config.model_dir, "zero_shot", zero_shot_choice.CHOICE_FILE)) as f:
      self.assertEqual(json.load(f), json.loads(json.dumps(record)))
    # The exported zero-shot model gives the chosen validation value on the held-out classes' rows.
    held = record["held_out_classes"]
    rows = [(text, held.index(topic)) for topic in held for text in _TOPICS[topic] for _ in range(2)]
    frozen = data_lib.frozen_text_encoder(config.data, data_lib.text_handles(config.data))
    x = text_embeddings.embed_texts([t for t, _ in rows], frozen, config.data.embedding_cache_dir)
    model = tf.keras.models.load_model(os.path.join(config.model_dir, "zero_shot", "export"))
    report = zero_shot.zero_shot_report(model, x, np.array([y for _, y in rows]),
                                        [f"news about {t}" for t in held])
    self.assertAllClose(report["metrics"][record["metric"]], record["value"], atol=1e-6)
    self.assertGreaterEqual(record["value"], record["untrained_value"])
    # A zero-shot export of the run takes that model (`export.export` reads `source` from this).
    self.assertEqual(zero_shot.trained_zero_shot_model(config.model_dir),
                     os.path.join(config.model_dir, "zero_shot", "export"))
    self.assertIsNone(zero_shot.trained_zero_shot_model(os.path.join(config.model_dir, "export")))
    self.assertEqual(model.num_classes, 5)  # The classes it trained on.


if __name__ == "__main__":
  tf.test.main()
