"""Tests of rank4class.modeling.hybrid_text_encoder: TF-IDF beside an MLP on frozen text embeddings, the layer
alone and `--text_mode=hybrid` end to end (trained on texts with their cached embeddings, exported, predicted
on raw texts)."""

import csv
import os
import shutil
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class.inference import predict
from rank4class.modeling import encoders, hybrid_text_encoder, interactions
from rank4class.modeling import model as model_lib
from rank4class.training import train, training_data
from rank4class_encoders import bert_conversion, text_embeddings, text_encoder
from rank4class_engine.optimization import losses

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "the", "cat", "dog", "sat", "ran", "on", "mat"]


class HybridTextEncoderTest(tf.test.TestCase, parameterized.TestCase):
  """TF-IDF beside an MLP on frozen embeddings: hand-computed outputs, the served (strings) and training
  (texts with their embeddings) inputs agreeing, config and SavedModel round trips, bad inputs."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls._tmp = tempfile.TemporaryDirectory()
    handles = bert_conversion.export_random_bert(cls._tmp.name, _VOCAB, hidden_size=4, num_layers=1,
                                                 num_heads=1, intermediate_size=4)
    cls._text = {"preprocess_handle": handles.preprocess, "encoder_handle": handles.encoder,
                 "max_seq_length": 8}

  @classmethod
  def tearDownClass(cls):
    cls._tmp.cleanup()
    super().tearDownClass()

  def _encoder(self, combine: str = "concat", tfidf_dim: int = 2,
               mlp_units: int = 1) -> hybrid_text_encoder.HybridTextEncoder:
    """Vocabulary [UNK], cat, dog (idf 1, no normalisation): TF-IDF = n-gram counts. The projection's kernel
    is ones on the diagonal (cat -> column 0, dog -> column 1; for one column, both), the MLP's ones (ReLU of
    the embedding's sum); biases 0."""
    encoder = hybrid_text_encoder.HybridTextEncoder(
        tfidf={"output_dim": tfidf_dim, "ngrams": 1, "l2_normalize": False,
               "vocabulary": ["[UNK]", "cat", "dog"], "idf_weights": [1.0, 1.0, 1.0]},
        mlp={"hidden_units": [mlp_units]}, text_encoder=self._text, combine=combine)
    encoder(tf.constant(["cat"]))  # Builds both branches, on the served input.
    (tfidf_kernel, tfidf_bias), (mlp_kernel, mlp_bias) = (encoder._tfidf.trainable_weights,
                                                          encoder._mlp.trainable_weights)
    tfidf_kernel.assign(np.eye(3, tfidf_dim, k=-1) if tfidf_dim == 2 else [[0.0], [1.0], [1.0]])
    tfidf_bias.assign(np.zeros([tfidf_dim]))
    mlp_kernel.assign(np.ones([4, mlp_units]))
    mlp_bias.assign(np.zeros([mlp_units]))
    return encoder

  def test_concat_is_the_tfidf_projection_then_the_embedding_mlp(self):
    encoder = self._encoder()
    embeddings = tf.constant([[0.5, 1.0, 1.5, 2.0], [-1.0, -1.0, 0.0, 0.0]])
    outputs = encoder({"text": tf.constant(["cat cat dog", "a dog"]), "embedding": embeddings})
    # TF-IDF counts (cat, dog): (2, 1) and (0, 1); MLP: relu(0.5 + 1 + 1.5 + 2) = 5 and relu(-2) = 0.
    self.assertAllClose(outputs, [[2.0, 1.0, 5.0], [0.0, 1.0, 0.0]])
    self.assertEqual(encoder.output_dim, 3)
    self.assertEqual(encoder.serving_input_spec(), tf.TensorSpec([None], tf.string, name="inputs"))

  def test_sum_adds_the_two_branches(self):
    encoder = self._encoder("sum", tfidf_dim=1)
    outputs = encoder({"text": tf.constant(["cat cat dog"]),
                       "embedding": tf.constant([[0.5, 1.0, 1.5, 2.0]])})
    self.assertAllClose(outputs, [[3.0 + 5.0]])  # cat + dog counts 2 + 1, plus the MLP's 5.
    self.assertEqual(encoder.output_dim, 1)

  def test_raw_strings_embed_with_the_frozen_encoder_as_the_training_input_does(self):
    encoder = self._encoder()
    texts = tf.constant(["the cat sat on the mat", "a dog ran"])
    frozen = text_encoder.TextEncoder(**self._text)  # What the embedding cache computes for training.
    self.assertAllClose(encoder(texts), encoder({"text": texts, "embedding": frozen(texts)}), atol=1e-6)
    self.assertEqual(encoder.text_encoder_config, text_encoder.TextEncoderConfig(**self._text))
    self.assertLen(encoder.trainable_weights, 4)  # The text encoder stays frozen.

  def test_config_round_trip(self):
    # The SavedModel round trip (a trained model's export reloaded by `load_model`, the same scores) is
    # HybridTextTrainTest's below.
    encoder = self._encoder()
    restored = hybrid_text_encoder.HybridTextEncoder.from_config(encoder.get_config())
    self.assertEqual(restored.get_config(), encoder.get_config())
    texts = tf.constant(["cat dog", "the mat"])
    restored(texts)  # Built: its weights exist.
    restored.set_weights(encoder.get_weights())
    self.assertAllClose(restored(texts), encoder(texts))

  def test_built_without_its_text_encoder_it_takes_the_embeddings_alone(self):
    # What predict builds from a hybrid export: no text encoder loaded, the same function of given embeddings.
    encoder = self._encoder()
    with mock.patch.object(text_encoder.TextEncoder, "__init__", side_effect=AssertionError("encoder built")):
      given = hybrid_text_encoder.HybridTextEncoder.from_config({**encoder.get_config(), "embedding_dim": 4})
    inputs = {"text": tf.constant(["cat cat dog", "a dog"]),
              "embedding": tf.constant([[0.5, 1.0, 1.5, 2.0], [-1.0, -1.0, 0.0, 0.0]])}
    given(inputs)  # Built: its weights exist.
    for mine, theirs in zip(given.trainable_weights, encoder.trainable_weights, strict=True):
      mine.assign(theirs)  # The TF-IDF projection's and the MLP's.
    self.assertAllClose(given(inputs), encoder(inputs))
    self.assertEqual(given.text_encoder_config, encoder.text_encoder_config)
    self.assertEqual(given.get_config(), encoder.get_config())
    with self.assertRaisesRegex(ValueError, "built without its text encoder"):
      given(tf.constant(["cat"]))

  def test_make_instance_encoder_from_config(self):
    config = encoders.InstanceEncoderConfig(
        type="hybrid", mlp=encoders.MlpEncoderConfig(hidden_units=(3,)),
        tfidf=encoders.TfidfEncoderConfig(output_dim=5, vocabulary=["cat"], idf_weights=[1.0]),
        hybrid=encoders.HybridTextEncoderConfig(text=text_encoder.TextEncoderConfig(**self._text)))
    self.assertEqual(encoders.make_instance_encoder(config).output_dim, 8)
    with self.assertRaisesRegex(ValueError, "hybrid.text"):
      encoders.make_instance_encoder(encoders.InstanceEncoderConfig(type="hybrid"))

  @parameterized.named_parameters(
      ("float_inputs", lambda e: e(tf.zeros([2, 4])), "reads raw texts"),
      ("missing_key", lambda e: e({"text": tf.constant(["cat"])}), "keys 'text' and 'embedding'"),
      ("wrong_width", lambda e: e({"text": tf.constant(["cat"]), "embedding": tf.zeros([1, 5])}),
       r"\[batch_size, 4\]"),
  )
  def test_bad_inputs_raise(self, call, message):
    with self.assertRaisesRegex(ValueError, message):
      call(self._encoder())

  def test_bad_arguments_raise(self):
    with self.assertRaisesRegex(ValueError, r"`combine` must be one of \['concat', 'sum'\], got 'max'"):
      self._encoder("max")
    with self.assertRaisesRegex(ValueError, "give them one size"):
      self._encoder("sum", tfidf_dim=2, mlp_units=1)
    with self.assertRaisesRegex(ValueError, "frozen"):
      hybrid_text_encoder.HybridTextEncoder(tfidf={}, mlp={}, text_encoder={**self._text, "trainable": True})



# --text_mode=hybrid end to end: trained on texts with their cached embeddings, exported, predicted on raw
# texts.

_REVIEWS = ["good film", "very good film", "good plot", "bad film", "very bad plot", "bad plot"] * 2
_REVIEW_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "plot", "very"]


def _write_rows(path: str) -> str:
  """`_REVIEWS` as CSV rows (text, label): negative when the text holds "bad"."""
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(["text", "label"])
    writer.writerows([text, "negative" if "bad" in text else "positive"] for text in _REVIEWS)
  return path


def _hybrid_data(root: str, handles: list[str], **overrides) -> training_data.DataConfig:
  return training_data.DataConfig(
      train_files=_write_rows(os.path.join(root, "train.csv")),
      validation_files=_write_rows(os.path.join(root, "val.csv")), text_mode="hybrid",
      text_encoder_handles=handles, max_seq_length=8, embedding_cache_dir=os.path.join(root, "embeddings"),
      row_cache_dir=os.path.join(root, "rows"), **overrides)


def _config(model_dir: str, data: training_data.DataConfig, **overrides) -> train.Rank4ClassTrainConfig:
  config = train.Rank4ClassTrainConfig(
      model_dir=model_dir, data=data,
      model=model_lib.Rank4ClassConfig(
          instance_encoder=encoders.InstanceEncoderConfig(
              type="auto", mlp=encoders.MlpEncoderConfig(hidden_units=(4,)),
              tfidf=encoders.TfidfEncoderConfig(output_dim=4)),
          interaction=interactions.InteractionConfig(type="dot"), loss=losses.LossConfig(type="softmax")),
      optimizer=train.OptimizerConfig(learning_rate=5e-2), batch_size=6, train_steps=16, eval_every=16,
      checkpoint_every=0, tensorboard=False, evaluate_test=False, best_metric="loss", verbose=0,
      # Their view of hybrid data: HybridResolveTest.test_baselines_see_the_embeddings_and_the_raw_texts.
      baselines=False,
      # The trained hybrid model is under test (its export is read): no logistic-regression candidates.
      linear_candidate=False)
  return train.Rank4ClassTrainConfig(**{**config.__dict__, **overrides})


class HybridTextTrainTest(tf.test.TestCase):
  """A tiny random BERT in the MiniLM format stands in for MiniLM (the study runs the real one)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    handles = bert_conversion.export_random_bert(os.path.join(cls.root, "bert"), _REVIEW_VOCAB, hidden_size=8,
                                                num_layers=1, num_heads=2, intermediate_size=8)
    cls.handles = [handles.preprocess, handles.encoder]

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def test_trains_on_cached_embeddings_and_the_export_predicts_raw_text_with_the_same_scores(self):
    root = self.create_tempdir().full_path
    data = _hybrid_data(root, self.handles)
    config = _config(os.path.join(root, "run"), data)
    result = train.train(config)
    self.assertEqual(result.input_kind, training_data.TEXT_AND_EMBEDDING_INPUT)
    self.assertEqual(result.embedded_texts, 24)  # Each split's texts embedded once (cache), none per step.
    # Better than the majority class (50 %) and below chance's loss log(2): it learned.
    self.assertLess(result.validation_metrics["top_1_error"], 0.5)
    self.assertLess(result.validation_metrics["loss"], 0.69)
    self.assertIsNotNone(result.calibration)
    saved = train.load_config(config.model_dir).model.instance_encoder
    # As given.
    self.assertEqual((saved.type, saved.tfidf.vocabulary, saved.hybrid.text), ("auto", None, None))

    # The export takes raw strings and runs the frozen encoder in its graph: its scores are the trained
    # model's on the training input (texts with their cached embeddings).
    texts = ["very good film", "bad plot", "unseen words"]
    predictor = predict.Predictor(config.model_dir, embedding_cache_dir=data.embedding_cache_dir)
    loaded = predictor.model  # `tf.keras.models.load_model` of the export.
    self.assertIsInstance(loaded.instance_encoder, encoders.HybridTextEncoder)
    frozen = training_data.frozen_text_encoder(data, tuple(self.handles))
    trained_scores = loaded({encoders.TEXT_KEY: tf.constant(texts), encoders.EMBEDDING_KEY: tf.constant(
        text_embeddings.embed_texts(texts, frozen, data.embedding_cache_dir))}).numpy()
    self.assertEqual([loaded.class_names[i] for i in np.argmax(trained_scores[:2], axis=1)],
                     ["positive", "negative"])
    lines = os.path.join(root, "texts.txt")
    with open(lines, "w", encoding="utf-8") as f:
      f.write("\n".join(texts) + "\n")
    output = os.path.join(root, "predictions.csv")
    predict.predict(predict.PredictConfig(model_path=config.model_dir, input_path=lines, output_path=output,
                                          top_k=2, progress=False), predictor)
    with open(output, encoding="utf-8") as f:
      rows = list(csv.DictReader(f))
    self.assertAllClose([[float(row["score_1"]), float(row["score_2"])] for row in rows],
                        -np.sort(-trained_scores, axis=1), atol=1e-5)
    self.assertEqual([row["class_1"] for row in rows[:2]], ["positive", "negative"])

    # A resumed run rebuilds the model from config.json and the training texts: the same TF-IDF vocabulary.
    run_config = train.load_config(config.model_dir)
    rebuilt = train.resolve_model_config(run_config.model, run_config.data, training_data.prepare_data(data))
    self.assertEqual(["[UNK]", *rebuilt.instance_encoder.tfidf.vocabulary[1:]],
                     loaded.instance_encoder.get_config()["tfidf"]["vocabulary"])

  def test_hybrid_on_images_is_refused_naming_the_mode(self):
    config = _config(self.create_tempdir().full_path,
                     training_data.DataConfig(dataset="digits", text_mode="hybrid"))
    with self.assertRaisesRegex(ValueError, "text_mode 'hybrid' reads texts .* the data's inputs are image"):
      train.train(config)


class HybridResolveTest(tf.test.TestCase):
  """Model choice and baselines' view of hybrid data, without MiniLM (no model is built)."""

  def _data(self) -> training_data.PreparedData:
    split = training_data.ArraySplit(
        {encoders.TEXT_KEY: np.asarray(["good", "bad"], object),
         encoders.EMBEDDING_KEY: np.eye(2, dtype=np.float32)},
        np.asarray([0, 1], np.int64))
    return training_data.PreparedData(["positive", "negative"], training_data.TEXT_AND_EMBEDDING_INPUT, split,
                                      split, None, ("/hub/preprocess", "/hub/encoder"))

  def test_another_instance_encoder_is_refused(self):
    config = _config("/tmp/unused", training_data.DataConfig(dataset="reuters_r8", text_mode="hybrid"))
    config.model.instance_encoder.type = "mlp"
    with self.assertRaisesRegex(ValueError, "need the 'hybrid' instance encoder, got 'mlp'"):
      train.resolve_model_config(config.model, config.data, self._data())

  def test_concat_output_size_is_both_branches(self):
    encoder = encoders.InstanceEncoderConfig(type="hybrid",
                                             mlp=encoders.MlpEncoderConfig(hidden_units=(8, 3)),
                                             tfidf=encoders.TfidfEncoderConfig(output_dim=5))
    self.assertEqual(train.class_embedding_dim(encoder, "dot"), 8)
    encoder.hybrid = encoders.HybridTextEncoderConfig(combine="sum")
    self.assertEqual(train.class_embedding_dim(encoder, "latent_cross"), 5)

  def test_baselines_see_the_embeddings_and_the_raw_texts(self):
    view = training_data.embedding_view(self._data())
    self.assertEqual(view.input_kind, training_data.EMBEDDING_INPUT)
    self.assertAllEqual(view.train.features, np.eye(2))
    self.assertEqual(list(view.raw_texts[0]), ["good", "bad"])

  def test_a_text_paired_with_another_rows_embedding_is_refused(self):
    with self.assertRaisesRegex(ValueError, "embedding has 1 rows for 2 labels"):
      training_data.ArraySplit({encoders.TEXT_KEY: np.asarray(["a", "b"], object),
                                encoders.EMBEDDING_KEY: np.zeros([1, 2], np.float32)},
                               np.zeros([2], np.int64))

if __name__ == "__main__":
  tf.test.main()
