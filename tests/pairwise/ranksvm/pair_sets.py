"""RankSVM test pair sets: hand-made and random pairs, scikit-learn's breast-cancer rows in queries, and the
objective in NumPy, shared by the solver's tests."""

import numpy as np
from sklearn.datasets import load_breast_cancer

from pairwise.ranksvm import pair_transform


def operator_of(rows, first, second, signs=None) -> pair_transform.PairDifferences:
  """The pairs (first, second, signs) of `rows` as the solver reads them."""
  signs = np.ones(len(first)) if signs is None else np.asarray(signs, dtype=np.float64)
  return pair_transform.PairDifferences(np.asarray(rows, dtype=np.float64), pair_transform.PairIndices(
      np.asarray(first), np.asarray(second), signs))


def single_feature_pairs(differences) -> pair_transform.PairDifferences:
  """Pairs whose differences are the given scalars: row 0 is 0, row k + 1 is differences[k], x_k = row - 0."""
  rows = np.concatenate([[0.0], differences])[:, None]
  return operator_of(rows, np.arange(1, len(differences) + 1), np.zeros(len(differences), np.int64))


def random_operator(seed: int, num_rows: int = 40, num_features: int = 5, num_pairs: int = 120):
  """Random rows (features of several scales) and random signed pairs of distinct rows."""
  rng = np.random.default_rng(seed)
  rows = rng.normal(size=(num_rows, num_features)) * rng.uniform(0.5, 2.0, num_features)
  first, second = rng.integers(0, num_rows, num_pairs), rng.integers(0, num_rows, num_pairs)
  keep = first != second
  signs = np.where(rng.random(num_pairs) < 0.5, -1.0, 1.0)
  return operator_of(rows, first[keep], second[keep], signs[keep])


def breast_cancer_pair_sets(query_size: int = 25, seed: int = 0):
  """scikit-learn's breast-cancer rows, standardized, shuffled into queries of `query_size`, relevance = the
  target (benign = 1); returns (operator, materialized x, y) of the within-query pairs."""
  data = load_breast_cancer()
  rows = (data.data - data.data.mean(axis=0)) / data.data.std(axis=0)
  order = np.random.default_rng(seed).permutation(len(rows))
  rows, relevance = rows[order], data.target[order].astype(np.float64)
  offsets = np.append(np.arange(0, len(rows), query_size), len(rows))
  pairs = pair_transform.pairs_within_queries(relevance, offsets, seed=seed)
  x, y = pair_transform.pairwise_differences(rows, pairs)
  return pair_transform.PairDifferences(rows, pairs), x, y


def numpy_objective(weights, x, y, c, loss):
  """J(w) of materialized pair differences `x` with signs `y`, in NumPy."""
  slack = np.maximum(0.0, 1.0 - y * (x @ weights))
  return 0.5 * weights @ weights + c * np.sum(slack if loss == "hinge" else slack**2)
