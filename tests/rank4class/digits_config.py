"""A short digits run's `Rank4ClassTrainConfig` (image CNN, dot, softmax, 60 steps), shared by the training
tests."""

import dataclasses

from rank4class.modeling import encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class.training import train_config, training_data
from rank4class_engine.optimization import losses, optimizers


def digits_config(model_dir: str, **overrides) -> train_config.Rank4ClassTrainConfig:
  """60 steps of batch 64 on digits, validated every 20, without baselines and calibration; `overrides`
  replace fields."""
  config = train_config.Rank4ClassTrainConfig(
      model_dir=model_dir, data=training_data.DataConfig(dataset="digits"),
      model=model_lib.Rank4ClassConfig(
          instance_encoder=encoders.InstanceEncoderConfig(
              type="auto", image=encoders.ImageEncoderConfig(filters=(16, 32), pooling="max")),
          interaction=interactions.InteractionConfig(type="dot"), loss=losses.LossConfig(type="softmax")),
      optimizer=optimizers.OptimizerConfig(learning_rate=1e-2), batch_size=64, train_steps=60, eval_every=20,
      checkpoint_every=20, verbose=0, baselines=False, calibrate=False)
  return dataclasses.replace(config, **overrides)
