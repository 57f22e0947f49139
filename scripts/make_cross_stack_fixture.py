"""Writes the cross-stack loading fixture of the running stack:
tests/rank4class/inference/testdata/cross_stack/<stack>/.

A small Rank4Class model (MLP encoder, one-hot classes, latent cross, ApproxNDCG, one epoch) exported with
`rank4class.inference.serving.export_saved_model` and saved as `.keras`, with its inputs and outputs.
`tests/rank4class/inference/serving_test.py` loads the fixture of each stack on the stack under test, so CI
proves what loads where. Run once per stack after a change of the export format:

  .venv-reference/bin/python scripts/make_cross_stack_fixture.py
  .venv-current/bin/python scripts/make_cross_stack_fixture.py
"""

import json
import os
import pathlib
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import rank4class  # noqa: E402,F401  (before any tf.keras use: selects Keras 2 on the current stack)
from rank4class.inference import serving  # noqa: E402
from rank4class.modeling import class_encoders, encoders, interactions  # noqa: E402
from rank4class.modeling import model as model_lib  # noqa: E402
from rank4class_data import stack  # noqa: E402
from rank4class_engine.optimization import losses  # noqa: E402

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLASS_NAMES = ["cat", "dog", "bird", "fish"]


def main() -> None:
  info = stack.check_tensorflow_stack()
  out = ROOT / "tests" / "rank4class" / "inference" / "testdata" / "cross_stack" / info.name
  shutil.rmtree(out, ignore_errors=True)
  out.mkdir(parents=True)
  tf.keras.utils.set_random_seed(0)
  model = model_lib.Rank4ClassModel(
    encoders.get("mlp", hidden_units=(8,)),
    class_encoders.get("one_hot", num_classes=len(CLASS_NAMES)),
    interactions.get("latent_cross", hidden_units=(8,)),
    class_names=CLASS_NAMES,
  )
  inputs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
  model.compile("adam", loss=losses.get("approx_ndcg"))
  model.fit(inputs, np.array([0, 1, 2, 3, 0]), epochs=1, verbose=0)
  serving.export_saved_model(model, str(out / "saved_model"), top_k=2)
  model.save(out / "model.keras")
  outputs = tf.saved_model.load(str(out / "saved_model")).signatures["serving_default"](
    inputs=tf.constant(inputs)
  )
  np.save(out / "inputs.npy", inputs)
  expected = {
    "stack": info.summary(),
    "scores": model(inputs).numpy().tolist(),
    "top_scores": outputs["scores"].numpy().tolist(),
    "class_names": [[n.decode() for n in row] for row in outputs["class_names"].numpy()],
  }
  (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
  print(f"wrote {out} ({info.summary()})")


if __name__ == "__main__":
  main()
