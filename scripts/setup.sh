#!/usr/bin/env bash
# Set up DeepGreen Audit on this machine: a virtual environment in .venv with the
# project installed (editable), the frameworks at the specification's pinned versions,
# the built stacks (C++/LibTorch, Rust/tch, Java/DL4J) and, when run as root, the system
# packages it needs.  Safe to run again: it only installs or rebuilds what is missing or stale.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: Python 3.11 or newer is required (found: $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi

# System packages, where we may install them: the LaTeX toolchain for the paper, and Chromium,
# in which the tests open the audit's HTML page (DEEPGREEN_SKIP_TEX=1 / DEEPGREEN_SKIP_CHROMIUM=1).
TEX_PACKAGES="texlive-latex-base texlive-latex-recommended texlive-science latexmk lmodern poppler-utils"
WANTED=""
if [ "${DEEPGREEN_SKIP_TEX:-0}" != "1" ] && ! command -v latexmk >/dev/null 2>&1; then
  WANTED="$WANTED $TEX_PACKAGES"
fi
if [ "${DEEPGREEN_SKIP_CHROMIUM:-0}" != "1" ] && [ ! -x /usr/bin/chromium ]; then
  WANTED="$WANTED chromium"
fi
if [ -n "$WANTED" ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing system packages (apt-get):$WANTED"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $WANTED >/dev/null
  else
    echo "setup: note: these system packages are missing and this user cannot install them:$WANTED" >&2
    echo "  (TeX Live builds the PDF; Chromium runs the HTML page's tests.) As root:" >&2
    echo "  apt-get install -y --no-install-recommends$WANTED" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi
STAMP=.venv/.deepgreen-installed
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ] || [ collect/experiment.toml -nt "$STAMP" ]; then
  # The frameworks' versions come from the specification (S4_backend.pinned_versions).
  .venv/bin/python scripts/constraints.py > .venv/constraints.txt
  echo "setup: installing the project and its dependencies into .venv (pinned: $(tr '\n' ' ' < .venv/constraints.txt))"
  echo "setup: torch comes from PyPI as a CUDA build (about 5 GB with its NVIDIA libraries); this takes minutes"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -c .venv/constraints.txt -e '.[dev,render,collect,pytorch,tensorflow,jax]'
  touch "$STAMP"
fi

# The stacks that are compiled before they run; incremental, and a stack whose build tools
# are missing is skipped with a note naming them.
if [ "${DEEPGREEN_SKIP_STACK_BUILDS:-0}" != "1" ]; then
  echo "setup: building the C++, Rust and Java stacks (deepgreen build; the first build takes minutes)"
  .venv/bin/deepgreen build --available
fi
echo "setup: ready (.venv/bin/deepgreen)"
