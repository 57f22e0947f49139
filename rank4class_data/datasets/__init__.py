"""The named real data sets the toolkit is measured on, read from the files their packages install (never from
the network; see ../shared/DATA.md), apart from the file formats of the input layer:

- `classification`: the classification sets of `--dataset=<name>` (Reuters R8/R52, 20 Newsgroups, WordNet
  hypernyms, election tweets, Friends speakers, Fashion-MNIST, digits, Drugs.com reviews); its public names
  are this package's, so `from rank4class_data import datasets; datasets.load_text_classification(...)` reads
  them.
- `wordnet`: WordNet 3.0 nouns as a many-class task (a gloss -> its hypernym).
- `newsgroups`: the graded 20 Newsgroups query sets of the pairwise models and RankSVM.
- `drug_reviews`: Drugs.com reviews as grouped ranking items.

The LOINC ranking sample is a file layout (`rank4class_data.ranking.ranking_corpus.LOINC_LAYOUT`), not a
module here.
"""

from rank4class_data.datasets.classification import (  # noqa: F401  Re-exported: the package's public surface.
  DIGITS_SPLIT_SEED,
  DIGITS_TEST_FRACTION,
  DRUG_REVIEW_RATINGS,
  DRUG_REVIEW_SENTIMENT,
  ELECTION_TWEETS,
  ELECTION_TWEETS_TEST_FRACTION,
  FASHION_MNIST_CLASS_NAMES,
  FASHION_MNIST_DIR,
  FASHION_MNIST_INSTALL,
  FRIENDS_SEASONS,
  FRIENDS_SPEAKER_NAMES,
  FRIENDS_SPEAKERS,
  IMAGE_CLASSIFICATION_DATASETS,
  REUTERS_R52,
  SPLITS,
  TEXT_CLASSIFICATION_DATASETS,
  WORDNET_HYPERNYMS,
  WORDNET_HYPERNYMS_ALL,
  DrugReviewData,
  ImageClassificationData,
  TextClassificationData,
  drug_reviews_zip_path,
  hypernym_task,
  load_digits,
  load_drug_reviews,
  load_fashion_mnist,
  load_image_classification,
  load_text_classification,
  package_dir,
  text_classification_path,
)

# Stratified splits were part of this module before they got their own (`rank4class_data.stratified_split`).
from rank4class_data.stratified_split import (  # noqa: F401  Re-exported, as before.
  split_by_class_counts,
  train_validation_split,
  validation_counts,
)
