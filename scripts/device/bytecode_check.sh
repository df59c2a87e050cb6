#!/usr/bin/env bash
# Does the workers' bytecode cache (src/wirecheck/workers/bytecode.py) pay on this node? On the H200 nodes
# it was written for, the image sets PYTHONDONTWRITEBYTECODE=1 and ships torch without .pyc. Steps, one call:
#   1. fresh interpreter imports (torch; torch + dynamo + FSDP + transformers), cache off, then on;
#   2. the probe's set-up plan (each strategy once, wrapping under cProfile), cache off, then on
#      (the first "on" compiles the cache: its time is printed);
#   3. the README's quick start on a fresh copy (install.sh compiles for .venv's interpreter).
#   bash scripts/device/bytecode_check.sh OUTDIR     (from the repository root, .whl/ beside it)
# GPUS=2 on a 2-GPU node. In OUTDIR: off/ and on/ (probe outputs), install.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/bytecode_check.sh OUTDIR" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
GPUS=${GPUS:-1}
mkdir -p "$OUT"
echo "== PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset}; cache ${WIRECHECK_PYCACHE:-~/.cache/wirecheck/pycache}"
imports() {
  for what in "torch" "torch, torch._dynamo, torch.distributed.fsdp, transformers"; do
    /usr/bin/time -f "   $1: import $what: %e s" python3 -c "import $what" 2>&1 | tail -1
  done
}
echo "== 1. imports, cache off"
WIRECHECK_PYCACHE=off imports off
echo "== 2. probe set-up plan, cache off"
WIRECHECK_PYCACHE=off bash scripts/device/training_probe.sh "$OUT/off" --plan setup --gpus "$GPUS" --budget 120 \
  | grep -E "^probe: [0-9]|^[a-z0-9]+\[" | cut -c1-400
echo "== 2. probe set-up plan, cache on (compiled here first)"
bash scripts/device/training_probe.sh "$OUT/on" --plan setup --gpus "$GPUS" --budget 120 \
  | grep -E "^probe: [0-9]|^probe: bytecode|^[a-z0-9]+\[" | cut -c1-400
echo "== 1. imports, cache on"
PYTHONPYCACHEPREFIX=$(python3 -c 'import sys; sys.path.insert(0, "src"); from wirecheck.workers.bytecode import cache_dir; print(cache_dir())') imports on
echo "== 3. fresh install and validate -k inventory"
bash scripts/device/fresh_install.sh -k inventory >"$OUT/install.log" 2>&1
grep -E "^== |install.sh: bytecode|passed|failed" "$OUT/install.log" | tail -12
