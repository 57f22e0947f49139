"""Tests for rank4class_engine.optimization.optimizers: each type with its hyper-parameters, the variables
left out of weight decay, the learning rate at given steps, and the config's JSON and validation."""

import tensorflow as tf
from absl.testing import parameterized

from rank4class_engine.optimization import lazy_adam, learning_rates, optimizers
from rank4class_engine.runs import configs


def _ones_tower() -> tf.keras.Model:
  """Dense -> LayerNorm -> PReLU -> BatchNorm on 2 inputs, every trainable weight 1."""
  model = tf.keras.Sequential([
      tf.keras.layers.Dense(2, name="dense"), tf.keras.layers.LayerNormalization(name="layer_norm"),
      tf.keras.layers.PReLU(name="p_re_lu"), tf.keras.layers.BatchNormalization(name="batch_norm")])
  model.build([None, 2])
  for variable in model.trainable_variables:
    variable.assign(tf.ones_like(variable))
  return model


def _after_zero_gradient_steps(optimizer: tf.keras.optimizers.Optimizer, model: tf.keras.Model,
                               steps: int = 1) -> dict[str, float]:
  """Each trainable variable's first value (by name without ":0") after `steps` updates with zero gradients:
  only weight decay moves a variable (Adam's moments stay 0)."""
  for _ in range(steps):
    optimizer.apply_gradients([(tf.zeros_like(v), v) for v in model.trainable_variables])
  return {v.name.split(":")[0]: float(tf.reshape(v, [-1])[0]) for v in model.trainable_variables}


class MakeOptimizerTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ("adam", optimizers.ADAM, tf.keras.optimizers.Adam),
      ("lazy_adam", optimizers.LAZY_ADAM, lazy_adam.LazyAdam),
      ("adamw", optimizers.ADAMW, tf.keras.optimizers.AdamW),
  )
  def test_adam_types_take_the_betas_epsilon_and_clipping(self, kind, cls):
    optimizer = optimizers.make_optimizer(optimizers.OptimizerConfig(
        type=kind, learning_rate=0.02, beta_1=0.8, beta_2=0.99, epsilon=1e-8, clipnorm=2.0))
    self.assertIs(type(optimizer), cls)
    config = optimizer.get_config()
    self.assertAllClose([config[k] for k in ("learning_rate", "beta_1", "beta_2", "epsilon", "clipnorm")],
                        [0.02, 0.8, 0.99, 1e-8, 2.0])
    self.assertIsNone(config["global_clipnorm"])
    self.assertEqual(config["weight_decay"], 1e-4 if kind == optimizers.ADAMW else None)  # Only AdamW decays.

  def test_defaults_are_keras_adam(self):
    config = optimizers.make_optimizer(optimizers.OptimizerConfig()).get_config()
    self.assertEqual(config["name"], "Adam")
    self.assertEqual([config[k] for k in ("beta_1", "beta_2", "epsilon", "clipnorm", "global_clipnorm")],
                     [0.9, 0.999, 1e-7, None, None])
    self.assertAllClose(config["learning_rate"], 1e-3)
    self.assertEqual(config, tf.keras.optimizers.Adam(1e-3).get_config())

  def test_adagrad_takes_epsilon_and_global_clipping(self):
    optimizer = optimizers.make_optimizer(optimizers.OptimizerConfig(
        type=optimizers.ADAGRAD, learning_rate=0.5, epsilon=1e-6, global_clipnorm=1.0))
    self.assertIs(type(optimizer), tf.keras.optimizers.Adagrad)
    config = optimizer.get_config()
    self.assertAllClose([config["learning_rate"], config["epsilon"], config["global_clipnorm"],
                         config["initial_accumulator_value"]], [0.5, 1e-6, 1.0, 0.1])
    self.assertIsNone(config["clipnorm"])

  def test_adamw_decays_every_variable_unless_names_are_excluded(self):
    # lr 0.1, weight decay 0.5: a decayed weight goes 1 -> 1 - 0.1 * 0.5 = 0.95 per zero-gradient step.
    config = optimizers.OptimizerConfig(type=optimizers.ADAMW, learning_rate=0.1, weight_decay=0.5)
    every = _after_zero_gradient_steps(optimizers.make_optimizer(config), _ones_tower())
    self.assertAllClose(list(every.values()), [0.95] * len(every))
    config.exclude_from_decay = optimizers.NO_DECAY_NAMES
    values = _after_zero_gradient_steps(optimizers.make_optimizer(config), _ones_tower(), steps=2)
    self.assertEqual(sorted(values), ["batch_norm/beta", "batch_norm/gamma", "dense/bias", "dense/kernel",
                                      "layer_norm/beta", "layer_norm/gamma", "p_re_lu/alpha"])
    # Only the kernel decays: 0.95^2 after two steps; biases, norms and PReLU slopes keep 1.
    self.assertAllClose(values, {name: 0.95 ** 2 if name == "dense/kernel" else 1.0 for name in values})

  def test_linear_schedule_with_warmup_gives_the_rate_of_each_step(self):
    # 10 steps, warmup 0.2 -> 2 steps: update k gets k / 2 for k = 1, 2, then (10 - k + 1) / 8 down to 1/8.
    optimizer = optimizers.make_optimizer(optimizers.OptimizerConfig(
        type=optimizers.ADAMW, learning_rate=1.0, schedule=learning_rates.LINEAR, warmup_fraction=0.2), 10)
    self.assertIsInstance(optimizer.get_config()["learning_rate"], dict)  # A serialized WarmupLinearDecay.
    variable = tf.Variable([1.0])
    rates = []
    for _ in range(10):
      optimizer.apply_gradients([(tf.zeros_like(variable), variable)])
      rates.append(float(optimizer.learning_rate))
    self.assertAllClose(rates, [0.5, 1.0] + [(10 - k + 1) / 8 for k in range(3, 11)])

  def test_constant_rate_without_warmup_is_a_number_and_a_schedule_needs_the_steps(self):
    self.assertAllClose(
      optimizers.make_optimizer(optimizers.OptimizerConfig(learning_rate=0.3)).learning_rate, 0.3
    )
    with self.assertRaisesRegex(ValueError, "needs the run's total steps"):
      optimizers.make_optimizer(optimizers.OptimizerConfig(schedule=learning_rates.LINEAR))

  def test_jit_compile_off_is_kept(self):
    config = optimizers.OptimizerConfig(type=optimizers.ADAMW)
    self.assertFalse(optimizers.make_optimizer(config, jit_compile=False).jit_compile)


class OptimizerConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_json_round_trip_and_an_older_config_without_the_newer_fields(self):
    config = optimizers.OptimizerConfig(type="adamw", learning_rate=4e-5, weight_decay=0.01, epsilon=1e-8,
                                        global_clipnorm=1.0, exclude_from_decay=optimizers.NO_DECAY_NAMES)
    as_json = configs.to_dict(config)
    self.assertEqual(as_json["exclude_from_decay"], list(optimizers.NO_DECAY_NAMES))
    self.assertEqual(configs.from_dict(optimizers.OptimizerConfig, as_json), config)
    # A Rank4Class config.json written before betas, epsilon, global clipping and exclusions existed.
    old = {"type": "adamw", "learning_rate": 3e-5, "weight_decay": 0.01, "clipnorm": None,
           "schedule": "linear", "warmup_fraction": 0.1}
    loaded = configs.from_dict(optimizers.OptimizerConfig, old)
    self.assertEqual((loaded.beta_1, loaded.beta_2, loaded.epsilon, loaded.global_clipnorm,
                      loaded.exclude_from_decay),
                     (0.9, 0.999, 1e-7, None, ()))

  @parameterized.named_parameters(
      ("type", dict(type="sgd"),
       r"`type` must be one of \['adam', 'adagrad', 'adamw', 'lazy_adam'\], got 'sgd'"),
      ("learning_rate", dict(learning_rate=0.0), r"`learning_rate` must be > 0, got 0"),
      ("schedule", dict(schedule="cosine"),
       r"`schedule` must be one of \['constant', 'linear'\], got 'cosine'"),
      ("warmup", dict(warmup_fraction=1.0), r"`warmup_fraction` must be in \[0, 1\), got 1"),
      ("beta_2", dict(beta_2=1.0), r"`beta_2` must be in \[0, 1\), got 1"),
      ("epsilon", dict(epsilon=0.0), r"`epsilon` must be > 0, got 0"),
      ("global_clipnorm", dict(global_clipnorm=0.0), r"`global_clipnorm` must be > 0, got 0"),
      ("both_clipnorms", dict(clipnorm=1.0, global_clipnorm=1.0),
       "`clipnorm` .* or `global_clipnorm` .*, not both"),
  )
  def test_bad_settings_raise(self, settings, message):
    with self.assertRaisesRegex(ValueError, message):
      optimizers.OptimizerConfig(**settings)


if __name__ == "__main__":
  tf.test.main()
