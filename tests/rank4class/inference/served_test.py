"""Tests for rank4class.inference.served: every export kind x every input format, through predict and
evaluate, against the in-memory models; the inputs description; a fresh process loading each export."""

import csv
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.evaluation import evaluate
from rank4class.inference import export, predict, served, serving
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_data.conversion import convert
from rank4class_data.validation import DataError
from rank4class_encoders import bert_conversion, text_embeddings, text_encoder
from tests.rank4class_data import elwc_lists

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "big", "small", "dog", "cat", "bird", "fish",
          "tree", "red", "blue", "old", "young"]
_CLASSES = ["dog", "cat", "bird", "fish", "tree"]
_CLASS_TEXTS = ["a big dog", "a small cat", "a blue bird", "a red fish", "an old tree"]
_NEW_CLASSES = ["pup", "kitten", "sapling"]  # Zero-shot classes never seen in training.
_NEW_TEXTS = ["a young dog", "a young cat", "a young tree"]
_WORDS = _VOCAB[5:]
_ROWS = 24
_M = 3  # Two-stage candidates: some true classes are missed by the first stage.
_PYTHON = sys.executable


def _texts(rng: np.random.Generator) -> list[str]:
  return [" ".join(rng.choice(_WORDS, size=int(rng.integers(1, 5)))) for _ in range(_ROWS)]


def _write_rows(path: str, header: list[str], rows: list[list]) -> None:
  if path.endswith(".jsonl"):
    with open(path, "w", encoding="utf-8") as f:
      for row in rows:
        f.write(json.dumps(dict(zip(header, row, strict=True))) + "\n")
    return
  with open(path, "w", encoding="utf-8", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(header)
    writer.writerows(rows)


def _numpy_ranks(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
  true = scores[np.arange(len(labels)), labels]
  return (scores > true[:, None]).sum(axis=1).astype(np.float64)


def _rank_metrics(ranks: np.ndarray) -> dict[str, float]:
  return {"top_1_error": float(np.mean(ranks >= 1)), "top_5_error": float(np.mean(ranks >= 5)),
          "mrr": float(np.mean(1.0 / (ranks + 1.0)))}


class ServedKindsTest(parameterized.TestCase, tf.test.TestCase):
  """Each export kind, on each input format it reads: predict's top classes and evaluate's metrics equal the
  in-memory model's."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls._tmp = tempfile.TemporaryDirectory()
    root = cls.root = cls._tmp.name
    cls.cache = os.path.join(root, "cache")
    handles = bert_conversion.export_random_bert(os.path.join(root, "bert"), _VOCAB, hidden_size=16,
                                                 num_layers=1, num_heads=2, intermediate_size=32)
    cls.handles = handles
    cls.frozen = text_encoder.TextEncoderConfig(handles.preprocess, handles.encoder, max_seq_length=8)
    rng = np.random.default_rng(0)
    cls.texts = _texts(rng)
    cls.labels = rng.integers(0, len(_CLASSES), size=_ROWS)
    cls.new_labels = rng.integers(0, len(_NEW_CLASSES), size=_ROWS)
    cls.features = rng.normal(size=[_ROWS, 4]).astype(np.float32)
    cls.embeddings = text_embeddings.embed_texts(cls.texts, cls.frozen, cls.cache)

    def model(instance, classes, interaction="dot", seed=0, width=8):
      tf.keras.utils.set_random_seed(seed)
      hidden = {} if interaction == "dot" else {"hidden_units": (width, width)}
      return model_lib.Rank4ClassModel(instance, classes, interactions.get(interaction, **hidden),
                                       class_names=_CLASSES)

    def one_hot():
      return class_encoders.get("one_hot", num_classes=len(_CLASSES))

    cls.models, cls.exports = {}, {}
    frozen_dot = model(encoders.get("mlp", hidden_units=(8,)), one_hot())
    frozen_dot(tf.zeros([1, 16]))
    ranker = model(encoders.get("mlp", hidden_units=(8,)), one_hot(), "latent_cross", seed=1)
    ranker(tf.zeros([1, 16]))
    text_settings = text_encoder.TextEncoderConfig(handles.preprocess, handles.encoder, max_seq_length=8)
    text = model(encoders.get("text", text=text_settings, output_dim=8), one_hot(), seed=2)
    text(tf.constant(["a dog"]))
    dense = model(encoders.get("mlp", hidden_units=(8,)), one_hot(), seed=3)
    dense(tf.zeros([1, 4]))
    text_classes = class_encoders.get("metadata", class_texts=_CLASS_TEXTS, text=text_settings, output_dim=8)
    zero = model(encoders.get("mlp", hidden_units=(8,)), text_classes, seed=4)
    zero(tf.zeros([1, 16]))
    for name, instance_model, frozen in (("frozen_text", frozen_dot, cls.frozen),
                                         ("ranker", ranker, cls.frozen),
                                         ("text", text, None), ("dense", dense, None),
                                         ("text_classes", zero, cls.frozen)):
      cls.models[name] = instance_model
      cls.exports[name] = serving.export_saved_model(instance_model, os.path.join(root, name, "export"),
                                                     top_k=3, frozen_text_encoder=frozen)
    cls.exports["two_stage"] = os.path.join(root, "two_stage")
    export.export(export.ExportConfig(cls.exports["ranker"], cls.exports["two_stage"],
                                      retriever_path=cls.exports["frozen_text"], num_candidates=_M, top_k=2))
    cls.exports["zero_shot"] = os.path.join(root, "zero_shot")
    export.export(export.ExportConfig(cls.exports["text_classes"], cls.exports["zero_shot"],
                                      kind="zero_shot"))
    cls.class_texts = os.path.join(root, "new_classes.csv")
    _write_rows(cls.class_texts, ["class", "text"],
                [list(p) for p in zip(_NEW_CLASSES, _NEW_TEXTS, strict=True)])
    cls.inputs = cls._write_inputs(root)

  @classmethod
  def _write_inputs(cls, root: str) -> dict[str, str]:
    paths = {}
    for classes, labels in (("trained", cls.labels), ("new", cls.new_labels)):
      names = _CLASSES if classes == "trained" else _NEW_CLASSES
      rows = [[str(i), t, names[y]] for i, (t, y) in enumerate(zip(cls.texts, labels, strict=True))]
      for extension in ("csv", "jsonl"):
        paths[f"{classes}.{extension}"] = os.path.join(root, f"{classes}_text.{extension}")
        _write_rows(paths[f"{classes}.{extension}"], ["id", "text", "label"], rows)
      vocab = os.path.join(root, f"{classes}_vocab.txt")
      with open(vocab, "w", encoding="utf-8") as f:
        f.write("\n".join(names) + "\n")
      paths[f"{classes}.tfrecord"] = os.path.join(root, f"{classes}_text.tfrecord")
      convert.convert_to_tfrecord(convert.ConvertConfig(paths[f"{classes}.csv"], paths[f"{classes}.tfrecord"],
                                                        text_column="text", label_column="label",
                                                        label_vocab_path=vocab))
    paths["lines"] = os.path.join(root, "texts.txt")
    with open(paths["lines"], "w", encoding="utf-8") as f:
      f.write("\n".join(cls.texts) + "\n")
    dense_rows = [[str(i), *map(float, x), _CLASSES[y]] for i, (x, y) in enumerate(zip(cls.features,
                                                                                       cls.labels,
                                                                                        strict=True))]
    for extension in ("csv", "jsonl"):
      paths[f"dense.{extension}"] = os.path.join(root, f"dense.{extension}")
      _write_rows(paths[f"dense.{extension}"], ["id", "f0", "f1", "f2", "f3", "label"], dense_rows)
    return paths

  @classmethod
  def tearDownClass(cls):
    cls._tmp.cleanup()
    super().tearDownClass()

  def _expected(self, kind: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(scores `[n, C]` of the in-memory model with -inf where a class is out of reach, true labels,
    classes)."""
    if kind in ("frozen_text", "text", "dense"):
      inputs = {"frozen_text": self.embeddings, "text": tf.constant(self.texts), "dense": self.features}[kind]
      return self.models[kind](inputs).numpy(), self.labels, _CLASSES
    if kind == "two_stage":
      candidates = np.argsort(-self.models["frozen_text"](self.embeddings).numpy(), axis=1)[:, :_M]
      scores = np.full([_ROWS, len(_CLASSES)], -np.inf)
      ranker = self.models["ranker"](self.embeddings).numpy()
      np.put_along_axis(scores, candidates, np.take_along_axis(ranker, candidates, axis=1), axis=1)
      return scores, self.labels, _CLASSES
    model = self.models["text_classes"]
    texts, labels, names = ((_CLASS_TEXTS, self.labels, _CLASSES) if kind == "zero_shot"
                            else (_NEW_TEXTS, self.new_labels, _NEW_CLASSES))
    return model.text_class_scores(self.embeddings, tf.constant(texts)).numpy(), labels, names

  @parameterized.product(
      case=[("frozen_text", "frozen_text"), ("text", "text"), ("two_stage", "two_stage"),
            ("zero_shot", "zero_shot"), ("zero_shot", "zero_shot_new_classes")],
      input_format=["csv", "jsonl", "tfrecord", "lines"])
  def test_predict_and_evaluate_agree_with_the_model(self, case, input_format):
    export_name, kind = case
    class_texts = self.class_texts if kind == "zero_shot_new_classes" else None
    classes = "new" if class_texts else "trained"
    path = self.inputs["lines"] if input_format == "lines" else self.inputs[f"{classes}.{input_format}"]
    scores, labels, names = self._expected(kind)
    out = os.path.join(self.create_tempdir().full_path, "predictions.csv")
    summary = predict.predict(predict.PredictConfig(
        self.exports[export_name], path, out, top_k=2, embedding_cache_dir=self.cache, progress=False,
        label_column=None if input_format in ("lines", "tfrecord") else "label", class_texts=class_texts,
        id_column=None if input_format in ("lines", "tfrecord") else "id"))
    self.assertEqual(summary.rows, _ROWS)
    with open(out, encoding="utf-8") as f:
      predicted = list(csv.DictReader(f))
    best = np.argsort(-scores, axis=1, kind="stable")[:, :2]
    self.assertEqual([[row["class_1"], row["class_2"]] for row in predicted],
                     [[names[i] for i in pair] for pair in best])
    self.assertAllClose([float(row["score_1"]) for row in predicted], scores[np.arange(_ROWS), best[:, 0]],
                        atol=1e-4)
    if input_format == "lines":
      return
    report = evaluate.evaluate(evaluate.EvaluateConfig(
        self.exports[export_name], path, input_format=evaluate.EXAMPLE if input_format == "tfrecord"
        else evaluate.ROWS, embedding_cache_dir=self.cache, report_path="", progress=False,
        class_texts=class_texts,
        rows=evaluate.row_cache.RowConversion(text_column="text", label_column="label"),
        row_cache_dir=os.path.join(self.root, "rows")))
    expected = _rank_metrics(np.where(np.isinf(scores[np.arange(_ROWS), labels]), np.inf,
                                      _numpy_ranks(scores, labels)))
    self.assertEqual(report["n"], _ROWS)
    for name, value in expected.items():
      self.assertAllClose(report["metrics"][name], value, atol=1e-6, msg=name)
    if kind == "two_stage":
      reached = np.isfinite(scores[np.arange(_ROWS), labels])
      self.assertAllClose(report["recall_at_m"], reached.mean())
      self.assertLess(reached.mean(), 1.0)  # The case of a class the first stage misses is exercised.
    if summary.top_1_accuracy is not None:  # Predict and evaluate agree on the same rows.
      self.assertAllClose(summary.top_1_accuracy, report["metrics"]["accuracy"])

  @parameterized.parameters("csv", "jsonl")
  def test_dense_rows(self, extension):
    out = os.path.join(self.create_tempdir().full_path, "p.csv")
    summary = predict.predict(predict.PredictConfig(self.exports["dense"], self.inputs[f"dense.{extension}"],
                                                    out, feature_columns=("f0", "f1", "f2", "f3"),
                                                    label_column="label", top_k=1, progress=False))
    scores = self.models["dense"](self.features).numpy()
    self.assertAllClose(summary.top_1_accuracy, np.mean(scores.argmax(1) == self.labels))
    report = evaluate.evaluate(evaluate.EvaluateConfig(
        self.exports["dense"], self.inputs[f"dense.{extension}"], input_format=evaluate.ROWS, report_path="",
        progress=False, rows=evaluate.row_cache.RowConversion(text_column="", label_column="label",
                                                              feature_columns=("f0", "f1", "f2", "f3")),
        row_cache_dir=os.path.join(self.root, "rows")))
    self.assertAllClose(report["metrics"]["mrr"], _rank_metrics(_numpy_ranks(scores, self.labels))["mrr"])

  def test_zero_shot_export_on_elwc_lists_of_new_classes(self):
    path = os.path.join(self.create_tempdir().full_path, "lists.elwc")
    elwc_lists.write(path, [elwc_lists.class_list(np.str_(text),
                                                  [(c, float(c == y)) for c in range(len(_NEW_CLASSES))],
                                                  context_key="text")
                            for text, y in zip(self.texts, self.new_labels, strict=True)])
    report = evaluate.evaluate(evaluate.EvaluateConfig(
        self.exports["zero_shot"], path, input_format=evaluate.ELWC, label_key="relevance", report_path="",
        embedding_cache_dir=self.cache, progress=False, class_texts=self.class_texts))
    scores, labels, _ = self._expected("zero_shot_new_classes")
    self.assertEqual((report["kind"], report["n"]), ("zero_shot", _ROWS))
    self.assertAllClose(report["metrics"]["mrr"],
                        _rank_metrics(_numpy_ranks(scores, labels))["mrr"], atol=1e-5)
    with self.assertRaisesRegex(ValueError, "a two-stage export scores only the first stage's candidates"):
      evaluate.evaluate(evaluate.EvaluateConfig(self.exports["two_stage"], path, input_format=evaluate.ELWC,
                                                label_key="relevance", report_path=""))

  def test_image_two_stage_and_zero_shot_exports_on_an_image_folder(self):
    """Image models: two stages and classes as texts (an image ranked against new class texts) from a folder
    of class-named subfolders, through predict and evaluate."""
    root = self.create_tempdir().full_path
    rng = np.random.default_rng(5)

    def image_model(classes, interaction="dot", seed=0):
      tf.keras.utils.set_random_seed(seed)
      hidden = {} if interaction == "dot" else {"hidden_units": (8, 8)}
      model = model_lib.Rank4ClassModel(encoders.get("image", filters=(4,), output_dim=8), classes,
                                        interactions.get(interaction, **hidden), class_names=_CLASSES)
      model(tf.zeros([1, 8, 8, 1], tf.uint8))
      return model

    retriever = image_model(class_encoders.get("one_hot", num_classes=len(_CLASSES)))
    ranker = image_model(class_encoders.get("one_hot", num_classes=len(_CLASSES)), "latent_cross", 1)
    texts = image_model(class_encoders.get(
        "metadata", class_texts=_CLASS_TEXTS,
        text=text_encoder.TextEncoderConfig(self.handles.preprocess, self.handles.encoder, max_seq_length=8),
        output_dim=8), seed=2)
    paths = {}
    for name, model in (("retriever", retriever), ("ranker", ranker), ("texts", texts)):
      paths[name] = serving.export_saved_model(model, os.path.join(root, name, "export"),
                                               input_dtype=tf.uint8)
    paths["two_stage"], paths["zero_shot"] = os.path.join(root, "two_stage"), os.path.join(root, "zero_shot")
    export.export(export.ExportConfig(paths["ranker"], paths["two_stage"], retriever_path=paths["retriever"],
                                      num_candidates=_M, top_k=2))
    export.export(export.ExportConfig(paths["texts"], paths["zero_shot"], kind="zero_shot"))
    self.assertEqual([served.read_inputs(paths[k]).input for k in ("two_stage", "zero_shot")],
                     ["image", "image"])
    images, labels = (
      rng.integers(0, 255, size=[12, 8, 8, 1]).astype(np.uint8),
      np.arange(12) % len(_NEW_CLASSES),
    )
    folders = {}
    for kind, names in (("two_stage", _CLASSES), ("zero_shot", _NEW_CLASSES)):
      folders[kind] = os.path.join(root, f"{kind}_images")
      for i, (image, label) in enumerate(zip(images, labels, strict=True)):
        os.makedirs(os.path.join(folders[kind], names[label]), exist_ok=True)
        with open(os.path.join(folders[kind], names[label], f"{i:02d}.png"), "wb") as f:
          f.write(tf.io.encode_png(image).numpy())
    ranker_scores = ranker(images).numpy()
    candidates = np.argsort(-retriever(images).numpy(), axis=1)[:, :_M]
    staged = np.full_like(ranker_scores, -np.inf)
    np.put_along_axis(staged, candidates, np.take_along_axis(ranker_scores, candidates, axis=1), axis=1)
    expected = {"two_stage": (staged, _CLASSES), "zero_shot": (
        texts.text_class_scores(images, tf.constant(_NEW_TEXTS)).numpy(), _NEW_CLASSES)}
    for kind, (scores, names) in expected.items():
      class_texts = self.class_texts if kind == "zero_shot" else None
      # The folder's: by class name, then file.
      order = sorted(range(12), key=lambda i: (names[labels[i]], i))
      out = os.path.join(root, f"{kind}.csv")
      summary = predict.predict(predict.PredictConfig(paths[kind], folders[kind], out, top_k=1,
                                                      progress=False, class_texts=class_texts,
                                                      embedding_cache_dir=self.cache))
      with open(out, encoding="utf-8") as f:
        predicted = [row["class_1"] for row in csv.DictReader(f)]
      self.assertEqual(predicted, [names[int(np.argmax(scores[i]))] for i in order], kind)
      # The order of the rows is checked, not only one class.
      self.assertGreater(len(set(predicted)), 1, kind)
      report = evaluate.evaluate(evaluate.EvaluateConfig(
          paths[kind], folders[kind], input_format=evaluate.ROWS, report_path="", progress=False,
          class_texts=class_texts, embedding_cache_dir=self.cache, row_cache_dir=os.path.join(root, "rows")))
      ranks = np.where(np.isinf(scores[np.arange(12), labels]), np.inf, _numpy_ranks(scores, labels))
      self.assertAllClose(report["metrics"]["mrr"], _rank_metrics(ranks)["mrr"], atol=1e-6, msg=kind)
      self.assertAllClose(summary.top_1_accuracy, report["metrics"]["accuracy"], msg=kind)

  def test_every_export_describes_its_inputs(self):
    kinds = {name: served.read_inputs(path) for name, path in self.exports.items()}
    self.assertEqual({name: (i.kind, i.input, i.frozen_text_encoder is not None)
                      for name, i in kinds.items()},
                     {"frozen_text": ("one_stage", "text", True), "ranker": ("one_stage", "text", True),
                      "text": ("one_stage", "text", False), "dense": ("one_stage", "dense", False),
                      "text_classes": ("one_stage", "text", True), "two_stage": ("two_stage", "text", True),
                      "zero_shot": ("zero_shot", "text", True)})
    self.assertEqual((kinds["two_stage"].class_names, kinds["two_stage"].num_candidates), (_CLASSES, _M))
    self.assertEqual((kinds["zero_shot"].class_names, kinds["zero_shot"].class_texts),
                     (_CLASSES, _CLASS_TEXTS))

  def test_zero_shot_class_vectors_are_computed_once_per_class_set(self):
    cache = self.create_tempdir().full_path
    first = served.load(self.exports["zero_shot"], self.class_texts, cache).class_vectors
    expected = self.models["text_classes"].class_encoder.encode_class_texts(_NEW_TEXTS).numpy()
    self.assertAllClose(first, expected, atol=1e-5)
    again = served.load(self.exports["zero_shot"], self.class_texts, cache)

    def embed_again(**kwargs):
      raise AssertionError(f"class texts embedded again: {kwargs}")

    again._embed = embed_again  # The second load reads every vector from the cache.
    self.assertAllEqual(again.class_vectors, first)

  def test_misuse_is_one_clear_error(self):
    with self.assertRaisesRegex(ValueError, "class texts apply to zero-shot exports.*one_stage export"):
      served.load(self.exports["frozen_text"], self.class_texts)
    with self.assertRaisesRegex(ValueError, "read different inputs"):
      export.export(export.ExportConfig(self.exports["ranker"], os.path.join(self.root, "never"),
                                        retriever_path=self.exports["dense"], num_candidates=2))
    self.assertFalse(os.path.exists(os.path.join(self.root, "never")))
    with self.assertRaisesRegex(ValueError, "a zero_shot export; give the trained model"):
      export.export(export.ExportConfig(self.exports["zero_shot"], os.path.join(self.root, "never"),
                                        kind="zero_shot"))
    with self.assertRaisesRegex(DataError, "a two_stage export, not a trained model"):
      served.load_keras_model(self.exports["two_stage"])

  def test_exports_load_in_a_fresh_process(self):
    """The raw serving signature of each kind without `import rank4class`, and `load_model` of a one-stage
    export after it."""
    script = (
        "import json, sys\n"
        "import numpy as np\n"
        "import tensorflow as tf\n"
        "exports, vectors = json.loads(sys.argv[1]), np.asarray(json.loads(sys.argv[2]), np.float32)\n"
        "out = {}\n"
        "out['two_stage'] = tf.saved_model.load(exports['two_stage']).signatures['serving_default']("
        "inputs=tf.constant(vectors))['class_ids'].numpy().tolist()\n"
        "import tensorflow_text  # The zero-shot class tower tokenizes class texts with TF Text's ops.\n"
        "zero = tf.saved_model.load(exports['zero_shot']).signatures['serving_default']("
        "inputs=tf.constant(vectors), class_texts=tf.constant(['a young dog', 'a young cat', 'a young "
        "tree']))\nout['zero_shot'] = zero['scores'].numpy().tolist()\n"
        "import rank4class\n"
        "model = tf.keras.models.load_model(exports['frozen_text'], compile=False)\n"
        "out['frozen_text'] = model(vectors).numpy().tolist()\n"
        "print(json.dumps(out))\n")
    vectors = self.embeddings[:4]
    result = subprocess.run([_PYTHON, "-c", script, json.dumps(self.exports), json.dumps(vectors.tolist())],
                            capture_output=True, text=True, timeout=240, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    out = json.loads(result.stdout.strip().splitlines()[-1])
    self.assertAllClose(out["frozen_text"], self.models["frozen_text"](vectors).numpy(), atol=1e-5)
    self.assertAllClose(out["zero_shot"], self.models["text_classes"].text_class_scores(
        vectors, tf.constant(_NEW_TEXTS)).numpy(), atol=1e-5)
    scores, _, _ = self._expected("two_stage")
    self.assertAllEqual(out["two_stage"], np.argsort(-scores[:4], axis=1, kind="stable")[:, :2])


if __name__ == "__main__":
  tf.test.main()
