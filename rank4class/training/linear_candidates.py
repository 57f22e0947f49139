"""The linear candidates a run validates beside its trained model: the multinomial logistic regression of the
model's own inputs, trained by the engine along a regularisation path (`linear_path`), packed as a Rank4Class
model config so that it exports and serves like any other."""

import dataclasses
import logging
import time

import numpy as np
import tensorflow as tf

from rank4class.modeling import encoders as encoders_lib
from rank4class.modeling import model as model_lib
from rank4class.training import linear_path
from rank4class.training import training_data as data_lib

_logger = logging.getLogger(__name__)

# The path of fixed vectors (frozen embeddings, dense features), standardised: scikit-learn's C values.
INVERSE_REGULARIZATION = (0.01, 0.1, 1.0, 10.0, 100.0)
# The hybrid path: the weights w of the standardised embedding beside the unit-length TF-IDF vector
# (x 1/sqrt(d); 0: TF-IDF alone, TF-IDF + LR on the model's own TF-IDF), and its C values. TF-IDF wants weak
# regularisation (TF-IDF + LR alone picks C=100 on Reuters R8 and the 2016 tweets by validation log-loss),
# the 384 dense dimensions a strong one (C=0.01 alone), so the embedding is weighed down rather than C
# searched low: 9 heads.
HYBRID_EMBEDDING_WEIGHTS = (0.25, 1.0)
HYBRID_INVERSE_REGULARIZATION = (1.0, 10.0, 100.0)
# Rows of TF-IDF computed at a time.
_TFIDF_BATCH = 1024


def standardize(arrays: tuple[np.ndarray, ...]) -> tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
  """Flattened float32 features standardised on the first (training) array, and the mean and scale used (a
  constant feature has scale 1: centred, not scaled), as scikit-learn's StandardScaler computes them."""
  flat = [np.asarray(a, np.float32).reshape(len(a), -1) for a in arrays]
  mean = np.mean(flat[0].astype(np.float64), axis=0)
  scale = np.std(flat[0].astype(np.float64), axis=0)
  scale[scale == 0] = 1.0
  return tuple(((f - mean) / scale).astype(np.float32) for f in flat), mean, scale


def tfidf_rows(tfidf: encoders_lib.TfidfEncoderConfig, texts: np.ndarray) -> tf.SparseTensor:
  """The TF-IDF vectors the model's TF-IDF encoder reads (`TfidfEncoder.features`) of `texts`: sparse `[n,
  len(vocabulary)]`."""
  layer = encoders_lib.TfidfEncoder(**{**dataclasses.asdict(tfidf), "initial_kernel": None})
  blocks = [layer.features(tf.constant([str(t) for t in texts[begin:begin + _TFIDF_BATCH]]))
            for begin in range(0, len(texts), _TFIDF_BATCH)]
  return tf.sparse.reorder(tf.sparse.concat(0, blocks, expand_nonconcat_dims=True))


def _folded_bias(intercepts: np.ndarray, dense_weights: np.ndarray, mean: np.ndarray,
                 absent: np.ndarray) -> np.ndarray:
  """The class biases `b - (W / sigma) . mu`; the `absent` classes (no training rows) below every other."""
  bias = intercepts - dense_weights @ mean
  if len(absent) and len(absent) < len(bias):  # Ranked below every class the regression knows.
    bias[absent] = np.delete(bias, absent).min() - 1e3
  return bias


def _folded_instance_encoder(encoder: encoders_lib.InstanceEncoderConfig, weights: np.ndarray,
                             dense_weights: np.ndarray, hybrid: bool,
                             fit: dict) -> tuple[encoders_lib.InstanceEncoderConfig, np.ndarray]:
  """The candidate's instance encoder (the MLP at the identity; for hybrid text, the TF-IDF projection at the
  regression's TF-IDF weights, its width noted in `fit`) and class embeddings."""
  num_classes, dim = weights.shape[0], dense_weights.shape[1]
  mlp = dataclasses.replace(encoder.mlp, residual=True, l2_normalize=False)
  if hybrid:
    width = max(encoder.tfidf.output_dim, num_classes)
    kernel = np.zeros([weights.shape[1] - dim, width], np.float32)
    kernel[:, :num_classes] = weights[:, :-dim].T
    tfidf_config = dataclasses.replace(encoder.tfidf, output_dim=width, initial_kernel=kernel)
    selector = np.eye(num_classes, width, dtype=np.float64)
    class_embeddings = np.concatenate([selector, dense_weights], axis=1)
    encoder = dataclasses.replace(encoder, mlp=mlp, tfidf=tfidf_config)
    fit["tfidf_width"] = width
  else:
    class_embeddings = dense_weights
    encoder = dataclasses.replace(encoder, mlp=mlp)
  return encoder, class_embeddings


def _path_of(tfidf: encoders_lib.TfidfEncoderConfig | None, data: data_lib.PreparedData
             ) -> tuple[linear_path.PathInputs, list[linear_path.Head], np.ndarray, np.ndarray]:
  """The path's inputs (the standardised fixed vectors, with `tfidf` beside the embeddings of hybrid text) and
  heads, and the standardisation's mean and scale."""
  (train_x, train_y), (validation_x, validation_y) = (data_lib.read_split(split, data.input_kind)
                                                      for split in (data.train, data.validation))
  embeddings = ((train_x[encoders_lib.EMBEDDING_KEY], validation_x[encoders_lib.EMBEDDING_KEY]) if tfidf
                else (train_x, validation_x))
  standardized, mean, scale = standardize(embeddings)
  features = [{linear_path.DENSE_KEY: x} for x in standardized]
  if tfidf:
    for split, x in zip(features, (train_x, validation_x), strict=True):
      split[linear_path.TFIDF_KEY] = tfidf_rows(tfidf, x[encoders_lib.TEXT_KEY])
    heads = linear_path.hybrid_heads(HYBRID_INVERSE_REGULARIZATION, HYBRID_EMBEDDING_WEIGHTS, len(mean))
  else:
    heads = linear_path.dense_heads(INVERSE_REGULARIZATION)
  inputs = linear_path.PathInputs(features[0], np.asarray(train_y, np.int64), features[1],
                                  np.asarray(validation_y, np.int64), len(data.class_names))
  return inputs, heads, mean, scale


def logistic_regression_model(model_config: model_lib.Rank4ClassConfig, data: data_lib.PreparedData,
                              run_dir: str, strategy: tf.distribute.Strategy | None = None,
                              path_config: linear_path.PathConfig | None = None
                              ) -> tuple[model_lib.Rank4ClassConfig, dict]:
  """The model config that is the multinomial logistic regression of the model's own inputs, and that fit.

  The regression is trained by the engine on the training split along a path of L2 strengths
  (`linear_path.fit_path`; the validation split chooses the head only, by log-loss and the one-standard-error
  rule), on standardised inputs `(x - mu) / sigma`:
  - fixed vectors (frozen text embeddings, dense features): C from `INVERSE_REGULARIZATION`. Its weights `W`
    and intercepts `b` are folded into the model: class embeddings `W / sigma`, class biases
    `b - (W / sigma) . mu`, the instance tower `x + MLP(x)` with its output layer at zeros (the identity).
  - hybrid text (TF-IDF beside the frozen embedding): the regression of `[t(x) ; a (e(x) - mu) / sigma]`, `t`
    the model's own TF-IDF vector (unit length, sparse) and `a = w / sqrt(d)`; (C, w) from
    `HYBRID_INVERSE_REGULARIZATION` x `HYBRID_EMBEDDING_WEIGHTS`, one head each. The TF-IDF projection starts
    at the TF-IDF weights (its width raised to the class count where it is smaller; extra columns at zero),
    the embedding branch is `x + MLP(x)` at the identity, and the class embeddings are `[one-hot ; a W_e /
    sigma]`.
  The dot interaction then scores exactly the regression's logits, so the untrained model ranks and predicts
  as the regression does. A class without training rows gets a bias below every other class's score.

  The fit is a function of the training and validation splits and the seed, so a resumed run rebuilds the
  same model; nothing of it goes to config.json.

  Args:
    model_config: The resolved model config the candidate is packed into.
    data: The candidate's data (hybrid: texts with their embeddings).
    run_dir: The engine's scratch folder for the path (removed afterwards).
    strategy: The run's strategy.
    path_config: How the path is trained (default `linear_path.PathConfig()`).

  Returns:
    (the model config, the fit's summary: `linear_path.PathResult.fit`).
  """
  started = time.perf_counter()
  hybrid = data.input_kind == data_lib.TEXT_AND_EMBEDDING_INPUT
  encoder, class_encoder = model_config.instance_encoder, model_config.class_encoder
  inputs, heads, mean, scale = _path_of(encoder.tfidf if hybrid else None, data)
  num_classes, dim = inputs.num_classes, len(mean)
  path = linear_path.fit_path(inputs, heads, path_config or linear_path.PathConfig(), run_dir, strategy)
  fit = dict(path.fit)
  if hybrid:
    fit["embedding_weight"] = float(path.head.dense_weight * np.sqrt(dim))
  dense_weights = path.weights[:, -dim:] / scale
  absent = np.flatnonzero(np.bincount(inputs.train_labels, minlength=num_classes) == 0)
  bias = _folded_bias(path.bias, dense_weights, mean, absent)
  encoder, class_embeddings = _folded_instance_encoder(encoder, path.weights, dense_weights, hybrid, fit)
  _logger.info("Logistic-regression model of %d classes from %d training rows (C=%g) in %.1f s.", num_classes,
               len(inputs.train_labels), fit["inverse_regularization"], time.perf_counter() - started)
  return dataclasses.replace(
      model_config, instance_encoder=encoder,
      class_encoder=dataclasses.replace(class_encoder, one_hot=dataclasses.replace(
          class_encoder.one_hot, initial_embeddings=class_embeddings.astype(np.float32),
          initial_bias=bias.astype(np.float32)))), fit
