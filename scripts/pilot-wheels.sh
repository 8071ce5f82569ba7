#!/usr/bin/env bash
# Download, here, the wheels the GPU machine's image lacks for scripts/gpu-pilot.sh, into DIR
# (default .whl, which the device call carries; add '/.whl/' to .git/info/exclude once).
#
#   bash scripts/pilot-wheels.sh [DIR]
#
# The image (Python 3.12, x86-64) holds PyTorch, JAX with CUDA, Flax, optax, nvidia-ml-py,
# scikit-learn, pandas, pyarrow, scipy, jinja2, safetensors, psutil and most of what CodeCarbon
# needs, but no CodeCarbon and no pandera; nothing can be downloaded there.  The versions are the
# ones this project's own set-up installed into .venv (scripts/setup.sh), so the pilot runs the
# CodeCarbon and pandera the tests ran.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.whl}
VENV_PYTHON=.venv/bin/python
[ -x "$VENV_PYTHON" ] || { echo "pilot-wheels: run bash scripts/setup.sh first (.venv holds the versions)" >&2; exit 1; }
# What the image lacks: CodeCarbon and pandera with the requirements the image does not hold.
NAMES="codecarbon arrow authlib joserfc cryptography cffi pycparser pydantic pydantic-core
annotated-types typing-inspection rapidfuzz questionary prompt-toolkit wcwidth pycountry tzdata
pandera typeguard"
mkdir -p "$DIR"
for name in $NAMES; do
  version=$("$VENV_PYTHON" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name")
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
    -d "$DIR" "$name==$version"
  echo "  $name $version"
done
echo "pilot-wheels: $(ls "$DIR"/*.whl | wc -l) wheels, $(du -sh "$DIR" | cut -f1) in $DIR"
