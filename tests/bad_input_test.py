"""Every binary against every kind of bad input it reads, as one table (README "Bad input, one line").

A row names the binary, its flags (paths as `{placeholders}` of the small files the fixtures write, `{out}` a
fresh folder per row), the bad input and what must happen:
- an error: exit status 1 and exactly one stderr line, `<binary>: error: <message>`, the message matching the
  row's regex, which names the user's file (never a temporary) and the row, line or record where there is one;
  no traceback; nothing written (no output, rejects file or temporary; an existing output byte-identical; a
  run folder holds at most its lock and config, as a run that failed before its first checkpoint leaves it);
- ACCEPTED: exit status 0 and, where the row names a clean twin of the input, the twin's result (a UTF-8 byte
  order mark, a 5 MB field, labels stored as floats or class names), or the bad rows listed in the rejects
  file (--bad_rows=skip);
- Ctrl-C: the binary runs in a subprocess that sends itself SIGINT inside its long loop
  (tests/rank4class_engine/fault_injection.py, never a timer): exit status 130, one line, nothing
  half-written.
A row with `known_failure` fails today for a reason outside the files this test may change; it is checked to
still fail, so that fixing it makes the test say to drop the mark.

The other binaries run in this process (tests/rank4class_cli/cli_runner.py); one real console-script run
checks that TensorFlow's own C++ warnings stay off stderr.
"""

import csv
import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from rank4class.inference import serving, zero_shot
from rank4class.modeling import class_encoders, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class_cli.binaries import (
  convert_encoder_main,
  convert_main,
  evaluate_main,
  export_main,
  pairwise_main,
  predict_main,
  ranksvm_main,
  study_main,
  train_main,
)
from rank4class_data import datasets
from rank4class_data.records import elwc, tfrecords
from rank4class_encoders import text_encoder
from tests.rank4class_cli import cli_runner
from tests.rank4class_data import elwc_lists, example_record_files
from tests.rank4class_encoders import tiny_bert
from tests.rank4class_engine import fault_injection


@dataclasses.dataclass(frozen=True)
class Binary:
  """A binary under test: its module and the outputs a failed run must leave as they were.

  Attributes:
    module: The binary's module (`main`, `FLAGS`, `parse_flags`).
    sentinels: Files (relative to `{out}`) that exist before each run, standing for earlier outputs.
    run_files: Names a run folder `{out}/run` may hold after a failed run (and anything under them).
  """

  module: object
  sentinels: tuple[str, ...] = ()
  run_files: tuple[str, ...] = ()


# What a run folder holds after a run that failed before its first checkpoint
# (rank4class_engine.runs.run_directory: it blocks nothing; the corrected rerun starts afresh): its lock,
# config, TensorBoard logs and progress log.
RUN_FILES = (".run.lock", "config.json", "logs", "progress.jsonl")
BINARIES = {
    "rank4class-convert": Binary(convert_main, ("out.tfrecord", "out.labels.json", "rows.csv")),
    "rank4class-convert-encoder": Binary(convert_encoder_main, ("hub/keep.txt",)),
    "rank4class-train": Binary(train_main, run_files=RUN_FILES),
    "rank4class-evaluate": Binary(evaluate_main, ("report.json",)),
    "rank4class-predict": Binary(predict_main, ("predictions.csv",)),
    "rank4class-export": Binary(export_main, ("export/keep.txt",)),
    "rank4class-study": Binary(study_main, ("study.txt",)),
    "pairwise-train": Binary(pairwise_main, run_files=RUN_FILES),
    "pairwise-ranksvm": Binary(ranksvm_main, ("rejects.jsonl",)),
}
SENTINEL = b"an earlier output\n"

ACCEPTED = "ACCEPTED"
# A temporary of the toolkit's atomic writers (`.<name>.<8 characters>.tmp` / `.old`), in a message or a
# folder.
TEMPORARY = re.compile(r"\.[^/\s]+\.[A-Za-z0-9_]{8}\.(tmp|old)\b")
# TensorFlow 2.21 writes these INFO lines while its libraries load, before any setting can silence them.
LOAD_TIME_LINE = re.compile(r"^(I\d{4} \d\d:\d\d:\S+\s+\d+ \S+\] .*|WARNING: All log messages before "
                            r"absl::InitializeLog\(\) is called are written to STDERR)$")


@dataclasses.dataclass(frozen=True)
class Cell:
  """One row of the table.

  Attributes:
    binary: The program name (a key of BINARIES).
    bad: The bad input, in words.
    argv: The flags; `{name}` stands for a fixture path, `{out}` for the row's output folder.
    expect: Regex of the message after `<binary>: error: ` (paths as `{name}`); ACCEPTED for a run that must
      succeed; for a Ctrl-C row, the line after `<binary>: `.
    same_as: ACCEPTED: the flags of the clean twin whose output must be the same.
    compare: What is compared with the twin: "stdout", "file:<path in out>" (bytes), or
      "json:<path in out>:<key>,<key>" (those entries).
    rejects: ACCEPTED under --bad_rows=skip: (rejects file in out, ((row, field), ...)) it must list.
    fault: Ctrl-C rows: (fault_injection fault, n).
    known_failure: Why the row fails today (outside the files this test may change).
  """

  binary: str
  bad: str
  argv: tuple[str, ...]
  expect: str
  same_as: tuple[str, ...] | None = None
  compare: str | None = None
  rejects: tuple[str, tuple[tuple[int, str | None], ...]] | None = None
  fault: tuple[str, int] | None = None
  known_failure: str | None = None

  @property
  def name(self) -> str:
    return re.sub(r"\W+", "_", f"{self.binary} {self.bad}").strip("_")


FEATURES = tuple(f"x{i}" for i in range(8))
COLUMNS = "--feature_columns=" + ",".join(FEATURES)
CONVERT = ("--output={out}/out.tfrecord", COLUMNS)
FROM_TFRECORD = ("--direction=from_tfrecord", "--output={out}/rows.csv")
PREDICT = ("--model_dir={dense}", "--output={out}/predictions.csv", COLUMNS, "--id_column=id",
           "--label_column=label")
PREDICT_TFRECORD = ("--model_dir={dense}", "--output={out}/predictions.csv")
PREDICT_TEXT = ("--model_dir={text}", "--output={out}/predictions.csv")
PREDICT_ZERO_SHOT = ("--model_dir={zero_shot}", "--output={out}/predictions.csv")
EVALUATE = ("--model_dir={dense}", "--report_path={out}/report.json", "--batch_size=16")
EVALUATE_ELWC = (*EVALUATE, "--input_format=elwc", "--label_key=relevance")
# What a run does with its inputs is under test, not the models it chooses between: no logistic-regression
# candidates.
TRAIN = ("--model_dir={out}/run", COLUMNS, "--train_steps=2", "--eval_every=2", "--batch_size=8",
         "--checkpoint_every=0", "--verbose=0", "--export=false", "--hidden_width=8", "--seed=0",
         "--nolinear_candidate")
TRAIN_RECORDS = (*TRAIN, "--label_vocab={records_vocab}")
EXPORT = ("--export_dir={out}/export", "--retriever_dir={dense}", "--num_candidates=5")
ENCODER = ("--output_dir={out}/hub",)
PAIRWISE = ("--model_dir={out}/run", "--encoder=hashed_bow", "--train_steps=2", "--checkpoint_every=2",
            "--lists_per_batch=2", "--strategy=one_device", "--export=false", "--topn=3",
            "--test_fraction=0.25", "--validation_fraction=0.25", "--dropout=0")
PAIRWISE_ROWS = (*PAIRWISE, "--dataset=rows", "--group_column=group")
PAIRWISE_ELWC = (*PAIRWISE, "--dataset=elwc", "--label_key=relevance")
RANKSVM = ("--mode=evaluate", "--max_iterations=20", "--rejects={out}/rejects.jsonl")
RANKSVM_ROWS = (*RANKSVM, "--input_format=rows", "--query_id_column=query", "--label_column=position",
                "--label_kind=rank", "--feature_columns=bm25,length", "--baseline_features=bm25")
RANKSVM_LIBSVM = (*RANKSVM, "--input_format=libsvm", "--label_kind=relevance")
RANKSVM_ELWC = (*RANKSVM, "--input_format=elwc", "--label_key=relevance", "--baseline_features=f1")

NOT_UTF8 = (r"byte 0xe9 is not UTF-8; expected UTF-8 text \(save the file as UTF-8, e\.g\. iconv -f "
            r"latin1 -t utf-8\)\.")
EMPTY_ROWS = (r"no rows \(the file is empty\); expected a row file \(CSV, TSV, JSONL, LibSVM or \.tab\) "
              r"with data rows\.")
HEADER_ONLY = r"no rows \(only a header\); expected data rows after the header\."
JSON_LIST = r", row 1: a JSON list; expected one JSON object per line\."
A_FOLDER = (r": a directory; expected a row file \(CSV, TSV, JSONL, LibSVM or \.tab\) \(a file, "
            r"not a folder\)\.")
NO_IMAGES = (r": no images( in it or)? in class subfolders; expected <folder>/<class name>/<image>, "
             r"images ending .*\.")
EMPTY_RECORDS = r": no records \(the file is empty\); expected a TFRecord file with records\."
TRUNCATED = (r", row 40: truncated record at byte \d+ \(the file ends inside it\); expected a complete "
             r"TFRecord file \(write or copy it again\)\.")
# A TFRecord cut 5 bytes into its last record's 12-byte header, which TensorFlow's reader takes for the file's
# end.
CUT_IN_HEADER = (r", row {row}: truncated record at byte \d+ \(the file ends 5 bytes into its 12-byte "
                 r"header\); expected a complete TFRecord file \(write or copy it again\)\.")
NOT_TFRECORD = (r", row 1: not a TFRecord file \(no valid record at byte 0\); expected a TFRecord file \(is "
                r"the input format right\?\)\.")
NOT_AN_EXAMPLE = (r": not a tf\.Example record \(it does not parse\); expected classification tf\.Examples "
                  r"\(is the input format right\?\)\.")
NOT_AN_ELWC = (r": not an ExampleListWithContext record \(it does not parse\); expected ELWC ranking lists "
               r"\(is the input format right\?\)\.")
RECORDS_FOLDER = r": a directory; expected TFRecord files \(a file, or a pattern such as .*\)\."
RECORD_FOLDER = r": a directory; expected a TFRecord file \(a file, not a folder\)\."
INTERRUPTED = r"interrupted; nothing was left half-written\."
COMPLETE_FILE = r"expected a complete file \(write or copy it again\)\."
TABLE = (
    # rank4class-convert: rows -> TFRecord, and back.
    Cell("rank4class-convert", "empty CSV", ("--input={empty_csv}", *CONVERT), "{empty_csv}: " + EMPTY_ROWS),
    Cell("rank4class-convert", "header-only CSV", ("--input={header_csv}", *CONVERT),
         "{header_csv}: " + HEADER_ONLY),
    Cell("rank4class-convert", "header-only TSV", ("--input={header_tsv}", *CONVERT),
         "{header_tsv}: " + HEADER_ONLY),
    Cell("rank4class-convert", "header-only JSONL", ("--input={header_jsonl}", *CONVERT),
         "{header_jsonl}" + JSON_LIST),
    Cell("rank4class-convert", "UTF-8 BOM in a CSV", ("--input={bom_csv}", *CONVERT), ACCEPTED,
         same_as=("--input={digits_csv}", *CONVERT), compare="file:out.tfrecord"),
    Cell("rank4class-convert", "UTF-8 BOM in a JSONL", ("--input={bom_jsonl}", *CONVERT), ACCEPTED,
         same_as=("--input={digits_jsonl}", *CONVERT), compare="file:out.tfrecord"),
    Cell("rank4class-convert", "Latin-1 row", ("--input={latin_csv}", *CONVERT),
         r"{latin_csv}, row 3 \(line 4\), field 'id': " + NOT_UTF8),
    Cell("rank4class-convert", "Latin-1 row skipped", ("--input={latin_csv}", *CONVERT, "--bad_rows=skip"),
         ACCEPTED, rejects=("out.rejects.jsonl", ((3, "id"),))),
    Cell("rank4class-convert", "CSV cut inside a quoted field, bad rows skipped", ("--input={cut_quote_csv}",
                                                                                    *CONVERT,
                                                                                   "--bad_rows=skip"),
         r"{cut_quote_csv}, row 40 \(line 41\): the file ends inside a quoted field of this row \(which "
         r"starts on line 41\): it is cut short, or a quote is not closed; " + COMPLETE_FILE),
    Cell("rank4class-convert", "5 MB text field", ("--input={big_text_csv}", "--output={out}/out.tfrecord"),
         ACCEPTED,
         same_as=("--direction=from_tfrecord", "--input={out}/out.tfrecord", "--output={out}/rows.csv"),
         compare="text_back:rows.csv"),
    Cell("rank4class-convert", "folder as a CSV", ("--input={folder}", "--input_format=csv", *CONVERT),
         "{folder}" + A_FOLDER),
    Cell("rank4class-convert", "folder without images", ("--input={folder}", *CONVERT),
         "{folder}" + NO_IMAGES),
    Cell("rank4class-convert", "empty TFRecord", ("--input={records_empty}", *FROM_TFRECORD),
         "{records_empty}" + EMPTY_RECORDS),
    Cell("rank4class-convert", "truncated TFRecord", ("--input={records_trunc}", *FROM_TFRECORD),
         "{records_trunc}" + TRUNCATED),
    Cell("rank4class-convert", "TFRecord cut inside a record header", ("--input={records_cut_header}",
                                                                        *FROM_TFRECORD),
         "{records_cut_header}" + CUT_IN_HEADER.format(row=40)),
    Cell("rank4class-convert", "CSV as a TFRecord", ("--input={digits_csv}", *FROM_TFRECORD),
         "{digits_csv}" + NOT_TFRECORD),
    Cell("rank4class-convert", "folder as a TFRecord", ("--input={records_folder}", *FROM_TFRECORD),
         "{records_folder}" + RECORD_FOLDER),
    Cell("rank4class-convert", "garbage record", ("--input={records_garbage}", *FROM_TFRECORD),
         "{records_garbage}, row 6" + NOT_AN_EXAMPLE),
    Cell("rank4class-convert", "record missing a feature", ("--input={records_missing}", *FROM_TFRECORD),
         r"{records_missing}, row 6, field 'features': missing feature; expected a float_list "
         r"feature 'features'\."),
    Cell("rank4class-convert", "float labels", ("--input={records_float}", *FROM_TFRECORD),
         r"{records_float}, row 1, field 'label': float_list feature; expected an int64_list feature\."),
    Cell("rank4class-convert", "Ctrl-C while converting", ("--input={digits_csv}", *CONVERT), INTERRUPTED,
         fault=("sigint_in_loop", 1)),
    # rank4class-predict: class texts (zero-shot exports).
    Cell("rank4class-predict", "class texts: a class twice", ("--input={lines_txt}", *PREDICT_ZERO_SHOT,
                                                              "--class_texts={class_texts_twice}"),
         r"{class_texts_twice}, row 3 \(line 4\), field 'class': class 'cat' again \(first on row 1\); "
         r"expected one row per class\."),
    Cell("rank4class-predict", "class texts: no text column", ("--input={lines_txt}", *PREDICT_ZERO_SHOT,
                                                               "--class_texts={class_texts_no_text}"),
         r"{class_texts_no_text}, header row \(line 1\), field 'text': no 'text' column \(the header has "
         r"\['class', 'description'\]\); expected columns 'class' and 'text'\."),
    Cell("rank4class-predict", "class texts for a trained model", ("--input={lines_txt}", *PREDICT_TEXT,
                                                                   "--class_texts={class_texts_csv}"),
         r"{text}/export: class texts apply to zero-shot exports \(rank4class-export --kind=zero_shot\); "
         r"this is a one_stage export, which ranks its trained classes"),
    Cell("rank4class-predict", "class texts of new classes", ("--input={lines_txt}", *PREDICT_ZERO_SHOT,
                                                              "--class_texts={class_texts_csv}"), ACCEPTED),
    # rank4class-predict: rows, text lines, TFRecords.
    Cell("rank4class-predict", "empty CSV", ("--input={empty_csv}", *PREDICT), "{empty_csv}: " + EMPTY_ROWS),
    Cell("rank4class-predict", "header-only CSV", ("--input={header_csv}", *PREDICT),
         "{header_csv}: " + HEADER_ONLY),
    Cell("rank4class-predict", "header-only JSONL", ("--input={header_jsonl}", *PREDICT),
         "{header_jsonl}" + JSON_LIST),
    Cell("rank4class-predict", "UTF-8 BOM in a CSV", ("--input={bom_csv}", *PREDICT), ACCEPTED,
         same_as=("--input={digits_csv}", *PREDICT), compare="file:predictions.csv"),
    Cell("rank4class-predict", "UTF-8 BOM in a JSONL", ("--input={bom_jsonl}", *PREDICT), ACCEPTED,
         same_as=("--input={digits_jsonl}", *PREDICT), compare="file:predictions.csv"),
    Cell("rank4class-predict", "Latin-1 row", ("--input={latin_csv}", *PREDICT),
         r"{latin_csv}, row 3 \(line 4\), field 'id': " + NOT_UTF8),
    Cell("rank4class-predict", "Latin-1 row skipped", ("--input={latin_csv}", *PREDICT, "--bad_rows=skip"),
         ACCEPTED, rejects=("predictions.rejects.jsonl", ((3, "id"),))),
    Cell("rank4class-predict", "JSONL with its last line cut, bad rows skipped",
         ("--input={cut_jsonl}", *PREDICT,
                                                                                   "--bad_rows=skip"),
         r"{cut_jsonl}, row 40: the last line is cut \(invalid JSON \(.+\), no line end\); " + COMPLETE_FILE),
    Cell("rank4class-predict", "5 MB text field", ("--input={big_csv}", *PREDICT), ACCEPTED,
         same_as=("--input={digits_csv}", *PREDICT), compare="file:predictions.csv"),
    Cell("rank4class-predict", "folder as a CSV", ("--input={folder}", "--input_format=csv", *PREDICT),
         "{folder}" + A_FOLDER),
    Cell("rank4class-predict", "folder without images", ("--input={folder}", *PREDICT),
         "{folder}" + NO_IMAGES),
    Cell("rank4class-predict", "empty text file", ("--input={empty_txt}", *PREDICT_TEXT),
         r"{empty_txt}: no rows \(no non-blank line\); expected one input per line\."),
    Cell("rank4class-predict", "UTF-8 BOM in text lines", ("--input={bom_txt}", *PREDICT_TEXT), ACCEPTED,
         same_as=("--input={lines_txt}", *PREDICT_TEXT), compare="file:predictions.csv"),
    Cell("rank4class-predict", "Latin-1 text line", ("--input={latin_txt}", *PREDICT_TEXT),
         "{latin_txt}, row 2: " + NOT_UTF8),
    Cell("rank4class-predict", "Latin-1 text line skipped",
         ("--input={latin_txt}", *PREDICT_TEXT, "--bad_rows=skip"),
         ACCEPTED, rejects=("predictions.rejects.jsonl", ((2, None),))),
    Cell("rank4class-predict", "empty TFRecord", ("--input={records_empty}", *PREDICT_TFRECORD),
         "{records_empty}" + EMPTY_RECORDS),
    Cell("rank4class-predict", "truncated TFRecord", ("--input={records_trunc}", *PREDICT_TFRECORD),
         "{records_trunc}" + TRUNCATED),
    Cell("rank4class-predict", "TFRecord cut inside a record header", ("--input={records_cut_header}",
                                                                        *PREDICT_TFRECORD),
         "{records_cut_header}" + CUT_IN_HEADER.format(row=40)),
    Cell("rank4class-predict", "CSV as a TFRecord", ("--input={digits_csv}", "--input_format=tfrecord",
                                                     *PREDICT_TFRECORD), "{digits_csv}" + NOT_TFRECORD),
    Cell("rank4class-predict", "folder as a TFRecord", ("--input={records_folder}", "--input_format=tfrecord",
                                                        *PREDICT_TFRECORD),
         "{records_folder}" + RECORD_FOLDER),
    Cell("rank4class-predict", "garbage record", ("--input={records_garbage}", *PREDICT_TFRECORD),
         "{records_garbage}, row 6" + NOT_AN_EXAMPLE),
    Cell("rank4class-predict", "record missing a feature", ("--input={records_missing}", *PREDICT_TFRECORD),
         r"{records_missing}, row 6, field 'features': missing feature; expected a float_list "
         r"feature 'features'\."),
    Cell("rank4class-predict", "float labels", ("--input={records_float}", *PREDICT_TFRECORD), ACCEPTED,
         same_as=("--input={records}", *PREDICT_TFRECORD), compare="file:predictions.csv"),
    Cell("rank4class-predict", "class-name labels", ("--input={records_names}", *PREDICT_TFRECORD), ACCEPTED,
         same_as=("--input={records}", *PREDICT_TFRECORD), compare="file:predictions.csv"),
    Cell("rank4class-predict", "Ctrl-C while predicting",
         ("--input={digits_csv}", *PREDICT, "--batch_size=4"), INTERRUPTED, fault=("sigint_in_loop", 1)),
    # rank4class-evaluate: tf.Example and ELWC TFRecords, and the model.
    Cell("rank4class-evaluate", "empty TFRecord", ("--input={records_empty}", *EVALUATE),
         "{records_empty}" + EMPTY_RECORDS),
    Cell("rank4class-evaluate", "truncated TFRecord", ("--input={records_trunc}", *EVALUATE),
         "{records_trunc}" + TRUNCATED),
    Cell("rank4class-evaluate", "TFRecord cut inside a record header", ("--input={records_cut_header}",
                                                                         *EVALUATE),
         "{records_cut_header}" + CUT_IN_HEADER.format(row=40)),
    Cell("rank4class-evaluate", "ELWC cut inside a list header",
         ("--input={lists_cut_header}", *EVALUATE_ELWC), "{lists_cut_header}" + CUT_IN_HEADER.format(row=10)),
    # A row file or a folder read as records because the user said so (--input_format=auto reads them as
    # rows).
    Cell("rank4class-evaluate", "CSV as a TFRecord", ("--input={digits_csv}", "--input_format=example",
                                                      *EVALUATE), "{digits_csv}" + NOT_TFRECORD),
    Cell("rank4class-evaluate", "short CSV as a TFRecord", ("--input={tiny_csv}", "--input_format=example",
                                                            *EVALUATE),
         r"{tiny_csv}, row 1: not a TFRecord file \(6 bytes, shorter than one record\); expected a TFRecord "
         r"file \(is the input format right\?\)\."),
    Cell("rank4class-evaluate", "folder as a TFRecord", ("--input={records_folder}", "--input_format=example",
                                                         *EVALUATE), "{records_folder}" + RECORDS_FOLDER),
    Cell("rank4class-evaluate", "CSV rows", ("--input={digits_csv}", *EVALUATE, COLUMNS), ACCEPTED),
    Cell("rank4class-evaluate", "CSV rows without the model's columns", ("--input={digits_csv}", *EVALUATE),
         r"{digits_csv}, header row \(line 1\), field 'text': missing column 'text'; expected one of the "
         r"header's columns \[.*\]\."),
    Cell("rank4class-evaluate", "garbage record", ("--input={records_garbage}", *EVALUATE),
         "{records_garbage}, row 6" + NOT_AN_EXAMPLE),
    Cell("rank4class-evaluate", "record missing a feature", ("--input={records_missing}", *EVALUATE),
         r"{records_missing}, row 6, field features: missing feature; expected features \(float_list\) in "
         r"every record\."),
    Cell("rank4class-evaluate", "float labels", ("--input={records_float}", *EVALUATE), ACCEPTED,
         same_as=("--input={records}", *EVALUATE), compare="json:report.json:metrics,confusion,n"),
    Cell("rank4class-evaluate", "class-name labels", ("--input={records_names}", *EVALUATE), ACCEPTED,
         same_as=("--input={records}", *EVALUATE), compare="json:report.json:metrics,confusion,n"),
    Cell("rank4class-evaluate", "ELWC without the label", ("--input={lists}", *EVALUATE_ELWC,
                                                           "--label_key=utility"),
         r"{lists}, row 1, example 1, field utility: missing feature; expected utility \(float_list\) in "
         r"every example\."),
    Cell("rank4class-evaluate", "ELWC without the model's feature", ("--input={lists}", *EVALUATE_ELWC,
                                                                     "--feature_key=pixels"),
         r"{lists}, row 1, context, field pixels: missing feature; expected pixels \(float_list\) in every "
         r"list's context\."),
    Cell("rank4class-evaluate", "garbage ELWC list", ("--input={lists_garbage}", *EVALUATE_ELWC),
         "{lists_garbage}, row 5" + NOT_AN_ELWC),
    Cell("rank4class-evaluate", "CSV as ELWC", ("--input={digits_csv}", *EVALUATE_ELWC),
         "{digits_csv}" + NOT_TFRECORD),
    Cell("rank4class-evaluate", "ELWC as tf.Example", ("--input={lists}", *EVALUATE),
         "{lists}, row 1" + NOT_AN_EXAMPLE),
    Cell("rank4class-evaluate", "empty saved_model.pb", ("--input={records}", *EVALUATE[1:],
                                                         "--model_dir={model_empty_graph}"),
         r"{model_empty_graph}/export/saved_model\.pb: an empty file; expected a SavedModel's graph \(export "
         r"the model again\)\."),
    Cell("rank4class-evaluate", "empty variables file", ("--input={records}", *EVALUATE[1:],
                                                         "--model_dir={model_empty_variables}"),
         r"{model_empty_variables}/export: cannot load the SavedModel \(.+\); expected a SavedModel exported "
         r"by rank4class-train or rank4class-export \(export it again\)\."),
    # rank4class-train: rows (dense features), tf.Example and ELWC TFRecords. (Ctrl-C while training, for it
    # and pairwise-train: tests/rank4class_cli/binaries/train_main_test.py,
    # tests/rank4class_cli/binaries/pairwise_main_test.py.)
    Cell("rank4class-train", "class texts missing a class", ("--train_files={digits_csv}", *TRAIN,
                                                             "--class_encoder=metadata",
                                                             "--class_texts={class_texts_csv}"),
         r"{class_texts_csv}, field 'class': no text for 10 of the data's 10 classes: .*; expected a row for "
         r"every class of the training data\."),
    Cell("rank4class-train", "empty CSV", ("--train_files={empty_csv}", *TRAIN),
         "{empty_csv}: " + EMPTY_ROWS),
    Cell("rank4class-train", "header-only CSV", ("--train_files={header_csv}", *TRAIN),
         "{header_csv}: " + HEADER_ONLY),
    Cell("rank4class-train", "header-only JSONL", ("--train_files={header_jsonl}", *TRAIN),
         "{header_jsonl}" + JSON_LIST),
    Cell("rank4class-train", "5 MB text field", ("--train_files={big_csv}", *TRAIN), ACCEPTED),
    Cell("rank4class-train", "UTF-8 BOM in a CSV", ("--train_files={bom_big_csv}", *TRAIN), ACCEPTED,
         same_as=("--train_files={big_csv}", *TRAIN),
         compare="json:run/train_result.json:validation_metrics,best_step"),
    Cell("rank4class-train", "Latin-1 row", ("--train_files={latin_csv}", *TRAIN),
         r"{latin_csv}, row 3 \(line 4\), field 'id': " + NOT_UTF8),
    Cell("rank4class-train", "Latin-1 row skipped", ("--train_files={latin_csv}", *TRAIN, "--bad_rows=skip"),
         ACCEPTED, rejects=("row cache", ((3, "id"),))),
    Cell("rank4class-train", "folder without images", ("--train_files={folder}", *TRAIN),
         "{folder}" + NO_IMAGES),
    Cell("rank4class-train", "empty TFRecord", ("--train_files={records_empty}", *TRAIN_RECORDS),
         "{records_empty}" + EMPTY_RECORDS),
    Cell("rank4class-train", "truncated TFRecord", ("--train_files={records_trunc}", *TRAIN_RECORDS),
         "{records_trunc}" + TRUNCATED),
    Cell("rank4class-train", "TFRecord cut inside a record header", ("--train_files={records_cut_header}",
                                                                      *TRAIN_RECORDS),
         "{records_cut_header}" + CUT_IN_HEADER.format(row=40)),
    Cell("rank4class-train", "CSV as a TFRecord",
         ("--train_files={digits_csv}", "--input_format=example", *TRAIN), "{digits_csv}" + NOT_TFRECORD),
    Cell("rank4class-train", "folder as a TFRecord",
         ("--train_files={records_folder}", "--input_format=example",
                                                      *TRAIN), "{records_folder}" + RECORDS_FOLDER),
    Cell("rank4class-train", "garbage record in streamed validation", (
        "--train_files={records}", "--validation_files={records_garbage}", *TRAIN_RECORDS),
         "{records_garbage}, row 6" + NOT_AN_EXAMPLE),
    Cell("rank4class-train", "empty validation TFRecord", (
        "--train_files={records}", "--validation_files={records_empty}", *TRAIN_RECORDS),
         "{records_empty}" + EMPTY_RECORDS),
    Cell("rank4class-train", "record missing a feature", ("--train_files={records_missing}", *TRAIN_RECORDS),
         r"{records_missing}, row 6, field features: missing feature; expected features \(float_list\) in "
         r"every record\."),
    Cell("rank4class-train", "float labels", ("--train_files={records_float}", *TRAIN_RECORDS),
         r"{records_float}, row 1, field label: float_list values; expected int64_list values\."),
    Cell("rank4class-train", "ELWC without the label", ("--train_files={lists}", "--input_format=elwc",
                                                         "--label_vocab={classes_txt}",
                                                        "--label_key=utility", *TRAIN),
         r"{lists}, row 1, .*'utility'.*"),
    Cell("rank4class-train", "CSV as ELWC", ("--train_files={digits_csv}", "--input_format=elwc",
                                             "--label_vocab={classes_txt}", *TRAIN),
         "{digits_csv}" + NOT_TFRECORD),
    # rank4class-export: the models it reads.
    Cell("rank4class-export", "file as the model", ("--model_dir={digits_csv}", *EXPORT),
         r"{digits_csv}: no SavedModel here or in {digits_csv}/export; expected the export of a training run "
         r"\(or its model_dir\)\."),
    Cell("rank4class-export", "empty model folder", ("--model_dir={folder}", *EXPORT),
         r"{folder}: no SavedModel here or in {folder}/export; expected the export of a training run \(or "
         r"its model_dir\)\."),
    Cell("rank4class-export", "empty saved_model.pb", ("--model_dir={model_empty_graph}", *EXPORT),
         r"{model_empty_graph}/export/saved_model\.pb: an empty file; expected a SavedModel's graph \(export "
         r"the model again\)\."),
    Cell("rank4class-export", "empty variables file", ("--model_dir={model_empty_variables}", *EXPORT),
         r"{model_empty_variables}/export: cannot load the SavedModel \(.+\); expected a SavedModel exported "
         r"by rank4class-train or rank4class-export \(export it again\)\."),
    Cell("rank4class-export", "model without class texts", ("--model_dir={dense}", "--kind=zero_shot",
                                                             "--export_dir={out}/export"),
         r"{dense}: a zero-shot export needs a model whose classes are texts \(the metadata class encoder: "
         r"`rank4class-train --class_encoder=metadata`\); this model's class encoder is "
         r"OneHotClassEncoder\."),
    # rank4class-convert-encoder: a Hugging Face BERT folder.
    Cell("rank4class-convert-encoder", "file as the checkpoint", ("--checkpoint_dir={digits_csv}", *ENCODER),
         r"{digits_csv}: a file; expected a Hugging Face BERT folder \(config\.json, vocab\.txt, "
         r"model\.safetensors\), not a file\."),
    Cell("rank4class-convert-encoder", "empty folder", ("--checkpoint_dir={folder}", *ENCODER),
         r"Checkpoint directory '{folder}' lacks config\.json, vocab\.txt, model\.safetensors; .*"),
    Cell("rank4class-convert-encoder", "empty config.json",
         ("--checkpoint_dir={bert_empty_config}", *ENCODER),
         r"{bert_empty_config}/config\.json is not valid JSON: Expecting value: line 1 column 1 \(char 0\)"),
    Cell("rank4class-convert-encoder", "empty vocab.txt", ("--checkpoint_dir={bert_empty_vocab}", *ENCODER),
         r"{bert_empty_vocab}/vocab\.txt has 0 word pieces but config\.json says vocab_size=\d+\."),
    Cell("rank4class-convert-encoder", "empty model.safetensors",
         ("--checkpoint_dir={bert_empty_weights}", *ENCODER),
         r"{bert_empty_weights}/model\.safetensors is not a readable safetensors file: .+"),
    Cell("rank4class-convert-encoder", "truncated model.safetensors", (
        "--checkpoint_dir={bert_truncated_weights}", *ENCODER),
         r"{bert_truncated_weights}/model\.safetensors is not a readable safetensors file: .+"),
    Cell("rank4class-convert-encoder", "Latin-1 vocab.txt line",
         ("--checkpoint_dir={bert_latin_vocab}", *ENCODER),
         r"{bert_latin_vocab}/vocab\.txt, row \d+: " + NOT_UTF8),
    Cell("rank4class-convert-encoder", "UTF-8 BOM in config.json",
         ("--checkpoint_dir={bert_bom_config}", *ENCODER),
         r"{bert_bom_config}/config\.json is not valid JSON: Unexpected UTF-8 BOM .*"),
    Cell("rank4class-convert-encoder", "UTF-8 BOM in vocab.txt",
         ("--checkpoint_dir={bert_bom_vocab}", *ENCODER),
         r"{bert_bom_vocab}/vocab\.txt, row 1: a UTF-8 byte order mark before the first word piece "
         r"'\[PAD\]'; expected one word piece per line and no byte order mark \(save it as UTF-8 "
         r"without BOM\)\."),
    # rank4class-study: its output folder.
    Cell("rank4class-study", "file as the output folder", ("--output_dir={out}/study.txt",),
         r"output_dir {out}/study\.txt is a file; expected a folder \(new or a study's earlier output\)"),
    # pairwise-train: grouped rows, ELWC text lists, a run folder.
    Cell("pairwise-train", "empty CSV", ("--train_files={empty_csv}", *PAIRWISE_ROWS),
         "{empty_csv}: " + EMPTY_ROWS),
    Cell("pairwise-train", "header-only CSV", ("--train_files={pw_header_csv}", *PAIRWISE_ROWS),
         "{pw_header_csv}: " + HEADER_ONLY),
    Cell("pairwise-train", "5 MB text field", ("--train_files={pw_big_csv}", *PAIRWISE_ROWS), ACCEPTED),
    Cell("pairwise-train", "UTF-8 BOM in a CSV", ("--train_files={pw_bom_csv}", *PAIRWISE_ROWS), ACCEPTED,
         same_as=("--train_files={pw_big_csv}", *PAIRWISE_ROWS),
         compare="json:run/metrics.json:num_items,test,validation_history"),
    Cell("pairwise-train", "Latin-1 row", ("--train_files={pw_latin_csv}", *PAIRWISE_ROWS),
         r"{pw_latin_csv}, row 4 \(line 5\), field 'text': " + NOT_UTF8),
    Cell("pairwise-train", "Latin-1 row skipped",
         ("--train_files={pw_latin_csv}", *PAIRWISE_ROWS, "--bad_rows=skip"),
         ACCEPTED, rejects=("run/rejects.jsonl", ((4, "text"),))),
    Cell("pairwise-train", "folder as a CSV", ("--train_files={folder}", *PAIRWISE_ROWS),
         "{folder}" + A_FOLDER),
    Cell("pairwise-train", "empty ELWC", ("--train_files={records_empty}", *PAIRWISE_ELWC),
         "{records_empty}" + EMPTY_RECORDS),
    Cell("pairwise-train", "truncated ELWC", ("--train_files={pw_lists_trunc}", *PAIRWISE_ELWC),
         r"{pw_lists_trunc}, row 12: truncated record at byte \d+ \(the file ends inside it\); expected a "
         r"complete TFRecord file \(write or copy it again\)\."),
    Cell("pairwise-train", "ELWC cut inside a list header",
         ("--train_files={pw_lists_cut_header}", *PAIRWISE_ELWC),
         "{pw_lists_cut_header}" + CUT_IN_HEADER.format(row=12)),
    Cell("pairwise-train", "CSV as ELWC", ("--train_files={digits_csv}", *PAIRWISE_ELWC),
         "{digits_csv}" + NOT_TFRECORD),
    Cell("pairwise-train", "folder as ELWC", ("--train_files={records_folder}", *PAIRWISE_ELWC),
         "{records_folder}" + RECORDS_FOLDER),
    Cell("pairwise-train", "garbage ELWC list", ("--train_files={pw_lists_garbage}", *PAIRWISE_ELWC),
         "{pw_lists_garbage}, row 5" + NOT_AN_ELWC),
    Cell("pairwise-train", "ELWC without the text",
         ("--train_files={pw_lists}", *PAIRWISE_ELWC, "--text_key=body"),
         r"{pw_lists}, row 1, field 'body': example 1 has no 'body' \(its features: .*\); expected the text "
         r"of every example; name it with --text_key\."),
    Cell("pairwise-train", "class-name labels", ("--train_files={pw_lists_names}", *PAIRWISE_ELWC),
         r"{pw_lists_names}, row 1, field 'relevance': example 1 has 'relevance' as bytes_list; expected "
         r"numbers \(float_list or int64_list\)\."),
    Cell("pairwise-train", "float labels", ("--train_files={pw_lists_float}", *PAIRWISE_ELWC), ACCEPTED),
    Cell("pairwise-train", "empty config.json", ("--mode=evaluate", "--model_dir={pw_empty_config_run}"),
         r"{pw_empty_config_run}/config\.json: invalid JSON \(Expecting value at line 1, column 1\); "
         r"expected the JSON in the --model_dir of a training run \(--mode=train: its config\.json and "
         r"export/\)\."),
    # pairwise-ranksvm: feature rows, LibSVM, ELWC.
    Cell("pairwise-ranksvm", "empty CSV", ("--input={empty_csv}", *RANKSVM_ROWS),
         "{empty_csv}: " + EMPTY_ROWS),
    Cell("pairwise-ranksvm", "header-only CSV", ("--input={rs_header_csv}", *RANKSVM_ROWS),
         "{rs_header_csv}: " + HEADER_ONLY),
    Cell("pairwise-ranksvm", "5 MB text field", ("--input={rs_big_csv}", *RANKSVM_ROWS), ACCEPTED),
    Cell("pairwise-ranksvm", "UTF-8 BOM in a CSV", ("--input={rs_bom_csv}", *RANKSVM_ROWS), ACCEPTED,
         same_as=("--input={rs_big_csv}", *RANKSVM_ROWS), compare="stdout"),
    Cell("pairwise-ranksvm", "Latin-1 row", ("--input={rs_latin_csv}", *RANKSVM_ROWS),
         r"{rs_latin_csv}, row 3 \(line 4\), field 'doc': " + NOT_UTF8),
    Cell("pairwise-ranksvm", "Latin-1 row skipped",
         ("--input={rs_latin_csv}", *RANKSVM_ROWS, "--bad_rows=skip"),
         ACCEPTED, rejects=("rejects.jsonl", ((3, "doc"),))),
    Cell("pairwise-ranksvm", "folder as a CSV", ("--input={folder}", *RANKSVM_ROWS), "{folder}" + A_FOLDER),
    Cell("pairwise-ranksvm", "empty LibSVM", ("--input={rs_empty_libsvm}", *RANKSVM_LIBSVM),
         "{rs_empty_libsvm}: " + EMPTY_ROWS),
    Cell("pairwise-ranksvm", "UTF-8 BOM in a LibSVM file", ("--input={rs_bom_libsvm}", *RANKSVM_LIBSVM),
         ACCEPTED, same_as=("--input={rs_libsvm}", *RANKSVM_LIBSVM), compare="stdout"),
    Cell("pairwise-ranksvm", "Latin-1 LibSVM line", ("--input={rs_latin_libsvm}", *RANKSVM_LIBSVM),
         "{rs_latin_libsvm}, row 3: " + NOT_UTF8),
    Cell("pairwise-ranksvm", "LibSVM with its last line cut", ("--input={rs_cut_libsvm}", *RANKSVM_LIBSVM),
         r"{rs_cut_libsvm}, row 30, field 'features': the last line is cut \(token '2:', no line end\); "
         + COMPLETE_FILE),
    Cell("pairwise-ranksvm", "folder as a LibSVM file", ("--input={folder}", *RANKSVM_LIBSVM),
         "{folder}" + A_FOLDER),
    Cell("pairwise-ranksvm", "empty ELWC", ("--input={records_empty}", *RANKSVM_ELWC),
         "{records_empty}" + EMPTY_RECORDS),
    Cell("pairwise-ranksvm", "truncated ELWC", ("--input={rs_lists_trunc}", *RANKSVM_ELWC),
         r"{rs_lists_trunc}, row 6: truncated record at byte \d+ \(the file ends inside it\); expected a "
         r"complete TFRecord file \(write or copy it again\)\."),
    Cell("pairwise-ranksvm", "ELWC cut inside a list header",
         ("--input={rs_lists_cut_header}", *RANKSVM_ELWC),
         "{rs_lists_cut_header}" + CUT_IN_HEADER.format(row=6)),
    Cell("pairwise-ranksvm", "CSV as ELWC", ("--input={digits_csv}", *RANKSVM_ELWC),
         "{digits_csv}" + NOT_TFRECORD),
    Cell("pairwise-ranksvm", "folder as ELWC", ("--input={records_folder}", *RANKSVM_ELWC),
         "{records_folder}" + RECORD_FOLDER),
    Cell("pairwise-ranksvm", "garbage ELWC list", ("--input={rs_lists_garbage}", *RANKSVM_ELWC),
         "{rs_lists_garbage}, row 5" + NOT_AN_ELWC),
    Cell("pairwise-ranksvm", "ELWC without the label",
         ("--input={rs_lists}", *RANKSVM_ELWC, "--label_key=utility"),
         r"{rs_lists}, row 1, field 'utility': example 1 has no label 'utility' .*; expected one relevance "
         r"number per example; name the label feature with --label_key\."),
    Cell("pairwise-ranksvm", "class-name labels", ("--input={rs_lists_names}", *RANKSVM_ELWC),
         r"{rs_lists_names}, row 1, field 'relevance': example 1 has 'relevance' as bytes_list; expected "
         r"numbers \(float_list or int64_list\)\."),
    Cell("pairwise-ranksvm", "float labels", ("--input={rs_lists_float}", *RANKSVM_ELWC), ACCEPTED,
         same_as=("--input={rs_lists}", *RANKSVM_ELWC), compare="stdout"),
)

BOM = b"\xef\xbb\xbf"
WORDS = "good bad film plot fine great poor dull".split()


def _write(path: str, content: bytes | str) -> str:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(content.encode("utf-8") if isinstance(content, str) else content)
  return path


def _csv(rows: list[list]) -> bytes:
  text = io.StringIO()
  csv.writer(text, lineterminator="\n").writerows(rows)
  return text.getvalue().encode("utf-8")


def _example(features: dict) -> bytes:
  return tf.train.Example(features=tf.train.Features(
      feature={key: elwc.to_feature(value) for key, value in features.items()})).SerializeToString()


def _with_vocab(path: str, vocab: str) -> str:
  shutil.copy(vocab, os.path.splitext(path)[0] + ".labels.json")
  return path


def _files(folder: str, content: bool = True) -> dict[str, object]:
  """Every file and folder under `folder` -> its content (else its size and modification time; None for a
  folder)."""
  found = {}
  for parent, folders, names in os.walk(folder):
    for name in folders:
      found[os.path.relpath(os.path.join(parent, name), folder)] = None
    for name in names:
      path = os.path.join(parent, name)
      if content:
        with open(path, "rb") as f:
          found[os.path.relpath(path, folder)] = f.read()
      else:
        status = os.stat(path)
        found[os.path.relpath(path, folder)] = (status.st_size, status.st_mtime_ns)
  return found


class BadInputTest(tf.test.TestCase, parameterized.TestCase):
  """The table: each binary answers each bad input it reads as the README promises."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    # Row conversions (rank4class-train) are cached under ~/.cache: a home of the test's own.
    cls._home = mock.patch.dict(os.environ, {"HOME": os.path.join(cls.root, "home")})
    cls._home.start()
    cls.paths = {}
    cls._write_rows()
    cls._write_records()
    cls._write_ranking_data()
    cls._write_models()
    cls._write_bert_checkpoints()
    cls.twins = {}  # The clean twins' runs: flags -> (result, output folder).

  @classmethod
  def tearDownClass(cls):
    cls._home.stop()
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  @classmethod
  def _path(cls, name: str, file_name: str, content: bytes | str | None = None) -> str:
    path = os.path.join(cls.root, "data", file_name)
    if content is not None:
      _write(path, content)
    cls.paths[name] = path
    return path

  @classmethod
  def _write_rows(cls):
    digits = datasets.load_image_classification("digits", "test")
    cls.features = digits.images[:40].reshape([40, -1])[:, 10:18].astype(np.float32) / 255.0
    cls.labels = digits.labels[:40]
    cls.class_names = list(digits.class_names)
    header = ["id", *FEATURES, "label"]
    rows = [[f"r{i}", *(f"{v:g}" for v in x), cls.class_names[y]]
            for i, (x, y) in enumerate(zip(cls.features, cls.labels, strict=True))]
    clean = _csv([header, *rows])
    cls._path("digits_csv", "digits.csv", clean)
    cls._path("bom_csv", "bom.csv", BOM + clean)
    cls._path("latin_csv", "latin.csv", clean.replace(b"\nr2,", b"\ncaf\xe9,", 1))
    # Its last id quoted.
    cls._path("cut_quote_csv", "cut_quote.csv", clean[:clean.rindex(b"\nr39,") + 1] + b'"r3')
    big = _csv([header + ["note"], rows[0] + ["word " * 1_000_000], *[row + [""] for row in rows[1:]]])
    cls._path("big_csv", "big.csv", big)
    cls._path("bom_big_csv", "bom_big.csv", BOM + big)
    cls._path("empty_csv", "empty.csv", b"")
    cls._path("tiny_csv", "tiny.csv", b"a,b\n1\n")
    cls._path("header_csv", "header.csv", _csv([header]))
    cls._path("header_tsv", "header.tsv", "\t".join(header) + "\n")
    cls._path("header_jsonl", "header.jsonl", json.dumps(header) + "\n")
    jsonl = "".join(json.dumps(dict(zip(header, row, strict=True))) + "\n" for row in rows).encode("utf-8")
    cls._path("digits_jsonl", "digits.jsonl", jsonl)
    cls._path("bom_jsonl", "bom.jsonl", BOM + jsonl)
    cls._path("cut_jsonl", "cut.jsonl", jsonl[:-10])
    cls._path("big_text_csv", "big_text.csv", _csv([["text", "label"], ["word " * 1_000_000, "long"],
                                                    ["a short text", "short"]]))
    lines = b"the cat sat\nthe dog ran on a mat\n"
    cls._path("lines_txt", "lines.txt", lines)
    cls._path("bom_txt", "bom.txt", BOM + lines)
    cls._path("latin_txt", "latin.txt", lines.replace(b"\n", b"\nthe d\xe9g\n", 1))  # Its good rows: `lines`.
    cls._path("empty_txt", "empty.txt", b"")
    folder = cls._path("folder", "rows.csv.d")
    os.makedirs(folder)
    cls._path("classes_txt", "classes.txt", "".join(name + "\n" for name in cls.class_names))

  @classmethod
  def _write_records(cls):
    schema = tfrecords.ExampleSchema(text_key=None, dense_key="features", dense_dim=len(FEATURES),
                                     num_classes=len(cls.class_names))
    records = cls._path("records", "records.tfrecord")
    tfrecords.write_instances(records, [tfrecords.ClassificationInstance(label=int(y), dense=x)
                                        for x, y in zip(cls.features, cls.labels, strict=True)], schema)
    vocab = cls._path("records_vocab", "records.labels.json",
                      json.dumps({"classes": cls.class_names, "schema": schema.to_dict()}))
    with open(records, "rb") as f:
      data = f.read()
    cls.paths["records_trunc"] = _with_vocab(_write(os.path.join(cls.root, "data", "trunc.tfrecord"),
                                                    data[:-9]), vocab)
    cls.paths["records_empty"] = _with_vocab(_write(os.path.join(cls.root, "data", "empty.tfrecord"), b""),
                                             vocab)
    cut = example_record_files.cut_in_last_header(records,
                                                  cls._path("records_cut_header", "cut_header.tfrecord"))
    _with_vocab(cut, vocab)
    examples = [{"label": int(y), "features": x} for x, y in zip(cls.features, cls.labels, strict=True)]
    variants = {
        "records_garbage": [_example(e) for e in examples[:5]] + [b"\x0a\xff\xff\xffgarbage"],
        "records_missing": [_example({"label": e["label"]} if i == 5 else e) for i, e in enumerate(examples)],
        "records_float": [_example({**e, "label": float(e["label"])}) for e in examples],
        "records_names": [_example({**e, "label": cls.class_names[e["label"]]}) for e in examples],
    }
    for name, serialized in variants.items():
      path = os.path.join(cls.root, "data", name.split("_")[1] + ".tfrecord")
      tfrecords.write_tfrecord(path, serialized)
      cls.paths[name] = _with_vocab(path, vocab)
    os.makedirs(cls._path("records_folder", "folder.tfrecord"))
    lists = list(elwc_lists.digit_lists(
        (cls.features * 255).astype(np.uint8).reshape([40, len(FEATURES), 1])[:10], cls.labels[:10],
        len(cls.class_names), 3, seed=0))
    elwc_lists.write(cls._path("lists", "lists.elwc"), lists)
    example_record_files.cut_in_last_header(cls.paths["lists"],
                                            cls._path("lists_cut_header", "lists_cut.elwc"))
    with tf.io.TFRecordWriter(cls._path("lists_garbage", "garbage.elwc")) as writer:
      for elwc_list in lists[:4]:
        writer.write(elwc_list.SerializeToString())
      writer.write(b"\x0a\xff\xff\xffgarbage")

  @classmethod
  def _text_lists(cls, path: str, rng: np.random.Generator, label=int, garbage: bool = False) -> str:
    lists = []
    for _ in range(12):
      texts = [" ".join(rng.choice(WORDS, 4)) for _ in range(4)]
      labels = [label(int(x)) for x in rng.integers(0, 3, 4)]
      lists.append(elwc.make_elwc([{"document_tokens": t, "relevance": r} for t, r in zip(texts, labels,
                                                                                          strict=True)],
                                  {"query_tokens": "a query"}))
    with tf.io.TFRecordWriter(path) as writer:
      for elwc_list in lists[:4] if garbage else lists:
        writer.write(elwc_list.SerializeToString())
      if garbage:
        writer.write(b"\x0a\xff\xff\xffgarbage")
    return path

  @classmethod
  def _feature_lists(cls, path: str, rng: np.random.Generator, label=int, garbage: bool = False) -> str:
    lists = [elwc.make_elwc([{"f1": float(a), "f2": float(b), "relevance": label(int(r))}
                             for a, b, r in zip(*rng.normal(size=(2, 5)),
                                                rng.integers(0, 3, 5), strict=True)])
             for _ in range(6)]
    with tf.io.TFRecordWriter(path) as writer:
      for elwc_list in lists[:4] if garbage else lists:
        writer.write(elwc_list.SerializeToString())
      if garbage:
        writer.write(b"\x0a\xff\xff\xffgarbage")
    return path

  @classmethod
  def _write_ranking_data(cls):
    rng = np.random.default_rng(0)
    rows = [[f"g{g}", " ".join(rng.choice(WORDS, 4)), str(int(rng.integers(0, 3)))] for g in range(8)
            for _ in range(5)]
    header = ["group", "text", "label"]
    big = _csv([header, ["g0", "good " * 1_000_000, "1"], *rows])
    cls._path("pw_big_csv", "pw_big.csv", big)
    cls._path("pw_bom_csv", "pw_bom.csv", BOM + big)
    small = _csv([header, *rows])
    lines = small.split(b"\n")
    lines[4] = lines[4].replace(b",", b",\xe9", 1)
    cls._path("pw_latin_csv", "pw_latin.csv", b"\n".join(lines))
    cls._path("pw_header_csv", "pw_header.csv", _csv([header]))
    data = os.path.join(cls.root, "data")
    cls.paths["pw_lists"] = cls._text_lists(os.path.join(data, "pw.elwc"), np.random.default_rng(1))
    cls.paths["pw_lists_float"] = cls._text_lists(os.path.join(data, "pw_float.elwc"),
                                                  np.random.default_rng(1), float)
    cls.paths["pw_lists_names"] = cls._text_lists(os.path.join(data, "pw_names.elwc"),
                                                  np.random.default_rng(1), str)
    cls.paths["pw_lists_garbage"] = cls._text_lists(os.path.join(data, "pw_garbage.elwc"),
                                                    np.random.default_rng(1), garbage=True)
    with open(cls.paths["pw_lists"], "rb") as f:
      cls._path("pw_lists_trunc", "pw_trunc.elwc", f.read()[:-5])
    example_record_files.cut_in_last_header(cls.paths["pw_lists"],
                                            cls._path("pw_lists_cut_header", "pw_cut.elwc"))
    cls.paths["pw_empty_config_run"] = os.path.dirname(cls._path("pw_empty_config",
                                                                 "pw_run/config.json", b""))
    # RankSVM: a query id, two features and a rank per row; a 5 MB title no feature uses.
    lines = ["query,doc,title,bm25,length,position"]
    for q in range(6):
      bm25, length = rng.normal(size=(2, 5))
      positions = np.argsort(np.argsort(-(bm25 - 2 * length))) + 1
      lines += [f"q{q},d{q}_{i},t,{bm25[i]:.4f},{length[i]:.4f},{positions[i]}" for i in range(5)]
    clean = ("\n".join(lines) + "\n").encode("utf-8")
    big = clean.replace(b",t,", b"," + b"title " * 1_000_000 + b",", 1)
    cls._path("rs_big_csv", "rs_big.csv", big)
    cls._path("rs_bom_csv", "rs_bom.csv", BOM + big)
    cls._path("rs_latin_csv", "rs_latin.csv", clean.replace(b"\nq0,d0_2,", b"\nq0,d\xe9_2,", 1))
    cls._path("rs_header_csv", "rs_header.csv", lines[0] + "\n")
    libsvm = "".join(f"{i % 3} qid:{q} 1:{rng.normal():.3f} 2:{rng.normal():.3f}\n" for q in range(6)
                     for i in range(5)).encode("utf-8")
    cls._path("rs_libsvm", "rs.libsvm", libsvm)
    cls._path("rs_bom_libsvm", "rs_bom.libsvm", BOM + libsvm)
    cls._path("rs_cut_libsvm", "rs_cut.libsvm", libsvm[:libsvm.rindex(b" 2:") + 3])  # "... 2:", no line end.
    libsvm_lines = libsvm.split(b"\n")
    libsvm_lines[2] = libsvm_lines[2].replace(b" 1:", b" 1\xe9:")
    cls._path("rs_latin_libsvm", "rs_latin.libsvm", b"\n".join(libsvm_lines))
    cls._path("rs_empty_libsvm", "rs_empty.libsvm", b"")
    cls.paths["rs_lists"] = cls._feature_lists(os.path.join(data, "rs.elwc"), np.random.default_rng(2))
    cls.paths["rs_lists_float"] = cls._feature_lists(os.path.join(data, "rs_float.elwc"),
                                                     np.random.default_rng(2), float)
    cls.paths["rs_lists_names"] = cls._feature_lists(os.path.join(data, "rs_names.elwc"),
                                                     np.random.default_rng(2), str)
    cls.paths["rs_lists_garbage"] = cls._feature_lists(os.path.join(data, "rs_garbage.elwc"),
                                                       np.random.default_rng(2), garbage=True)
    with open(cls.paths["rs_lists"], "rb") as f:
      cls._path("rs_lists_trunc", "rs_trunc.elwc", f.read()[:-5])
    example_record_files.cut_in_last_header(cls.paths["rs_lists"],
                                            cls._path("rs_lists_cut_header", "rs_cut.elwc"))

  @classmethod
  def _write_models(cls):
    """A dense model over the 8 features (untrained: the binaries' plumbing is under test) and a frozen-text
    model on a tiny random BERT, each as a training model_dir with export/; two damaged copies of the dense
    one."""
    models = os.path.join(cls.root, "models")
    tf.keras.utils.set_random_seed(0)
    dense = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)),
                                      class_encoders.get("one_hot", num_classes=len(cls.class_names)),
                                      interactions.get("dot"), class_names=cls.class_names)
    dense(tf.zeros([1, len(FEATURES)]))
    cls.paths["dense"] = os.path.join(models, "dense")
    serving.export_saved_model(dense, os.path.join(cls.paths["dense"], "export"))
    for name in ("model_empty_graph", "model_empty_variables"):
      cls.paths[name] = os.path.join(models, name)
      shutil.copytree(os.path.join(cls.paths["dense"], "export"), os.path.join(cls.paths[name], "export"))
    _write(os.path.join(cls.paths["model_empty_graph"], "export", "saved_model.pb"), b"")
    variables = os.path.join(cls.paths["model_empty_variables"], "export", "variables")
    for name in os.listdir(variables):
      if ".data-" in name:
        _write(os.path.join(variables, name), b"")
    # A model trained on frozen text embeddings: predict embeds raw texts (once: the embedding cache) with the
    # tiny BERT its export names, then scores the vectors with a dense model.
    handles = tiny_bert.tiny_handles()
    text = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(8,)),
                                     class_encoders.get("one_hot", num_classes=3), interactions.get("dot"),
                                     class_names=["cat", "dog", "eel"])
    text(tf.zeros([1, 16]))  # The tiny BERT's hidden size.
    cls.paths["text"] = os.path.join(models, "text")
    frozen = text_encoder.TextEncoderConfig(handles.preprocess, handles.encoder, max_seq_length=8)
    serving.export_saved_model(text, os.path.join(cls.paths["text"], "export"), frozen_text_encoder=frozen)
    # A zero-shot export (classes as texts through the tiny BERT), and class-texts files for it.
    text_classes = model_lib.Rank4ClassModel(
        encoders.get("mlp", hidden_units=(8,)),
        class_encoders.get("metadata", class_texts=["a cat", "a dog", "an eel"],
                           text=text_encoder.TextEncoderConfig(handles.preprocess, handles.encoder,
                                                               max_seq_length=8),
                           output_dim=8),
        interactions.get("dot"), class_names=["cat", "dog", "eel"])
    text_classes(tf.zeros([1, 16]))
    cls.paths["zero_shot"] = zero_shot.export_zero_shot(text_classes, os.path.join(models, "zero_shot"),
                                                        frozen_text_encoder=frozen)
    cls._path("class_texts_csv", "class_texts.csv", "class,text\ncat,a cat\nfox,a fox\n")
    cls._path("class_texts_twice", "class_texts_twice.csv",
              "class,text\ncat,a cat\nfox,a fox\ncat,a kitten\n")
    cls._path("class_texts_no_text", "class_texts_no_text.csv", "class,description\ncat,a cat\n")

  @classmethod
  def _write_bert_checkpoints(cls):
    def checkpoint(name: str, file_name: str | None = None, change=None) -> None:
      folder = os.path.join(cls.root, "bert", name)
      os.makedirs(folder)
      tiny_bert.write_tiny_checkpoint(folder)
      if file_name is not None:
        path = os.path.join(folder, file_name)
        with open(path, "rb") as f:
          content = f.read()
        _write(path, change(content))
      cls.paths[name] = folder

    checkpoint("bert_empty_config", "config.json", lambda _: b"")
    checkpoint("bert_empty_vocab", "vocab.txt", lambda _: b"")
    checkpoint("bert_empty_weights", "model.safetensors", lambda _: b"")
    checkpoint("bert_truncated_weights", "model.safetensors", lambda content: content[:len(content) // 2])
    checkpoint("bert_latin_vocab", "vocab.txt", lambda content: content + b"caf\xe9\n")
    checkpoint("bert_bom_config", "config.json", lambda content: BOM + content)
    checkpoint("bert_bom_vocab", "vocab.txt", lambda content: BOM + content)

  # --- Running a row.

  def _argv(self, argv: tuple[str, ...], out: str) -> list[str]:
    return [arg.format(**self.paths, out=out) for arg in argv]

  def _regex(self, expect: str, out: str) -> str:
    return expect.format(**{name: re.escape(path) for name, path in self.paths.items()}, out=re.escape(out))

  def _out(self, binary: Binary) -> str:
    """A fresh output folder holding the binary's sentinels; kept until the class ends (a row's run may be
    another row's clean twin)."""
    out = tempfile.mkdtemp(dir=self.root)
    for name in binary.sentinels:
      _write(os.path.join(out, name), SENTINEL)
    return out

  def _run(self, cell: Cell, argv: tuple[str, ...], out: str) -> cli_runner.BinaryRun:
    binary = BINARIES[cell.binary]
    if cell.fault is None:
      return cli_runner.run_binary(binary.module, self._argv(argv, out))
    fault, n = cell.fault
    done = fault_injection.run_binary(binary.module.__name__, self._argv(argv, out), fault=fault,
                                      n=n, timeout=300)
    return cli_runner.BinaryRun(done.returncode, done.stdout, done.stderr)

  def _twin(self, cell: Cell) -> tuple[cli_runner.BinaryRun, str]:
    """The clean twin's run (once per class)."""
    if cell.same_as not in self.twins:
      out = tempfile.mkdtemp(dir=self.root)
      result = cli_runner.run_binary(BINARIES[cell.binary].module, self._argv(cell.same_as, out))
      self.assertEqual(result.code, 0, msg=result.stderr[-3000:])
      self.twins[cell.same_as] = (result, out)
    return self.twins[cell.same_as]

  def _check_error(self, cell: Cell, result: cli_runner.BinaryRun, out: str, data_before: dict) -> None:
    program = cell.binary
    self.assertEqual(result.code, 130 if cell.fault else 1, msg=result.stderr[-3000:])
    self.assertNotIn("Traceback", result.stderr)
    # A subprocess (Ctrl-C rows) imports TensorFlow, which writes INFO lines while it loads (TensorFlow 2.21).
    lines = [line for line in result.stderr.splitlines() if not (cell.fault and LOAD_TIME_LINE.match(line))]
    self.assertLen(lines, 1, msg=result.stderr[-3000:])
    prefix = f"{re.escape(program)}: " + ("" if cell.fault else "error: ")
    self.assertRegex(lines[0], f"^{prefix}{self._regex(cell.expect, out)}$")
    self.assertNotRegex(lines[0], TEMPORARY)
    binary = BINARIES[cell.binary]
    left = _files(out)
    run = left.pop("run", "absent")
    run_files = {name for name in left if name.startswith("run" + os.sep)}
    for name in run_files:
      left.pop(name)
    self.assertEqual(left, {**{name: SENTINEL for name in binary.sentinels},
                            **{os.path.dirname(name): None for name in binary.sentinels
                               if os.path.dirname(name)}})
    if run != "absent":
      self.assertContainsSubset({name.split(os.sep)[1] for name in run_files}, binary.run_files)
      self.assertEmpty([name for name in run_files if TEMPORARY.search(name)])
    self.assertEqual(_files(os.path.join(self.root, "data"), content=False), data_before)

  def _check_accepted(self, cell: Cell, result: cli_runner.BinaryRun, out: str) -> None:
    self.assertEqual(result.code, 0, msg=result.stderr[-3000:])
    self.assertNotIn("Traceback", result.stderr)
    self.assertNotIn("error", result.stderr)
    self.twins.setdefault(cell.argv, (result, out))  # A row's run is another row's clean twin.
    if cell.rejects is not None:
      name, expected = cell.rejects
      if name == "row cache":
        caches = os.path.join(os.environ["HOME"], ".cache", "rank4class", "rows")
        paths = [os.path.join(parent, f) for parent, _, names in os.walk(caches) for f in names
                 if f.endswith(".rejects.jsonl")]
      else:
        paths = [os.path.join(out, name)]
      rejected = [json.loads(line) for path in paths for line in open(path, encoding="utf-8")]
      self.assertEqual([(r["row"], r["field"]) for r in rejected], list(expected))
      self.assertTrue(all("not UTF-8" in r["reason"] for r in rejected), rejected)
    if cell.same_as is None:
      return
    if cell.compare.startswith("text_back:"):  # The long text converts back unchanged.
      back = self._run(cell, cell.same_as, out)
      self.assertEqual(back.code, 0, msg=back.stderr)
      with open(os.path.join(out, cell.compare.split(":")[1]), newline="", encoding="utf-8") as f:
        texts = [row["text"] for row in csv.DictReader(f)]
      self.assertEqual(texts, ["word " * 1_000_000, "a short text"])
      return
    twin, twin_out = self._twin(cell)
    if cell.compare == "stdout":
      self.assertEqual(result.stdout, twin.stdout)
      return
    kind, name, *keys = cell.compare.split(":")
    with open(os.path.join(out, name), "rb") as f, open(os.path.join(twin_out, name), "rb") as g:
      mine, theirs = f.read(), g.read()
    if kind == "file":
      self.assertEqual(mine, theirs)
    else:
      mine, theirs = json.loads(mine), json.loads(theirs)
      for key in keys[0].split(","):
        self.assertIn(key, theirs)
        self._assert_close(mine.get(key), theirs[key], key)

  def _assert_close(self, mine, theirs, where: str) -> None:
    """Equal structures; numbers equal up to float noise (the same data, trained or scored again)."""
    if isinstance(theirs, dict):
      self.assertEqual(sorted(mine), sorted(theirs), msg=where)
      for key in theirs:
        self._assert_close(mine[key], theirs[key], f"{where}.{key}")
    elif isinstance(theirs, list):
      self.assertLen(mine, len(theirs), msg=where)
      for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        self._assert_close(a, b, f"{where}[{i}]")
    elif isinstance(theirs, float) and isinstance(mine, float):
      self.assertTrue(np.isclose(mine, theirs, rtol=1e-4, atol=1e-6, equal_nan=True),
                      msg=f"{where}: {mine} {theirs}")
    else:
      self.assertEqual(mine, theirs, msg=where)

  def _check_cell(self, cell: Cell) -> None:
    out = self._out(BINARIES[cell.binary])
    data_before = _files(os.path.join(self.root, "data"), content=False)
    result = self._run(cell, cell.argv, out)
    if cell.expect == ACCEPTED:
      self._check_accepted(cell, result, out)
    else:
      self._check_error(cell, result, out, data_before)

  @parameterized.named_parameters((cell.name, cell) for cell in TABLE)
  def test_bad_input(self, cell: Cell):
    if cell.known_failure is None:
      self._check_cell(cell)
      return
    with self.assertRaises(AssertionError, msg=f"{cell.name} passes now: drop its known_failure "
                                               f"({cell.known_failure})"):
      self._check_cell(cell)

  def test_every_binary_has_rows(self):
    self.assertEqual({cell.binary for cell in TABLE}, set(BINARIES))

  def test_console_script_keeps_tensorflow_warnings_off_stderr(self):
    """A real console-script run, with TensorFlow's log level left to the binary: a garbage record in a
    pipeline makes TensorFlow log "Local rendezvous is aborting" (and, without a GPU driver, "failed call to
    cuInit") unless the binary quiets it before TensorFlow loads; the user sees the one line."""
    script = os.path.join(os.path.dirname(sys.executable), "rank4class-evaluate")
    command = (
      [script] if os.path.exists(script) else [sys.executable, "-m", "rank4class_cli.binaries.evaluate_main"]
    )
    out = tempfile.mkdtemp(dir=self.root)
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run(
        command + [f"--model_dir={self.paths['dense']}", f"--input={self.paths['records_garbage']}",
                   f"--report_path={out}/report.json"], capture_output=True, text=True, timeout=300, env=env,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    self.assertEqual(done.returncode, 1, msg=done.stderr[-3000:])
    lines = [line for line in done.stderr.splitlines() if not LOAD_TIME_LINE.match(line)]
    self.assertEqual(lines, [f"rank4class-evaluate: error: {self.paths['records_garbage']}, row 6: not a "
                             "tf.Example record (it does not parse); expected classification tf.Examples (is "
                             "the input format right?)."], msg=done.stderr[-3000:])
    self.assertEmpty(os.listdir(out))


if __name__ == "__main__":
  tf.test.main()
