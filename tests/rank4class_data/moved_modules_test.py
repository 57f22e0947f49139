"""Tests for rank4class_data.moved_modules: the old import paths of moved modules as deprecated aliases."""

import importlib
import sys
import warnings

import tensorflow as tf

import rank4class
import rank4class.modeling.model
from rank4class.modeling import encoders
from rank4class.training import training_data as training_data_lib
from rank4class_data import classification_data, moved_modules


def _forget(name: str) -> None:
  """Drops an old name from sys.modules and from its package, so the next import goes through the finder."""
  sys.modules.pop(name, None)
  package, _, leaf = name.rpartition(".")
  vars(sys.modules[package]).pop(leaf, None)


class MovedModulesTest(tf.test.TestCase):

  def test_an_old_name_is_the_same_module_object(self):
    _forget("rank4class.model")
    import rank4class.model  # noqa: F401  The old path under test.

    self.assertIs(sys.modules["rank4class.model"], rank4class.modeling.model)
    self.assertIs(importlib.import_module("rank4class.model").Rank4ClassModel,
                  rank4class.modeling.model.Rank4ClassModel)
    # The new module keeps its own name and spec.
    self.assertEqual(rank4class.modeling.model.__spec__.name, "rank4class.modeling.model")
    self.assertEqual(rank4class.modeling.model.__name__, "rank4class.modeling.model")

  def test_isinstance_holds_across_both_names(self):
    _forget("rank4class.encoders")
    old = importlib.import_module("rank4class.encoders")
    encoder = encoders.MlpEncoder(hidden_units=(2,))
    self.assertIsInstance(encoder, old.MlpEncoder)
    self.assertIs(tf.keras.utils.get_registered_object("rank4class>MlpEncoder"), old.MlpEncoder)

  def test_an_old_import_warns_once(self):
    _forget("rank4class.training_data")
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      from rank4class import training_data  # noqa: F401  The old path under test.
      from rank4class import training_data as again  # noqa: F401
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    self.assertLen(deprecations, 1)
    self.assertIn("rank4class.training_data is deprecated", str(deprecations[0].message))
    self.assertIn("rank4class_data.classification_data", str(deprecations[0].message))

  def test_a_split_module_finds_a_name_in_its_new_homes(self):
    _forget("rank4class.training_data")
    old = importlib.import_module("rank4class.training_data")
    self.assertIs(old.DataConfig, classification_data.DataConfig)
    self.assertIs(old.prepare_data, training_data_lib.prepare_data)
    _forget("rank4class.full_class_evaluation")
    scoring = importlib.import_module("rank4class.full_class_evaluation")
    self.assertIs(scoring.chunked_top_k,
                  importlib.import_module("rank4class.inference.full_class_scoring").chunked_top_k)
    self.assertIs(scoring.evaluate_full_classes,
                  importlib.import_module("rank4class.evaluation.full_class_evaluation").evaluate_full_classes)
    with self.assertRaisesRegex(AttributeError, "no attribute 'not_a_name'"):
      _ = old.not_a_name

  def test_the_other_packages_old_names(self):
    for old, new in (("rank4class_engine.cli", "rank4class_cli.cli"),
                     ("rank4class_data.convert_main", "rank4class_cli.binaries.convert_main"),
                     ("pairwise.pairwise_main", "rank4class_cli.binaries.pairwise_main"),
                     ("rank4class.labelled_records", "rank4class_data.labelled_records")):
      self.assertIs(importlib.import_module(old), importlib.import_module(new), msg=old)

  def test_the_merged_image_augmentation_is_the_image_encoder(self):
    image_encoder = importlib.import_module("rank4class.modeling.image_encoder")
    for old in ("rank4class.modeling.image_augmentation", "rank4class.image_augmentation"):
      _forget(old)
      with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module(old)
      self.assertIs(module, image_encoder, msg=old)
    # The Keras key is unchanged, so saved image models with augmentation load.
    self.assertIs(tf.keras.utils.get_registered_object("rank4class>RandomShift"), image_encoder.RandomShift)

  def test_an_unknown_old_name_still_raises(self):
    with self.assertRaises(ImportError):
      importlib.import_module("rank4class.no_such_module")
    with self.assertRaises(ImportError):
      from rank4class import no_such_module  # noqa: F401
    with self.assertRaises(AttributeError):
      rank4class.no_such_module  # noqa: B018

  def test_every_old_name_resolves(self):
    for old, new in moved_modules.MOVED.items():
      homes = (new,) if isinstance(new, str) else new
      for home in homes:
        self.assertIsNotNone(importlib.util.find_spec(home), msg=home)
      self.assertIsNotNone(importlib.import_module(old), msg=old)


if __name__ == "__main__":
  tf.test.main()
