"""Tests for rank4class.training.few_shot.few_shot_run: `train` on 8 real Reuters stories a class (the class
names as their texts) takes the few-shot path, beats the nearest class text on held-out stories, and exports a
model that predicts as the run's test report says."""

import contextlib
import csv
import io
import os

import numpy as np
import tensorflow as tf

from rank4class.inference import calibration as calibration_lib
from rank4class.inference import export_folder
from rank4class.training import train
from rank4class.training import training_data as data_lib
from rank4class.training.few_shot import few_shot_run
from rank4class_cli import train_output
from rank4class_data.datasets import classification
from rank4class_encoders import text_embeddings


def _write(path: str, texts: list[str], labels: list[str]) -> None:
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(["text", "label"])
    writer.writerows(zip(texts, labels, strict=True))


class FewShotRunTest(tf.test.TestCase):

  def test_eight_stories_a_class_beat_the_nearest_class_name(self):
    root = self.create_tempdir().full_path
    train_split, test_split = (classification.load_text_classification("reuters_r8", split)
                               for split in ("train", "test"))
    names = train_split.class_names
    rng = np.random.default_rng(0)
    rows = np.concatenate([rng.permutation(np.flatnonzero(train_split.labels == c))[:8] for c in range(8)])
    test = np.random.default_rng(0).permutation(len(test_split.labels))[:100]
    _write(os.path.join(root, "few.csv"), [train_split.texts[i] for i in rows],
           [names[train_split.labels[i]] for i in rows])
    _write(os.path.join(root, "test.csv"), [test_split.texts[i] for i in test],
           [names[test_split.labels[i]] for i in test])
    data = data_lib.DataConfig(train_files=os.path.join(root, "few.csv"),
                               test_files=os.path.join(root, "test.csv"),
                               row_cache_dir=os.path.join(root, "rows"),
                               embedding_cache_dir=os.path.join(root, "embeddings"))
    config = train.Rank4ClassTrainConfig(model_dir=os.path.join(root, "run"), data=data, train_steps=None,
                                         tensorboard=False, verbose=1)
    with contextlib.redirect_stderr(io.StringIO()):
      result = train.train(config)
    self.assertTrue(result.choice["few_shot"])
    self.assertEqual((result.choice["rows"], result.choice["folds"]), (64, 5))
    self.assertEqual(result.best_metric, few_shot_run.CV_METRIC)
    # The baselines, fitted beside the run on the same 64 rows, scored on the same 100 test rows.
    self.assertEqual((result.baselines["split"], result.baselines["n"], result.baselines["train_rows"]),
                     ("test", 100, 64))
    self.assertIn("versus", result.baselines)
    self.assertStartsWith(train_output.choice_line(result.choice),
                          "Chosen by cross-validation (few-shot: 64 labelled rows, the 8 class names as "
                          "their texts; 5-fold")
    # The nearest class name on the same test rows: 8 classes named "acq", "earn", ... (39 % on 500 rows).
    frozen = data_lib.frozen_text_encoder(data, data_lib.text_handles(data))
    x = text_embeddings.embed_texts([test_split.texts[i] for i in test], frozen, data.embedding_cache_dir)
    t = text_embeddings.embed_texts(names, frozen, data.embedding_cache_dir)
    nearest = np.mean(np.argmax(x @ t.T / np.linalg.norm(t, axis=1), axis=1) == test_split.labels[test])
    accuracy = result.test_report["metrics"]["accuracy"]
    self.assertGreater(accuracy, nearest + 0.2)
    self.assertGreater(accuracy, 0.8)
    # The export scores the test rows as the run's model did.
    model = tf.keras.models.load_model(result.export_dir)
    scores = model(tf.constant(x)).numpy()
    exported = np.mean(np.argmax(scores, axis=1) == test_split.labels[test])
    self.assertAllClose(exported, accuracy, atol=1e-6)
    # Calibrated on the 64 rows' out-of-fold scores, exported beside the model, and tested as any run's.
    self.assertEqual((result.calibration["fitted_on"], result.calibration["n"]), ("out of fold", 64))
    self.assertEqual(result.calibration["test"]["n"], 100)
    calibration = export_folder.read_calibration(result.export_dir)
    self.assertAllClose(calibration.temperature, result.calibration["temperature"])
    probabilities = calibration.probabilities(scores)
    self.assertAllClose(probabilities.sum(axis=1), np.ones(100), atol=1e-5)
    ece = calibration_lib.expected_calibration_error(probabilities, test_split.labels[test])
    self.assertAllClose(ece, result.calibration["test"]["ece_after"], atol=1e-5)


if __name__ == "__main__":
  tf.test.main()
