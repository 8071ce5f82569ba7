#!/usr/bin/env bash
# Set up, then run the main job on the shipped package: validate it and print its summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo
echo "== deepgreen validate (the shipped package, ./datapackage.json)"
.venv/bin/deepgreen validate datapackage.json
