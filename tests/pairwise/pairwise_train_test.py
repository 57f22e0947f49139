"""Tests for pairwise.pairwise_train: configs, real-data assembly, distributed training, evaluation, export."""

import glob
import json
import os
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import pairwise  # noqa: F401  (registers the Keras objects for loading)
from pairwise import aggregate, margin_model, newsgroups_qrels, pairs
from pairwise import pairwise_train as pt
from rank4class import hub_conversion
from rank4class_engine import distribute

_GOOD, _MID, _BAD = ["great", "excellent", "best"], ["okay", "fine", "average"], ["awful", "worst", "terrible"]
_FILLER = ["drug", "pill", "day", "night", "sleep", "dose", "doctor", "week"]


def _text_items(num_groups, per_group, seed):
  """Reviews whose words hint at their label: one word of the label's set, one of a random set, fillers."""
  rng = np.random.default_rng(seed)
  word_sets = [_BAD, _MID, _GOOD]
  texts, labels = [], []
  for _ in range(num_groups * per_group):
    label = int(rng.integers(0, 3))
    words = [rng.choice(word_sets[label]), rng.choice(word_sets[int(rng.integers(0, 3))])]
    words += list(rng.choice(_FILLER, 3))
    texts.append(" ".join(rng.permutation(words)))
    labels.append(label)
  labels = np.array(labels)
  return pairs.GroupedItems(texts, labels.astype(float), np.repeat(np.arange(num_groups), per_group),
                            class_labels=labels)


def _embedding_items(num_groups, per_group, seed, dim=8, noise=0.5):
  """Embeddings whose first coordinate is the label plus noise."""
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, 3, size=num_groups * per_group)
  features = rng.normal(size=(len(labels), dim)).astype(np.float32)
  features[:, 0] = labels + rng.normal(0, noise, size=len(labels))
  return pairs.GroupedItems(features, labels.astype(float), np.repeat(np.arange(num_groups), per_group),
                            class_labels=labels)


_STRATEGY = []


def _strategy():
  """One 2-replica MirroredStrategy per process: strategies created per test can collide in collective keys."""
  if not _STRATEGY:
    _STRATEGY.append(distribute.make_strategy("mirrored", ["/cpu:0", "/cpu:1"]))
  return _STRATEGY[0]


def _config(model_dir, encoder=None, **train_kwargs):
  train = dict(model_dir=model_dir, train_steps=60, learning_rate=5e-3, list_size=8, lists_per_batch=4,
               log_every=20, checkpoint_every=30, export=False)
  train.update(train_kwargs)
  return pt.PairwiseConfig(encoder=encoder or pt.EncoderConfig(kind="precomputed"),
                           train=pt.TrainConfig(**train), eval=pt.EvalConfig(topn=5))


def _oracle(items):
  """A linear pair head scoring the first embedding coordinate (the label): a perfect ranker."""
  model = margin_model.PairwiseRanker(None, head="linear")
  z = tf.constant(items.features[:2])
  model((z, z))
  weights = np.zeros([items.features.shape[1], 1], np.float32)
  weights[0] = 1.0
  model._head._linear.set_weights([weights, np.zeros([1], np.float32)])
  return model


class ConfigTest(tf.test.TestCase):

  def test_listwise_needs_group_batching(self):
    with self.assertRaisesRegex(ValueError, "batching='groups'"):
      pt.PairwiseConfig(model=pt.ModelConfig(objective="softmax"), train=pt.TrainConfig(batching="pairs"))

  def test_precompute_needs_text_encoder(self):
    with self.assertRaisesRegex(ValueError, "precompute"):
      pt.EncoderConfig(kind="hashed_bow", precompute=True)

  def test_unknown_names_raise(self):
    with self.assertRaisesRegex(ValueError, "pivot"):
      pt.DataConfig(pivot="user")
    with self.assertRaisesRegex(ValueError, "objective"):
      pt.ModelConfig(objective="lambdamart")
    with self.assertRaisesRegex(ValueError, "list_size"):
      pt.TrainConfig(list_size=1)

  def test_dict_round_trip(self):
    config = pt.PairwiseConfig(model=pt.ModelConfig(head="linear", num_classes=3),
                               train=pt.TrainConfig(model_dir="/x", seed=4))
    self.assertEqual(pt.PairwiseConfig.from_dict(json.loads(json.dumps(config.to_dict()))), config)

  def test_unknown_section_raises(self):
    with self.assertRaisesRegex(ValueError, "optimizer"):
      pt.PairwiseConfig.from_dict({"optimizer": {}})

  def test_write_json_atomic_leaves_no_temporary_file(self):
    folder = self.create_tempdir().full_path
    pt.write_json_atomic(os.path.join(folder, "a.json"), {"x": np.float32(1.5)})
    self.assertEqual(os.listdir(folder), ["a.json"])
    with open(os.path.join(folder, "a.json")) as f:
      self.assertEqual(json.load(f), {"x": 1.5})


class DataTest(tf.test.TestCase):

  def test_newsgroup_hierarchy(self):
    self.assertEqual(newsgroups_qrels.hierarchy_of("comp.sys.mac.hardware"), "comp")
    self.assertEqual(newsgroups_qrels.hierarchy_of("talk.politics.guns"), "talk.politics")
    self.assertEqual(newsgroups_qrels.hierarchy_of("talk.religion.misc"), "religion")
    self.assertEqual(newsgroups_qrels.hierarchy_of("alt.atheism"), "religion")
    self.assertEqual(newsgroups_qrels.hierarchy_of("misc.forsale"), "misc")

  def test_newsgroup_query_items_grades(self):
    class_names = ["comp.graphics", "comp.windows.x", "misc.forsale", "rec.autos"]
    labels = np.repeat(np.arange(4), 10)
    texts = [f"subject {class_names[c]} words here and more" for c in labels]
    items = pt.newsgroup_query_items(texts, labels, class_names, num_queries=8, passages_per_grade=(2, 2, 3),
                                     query_words=2, seed=0)
    for g in np.unique(items.group_ids):
      rows = np.flatnonzero(items.group_ids == g)
      query = items.features[rows[0]].split(pt.QUERY_PASSAGE_SEPARATOR)[0]
      query_class = query.split()[1]
      for r in rows:
        head, passage = items.features[r].split(pt.QUERY_PASSAGE_SEPARATOR)
        self.assertEqual(head, query)
        passage_class = passage.split()[1]
        grade = 2 if passage_class == query_class else (
            1 if newsgroups_qrels.hierarchy_of(passage_class) == newsgroups_qrels.hierarchy_of(query_class) else 0)
        self.assertEqual(items.labels[r], grade)
      if query_class == "misc.forsale":
        self.assertNotIn(1.0, items.labels[rows])
    self.assertAllEqual(items.class_labels, items.labels.astype(np.int64))

  def test_drug_reviews_by_condition(self):
    items = pt.drug_review_items("condition", "rating")
    self.assertLen(items, 979)
    self.assertEqual(set(np.unique(items.labels)), {0.0, 1.0, 2.0})
    self.assertIn("Birth Control", items.group_names)
    capped = pt.drug_review_items("condition", "useful_count", max_items_per_group=5)
    self.assertLessEqual(np.bincount(capped.group_ids).max(), 5)
    self.assertGreater(capped.labels.max(), 2)

  def test_load_ranking_data_splits_by_group(self):
    splits = pt.load_ranking_data(pt.DataConfig(dataset="drug_reviews", pivot="drug_name", split_seed=3))
    groups = {name: set(items.group_ids) for name, items in splits.items()}
    self.assertEmpty(groups["train"] & groups["test"])
    self.assertEmpty(groups["train"] & groups["validation"])
    self.assertEqual(sum(len(items) for items in splits.values()), 979)

  def test_balanced_subset(self):
    items = _embedding_items(5, 20, seed=0)
    subset = pt.balanced_subset(items, 0, seed=0)
    counts = np.bincount(subset.class_labels)
    self.assertEqual(len(set(counts)), 1)
    with self.assertRaisesRegex(ValueError, "test_per_class"):
      pt.balanced_subset(items, 1000, seed=0)


class EvaluateTest(tf.test.TestCase):

  def test_oracle_scores_perfectly_and_random_is_chance(self):
    items = _embedding_items(6, 10, seed=1, noise=0.0)
    metrics = pt.evaluate(_oracle(items), items, pt.EvalConfig(topn=5, relevance_threshold=2.0))
    for name in ("ndcg@5", "map@5", "mrr@5", "pair_accuracy", "pair_accuracy_raw"):
      self.assertAllClose(metrics[name], 1.0, msg=name)
    self.assertLen(metrics["per_group"]["ndcg@5"], 6)
    baseline = pt.random_baseline(items, pt.EvalConfig(topn=5), draws=50)
    self.assertBetween(baseline["pair_accuracy"], 0.4, 0.6)

  def test_raw_pair_accuracy_matches_pair_by_pair(self):
    tf.keras.utils.set_random_seed(0)
    items = _embedding_items(2, 5, seed=2)
    model = margin_model.PairwiseRanker(None)
    model((tf.constant(items.features[:2]),) * 2, training=False)
    metrics = pt.evaluate(model, items, pt.EvalConfig())
    correct = total = 0
    for g in range(2):
      rows = np.flatnonzero(items.group_ids == g)
      for i in rows:
        for j in rows:
          if items.labels[i] == items.labels[j]:
            continue
          s = model((items.features[i:i + 1], items.features[j:j + 1]), training=False).numpy()[0]
          correct += np.sign(s[0] - s[1]) == np.sign(items.labels[i] - items.labels[j])
          total += 1
    self.assertAllClose(metrics["pair_accuracy_raw"], correct / total)

  def test_class_conversion_of_oracle_is_exact(self):
    items = pt.balanced_subset(_embedding_items(1, 90, seed=3, noise=0.0), 0, seed=0)
    result = pt.class_conversion(_oracle(items), items, 3, pt.EvalConfig())
    self.assertEqual(result["accuracy"], 1.0)


class TrainTest(tf.test.TestCase, parameterized.TestCase):

  def test_distributed_text_training_beats_untrained(self):
    strategy = _strategy()
    train_items, val_items, test_items = (_text_items(12, 10, s) for s in (0, 1, 2))
    model_dir = self.create_tempdir().full_path
    config = _config(model_dir, pt.EncoderConfig(kind="hashed_bow", hashed_buckets=256, hashed_dim=16),
                     train_steps=60, learning_rate=1e-2, eval_every=30)
    untrained = pt.build_model(config.model, pt.make_encoder(config.encoder))
    before = pt.evaluate(untrained, test_items, config.eval)["pair_accuracy_raw"]
    result = pt.train(config, train_items, val_items, strategy)
    after = pt.evaluate(result.model, test_items, config.eval)["pair_accuracy_raw"]
    self.assertGreater(after, 0.75)
    self.assertGreater(after, before + 0.15)
    self.assertEqual([h["step"] for h in result.history], [30, 60])
    with open(os.path.join(model_dir, "config.json")) as f:
      self.assertEqual(json.load(f), json.loads(json.dumps(config.to_dict())))
    # The engine's run directory: best weights with their validation, TensorBoard logs, the progress log.
    with open(os.path.join(model_dir, "best", "best.json")) as f:
      best = json.load(f)
    self.assertEqual((best["metric"], best["step"]), ("pair_accuracy_raw", result.best_step))
    self.assertIn(best["step"], (30, 60))
    self.assertNotEmpty(glob.glob(os.path.join(model_dir, "best", "weights*")))
    self.assertNotEmpty(glob.glob(os.path.join(model_dir, "logs", "train", "events*")))
    self.assertNotEmpty(glob.glob(os.path.join(model_dir, "logs", "validation", "events*")))
    with open(os.path.join(model_dir, "progress.jsonl")) as f:
      self.assertEqual(json.loads(f.read().splitlines()[-1])["step"], 60)

  def test_export_reloads_and_scores_the_same(self):
    # Text exports are reloaded end to end in pairwise_main_test; here embeddings keep the tracing short.
    items = _embedding_items(2, 4, seed=0)
    model = margin_model.PairwiseRanker(None, num_classes=0)
    z = tf.constant(items.features)
    model((z, z), training=False)
    eval_config = pt.EvalConfig(aggregation="win_count")
    paths = pt.export(model, os.path.join(self.create_tempdir().full_path, "export"), eval_config, items.features[0])
    pair_scorer = tf.keras.models.load_model(paths["pair_scorer"])
    self.assertAllClose(pair_scorer((z[:4], z[4:]), training=False), model((z[:4], z[4:]), training=False),
                        atol=1e-5)
    served = tf.saved_model.load(paths["pair_scorer"]).signatures["serving_default"]
    names = sorted(served.structured_input_signature[1])
    self.assertLen(names, 2)
    outputs = tf.nest.flatten(served(**dict(zip(names, [z[:4], z[4:]], strict=True))))
    self.assertAllClose(outputs[0], model((z[:4], z[4:]), training=False), atol=1e-5)
    list_scorer = tf.keras.models.load_model(paths["list_scorer"])
    lists, mask = tf.reshape(z, [2, 4, -1]), tf.constant([[True] * 4, [True, True, True, False]])
    expected = aggregate.PairwiseListScorer(model, "win_count")((lists, mask))
    self.assertAllClose(list_scorer((lists, mask)), expected, atol=1e-5)

  def test_an_interrupted_run_resumes_from_its_last_checkpoint(self):
    items = _embedding_items(10, 8, seed=0)
    model_dir = self.create_tempdir().full_path
    config = _config(model_dir, train_steps=50, eval_every=10, checkpoint_every=10)
    real_evaluate = pt.evaluate
    calls = []

    def evaluate_then_crash(*args, **kwargs):  # The run dies in its second validation, after step 20's checkpoint.
      calls.append(1)
      if len(calls) == 2:
        raise KeyboardInterrupt
      return real_evaluate(*args, **kwargs)

    with mock.patch.object(pt, "evaluate", side_effect=evaluate_then_crash), self.assertRaises(KeyboardInterrupt):
      pt.train(config, items, items)
    result = pt.train(config, items, items)
    self.assertEqual([h["step"] for h in result.history], [30, 40, 50])

  @parameterized.named_parameters(
      ("per_pair_double_headed", dict(batching="pairs", pair_batch_size=32), dict(num_classes=3)),
      ("softmax_double_headed", {}, dict(objective="softmax", num_classes=3)),
      ("approx_ndcg", {}, dict(objective="approx_ndcg")),
      ("linear_head", {}, dict(head="linear")))
  def test_options_beat_chance(self, train_kwargs, model_kwargs):
    # Single-device strategy: the 2-replica path is covered above; tracing it again per option costs minutes.
    items, test_items = _embedding_items(20, 8, seed=0, noise=0.3), _embedding_items(10, 8, seed=1, noise=0.3)
    config = _config(self.create_tempdir().full_path, train_steps=150, checkpoint_every=150, **train_kwargs)
    config.model = pt.ModelConfig(**model_kwargs)
    result = pt.train(config, items)
    metrics = pt.evaluate(result.model, test_items, config.eval)
    baseline = pt.random_baseline(test_items, config.eval)
    self.assertGreater(metrics["pair_accuracy_raw"], 0.8)
    self.assertGreater(metrics["ndcg@5"], baseline["ndcg@5"])
    if model_kwargs.get("num_classes"):
      embeddings = tf.constant(test_items.features)
      predicted = np.argmax(result.model.classify(embeddings, training=False), axis=-1)
      majority = np.bincount(test_items.class_labels).max() / len(test_items)
      self.assertGreater(np.mean(predicted == test_items.class_labels), majority + 0.1)

  def test_class_label_beyond_num_classes_raises(self):
    items = _embedding_items(4, 5, seed=0)
    config = _config(self.create_tempdir().full_path)
    config.model = pt.ModelConfig(num_classes=2)
    with self.assertRaisesRegex(ValueError, "num_classes"):
      pt.train(config, items)

  def test_texts_with_precomputed_config_raise(self):
    config = _config(self.create_tempdir().full_path)
    with self.assertRaisesRegex(ValueError, "texts"):
      pt.train(config, _text_items(2, 4, 0))


class RunsTest(tf.test.TestCase):

  def test_class_conversion_run_beats_chance(self):
    train_items = _embedding_items(1, 150, seed=0, noise=0.4)
    test_items = pt.balanced_subset(_embedding_items(1, 150, seed=1, noise=0.4), 0, seed=0)
    config = _config(self.create_tempdir().full_path, train_steps=80)
    config.eval = pt.EvalConfig()
    result = pt.run_class_conversion(config, pt.ClassConversionConfig(classifier_steps=80), None,
                                     train_items, test_items)
    self.assertGreater(result["ranking_converted_accuracy"], 0.6)
    self.assertGreater(result["classifier_accuracy"], 0.5)
    self.assertTrue(os.path.exists(os.path.join(config.train.model_dir, "class_conversion.json")))

  def test_random_bert_encoder_precomputed_and_fine_tuned(self):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + _GOOD + _MID + _BAD + _FILLER
    handles = hub_conversion.export_random_bert(self.create_tempdir().full_path, vocab, hidden_size=16,
                                                num_layers=1, num_heads=2, intermediate_size=32)
    text_config = dict(preprocess_handle=handles.preprocess, encoder_handle=handles.encoder, max_seq_length=8)
    items = _text_items(4, 6, 0)
    # Frozen: embeddings of the cached path equal the TextEncoder's.
    encoder_config = pt.EncoderConfig(**text_config, trainable=False, precompute=True,
                                      embedding_cache_dir=self.create_tempdir().full_path)
    prepared = pt.prepare_items(encoder_config, {"train": items})["train"]
    self.assertEqual(prepared.features.shape, (24, 16))
    encoder = pt.make_encoder(pt.EncoderConfig(**text_config, trainable=False))
    self.assertAllClose(prepared.features, encoder(tf.constant(items.features)), atol=1e-5)
    # Fine-tuned under 2 replicas: TF Hub layers must be built in replica context.
    config = _config(self.create_tempdir().full_path, pt.EncoderConfig(**text_config, trainable=True),
                     train_steps=3, list_size=6, lists_per_batch=2)
    result = pt.train(config, items, None, _strategy())
    metrics = pt.evaluate(result.model, items, config.eval)
    self.assertBetween(metrics["pair_accuracy_raw"], 0.0, 1.0)
    self.assertNotEmpty(result.model.encoder.trainable_weights)

  def test_summarize_seeds(self):
    summary = pt.summarize_seeds([{"a": 1.0, "b": "x"}, {"a": 3.0}])
    self.assertEqual(summary["a"], {"mean": 2.0, "std": np.sqrt(2.0), "n": 2})
    self.assertNotIn("b", summary)


if __name__ == "__main__":
  tf.test.main()
