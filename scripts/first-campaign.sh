#!/usr/bin/env bash
# Regenerate examples/first-campaign/ (the study's first campaign as 'deepgreen import legacy'
# makes it) from ../shared/legacy-campaign, where that folder exists beside the checkout.
# The one line (from the checkout's root):
#   PYTHONPATH=. .venv/bin/python -m deepgreen_audit import legacy ../shared/legacy-campaign --out examples/first-campaign --overwrite
# (PYTHONPATH=. reads this checkout's code and schemas even where .venv was installed from another.)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHONPATH=. .venv/bin/python -m deepgreen_audit import legacy ../shared/legacy-campaign --out examples/first-campaign --overwrite
