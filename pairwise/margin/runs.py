"""Runs of the pairwise models: several seeds of a per-seed run (training by default), or evaluation of an
export, with a mean ± std summary over seeds. `pairwise-train` (rank4class_cli/binaries/pairwise_main.py) is
their command line: it builds the `RunConfig` from its flags and hands `run_config` the per-seed run of its
--mode (the class-conversion experiment, Table 4, is `pairwise.studies.class_conversion`, which this module
does not import: experiments sit above the model layer).
"""

import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from pairwise.margin import configs, evaluation
from pairwise.margin import pairwise_train as train_lib
from rank4class_data.validation import DataError, write_json
from rank4class_encoders import text_embeddings
from rank4class_engine import distribute
from rank4class_engine.runs import run_lock
from rank4class_engine.statistics.seed_statistics import SeedStatistics

MODES = ("train", "evaluate", "class_conversion")
# What a training run writes into its model_dir (and --mode=evaluate reads back).
CONFIG_FILE = "config.json"
# --encoder: minilm (all-MiniLM-L6-v2 converted once), random_bert (MiniLM's vocabulary, random weights), hub
# (the user's handles) or hashed_bow.
ENCODERS = ("minilm", "random_bert", "hub", "hashed_bow")
# The run of one seed: (the seed's PairwiseConfig, the strategy, overwrite=) -> its result (scalar metrics and
# other entries), e.g. `train_seed`, or pairwise_main's composition of `pairwise.studies.class_conversion`.
SeedRun = Callable[..., dict[str, Any]]


@dataclasses.dataclass
class RunConfig:
  """What one `run_config` call runs.

  Attributes:
    mode: One of `MODES`.
    seeds: Seeds to run.
    strategy: `rank4class_engine.distribute` strategy name.
    split: Split for --mode=evaluate.
    pairwise: The library config (its seeds and model_dir are replaced per seed).
    overwrite: A run directory holding a run of another config starts afresh instead of being refused.
  """

  mode: str
  seeds: tuple[int, ...]
  strategy: str
  split: str
  pairwise: configs.PairwiseConfig
  overwrite: bool = False


def resolve_handles(config: configs.PairwiseConfig, encoder_name: str) -> configs.PairwiseConfig:
  """Fills the TF Hub handles of --encoder=minilm (converted once, cached) or random_bert (exported)."""
  if config.encoder.kind != "text_encoder" or encoder_name == "hub":
    return config
  if encoder_name == "minilm":
    handles = text_embeddings.minilm_handles()
  else:
    handles = text_embeddings.random_bert_handles(os.path.join(config.train.model_dir, "random_bert"))
  encoder = dataclasses.replace(config.encoder, preprocess_handle=handles.preprocess,
                                encoder_handle=handles.encoder)
  return dataclasses.replace(config, encoder=encoder)


def summarize_seeds(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
  """Mean and sample standard deviation (`SeedStatistics`: ddof=1, NaNs left out) over seeds of every scalar
  metric present in all results, with `n` the number of seeds whose value is not NaN."""
  if not results:
    raise ValueError("No results to summarize.")
  keys = set.intersection(*(set(evaluation.scalars(r)) for r in results))
  summary = {}
  for key in sorted(keys):
    statistics = SeedStatistics.of([evaluation.scalars(r)[key] for r in results], skip_nan=True)
    summary[key] = {"mean": statistics.mean, "std": statistics.std, "n": statistics.count}
  return summary


def _for_seed(config: configs.PairwiseConfig, seed: int, model_dir: str) -> configs.PairwiseConfig:
  return dataclasses.replace(config, data=dataclasses.replace(config.data, split_seed=seed),
                             train=dataclasses.replace(config.train, seed=seed, model_dir=model_dir))


def check_trained_run(model_dir: str) -> None:
  """DataError naming `model_dir` or its config.json, when it holds no config.json that a training run wrote
  (the run --mode=evaluate rebuilds its data and model from)."""
  path = os.path.join(model_dir, CONFIG_FILE)
  expected = "the `model_dir` of a training run (`mode`=train: its config.json and export/)"
  if not os.path.isfile(path):
    raise DataError(model_dir,
                    f"no {CONFIG_FILE}" + ("" if os.path.isdir(model_dir) else " (no such folder)"),
                    expected=expected)
  try:
    with open(path, encoding="utf-8") as f:
      json.load(f)
  except UnicodeDecodeError as e:
    raise DataError(path, f"byte 0x{e.object[e.start]:02x} is not UTF-8", expected=f"the JSON in {expected}"
                    ) from None
  except json.JSONDecodeError as e:
    raise DataError(path, f"invalid JSON ({e.msg} at line {e.lineno}, column {e.colno})",
                    expected=f"the JSON in {expected}") from None


def train_seed(config: configs.PairwiseConfig, strategy: tf.distribute.Strategy, *,
               overwrite: bool = False) -> dict[str, Any]:
  """--mode=train's run of one seed: training (validation-based checkpoint selection, export), then the test
  split's metrics."""
  return train_lib.run_experiment(config, strategy, overwrite=overwrite)["test"]


def run_config(run: RunConfig, encoder_name: str = "hub", seed_run: SeedRun = train_seed) -> dict:
  """Runs a RunConfig: one result per seed, plus a mean ± std summary over seeds (written to summary.json).

  Args:
    run: What to run; --mode=evaluate evaluates the export in `run.pairwise.train.model_dir` (no seeds).
    encoder_name: --encoder, whose handles `resolve_handles` fills.
    seed_run: The run of one seed (`SeedRun`), given each seed's config (training and group-split seed, and
      model_dir: `<model_dir>/seed_<s>` when there are several seeds). --mode=class_conversion needs the
      experiment's own (pairwise_main composes `pairwise.studies.class_conversion.run_class_conversion`).

  Raises:
    ValueError: for --mode=class_conversion with the default `train_seed`.
  """
  model_dir = run.pairwise.train.model_dir
  if run.mode == "evaluate":
    check_trained_run(model_dir)
    metrics = evaluation.evaluate_export(model_dir, run.split)
    return {k: v for k, v in metrics.items() if k != "per_group"}
  if run.mode == "class_conversion" and seed_run is train_seed:
    raise ValueError("`mode`=class_conversion runs pairwise.studies.class_conversion's experiment per seed: "
                     "pass its run as `seed_run` (pairwise_main does)")
  strategy = distribute.make_strategy(run.strategy)
  with run_lock.RunDirectoryLock(model_dir):  # Seeds' folders and summary.json: one writer at a time.
    base = resolve_handles(run.pairwise, encoder_name)
    results = {}
    for seed in run.seeds:
      seed_dir = model_dir if len(run.seeds) == 1 else os.path.join(model_dir, f"seed_{seed}")
      results[seed] = seed_run(_for_seed(base, seed, seed_dir), strategy, overwrite=run.overwrite)
    summary = {"mode": run.mode, "seeds": list(run.seeds),
               "per_seed": {str(s): evaluation.scalars(r) for s, r in results.items()},
               "summary": summarize_seeds(list(results.values()))}
    write_json(os.path.join(model_dir, "summary.json"), summary)
  return summary
