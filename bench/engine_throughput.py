"""The training engine against a bare Keras `fit` of the same model, on cached-embedding-sized inputs.

Run: python bench/engine_throughput.py [--steps=1000] [--repeats=3]

Model: Rank4Class on 384-d float inputs (the size of cached MiniLM embeddings), MLP 128 + one-hot classes +
dot, 8 classes, TF-Ranking softmax loss, Adam, batch 32; 1,500 training and 500 validation examples drawn from
a fixed random linear problem. Rows, each one fresh model and process-warm (the first repetition is dropped):
  bare fit            `model.fit(steps_per_epoch=steps, epochs=1)` with the engine's chosen
                      steps_per_execution (same for both), no callbacks, no validation.
  engine, bare        `trainer.fit` without validation, checkpoints or TensorBoard.
  engine, full        `trainer.fit` as `rank4class.training.train` runs it: validation
                      (`train.make_validate_fn`: loss, top-K error, NDCG@K, MRR on the 500 examples) every 100
                      steps, best weights, checkpoints at validations (at most every 30 s), TensorBoard,
                      progress log.
  bare fit + Keras validation  Keras' own validation at the same cadence (`fit(validation_data=...)`, one
                      epoch per validation, the same metrics compiled): what validating costs bare Keras.
Wall seconds include tracing (each variant builds a fresh model, as a study run does); the ratio is bare fit
seconds / variant seconds, i.e. relative throughput. "fixed cost" is a variant's seconds minus the steps'
share at the bare fit's steady rate (measured from a second `fit` call on the same model): what a run pays
beyond its steps.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import ratio_table  # noqa: E402  (bench/ is sys.path[0] when this file runs)

import rank4class  # noqa: E402,F401  (before any tf.keras use: selects Keras 2 on the current stack)
from rank4class.evaluation import metrics  # noqa: E402
from rank4class.inference import served  # noqa: E402
from rank4class.modeling import class_encoders, encoders, interactions  # noqa: E402
from rank4class.modeling import model as model_lib  # noqa: E402
from rank4class.training import train as rank4class_train  # noqa: E402
from rank4class.training import training_data  # noqa: E402
from rank4class_data import stack  # noqa: E402
from rank4class_engine.loop import trainer  # noqa: E402
from rank4class_engine.optimization import losses  # noqa: E402

# isort: split
# TensorFlow after the toolkit, whose package import runs the stack check first.
import tensorflow as tf  # noqa: E402

DIM, CLASSES, BATCH = 384, 8, 32


def _data(seed: int = 0):
  rng = np.random.default_rng(seed)
  w = rng.normal(size=[DIM, CLASSES])
  x = rng.normal(size=[2000, DIM]).astype(np.float32)
  y = np.argmax(x @ w + rng.normal(size=[2000, CLASSES]) * 4, axis=1)
  return (x[:1500], y[:1500]), (x[1500:], y[1500:])


def _model(**compile_kwargs) -> model_lib.Rank4ClassModel:
  tf.keras.utils.set_random_seed(0)
  model = model_lib.Rank4ClassModel(encoders.get("mlp", hidden_units=(128,)),
                                    class_encoders.get("one_hot", num_classes=CLASSES),
                                    interactions.get("dot"), class_names=[str(i) for i in range(CLASSES)])
  model(tf.zeros([1, DIM]))
  model.compile(tf.keras.optimizers.Adam(1e-3), losses.get("softmax"), **compile_kwargs)
  return model


def _train_dataset(train):
  return tf.data.Dataset.from_tensor_slices(train).shuffle(1500, seed=0).repeat().batch(BATCH).prefetch(4)


def _validate_fn(model, validation):
  """The validation `rank4class.training.train` gives the engine (with the loss, as TensorBoard reads it)."""
  split = training_data.ArraySplit(validation[0], validation[1].astype(np.int64))
  data = training_data.PreparedData([str(i) for i in range(CLASSES)], training_data.EMBEDDING_INPUT, split,
                                    split, None)
  score_fn = served.make_score_fn(model, tf.TensorSpec([None, DIM], tf.float32))
  return rank4class_train.make_validate_fn(score_fn, model, data, (1, 5), 256, with_loss=True)


def _keras_validated_fit(model, train, validation, steps: int, eval_every: int) -> None:
  """Bare Keras validating at the same cadence: `fit` with `validation_data`, one epoch per validation."""
  validation_data = tf.data.Dataset.from_tensor_slices(validation).batch(256)
  model.fit(_train_dataset(train), steps_per_epoch=eval_every, epochs=steps // eval_every,
            validation_data=validation_data, verbose=0)


def _time(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
  parser.add_argument("--steps", type=int, default=1000)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--eval_every", type=int, default=100)
  args = parser.parse_args(argv)
  train, validation = _data()
  load = os.getloadavg()
  results: dict[str, list[float]] = {"bare fit": [], "engine, bare": [], "engine, full": [],
                                     "bare fit + Keras validation": []}
  spe_used = []
  steady = []
  for repeat in range(args.repeats + 1):
    with tempfile.TemporaryDirectory() as root:
      full = trainer.EngineConfig(run_dir=os.path.join(root, "full"), train_steps=args.steps,
                                  eval_every=args.eval_every, best_metric="ndcg_5", global_batch_size=BATCH,
                                  verbose=0)
      model = _model()
      seconds_full = _time(lambda m=model, full=full: spe_used.append(trainer.fit(
          m, _train_dataset(train), full, validate=_validate_fn(m, validation)).steps_per_execution))
      spe = spe_used[-1]
      lean = trainer.EngineConfig(run_dir=os.path.join(root, "lean"), train_steps=args.steps,
                                  eval_every=args.eval_every, checkpoint_every=0, global_batch_size=BATCH,
                                  steps_per_execution=spe, tensorboard=False, verbose=0)
      model = _model()
      seconds_lean = _time(lambda m=model, lean=lean: trainer.fit(m, _train_dataset(train), lean))
      model = _model()
      model.steps_per_execution = spe
      seconds_bare = _time(lambda m=model: m.fit(_train_dataset(train), steps_per_epoch=args.steps, epochs=1,
                                                 verbose=0))
      steady.append(_time(lambda m=model: m.fit(_train_dataset(train), steps_per_epoch=args.steps, epochs=1,
                                                verbose=0)))
      model = _model(metrics=metrics.get_default_metrics((1, 5)), steps_per_execution=spe)
      seconds_keras_validated = _time(lambda m=model: _keras_validated_fit(m, train, validation, args.steps,
                                                                           args.eval_every))
    if repeat:  # The first repetition warms the process (imports, first graphs) and is dropped.
      for name, seconds in zip(results, (seconds_bare, seconds_lean, seconds_full, seconds_keras_validated),
                               strict=True):
        results[name].append(seconds)
  steady_seconds = statistics.median(steady[1:])
  print(f"{stack.check_tensorflow_stack().summary()}")
  print(f"load average before {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f}, after "
        f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs; {args.steps} steps, batch "
        f"{BATCH}, validation every {args.eval_every}; steps_per_execution chosen by the engine: "
        f"{spe_used[1:]}; medians of {args.repeats}")
  ratio_table.print_ratio_table(results, steady_seconds, args.steps * BATCH, "examples/s")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
