"""Tests for rank4class_engine.optimization.learning_rates: the warmup and decay by hand, serialization, and
the factory."""

import tensorflow as tf

from rank4class_engine.optimization import learning_rates


class WarmupLinearDecayTest(tf.test.TestCase):

  def test_rises_over_the_warmup_then_decays_linearly(self):
    schedule = learning_rates.WarmupLinearDecay(1.0, warmup_steps=4, total_steps=12)
    # Keras passes the steps already taken: update k (1-based) gets schedule(k - 1).
    # Warmup: k / 4 for k = 1..4; decay: (12 - k + 1) / 8 for k = 5..12.
    rates = [float(schedule(k - 1)) for k in range(1, 13)]
    expected = [0.25, 0.5, 0.75, 1.0] + [(12 - k + 1) / 8 for k in range(5, 13)]
    self.assertAllClose(rates, expected)
    self.assertAllClose(float(schedule(100)), 0.0)  # Past the run: never negative.

  def test_without_total_steps_holds_the_peak_after_the_warmup(self):
    schedule = learning_rates.WarmupLinearDecay(3e-5, warmup_steps=2)
    self.assertAllClose([float(schedule(s)) for s in range(4)], [1.5e-5, 3e-5, 3e-5, 3e-5])

  def test_config_round_trip_and_an_optimizer_that_uses_it(self):
    schedule = learning_rates.WarmupLinearDecay(2e-5, warmup_steps=10, total_steps=100)
    again = learning_rates.WarmupLinearDecay.from_config(schedule.get_config())
    self.assertAllClose(float(again(37)), float(schedule(37)))
    optimizer = tf.keras.optimizers.AdamW(learning_rate=schedule)
    config = optimizer.get_config()
    self.assertIn("WarmupLinearDecay", str(config["learning_rate"]))
    restored = tf.keras.optimizers.AdamW.from_config(config)
    self.assertAllClose(float(restored.learning_rate), float(schedule(0)))  # 2e-5 / 10 at the first update.

  def test_bad_arguments_raise(self):
    with self.assertRaisesRegex(ValueError, "`peak` must be > 0, got 0.0"):
      learning_rates.WarmupLinearDecay(0.0, 1, 10)
    with self.assertRaisesRegex(ValueError, "warmup_steps=10, total_steps=10"):
      learning_rates.WarmupLinearDecay(1.0, 10, 10)


class MakeLearningRateTest(tf.test.TestCase):

  def test_constant_without_warmup_is_the_number_itself(self):
    self.assertEqual(learning_rates.make_learning_rate(1e-3, "constant", 0.0, None), 1e-3)

  def test_linear_with_a_tenth_of_warmup(self):
    schedule = learning_rates.make_learning_rate(3e-5, "linear", 0.1, 200)
    self.assertEqual(schedule.get_config(), {"peak": 3e-5, "warmup_steps": 20, "total_steps": 200})
    self.assertAllClose(float(schedule(199)), 3e-5 / 180)  # The last update: one step of decay left.

  def test_warmup_never_takes_the_whole_run(self):
    self.assertEqual(learning_rates.make_learning_rate(1.0, "linear", 0.9, 2).get_config()["warmup_steps"], 1)

  def test_bad_choices_raise(self):
    with self.assertRaisesRegex(ValueError,
                                r"`schedule` must be one of \['constant', 'linear'\], got 'cosine'"):
      learning_rates.make_learning_rate(1.0, "cosine", 0.0, 10)
    with self.assertRaisesRegex(ValueError, r"warmup_fraction.*\[0, 1\)"):
      learning_rates.make_learning_rate(1.0, "linear", 1.0, 10)
    with self.assertRaisesRegex(ValueError, "needs the run's total steps"):
      learning_rates.make_learning_rate(1.0, "linear", 0.0, None)


if __name__ == "__main__":
  tf.test.main()
