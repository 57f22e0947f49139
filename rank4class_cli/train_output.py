"""What `rank4class-train` prints when a run ends: each phase's time, the best validation, the candidate
chosen, the test report, calibration and baselines (`print_result`), and the `rank4class-predict` command to
run next (`predict_hint`)."""

import functools
import os

from absl import flags

from rank4class.evaluation import baselines as baselines_lib
from rank4class.evaluation import evaluation_report as evaluation_report_lib
from rank4class.inference import calibration as calibration_lib
from rank4class.training import model_choice
from rank4class.training import train as train_lib
from rank4class.training import training_data as data_lib
from rank4class.training import zero_shot_choice as zero_shot_choice_lib
from rank4class.training.few_shot import few_shot_path
from rank4class_cli import cli, terminal
from rank4class_data.rows import bad_rows, row_tables
from rank4class_encoders import embedding_cache
from rank4class_engine.loop import trainer

# "Chosen on validation (ndcg_5, higher is better; 490 rows, the simplest model within one standard error of
# the best): ...": the library's line.


def choice_line(choice: dict) -> str:
  """The run's choice in one line: a few-shot run's (`few_shot_path.choice_line`) or the validation's
  (`model_choice.choice_line`)."""
  return few_shot_path.choice_line(choice) if choice.get("few_shot") else model_choice.choice_line(choice)


def print_result(result: train_lib.Rank4ClassTrainResult,
                 config: train_lib.Rank4ClassTrainConfig | None = None, stream=None,
                 flag_values: flags.FlagValues | None = None) -> None:
  """Prints each phase's time on its own line (data, embedding, the training loop, export, test), the best
  validation result, the test report's table when present, and (with `config`) the `rank4class-predict`
  command to run next. Written to `stream` when given, else to stdout (`terminal.out`). The baselines' notes
  name config fields, written as the flags of `flag_values` (the binary's registry) when given."""
  write = stream.write if stream is not None else functools.partial(terminal.out, end="")
  phases = result.phase_seconds
  if "data" in phases:
    write(f"Read the data in {phases['data']:.1f} s.\n")
  if result.embedded_texts:
    write(f"Embedded {result.embedded_texts:,} texts in {phases.get('embedding', 0.0):.1f} s "
          f"({embedding_cache.source_note(result.embedded_texts, result.computed_texts)}).\n")
  loop = phases.get("loop", result.seconds)  # Runs finished before the phases were timed: the whole run.
  write(f"{trainer.trained_line(result.steps, loop)}; best val "
        f"{result.best_metric}={result.best_value} at step {result.best_step}.\n")
  if result.stopped_early and config is not None:
    write(f"Stopped at step {result.steps}, chosen on validation: no better {result.best_metric} in "
          f"the {config.run.patience} validations after step {result.best_step} "
          f"(--patience={config.run.patience}; 0 trains the default length exactly).\n")
  if result.choice is not None:
    write(choice_line(result.choice) + "\n")
  if result.zero_shot is not None:
    write(zero_shot_choice_lib.choice_line(result.zero_shot) + "\n")
  if result.export_dir:
    exported = f" in {phases['export']:.1f} s" if "export" in phases else ""
    write(f"Exported the best model to {result.export_dir}{exported}.\n")
    if config is not None:
      write(predict_hint(result, config) + "\n")
  if result.test_report is not None:
    evaluated = f" (evaluated in {phases['test']:.1f} s)" if "test" in phases else ""
    write(f"Test split{evaluated}:\n" + evaluation_report_lib.format_table(result.test_report) + "\n")
  if result.calibration is not None:
    calibrated = f" (in {phases['calibration']:.1f} s)" if "calibration" in phases else ""
    write(calibration_lib.summary_line(result.calibration) + f"{calibrated}.\n")
    warning = calibration_lib.warning_line(result.calibration)
    if warning:
      write(warning + "\n")
  if result.baselines is not None:
    model_metrics = (
      result.test_report["metrics"] if result.test_report is not None else result.validation_metrics
    )
    lines = baselines_lib.format_lines(result.baselines, model_metrics)
    write(cli.flag_words(lines, flag_values) if flag_values is not None else lines)


def predict_hint(result: train_lib.Rank4ClassTrainResult, config: train_lib.Rank4ClassTrainConfig) -> str:
  """The `rank4class-predict` command for the trained model: runs as printed once its one placeholder, the
  input path, is given. It carries the training flags that reading rows of the same layout needs (format,
  columns, bad-row policy); the placeholder names the input the model reads (an image folder, rows, text
  lines)."""
  data = config.data
  rows = data.rows
  trained_on_rows = data_lib.resolved_input_format(data) == data_lib.ROWS and not os.path.isdir(
      data.train_files or "")
  options: list[tuple[str, object]] = []
  if result.input_kind == data_lib.IMAGE_INPUT:
    placeholder = "<image folder>"
  elif result.input_kind == data_lib.DENSE_INPUT:
    if trained_on_rows and rows.feature_columns:
      placeholder = "<rows>"
      options.append(("feature_columns", ",".join(rows.feature_columns)))
    else:  # Dense features without named columns (LibSVM, TFRecords): the converter's records carry them.
      placeholder = "<rank4class-convert .tfrecord>"
  elif trained_on_rows:
    placeholder = "<rows>"
    if rows.text_column not in (row_tables.AUTO, None, ""):
      options.append(("text_column", rows.text_column))
  else:
    placeholder = "<texts or rows>"
  if trained_on_rows and placeholder == "<rows>":
    if rows.input_format != row_tables.AUTO:
      options.append(("input_format", rows.input_format))
    if rows.label_column != row_tables.AUTO:
      options.append(("label_column", rows.label_column))
  if trained_on_rows and rows.bad_rows != bad_rows.FAIL:
    options.append(("bad_rows", rows.bad_rows))
    if rows.max_bad_rows is not None:
      options.append(("max_bad_rows", rows.max_bad_rows))
  return cli.next_command("rank4class-predict", [("model_dir", result.model_dir), ("input", placeholder),
                                                 *options, ("output", "predictions.csv")])
