"""Tests for rank4class.training.tuning: the grid, the trials' folders and outputs, the choice on validation,
the binary."""

import dataclasses
import io
import json
import os
from unittest import mock

import tensorflow as tf

from rank4class.modeling import encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class.training import train, training_data, tuning
from rank4class_cli.binaries import train_main
from rank4class_engine.optimization import losses


def _digits_config(model_dir: str, **overrides) -> train.Rank4ClassTrainConfig:
  config = train.Rank4ClassTrainConfig(
      model_dir=model_dir, data=training_data.DataConfig(dataset="digits"),
      model=model_lib.Rank4ClassConfig(
          instance_encoder=encoders.InstanceEncoderConfig(
              type="auto", image=encoders.ImageEncoderConfig(filters=(8,), pooling="max")),
          interaction=interactions.InteractionConfig(type="latent_cross", hidden_units=(16, 16)),
          loss=losses.LossConfig(type="softmax")),
      batch_size=64, train_steps=30, eval_every=15, checkpoint_every=0, best_metric="top_1_error", verbose=0)
  return dataclasses.replace(config, **overrides)


class GridTest(tf.test.TestCase):

  def test_heads_search_rates_and_widths_fine_tuning_rates_only(self):
    head = _digits_config("/m")
    self.assertEqual(tuning.grid(head, tuning.TuneConfig()),
                     [(r, w) for w in tuning.WIDTHS for r in tuning.HEAD_LEARNING_RATES])
    text = dataclasses.replace(head,
                               data=training_data.DataConfig(dataset="reuters_r8", text_mode="finetune"))
    self.assertEqual(tuning.grid(text, tuning.TuneConfig()),
                     [(r, 16) for r in tuning.FINETUNE_LEARNING_RATES])
    hybrid = dataclasses.replace(head,
                                 data=training_data.DataConfig(dataset="reuters_r8", text_mode="hybrid"))
    self.assertEqual([rate for rate, _ in tuning.grid(hybrid, tuning.TuneConfig())],
                     [*tuning.TFIDF_LEARNING_RATES] * len(tuning.WIDTHS))

  def test_width_reaches_every_layer_the_hidden_width_flag_sets(self):
    config = _digits_config("/m").model
    model = tuning.with_width(config, 64)
    self.assertEqual(model.interaction.hidden_units, (64, 64))
    self.assertEqual(model.instance_encoder.mlp.hidden_units,
                     (64,) * len(config.instance_encoder.mlp.hidden_units))
    self.assertEqual(model.instance_encoder.tfidf.output_dim, 64)

  def test_trials_read_no_test_split_and_write_no_export(self):
    trial = tuning.trial_config(_digits_config("/m"), 3e-3, 32)
    self.assertEqual(trial.model_dir, "/m/tune/lr0.003-w32")
    self.assertEqual(trial.optimizer.learning_rate, 3e-3)
    self.assertFalse(trial.outputs.export or trial.outputs.evaluate_test or trial.outputs.baselines
                     or trial.outputs.calibrate)

  def test_bad_grid_raises(self):
    with self.assertRaisesRegex(ValueError, "`learning_rates` must be > 0, got 0.0."):
      tuning.TuneConfig(learning_rates=(1e-3, 0.0))
    with self.assertRaisesRegex(ValueError, r"`learning_rates` must list at least one rate, got \(\)."):
      tuning.TuneConfig(learning_rates=())
    with self.assertRaisesRegex(ValueError, "widths"):
      tuning.TuneConfig(widths=())


class TuneTest(tf.test.TestCase):

  def test_best_validation_trial_chooses_the_final_run_and_a_rerun_reads_trials_back(self):
    root = self.create_tempdir().full_path
    config = _digits_config(os.path.join(root, "run"))
    data = training_data.prepare_data(config.data)
    grid = tuning.TuneConfig(learning_rates=(1e-5, 3e-2), widths=(16,))
    chosen, report = tuning.tune(config, grid, data)
    values = {row["learning_rate"]: row["top_1_error"] for row in report["trials"]}
    self.assertLess(values[3e-2], values[1e-5])  # 30 steps at 1e-5 barely move from chance (0.9).
    self.assertEqual(report["chosen"], {"learning_rate": 3e-2, "width": 16})
    self.assertEqual((chosen.optimizer.learning_rate, chosen.model_dir), (3e-2, config.model_dir))
    self.assertCountEqual(os.listdir(os.path.join(root, "run", "tune")), ["lr1e-05-w16", "lr0.03-w16"])
    with open(os.path.join(root, "run", tuning.REPORT_FILE)) as f:
      self.assertEqual(json.load(f), json.loads(json.dumps(report)))
    again, _ = tuning.tune(config, grid, data)
    self.assertEqual(again, chosen)
    self.assertIn("<- chosen",
                  [line for line in tuning.format_table(report).splitlines() if "0.03" in line][0])

  def test_the_binary_searches_then_trains_the_chosen_settings(self):
    root = self.create_tempdir().full_path
    argv = ["prog", "--dataset=digits", f"--model_dir={root}/run", "--train_steps=20", "--eval_every=10",
            "--hidden_width=8", "--cnn_filters=4", "--batch_size=64", "--best_metric=top_1_error", "--tune",
            "--noexport", "--nobaselines", "--nocalibrate", "--verbose=0"]
    try:
      train_main.parse_flags(argv)
      out = io.StringIO()
      with (
        mock.patch.object(tuning, "HEAD_LEARNING_RATES", (1e-5, 3e-2)),
        mock.patch.object(tuning, "WIDTHS", (8,)),
        mock.patch("sys.stdout", out),
      ):
        train_main.main([])
    finally:
      train_main.FLAGS.unparse_flags()
    self.assertIn("Search on the validation split (top_1_error, lower is better):", out.getvalue())
    final = train.load_config(os.path.join(root, "run"))
    with open(os.path.join(root, "run", tuning.REPORT_FILE)) as f:
      self.assertEqual(final.optimizer.learning_rate, json.load(f)["chosen"]["learning_rate"])


if __name__ == "__main__":
  tf.test.main()
