"""Tests for rank4class.training.linear_path: the folds, the path trained by the engine against scikit-learn's
optimum, one and two replicas, two workers."""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf
from sklearn import linear_model

from rank4class.training import linear_path
from rank4class_engine import distribute
from tests.rank4class.training import multi_worker_path
from tests.rank4class_engine.multi_worker_fit import _free_ports


def _blobs(rows_per_class: int, seed: int, spread: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(seed)
  labels = np.repeat(np.arange(3), rows_per_class)
  return (np.eye(3)[labels] * 2 + rng.normal(0, spread, (len(labels), 3))).astype(np.float32), labels


def _objective(x: np.ndarray, y: np.ndarray, weights: np.ndarray, bias: np.ndarray, c: float = 1.0) -> float:
  """scikit-learn's, over the rows: mean log-loss + ||W||^2 / (2 C n)."""
  scores = x @ weights.T + bias
  scores -= scores.max(axis=1, keepdims=True)
  log_p = scores - np.log(np.sum(np.exp(scores), axis=1, keepdims=True))
  return -np.mean(log_p[np.arange(len(y)), y]) + np.sum(np.square(weights)) / (2.0 * c * len(y))


class StratifiedFoldsTest(tf.test.TestCase):

  def test_each_class_is_dealt_round_the_folds(self):
    labels = np.array([0] * 7 + [1] * 3)
    fold = linear_path.stratified_folds(labels, 3, seed=0)
    self.assertAllEqual(np.bincount(fold[labels == 0], minlength=3), [3, 2, 2])
    self.assertAllEqual(np.sort(np.bincount(fold[labels == 1], minlength=3)), [1, 1, 1])
    self.assertAllEqual(fold, linear_path.stratified_folds(labels, 3, seed=0))


class PriorPathTest(tf.test.TestCase):
  """The path with a prior classifier P beside its heads."""

  def test_the_chosen_heads_weights_hold_the_prior(self):
    x, y = _blobs(20, 0)
    prior = np.eye(3, dtype=np.float32) * 5
    inputs = linear_path.PathInputs({linear_path.DENSE_KEY: x}, y, {linear_path.DENSE_KEY: x}, y, 3,
                                    prior=prior)
    # C = 1e-6: W stays ~0, so the chosen head's weights are p P^T and its logits those of the prior.
    path = linear_path.fit_path(inputs, [linear_path.Head(1e-6, 1.0, 1.0)], linear_path.PathConfig(),
                                os.path.join(tempfile.mkdtemp(), "path"))
    self.assertAllClose(path.weights, prior.T, atol=1e-3)


class FitPathTest(tf.test.TestCase):

  def _inputs(self, spread: float = 1.0) -> linear_path.PathInputs:
    x, y = _blobs(40, 0, spread)
    validation_x, validation_y = _blobs(20, 1, spread)
    return linear_path.PathInputs({linear_path.DENSE_KEY: x}, y, {linear_path.DENSE_KEY: validation_x},
                                  validation_y, 3)

  def test_each_head_reaches_scikit_learns_optimum_and_the_choice_is_recorded(self):
    inputs = self._inputs()
    run_dir = self.create_tempdir().full_path + "/path"
    path = linear_path.fit_path(inputs, linear_path.dense_heads((0.01, 1.0)),
                                linear_path.PathConfig(epochs=150, batch_size=40, learning_rate=0.05,
                                                       full_batch_rows=0),
                                run_dir)
    reference = linear_model.LogisticRegression(C=path.head.inverse_regularization, tol=1e-8).fit(
        inputs.train[linear_path.DENSE_KEY], inputs.train_labels)
    x = inputs.validation[linear_path.DENSE_KEY]
    scores = x @ path.weights.T + path.bias
    probabilities = np.exp(scores - scores.max(1, keepdims=True))
    probabilities /= probabilities.sum(1, keepdims=True)
    self.assertAllClose(probabilities, reference.predict_proba(x), atol=0.02)
    fit = path.fit
    self.assertTrue(fit["converged"], fit)
    self.assertEqual(fit["steps"], 150 * 120 // 40)
    self.assertLen(fit["path"], 2)
    # The blobs overlap little: the weaker penalty has the lower validation log-loss, beyond the noise.
    self.assertEqual(path.head.inverse_regularization, 1.0)
    self.assertLess(fit["path"][1]["log_loss"], fit["path"][0]["log_loss"])
    self.assertFalse(tf.io.gfile.exists(run_dir))  # The engine's scratch is removed.

  def test_a_dense_path_of_few_rows_takes_them_all_in_each_step_to_scikit_learns_objective(self):
    inputs = self._inputs(spread=2.0)
    path = linear_path.fit_path(inputs, linear_path.dense_heads((1.0,)),
                                linear_path.PathConfig(cross_validate_below=1),
                                self.create_tempdir().full_path + "/path")
    self.assertEqual((path.fit["batch_size"], path.fit["steps"], path.fit["steps_tried"]), (120, 150, [150]))
    x, y = inputs.train[linear_path.DENSE_KEY], inputs.train_labels
    reference = linear_model.LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(x, y)
    optimum = _objective(x, y, reference.coef_, reference.intercept_)
    self.assertBetween(_objective(x, y, path.weights, path.bias), optimum - 1e-6, optimum * 1.001)

  def test_a_dense_path_of_many_rows_takes_large_batches_to_scikit_learns_objective(self):
    # 2,000 rows of 192 dimensions in 30 overlapping classes: 100 epochs of 128-row batches (1,000 steps)
    # ended 0.35 % above the optimum; 391 steps of 1,024 rows end within 0.01 %.
    rng = np.random.default_rng(0)
    means = rng.normal(0.0, 0.3, (30, 192))
    y = rng.integers(0, 30, 2000)
    x = (means[y] + rng.normal(0.0, 1.0, (2000, 192))).astype(np.float32)
    inputs = linear_path.PathInputs({linear_path.DENSE_KEY: x}, y, {linear_path.DENSE_KEY: x[:100]}, y[:100],
                                    30)
    path = linear_path.fit_path(inputs, linear_path.dense_heads((1.0,)),
                                linear_path.PathConfig(cross_validate_below=1),
                                self.create_tempdir().full_path + "/path")
    self.assertEqual((path.fit["batch_size"], path.fit["steps"]), (1024, 391))
    reference = linear_model.LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(x, y)
    optimum = _objective(x, y, reference.coef_, reference.intercept_)
    reached = _objective(x, y, path.weights, path.bias)
    self.assertBetween(reached, optimum - 1e-6, optimum * 1.001)
    # Its certificate: the recorded objective, and a duality gap above its distance to the optimum, within
    # 5 %.
    self.assertAllClose(path.fit["objective"], reached, rtol=1e-5)
    self.assertBetween(path.fit["duality_gap"], (reached - optimum) / reached, 0.05)
    self.assertTrue(path.fit["certified"])

  def test_the_steps_and_batches_of_each_kind_of_path(self):
    config = linear_path.PathConfig()
    # (batch size, steps): dense, at most 1,024 rows: all of them (an even count on two replicas), 150 steps.
    self.assertEqual(linear_path._train_steps(119, 100, config, 1, dense=True), (119, 150))
    self.assertEqual(linear_path._train_steps(119, 100, config, 2, dense=True), (118, 150))
    # More rows: 200 epochs of 1,024, at most 1,000 steps; TF-IDF: its 10 epochs of 128.
    self.assertEqual(linear_path._train_steps(1100, 200, config, 1, dense=True), (1024, 215))
    self.assertEqual(linear_path._train_steps(1100, 200, config, 2, dense=True), (1024, 215))
    self.assertEqual(linear_path._train_steps(50_000, 200, config, 1, dense=True), (1024, 1000))
    self.assertEqual(linear_path._train_steps(500, 10, config, 1, dense=False), (128, 40))
    self.assertEqual(linear_path._train_steps(500, 10, config, 2, dense=False), (128, 40))

  def test_a_small_validation_split_chooses_by_cross_validation_on_the_training_rows(self):
    inputs = self._inputs(spread=2.0)  # 60 validation rows: below 300.
    heads = linear_path.dense_heads((0.001, 1.0))
    path = linear_path.fit_path(inputs, heads, linear_path.PathConfig(full_batch_steps=30),
                                self.create_tempdir().full_path + "/path")
    self.assertEqual(path.fit["chosen_by"], "5-fold cross-validation")
    self.assertEqual((path.fit["choice_rows"], path.fit["validation_rows"]), (120, 60))
    # Its out-of-fold scores: each training row under the chosen head of its fold's group, whose mean
    # log-loss is the one that chose it.
    scores = path.out_of_fold_scores
    self.assertEqual(scores.shape, (120, 3))
    log_p = scores - np.log(np.sum(np.exp(scores), axis=1, keepdims=True))
    self.assertAllClose(-np.mean(log_p[np.arange(120), inputs.train_labels]), path.fit["choice_log_loss"],
                        atol=1e-5)
    many = linear_path.fit_path(inputs, heads, linear_path.PathConfig(full_batch_steps=30,
                                                                      cross_validate_below=60),
                                self.create_tempdir().full_path + "/path")
    self.assertEqual(many.fit["chosen_by"], "validation log-loss")
    self.assertEqual(many.fit["choice_rows"], 60)
    self.assertIsNone(many.out_of_fold_scores)
    # C = 0.001 leaves the blobs' three classes near chance: both rules see it.
    self.assertEqual((path.head.inverse_regularization, many.head.inverse_regularization), (1.0, 1.0))

  def test_a_path_that_stops_short_trains_once_more_and_says_if_it_still_has_not_converged(self):
    inputs = self._inputs()
    heads = linear_path.dense_heads((1.0,))
    # 2 steps of all 120 rows, far from the optimum; then 200.
    path = linear_path.fit_path(inputs, heads, linear_path.PathConfig(full_batch_steps=2),
                                self.create_tempdir().full_path + "/path")
    self.assertEqual(path.fit["steps_tried"], [2, 200])
    self.assertEqual(path.fit["steps"], 200)
    self.assertTrue(path.fit["converged"], path.fit)
    # At the most steps it stops and says so.
    short = linear_path.fit_path(inputs, heads, linear_path.PathConfig(full_batch_steps=1, max_steps=3,
                                                                       learning_rate=1e-4),
                                 self.create_tempdir().full_path + "/path")
    self.assertEqual(short.fit["steps_tried"], [1, 3])
    self.assertFalse(short.fit["converged"])
    self.assertGreater(short.fit["gradient_ratio"], 0.5)
    self.assertFalse(short.fit["certified"])
    self.assertGreater(short.fit["duality_gap"], 0.5)
    self.assertTrue(path.fit["certified"], path.fit)
    # A gradient above the tolerance, and a duality gap that certifies the head: converged, not retried.
    certified = linear_path.fit_path(inputs, heads, linear_path.PathConfig(tolerance=1e-9),
                                     self.create_tempdir().full_path + "/path")
    self.assertEqual(certified.fit["steps_tried"], [150])
    self.assertGreater(certified.fit["gradient_ratio"], 1e-9)
    self.assertTrue(certified.fit["certified"] and certified.fit["converged"], certified.fit)

  def test_the_choice_lines_note_on_an_optimizer_that_stopped_short(self):
    fit = {"converged": True, "gradient_ratio": 0.01, "duality_gap": 0.004, "certified": True, "epochs": 10.0}
    self.assertEqual(linear_path.convergence_note(fit), "")
    fit.update(duality_gap=0.139, certified=False)
    self.assertEqual(linear_path.convergence_note(fit),
                     "; the optimum up to 14 % below its objective (duality gap)")
    fit.update(converged=False, gradient_ratio=0.63)
    self.assertEqual(linear_path.convergence_note(fit),
                     "; its optimizer NOT CONVERGED in 10.0 epochs: gradient at 0.63 of its start, the "
                     "optimum up to 14 % below its objective (duality gap)")
    # A record from before the certificate: the gradient alone.
    self.assertEqual(linear_path.convergence_note({"converged": False, "gradient_ratio": 0.63}),
                     "; its optimizer NOT CONVERGED: gradient at 0.63 of its start")

  def test_two_replicas_choose_the_same_head_with_the_same_weights(self):
    inputs = self._inputs(spread=2.0)
    heads = linear_path.dense_heads((0.01, 0.1, 1.0))
    # Shuffled mini-batches, and the default's steps of all 120 rows (60 a replica).
    mini_batches = linear_path.PathConfig(epochs=20, batch_size=40, full_batch_rows=0)
    for config in (mini_batches, linear_path.PathConfig()):
      # The process's one strategy per device list (`distribute.make_strategy`): a second MirroredStrategy
      # over the same devices would share its collective instance keys.
      one = linear_path.fit_path(inputs, heads, config, self.create_tempdir().full_path + "/one",
                                 distribute.make_strategy("mirrored", ["/cpu:0"]))
      two = linear_path.fit_path(inputs, heads, config, self.create_tempdir().full_path + "/two",
                                 distribute.make_strategy("mirrored", ["/cpu:0", "/cpu:1"]))
      self.assertEqual(one.head, two.head)
      self.assertEqual(one.fit["batch_size"], 40 if config.full_batch_rows == 0 else 120)
      self.assertAllClose(one.weights, two.weights, atol=1e-4)


class SparseReplicasTest(tf.test.TestCase):

  def test_a_tfidf_path_trains_under_two_replicas_and_chooses_the_head_one_device_chooses(self):
    # TF-IDF rows of different n-gram counts: one replica's batch touches other rows than the other's, so the
    # kernel's gradient is dense under two replicas (an all-reduce needs one shape on both).
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 60)
    dense = np.zeros([180, 30], np.float32)
    for row, label in enumerate(labels):
      count = rng.integers(2, 6)  # 10 n-grams per class, 2-5 a row.
      words = rng.choice(10, count, replace=False) + 10 * label
      dense[row, words] = 1 / np.sqrt(count)
    tfidf = tf.sparse.from_dense(tf.constant(dense))
    validation = tf.sparse.from_dense(tf.constant(dense[::3]))
    inputs = linear_path.PathInputs(
        {linear_path.TFIDF_KEY: tfidf, linear_path.DENSE_KEY: rng.normal(size=(180, 4)).astype(np.float32)},
        labels, {linear_path.TFIDF_KEY: validation,
                 linear_path.DENSE_KEY: rng.normal(size=(60, 4)).astype(np.float32)}, labels[::3], 3)
    heads = linear_path.hybrid_heads((0.01, 10.0), (1.0,), 4)
    config = linear_path.PathConfig(tfidf_epochs=10, tfidf_batch_size=40, cross_validate_below=1)
    one = linear_path.fit_path(inputs, heads, config, self.create_tempdir().full_path + "/one",
                               distribute.make_strategy("mirrored", ["/cpu:0"]))
    two = linear_path.fit_path(inputs, heads, config, self.create_tempdir().full_path + "/two",
                               distribute.make_strategy("mirrored", ["/cpu:0", "/cpu:1"]))
    self.assertEqual(one.head, two.head)
    self.assertEqual(one.head.inverse_regularization, 10.0)
    # Each one's duality gap bounds its distance above scikit-learn's optimum on [t ; a e] (sparse and dense
    # updates alike).
    a = one.head.dense_weight
    x = np.hstack([dense, a * inputs.train[linear_path.DENSE_KEY]])
    reference = linear_model.LogisticRegression(C=10.0, tol=1e-10, max_iter=10_000).fit(x, labels)
    optimum = _objective(x, labels, reference.coef_, reference.intercept_, 10.0)
    for path in (one, two):
      weights = np.hstack([path.weights[:, :30], path.weights[:, 30:] / a])
      reached = _objective(x, labels, weights, path.bias, 10.0)
      self.assertAllClose(path.fit["objective"], reached, rtol=1e-5)
      self.assertGreater(reached, optimum + 1e-4)
      self.assertGreaterEqual(path.fit["duality_gap"], (reached - optimum) / reached)
    scores = tf.sparse.sparse_dense_matmul(validation, two.weights[:, :30].T.astype(np.float32)).numpy()
    self.assertEqual(np.mean(np.argmax(scores, axis=1) == labels[::3]), 1.0)


class MultiWorkerPathTest(tf.test.TestCase):
  """Two worker processes on 127.0.0.1 train the path under MultiWorkerMirroredStrategy, each on its shard."""

  def _run(self, result: str, tf_config: dict) -> subprocess.Popen:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=root)
    env["TF_CONFIG"] = json.dumps(tf_config)
    return subprocess.Popen([sys.executable, "-m", "tests.rank4class.training.multi_worker_path",
                             os.path.join(os.path.dirname(result), "run"), result], env=env, cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

  def test_two_workers_choose_the_head_one_device_chooses(self):
    folder = tempfile.mkdtemp(dir=self.create_tempdir().full_path)
    ports = _free_ports(2)
    workers = [self._run(os.path.join(folder, f"worker_{i}.npz"),
                         {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                          "task": {"type": "worker", "index": i}}) for i in range(2)]
    # The one-device run of the same path, in this process (the default strategy) while the workers run.
    one = linear_path.fit_path(multi_worker_path.path_inputs(),
                               linear_path.dense_heads(multi_worker_path.HEADS), multi_worker_path.CONFIG,
                               os.path.join(folder, "alone"), tf.distribute.get_strategy())
    outputs = [p.communicate(timeout=600)[0] for p in workers]
    self.assertEqual([p.returncode for p in workers], [0, 0], msg="\n---\n".join(outputs))
    chief, other = (np.load(os.path.join(folder, f"worker_{i}.npz")) for i in range(2))
    # Short of convergence at 6 steps, every worker trained once more, as one device did.
    self.assertEqual(one.fit["steps_tried"], [6, 200])
    self.assertEqual([list(chief["steps_tried"]), list(other["steps_tried"])], [[6, 200]] * 2)
    self.assertEqual(float(chief["c"]), one.head.inverse_regularization)
    self.assertAllClose(chief["weights"], other["weights"])  # One model, the same on both workers.
    # Each worker reads its own half of every global batch: other batches than one device's, the same optimum
    # to within the noise of the steps.
    self.assertAllClose(chief["weights"], one.weights, atol=0.1)


if __name__ == "__main__":
  tf.test.main()
