"""The training loop: `trainer.fit` (Keras `fit` for exactly the asked steps, validation at a cadence) and its
parts: the engine's settings and answer, steps per `tf.function` call, checkpoints and best weights, progress
and the JSON progress log, preemption and the workers' stop agreement, dropout whose masks a checkpoint
determines, and a traced model handed to the next run of the same architecture."""
