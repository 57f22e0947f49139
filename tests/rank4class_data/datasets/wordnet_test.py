"""Tests for rank4class_data.datasets.wordnet: WordNet noun glosses classified into their hypernym."""

import os

import numpy as np
import tensorflow as tf

from rank4class_data.datasets import wordnet
from rank4class_data.validation import DataError

_HEADER = (
    "  1 This software and database is being provided to you, the LICENSEE, by  \n"
    "  2 Princeton University under the following license.  \n"
    "  3   \n")

# entity <- organism <- {animal, plant}; animal has 4 members, plant 3, organism 2, entity 1.
_SYNSETS = {
    "00000001": "00000001 03 n 01 entity 0 001 ~ 00000002 n 0000 | that which exists  ",
    "00000002": ("00000002 03 n 01 organism 0 003 @ 00000001 n 0000 ~ 00000003 n 0000 ~ 00000004 n 0000 "
                 "| a living thing  "),
    "00000003": ("00000003 03 n 02 animal 0 animate_being 0 002 @ 00000002 n 0000 + 01234567 v 0101 "
                 "| a living organism that moves; \"animals eat\"  "),
    "00000004": "00000004 03 n 01 plant(p) 0 001 @ 00000002 n 0000 | an organism lacking locomotion  ",
    # 10 lemmas: w_cnt 0a is hexadecimal.
    "00000010": ("00000010 05 n 0a dog 0 domestic_dog 0 Canis_familiaris 0 pooch 0 doggie 0 doggy 0 "
                 "bow-wow 0 pup 0 hound 0 cur 0 001 @ 00000003 n 0000 "
                 "| a domesticated canid; \"the dog barked\"; \"a dog's life\"  "),
    "00000011": "00000011 05 n 01 cat 0 002 ~ 00000099 n 0000 @ 00000003 n 0000 | a small feline  ",
    "00000012": "00000012 05 n 02 horse 0 Equus_caballus 0 001 @ 00000003 n 0000 | a hoofed mammal  ",
    # '@i' comes first but is ignored: the class is animal.
    "00000013": ("00000013 05 n 01 Lassie 0 002 @i 00000004 n 0000 @ 00000003 n 0000 "
                 "| a famous collie; \"Lassie come home\"  "),
    "00000020": "00000020 20 n 01 tree 0 001 @ 00000004 n 0000 | a tall perennial woody plant  ",
    # First '@' decides: fern is a plant, not an animal.
    "00000021": "00000021 20 n 01 fern 0 002 @ 00000004 n 0000 @ 00000003 n 0000 | a flowerless plant  ",
    "00000022": "00000022 20 n 01 moss 0 001 @ 00000004 n 0000 | a tiny green plant  ",
    # Only an instance hypernym: no instance.
    "00000030": "00000030 15 n 01 Audrey_II 0 001 @i 00000004 n 0000 | a fictional plant  ",
}


class WordNetTest(tf.test.TestCase):

  def _data_dir(self, lines=None) -> str:
    lines = list(_SYNSETS.values()) if lines is None else lines
    data_file = self.create_tempfile("data.noun", content=_HEADER + "\n".join(lines) + "\n")
    return os.path.dirname(data_file.full_path)

  def _task(self, **kwargs) -> wordnet.HypernymTask:
    kwargs = {"min_members": 3, "zero_shot_fraction": 0.0, "test_fraction": 0.0, **kwargs}
    return wordnet.build_hypernym_task(wordnet.WordNetConfig(data_dir=self._data_dir(), **kwargs))

  def _gloss(self, offset: str) -> str:
    return _SYNSETS[offset].split("|", 1)[1].strip()

  def test_reads_synsets(self):
    synsets = wordnet.read_noun_synsets(os.path.join(self._data_dir(), "data.noun"))
    self.assertEqual(list(synsets), list(_SYNSETS))
    self.assertEqual(synsets["00000003"].lemmas, ["animal", "animate_being"])
    self.assertEqual(synsets["00000004"].lemmas, ["plant"])
    self.assertLen(synsets["00000010"].lemmas, 10)
    self.assertEqual(synsets["00000010"].lemmas[-1], "cur")
    self.assertEqual(synsets["00000010"].gloss, 'a domesticated canid; "the dog barked"; "a dog\'s life"')
    self.assertEqual(synsets["00000010"].hypernyms, ["00000003"])
    self.assertEqual(synsets["00000001"].hypernyms, [])
    self.assertEqual(synsets["00000011"].hypernyms, ["00000003"])
    self.assertEqual(synsets["00000013"].hypernyms, ["00000003"])
    self.assertEqual(synsets["00000021"].hypernyms, ["00000004", "00000003"])
    self.assertEqual(synsets["00000030"].hypernyms, [])

  def test_class_and_instance_texts(self):
    task = self._task()
    self.assertEqual(task.class_names, ["animal.00000003", "plant.00000004"])
    self.assertEqual(task.class_texts, ['animal, animate being: a living organism that moves; "animals eat"',
                                        "plant: an organism lacking locomotion"])
    expected = {self._gloss(o): 0 for o in ("00000010", "00000011", "00000012", "00000013")}
    expected.update({self._gloss(o): 1 for o in ("00000020", "00000021", "00000022")})
    self.assertEqual(dict(zip(task.train_texts, task.train_labels.tolist(), strict=True)), expected)
    self.assertEqual(task.train_labels.dtype, np.int64)
    self.assertEmpty(task.test_texts)
    self.assertEmpty(task.zero_shot_class_names)

  def test_synsets_without_hypernym_are_no_instances(self):
    task = self._task(min_members=1)
    self.assertEqual(task.class_names, ["animal.00000003", "entity.00000001", "organism.00000002",
                                        "plant.00000004"])
    self.assertLen(task.train_texts, 10)
    self.assertNotIn(self._gloss("00000001"), task.train_texts)  # the root
    self.assertNotIn(self._gloss("00000030"), task.train_texts)  # only '@i'

  def test_min_members_and_max_classes(self):
    self.assertLen(self._task(min_members=2).class_names, 3)
    self.assertEqual(self._task(min_members=4).class_names, ["animal.00000003"])
    self.assertEmpty(self._task(min_members=5).class_names)
    self.assertEqual(self._task(min_members=1, max_classes=2).class_names,
                     ["animal.00000003", "plant.00000004"])

  def test_zero_shot_classes_are_held_out(self):
    for seed in range(5):
      task = self._task(min_members=2, zero_shot_fraction=0.34, test_fraction=0.5, seed=seed)
      self.assertLen(task.class_names, 2)
      self.assertLen(task.zero_shot_class_names, 1)
      self.assertEmpty(set(task.class_names) & set(task.zero_shot_class_names))
      self.assertAllEqual(task.zero_shot_labels, np.zeros(len(task.zero_shot_texts), np.int64))
      self.assertEmpty(set(task.zero_shot_texts) & set(task.train_texts + task.test_texts))
      members = {"animal.00000003": 4, "plant.00000004": 3, "organism.00000002": 2}
      self.assertLen(task.zero_shot_texts, members[task.zero_shot_class_names[0]])
      self.assertLen(task.train_texts + task.test_texts, 9 - len(task.zero_shot_texts))

  def test_test_split_is_stratified_and_keeps_a_training_member(self):
    task = self._task(min_members=2, test_fraction=0.9)
    # Rounded 0.9 * members, at most all but one: animal 4 -> 3, organism 2 -> 1, plant 3 -> 2 test members.
    self.assertAllEqual(np.bincount(task.test_labels, minlength=3), [3, 1, 2])
    self.assertAllEqual(np.bincount(task.train_labels, minlength=3), [1, 1, 1])
    self.assertEmpty(set(task.train_texts) & set(task.test_texts))

  def test_splits_are_deterministic_given_seed(self):
    kwargs = {"min_members": 2, "test_fraction": 0.5, "zero_shot_fraction": 0.34}
    first, again = self._task(seed=3, **kwargs), self._task(seed=3, **kwargs)
    self.assertEqual(first.test_texts, again.test_texts)
    self.assertEqual(first.zero_shot_class_names, again.zero_shot_class_names)
    self.assertAllEqual(first.train_labels, again.train_labels)
    others = [self._task(seed=seed, **kwargs) for seed in range(4, 10)]
    self.assertTrue(any(other.test_texts != first.test_texts for other in others))

  def test_malformed_lines_name_the_line(self):
    good = list(_SYNSETS.values())
    bad_lines = {
        "w_cnt": "00000040 03 n 1 x 0 000 | a thing",
        "p_cnt": "00000040 03 n 01 x 0 1 | a thing",
        "ptr": "00000040 03 n 01 x 0 001 @ 00000001 n | a thing",
        "ptr count": "00000040 03 n 01 x 0 002 @ 00000001 n 0000 | a thing",
        "gloss": "00000040 03 n 01 x 0 000 a thing",
        "synset_offset": "0000040 03 n 01 x 0 000 | a thing",
    }
    for field, bad in bad_lines.items():
      with self.subTest(field):
        # Third data row, after the three licence lines: physical line 6.
        path = os.path.join(self._data_dir(good[:2] + [bad] + good[2:]), "data.noun")
        with self.assertRaisesRegex(DataError, r"data\.noun, row 3 \(line 6\)") as raised:
          wordnet.read_noun_synsets(path)
        self.assertEqual(raised.exception.line, 6)

  def test_dangling_hypernym_and_repeated_offset(self):
    dangling = "00000040 03 n 01 x 0 001 @ 00000099 n 0000 | a thing"
    path = os.path.join(self._data_dir([_SYNSETS["00000001"], dangling]), "data.noun")
    with self.assertRaisesRegex(DataError, r"row 2 \(line 5\).*00000099"):
      wordnet.read_noun_synsets(path)
    path = os.path.join(self._data_dir([_SYNSETS["00000001"], _SYNSETS["00000001"]]), "data.noun")
    with self.assertRaisesRegex(DataError, "repeated"):
      wordnet.read_noun_synsets(path)

  def test_missing_file_says_how_to_install(self):
    config = wordnet.WordNetConfig(data_dir=self.create_tempdir().full_path)
    with self.assertRaisesRegex(FileNotFoundError, "apt-get install wordnet-base"):
      wordnet.build_hypernym_task(config)

  def test_bad_config_raises(self):
    bad_configs = ({"min_members": 0}, {"max_classes": 0}, {"test_fraction": 1.0},
                   {"zero_shot_fraction": -0.1})
    for kwargs in bad_configs:
      with self.subTest(str(kwargs)), self.assertRaises(ValueError):
        wordnet.build_hypernym_task(wordnet.WordNetConfig(data_dir=self._data_dir(), **kwargs))

  def test_real_wordnet(self):
    path = os.path.join(wordnet.WORDNET_DIR, wordnet.NOUN_FILE)
    if not os.path.isfile(path):
      self.skipTest(f"{path} is absent; apt-get install wordnet-base")
    self.assertLen(wordnet.read_noun_synsets(path), 82115)
    task = wordnet.build_hypernym_task(wordnet.WordNetConfig(min_members=10))
    self.assertGreaterEqual(len(task.class_names), 1000)
    self.assertLen(set(task.class_names), len(task.class_names))
    self.assertEmpty(set(task.class_names) & set(task.zero_shot_class_names))
    self.assertLen(task.train_labels, len(task.train_texts))
    self.assertEqual(task.train_labels.max(), len(task.class_names) - 1)


if __name__ == "__main__":
  tf.test.main()
