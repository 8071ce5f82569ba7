#!/usr/bin/env bash
# Regenerate examples/first-campaign/ (the study's first campaign as 'deepgreen import legacy'
# makes it) from ../shared/legacy-campaign, where that folder exists beside the checkout.
# The one line:
#   .venv/bin/deepgreen import legacy ../shared/legacy-campaign --out examples/first-campaign --overwrite
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/deepgreen import legacy ../shared/legacy-campaign --out examples/first-campaign --overwrite
