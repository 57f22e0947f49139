"""Tests for rank4class.inference.export: two-stage and zero-shot exports of saved models, through the
library."""

import os
import tempfile

import numpy as np
import tensorflow as tf

from rank4class.inference import export, serving
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_encoders import bert_conversion, text_encoder

_C = 23
_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "big", "small", "dog", "cat",
          "bird", "fish", "tree"]
_TEXTS = ["a big dog", "a small cat", "a bird", "a fish"]


def _saved(root: str, name: str, class_encoder, interaction: str, seed: int) -> tuple[str,
                                                                                      model_lib.Rank4ClassModel]:
  tf.keras.utils.set_random_seed(seed)
  hidden = {} if interaction == "dot" else {"hidden_units": (8, 8)}
  model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)), class_encoder,
                                    interactions.get(interaction, **hidden))
  model(tf.zeros([1, 4]))
  for weight in model.class_encoder.trainable_weights:
    weight.assign(tf.random.normal(weight.shape))
  path = serving.export_saved_model(model, os.path.join(root, name, "export"), top_k=3)
  return os.path.dirname(path), model


class ExportTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls._tmp = tempfile.TemporaryDirectory()
    root = cls._tmp.name
    cls.retriever_dir, cls.retriever = _saved(root, "dot",
                                              class_encoders.get("one_hot", num_classes=_C), "dot", 0)
    cls.ranker_dir, cls.ranker = _saved(root, "lc", class_encoders.get("one_hot", num_classes=_C),
                                        "latent_cross", 1)
    handles = bert_conversion.export_random_bert(os.path.join(root, "bert"), _VOCAB, hidden_size=16,
                                                 num_layers=1, num_heads=2, intermediate_size=32)
    text = text_encoder.TextEncoderConfig(handles.preprocess, handles.encoder, max_seq_length=8)
    text_classes = class_encoders.get("metadata", class_texts=_TEXTS, text=text, output_dim=8)
    cls.text_dir, cls.text_model = _saved(root, "text", text_classes, "dot", 2)
    cls.x = np.random.default_rng(0).normal(size=[7, 4]).astype(np.float32)

  @classmethod
  def tearDownClass(cls):
    cls._tmp.cleanup()
    super().tearDownClass()

  def test_two_stage_export_reranks_the_retrievers_top_m_from_model_dirs(self):
    out = os.path.join(self.create_tempdir().full_path, "two_stage")
    summary = export.export(export.ExportConfig(self.ranker_dir, out, retriever_path=self.retriever_dir,
                                                num_candidates=6, top_k=2, chunk_size=5))
    self.assertEqual((summary["kind"], summary["num_classes"], summary["inputs"]),
                     ("two_stage", _C, ["inputs"]))
    self.assertEqual(summary["outputs"], ["candidate_ids", "class_ids", "class_names", "scores"])
    served = tf.saved_model.load(out).signatures["serving_default"](inputs=tf.constant(self.x))
    candidates = np.argsort(-self.retriever(self.x).numpy(), axis=1)[:, :6]
    self.assertAllEqual(np.sort(served["candidate_ids"].numpy(), 1), np.sort(candidates, 1))
    full = self.ranker(self.x).numpy()
    listed = np.take_along_axis(full, candidates, axis=1)
    best = np.take_along_axis(candidates, np.argsort(-listed, axis=1)[:, :2], axis=1)
    self.assertAllEqual(served["class_ids"], best)
    self.assertAllClose(served["scores"], np.take_along_axis(full, best, axis=1), atol=1e-5)

  def test_zero_shot_export_ranks_new_class_texts(self):
    out = os.path.join(self.create_tempdir().full_path, "zero_shot")
    summary = export.export(export.ExportConfig(self.text_dir, out, kind="zero_shot", top_k=2))
    self.assertEqual(summary["inputs"], ["class_texts", "inputs"])
    new = ["a tree", "a big fish", "a small bird"]
    served = tf.saved_model.load(out).signatures["serving_default"](inputs=tf.constant(self.x),
                                                                    class_texts=tf.constant(new))
    self.assertAllClose(served["scores"], self.text_model.text_class_scores(self.x, new), atol=1e-5)

  def test_bad_requests_raise_clearly_and_write_nothing(self):
    out = os.path.join(self.create_tempdir().full_path, "never")
    with self.assertRaisesRegex(ValueError, "needs the retriever model"):
      export.ExportConfig(self.ranker_dir, out)
    with self.assertRaisesRegex(ValueError,
                                r"`kind` must be one of \['two_stage', 'zero_shot'\], got 'three_stage'"):
      export.ExportConfig(self.ranker_dir, out, kind="three_stage")
    with self.assertRaisesRegex(ValueError, "`top_k` must be an integer >= 1, got 0."):
      export.ExportConfig(self.ranker_dir, out, kind="zero_shot", top_k=0)
    with self.assertRaisesRegex(ValueError, "`chunk_size` must be an integer >= 1, got 0."):
      export.ExportConfig(self.ranker_dir, out, retriever_path=self.retriever_dir, chunk_size=0)
    with self.assertRaisesRegex(ValueError, r"metadata class encoder.*is OneHotClassEncoder\.$"):
      export.export(export.ExportConfig(self.ranker_dir, out, kind="zero_shot"))
    # A run of class texts that kept the same run without them (its one-hot model) says so.
    os.makedirs(os.path.join(self.ranker_dir, "without_class_texts"))
    try:
      with self.assertRaisesRegex(ValueError, r"is OneHotClassEncoder; the run kept the same run without its "
                                  r"class texts \(better on validation\) and trained no zero-shot model: "
                                  r"`zero_shot_holdout` \(default auto\) trains one\.$"):
        export.export(export.ExportConfig(self.ranker_dir, out, kind="zero_shot"))
    finally:
      os.rmdir(os.path.join(self.ranker_dir, "without_class_texts"))
    with self.assertRaisesRegex(ValueError, "`num_candidates` must be in \\[1, num_classes=23\\]"):
      export.export(export.ExportConfig(self.ranker_dir, out, retriever_path=self.retriever_dir,
                                        num_candidates=24))
    with self.assertRaisesRegex(ValueError, "same classes"):
      export.export(export.ExportConfig(self.ranker_dir, out, retriever_path=self.text_dir))
    with self.assertRaisesRegex(FileNotFoundError, "no SavedModel"):
      export.export(export.ExportConfig(self.ranker_dir, out, retriever_path=out))
    self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
  tf.test.main()
