"""20 Newsgroups as classes described by text, with newsgroups held out for zero-shot use.

Each newsgroup gets a one-sentence description (`DESCRIPTIONS`, written for this toolkit from the groups'
charters as their names state them; the data's texts never went into them). `write_zero_shot_files` draws
`num_unseen` newsgroups with `np.random.default_rng(seed)` and writes a user's files, as
`wordnet.write_task_files` does for WordNet: the other newsgroups' documents from the data set's training
split (`train.csv`) and test split (`test.csv`), their descriptions (`classes.csv`), and the held-out
newsgroups' descriptions (`new_classes.csv`) with their test documents (`new.csv`).
"""

import csv
import os

import numpy as np

from rank4class_data.datasets import classification
from rank4class_data.validation import atomic_output, check_range

DATASET = "20newsgroups"
DESCRIPTIONS = {
    "alt.atheism": "atheism: arguments about the existence of god, religion and morality from atheists",
    "comp.graphics": "computer graphics: image formats, rendering, 3d graphics software and algorithms",
    "comp.os.ms-windows.misc": "microsoft windows: the operating system, its drivers, settings and programs",
    "comp.sys.ibm.pc.hardware": "ibm pc hardware: hard disks, controllers, motherboards, "
                                "memory and bus cards",
    "comp.sys.mac.hardware": "apple macintosh hardware: mac computers, monitors, upgrades and accessories",
    "comp.windows.x": "the x window system: x11 servers, motif, widgets and programming for unix displays",
    "misc.forsale": "for sale: items offered for sale, prices, shipping and offers to buy",
    "rec.autos": "cars: automobiles, driving, engines, car models, dealers and repairs",
    "rec.motorcycles": "motorcycles: bikes, riding, helmets, motorcycle models and maintenance",
    "rec.sport.baseball": "baseball: teams, players, games, pitching, hitting and the major league season",
    "rec.sport.hockey": "ice hockey: nhl teams, players, games, goals and the playoffs",
    "sci.crypt": "cryptography: encryption, keys, the clipper chip, privacy and government wiretaps",
    "sci.electronics": "electronics: circuits, components, voltage, power supplies and building devices",
    "sci.med": "medicine: diseases, symptoms, treatments, doctors, drugs and health",
    "sci.space": "space: nasa, spaceflight, orbits, satellites, the moon and space exploration",
    "soc.religion.christian": "christianity: the bible, jesus, the church, faith and christian beliefs",
    "talk.politics.guns": "gun politics: firearms, gun control laws, the second amendment and weapons",
    "talk.politics.mideast": "middle east politics: israel, the palestinians, arabs, turkey and armenia",
    "talk.politics.misc": "politics: government, taxes, the president, congress and political debate",
    "talk.religion.misc": "religion: religious beliefs, morality, cults and debates between faiths",
}


def write_zero_shot_files(folder: str, num_unseen: int = 5, seed: int = 0,
                          max_per_class: int | None = None) -> dict[str, str]:
  """Writes `train.csv`, `test.csv` and `new.csv` (columns text, label: newsgroup names), `classes.csv` and
  `new_classes.csv` (columns class, text: the descriptions) into `folder`; with `max_per_class`, each
  newsgroup keeps its first that many documents of each split. Every file is written whole or not at all.

  Returns:
    {file stem: path}.
  """
  check_range("num_unseen", num_unseen, 1, len(DESCRIPTIONS) - 2, integer=True)
  names = sorted(DESCRIPTIONS)
  unseen = set(np.asarray(names)[np.random.default_rng(seed).permutation(len(names))[:num_unseen]].tolist())
  splits = {split: classification.load_text_classification(DATASET, split) for split in ("train", "test")}
  if sorted(splits["train"].class_names) != names:
    raise ValueError(f"{DATASET}'s classes {splits['train'].class_names} differ from the "
                     "described newsgroups.")

  def rows(split: str, held: bool) -> list[tuple[str, str]]:
    data, counts, kept = splits[split], {}, []
    for text, label in zip(data.texts, np.asarray(data.labels).tolist(), strict=True):
      name = data.class_names[label]
      if (name in unseen) == held and (max_per_class is None or counts.get(name, 0) < max_per_class):
        counts[name] = counts.get(name, 0) + 1
        kept.append((text, name))
    return kept

  tables = {
      "train": (("text", "label"), rows("train", False)),
      "test": (("text", "label"), rows("test", False)),
      "new": (("text", "label"), rows("test", True)),
      "classes": (("class", "text"), [(n, DESCRIPTIONS[n]) for n in names if n not in unseen]),
      "new_classes": (("class", "text"), [(n, DESCRIPTIONS[n]) for n in names if n in unseen]),
  }
  os.makedirs(folder, exist_ok=True)
  paths = {}
  for stem, (header, table) in tables.items():
    paths[stem] = os.path.join(folder, f"{stem}.csv")
    with atomic_output(paths[stem]) as f:
      writer = csv.writer(f, lineterminator="\n")
      writer.writerow(header)
      writer.writerows(table)
  return paths
