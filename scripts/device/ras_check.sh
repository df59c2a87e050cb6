#!/usr/bin/env bash
# On a GPU node (1 GPU is enough): NCCL RAS asked through the suite's worker groups, and nvbandwidth.
#
#   bash scripts/device/ras_check.sh OUTDIR [STEP ...]          STEP: ras nvbandwidth (default: both)
#
#   ras          scripts/device/ras_check.py: RAS during a one-rank group (JSON where the library answers it,
#                text otherwise; /usr/bin/ncclras -v kept beside it), its readiness diagnostics (NCCL 2.31: an
#                older one says it has none), and a forced timeout (an all_reduce behind a GPU kernel that
#                spins past the call's deadline) whose failure carries RAS's reading; all in OUTDIR/ras.jsonl.
#   nvbandwidth  `wirecheck nvbandwidth --out OUTDIR/nvbandwidth.jsonl` (the suite's host copies measured now)
#                where nvbandwidth is installed; else says so.
#
# Environment: PYTHON (default .venv/bin/python, else python3: the first whose torch sees CUDA), RAS_BUDGET_S
# (default 110), ALLOW_CPU=1 (a dry run on a CPU machine: the ras step on gloo, which has no RAS: the readings
# say so). The environment reaches the workers untouched (NCCL_RAS_ADDR, NCCL_NVLS_ENABLE=0, ...).
# Files in OUTDIR: <step>.log, ras.jsonl, ras-*.txt (RAS's own words), nvbandwidth.jsonl, logs/.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/ras_check.sh OUTDIR [STEP ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac
shift
BUDGET=${RAS_BUDGET_S:-110}
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(ras nvbandwidth)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0

NAME=ras_check
. "$ROOT/scripts/device/common.sh"

PY=$(pick_python) || { log "no Python whose torch sees a GPU (tried \$PYTHON, .venv/bin/python, python3; ALLOW_CPU=1 for a dry run)"; exit 2; }
use_checkout "$PY"
BACKEND=nccl
"$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" || BACKEND=gloo
log "python $PY, backend $BACKEND: $("$PY" -c 'import torch; print("torch", torch.__version__, "NCCL", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "(no GPU)")')"
log "environment: $(env | grep -E '^(NCCL_|TORCH_NCCL)' | sort | tr '\n' ' ')"
log "ncclras: $(command -v ncclras || ls /usr/bin/ncclras 2>/dev/null || echo 'not installed')"

step_ras() {
  local t0=$SECONDS
  fits 60 ras || return 1
  timeout "$(allow 90)" "$PY" scripts/device/ras_check.py "$OUT" --backend "$BACKEND" > "$OUT/ras.log" 2>&1
  local rc=$?
  grep -E "^(RESULT|RAS |NCCL RAS|ncclras|verdict|record)" "$OUT/ras.log" | sed 's/^/  /'
  log "ras: exit $rc in $((SECONDS - t0)) s"
  [ "$rc" -eq 0 ]
}

step_nvbandwidth() {
  local bin
  bin=$(command -v nvbandwidth || true)
  if [ -z "$bin" ]; then
    log "nvbandwidth: not installed on this node (no nvbandwidth on PATH): not run"
    return 0
  fi
  fits 40 nvbandwidth || return 1
  timeout "$(allow 60)" "$PY" -m wirecheck.cli.main nvbandwidth --binary "$bin" --out "$OUT/nvbandwidth.jsonl" \
    > "$OUT/nvbandwidth.log" 2>&1
  local rc=$?
  sed 's/^/  /' "$OUT/nvbandwidth.log" | tail -25
  log "nvbandwidth: exit $rc"
  [ "$rc" -eq 0 ]
}

run_steps ras nvbandwidth -- "${STEPS[@]}" || status=$?
log "done: $([ $status -eq 0 ] && echo 'every step passed' || echo 'a step failed') (files in $OUT)"
exit $status
