"""Finished runs of the study for tests of its cell selection and report: hand-set metrics, no training."""

from rank4class.studies import study_config


def run_record(loss: str, interaction: str, seed: int, top1: float, val_ndcg: float = 0.5,
               dataset: str = "digits") -> study_config.RunRecord:
  """A run of `dataset` (image mode) whose test top-1 error is `top1` (top-5 error top1 / 4, NDCG@5 1 - top1 /
  2) and whose validation NDCG@5 is `val_ndcg`."""
  return study_config.RunRecord(dataset=dataset, mode="image", loss=loss, interaction=interaction,
                                hidden_width=8,
                                learning_rate=1e-3, seed=seed, validation={"ndcg_5": val_ndcg},
                                test={"top_1_error": top1, "top_5_error": top1 / 4, "ndcg_5": 1 - top1 / 2},
                                model_dir="/x", seconds=1.0)
