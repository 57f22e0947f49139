"""Tests for rank4class.studies.study_config: the presets and the refused settings."""

import tensorflow as tf
from absl.testing import parameterized

from rank4class.studies import study_config


class ConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_quick_preset_is_the_15_cell_grid_on_r8_with_two_seeds(self):
    config = study_config.preset("quick", "/out")
    self.assertEqual([d.name for d in config.datasets], ["reuters_r8"])
    self.assertEqual(len(config.losses) * len(config.interactions), 15)
    self.assertLen(config.seeds, 2)
    self.assertEqual(config.datasets[0].text_mode, "frozen")

  def test_full_preset_covers_the_three_data_sets_and_fine_tuning(self):
    config = study_config.preset("full", "/out")
    self.assertEqual([d.name for d in config.datasets], ["reuters_r8", "fashion_mnist", "20newsgroups"])
    self.assertEqual([(ft.dataset, ft.cells) for ft in config.finetune],
                     [("reuters_r8", ("baseline", "best")), ("20newsgroups", ("baseline", "best"))])

  @parameterized.named_parameters(
      ("preset", lambda: study_config.preset("huge", "/o"),
       r"`preset` must be one of \['quick', 'full'\], got 'huge'"),
      ("loss", lambda: study_config.StudyConfig("/o", losses=("hinge",)),
       r"`losses` must be one of \[.*\], got 'hinge'"),
      ("interaction", lambda: study_config.StudyConfig("/o", interactions=("bilinear",)),
       "`interactions` must be one of"),
      ("dataset", lambda: study_config.StudyDataset("mnist"),
       r"`dataset` must be one of \[.*'reuters_r8'.*\], got 'mnist'"),
      ("finetune_image",
       lambda: study_config.StudyConfig("/o", finetune=[study_config.FinetuneConfig("digits")]),
       r"`dataset` must be one of \['reuters_r8', .*\], got 'digits'"),
      ("finetune_twice",
       lambda: study_config.StudyConfig("/o", finetune=[study_config.FinetuneConfig(),
                                                        study_config.FinetuneConfig()]),
       "At most one fine-tuning entry per data set"),
  )
  def test_bad_config_raises(self, make, message):
    with self.assertRaisesRegex(ValueError, message):
      make()


if __name__ == "__main__":
  tf.test.main()
