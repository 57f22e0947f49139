"""Test helper: Rank4Class class lists written as ELWC the way TF-Ranking documents it (input_pb2 protos)."""

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import input_pb2


def feature(values) -> tf.train.Feature:
  values = np.asarray(values).reshape([-1])
  if values.dtype.kind in "US":
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in values.tolist()]))
  if values.dtype.kind in "iu":
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values.tolist()))
  return tf.train.Feature(float_list=tf.train.FloatList(value=values.tolist()))


def class_list(instance, candidates, context_key: str = "features", label_key: str = "relevance",
               class_id_key: str = "class_id") -> input_pb2.ExampleListWithContext:
  """One list: the instance in the context, then (class id, relevance) per candidate, each with an extra
  feature other tools write (ignored)."""
  elwc = input_pb2.ExampleListWithContext()
  elwc.context.features.feature[context_key].CopyFrom(feature(instance))
  for class_id, relevance in candidates:
    example = elwc.examples.add()
    example.features.feature[class_id_key].CopyFrom(feature(np.int64(class_id)))
    example.features.feature[label_key].CopyFrom(feature(np.float32(relevance)))
    example.features.feature["writer_note"].CopyFrom(feature(np.str_("x")))
  return elwc


def write(path: str, lists) -> str:
  with tf.io.TFRecordWriter(path) as writer:
    for elwc in lists:
      writer.write(elwc.SerializeToString())
  return path


def digit_lists(images: np.ndarray, labels: np.ndarray, num_classes: int, negatives: int, seed: int):
  """Per digit image (flattened, scaled to [0, 1]): its class with relevance 1 and `negatives` other classes
  with relevance 0, in random order."""
  rng = np.random.default_rng(seed)
  for image, label in zip(images, labels, strict=True):
    others = rng.choice([c for c in range(num_classes) if c != label], negatives, replace=False)
    candidates = [(int(label), 1.0)] + [(int(c), 0.0) for c in others]
    order = rng.permutation(len(candidates))
    yield class_list(image.reshape([-1]).astype(np.float32) / 255.0, [candidates[i] for i in order])
