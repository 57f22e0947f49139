"""What a Rank4Class run writes beside its chosen model: the calibration fitted on the validation split, the
export, the test report and the baselines."""

import os
import shutil
import threading
import time

import numpy as np
import tensorflow as tf

from rank4class.evaluation import baselines as baselines_lib
from rank4class.evaluation import evaluation_report, evaluators, full_class_evaluation
from rank4class.inference import calibration as calibration_lib
from rank4class.inference import served, serving
from rank4class.modeling import model as model_lib
from rank4class.training import training_data as data_lib
from rank4class.training.model_setup import has_class_ids
from rank4class.training.run_validation import CHUNKED_VALIDATION_CLASSES
from rank4class.training.train_config import EXPORT_DIR, TEST_REPORT_FILE, OutputsConfig, RunConfig
from rank4class_data.messages import say
from rank4class_engine import distribute
from rank4class_engine.loop import trainer


def _serving_dtype(input_kind: str) -> tf.DType | None:
  return tf.uint8 if input_kind == data_lib.IMAGE_INPUT else None


def calibrate(run: RunConfig, outputs: OutputsConfig, data: data_lib.PreparedData,
               strategy: tf.distribute.Strategy, chief: bool, model: model_lib.Rank4ClassModel,
               score_fn: served.ScoreFn, phases: dict[str, float]
               ) -> tuple[calibration_lib.Calibration | None, dict | None]:
  """The calibration fitted on the validation split's scores and its summary (test metrics included)."""
  # The model holds the best weights: a temperature and conformal scores fitted on the validation split's
  # scores (n x C float32 kept in memory), evaluated on the test split batch by batch, exported beside the
  # model.
  calibration, calibration_summary = None, None
  skip = (
    "graded relevance lists (ELWC), not one class per row"
    if not has_class_ids(data.validation)
    else f"{model.num_classes:,} classes (from {CHUNKED_VALIDATION_CLASSES:,} on, scores are ranked chunk by "
    "chunk, never held whole)"
    if model.num_classes >= CHUNKED_VALIDATION_CLASSES
    else None
  )
  if outputs.calibrate and skip is not None:
    if chief and run.verbose:
      say(f"Calibration: skipped, the validation split has {skip}.")
  elif outputs.calibrate:
    calibration_start = time.perf_counter()
    calibration_batch = max(run.batch_size, 256)
    with strategy.scope():  # As the validations called `score_fn`: no new trace.
      scored = [(score_fn(x).numpy(), y.numpy().reshape([-1]))
                for x, y in data.validation.make_dataset(calibration_batch, False, False, 0)]
    calibration = calibration_lib.Calibration.fit(np.concatenate([s for s, _ in scored]),
                                                  np.concatenate([y for _, y in scored]), seed=run.seed)
    del scored
    calibration_summary = calibration.summary()
    if outputs.evaluate_test and data.test is not None and has_class_ids(data.test):
      calibration_metrics = calibration_lib.CalibrationMetrics(calibration)
      with strategy.scope():
        for x, y in data.test.make_dataset(calibration_batch, False, False, 0):
          calibration_metrics.update(score_fn(x).numpy(), y.numpy().reshape([-1]))
      calibration_summary["test"] = calibration_metrics.result()
    phases["calibration"] = time.perf_counter() - calibration_start
  return calibration, calibration_summary


def export(model_dir: str, outputs: OutputsConfig, data_config: data_lib.DataConfig,
            data: data_lib.PreparedData,
            strategy: tf.distribute.Strategy, chief: bool, model: model_lib.Rank4ClassModel,
            calibration: calibration_lib.Calibration | None, phases: dict[str, float]) -> str | None:
  """Exports the chosen model to `<model_dir>/export`; returns its directory (None without
  `outputs.export`)."""
  export_dir = None
  export_start = time.perf_counter()
  if outputs.export:
    target = distribute.output_dir(model_dir, strategy, EXPORT_DIR)
    text_inputs = None
    if data.input_kind == data_lib.EMBEDDING_INPUT and data.text_handles is not None:
      # The export takes embeddings; `rank4class-predict` embeds raw texts the same way from this record.
      text_inputs = data_lib.frozen_text_encoder(data_config, data.text_handles)
    export_dir = serving.export_saved_model(
        model, target, top_k=outputs.serving_top_k, input_dtype=_serving_dtype(data.input_kind),
        overwrite=True, frozen_text_encoder=text_inputs, calibration=calibration)
    if not chief:
      shutil.rmtree(export_dir, ignore_errors=True)
      export_dir = os.path.join(model_dir, EXPORT_DIR)
    phases["export"] = time.perf_counter() - export_start
  return export_dir


def test_report(model_dir: str, batch_size: int, data: data_lib.PreparedData,
                 strategy: tf.distribute.Strategy,
                 chief: bool, model: model_lib.Rank4ClassModel, score_fn: served.ScoreFn, ks: tuple[int, ...],
                 phases: dict[str, float]) -> dict | None:
  """The chosen model's report on the test split (when there is one), written to the run directory by the
  chief."""
  test_report = None
  test_start = time.perf_counter()
  if data.test is not None:
    test = data.test.make_dataset(max(batch_size, 256), False, False, 0)
    if model.num_classes >= CHUNKED_VALIDATION_CLASSES and has_class_ids(data.test):
      test_report = full_class_evaluation.evaluate_full_classes(model, test, ks)
    else:
      with strategy.scope():  # The validation traced the shared evaluator under this scope: reuse it.
        test_report = evaluators.evaluate_dataset(score_fn, test, data.class_names, ks)
    if chief:
      evaluation_report.write_report(os.path.join(model_dir, TEST_REPORT_FILE), test_report)
    phases["test"] = time.perf_counter() - test_start
  return test_report


class BackgroundBaselines:
  """The baselines fitted on a thread beside the run, from its start: scikit-learn's solvers and SciPy's
  sparse products release the GIL, so they fill the cores the training leaves idle. A daemon thread: a run
  that fails does not wait for them."""

  def __init__(self, data: data_lib.PreparedData, ks: tuple[int, ...]):
    self._report: dict | None = None
    self._error: BaseException | None = None
    self.seconds = 0.0
    self._thread = threading.Thread(target=self._compute, args=(data_lib.embedding_view(data), ks),
                                    name="rank4class-baselines", daemon=True)
    self._thread.start()

  def _compute(self, data: data_lib.PreparedData, ks: tuple[int, ...]) -> None:
    start = time.perf_counter()
    try:
      self._report = baselines_lib.compute_or_note(baselines_lib.BaselineConfig(), data, ks)
    except BaseException as error:  # noqa: BLE001 - raised again where the run waits for the report.
      self._error = error
    self.seconds = time.perf_counter() - start

  def report(self) -> dict:
    """The baselines' report, once they are fitted (their error, raised here, when they failed)."""
    self._thread.join()
    if self._error is not None:
      raise self._error
    return self._report


def baseline_reports(verbose: int, baselines: BackgroundBaselines, test_report: dict | None,
                     fitted: trainer.FitResult, phases: dict[str, float]) -> dict:
  """The baselines' report with the line comparing the model's test metrics (its validation metrics without a
  test split) and their own seconds beside the run ("seconds_beside"); `phases` gets the seconds the run
  waited for them ("baselines"), so that no phase counts another's time."""
  wait_start = time.perf_counter()
  if verbose and baselines.seconds == 0.0:
    say("Waiting for the baselines (fitted beside the run) ...")
  baseline_reports = baselines.report()
  model_metrics = test_report["metrics"] if test_report is not None else fitted.best_metrics
  best = baselines_lib.best_row(baseline_reports)
  if best is not None and baselines_lib.HEADLINE_METRIC in model_metrics:
    baseline_reports["versus"] = baselines_lib.versus_line(model_metrics[baselines_lib.HEADLINE_METRIC], best)
  baseline_reports["seconds_beside"] = baselines.seconds
  phases["baselines"] = time.perf_counter() - wait_start
  return baseline_reports
