#!/usr/bin/env bash
# On a GPU node: every collective at every dtype and reduction (fp32, bf16, fp16; sum, max, min, avg),
# through the suite's own worker on the node's NCCL, both timing paths checked element by element, and
# a wrong element caught (scripts/device/axes_check.py says what a 1-GPU node can and cannot show).
#
#   bash scripts/device/axes_check.sh OUTDIR
#
# Environment: RANKS (default: every GPU, at most 8), PYTHON (default .venv/bin/python, else python3: the
# first whose torch sees CUDA; ALLOW_CPU=1 takes any torch and runs gloo ranks: a rehearsal, not a GPU
# check), AXES_BUDGET_S (default 90: the hard limit on the run). The environment is passed through
# untouched: NCCL_NVLS_ENABLE=0 and the other multicast switches reach every worker.
# Files in OUTDIR: axes.log (every RESULT line), axes.json (every size's result).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/axes_check.sh OUTDIR" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
BUDGET=${AXES_BUDGET_S:-90}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

NAME=axes_check
. "$ROOT/scripts/device/common.sh"

PY=$(pick_python) || { log "no Python whose torch sees a GPU (tried \$PYTHON, .venv/bin/python, python3)"; exit 2; }
use_checkout "$PY"
backend=nccl
"$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" || backend=gloo
log "python $PY ($backend): $("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "NCCL", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-")')"
log "environment: $(env | grep -E '^(NCCL_|TORCH_NCCL|TORCH_SYMM|NVSHMEM_)' | sort | tr '\n' ' ')"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | sed 's/^/  /'
timeout -s INT "$(allow "$BUDGET")" "$PY" scripts/device/axes_check.py --backend "$backend" ${RANKS:+--ranks "$RANKS"} \
  --out "$OUT/axes.json" 2>&1 | tee "$OUT/axes.log"
status=${PIPESTATUS[0]}
log "exit $status ($(grep -c '^RESULT .* PASS' "$OUT/axes.log") passed, $(grep -c '^RESULT .* FAIL' "$OUT/axes.log") failed)"
exit "$status"
