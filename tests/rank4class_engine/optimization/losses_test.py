"""Tests of rank4class_engine.optimization.losses: each ranking loss against a NumPy reference on
hand-computable cases."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class_data.tf_ranking import tfr
from rank4class_engine import distribute
from rank4class_engine.optimization import losses

# Two instances over three classes; true classes 1 and 0. No tied scores.
_RELEVANCE = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], np.float32)
_SCORES = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 0.25]], np.float32)
_TRUE = np.argmax(_RELEVANCE, axis=1)


def _np_softmax_ce(relevance, scores):
  log_p = scores - np.log(np.sum(np.exp(scores), axis=1, keepdims=True))
  return np.mean(-np.sum(relevance * log_p, axis=1))


def _np_pairwise_logistic(relevance, scores):
  # TF-Ranking sums over pairs (i, j) with y_i > y_j and averages over the batch *and* the list items.
  batch, num = scores.shape
  total = 0.0
  for b in range(batch):
    for i in range(num):
      for j in range(num):
        if relevance[b, i] > relevance[b, j]:
          total += np.log1p(np.exp(-(scores[b, i] - scores[b, j])))
  return total / (batch * num)


def _np_approx_ndcg(relevance, scores, temperature):
  def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))

  per_list = []
  for y, s in zip(relevance, scores, strict=True):
    ranks = np.array(
      [
        1.0 + sum(sigmoid((s[j] - s[i]) / temperature) for j in range(len(s)) if j != i)
        for i in range(len(s))
      ]
    )
    dcg = np.sum((2.0**y - 1.0) / np.log2(1.0 + ranks))
    ideal = np.sum((2.0 ** np.sort(y)[::-1] - 1.0) / np.log2(2.0 + np.arange(len(y))))
    per_list.append(-dcg / ideal)
  return np.mean(per_list)


def _np_rescaled_mse(relevance, scores, k, m):
  true = np.argmax(relevance, axis=1)
  num = scores.shape[1]
  per_list = [
    (k * (s[t] - m) ** 2 + np.sum(np.delete(s, t) ** 2)) / num for s, t in zip(scores, true, strict=True)
  ]
  return np.mean(per_list)


class TfRankingLossesTest(tf.test.TestCase):
  def test_softmax_single_list_hand_computed(self):
    # -log(e^2 / (e^1 + e^2 + e^3)) = log(1 + e^-1 + e^1) = 1.4076
    loss = losses.get("softmax")([[0.0, 1.0, 0.0]], [[1.0, 2.0, 3.0]])
    self.assertAllClose(loss, np.log(1.0 + np.exp(-1.0) + np.exp(1.0)), atol=1e-5)

  def test_softmax_matches_numpy(self):
    self.assertAllClose(
      losses.get("softmax")(_RELEVANCE, _SCORES), _np_softmax_ce(_RELEVANCE, _SCORES), atol=1e-5
    )

  def test_softmax_equals_sparse_categorical_crossentropy(self):
    sparse = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)(_TRUE, _SCORES)
    self.assertAllClose(losses.get("softmax")(_RELEVANCE, _SCORES), sparse, atol=1e-6)

  def test_pairwise_logistic_single_pair_hand_computed(self):
    # One pair (true 0 over 1): log(1 + e^{-(0.6 - 0.8)}) = 0.7981, averaged over 2 items = 0.3991.
    loss = losses.get("pairwise_logistic")([[1.0, 0.0]], [[0.6, 0.8]])
    self.assertAllClose(loss, np.log1p(np.exp(0.2)) / 2.0, atol=1e-5)

  def test_pairwise_logistic_matches_numpy(self):
    self.assertAllClose(
      losses.get("pairwise_logistic")(_RELEVANCE, _SCORES),
      _np_pairwise_logistic(_RELEVANCE, _SCORES),
      atol=1e-5,
    )

  def test_approx_ndcg_two_items_hand_computed(self):
    # approxrank(true) = 1 + sigmoid((0.8 - 0.6) / 0.1) = 1.8808; loss = -1 / log2(2.8808) = -0.6551.
    loss = losses.get("approx_ndcg")([[1.0, 0.0]], [[0.6, 0.8]])
    self.assertAllClose(loss, -1.0 / np.log2(2.0 + 1.0 / (1.0 + np.exp(-2.0))), atol=1e-5)

  def test_approx_ndcg_matches_numpy(self):
    self.assertAllClose(
      losses.get("approx_ndcg", temperature=0.5)(_RELEVANCE, _SCORES),
      _np_approx_ndcg(_RELEVANCE, _SCORES, 0.5),
      atol=1e-5,
    )

  def test_gumbel_approx_ndcg_matches_monte_carlo_numpy(self):
    # Gumbel-ApproxNDCG = E_g[ApproxNDCG(y, log_softmax((s + g) / tau_g))], g ~ Gumbel(0, 1).
    samples = 4000
    scores = _RELEVANCE.copy()  # The true class leads by 1: the Gumbel noise often reorders the list.
    loss = losses.get("gumbel_approx_ndcg", sample_size=samples, temperature=0.5, seed=1)(_RELEVANCE, scores)
    rng = np.random.default_rng(0)
    estimates = []
    for _ in range(samples):
      noisy = scores + rng.gumbel(size=scores.shape)
      log_p = noisy - np.log(np.sum(np.exp(noisy), axis=1, keepdims=True))
      estimates.append(_np_approx_ndcg(_RELEVANCE, log_p, 0.5))
    # Each side averages 4000 draws of a quantity in [-1, 0]: standard errors are below 0.008.
    self.assertAllClose(loss, np.mean(estimates), atol=0.03)
    # Noise-free ApproxNDCG is about 0.08 lower: the test tells the two apart.
    self.assertNotAllClose(loss, _np_approx_ndcg(_RELEVANCE, scores, 0.5), atol=0.05)

  def test_gumbel_approx_ndcg_is_reproducible_with_seed(self):
    a = losses.get("gumbel_approx_ndcg", seed=3)
    b = losses.get("gumbel_approx_ndcg", seed=3)
    tf.random.set_seed(0)
    first = a(_RELEVANCE, _SCORES)
    tf.random.set_seed(0)
    self.assertAllClose(first, b(_RELEVANCE, _SCORES))

  def test_mse_matches_numpy(self):
    self.assertAllClose(
      losses.get("mse")(_RELEVANCE, _SCORES), np.mean((_RELEVANCE - _SCORES) ** 2), atol=1e-5
    )


class RescaledMeanSquaredLossTest(tf.test.TestCase, parameterized.TestCase):
  def test_hand_computed(self):
    # (1/2) * [1^2 + 2 * (2 - 3)^2] = 1.5
    loss = losses.RescaledMeanSquaredLoss(weight_k=2.0, scale_m=3.0)([[0.0, 1.0]], [[1.0, 2.0]])
    self.assertAllClose(loss, 1.5)

  @parameterized.parameters((1.0, 1.0), (15.0, 30.0), (0.5, 2.0))
  def test_matches_hui_belkin_numpy(self, k, m):
    loss = losses.get("rescaled_mse", weight_k=k, scale_m=m)(_RELEVANCE, _SCORES)
    self.assertAllClose(loss, _np_rescaled_mse(_RELEVANCE, _SCORES, k, m), rtol=1e-5)

  def test_unit_k_and_m_is_tf_ranking_mse(self):
    self.assertAllClose(
      losses.get("rescaled_mse")(_RELEVANCE, _SCORES), losses.get("mse")(_RELEVANCE, _SCORES)
    )

  def test_per_instance_sample_weight(self):
    loss = losses.get("rescaled_mse", weight_k=2.0, scale_m=3.0)(
      _RELEVANCE, _SCORES, sample_weight=[1.0, 0.0]
    )
    per_list = _np_rescaled_mse(_RELEVANCE[:1], _SCORES[:1], 2.0, 3.0)
    self.assertAllClose(loss, per_list / 2.0, rtol=1e-5)  # Mean over the batch of 2, one weighted 0.

  @parameterized.parameters(({"weight_k": 0.0},), ({"scale_m": -1.0},), ({"ragged": True},))
  def test_bad_arguments_raise(self, kwargs):
    with self.assertRaises(ValueError):
      losses.RescaledMeanSquaredLoss(**kwargs)

  def test_serialization_round_trip(self):
    loss = losses.RescaledMeanSquaredLoss(weight_k=15.0, scale_m=30.0, name="rmse")
    clone = tf.keras.losses.deserialize(tf.keras.losses.serialize(loss))
    self.assertIsInstance(clone, losses.RescaledMeanSquaredLoss)
    self.assertEqual(clone.get_config(), loss.get_config())
    self.assertAllClose(clone(_RELEVANCE, _SCORES), loss(_RELEVANCE, _SCORES))


class FactoryTest(tf.test.TestCase, parameterized.TestCase):
  def test_unknown_name_lists_allowed(self):
    with self.assertRaisesRegex(ValueError, "softmax.*rescaled_mse"):
      losses.get("hinge")

  def test_unknown_name_raises_when_the_config_is_made(self):
    with self.assertRaisesRegex(ValueError,
                                r"`loss` must be one of \['softmax', .*'rescaled_mse'\], got 'hinge'"):
      losses.LossConfig(type="hinge")

  def test_bad_keyword_raises_value_error(self):
    with self.assertRaisesRegex(ValueError, "sample_size"):
      losses.get("softmax", sample_size=3)

  @parameterized.parameters(
    ("softmax", tfr.keras.losses.SoftmaxLoss),
    ("pairwise_logistic", tfr.keras.losses.PairwiseLogisticLoss),
    ("approx_ndcg", tfr.keras.losses.ApproxNDCGLoss),
    ("gumbel_approx_ndcg", tfr.keras.losses.GumbelApproxNDCGLoss),
    ("mse", tfr.keras.losses.MeanSquaredLoss),
    ("rescaled_mse", losses.RescaledMeanSquaredLoss),
  )
  def test_make_loss_builds_tf_ranking_class(self, name, cls):
    loss = losses.make_loss(losses.LossConfig(type=name))
    self.assertIsInstance(loss, cls)
    clone = tf.keras.losses.deserialize(tf.keras.losses.serialize(loss))
    self.assertIsInstance(clone, cls)

  def test_make_loss_passes_settings(self):
    config = losses.LossConfig(type="gumbel_approx_ndcg", temperature=0.3, sample_size=4, seed=7)
    settings = losses.make_loss(config).get_config()
    self.assertEqual((settings["temperature"], settings["sample_size"], settings["seed"]), (0.3, 4, 7))
    rescaled = losses.make_loss(losses.LossConfig(type="rescaled_mse", weight_k=15.0, scale_m=30.0))
    self.assertEqual((rescaled.get_config()["weight_k"], rescaled.get_config()["scale_m"]), (15.0, 30.0))

  def test_temperature_for_mse_raises(self):
    with self.assertRaisesRegex(ValueError, "temperature"):
      losses.make_loss(losses.LossConfig(type="mse", temperature=0.5))



class RescaledMseTargetsTest(tf.test.TestCase):
  def test_labels_and_weights(self):
    labels, weights = losses.rescaled_mse_targets(
      tf.constant([[0.0, 1.0, 0.0]]), weight_k=4.0, scale_m=5.0
    )
    self.assertAllClose(labels, [[0.0, 5.0, 0.0]])
    self.assertAllClose(weights, [[1.0, 4.0, 1.0]])

  def test_weighted_squared_error_matches_hui_belkin_formula(self):
    rng = np.random.default_rng(0)
    scores = rng.normal(size=[4, 6]).astype(np.float32)
    true = np.array([0, 5, 2, 2])
    relevance = np.eye(6, dtype=np.float32)[true]
    k, m = 3.0, 7.0
    labels, weights = losses.rescaled_mse_targets(relevance, k, m)
    ours = np.mean(np.asarray(weights) * (np.asarray(labels) - scores) ** 2)
    expected = np.mean(
      [
        (k * (scores[b, true[b]] - m) ** 2 + sum(scores[b, i] ** 2 for i in range(6) if i != true[b])) / 6
        for b in range(4)
      ]
    )
    self.assertAllClose(ours, expected, rtol=1e-6)


class TracedLossTest(tf.test.TestCase):

  def test_equals_the_loss_is_shared_per_configuration_and_runs_under_a_strategy(self):
    loss = losses.get("approx_ndcg", temperature=0.5)
    traced = losses.traced_loss(loss, 3)
    self.assertAllClose(traced(_RELEVANCE, _SCORES), _np_approx_ndcg(_RELEVANCE, _SCORES, 0.5), atol=1e-5)
    self.assertIs(losses.traced_loss(losses.get("approx_ndcg", temperature=0.5), 3), traced)  # Traced once.
    self.assertIsNot(losses.traced_loss(losses.get("approx_ndcg", temperature=1.0), 3), traced)
    with distribute.make_strategy("mirrored", ["/cpu:0"]).scope():  # Validation runs inside fit's strategy.
      self.assertAllClose(traced(_RELEVANCE, _SCORES), _np_approx_ndcg(_RELEVANCE, _SCORES, 0.5), atol=1e-5)


if __name__ == "__main__":
  tf.test.main()
