#!/usr/bin/env bash
# Set up, run the static gates (ruff, mypy: scripts/lint.sh), then the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/lint.sh
exec .venv/bin/python -m pytest -n 2 -q "$@"
