"""Tests for rank4class_data.moved_modules: the old import paths of moved modules as deprecated aliases (0.9:
the image augmentation's, rank4class_data's and rank4class_engine's flat modules), and the 0.7 paths that
0.9.0 removed."""

import importlib
import sys
import warnings

import tensorflow as tf

import pairwise
import rank4class
import rank4class_data
import rank4class_engine
from rank4class_data import moved_modules

# 0.9: rank4class_data's flat modules of 0.8, by the subpackage that holds them now.
DATA_SUBPACKAGES = {
    "records": ("class_lists", "elwc", "input_pipeline", "tfrecord_files", "tfrecords"),
    "rows": ("bad_rows", "class_texts", "libsvm", "row_tables"),
    "conversion": ("conversion_files", "convert", "image_folders", "row_cache"),
    "ranking": ("feature_lists", "grouped_items", "grouped_rows", "ranking_corpus"),
}
DATA_MOVED = {f"rank4class_data.{module}": f"rank4class_data.{subpackage}.{module}"
              for subpackage, modules in DATA_SUBPACKAGES.items() for module in modules}
# 0.9: rank4class_engine's flat modules of 0.8, by the subpackage that holds them now.
ENGINE_SUBPACKAGES = {
    "loop": ("model_reuse", "preemption", "progress", "resumable_dropout", "trainer"),
    "optimization": ("lazy_adam", "learning_rates", "losses", "optimizers", "precision"),
    "runs": ("configs", "run_directory", "run_lock"),
    "statistics": ("ranking_metrics", "seed_statistics"),
}
ENGINE_MOVED = {f"rank4class_engine.{module}": f"rank4class_engine.{subpackage}.{module}"
                for subpackage, modules in ENGINE_SUBPACKAGES.items() for module in modules}


def _forget(name: str) -> None:
  """Drops an old name from sys.modules and from its package, so the next import goes through the finder."""
  sys.modules.pop(name, None)
  package, _, leaf = name.rpartition(".")
  vars(sys.modules[package]).pop(leaf, None)


class MovedModulesTest(tf.test.TestCase):

  def test_the_merged_image_augmentation_is_the_image_encoder(self):
    image_encoder = importlib.import_module("rank4class.modeling.image_encoder")
    for old in ("rank4class.modeling.image_augmentation", "rank4class.image_augmentation"):
      _forget(old)
      with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module(old)
      self.assertIs(module, image_encoder, msg=old)
      # The new module keeps its own name and spec.
      self.assertEqual(module.__spec__.name, "rank4class.modeling.image_encoder")
    # The Keras key is unchanged, so saved image models with augmentation load.
    self.assertIs(tf.keras.utils.get_registered_object("rank4class>RandomShift"), image_encoder.RandomShift)
    old_module = sys.modules["rank4class.image_augmentation"]
    self.assertIsInstance(image_encoder.RandomShift(2), old_module.RandomShift)

  def test_the_flat_data_modules_are_their_subpackage_modules(self):
    for old, new in DATA_MOVED.items():
      _forget(old)
      with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
      self.assertIs(module, importlib.import_module(new), msg=old)
      self.assertEqual(module.__spec__.name, new)
      self.assertEqual(module.__name__, new)
      deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
      self.assertLen(deprecations, 1, msg=old)
      self.assertIn(f"{old} is deprecated", str(deprecations[0].message))
      self.assertIn(new, str(deprecations[0].message))

  def test_the_old_data_paths_serve_from_imports_and_attributes(self):
    from rank4class_data.records import tfrecords
    _forget("rank4class_data.tfrecords")
    with warnings.catch_warnings():
      warnings.simplefilter("ignore", DeprecationWarning)
      from rank4class_data import tfrecords as old_module
      from rank4class_data.tfrecords import write_tfrecord
      self.assertIs(old_module, tfrecords)
      self.assertIs(write_tfrecord, tfrecords.write_tfrecord)
      _forget("rank4class_data.row_cache")
      row_cache = importlib.import_module("rank4class_data.conversion.row_cache")
      self.assertIs(rank4class_data.row_cache, row_cache)
    with self.assertRaises(AttributeError):
      rank4class_data.no_such_module  # noqa: B018

  def test_the_flat_engine_modules_are_their_subpackage_modules(self):
    for old, new in ENGINE_MOVED.items():
      _forget(old)
      with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
      self.assertIs(module, importlib.import_module(new), msg=old)
      self.assertEqual(module.__spec__.name, new)
      self.assertEqual(module.__name__, new)
      deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
      self.assertLen(deprecations, 1, msg=old)
      self.assertIn(f"{old} is deprecated", str(deprecations[0].message))
      self.assertIn(new, str(deprecations[0].message))

  def test_the_old_engine_paths_serve_from_imports_attributes_and_keras(self):
    from rank4class_engine.loop import trainer
    from rank4class_engine.optimization import losses
    _forget("rank4class_engine.trainer")
    _forget("rank4class_engine.losses")
    with warnings.catch_warnings():
      warnings.simplefilter("ignore", DeprecationWarning)
      from rank4class_engine import trainer as old_trainer
      from rank4class_engine.losses import RescaledMeanSquaredLoss
      from rank4class_engine.trainer import fit
      self.assertIs(old_trainer, trainer)
      self.assertIs(fit, trainer.fit)
      _forget("rank4class_engine.run_lock")
      run_lock = importlib.import_module("rank4class_engine.runs.run_lock")
      self.assertIs(rank4class_engine.run_lock, run_lock)
    # One class under both names, registered once: saved models with the loss load unchanged.
    self.assertIs(RescaledMeanSquaredLoss, losses.RescaledMeanSquaredLoss)
    self.assertIs(tf.keras.utils.get_registered_object("rank4class>RescaledMeanSquaredLoss"),
                  losses.RescaledMeanSquaredLoss)
    # The top-level modules did not move.
    self.assertNotIn("rank4class_engine.distribute", moved_modules.MOVED)
    self.assertNotIn("rank4class_engine.version", moved_modules.MOVED)
    with self.assertRaises(AttributeError):
      rank4class_engine.no_such_module  # noqa: B018

  def test_an_old_import_warns_once(self):
    _forget("rank4class.modeling.image_augmentation")
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      from rank4class.modeling import image_augmentation  # noqa: F401  The old path under test.
      from rank4class.modeling import image_augmentation as again  # noqa: F401
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    self.assertLen(deprecations, 1)
    self.assertIn("rank4class.modeling.image_augmentation is deprecated", str(deprecations[0].message))
    self.assertIn("rank4class.modeling.image_encoder", str(deprecations[0].message))

  def test_the_package_attribute_of_an_old_name(self):
    _forget("rank4class.image_augmentation")
    with warnings.catch_warnings():
      warnings.simplefilter("ignore", DeprecationWarning)
      self.assertIs(rank4class.image_augmentation,
                    importlib.import_module("rank4class.modeling.image_encoder"))

  def test_the_07_paths_are_gone(self):
    # Deprecated in 0.8.0, removed in 0.9.0 (CHANGELOG.md): one of each package's and of the split modules.
    for old in ("rank4class.model", "rank4class.encoders", "rank4class.training_data",
                "rank4class.full_class_evaluation", "rank4class.labelled_records", "rank4class_engine.cli",
                "rank4class_data.convert_main", "rank4class_encoders.embedding_cache_main",
                "pairwise.margin_model", "pairwise.pairwise_main", "pairwise.ranking_metrics"):
      self.assertNotIn(old, moved_modules.MOVED)
      with self.assertRaises(ImportError, msg=old):
        importlib.import_module(old)
    # Nor does a package hold a 0.7 module name as an attribute.
    with self.assertRaises(AttributeError):
      rank4class.model  # noqa: B018
    with self.assertRaises(AttributeError):
      pairwise.margin_model  # noqa: B018
    with self.assertRaises(ImportError):
      from rank4class import serving  # noqa: F401

  def test_an_unknown_old_name_still_raises(self):
    with self.assertRaises(ImportError):
      importlib.import_module("rank4class.no_such_module")
    with self.assertRaises(ImportError):
      from rank4class import no_such_module  # noqa: F401
    with self.assertRaises(AttributeError):
      rank4class.no_such_module  # noqa: B018

  def test_every_old_name_resolves(self):
    self.assertEqual(set(moved_modules.MOVED), {"rank4class.image_augmentation",
                                                "rank4class.modeling.image_augmentation", *DATA_MOVED,
                                                *ENGINE_MOVED})
    for old, new in {**DATA_MOVED, **ENGINE_MOVED}.items():
      self.assertEqual(moved_modules.MOVED[old], new)
    for old, new in moved_modules.MOVED.items():
      self.assertIsNotNone(importlib.util.find_spec(new), msg=new)
      with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        self.assertIsNotNone(importlib.import_module(old), msg=old)


if __name__ == "__main__":
  tf.test.main()
