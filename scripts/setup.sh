#!/usr/bin/env bash
# Set up DeepGreen Audit on this machine: a virtual environment in .venv with the
# project installed (editable), the frameworks at the specification's pinned versions,
# the built stacks (C++/LibTorch, Rust/tch, Java/DL4J) and, when run as root, the system
# packages it needs (TeX Live for the paper, Slurm for the Slurm executor's tests).  Safe to run again: it only installs or rebuilds what is missing or stale.
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

# Slurm and munge, so the tests of the Slurm executor start a single-node cluster (they skip without).
SLURM_PACKAGES="slurmctld slurmd munge slurm-client"
if [ "${DEEPGREEN_SKIP_SLURM:-0}" != "1" ] && ! command -v slurmctld >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Slurm (apt-get): $SLURM_PACKAGES"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $SLURM_PACKAGES >/dev/null
  else
    echo "setup: note: Slurm is missing and this user cannot install it; the Slurm executor's tests skip. As root:" >&2
    echo "  apt-get install -y --no-install-recommends $SLURM_PACKAGES" >&2
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
