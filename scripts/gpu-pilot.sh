#!/usr/bin/env bash
# The pilot campaign (collect/pilot.toml) in one command, on a machine with an NVIDIA GPU:
#
#   bash scripts/gpu-pilot.sh OUT [--plan TOML] [--wheels DIR] [--work DIR] [--rehearsal REASON]
#
# 1. installs what the machine's Python lacks from the wheels carried in DIR (default .whl,
#    made here by scripts/pilot-wheels.sh): nothing is downloaded there;
# 2. checks nvidia-smi and NVML's accumulated-energy counter and refuses without them;
#    RAPL may be missing: then the CPU energy is recorded empty with the reason, never invented;
# 3. prepares the digits store and the canonical weights, runs preflight, collects, flattens,
#    validates and audits (against the scope the plan declares);
# 4. writes OUT/pilot/ (the package: descriptor, four tables, SHA256SUMS), OUT/pilot.log and
#    OUT/audit.json; the run tree stays in the work folder.
#
# --rehearsal REASON marks the package synthetic with that reason: the rehearsal on a host
# without a GPU runs this same script with a fake NVML module and nvidia-smi first on
# PYTHONPATH and PATH (tests/fakes/nvidia; tests/test_gpu_pilot.py).  PYTHON picks the
# interpreter (default python3: on the GPU machine's image, the one that holds PyTorch and JAX).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
OUT=$1; shift
PLAN=$ROOT/collect/pilot.toml
WHEELS=$ROOT/.whl
WORK=""
REHEARSAL=""
while [ $# -gt 0 ]; do
  case "$1" in
    --plan) PLAN=$2; shift 2 ;;
    --wheels) WHEELS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --rehearsal) REHEARSAL=$2; shift 2 ;;
    *) echo "gpu-pilot: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -e "$OUT/pilot" ]; then
  echo "gpu-pilot: $OUT/pilot exists; choose a new output folder" >&2
  exit 2
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=${WORK:-$(mktemp -d /tmp/deepgreen-pilot.XXXXXX)}
mkdir -p "$WORK"
LOG=$OUT/pilot.log
exec > >(tee -a "$LOG") 2>&1
PYTHON=${PYTHON:-python3}
step() { echo; echo "== gpu-pilot [$(date -u +%H:%M:%S)] $*"; }
fail() { echo "gpu-pilot: $*" >&2; exit 1; }
T0=$(date +%s)

step "1/7 Python packages (carried wheels: $WHEELS)"
if compgen -G "$WHEELS/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$WORK/site" "$WHEELS"/*.whl
  export PYTHONPATH=$WORK/site${PYTHONPATH:+:$PYTHONPATH}
  echo "installed $(ls "$WHEELS"/*.whl | wc -l) wheels into $WORK/site"
else
  echo "no wheels in $WHEELS: using what $PYTHON has"
fi
# The project itself runs from this checkout.
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
DG() { "$PYTHON" -m deepgreen_audit "$@"; }
"$PYTHON" - <<'EOF' || fail "the Python packages the pilot needs are missing (scripts/pilot-wheels.sh carries them)"
import importlib, sys
need = ["codecarbon", "pandera", "pyarrow", "pandas", "scipy", "jinja2", "pynvml", "sklearn", "safetensors", "torch"]
missing = [n for n in need if importlib.util.find_spec(n) is None]
print(f"Python {sys.version.split()[0]} at {sys.executable}; missing: {', '.join(missing) or 'none'}")
sys.exit(1 if missing else 0)
EOF

step "2/7 the GPU and its energy counter"
command -v nvidia-smi >/dev/null || fail "nvidia-smi is not on PATH: this is no NVIDIA GPU machine"
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader \
  || fail "nvidia-smi could not query the GPU"
"$PYTHON" - <<'EOF' || fail "NVML's total-energy counter is not readable: the pilot measures nothing without it"
import time
from deepgreen_audit.device.nvml import Nvml
nvml = Nvml()
first = nvml.total_energy_mj()
time.sleep(1.0)
second = nvml.total_energy_mj()
print(f"NVML: {', '.join(nvml.names())}, driver {nvml.driver_version()}; "
      f"nvmlDeviceGetTotalEnergyConsumption over 1 s: {[b - a for a, b in zip(first, second)]} mJ")
nvml.close()
EOF
ALLOW=()
if ! RAPL=$("$PYTHON" -c 'from deepgreen_audit.device.rapl import Rapl, active_powercap_root
Rapl(active_powercap_root()); print("readable")' 2>&1); then
  echo "RAPL: not readable here (${RAPL##*$'\n'}); the CPU energy is recorded empty with the reason,"
  echo "      and so is energy_j: the CPU packages are inside every device's measurement boundary"
  ALLOW=(--allow-missing-counters)
else
  echo "RAPL: $RAPL"
fi

step "3/7 data and canonical weights"
DG data prepare --plan "$PLAN"

step "4/7 preflight"
DG preflight --plan "$PLAN" "${ALLOW[@]}" --allow-unpinned

step "5/7 collect (one process per run)"
SYNTH=()
[ -n "$REHEARSAL" ] && SYNTH=(--synthetic "$REHEARSAL")
DG collect --plan "$PLAN" --out "$WORK/collected" "${ALLOW[@]}" "${SYNTH[@]}"

step "6/7 flatten and validate"
DG flatten "$WORK/collected/runs" --out "$OUT/pilot"
DG validate "$OUT/pilot"

step "7/7 audit against the declared scope"
# The audit's verdict is the pilot's finding, not the script's failure: its exit status is kept
# in the log, and the script fails only when the audit could not run.
set +e
DG audit "$OUT/pilot" --out "$OUT/audit.json"
STATUS=$?
set -e
[ -f "$OUT/audit.json" ] || fail "the audit wrote no report"
echo
echo "gpu-pilot: done in $(( $(date +%s) - T0 )) s (audit exit status $STATUS): $OUT/pilot, $OUT/audit.json, $LOG"
