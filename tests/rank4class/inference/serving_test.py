"""Tests of rank4class.inference.serving: the top-K signature, atomic export, and serving from a fresh
process."""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from tensorflow.core.protobuf import saved_model_pb2

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class.inference import serving
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_encoders import bert_conversion, text_encoder

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "the", "cat", "dog", "sat", "ran", "on", "mat"]
_CLASS_NAMES = ["cat", "dog", "bird", "fish", "horse"]
_CROSS_STACK_DIR = os.path.join(os.path.dirname(__file__), "testdata", "cross_stack")

# Runs in a fresh interpreter: serves each export through its signature with plain TensorFlow (plus
# tensorflow_text, whose ops the text preprocessing uses), then reloads it as a Keras model after
# `import rank4class` alone, and writes what it got as JSON.
_FRESH_PROCESS_SCRIPT = """
import json, sys
import numpy as np
import tensorflow as tf
from absl.testing import parameterized
import tensorflow_text  # noqa: F401  (registers the TF Text ops of the BERT preprocessing)

requests = json.loads(sys.argv[1])
results = {}
for name, request in requests.items():
  inputs = tf.constant(np.asarray(request["inputs"], dtype=request["dtype"]))
  outputs = tf.saved_model.load(request["path"]).signatures["serving_default"](inputs=inputs)
  results[name] = {key: value.numpy().tolist() for key, value in outputs.items()}
  results[name]["class_names"] = [[n.decode() for n in row] for row in results[name]["class_names"]]

import rank4class  # noqa: E402  (registration must come from the package import alone)
for name, request in requests.items():
  model = tf.keras.models.load_model(request["path"])
  results[name]["keras_class"] = type(model).__name__
  inputs = tf.constant(np.asarray(request["inputs"], dtype=request["dtype"]))
  results[name]["keras_scores"] = model(inputs).numpy().tolist()
print("RESULTS " + json.dumps(results))
"""


def _mlp_model(num_classes: int = len(_CLASS_NAMES)) -> model_lib.Rank4ClassModel:
  model = model_lib.Rank4ClassModel(
    encoders.get("mlp", hidden_units=(8,)),
    class_encoders.get("one_hot", num_classes=num_classes),
    interactions.get("dot"),
    class_names=_CLASS_NAMES[:num_classes],
  )
  model(np.zeros([1, 3], np.float32))
  return model


def _traced_layer_functions(export_dir: str) -> int:
  """How many of Keras' traced layer call functions the export's graph holds."""
  saved_model = saved_model_pb2.SavedModel()
  with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
    saved_model.ParseFromString(f.read())
  return sum("call_and_return_conditional_losses" in function.signature.name
             for function in saved_model.meta_graphs[0].graph_def.library.function)


class ServingFunctionTest(tf.test.TestCase):
  def test_top_k_names_ids_and_scores_agree_with_rank(self):
    model = _mlp_model()
    x = np.random.default_rng(0).normal(size=[4, 3]).astype(np.float32)
    outputs = serving.make_serving_function(model, top_k=3)(x)
    ids, scores = model.rank(x, k=3)
    self.assertAllEqual(outputs["class_ids"], ids)
    self.assertAllClose(outputs["scores"], scores)
    self.assertAllEqual(
      outputs["class_names"], np.array(_CLASS_NAMES, dtype=object)[ids.numpy()].astype(bytes)
    )

  def test_top_k_capped_at_num_classes(self):
    outputs = serving.make_serving_function(_mlp_model(num_classes=2), top_k=5)(np.zeros([1, 3], np.float32))
    self.assertEqual(outputs["class_ids"].shape, [1, 2])

  def test_input_spec_follows_built_encoder(self):
    serve = serving.make_serving_function(_mlp_model(), input_dtype=tf.float64)
    spec = serve.get_concrete_function().structured_input_signature[0][0]
    self.assertEqual((spec.shape.as_list(), spec.dtype), ([None, 3], tf.float64))

  def test_bad_top_k_raises(self):
    with self.assertRaisesRegex(ValueError, "`top_k` must be an integer >= 1, got 0."):
      serving.make_serving_function(_mlp_model(), top_k=0)

  def test_unbuilt_model_raises(self):
    model = model_lib.Rank4ClassModel(
      encoders.get("mlp"), class_encoders.get("one_hot", num_classes=3), interactions.get("dot")
    )
    with self.assertRaisesRegex(ValueError, "built"):
      serving.make_serving_function(model)


class ExportTest(tf.test.TestCase):
  def test_existing_directory_needs_overwrite_and_no_staging_is_left(self):
    parent = self.create_tempdir().full_path
    export_dir = os.path.join(parent, "export")
    model = _mlp_model()
    serving.export_saved_model(model, export_dir, top_k=2)
    with self.assertRaisesRegex(FileExistsError, "overwrite"):
      serving.export_saved_model(model, export_dir)
    serving.export_saved_model(model, export_dir, top_k=4, overwrite=True)
    self.assertEqual(os.listdir(parent), ["export"])
    outputs = serving.load_serving_function(export_dir)(tf.zeros([2, 3]))
    self.assertEqual(outputs["class_names"].shape, [2, 4])


class FreshProcessServingTest(tf.test.TestCase):
  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls._tmp = tempfile.TemporaryDirectory()
    cls._handles = bert_conversion.export_random_bert(
      os.path.join(cls._tmp.name, "bert"),
      _VOCAB,
      hidden_size=16,
      num_layers=1,
      num_heads=2,
      intermediate_size=32,
    )

  @classmethod
  def tearDownClass(cls):
    cls._tmp.cleanup()
    super().tearDownClass()

  def test_image_and_text_exports_serve_in_fresh_process(self):
    tf.keras.utils.set_random_seed(0)
    image_model = model_lib.Rank4ClassModel(
      encoders.get("image", filters=(4, 8), rescale=1.0 / 255.0),
      class_encoders.get("one_hot", num_classes=5),
      interactions.get("latent_cross", hidden_units=(8, 8)),
      class_names=_CLASS_NAMES,
    )
    images = np.random.default_rng(0).integers(0, 256, size=[3, 8, 8, 1]).astype(np.uint8)
    image_model(images)
    text_model = model_lib.Rank4ClassModel(
      encoders.get(
        "text",
        text=text_encoder.TextEncoderConfig(self._handles.preprocess, self._handles.encoder,
                                            max_seq_length=8),
      ),
      class_encoders.get(
        "metadata",
        class_texts=["a cat", "a dog", "the mat"],
        text=text_encoder.TextEncoderConfig(self._handles.preprocess, self._handles.encoder,
                                            max_seq_length=8),
      ),
      interactions.get("concat", hidden_units=(8, 8)),
      class_names=["cat", "dog", "mat"],
    )
    texts = ["a cat sat", "the dog ran", "on the mat"]
    text_model(tf.constant(texts))

    parent = self.create_tempdir().full_path
    requests = {
      "image": {
        "path": serving.export_saved_model(
          image_model, os.path.join(parent, "image"), top_k=2, input_dtype=tf.uint8
        ),
        "inputs": images.tolist(),
        "dtype": "uint8",
      },
      "text": {
        "path": serving.export_saved_model(text_model, os.path.join(parent, "text"), top_k=2),
        "inputs": texts,
        "dtype": "object",
      },
    }
    expected = {"image": image_model(images), "text": text_model(tf.constant(texts))}
    names = {"image": _CLASS_NAMES, "text": ["cat", "dog", "mat"]}
    # Keras' traces of every layer only where a TF Hub layer needs them; the image model saves its configs.
    traced = {kind: _traced_layer_functions(request["path"]) > 0 for kind, request in requests.items()}
    self.assertEqual(traced, {"image": False, "text": True})

    completed = subprocess.run(
      [sys.executable, "-c", _FRESH_PROCESS_SCRIPT, json.dumps(requests)],
      capture_output=True,
      text=True,
      timeout=600,
      check=False,
    )
    self.assertEqual(completed.returncode, 0, msg=completed.stderr[-3000:])
    line = [row for row in completed.stdout.splitlines() if row.startswith("RESULTS ")][-1]
    results = json.loads(line[len("RESULTS ") :])
    for kind in ("image", "text"):
      scores = expected[kind].numpy()
      top_ids = np.argsort(-scores, axis=1)[:, :2]
      self.assertAllEqual(results[kind]["class_ids"], top_ids, msg=kind)
      self.assertAllClose(results[kind]["scores"], np.take_along_axis(scores, top_ids, axis=1), atol=1e-5)
      self.assertEqual(results[kind]["class_names"], [[names[kind][i] for i in row] for row in top_ids])
      self.assertEqual(results[kind]["keras_class"], "Rank4ClassModel")
      self.assertAllClose(results[kind]["keras_scores"], scores, atol=1e-5)


class CrossStackLoadingTest(tf.test.TestCase, parameterized.TestCase):
  """Exports written on each stack (scripts/make_cross_stack_fixture.py) load and score on the stack under
  test."""

  @parameterized.parameters("reference", "current")
  def test_saved_model_signature_serves_the_same_top_k(self, written_on):
    fixture = os.path.join(_CROSS_STACK_DIR, written_on)
    expected = json.loads(open(os.path.join(fixture, "expected.json")).read())
    inputs = tf.constant(np.load(os.path.join(fixture, "inputs.npy")))
    outputs = tf.saved_model.load(os.path.join(fixture, "saved_model")).signatures["serving_default"](
      inputs=inputs
    )
    self.assertEqual([[n.decode() for n in row] for row in outputs["class_names"].numpy()],
                     expected["class_names"])
    self.assertAllClose(outputs["scores"], expected["top_scores"], rtol=1e-5, atol=1e-6)

  @parameterized.parameters(("reference", "model.keras"), ("current", "model.keras"),
                            ("reference", "saved_model"), ("current", "saved_model"))
  def test_keras_model_loads_with_the_same_scores(self, written_on, name):
    fixture = os.path.join(_CROSS_STACK_DIR, written_on)
    expected = json.loads(open(os.path.join(fixture, "expected.json")).read())
    model = tf.keras.models.load_model(os.path.join(fixture, name))
    self.assertIsInstance(model, model_lib.Rank4ClassModel)
    self.assertAllClose(model(np.load(os.path.join(fixture, "inputs.npy"))), expected["scores"], rtol=1e-5,
                        atol=1e-6)


if __name__ == "__main__":
  tf.test.main()
