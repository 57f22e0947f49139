"""Tests for pairwise.margin.pairwise_train: distributed training through the engine, resumption, options,
export."""

import glob
import json
import os
import pathlib
import subprocess
import sys
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import pairwise  # noqa: F401  (registers the Keras objects for loading)
from pairwise.margin import aggregate, configs, evaluation, group_batching, margin_model
from pairwise.margin import pairwise_train as pt
from rank4class_data.ranking.grouped_items import GroupedItems
from rank4class_encoders import bert_conversion
from tests.pairwise import toy_items
from tests.rank4class_encoders import tiny_bert


class TrainTest(tf.test.TestCase, parameterized.TestCase):

  def test_distributed_text_training_beats_untrained(self):
    strategy = toy_items.two_replica_strategy()
    train_items, val_items, test_items = (toy_items.text_items(12, 10, s) for s in (0, 1, 2))
    model_dir = self.create_tempdir().full_path
    config = toy_items.config(model_dir,
                              configs.EncoderConfig(kind="hashed_bow", hashed_buckets=256, hashed_dim=16),
                     train_steps=60, learning_rate=1e-2, eval_every=30)
    tf.keras.utils.set_random_seed(0)  # The untrained baseline's weights, whatever ran before.
    untrained = pt.build_model(config.model, pt.make_encoder(config.encoder))
    before = evaluation.evaluate(untrained, test_items, config.eval)["pair_accuracy_raw"]
    result = pt.train(config, train_items, val_items, strategy)
    after = evaluation.evaluate(result.model, test_items, config.eval)["pair_accuracy_raw"]
    # Chance 0.5; a text's label word and its random word come from the same word sets, so even a trained
    # model leaves many pairs ambiguous: 0.79-0.85 over 5 seeds.
    self.assertGreater(after, 0.7)
    self.assertGreater(after, before + 0.15)
    self.assertEqual([h["step"] for h in result.history], [30, 60])
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
    items = toy_items.embedding_items(2, 4, seed=0)
    model = margin_model.PairwiseRanker(None, num_classes=0)
    z = tf.constant(items.features)
    model((z, z), training=False)
    eval_config = configs.PairwiseEvaluationConfig(aggregation="win_count")
    paths = pt.export(model, os.path.join(self.create_tempdir().full_path, "export"), eval_config,
                      items.features[0])
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
    items = toy_items.embedding_items(10, 8, seed=0)
    model_dir = self.create_tempdir().full_path
    config = toy_items.config(model_dir, train_steps=50, eval_every=10, checkpoint_every=10)
    # Its masks resume too (rank4class_engine.loop.resumable_dropout).
    self.assertEqual(config.model.dropout, 0.2)
    real_evaluate = evaluation.evaluate
    calls = []

    # The run dies in its second validation, before step 20's checkpoint.
    def evaluate_then_crash(*args, **kwargs):
      calls.append(1)
      if len(calls) == 2:
        raise KeyboardInterrupt
      return real_evaluate(*args, **kwargs)

    with (
      mock.patch.object(evaluation, "evaluate", side_effect=evaluate_then_crash),
      self.assertRaises(KeyboardInterrupt),
    ):
      pt.train(config, items, items)
    result = pt.train(config, items, items)
    # Resumed at step 10: step 20's validation runs again, and the history is the whole run's.
    self.assertEqual([h["step"] for h in result.history], [10, 20, 30, 40, 50])
    uninterrupted_config = toy_items.config(self.create_tempdir().full_path, train_steps=50, eval_every=10,
                                            checkpoint_every=10)
    uninterrupted_config.model = config.model
    uninterrupted = pt.train(uninterrupted_config, items, items)
    self.assertEqual(result.history, uninterrupted.history)
    for resumed, straight in zip(result.model.get_weights(), uninterrupted.model.get_weights(), strict=True):
      self.assertAllClose(resumed, straight, rtol=1e-6, atol=1e-6)

  @parameterized.named_parameters(
      ("per_pair_double_headed", dict(batching="pairs", pair_batch_size=32), dict(num_classes=3)),
      ("softmax_double_headed", {}, dict(objective="softmax", num_classes=3)),
      ("approx_ndcg", {}, dict(objective="approx_ndcg")),
      ("linear_head", dict(learning_rate=2e-2), dict(head="linear")))  # At 5e-3 one of 5 seeds was at 0.62.
  def test_options_beat_chance(self, train_kwargs, model_kwargs):
    # Single-device strategy: the 2-replica path is covered above; tracing it again per option costs minutes.
    items, test_items = toy_items.embedding_items(20, 8, seed=0, noise=0.3), toy_items.embedding_items(10, 8,
                                                                                                       seed=1,
                                                                                                       noise=0.3)
    config = toy_items.config(self.create_tempdir().full_path, train_steps=150,
                              checkpoint_every=150, **train_kwargs)
    config.model = configs.ModelConfig(**model_kwargs)
    result = pt.train(config, items)
    metrics = evaluation.evaluate(result.model, test_items, config.eval)
    baseline = evaluation.random_baseline(test_items, config.eval)
    self.assertGreater(metrics["pair_accuracy_raw"], 0.8)
    self.assertGreater(metrics["ndcg@5"], baseline["ndcg@5"])
    if model_kwargs.get("num_classes"):
      embeddings = tf.constant(test_items.features)
      predicted = np.argmax(result.model.classify(embeddings, training=False), axis=-1)
      majority = np.bincount(test_items.class_labels).max() / len(test_items)
      self.assertGreater(np.mean(predicted == test_items.class_labels), majority + 0.1)

  def test_class_label_beyond_num_classes_raises(self):
    items = toy_items.embedding_items(4, 5, seed=0)
    config = toy_items.config(self.create_tempdir().full_path)
    config.model = configs.ModelConfig(num_classes=2)
    with self.assertRaisesRegex(ValueError, "num_classes"):
      pt.train(config, items)

  def test_texts_with_precomputed_config_raise(self):
    config = toy_items.config(self.create_tempdir().full_path)
    with self.assertRaisesRegex(ValueError, "texts"):
      pt.train(config, toy_items.text_items(2, 4, 0))


  def test_a_rerun_may_change_the_preemption_grace(self):
    model_dir = self.create_tempdir().full_path
    with open(os.path.join(model_dir, "config.json"), "w") as f:
      json.dump(toy_items.config(model_dir).to_dict(), f)
    with open(os.path.join(model_dir, pt.METRICS_FILE), "w") as f:
      json.dump({"best_step": 30}, f)
    # The finished run's metrics come back: no "another config" error, and nothing is loaded or trained.
    self.assertEqual(pt.run_experiment(toy_items.config(model_dir, preemption_grace_seconds=60.0)),
                     {"best_step": 30})


class FreshProcessTest(tf.test.TestCase):

  def test_a_text_encoder_export_loads_and_scores_after_import_pairwise_alone(self):
    # `import pairwise` alone must register the text encoder (`rank4class>TextEncoder`, in
    # rank4class_encoders) and TF Text's ops for the BERT preprocessing inside the export; no `import
    # rank4class`.
    handles = tiny_bert.tiny_handles()
    encoder = configs.EncoderConfig(kind="text_encoder", preprocess_handle=handles.preprocess,
                                    encoder_handle=handles.encoder, max_seq_length=8)
    tf.keras.utils.set_random_seed(0)
    model = pt.build_model(configs.ModelConfig(), pt.make_encoder(encoder))
    left, right = ["the cat sat on a mat", "a dog ran"], ["the dogs is sad", "cat ran !"]
    expected = model((tf.constant(left), tf.constant(right)), training=False).numpy()
    paths = pt.export(model, os.path.join(self.create_tempdir().full_path, "export"),
                      configs.PairwiseEvaluationConfig(), "the cat")
    script = ("import json, sys\n"
              "import pairwise\n"
              "import tensorflow as tf\n"
              "scorer = tf.keras.models.load_model(sys.argv[1], compile=False)\n"
              "left, right = json.loads(sys.argv[2])\n"
              "scores = scorer((tf.constant(left), tf.constant(right)), training=False).numpy().tolist()\n"
              "print(json.dumps({'scores': scores, 'rank4class': 'rank4class' in sys.modules}))\n")
    # A user's process: the stack check, not this test process, sets TF_USE_LEGACY_KERAS.
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    result = subprocess.run([sys.executable, "-c", script, paths["pair_scorer"], json.dumps([left, right])],
                            capture_output=True, text=True, timeout=300, check=False, env=env,
                            cwd=pathlib.Path(__file__).resolve().parents[3])
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    out = json.loads(result.stdout.strip().splitlines()[-1])
    self.assertFalse(out["rank4class"])
    self.assertAllClose(out["scores"], expected, atol=1e-5)
    self.assertEqual(np.shape(out["scores"]), (2, 2))


class FineTuningTest(tf.test.TestCase):

  def test_random_bert_encoder_fine_tuned_under_two_replicas(self):
    vocab = (
      ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + toy_items.GOOD + toy_items.MID + toy_items.BAD + toy_items.FILLER
    )
    handles = bert_conversion.export_random_bert(self.create_tempdir().full_path, vocab, hidden_size=16,
                                                 num_layers=1, num_heads=2, intermediate_size=32)
    text_config = dict(preprocess_handle=handles.preprocess, encoder_handle=handles.encoder, max_seq_length=8)
    items = toy_items.text_items(4, 6, 0)
    # TF Hub layers must be built in replica context.
    config = toy_items.config(self.create_tempdir().full_path,
                              configs.EncoderConfig(**text_config, trainable=True),
                              train_steps=3, list_size=6, lists_per_batch=2)
    result = pt.train(config, items, None, toy_items.two_replica_strategy())
    metrics = evaluation.evaluate(result.model, items, config.eval)
    self.assertBetween(metrics["pair_accuracy_raw"], 0.0, 1.0)
    self.assertNotEmpty(result.model.encoder.trainable_weights)


class _LinearPairScorer(tf.keras.Model):
  """f(x) = w · x for the left and right items ([batch_size, 2] pair scores), w starting at ones, with the L2
  penalty `l2 * |w|^2` as its regularisation loss (none for `l2` None)."""

  def __init__(self, l2: float | None):
    super().__init__()
    self.score = tf.keras.layers.Dense(1, use_bias=False, kernel_initializer="ones",
                                       kernel_regularizer=tf.keras.regularizers.L2(l2) if l2 else None)

  def call(self, inputs, training=None):
    left, right = inputs
    return tf.concat([self.score(left), self.score(right)], axis=1)


class TrainingModelTest(tf.test.TestCase):
  """The compiled `TrainingModel`: the paper's AdamW from the engine's optimizer factory, and a step whose
  applied loss holds the ranker's regularisation."""

  def test_optimizer_is_the_papers_adamw_without_decay_on_biases_norms_and_prelu_slopes(self):
    items = toy_items.embedding_items(2, 4, seed=0)
    config = toy_items.config(self.create_tempdir().full_path, learning_rate=0.1, weight_decay=0.5)
    ranker, model = pt.training_model(config, items, tf.distribute.get_strategy())
    optimizer = model.optimizer
    self.assertIs(type(optimizer), tf.keras.optimizers.AdamW)
    settings = optimizer.get_config()
    self.assertAllClose([settings[k] for k in ("learning_rate", "weight_decay", "beta_1", "beta_2", "epsilon",
                                               "global_clipnorm")], [0.1, 0.5, 0.9, 0.999, 1e-8, 1.0])
    self.assertIsNone(settings["clipnorm"])
    self.assertFalse(optimizer.jit_compile)
    # One step of zero gradients: only weight decay moves a variable, by the factor 1 - 0.1 * 0.5 = 0.95.
    before = {v.name: v.numpy() for v in ranker.trainable_variables}
    optimizer.apply_gradients([(tf.zeros_like(v), v) for v in ranker.trainable_variables])
    decayed = sorted(v.name.split("/", 2)[-1] for v in ranker.trainable_variables
                     if not np.allclose(v.numpy(), before[v.name]))
    self.assertEqual(decayed,
                     ["block_1/linear/kernel:0", "block_2/linear/kernel:0", "block_3/linear/kernel:0",
                               "left_output/kernel:0", "right_output/kernel:0"])
    for v in ranker.trainable_variables:
      self.assertAllClose(v.numpy(), before[v.name] * (0.95 if "kernel" in v.name else 1.0))

  def test_a_step_applies_the_rankers_regularisation_and_logs_it(self):
    # Items x0 = [1, 0] (label 1) and x1 = [0, 1] (label 0); one pair (x0, x1) with E = +1; w = [1, 1].
    # Scores 1 and 1: margin loss max(0, -(1 - 1) + 2) = 2, its gradient -(x0 - x1) = [-1, 1]. The L2 penalty
    # 0.25 * |w|^2 = 0.5 adds 2 * 0.25 * w = [0.5, 0.5]. SGD at 0.1: w -> [1, 1] - 0.1 * [-0.5, 1.5] = [1.05,
    # 0.85] (without the penalty [1.1, 0.9]).
    items = GroupedItems(np.eye(2, dtype=np.float32), np.array([1.0, 0.0]), np.zeros(2, np.int64))
    batch = {"left": tf.constant([0]), "right": tf.constant([1]), "pair_labels": tf.constant([1.0])}
    train_config = configs.PairwiseTrainConfig(batching="pairs", pair_batch_size=1)
    weights, logs = [], []
    for l2 in (0.25, None):
      ranker = _LinearPairScorer(l2)
      ranker((tf.zeros([1, 2]), tf.zeros([1, 2])))
      model = pt.TrainingModel(ranker, group_batching.ItemTable.from_items(items),
                               configs.ModelConfig(margin=2.0), train_config)
      model.compile(optimizer=tf.keras.optimizers.SGD(0.1))
      logs.append({k: v[-1] for k, v in model.fit(tf.data.Dataset.from_tensors(batch),
                                                  verbose=0).history.items()})
      weights.append(ranker.score.kernel.numpy().reshape([-1]))
    self.assertAllClose(weights[0], [1.05, 0.85])
    self.assertAllClose(weights[1], [1.1, 0.9])
    self.assertAllClose([logs[0][k] for k in ("loss", "regularization_loss", "pair_accuracy", "pairs")],
                        [2.0, 0.5, 0.0, 1.0])  # The loss logged is the ranking loss; a tie is a wrong pair.
    self.assertNotIn("regularization_loss", logs[1])  # A ranker without regularisation logs none.


if __name__ == "__main__":
  tf.test.main()
