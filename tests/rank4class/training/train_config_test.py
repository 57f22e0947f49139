"""Tests for rank4class.training.train_config: the run's config (checks, JSON, config.json of older runs and
their comparison), the run's length, the metric names, and the optimizer defaults of the text modes."""

import ast
import dataclasses
import json
import os
import pathlib
import warnings

import tensorflow as tf
from absl.testing import parameterized

from rank4class.evaluation import metrics
from rank4class.modeling import encoders, interactions
from rank4class.training import train, train_config, training_data
from rank4class_engine.optimization import learning_rates, optimizers
from rank4class_engine.runs import configs, run_directory
from tests.rank4class.digits_config import digits_config


def _flat(config_dict: dict) -> dict:
  """A config.json dict in the flat form of 0.8 and earlier: the run's and outputs' fields beside the
  parts."""
  flat = {k: v for k, v in config_dict.items() if k not in ("run", "outputs")}
  return {**flat, **config_dict["run"], **config_dict["outputs"]}


class TrainConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_config_round_trips_through_json(self):
    config = digits_config("/tmp/x", optimizer=optimizers.OptimizerConfig(type="adamw", learning_rate=0.5))
    restored = configs.from_dict(train_config.Rank4ClassTrainConfig,
                                 json.loads(json.dumps(configs.to_dict(config))))
    self.assertEqual(restored, config)
    self.assertIsInstance(restored.model.interaction, interactions.InteractionConfig)
    self.assertIsInstance(restored.optimizer, optimizers.OptimizerConfig)

  def test_validation_loss_choices_are_checked(self):
    with self.assertRaisesRegex(ValueError,
                                r"`validation_loss` must be one of \['auto', 'on', 'off'\], got 'sometimes'"):
      digits_config("/m", validation_loss="sometimes")
    with self.assertRaisesRegex(ValueError, "best_metric='loss' needs the validation loss"):
      digits_config("/m", validation_loss="off", best_metric="loss")

  def test_unknown_config_key_raises(self):
    as_json = configs.to_dict(digits_config("/m"))
    as_json["optimizer"]["colour"] = "red"
    with self.assertRaisesRegex(ValueError,
                                r"Rank4ClassTrainConfig.optimizer: OptimizerConfig has no "
                                r"field\(s\) \['colour'\]"):
      configs.from_dict(train_config.Rank4ClassTrainConfig, as_json)

  @parameterized.named_parameters(
      ("optimizer", lambda c: dataclasses.replace(c, optimizer=optimizers.OptimizerConfig(type="sgd")),
       "`type` must be one of .*'adam', 'adagrad', 'adamw'.*, got 'sgd'"),
      ("spe", lambda c: dataclasses.replace(c, steps_per_execution=7), "steps_per_execution"),
      ("best_metric", lambda c: dataclasses.replace(c, best_metric="f1"),
       r"`best_metric` must be one of \['loss', .*'ndcg_5'.*\], got 'f1'"),
      ("strategy", lambda c: dataclasses.replace(c, strategy="tpu"),
       r"`strategy` must be one of \['auto', 'mirrored', 'multi_worker', 'one_device'\], got 'tpu'"),
      ("batch_size", lambda c: dataclasses.replace(c, batch_size=0),
       "`batch_size` must be an integer >= 1, got 0"),
      ("train_steps", lambda c: dataclasses.replace(c, train_steps=0),
       "`train_steps` must be an integer >= 1, got 0"),
      ("epochs", lambda c: dataclasses.replace(c, train_steps=None, epochs=0.0),
       "`epochs` must be > 0, got 0.0"),
      ("eval_every", lambda c: dataclasses.replace(c, eval_every=0),
       "`eval_every` must be an integer >= 1, got 0"),
      ("preemption_grace_seconds", lambda c: dataclasses.replace(c, preemption_grace_seconds=-1.0),
       "`preemption_grace_seconds` must be >= 0, got -1.0"),
      ("instance_encoder", lambda c: dataclasses.replace(c, model=dataclasses.replace(
          c.model, instance_encoder=encoders.InstanceEncoderConfig(type="cnn"))),
       r"`instance_encoder` must be one of \['auto', 'mlp', .*\], got 'cnn'"),
  )
  def test_bad_train_config_raises(self, change, message):
    with self.assertRaisesRegex(ValueError, message):
      change(digits_config("/tmp/x"))

  def test_class_texts_with_another_class_encoder_raises(self):
    with self.assertRaisesRegex(ValueError,
                                r"data.class_texts \(t.csv\) is read by the metadata class encoder only; "
                                "the class encoder is 'one_hot'"):
      digits_config("/x", data=training_data.DataConfig(dataset="digits", class_texts="t.csv"))

  def test_training_steps_are_the_asked_steps(self):
    self.assertEqual(digits_config("/x", train_steps=50).total_steps(None), 50)
    # 2 epochs of 100 rows at batch 64 = 3.1 -> 4 steps.
    self.assertEqual(digits_config("/x", train_steps=None, epochs=2.0).total_steps(100), 4)
    # Neither given, patience off: 3 epochs at batch 64, clipped to [1000, 20000].
    fixed = digits_config("/x", train_steps=None, patience=0)
    self.assertFalse(fixed.chooses_length)
    self.assertEqual([fixed.total_steps(n) for n in (100, 54_000, 64_000, 10**6)], [1000, 2532, 3000, 20000])
    self.assertEqual([fixed.min_steps(n) for n in (100, 54_000)], [1000, 2532])
    # Neither given (patience 3 by default): that length at least, 3 times it at most (and 20,000).
    chosen = digits_config("/x", train_steps=None)
    self.assertTrue(chosen.chooses_length)
    self.assertEqual([chosen.min_steps(n) for n in (100, 54_000, 64_000, 10**6)], [1000, 2532, 3000, 20000])
    self.assertEqual([chosen.total_steps(n) for n in (100, 54_000, 64_000, 10**6)], [3000, 7596, 9000, 20000])
    # Given steps or epochs, or a decaying learning rate, are trained exactly.
    self.assertFalse(digits_config("/x", train_steps=50).chooses_length)
    self.assertFalse(digits_config("/x", train_steps=None, epochs=2.0).chooses_length)
    decaying = digits_config("/x", train_steps=None, optimizer=train.FINETUNE_OPTIMIZER)
    self.assertEqual((decaying.chooses_length, decaying.total_steps(100)), (False, 1000))


class ConfigFileTest(tf.test.TestCase):

  def test_run_dir_written_before_the_engine_is_accepted(self):
    # config.json of older runs: steps_per_execution 1 (now 0, automatic), no `precision` field, no row
    # settings, input_format "example" (now "auto"), an optimizer without betas, epsilon, global clipping and
    # exclusions from weight decay.
    config = digits_config(self.create_tempdir().full_path)
    old = {k: v for k, v in _flat(configs.to_dict(config)).items() if k != "precision"}
    old["steps_per_execution"] = 1
    old["data"] = {k: v for k, v in old["data"].items() if k not in ("rows", "row_cache_dir")}
    old["data"]["input_format"] = "example"
    old["optimizer"] = {k: old["optimizer"][k] for k in ("type", "learning_rate", "weight_decay", "clipnorm",
                                                           "schedule", "warmup_fraction")}
    with open(os.path.join(config.model_dir, train_config.CONFIG_FILE), "w") as f:
      json.dump(old, f)
    self.assertEqual(train_config.load_config(config.model_dir), dataclasses.replace(
        config, steps_per_execution=1, data=dataclasses.replace(config.data, input_format="example")))
    os.makedirs(os.path.join(config.model_dir, train_config.BACKUP_DIR))  # The old run made progress.

    def open_run(config_dict):
      return run_directory.RunDirectory(config.model_dir, configs.to_dict(config), train_config.RESULT_FILE,
                                        restart_free=train_config.RESTART_FREE_FIELDS,
                                        normalize=train_config.comparable_config)

    with open_run(old) as run:  # No "another config" error; not finished.
      self.assertEqual((run.resumed, run.finished), (True, None))
    with open(os.path.join(config.model_dir, train_config.CONFIG_FILE), "w") as f:
      json.dump({**old, "batch_size": 7}, f)
    with self.assertRaisesRegex(run_directory.ConfigMismatchError,
                                r"another config \(run.batch_size: 7 -> 64\)"):
      open_run(old).open()


  def test_a_rerun_may_change_the_preemption_grace(self):
    config = digits_config(self.create_tempdir().full_path)
    with open(os.path.join(config.model_dir, train_config.CONFIG_FILE), "w") as f:
      json.dump(configs.to_dict(config), f)
    os.makedirs(os.path.join(config.model_dir, train_config.BACKUP_DIR))  # The first run made progress.
    rerun = dataclasses.replace(config, preemption_grace_seconds=60.0)
    with run_directory.RunDirectory(config.model_dir, configs.to_dict(rerun), train_config.RESULT_FILE,
                                    restart_free=train_config.RESTART_FREE_FIELDS,
                                    normalize=train_config.comparable_config) as run:
      self.assertEqual((run.resumed, run.finished), (True, None))


class MetricNamesTest(tf.test.TestCase, parameterized.TestCase):

  def test_metric_names_match_the_metrics_module(self):
    self.assertEqual(train_config.metric_names((1, 5)), [m.name for m in metrics.get_default_metrics((1, 5))])

  @parameterized.parameters(("loss", "min"), ("top_1_error", "min"), ("ndcg_5", "max"), ("accuracy", "max"))
  def test_metric_mode(self, name, mode):
    self.assertEqual(train_config.metric_mode(name), mode)


class OptimizerDefaultsTest(tf.test.TestCase):
  """Each text mode's optimizer is built as before the engine's factory: the same classes and settings."""

  def test_defaults_of_each_text_mode_build_the_same_keras_optimizers(self):
    adam = tf.keras.optimizers.Adam(1e-3).get_config()
    self.assertEqual(optimizers.make_optimizer(train_config.Rank4ClassTrainConfig("/m",
                                                                                  training_data.DataConfig(
        dataset="digits")).optimizer, 100).get_config(), adam)
    for tfidf in (train_config.TFIDF_OPTIMIZER, train_config.HYBRID_OPTIMIZER):
      self.assertEqual(optimizers.make_optimizer(tfidf, 100).get_config(),
                       tf.keras.optimizers.Adam(1e-2).get_config())
    # Fine-tuning: AdamW, weight decay 0.01 on every variable, 10% warmup to 3e-5, linear decay over the run.
    finetune = optimizers.make_optimizer(train_config.FINETUNE_OPTIMIZER, 100)
    self.assertEqual(finetune.get_config(), tf.keras.optimizers.AdamW(
        learning_rate=learning_rates.WarmupLinearDecay(3e-5, 10, 100), weight_decay=0.01).get_config())
    self.assertEqual(train_config.FINETUNE_OPTIMIZER.exclude_from_decay, ())
    self.assertAllClose([float(finetune.get_config()["learning_rate"]["config"][k]) for k in ("peak",
                                                                                              "warmup_steps",
                                                                                              "total_steps")],
                        [3e-5, 10, 100])

  def test_the_optimizer_config_is_the_engines(self):
    self.assertIs(train_config.OptimizerConfig, optimizers.OptimizerConfig)
    self.assertIs(train.OptimizerConfig, optimizers.OptimizerConfig)
    self.assertIs(train.make_optimizer, optimizers.make_optimizer)
    self.assertEqual(train.OPTIMIZERS, ("adam", "adagrad", "adamw", "lazy_adam"))


_ROOT = pathlib.Path(__file__).resolve().parents[3]
# The library functions that take a whole Rank4ClassTrainConfig: `train` splits it into its parts (and keys
# the model pool by it), the search runs whole trainings. Below them every function takes the part it reads.
_WHOLE_CONFIG_TAKERS = {
    ("rank4class/training/train.py", "train"), ("rank4class/training/train.py", "_with_recorded_inputs"),
    ("rank4class/training/train.py", "_train"), ("rank4class/training/train.py", "_pool_key"),
    ("rank4class/training/tuning.py", "grid"), ("rank4class/training/tuning.py", "trial_config"),
    ("rank4class/training/tuning.py", "tune"),
}
_LIBRARY = ("rank4class", "pairwise", "rank4class_data", "rank4class_engine", "rank4class_encoders")
_EXPERIMENTS = ("rank4class/studies/",)


def _whole_config_takers() -> set[tuple[str, str]]:
  """(module path, function) of every library function with a parameter annotated Rank4ClassTrainConfig."""
  found = set()
  for package in _LIBRARY:
    for path in sorted((_ROOT / package).rglob("*.py")):
      module = str(path.relative_to(_ROOT))
      if module.startswith(_EXPERIMENTS):
        continue
      for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
          arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
          if any(a.annotation is not None and "Rank4ClassTrainConfig" in ast.unparse(a.annotation)
                 for a in arguments):
            found.add((module, node.name))
  return found


class ConfigPartsTest(tf.test.TestCase):

  def test_below_train_functions_take_parts_not_the_whole_config(self):
    self.assertEqual(_whole_config_takers(), _WHOLE_CONFIG_TAKERS)

  def test_flat_keywords_build_the_parts_and_replace_keeps_the_rest(self):
    config = train.Rank4ClassTrainConfig("/m", training_data.DataConfig(dataset="reuters_r8"), train_steps=7,
                                         seed=3, export=False)
    self.assertEqual((config.run.train_steps, config.run.seed, config.outputs.export), (7, 3, False))
    changed = dataclasses.replace(config, seed=4)
    self.assertEqual((changed.run.seed, changed.run.train_steps, config.run.seed), (4, 7, 3))
    self.assertEqual(dataclasses.replace(config, run=train.RunConfig(batch_size=5)).run.train_steps, 1000)
    with self.assertRaisesRegex(TypeError, r"no field\(s\) \['bogus'\]; its parts are"):
      train.Rank4ClassTrainConfig("/m", config.data, bogus=1)

  def test_flat_reads_and_writes_reach_the_part_with_a_deprecation_warning(self):
    config = train.Rank4ClassTrainConfig("/m", training_data.DataConfig(dataset="reuters_r8"))
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      train_config._warned_flat_names.clear()
      config.seed = 9  # Set on the part: a flat attribute beside it would be read by nothing.
      self.assertEqual((config.seed, config.run.seed, config.serving_top_k), (9, 9, 5))
    self.assertNotIn("seed", vars(config))
    self.assertEqual(sorted(str(w.message).split(" is ")[0] for w in caught),
                     ["Rank4ClassTrainConfig.seed", "Rank4ClassTrainConfig.serving_top_k"])

  def test_config_json_of_0_8_reads_into_the_parts_and_compares_equal(self):
    config = digits_config("/m")
    nested = configs.to_dict(config)
    self.assertEqual(sorted(nested), ["data", "model", "model_dir", "optimizer", "outputs", "run"])
    self.assertEqual(train_config.config_from_dict(_flat(nested)), config)
    self.assertEqual(train_config.comparable_config(_flat(nested)), train_config.comparable_config(nested))

  def test_a_config_json_without_text_precision_ran_in_float32(self):
    nested = configs.to_dict(digits_config("/m"))
    self.assertEqual(nested["data"]["text_precision"], "auto")  # Today's default.
    del nested["data"]["text_precision"]  # As 0.8 and earlier wrote it.
    self.assertEqual(train_config.config_from_dict(_flat(nested)).data.text_precision, "float32")
    self.assertEqual(train_config.comparable_config(nested)["data"]["text_precision"], "float32")


if __name__ == "__main__":
  tf.test.main()
