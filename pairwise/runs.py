"""Runs of the pairwise models: several seeds of training, evaluation of an export, or the class-conversion
(Table 4) experiment, with a mean ± std summary over seeds. `pairwise-train` (pairwise/pairwise_main.py) is
their command line.
"""

import dataclasses
import os

from pairwise import pairwise_train as train_lib
from rank4class_engine import distribute

MODES = ("train", "evaluate", "class_conversion")


@dataclasses.dataclass
class RunConfig:
  """What one `run_config` call runs.

  Attributes:
    mode: One of `MODES`.
    seeds: Seeds to run.
    strategy: `rank4class_engine.distribute` strategy name.
    split: Split for --mode=evaluate.
    pairwise: The library config (its seeds and model_dir are replaced per seed).
    conversion: The Table 4 settings.
  """

  mode: str
  seeds: tuple[int, ...]
  strategy: str
  split: str
  pairwise: train_lib.PairwiseConfig
  conversion: train_lib.ClassConversionConfig


def resolve_handles(config: train_lib.PairwiseConfig, encoder_name: str) -> train_lib.PairwiseConfig:
  """Fills the TF Hub handles of --encoder=minilm (converted once, cached) or random_bert (exported)."""
  if config.encoder.kind != "text_encoder" or encoder_name == "hub":
    return config
  from rank4class import hub_conversion  # pylint: disable=g-import-not-at-top

  if encoder_name == "minilm":
    handles = hub_conversion.cached_conversion(hub_conversion.minilm_checkpoint_dir())
  else:
    vocab = hub_conversion.read_vocab(os.path.join(hub_conversion.minilm_checkpoint_dir(), "vocab.txt"))
    handles = hub_conversion.export_random_bert(os.path.join(config.train.model_dir, "random_bert"), vocab)
  encoder = dataclasses.replace(config.encoder, preprocess_handle=handles.preprocess,
                                encoder_handle=handles.encoder)
  return dataclasses.replace(config, encoder=encoder)


def _for_seed(config: train_lib.PairwiseConfig, seed: int, model_dir: str) -> train_lib.PairwiseConfig:
  return dataclasses.replace(config, data=dataclasses.replace(config.data, split_seed=seed),
                             train=dataclasses.replace(config.train, seed=seed, model_dir=model_dir))


def run_config(run: RunConfig, encoder_name: str = "hub") -> dict:
  """Runs a RunConfig: one result per seed, plus a mean ± std summary over seeds (written to summary.json)."""
  model_dir = run.pairwise.train.model_dir
  if run.mode == "evaluate":
    metrics = train_lib.evaluate_export(model_dir, run.split)
    return {k: v for k, v in metrics.items() if k != "per_group"}
  strategy = distribute.make_strategy(run.strategy)
  base = resolve_handles(run.pairwise, encoder_name)
  results = {}
  for seed in run.seeds:
    seed_dir = model_dir if len(run.seeds) == 1 else os.path.join(model_dir, f"seed_{seed}")
    config = _for_seed(base, seed, seed_dir)
    if run.mode == "train":
      results[seed] = train_lib.run_experiment(config, strategy)["test"]
    else:
      results[seed] = train_lib.run_class_conversion(config, run.conversion, strategy)
  summary = {"mode": run.mode, "seeds": list(run.seeds),
             "per_seed": {str(s): train_lib.scalars(r) for s, r in results.items()},
             "summary": train_lib.summarize_seeds(list(results.values()))}
  train_lib.write_json_atomic(os.path.join(model_dir, "summary.json"), summary)
  return summary
