"""The toolkit's version, in one place: setup.py reads it; `rank4class` and `pairwise` expose it.

Semantic versioning (https://semver.org/): MAJOR.MINOR.PATCH, each version's changes in CHANGELOG.md. The
toolkit stays below 1.0 while its import paths are still being moved (docs/ARCHITECTURE.md): a minor version
may move a public path, and the old one stays for one minor version as a deprecated alias.
"""

__version__ = "0.8.0"
