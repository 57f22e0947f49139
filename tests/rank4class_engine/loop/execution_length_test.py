"""Tests for rank4class_engine.loop.execution_length: steps per execution chosen from the step time within the
cadence."""

import tensorflow as tf
from absl.testing import parameterized

from rank4class_engine.loop import engine_config, execution_length


class ChooseStepsPerExecutionTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(
      (0.002, 100, None, 100),  # 0.2 s / 2 ms = 100 steps, which divides eval_every.
      (0.05, 100, None, 4),     # 0.2 s / 50 ms = 4.
      (0.007, 100, None, 25),   # wants 28; the largest divisor of 100 below it is 25.
      # wants 1000; executions must end on validations and checkpoints: gcd(100, 30).
      (0.0001, 100, 30, 10),
      (0.5, 100, None, 1),      # slow steps: one per execution.
      (0.0001, 100, 0, 100),    # no checkpoints: eval_every alone bounds it.
  )
  def test_choice(self, seconds_per_step, eval_every, checkpoint_every, expected):
    config = engine_config.EngineConfig(run_dir="/tmp/x", train_steps=1000, eval_every=eval_every,
                                        checkpoint_every=checkpoint_every)
    self.assertEqual(execution_length.choose_steps_per_execution(seconds_per_step, config), expected)


if __name__ == "__main__":
  tf.test.main()
