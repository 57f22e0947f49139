"""Tests for rank4class.training.model_choice: the regressions as one family against the trained model by the
one-standard-error rule, the candidates every kind of run gets, and the choice line."""

import numpy as np
import tensorflow as tf

from rank4class.modeling import class_encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class.training import model_choice
from rank4class.training.train_config import LINEAR_CHOICE, TFIDF_LINEAR_CHOICE, TRAINED_CHOICE

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
