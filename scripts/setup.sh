#!/usr/bin/env bash
# Set up DeepGreen Audit on this machine: a virtual environment in .venv with the
# project installed (editable), the frameworks at the specification's pinned versions,
# the built stacks (C++/LibTorch, Rust/tch, Java/DL4J) and, when run as root, the system
# packages it needs (TeX Live for the paper, Slurm for the Slurm executor's tests, the C++
# stack's compiler and libraries).  Safe to run again: it only installs or rebuilds what is missing or stale.
# On a GPU host (DEEPGREEN_ACCELERATOR=cuda, or an NVIDIA driver: NVML or nvidia-smi) it also
# builds one environment per Python framework, each with its GPU build: .venv-pytorch,
# .venv-tensorflow, .venv-jax (deepgreen_audit/collect/environments.py).
#
#   bash scripts/setup.sh             set up (or bring up to date)
#   bash scripts/setup.sh --dry-run   the accelerator detected and why, the environments it would
#                                     build, and the NVIDIA libraries each resolves to (uv; nothing installed)
set -euo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: Python 3.11 or newer is required (found: $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi

# The dry run needs Python and uv (the dev extra installs it into .venv; else uv on PATH).
if [ "$DRY_RUN" = "1" ]; then
  [ -x .venv/bin/python ] && PYTHON=.venv/bin/python
  PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} exec "$PYTHON" -m deepgreen_audit.collect.environments --dry-run
fi

# apt_install WHAT SKIP_VARIABLE PROGRAMS WHY PACKAGE...: system packages, where we may install
# them (root with apt-get), unless SKIP_VARIABLE=1 or all of PROGRAMS (separated by ':'; a
# program on PATH or in /usr/sbin, or an absolute path: a file a -dev package installs) are
# there; otherwise the line that would.
installed() {
  local item
  local -a items
  IFS=: read -ra items <<< "$1"
  for item in "${items[@]}"; do
    case "$item" in
      /*) [ -e "$item" ] || return 1 ;;
      *) command -v "$item" >/dev/null 2>&1 || [ -x "/usr/sbin/$item" ] || return 1 ;;
    esac
  done
}
apt_install() {
  local what=$1 skip=$2 programs=$3 why=$4
  shift 4
  if [ "${!skip:-0}" = "1" ] || installed "$programs"; then
    return 0
  fi
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing $what (apt-get): $*"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  else
    echo "setup: note: $what is missing and this user cannot install it; $why, run as root:" >&2
    echo "  apt-get install -y --no-install-recommends $*" >&2
  fi
}
# The LaTeX toolchain for the paper; Slurm and munge, for the tests of the Slurm executor, which
# start a single-node cluster, and Chromium, in which the tests open the audit's HTML page (both
# sets of tests skip without them).
apt_install "TeX Live" DEEPGREEN_SKIP_TEX latexmk "to build the PDF" \
  texlive-latex-base texlive-latex-recommended texlive-science latexmk lmodern poppler-utils
apt_install "Slurm" DEEPGREEN_SKIP_SLURM slurmctld "to run the Slurm executor's tests" \
  slurmctld slurmd munge slurm-client
apt_install "Chromium" DEEPGREEN_SKIP_CHROMIUM chromium "to test the audit's HTML page" chromium
# The C++ stack's compiler and libraries: OpenSSL (SHA-256), nlohmann-json, libzip (npz) and
# GoogleTest (its unit tests, which the test suite runs through ctest without LibTorch).
apt_install "the C++ stack's build tools and libraries" DEEPGREEN_SKIP_CPP_LIBRARIES \
  "cmake:c++:/usr/include/openssl/evp.h:/usr/include/nlohmann/json.hpp:/usr/include/zip.h:/usr/include/gtest/gtest.h" \
  "to build the C++ stack and run its unit tests" \
  cmake g++ make libssl-dev nlohmann-json3-dev libzip-dev libgtest-dev

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
# An editable install leaves the project's modules uncompiled, and where bytecode is not
# written (PYTHONDONTWRITEBYTECODE) every command would compile them again: 0.1 s of each
# start.  Compiled here as a wheel install would; only changed modules are compiled again.
.venv/bin/python -m compileall -q deepgreen_audit

# A GPU host: one environment per Python framework, each resolving its own CUDA libraries
# (the plan's python stacks run there: docs/collection.md); a cpu host keeps the one .venv.
ACCELERATOR=$(.venv/bin/python -m deepgreen_audit.collect.environments --detect)
if [ "$ACCELERATOR" = "cuda" ]; then
  .venv/bin/python -m deepgreen_audit.collect.environments --install
fi

# The synthetic contrast cell (S7): drawn here from collect/contrast.toml and its seed (byte for
# byte the same package each time, in about a second) rather than tracked, as its 1 Hz samples
# are 23 MB.  A contrast/ already there (a measured one flattened into it) is never replaced.
if [ ! -e contrast/datapackage.json ]; then
  echo "setup: drawing the synthetic contrast cell into contrast/ (deepgreen synth --plan collect/contrast.toml)"
  .venv/bin/deepgreen synth --plan collect/contrast.toml --out contrast > /dev/null
fi

# The stacks that are compiled before they run; incremental, and a stack whose build tools
# are missing is skipped with a note naming them.
if [ "${DEEPGREEN_SKIP_STACK_BUILDS:-0}" != "1" ]; then
  echo "setup: building the C++, Rust and Java stacks (deepgreen build; the first build takes minutes)"
  .venv/bin/deepgreen build --available
fi
echo "setup: ready (.venv/bin/deepgreen)"
