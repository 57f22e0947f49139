"""Tests for pairwise.ranksvm: agreement with scikit-learn's LinearSVC, the scorer layer, save/load."""

import os

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from sklearn.svm import LinearSVC

import pairwise  # noqa: F401  (registers the Keras objects, as users do before load_model)
from pairwise import pair_transform, ranking_metrics, ranksvm
from rank4class_data.feature_lists import FeatureLists


def _synthetic_lists(seed: int, num_queries: int = 16, list_size: int = 12, num_features: int = 6,
                     noise: float = 0.7) -> tuple[FeatureLists, np.ndarray]:
  """Graded lists whose relevance is a noisy linear function of the features."""
  rng = np.random.default_rng(seed)
  true_weights = rng.normal(size=num_features)
  features = rng.normal(size=(num_queries * list_size, num_features)) * rng.uniform(0.5, 3.0, num_features)
  utility = features @ true_weights / np.std(features @ true_weights) + rng.normal(scale=noise,
                                                                                    size=len(features))
  relevance = np.clip(np.round(utility + 1.5), 0, 3)
  lists = FeatureLists(features=features, relevance=relevance,
                       list_offsets=np.arange(0, num_queries * list_size + 1, list_size),
                       query_ids=[f"q{i}" for i in range(num_queries)],
                       doc_ids=[f"d{i}" for i in range(len(features))],
                       feature_names=[f"f{j}" for j in range(num_features)])
  return lists, true_weights


def _cosine(a, b):
  return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


class ObjectiveTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters("hinge", "squared_hinge")
  def test_matches_numpy(self, loss):
    rng = np.random.default_rng(0)
    x, y, w = rng.normal(size=(20, 3)), np.sign(rng.normal(size=20)), rng.normal(size=3)
    slack = np.maximum(0.0, 1.0 - y * (x @ w))
    per_pair = slack if loss == "hinge" else slack**2
    expected = 0.5 * w @ w + 0.3 * per_pair.sum()
    self.assertAllClose(ranksvm.svm_primal_objective(w, x, y, 0.3, loss), expected, rtol=1e-5)

  def test_unknown_loss_raises(self):
    with self.assertRaisesRegex(ValueError, "loss"):
      ranksvm.svm_primal_objective([1.0], [[1.0]], [1.0], 1.0, "logistic")


class LinearSvcAgreementTest(tf.test.TestCase, parameterized.TestCase):
  """On the same pairwise-transformed data, RankSVM finds LinearSVC's weights (no intercept, same C)."""

  @parameterized.product(loss=["hinge", "squared_hinge"], c=[0.01, 1.0])
  def test_full_batch_weights_and_rankings_match_linear_svc(self, loss, c):
    lists, _ = _synthetic_lists(seed=1)
    train, test = lists.select(range(10)), lists.select(range(10, 16))
    pairs = pair_transform.pairs_within_queries(train.relevance, train.list_offsets, seed=0)
    x, y = pair_transform.pairwise_differences(train.features, pairs)
    self.assertEqual(set(np.unique(y)), {-1.0, 1.0})  # Sign flips give LinearSVC its two classes.
    svc = LinearSVC(loss=loss, C=c, fit_intercept=False, dual=True, tol=1e-8, max_iter=200_000).fit(x, y)
    weights, objective = ranksvm.fit_primal(x, y, ranksvm.RankSVMConfig(c=c, loss=loss, num_steps=3000))
    self.assertGreaterEqual(_cosine(weights, svc.coef_[0]), 0.99)
    svc_objective = float(ranksvm.svm_primal_objective(svc.coef_[0], x, y, c, loss))
    self.assertLessEqual(objective, svc_objective * 1.001)
    # Induced rankings of the unseen queries are identical.
    for q in range(test.num_queries):
      rows = test.features[test.query_rows(q)]
      self.assertAllEqual(np.argsort(-(rows @ weights)), np.argsort(-(rows @ svc.coef_[0])))

  def test_mini_batch_tf_data_training_matches_linear_svc(self):
    lists, _ = _synthetic_lists(seed=2)
    pairs = pair_transform.pairs_within_queries(lists.relevance, lists.list_offsets, seed=0)
    x, y = pair_transform.pairwise_differences(lists.features, pairs)
    svc = LinearSVC(loss="hinge", C=0.1, fit_intercept=False, dual=True, tol=1e-8, max_iter=200_000).fit(x, y)
    config = ranksvm.RankSVMConfig(c=0.1, batch_size=128, num_epochs=60, learning_rate=0.02)
    dataset = pair_transform.pair_dataset(lists.features, pairs, config.batch_size, shuffle_seed=0)
    weights = ranksvm.fit_primal_dataset(dataset, pairs.num_pairs, lists.num_features, config)
    self.assertGreaterEqual(_cosine(weights, svc.coef_[0]), 0.99)


class TrainRankSVMTest(tf.test.TestCase):

  def test_learns_held_out_rankings_far_better_than_chance(self):
    lists, _ = _synthetic_lists(seed=3)
    result = ranksvm.train_ranksvm(lists.select(range(10)), ranksvm.RankSVMConfig(c=0.1))
    test = lists.select(range(10, 16))
    labels, mask = ranking_metrics.ragged_to_padded(test.relevance, test.list_offsets)
    scores, _ = ranking_metrics.ragged_to_padded(ranksvm.score_rows(result.model, test.features),
                                                 test.list_offsets)
    accuracy = np.nanmean(ranking_metrics.pair_accuracy(labels, scores, mask))
    self.assertGreater(accuracy, 0.85)  # Random scores give 0.5.
    self.assertGreater(result.num_pairs, 0)

  def test_constant_and_query_level_features_get_zero_weight(self):
    lists, _ = _synthetic_lists(seed=4, num_queries=6)
    constant = np.full((len(lists.relevance), 1), 7.0)
    query_level = np.repeat(np.arange(6.0), 12)[:, None]  # Same value within each query.
    lists = FeatureLists(np.hstack([lists.features, constant, query_level]), lists.relevance, lists.list_offsets,
                         lists.query_ids, lists.doc_ids, [*lists.feature_names, "constant", "query_level"])
    result = ranksvm.train_ranksvm(lists, ranksvm.RankSVMConfig(c=0.1, num_steps=500))
    weights = result.weights_by_name()
    self.assertEqual(weights["constant"], 0.0)
    self.assertEqual(weights["query_level"], 0.0)
    self.assertEqual(result.constant_features, ["constant"])
    self.assertNotEqual(weights["f0"], 0.0)

  def test_single_document_query_raises_unless_skipped(self):
    lists = FeatureLists(np.array([[1.0], [2.0], [0.0]]), [1.0, 2.0, 0.0], [0, 1, 3], ["alone", "pair"],
                         ["a", "b", "c"], ["f"])
    with self.assertRaisesRegex(ValueError, "Query 'alone' has 1 document"):
      ranksvm.train_ranksvm(lists, ranksvm.RankSVMConfig(num_steps=10))
    result = ranksvm.train_ranksvm(lists, ranksvm.RankSVMConfig(num_steps=10, skip_unpairable_queries=True))
    self.assertEqual(result.num_skipped_queries, 1)

  def test_hand_checkable_ranking_order(self):
    # One feature equals the relevance: the learned weight is positive and ranks 2 > 1 > 0.
    lists = FeatureLists(np.array([[0.0], [2.0], [1.0], [5.0], [3.0]]), [0.0, 2.0, 1.0, 1.0, 0.0], [0, 3, 5],
                         ["q1", "q2"], list("abcde"), ["f"])
    result = ranksvm.train_ranksvm(lists, ranksvm.RankSVMConfig(num_steps=300))
    self.assertGreater(result.weights[0], 0.0)
    scores = ranksvm.score_rows(result.model, lists.features[:3])
    self.assertAllEqual(np.argsort(-scores), [1, 2, 0])

  def test_config_validation(self):
    for kwargs, message in (({"c": 0.0}, "`c`"), ({"loss": "log"}, "loss"), ({"batch_size": 0}, "batch_size"),
                            ({"final_learning_rate": 1.0}, "final_learning_rate")):
      with self.assertRaisesRegex(ValueError, message):
        ranksvm.RankSVMConfig(**kwargs)


class RankSVMScorerTest(tf.test.TestCase, parameterized.TestCase):

  def _scorer(self):
    scorer = ranksvm.RankSVMScorer(["a", "b"], feature_mean=[1.0, 0.0], feature_scale=[1.0, 2.0])
    scorer.build(tf.TensorShape([None, 2]))
    scorer.kernel.assign([[1.0], [3.0]])
    return scorer

  def test_hand_computed_scores(self):
    # ((2 - 1) / 1) * 1 + ((4 - 0) / 2) * 3 = 7; ((1 - 1) / 1) * 1 + (0 / 2) * 3 = 0.
    self.assertAllClose(self._scorer()(tf.constant([[2.0, 4.0], [1.0, 0.0]])), [7.0, 0.0])

  def test_list_shaped_input(self):
    scores = self._scorer()(tf.constant([[[2.0, 4.0], [1.0, 0.0], [1.0, 2.0]]]))
    self.assertAllClose(scores, [[7.0, 0.0, 3.0]])

  def test_config_round_trip(self):
    scorer = self._scorer()
    again = ranksvm.RankSVMScorer.from_config(scorer.get_config())
    self.assertEqual(again.get_config(), scorer.get_config())
    self.assertEqual(again.feature_names, ["a", "b"])

  @parameterized.named_parameters(("saved_model", "scorer"), ("keras_v3", "scorer.keras"))
  def test_save_and_load_give_identical_scores(self, name):
    model = ranksvm.make_scorer_model(["a", "b", "c"], [0.5, 0.0, 1.0], [2.0, 1.0, 0.5], [1.0, -2.0, 0.25])
    inputs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    path = os.path.join(self.create_tempdir().full_path, name)
    model.save(path)
    loaded = tf.keras.models.load_model(path)
    self.assertAllClose(loaded.predict(inputs, verbose=0), model.predict(inputs, verbose=0), atol=0.0)
    self.assertEqual(ranksvm.scorer_of(loaded).feature_names, ["a", "b", "c"])

  @parameterized.named_parameters(
      ("no_features", {"feature_names": []}, "at least one"),
      ("duplicate_names", {"feature_names": ["a", "a"]}, "unique"),
      ("wrong_length", {"feature_names": ["a"], "feature_mean": [0.0, 1.0]}, "one value per feature"),
      ("zero_scale", {"feature_names": ["a"], "feature_scale": [0.0]}, "positive"),
  )
  def test_bad_arguments_raise(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      ranksvm.RankSVMScorer(**kwargs)

  def test_wrong_input_width_raises(self):
    with self.assertRaisesRegex(ValueError, "expects 2 features"):
      ranksvm.RankSVMScorer(["a", "b"])(tf.zeros([1, 3]))


if __name__ == "__main__":
  tf.test.main()
