"""A shorter linear path for the runs of tests that examine the model choice (which model is kept, and why),
not how near the logistic regressions come to their optimum: that is `linear_path_test`'s and
`train_test.LinearCandidateTest`'s first test's, on the path as a run trains it."""

import contextlib
import dataclasses
from collections.abc import Iterator
from unittest import mock

from rank4class.training import linear_path


@dataclasses.dataclass
class ShortPathConfig(linear_path.PathConfig):
  """`linear_path.PathConfig` with a fifth of the full-batch steps and of the steps, and above 1,024 rows 20
  epochs of 128-row batches (a fifth of the path before its 1,024-row batches): the choice these tests examine
  does not need the path's optimum."""

  epochs: int = 20
  batch_size: int = 128
  full_batch_steps: int = 30
  max_steps: int = 200


@contextlib.contextmanager
def short_linear_path() -> Iterator[None]:
  """Within it, the linear candidates of a run (`model_choice.choose_on_validation`) train `ShortPathConfig`'s
  path, with the run's seed as ever."""
  with mock.patch.object(linear_path, "PathConfig", ShortPathConfig):
    yield
