"""The model, loss and class-list flags of `rank4class-train` (binary layer: the only absl in `rank4class/`
besides the `*_main` modules): `define_model_flags` defines them on a binary's registry, `model_config` reads
them back into a `Rank4ClassConfig`."""

from absl import flags

from rank4class.modeling import class_encoders, class_sampling, encoders, interactions
from rank4class.modeling import model as model_lib
from rank4class.training import train as train_lib
from rank4class_cli import cli
from rank4class_engine.optimization import losses


def define_model_flags(define: cli.FlagDefiner) -> None:
  """Encoders, interaction, sampled class lists (with hard negatives) and the loss."""
  _define_instance_encoder_flags(define)
  _define_class_flags(define)
  _define_loss_flags(define)


def _define_instance_encoder_flags(define: cli.FlagDefiner) -> None:
  """The instance encoder and its TF-IDF, CNN and image settings."""
  define.string("instance_encoder", train_lib.AUTO_ENCODER, "Instance encoder: "
                + ", ".join(train_lib.INSTANCE_ENCODERS) + " (auto: image for images, text for raw text, "
                "tfidf for --text_mode=tfidf, mlp for embeddings and dense features).")
  define.integer("tfidf_max_tokens", encoders.DEFAULT_TFIDF_MAX_TOKENS, "--text_mode=tfidf: vocabulary size "
                 "(the most frequent n-grams of the training texts, the out-of-vocabulary token included); "
                 "with --optimizer=lazy_adam a step updates only the rows of the n-grams in its batch.")
  define.integer("tfidf_ngrams", 2,
                 "--text_mode=tfidf: n-grams of 1 to this many words (2: words and word pairs).")
  define.float("tfidf_dropout", 0.0, "--text_mode=tfidf: dropout rate on the TF-IDF entries of a text.")
  define.bool("tfidf_sublinear_tf", False, "--text_mode=tfidf: weigh an n-gram by 1 + log of its count in "
              "the text instead of its count (on 20 Newsgroups: 18.2 % top-1 error against 16.8 %, seed 0).")
  define.list("cnn_filters", ["32", "64", "128"], "Conv widths of the small CNN image encoder, one conv + "
              "max-pool block each (Fashion-MNIST, 1,500 steps: 13.5 % top-1 error with 32,64,128 against "
              "17.3 % with 32,64).")
  define.integer("image_shift", 0, "Training images are moved by up to this many pixels on each axis "
                 "(random, the draws resumable; none at inference). 0: off. It pays only over many epochs: "
                 "on Fashion-MNIST, 3,000 steps of 64, 2 pixels gave 12.0 % top-1 error against "
                 "11.1 % without.")
  define.bool("image_flip", False, "Training images are also mirrored left-right at random (not for digits "
              "or text in images).")
  define.string("cnn_pooling", "max",
                "Global pooling of the small CNN: " + ", ".join(encoders.POOLINGS) + ".")


def _define_class_flags(define: cli.FlagDefiner) -> None:
  """The class encoder, the interaction and the sampled class lists (with hard negatives)."""
  define.string("class_encoder", class_encoders.ONE_HOT, "Class encoder: "
                + ", ".join(class_encoders.CLASS_ENCODER_NAMES) + ".")
  define.enum(
    "class_text_towers",
    class_encoders.AUTO_TOWERS,
    class_encoders.TOWERS,
    "--class_encoder=metadata: "
    "cosine: both towers start at the frozen MiniLM's cosine similarity (unit-length embeddings, residual "
    "layers initialised at zeros, dot / 0.05, no class bias), so training starts from the untrained "
    "nearest-class-text ranking and zero-shot ranking beats it (docs/RESULTS.md); needs frozen text "
    "inputs, the mlp encoder and the dot interaction. projection: an MLP of --hidden_width and a "
    "projection of the class texts to its size. auto: cosine where it applies.",
  )
  define.enum("class_init", class_encoders.AUTO_INIT, class_encoders.CLASS_INITS, "--class_encoder=one_hot: "
              "centroids: the class embeddings start at the centroids of each class's training inputs "
              "(length 20), the instance at x + MLP(x) of unit length (output layer initialised at zeros), "
              "so training starts from the nearest class centroid classifier (WordNet, 3,498 classes: 46.1 % "
              "top-1 error against 72.2 % random and the centroid baseline's 50.9 %); needs frozen "
              "embeddings or dense features as inputs, the mlp encoder and the dot interaction. random: "
              "glorot uniform. auto: centroids where they apply to frozen text embeddings of "
              f"{train_lib.AUTO_CENTROID_CLASSES} classes or more.")
  define.string("interaction", interactions.DOT, "Instance-class interaction: "
                + ", ".join(interactions.INTERACTION_NAMES) + ".")
  define.integer("hidden_width", 128, "Width of the two interaction MLP layers and of the MLP instance "
                 "encoder's layer (tfidf: the size of its projection).")
  define.enum("class_sampler", "none", ("none", *class_sampling.SAMPLERS), "Training lists: every class "
              "(none), or the true class and --num_sampled negatives drawn uniform / log_uniform / "
              "empirical / in_batch.")
  define.integer("num_sampled", 63, "Negatives per training list with --class_sampler (not with in_batch: "
                 "the batch's other classes are its negatives).")
  define.bool("shared_negatives", False, "Draw one set of --num_sampled negatives per batch instead of one "
              "per instance: far fewer class rows updated per step (faster at 10^5 classes), "
              "less varied lists.")
  define.integer("hard_negatives", 0, "How many of the --num_sampled negatives are the classes the model "
                 "currently scores highest for the true class's instances (mined every --hard_refresh_every "
                 "steps).")
  define.integer("hard_refresh_every", 100, "Steps between refreshes of the hard negatives.")
  define.integer("hard_refresh_rows", 1024, "Classes whose hard negatives are re-mined per refresh (each "
                 "costs one score per class).")


def _define_loss_flags(define: cli.FlagDefiner) -> None:
  """The ranking loss and its settings."""
  define.string("loss", losses.SOFTMAX, "Ranking loss: " + ", ".join(losses.LOSS_NAMES) + ".")
  define.float("logit_adjustment", 0.0, "tau of the logit-adjusted loss for skewed labels (Menon et al. "
               "2021): in training each class's score gets tau * log(its share of the training rows) before "
               "the loss; predictions are unchanged. 0: off; 1: the paper's.")
  define.float("loss_temperature", None, "Score temperature of softmax/pairwise/ApproxNDCG losses.")
  define.float("gumbel_temperature", 1.0, "Gumbel noise temperature of gumbel_approx_ndcg.")
  define.integer("gumbel_samples", 8, "Gumbel samples per list of gumbel_approx_ndcg.")
  define.float("mse_weight_k", 1.0, "rescaled_mse: weight k of the true class's term.")
  define.float("mse_scale_m", 1.0, "rescaled_mse: target M of the true class's score.")


CHOICES = {"instance_encoder": train_lib.INSTANCE_ENCODERS,
           "class_encoder": class_encoders.CLASS_ENCODER_NAMES,
           "interaction": interactions.INTERACTION_NAMES, "loss": losses.LOSS_NAMES,
           "cnn_pooling": encoders.POOLINGS}


def model_config(f: flags.FlagValues) -> model_lib.Rank4ClassConfig:
  """The `Rank4ClassConfig` the flags describe.

  Raises:
    ValueError: naming the flag, for values the config rejects.
  """
  width = f.hidden_width
  if width < 1:
    raise ValueError(f"--hidden_width={width} must be a positive integer")
  if f.tfidf_max_tokens < 2 or f.tfidf_ngrams < 1 or not 0.0 <= f.tfidf_dropout < 1.0:
    raise ValueError(f"--tfidf_max_tokens={f.tfidf_max_tokens} must be >= 2, --tfidf_ngrams={f.tfidf_ngrams} "
                     f">= 1 and --tfidf_dropout={f.tfidf_dropout:g} in [0, 1)")
  sampler = None if f.class_sampler == "none" else f.class_sampler
  if sampler == class_sampling.IN_BATCH and f["num_sampled"].present:
    raise ValueError(f"--num_sampled={f.num_sampled} does not apply to --class_sampler=in_batch, whose "
                     "negatives are the batch's other classes (list size = --batch_size); drop "
                     "--num_sampled, or draw negatives with --class_sampler=uniform, "
                     "log_uniform or empirical")
  if f["class_text_towers"].present and f.class_encoder != class_encoders.METADATA:
    raise ValueError(f"--class_text_towers={f.class_text_towers} applies to --class_encoder=metadata "
                     f"(classes as texts), got --class_encoder={f.class_encoder}")
  if f["class_init"].present and f.class_encoder != class_encoders.ONE_HOT:
    raise ValueError(f"--class_init={f.class_init} applies to --class_encoder=one_hot (a learned class "
                     f"embedding table), got --class_encoder={f.class_encoder}")
  if f.image_shift < 0:
    raise ValueError(f"--image_shift={f.image_shift} must be >= 0 pixels (0: off)")
  if not f.logit_adjustment >= 0:
    raise ValueError(f"--logit_adjustment={f.logit_adjustment:g} must be >= 0 (0: off)")
  if f.hard_negatives and sampler is None:
    raise ValueError(f"--hard_negatives={f.hard_negatives} needs a --class_sampler (the hard negatives are "
                     "part of each sampled list)")
  return model_lib.Rank4ClassConfig(
      instance_encoder=encoders.InstanceEncoderConfig(
          type=f.instance_encoder, mlp=encoders.MlpEncoderConfig(hidden_units=(width,)),
          image=encoders.ImageEncoderConfig(filters=cli.int_tuple("cnn_filters", f.cnn_filters),
                                            pooling=f.cnn_pooling, shift=f.image_shift, flip=f.image_flip),
          tfidf=encoders.TfidfEncoderConfig(output_dim=width, max_tokens=f.tfidf_max_tokens,
                                            ngrams=f.tfidf_ngrams, sublinear_tf=f.tfidf_sublinear_tf,
                                            dropout=f.tfidf_dropout)),
      class_encoder=class_encoders.ClassEncoderConfig(type=f.class_encoder, towers=f.class_text_towers,
                                                      init=f.class_init),
      interaction=interactions.InteractionConfig(type=f.interaction, hidden_units=(width, width)),
      loss=losses.LossConfig(type=f.loss, temperature=f.loss_temperature, sample_size=f.gumbel_samples,
                             gumbel_temperature=f.gumbel_temperature, weight_k=f.mse_weight_k,
                             scale_m=f.mse_scale_m),
      sampling=class_sampling.SamplingConfig(sampler, f.num_sampled, hard_negatives=f.hard_negatives,
                                             hard_refresh_every=f.hard_refresh_every,
                                             hard_refresh_rows=f.hard_refresh_rows,
                                             shared_negatives=f.shared_negatives),
      logit_adjustment=f.logit_adjustment)
