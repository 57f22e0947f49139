"""Tests for rank4class_data.datasets.newsgroup_classes: 20 Newsgroups with described classes, some held
out."""

import csv
import os

import tensorflow as tf

from rank4class_data.datasets import classification, newsgroup_classes


def _read(path: str) -> list[dict[str, str]]:
  with open(path, encoding="utf-8") as f:
    return list(csv.DictReader(f))


class WriteZeroShotFilesTest(tf.test.TestCase):

  def test_files_split_the_described_newsgroups_into_seen_and_new(self):
    folder = self.create_tempdir().full_path
    paths = newsgroup_classes.write_zero_shot_files(folder, num_unseen=4, seed=3, max_per_class=2)
    self.assertEqual(sorted(paths), ["classes", "new", "new_classes", "test", "train"])
    seen = {row["class"]: row["text"] for row in _read(paths["classes"])}
    new = {row["class"]: row["text"] for row in _read(paths["new_classes"])}
    self.assertEqual((len(seen), len(new)), (16, 4))
    self.assertEqual({**seen, **new}, newsgroup_classes.DESCRIPTIONS)
    for stem, classes in (("train", seen), ("test", seen), ("new", new)):
      rows = _read(paths[stem])
      self.assertEqual(sorted({row["label"] for row in rows}), sorted(classes))
      self.assertEqual(len(rows), 2 * len(classes))  # max_per_class of each.
    # The new rows are the held-out groups' first test documents, in the data set's order.
    test = classification.load_text_classification("20newsgroups", "test")
    first = next(text for text, label in zip(test.texts, test.labels, strict=True)
                 if test.class_names[label] in new)
    self.assertEqual(_read(paths["new"])[0]["text"], first)
    # Seeded: the same draw again, another with another seed.
    again = newsgroup_classes.write_zero_shot_files(os.path.join(folder, "again"), num_unseen=4, seed=3,
                                                    max_per_class=2)
    self.assertEqual(_read(again["new_classes"]), _read(paths["new_classes"]))
    other = newsgroup_classes.write_zero_shot_files(os.path.join(folder, "other"), num_unseen=4, seed=4,
                                                    max_per_class=1)
    self.assertNotEqual(_read(other["new_classes"]), _read(paths["new_classes"]))

  def test_num_unseen_out_of_range_is_refused(self):
    with self.assertRaisesRegex(ValueError, "num_unseen"):
      newsgroup_classes.write_zero_shot_files(self.create_tempdir().full_path, num_unseen=19)


if __name__ == "__main__":
  tf.test.main()
