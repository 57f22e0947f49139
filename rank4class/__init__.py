"""Rank4Class: multiclass classification as ranking the classes for each instance, on TF-Ranking.

Subpackages, bottom to top: `modeling` (encoders, interactions, the model), `inference` (exports, serving,
calibration, full-class scoring), `evaluation` (metrics, evaluators, reports, baselines), `training` (data,
model setup, the run), `studies` (the experiments). The flat module names of 0.7 (`rank4class.model`, ...) are
deprecated aliases of the moved modules until the next minor version (`rank4class_data.moved_modules`).
"""

from rank4class_data import moved_modules as _moved_modules
from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

_moved_modules.alias({
    "rank4class.baselines": "rank4class.evaluation.baselines",
    "rank4class.calibration": "rank4class.inference.calibration",
    "rank4class.class_encoders": "rank4class.modeling.class_encoders",
    "rank4class.class_sampling": "rank4class.modeling.class_sampling",
    "rank4class.encoders": "rank4class.modeling.encoders",
    "rank4class.evaluate": "rank4class.evaluation.evaluate",
    "rank4class.evaluate_main": "rank4class_cli.binaries.evaluate_main",
    "rank4class.evaluation_report": "rank4class.evaluation.evaluation_report",
    "rank4class.evaluators": "rank4class.evaluation.evaluators",
    "rank4class.export": "rank4class.inference.export",
    "rank4class.export_folder": "rank4class.inference.export_folder",
    "rank4class.export_main": "rank4class_cli.binaries.export_main",
    "rank4class.full_class_evaluation": ("rank4class.evaluation.full_class_evaluation",
                                        "rank4class.inference.full_class_scoring"),
    "rank4class.hybrid_text_encoder": "rank4class.modeling.hybrid_text_encoder",
    "rank4class.image_augmentation": "rank4class.modeling.image_encoder",
    "rank4class.image_encoder": "rank4class.modeling.image_encoder",
    "rank4class.instance_encoder": "rank4class.modeling.instance_encoder",
    "rank4class.interactions": "rank4class.modeling.interactions",
    "rank4class.labelled_records": "rank4class_data.labelled_records",
    "rank4class.many_class_study": "rank4class.studies.many_class_study",
    "rank4class.many_class_study_main": "rank4class_cli.binaries.many_class_study_main",
    "rank4class.metrics": "rank4class.evaluation.metrics",
    "rank4class.mlp_encoder": "rank4class.modeling.mlp_encoder",
    "rank4class.model": "rank4class.modeling.model",
    "rank4class.model_flags": "rank4class_cli.model_flags",
    "rank4class.model_setup": "rank4class.training.model_setup",
    "rank4class.predict": "rank4class.inference.predict",
    "rank4class.predict_main": "rank4class_cli.binaries.predict_main",
    "rank4class.ranking_math": "rank4class.modeling.ranking_math",
    "rank4class.served": "rank4class.inference.served",
    "rank4class.serving": "rank4class.inference.serving",
    "rank4class.study": "rank4class.studies.study",
    "rank4class.study_config": "rank4class.studies.study_config",
    "rank4class.study_main": "rank4class_cli.binaries.study_main",
    "rank4class.study_report": "rank4class.studies.study_report",
    "rank4class.text_instance_encoder": "rank4class.modeling.text_instance_encoder",
    "rank4class.tfidf_encoder": "rank4class.modeling.tfidf_encoder",
    "rank4class.train": "rank4class.training.train",
    "rank4class.train_config": "rank4class.training.train_config",
    "rank4class.train_main": "rank4class_cli.binaries.train_main",
    "rank4class.training_data": ("rank4class.training.training_data",
                                "rank4class_data.classification_data"),
    "rank4class.tuning": "rank4class.training.tuning",
    "rank4class.two_stage": "rank4class.inference.two_stage",
    "rank4class.zero_shot": "rank4class.inference.zero_shot",
    "rank4class.zero_shot_choice": "rank4class.training.zero_shot_choice",
    # 0.9: the image augmentation (`RandomShift`, `translate`) is part of the image encoder's module.
    "rank4class.modeling.image_augmentation": "rank4class.modeling.image_encoder",
})

import rank4class_encoders  # noqa: E402,F401  The text encoders (TextEncoder is registered as "rank4class").
import rank4class_engine  # noqa: E402,F401  The loss registry (RescaledMeanSquaredLoss is registered as "rank4class").

# Importing the modules registers their Keras objects, so `tf.keras.models.load_model` needs no custom_objects
# (the metrics matter to `load_model` with compile=True).
from rank4class.evaluation import metrics  # noqa: E402,F401
from rank4class.inference import serving  # noqa: E402,F401
from rank4class.modeling import (  # noqa: E402,F401
    class_encoders,
    class_sampling,
    encoders,
    hybrid_text_encoder,
    image_encoder,
    instance_encoder,
    interactions,
    mlp_encoder,
    model,
    ranking_math,
    text_instance_encoder,
    tfidf_encoder,
)
from rank4class_engine.version import __version__  # noqa: E402,F401


def __getattr__(name: str):
  """`rank4class.<old module name>` after `import rank4class`: the moved module, through its deprecated
  alias."""
  return _moved_modules.old_attribute(__name__, name)
