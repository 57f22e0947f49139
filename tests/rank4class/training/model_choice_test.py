"""Tests for rank4class.training.model_choice: the regressions as one family against the trained model by the
one-standard-error rule, the candidates every kind of run gets, a class-text run against the same run without
its class texts, and the choice line."""

import contextlib
import dataclasses
import io
import os
import types
from unittest import mock

import numpy as np
import tensorflow as tf

from rank4class.modeling import class_encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class.training import model_choice, model_setup, train
from rank4class.training import training_data as data_lib
from rank4class.training.train_config import (
  LINEAR_CHOICE,
  TFIDF_LINEAR_CHOICE,
  TRAINED_CHOICE,
  WITHOUT_CLASS_TEXTS_CHOICE,
  RunConfig,
)
from rank4class_data.validation import write_json
from rank4class_engine.runs import configs as engine_configs

_NAMES = [LINEAR_CHOICE, TFIDF_LINEAR_CHOICE, TRAINED_CHOICE]


class OneStandardErrorRecordTest(tf.test.TestCase):

  def test_the_better_regression_is_kept_when_the_trained_model_is_better_within_noise(self):
    # Per-row losses (top-1 errors): the TF-IDF regression misses 2 rows, the one of the inputs 3, the trained
    # model 1 of the TF-IDF one's; paired differences trained - TF-IDF: [0, -1, 0, 0, 0, 0], SE 1/6.
    losses = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]], np.float64)
    record = model_choice._one_standard_error_record(_NAMES, losses)
    self.assertEqual(record["chosen"], TFIDF_LINEAR_CHOICE)
    self.assertEqual(record["best"], TRAINED_CHOICE)
    self.assertEqual(record["rows"], 6)
    self.assertAllClose([record["per_row_means"][n] for n in _NAMES], [0.5, 1 / 3, 1 / 6])

  def test_a_trained_model_better_beyond_the_noise_is_kept(self):
    losses = np.array([[1, 1, 0]] * 5 + [[0, 0, 0]] * 5, np.float64)  # Better on 5 of 10 rows, worse on none.
    self.assertEqual(model_choice._one_standard_error_record(_NAMES, losses)["chosen"], TRAINED_CHOICE)

  def test_equal_regressions_keep_the_simpler(self):
    losses = np.array([[0, 0, 1], [1, 1, 1]], np.float64)
    self.assertEqual(model_choice._one_standard_error_record(_NAMES, losses)["chosen"], LINEAR_CHOICE)


def _fit(chosen_by: str, log_loss: float, rows: int = 164) -> dict:
  return {"inverse_regularization": 1.0, "chosen_by": chosen_by, "choice_rows": rows,
          "choice_log_loss": log_loss}


class CrossValidatedRegressionsTest(tf.test.TestCase):
  """Below 300 validation rows each regression's C is chosen by cross-validation on the training rows: the
  regressions then compare by that log-loss, not on the few validation rows."""

  def test_the_regression_with_the_lower_cross_validated_log_loss_stands_for_the_family(self):
    # On the 4 validation rows the regression of the inputs misses 1 row, the TF-IDF one 2, the trained
    # model 3; on 164 training rows out of fold the TF-IDF one has the lower log-loss.
    losses = np.array([[0, 1, 1], [0, 1, 1], [1, 0, 1], [0, 0, 0]], np.float64)
    fits = {LINEAR_CHOICE: _fit("5-fold cross-validation", 1.132),
            TFIDF_LINEAR_CHOICE: _fit("5-fold cross-validation", 1.069)}
    order = model_choice._cross_validated_order(_NAMES, fits)
    self.assertEqual(order, {LINEAR_CHOICE: 1.132, TFIDF_LINEAR_CHOICE: 1.069})
    record = model_choice._one_standard_error_record(_NAMES, losses, order)
    self.assertEqual(record["chosen"], TFIDF_LINEAR_CHOICE)
    self.assertEqual(record["regressions_by"], "cross-validated log-loss")
    # Without it, the validation rows choose: the regression of the inputs.
    self.assertEqual(model_choice._one_standard_error_record(_NAMES, losses)["chosen"], LINEAR_CHOICE)

  def test_regressions_chosen_otherwise_or_on_other_rows_compare_on_validation(self):
    self.assertIsNone(model_choice._cross_validated_order(_NAMES, {
        LINEAR_CHOICE: _fit("validation log-loss", 0.5),
        TFIDF_LINEAR_CHOICE: _fit("5-fold cross-validation", 0.4)}))
    self.assertIsNone(model_choice._cross_validated_order(_NAMES, {
        LINEAR_CHOICE: _fit("5-fold cross-validation", 0.5, rows=100),
        TFIDF_LINEAR_CHOICE: _fit("5-fold cross-validation", 0.4, rows=164)}))
    self.assertIsNone(model_choice._cross_validated_order(_NAMES, {
        LINEAR_CHOICE: {"inverse_regularization": 1.0, "chosen_by": "5-fold cross-validation",
                        "choice_rows": 164},
        TFIDF_LINEAR_CHOICE: _fit("5-fold cross-validation", 0.4)}))
    # One regression alone: its record says nothing of a comparison.
    names = [LINEAR_CHOICE, TRAINED_CHOICE]
    order = model_choice._cross_validated_order(names, {LINEAR_CHOICE: _fit("5-fold cross-validation", 0.5)})
    record = model_choice._one_standard_error_record(names, np.array([[0, 1], [1, 1]], np.float64), order)
    self.assertEqual(record["chosen"], LINEAR_CHOICE)
    self.assertNotIn("regressions_by", record)


class AsLinearTest(tf.test.TestCase):

  def test_class_texts_and_other_interactions_are_packed_as_one_hot_dot(self):
    config = model_lib.Rank4ClassConfig(
        class_encoder=class_encoders.ClassEncoderConfig(type=class_encoders.METADATA),
        interaction=interactions.InteractionConfig(type=interactions.LATENT_CROSS, hidden_units=(8,)),
        logit_adjustment=1.0)
    linear = model_choice.as_linear(config)
    self.assertEqual(linear.class_encoder.type, class_encoders.ONE_HOT)
    self.assertTrue(linear.class_encoder.one_hot.use_bias)
    self.assertEqual(linear.interaction.type, interactions.DOT)
    self.assertEqual(linear.logit_adjustment, 0.0)
    self.assertEqual(linear.instance_encoder, config.instance_encoder)


def _validation(labels: np.ndarray) -> types.SimpleNamespace:
  """Data whose validation split is `labels` (the inputs are the row numbers)."""
  def make_dataset(batch_size, shuffle, repeat, seed):
    del shuffle, repeat, seed
    return tf.data.Dataset.from_tensor_slices((np.arange(len(labels)), labels)).batch(batch_size)
  return types.SimpleNamespace(validation=types.SimpleNamespace(make_dataset=make_dataset))


def _scorer(correct: np.ndarray, num_classes: int = 3):
  """A score function that ranks each row's class (`labels = row % num_classes`) first where `correct`, else
  second."""
  def score(rows):
    rows = rows.numpy()
    scores = np.zeros([len(rows), num_classes], np.float32)
    truth = rows % num_classes
    scores[np.arange(len(rows)), truth] = np.where(correct[rows], 2.0, 1.0)
    scores[np.arange(len(rows)), (truth + 1) % num_classes] = 1.5
    return tf.constant(scores)
  return score


def _fitted(step: int, value: float) -> types.SimpleNamespace:
  return types.SimpleNamespace(best_step=step, best_value=value, best_metrics={"top_1_error": value})


class ChooseClassTextsTest(tf.test.TestCase):
  """The run of the class texts against the same run without them: top-1 error row by row, 100 rows."""

  def _choose(self, text_correct: np.ndarray, plain_correct: np.ndarray) -> dict:
    """The record of the two models, each right on the rows where its mask is True (else the class second)."""
    labels = np.arange(100) % 3
    data = _validation(labels)
    run = RunConfig(best_metric="top_1_error")
    chosen, record = model_choice.choose_class_texts(
        run, ("text model", _scorer(text_correct), data), _fitted(300, 1 - text_correct.mean()),
        ("plain model", _scorer(plain_correct), data), _fitted(200, 1 - plain_correct.mean()),
        tf.distribute.get_strategy())
    self.assertEqual(chosen[0], "text model" if record["chosen"] == TRAINED_CHOICE else "plain model")
    return record

  def test_the_class_texts_are_kept_within_the_noise(self):
    # 80 against 82 rows right: the text model alone on rows 0-3, the other alone on rows 80-85. Their
    # difference per row (-1 x 4, +1 x 6) has mean 0.02 and a standard error of 0.0317: within the noise.
    text, plain = np.arange(100) < 80, (np.arange(100) >= 4) & (np.arange(100) < 86)
    record = self._choose(text, plain)
    self.assertEqual(record["chosen"], TRAINED_CHOICE)
    self.assertEqual(record["best"], WITHOUT_CLASS_TEXTS_CHOICE)
    self.assertAllClose(record["per_row_means"][TRAINED_CHOICE], 0.20)
    self.assertAllClose(record["per_row_means"][WITHOUT_CLASS_TEXTS_CHOICE], 0.18)
    difference = np.concatenate([-np.ones(4), np.ones(6), np.zeros(90)])
    self.assertAllClose(record["standard_errors"][TRAINED_CHOICE], np.std(difference, ddof=1) / 10)
    self.assertAllClose(record["standard_errors"][TRAINED_CHOICE], 0.0317, atol=1e-4)
    self.assertEqual((record["trained_step"], record["without_class_texts_step"], record["rows"]),
                     (300, 200, 100))

  def test_the_run_without_them_is_kept_when_better_beyond_the_noise(self):
    text, plain = np.arange(100) < 60, np.arange(100) < 84
    record = self._choose(text, plain)
    self.assertEqual(record["chosen"], WITHOUT_CLASS_TEXTS_CHOICE)
    self.assertAllClose(record["values"][WITHOUT_CLASS_TEXTS_CHOICE], 0.16)
    self.assertEqual(record["metrics"][TRAINED_CHOICE], {"top_1_error": 0.4})
    self.assertEqual(
        model_choice.choice_line(record),
        "Chosen on validation (top_1_error, lower is better; 100 rows, the class texts' model kept unless "
        "the other is better beyond one standard error): the same run without the class texts (one-hot "
        "classes) (step 200) 0.1600, against the trained model of the class texts (step 300) 0.4000.")


class WithoutClassTextsTest(tf.test.TestCase):

  def test_applies_to_a_run_of_class_texts_on_fixed_vectors_without_candidates_only(self):
    texts = model_lib.Rank4ClassConfig(
        class_encoder=class_encoders.ClassEncoderConfig(type=class_encoders.METADATA))
    data = types.SimpleNamespace(train=data_lib.ArraySplit(np.zeros([4, 2], np.float32), np.arange(4)),
                                 input_kind=data_lib.EMBEDDING_INPUT)
    self.assertIsNone(model_choice.without_class_texts(model_lib.Rank4ClassConfig(), None,
                                                       model_lib.Rank4ClassConfig(), data, []))
    self.assertIsNone(model_choice.without_class_texts(texts, None, texts, data, [("candidate", None, None)]))
    # Fine-tuned text: a second run would fine-tune the encoder again.
    self.assertIsNone(model_choice.without_class_texts(
        texts, None, texts, types.SimpleNamespace(train=data.train, input_kind=data_lib.TEXT_INPUT), []))


_WORDS = {"sport": "match goal team", "cooking": "bread soup onion", "music": "song band guitar",
          "weather": "rain snow sun", "finance": "bank money stocks", "space": "rocket orbit moon"}


class ClassTextRunTest(tf.test.TestCase):
  """rank4class-train with classes as texts and no regression candidate (from `AUTO_CENTROID_CLASSES` classes
  on: lowered to 3 here) trains the same run without its class texts and keeps the better one."""

  def test_the_run_without_class_texts_is_trained_compared_and_the_chosen_one_exported(self):
    root = self.create_tempdir().full_path
    rng = np.random.default_rng(0)
    with open(os.path.join(root, "train.csv"), "w") as f:
      f.write("text,label\n" + "".join(f"{' '.join(rng.permutation(words.split()))} {i},{topic}\n"
                                       for topic, words in _WORDS.items() for i in range(8)))
    with open(os.path.join(root, "texts.csv"), "w") as f:
      f.write("class,text\n" + "".join(f"{topic},news about {topic}\n" for topic in _WORDS))
    config = train.Rank4ClassTrainConfig(
        model_dir=os.path.join(root, "run"),
        data=data_lib.DataConfig(train_files=os.path.join(root, "train.csv"),
                                 class_texts=os.path.join(root, "texts.csv"), validation_fraction=0.25,
                                 row_cache_dir=os.path.join(root, "rows"),
                                 embedding_cache_dir=os.path.join(root, "embeddings")),
        model=model_lib.Rank4ClassConfig(
            class_encoder=class_encoders.ClassEncoderConfig(type=class_encoders.METADATA)),
        train_steps=20, eval_every=10, batch_size=8, tensorboard=False, baselines=False, calibrate=False,
        zero_shot_holdout=0.0, best_metric="top_1_error", verbose=1)
    # The folder held a run of another seed: its second trainings' checkpoints must not be resumed.
    for folder in ("without_class_texts", "zero_shot"):
      os.makedirs(os.path.join(config.model_dir, folder, "backup"))
      open(os.path.join(config.model_dir, folder, "backup", "stale"), "w").close()
    write_json(os.path.join(config.model_dir, "config.json"), engine_configs.to_dict(
        dataclasses.replace(config, seed=1)))
    with mock.patch.object(model_setup, "AUTO_CENTROID_CLASSES", 3), \
        contextlib.redirect_stderr(io.StringIO()) as said:
      result = train.train(config, overwrite=True)
    for folder in ("without_class_texts", "zero_shot"):
      self.assertFalse(os.path.exists(os.path.join(config.model_dir, folder, "backup", "stale")))
    choice = result.choice
    self.assertGreater(result.phase_seconds["choice"], 0.0)  # The second training and the choice.
    self.assertTrue(choice["class_texts"])
    self.assertEqual(set(choice["values"]), {TRAINED_CHOICE, WITHOUT_CLASS_TEXTS_CHOICE})
    self.assertIn("The same run without class texts (one-hot classes), trained to compare on validation ("
                  f"{config.model_dir}/without_class_texts).", said.getvalue())
    # Both trained for the run's steps, each in its own folder, the run's validation the chosen one's.
    self.assertTrue(os.listdir(os.path.join(config.model_dir, "without_class_texts")))
    self.assertIn(choice["without_class_texts_step"], (0, 10, 20))
    self.assertEqual(result.validation_metrics, choice["metrics"][choice["chosen"]])
    losses = {name: choice["per_row_means"][name] for name in choice["values"]}
    better_beyond = (losses[WITHOUT_CLASS_TEXTS_CHOICE] + choice["standard_errors"][TRAINED_CHOICE]
                     < losses[TRAINED_CHOICE])
    self.assertEqual(choice["chosen"], WITHOUT_CLASS_TEXTS_CHOICE if better_beyond else TRAINED_CHOICE)
    self.assertAllClose(losses[choice["chosen"]], choice["values"][choice["chosen"]], atol=1e-6)
    # The export is the chosen model: one-hot classes or the class texts.
    exported = tf.keras.models.load_model(result.export_dir)
    self.assertEqual(type(exported.class_encoder).__name__,
                     "OneHotClassEncoder" if better_beyond else "MetadataClassEncoder")
    within = " (it is better here, within the noise)" if choice["chosen"] != choice["best"] else ""
    self.assertEqual(model_choice.choice_line(choice).split(":")[0],
                     "Chosen on validation (top_1_error, lower is better; 12 rows, the class texts' model "
                     f"kept unless the other is better beyond one standard error{within})")


class ChoiceLineTest(tf.test.TestCase):

  def test_names_the_rule_and_a_trained_model_within_noise(self):
    choice = {"metric": "top_1_error", "mode": "min", "chosen": TFIDF_LINEAR_CHOICE, "best": TRAINED_CHOICE,
              "rule": "one standard error", "rows": 644, "trained_step": 500,
              "values": {TRAINED_CHOICE: 0.0450, TFIDF_LINEAR_CHOICE: 0.0481},
              "fits": {TFIDF_LINEAR_CHOICE: {"inverse_regularization": 10.0, "embedding_weight": 0.25,
                                             "chosen_by": "validation log-loss", "converged": False,
                                             "epochs": 5.0, "gradient_ratio": 0.12,
                                             "duality_gap": 0.83, "certified": False}}}
    self.assertEqual(
        model_choice.choice_line(choice),
        "Chosen on validation (top_1_error, lower is better; 644 rows, the trained model kept only when "
        "better beyond one standard error (it is better here, within the noise)): the logistic regression of "
        "TF-IDF beside the frozen embeddings (C=10 by validation log-loss, embedding weight 0.25; its "
        "optimizer NOT CONVERGED in 5.0 epochs: gradient at 0.12 of its start, the optimum up to 83 % "
        "below its objective (duality gap)) 0.0481, against the trained model (step 500) 0.0450.")

  def test_says_the_regressions_were_compared_by_their_cross_validated_log_loss(self):
    choice = {"metric": "ndcg_5", "mode": "max", "chosen": TFIDF_LINEAR_CHOICE, "best": TFIDF_LINEAR_CHOICE,
              "rule": "one standard error", "rows": 18, "trained_step": 100,
              "regressions_by": "cross-validated log-loss",
              "values": {TRAINED_CHOICE: 0.7864, LINEAR_CHOICE: 0.7791, TFIDF_LINEAR_CHOICE: 0.7864},
              "fits": {LINEAR_CHOICE: _fit("5-fold cross-validation", 1.1317),
                       TFIDF_LINEAR_CHOICE: dict(_fit("5-fold cross-validation", 1.0693),
                                                 embedding_weight=0.25)}}
    self.assertEqual(
        model_choice.choice_line(choice),
        "Chosen on validation (ndcg_5, higher is better; 18 rows, the trained model kept only when better "
        "beyond one standard error; between the regressions, the lower cross-validated log-loss): the "
        "logistic regression of TF-IDF beside the frozen embeddings (C=1 by 5-fold cross-validation, its "
        "log-loss 1.0693, embedding weight 0.25) 0.7864, against the trained model (step 100) 0.7864 and the "
        "logistic regression of the model's inputs (C=1 by 5-fold cross-validation, its log-loss 1.1317) "
        "0.7791.")


if __name__ == "__main__":
  tf.test.main()
