"""Input-layer throughput on real data: R8 conversion and tf.Example / ELWC pipelines (records per second).

Run: python bench/data_pipeline.py
"""

import os
import tempfile
import time

import numpy as np

from rank4class_data import datasets
from rank4class_data.conversion import convert
from rank4class_data.records import elwc, tfrecords


def _records_per_second(dataset, count_fn) -> tuple[int, float]:
  start = time.perf_counter()
  records = sum(count_fn(element) for element in dataset)
  return records, records / (time.perf_counter() - start)


def main() -> None:
  rows = []
  with tempfile.TemporaryDirectory() as folder:
    source = datasets.text_classification_path("reuters_r8", "train")
    output = os.path.join(folder, "r8-train.tfrecord")
    start = time.perf_counter()
    summary = convert.convert_to_tfrecord(convert.ConvertConfig(source, output))
    seconds = time.perf_counter() - start
    rows.append(("convert R8 train .tab -> TFRecord", summary.rows, summary.rows / seconds))

    start = time.perf_counter()
    back = convert.convert_from_tfrecord(convert.ExportConfig(output, os.path.join(folder, "back.tab")))
    rows.append(("convert R8 train TFRecord -> .tab", back.rows, back.rows / (time.perf_counter() - start)))

    schema = convert.load_schema(convert.default_vocab_path(output))
    config = tfrecords.InputConfig(output, batch_size=32, shuffle=True, seed=0)
    tfrecords_dataset = tfrecords.make_dataset(config, schema)
    list(tfrecords_dataset.take(2))  # Trace the parse function before timing.
    count, rate = _records_per_second(tfrecords_dataset, lambda batch: int(batch[1].shape[0]))
    rows.append(("tf.Example pipeline (R8 train, batch 32)", count, rate))

    # ELWC: one list per R8 document with 8 candidate classes, the layout Rank4Class ranks.
    data = datasets.load_text_classification("reuters_r8", "train")
    lists_path = os.path.join(folder, "r8-train.elwc.tfrecord")
    pairs = zip(data.texts, data.labels, strict=True)
    candidates = lambda label: [{"class_id": c, "label": float(c == label)} for c in range(8)]  # noqa: E731
    lists = (elwc.make_elwc(candidates(label), context={"text": text}) for text, label in pairs)
    elwc.write_elwc(lists_path, lists)
    schema = elwc.ElwcSchema(example_features={"class_id": elwc.FeatureSpec("int64")},
                             context_features={"text": elwc.FeatureSpec("string")}, list_size=8)
    elwc_config = tfrecords.InputConfig(lists_path, batch_size=32, shuffle=True, seed=0)
    elwc_dataset = elwc.make_dataset(elwc_config, schema)
    list(elwc_dataset.take(2))
    count, rate = _records_per_second(elwc_dataset, lambda batch: int(batch[1].shape[0]))
    rows.append(("ELWC pipeline via tfr.data (8 per list, batch 32)", count, rate))

  width = max(len(name) for name, _, _ in rows)
  print(f"| {'step':<{width}} | records | records/s |")
  print(f"|{'-' * (width + 2)}|---------|-----------|")
  for name, count, rate in rows:
    print(f"| {name:<{width}} | {count:>7} | {np.round(rate):>9.0f} |")


if __name__ == "__main__":
  main()
