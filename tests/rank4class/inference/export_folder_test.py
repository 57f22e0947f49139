"""Tests of rank4class.inference.export_folder: locating an export, its inputs description and calibration
files, and the located errors of damaged folders (end-to-end loading of every kind: served_test.py)."""

import json
import os
from unittest import mock

import numpy as np
import tensorflow as tf

from rank4class.inference import export_folder
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_data.validation import DataError
from rank4class_encoders import text_encoder
from tests.rank4class import tiny_text_encoder


def _touch(path: str, content: bytes = b"graph") -> str:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(content)
  return path


class ExportInputsTest(tf.test.TestCase):
  def test_round_trip_keeps_every_field_and_drops_the_unset_ones(self):
    frozen = text_encoder.TextEncoderConfig("pre", "enc", max_seq_length=64)
    inputs = export_folder.ExportInputs(export_folder.ZERO_SHOT, export_folder.TEXT, frozen, ["a", "b"],
                                        ["text a", "text b"])
    stored = json.loads(json.dumps(inputs.to_dict()))
    self.assertNotIn("num_candidates", stored)
    self.assertEqual(export_folder.ExportInputs.from_dict(stored), inputs)

  def test_an_old_description_is_a_one_stage_export_and_unknown_keys_are_ignored(self):
    inputs = export_folder.ExportInputs.from_dict({"input": "dense", "written_by": "a later version"})
    self.assertEqual(inputs, export_folder.ExportInputs(export_folder.ONE_STAGE, export_folder.DENSE))

  def test_input_kind_from_the_signature_spec(self):
    self.assertEqual(export_folder.input_kind(tf.TensorSpec([None], tf.string), None), export_folder.TEXT)
    self.assertEqual(export_folder.input_kind(tf.TensorSpec([None, 28, 28, 1], tf.float32), None),
                     export_folder.IMAGE)
    self.assertEqual(export_folder.input_kind(tf.TensorSpec([None, 5], tf.float32), None),
                     export_folder.DENSE)
    frozen = text_encoder.TextEncoderConfig("pre", "enc")
    self.assertEqual(export_folder.input_kind(tf.TensorSpec([None, 384], tf.float32), frozen),
                     export_folder.TEXT)


class LocateTest(tf.test.TestCase):
  def test_an_export_folder_or_a_training_model_dir(self):
    root = self.create_tempdir().full_path
    export = os.path.dirname(_touch(os.path.join(root, "run", "export", "saved_model.pb")))
    self.assertEqual(export_folder.resolve_export_dir(export), export)
    self.assertEqual(export_folder.resolve_export_dir(os.path.join(root, "run")), export)
    with self.assertRaisesRegex(FileNotFoundError, "no SavedModel here or in .*nothing/export"):
      export_folder.resolve_export_dir(os.path.join(root, "nothing"))
    self.assertEqual(export_folder.model_folder(os.path.join(root, "nothing")), os.path.join(root, "nothing"))
    self.assertEqual(export_folder.model_folder(os.path.join(root, "run")), export)

  def test_an_empty_graph_is_one_located_error(self):
    export = os.path.dirname(_touch(os.path.join(self.create_tempdir().full_path, "saved_model.pb"), b""))
    with self.assertRaisesRegex(DataError, "saved_model.pb.*an empty file"):
      with export_folder.loading(export):
        self.fail("an empty graph must not be loaded")

  def test_a_damaged_graph_names_the_folder(self):
    export = os.path.dirname(_touch(os.path.join(self.create_tempdir().full_path, "saved_model.pb"),
                                    b"not a pb"))
    with self.assertRaisesRegex(DataError, "cannot load the SavedModel"):
      export_folder.load_keras_model(export)

  def test_fingerprint_follows_the_graph_and_the_variables(self):
    export = os.path.dirname(_touch(os.path.join(self.create_tempdir().full_path, "saved_model.pb")))
    index = _touch(os.path.join(export, "variables", "variables.index"), b"weights 1")
    first = export_folder.export_fingerprint(export)
    self.assertEqual(export_folder.export_fingerprint(export), first)
    _touch(index, b"weights 2")
    self.assertNotEqual(export_folder.export_fingerprint(export), first)


class FilesBesideTheModelTest(tf.test.TestCase):
  def test_inputs_description_written_and_read_back(self):
    export = self.create_tempdir().full_path
    inputs = export_folder.ExportInputs(export_folder.TWO_STAGE, export_folder.DENSE, class_names=["x", "y"],
                                        num_candidates=2)
    export_folder.write_inputs(export, inputs)
    self.assertEqual(export_folder.read_inputs(export), inputs)
    self.assertIsNone(export_folder.frozen_text_encoder(export))

  def test_bad_inputs_descriptions_name_the_file(self):
    export = self.create_tempdir().full_path
    path = _touch(os.path.join(export, export_folder.INPUTS_FILE), b"{not json")
    with self.assertRaisesRegex(DataError, "rank4class_inputs.json.*not an inputs description"):
      export_folder.read_inputs(export)
    _touch(path, json.dumps({"kind": "three_stage", "input": "text"}).encode())
    with self.assertRaisesRegex(DataError, "unknown export kind 'three_stage'"):
      export_folder.read_inputs(export)

  def test_calibration_absent_or_damaged(self):
    export = self.create_tempdir().full_path
    self.assertIsNone(export_folder.read_calibration(export))
    _touch(os.path.join(export, export_folder.CALIBRATION_FILE), b'{"temperature": "hot"}')
    with self.assertRaisesRegex(DataError, "calibration.json.*not a calibration"):
      export_folder.read_calibration(export)


class ClassTextsLoadTest(tiny_text_encoder.TinyTextEncoderTestCase):
  """A one-stage export whose classes are texts loads their embeddings from its weights, without running the
  text encoder over them again, and refuses to load when they are not there."""

  def _saved(self, zero_row: bool = False) -> tuple[str, model_lib.Rank4ClassModel]:
    model = model_lib.Rank4ClassModel(
        encoders.get("mlp", hidden_units=(8,)),
        class_encoders.get("metadata", class_texts=["a big dog", "a small cat", "a bird"], text=self.text,
                           output_dim=8),
        interactions.get("dot"))
    model(tf.zeros([1, 3]))
    weight, = (w for w in model.class_encoder.weights if "text_embeddings" in w.name)
    if zero_row:  # What a restore that left the placeholder would give.
      weight.assign(tf.tensor_scatter_nd_update(weight, [[1]], tf.zeros([1, weight.shape[1]])))
    path = os.path.join(self.create_tempdir().full_path, "export")
    model.save(path)
    return path, model

  def test_the_saved_embeddings_are_restored_and_the_encoder_is_not_run(self):
    path, model = self._saved()
    with mock.patch.object(class_encoders.MetadataClassEncoder, "_encode_texts",
                           side_effect=AssertionError("the class texts were encoded")):
      loaded = export_folder.load_keras_model(path)
    restored, saved = ({w.name: w.numpy() for w in m.class_encoder.weights} for m in (loaded, model))
    self.assertEqual(sorted(restored), sorted(saved))
    for name, value in saved.items():
      self.assertAllEqual(restored[name], value, msg=name)
    x = np.random.default_rng(0).normal(size=[4, 3]).astype(np.float32)
    self.assertAllEqual(loaded(x), model(x))
    # Outside the loader the layer computes them as before.
    rebuilt = class_encoders.MetadataClassEncoder.from_config(model.class_encoder.get_config())
    rebuilt(None)
    self.assertFalse(rebuilt.unrestored_text_embeddings())
    self.assertAllEqual(*(w.numpy() for m in (rebuilt, model.class_encoder) for w in m.weights
                          if "text_embeddings" in w.name))

  def test_embeddings_left_at_the_placeholder_are_refused_naming_the_folder(self):
    path, _ = self._saved(zero_row=True)
    with self.assertRaisesRegex(DataError, f"{path}: the saved class-text embeddings did not load"):
      export_folder.load_keras_model(path)


if __name__ == "__main__":
  tf.test.main()
