"""Joachims' RankSVM: the Keras scorer, its primal Newton solver, the pair transform, features, text
similarities and configs.

The folder takes the import path of 0.7's module `pairwise.ranksvm` (now `pairwise.ranksvm.ranksvm`), so the
package re-exports that module's public names: `from pairwise import ranksvm; ranksvm.RankSVMConfig` keeps
working.
"""

from pairwise.ranksvm.ranksvm import (  # noqa: F401  0.7's `pairwise.ranksvm` names.
  LOSS_NAMES,
  RankSVMConfig,
  RankSVMResult,
  RankSVMScorer,
  fit_primal_dataset,
  make_scorer_model,
  score_rows,
  scorer_of,
  solve_pairs,
  standardization,
  train_ranksvm,
  unconverged_warning,
)
