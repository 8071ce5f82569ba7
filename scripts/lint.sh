#!/usr/bin/env bash
# The static gates, run by scripts/test.sh before the tests (and on their own):
#   ruff  over the package, the tests, the scripts and the benchmarks ([tool.ruff] in pyproject.toml)
#   mypy  over the package ([tool.mypy]: every registered check is typed and checked)
#   lint-imports  the layers' contract ([tool.importlinter]: imports run downward only)
# Any finding fails (exit 1).  Uses .venv's tools (the dev extra), else those on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
[ -x "$BIN/ruff" ] || BIN=$(dirname "$(command -v ruff)")
status=0
echo "lint: ruff check deepgreen_audit tests scripts benchmarks"
"$BIN/ruff" check deepgreen_audit tests scripts benchmarks || status=1
echo "lint: mypy (deepgreen_audit)"
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} "$BIN/mypy" || status=1
echo "lint: lint-imports (the layers' contract)"
"$BIN/lint-imports" --no-cache || status=1
exit $status
