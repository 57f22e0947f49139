"""What a Rank4Class run writes beside its chosen model: the calibration fitted on the validation split, the
export, the test report and the baselines."""

import multiprocessing
import os
import pickle
import shutil
import signal
import threading
import time
from collections.abc import Callable

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
    with strategy.scope():  # As the validations called `score_fn`: no new trace.
      scored = [(score_fn(x).numpy(), y.numpy().reshape([-1]))
                for x, y in data.validation.make_dataset(max(run.batch_size, 256), False, False, 0)]
    calibration, calibration_summary = calibrate_on(
        np.concatenate([s for s, _ in scored]), np.concatenate([y for _, y in scored]), "validation", run,
        outputs, data, strategy, score_fn)
    del scored
    phases["calibration"] = time.perf_counter() - calibration_start
  return calibration, calibration_summary


def calibrate_on(scores: np.ndarray, labels: np.ndarray, fitted_on: str, run: RunConfig,
                 outputs: OutputsConfig, data: data_lib.PreparedData, strategy: tf.distribute.Strategy,
                 score_fn: served.ScoreFn) -> tuple[calibration_lib.Calibration, dict]:
  """The calibration fitted on held-out `scores` `[n, C]` of rows of class `labels` (`fitted_on` says which:
  "validation", "out of fold") and its summary, with the test split's calibration metrics under `score_fn`."""
  calibration = calibration_lib.Calibration.fit(scores, labels, seed=run.seed)
  summary = {**calibration.summary(), "fitted_on": fitted_on}
  if outputs.evaluate_test and data.test is not None and has_class_ids(data.test):
    calibration_metrics = calibration_lib.CalibrationMetrics(calibration)
    with strategy.scope():
      for x, y in data.test.make_dataset(max(run.batch_size, 256), False, False, 0):
        calibration_metrics.update(score_fn(x).numpy(), y.numpy().reshape([-1]))
    summary["test"] = calibration_metrics.result()
  return calibration, summary


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


# From this many training rows on, the baselines are fitted in a process of their own; below, on a thread.
# On a thread, their Python (TF-IDF's tokenizer, the solvers' loops) holds the GIL the training loop needs:
# 20 Newsgroups' loop took 26.7 s beside them against 2.5 s alone. A process costs its start (~4 s of
# imports, on a core the run leaves idle), more than the baselines of a few thousand rows take.
PROCESS_FROM_ROWS = 4000
_SPAWN = multiprocessing.get_context("spawn")


def fit_baselines(data: data_lib.PreparedData, ks: tuple[int, ...]) -> dict:
  """The printed baselines of `data` (`baselines.compute_or_note` with the default config)."""
  return baselines_lib.compute_or_note(baselines_lib.BaselineConfig(), data, ks)


def _fitted(fit: Callable[[], dict]) -> tuple[dict | None, BaseException | None, float]:
  """(report, error, seconds) of `fit()`, on the thread or in the process."""
  start = time.perf_counter()
  try:
    return fit(), None, time.perf_counter() - start
  except BaseException as error:  # noqa: BLE001 - raised again where the run waits for the report.
    return None, error, time.perf_counter() - start


def _fit_pickled(payload: bytes) -> dict:
  """`fit(data, ks)` of the pickled (fit, data, ks)."""
  fit, data, ks = pickle.loads(payload)
  return fit(data, ks)


def _fit_in_child(data_connection, connection) -> None:
  """The baselines' process: reads (fit, data, ks) from the run, sends (report, error, seconds) back."""
  try:
    payload = data_connection.recv_bytes()
  except (EOFError, OSError):  # The run ended before sending them (it failed): nothing to fit.
    return
  data_connection.close()
  # Data that does not load here is raised where the run waits, as a failed fit is.
  report, error, seconds = _fitted(lambda: _fit_pickled(payload))
  try:
    try:
      connection.send((report, error, seconds))
    except (TypeError, AttributeError, pickle.PicklingError):  # An error that does not pickle: its text.
      connection.send((None, RuntimeError(repr(error)), seconds))
  except OSError:  # The run ended without waiting for them (it failed): nothing to say.
    pass
  connection.close()


def _send_payload(connection, payload: bytes) -> None:
  """Writes the pickled data to the baselines' process. It reads it once its imports are done: on a thread,
  so the run does not wait for them (the data pickled into the process's start would block the start until
  then: ~3 s on Reuters R52)."""
  try:
    connection.send_bytes(payload)
  except OSError:  # The process ended first (killed): its report says so.
    pass
  connection.close()


class BackgroundBaselines:
  """The baselines fitted beside the run, from its start: in a process of their own from `PROCESS_FROM_ROWS`
  training rows on (started from the main thread with SIGINT ignored, so Ctrl-C reaches the run alone), on a
  daemon thread below (scikit-learn's solvers and SciPy's sparse products release the GIL). A run that fails
  does not wait for them.

  Args:
    data: The run's data.
    ks: The metrics' cut-offs.
    fit: What fits them (a module-level function: it is pickled into the process).
    in_process: True or False to choose; None by the training rows.
  """

  def __init__(self, data: data_lib.PreparedData, ks: tuple[int, ...], fit=fit_baselines,
               in_process: bool | None = None):
    self._result: tuple | None = None  # (report, error, seconds) once fitted.
    self._process = self._thread = None
    view = data_lib.embedding_view(data)
    if in_process is None:
      in_process = len(getattr(view.train, "labels", ())) >= PROCESS_FROM_ROWS
    if in_process and threading.current_thread() is threading.main_thread():
      try:
        payload = pickle.dumps((fit, view, ks), protocol=pickle.HIGHEST_PROTOCOL)
      except (TypeError, AttributeError, pickle.PicklingError):  # Data that does not pickle: a thread.
        payload = None
      if payload is not None:
        self._process = self._started_process(payload)
    if self._process is None:
      self._thread = threading.Thread(target=self._compute, args=(fit, view, ks), name="rank4class-baselines",
                                      daemon=True)
      self._thread.start()

  def _started_process(self, payload: bytes):
    """The baselines' process, started with SIGINT ignored (inherited by the new interpreter) and sent
    `payload` from a thread."""
    data_receive, data_send = _SPAWN.Pipe(duplex=False)
    self._receive, send = _SPAWN.Pipe(duplex=False)
    process = _SPAWN.Process(target=_fit_in_child, args=(data_receive, send), name="rank4class-baselines",
                             daemon=True)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
      process.start()
    finally:
      signal.signal(signal.SIGINT, previous)
      data_receive.close()
      send.close()
    threading.Thread(target=_send_payload, args=(data_send, payload), name="rank4class-baselines-data",
                     daemon=True).start()
    return process

  def _compute(self, fit, data: data_lib.PreparedData, ks: tuple[int, ...]) -> None:
    self._result = _fitted(lambda: fit(data, ks))

  @property
  def seconds(self) -> float:
    """Their own seconds once fitted, 0.0 before."""
    if self._result is None and self._process is not None and self._receive.poll():
      self._receive_result()
    return 0.0 if self._result is None else self._result[2]

  def _receive_result(self) -> None:
    try:
      self._result = self._receive.recv()
    except EOFError:  # Killed (out of memory): said in the report, as a baseline's failure is.
      self._result = None
    self._process.join()
    if self._result is None:
      self._result = ({"skipped": "failed: the baselines' process ended without a report (exit code "
                                  f"{self._process.exitcode})"}, None, 0.0)

  def report(self) -> dict:
    """The baselines' report, once they are fitted (their error, raised here, when they failed)."""
    if self._thread is not None:
      self._thread.join()
    elif self._result is None:
      self._receive_result()
    if self._result[1] is not None:
      raise self._result[1]
    return self._result[0]


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
