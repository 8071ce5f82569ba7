#!/usr/bin/env bash
# Set up DeepGreen Audit on this machine: a virtual environment in .venv with the
# project installed (editable) and, when run as root, the system packages it needs.
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: Python 3.11 or newer is required (found: $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi

# System packages (the LaTeX toolchain for the paper), where we may install them.
TEX_PACKAGES="texlive-latex-base texlive-latex-recommended texlive-science latexmk lmodern poppler-utils"
if [ "${DEEPGREEN_SKIP_TEX:-0}" != "1" ] && ! command -v latexmk >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing TeX Live (apt-get): $TEX_PACKAGES"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $TEX_PACKAGES >/dev/null
  else
    echo "setup: note: TeX Live is missing and this user cannot install it; to build the PDF, run as root:" >&2
    echo "  apt-get install -y --no-install-recommends $TEX_PACKAGES" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi
STAMP=.venv/.deepgreen-installed
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
  echo "setup: installing the project and its dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev,render,collect,pytorch,tensorflow,jax]'
  touch "$STAMP"
fi
echo "setup: ready (.venv/bin/deepgreen)"
