"""Runs the serving guide's "From a Keras 3 project" code (docs/guide/serving.md) as printed, in a Python
process of its own that imports Keras 3 first, on a small export: the Keras 3 layer's top-K is the export's
ranking, the toolkit's `Predictor` agrees with it in the same process, and fine-tuning the export inside
Keras 3 still fails as the page says. This module never imports Keras 3 itself: the code runs from a file it
writes."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np

from rank4class.inference import serving
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_data import stack

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guide" / "serving.md"
MARKER = "<!-- keras3-project -->"
# The export path the page's blocks name; the test puts a real export there.
PAGE_EXPORT = '"/tmp/run/export"'
CLASSES = ["cat", "dog", "eel"]

# Appended to the page's blocks: what they computed, as JSON on the last line of stdout.
CHECKS = """
import json as _json
import tensorflow as _tf

_result = {"keras": keras.__version__, "tf_keras": _tf.keras.__name__,
           "layer_names": np.asarray(ranked["class_names"]).astype(str).tolist(),
           "layer_scores": np.asarray(ranked["scores"]).tolist(),
           "predictor_names": np.asarray(names).astype(str).tolist(),
           "predictor_scores": np.asarray(scores).tolist()}
_tuned = keras.layers.TFSMLayer({export}, call_endpoint="serving_default", trainable=True)
_x = keras.Input(shape=(2,), name="inputs")
_model = keras.Model(_x, _tuned(_x)["scores"])
_model.compile(optimizer="adam", loss="mse")
try:
  _model.fit(np.zeros([2, 2], np.float32), np.zeros([2, 3], np.float32), epochs=1, verbose=0)
  _result["fine_tuning"] = "trained"
except ValueError as error:
  _result["fine_tuning"] = str(error)
print(_json.dumps(_result))
"""


def page_blocks(page: str) -> list[str]:
  """The fenced Python blocks of the section that `MARKER` starts, in order."""
  section = page.split(MARKER, 1)[1].split("\n## ", 1)[0]
  return [part.split("```", 1)[0] for part in section.split("```python\n")[1:]]


class Keras3ProjectTest(tf.test.TestCase):
  """The page's blocks, run as printed (the export path replaced) after `import keras`, in a new process."""

  def setUp(self):
    super().setUp()
    if stack.installed_stack() != stack.CURRENT:
      self.skipTest("the reference stack (TensorFlow 2.15) has no Keras 3: its `keras` is Keras 2.15, so the "
                    "page's Keras 3 code applies to the current stack only")

  def test_the_pages_code_ranks_like_the_export_and_fine_tuning_fails_as_it_says(self):
    blocks = page_blocks(PAGE.read_text(encoding="utf-8"))
    self.assertLen(blocks, 2)
    for block in blocks:
      self.assertIn(PAGE_EXPORT, block)
      self.assertTrue(block.startswith("import keras\n"), msg=block)  # Keras 3 first, as a project does.
    tf.keras.utils.set_random_seed(0)
    model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)),
                                      class_encoders.get("one_hot", num_classes=3), interactions.get("dot"),
                                      class_names=CLASSES)
    model(tf.zeros([1, 2]))
    root = self.create_tempdir().full_path
    export = serving.export_saved_model(model, os.path.join(root, "export"), top_k=3)
    script = "\n".join(block.replace(PAGE_EXPORT, repr(export)) for block in blocks)
    script += textwrap.dedent(CHECKS).replace("{export}", repr(export))
    path = os.path.join(root, "keras3_project.py")
    with open(path, "w", encoding="utf-8") as f:
      f.write(script)
    # A clean environment for the variable the toolkit sets: the process starts as a Keras 3 project does.
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    run = subprocess.run([sys.executable, path], cwd=root, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    self.assertEqual(run.returncode, 0, msg=run.stderr[-3000:])
    result = json.loads(run.stdout.strip().splitlines()[-1])
    self.assertStartsWith(result["keras"], "3.")
    self.assertStartsWith(result["tf_keras"], "tf_keras")  # tf.keras is Keras 2 once the toolkit is imported.
    features = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
    scores = model(features).numpy()
    expected = [[CLASSES[i] for i in np.argsort(-row)] for row in scores]
    self.assertEqual(result["layer_names"], expected)
    self.assertAllClose(result["layer_scores"], -np.sort(-scores, axis=1), atol=1e-5)
    self.assertEqual(result["predictor_names"], [row[:2] for row in expected])
    self.assertAllClose(result["predictor_scores"], np.asarray(result["layer_scores"])[:, :2], atol=1e-6)
    self.assertIn(":0_", result["fine_tuning"])
    self.assertIn("is not a valid scope name", result["fine_tuning"])


if __name__ == "__main__":
  tf.test.main()
