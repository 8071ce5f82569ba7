#!/usr/bin/env bash
# Build the manuscript.
#   paper/build.sh [PKG]       render PKG (default: ./datapackage.json) and compile the PDF
#   paper/build.sh --no-data   compile only, from the files already in paper/generated/
# The PDF is written to paper/build/paper.pdf.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deepgreen="${DEEPGREEN:-$root/.venv/bin/deepgreen}"
[ -x "$deepgreen" ] || deepgreen="deepgreen"
cd "$root"
if [ "${1:-}" = "--no-data" ]; then
  exec "$deepgreen" paper --no-data
fi
exec "$deepgreen" paper "${1:-datapackage.json}"
