#!/usr/bin/env bash
# On a GPU host: `wirecheck fleet diagnose`'s pairs measured with NCCL, as N "nodes" of 1 GPU each on this one
# host (N = the GPUs, 3 or 4), each a torchrun agent of `wirecheck fleet multinode -- --pair-list ...` with its
# own NCCL_HOSTID (NCCL's network transport between them, as fleet_check.sh's net-transport), then judged with
# `wirecheck fleet diagnose FLEET.json --pairs-record`.
#
#   bash scripts/device/fleet_diagnose_check.sh OUTDIR [STEP ...]     STEP: healthy slow (default: both)
#
#   healthy   the last "node" is the suspect of a hand-written fleet report (slow in the pair schedule); every
#             pair runs at the same speed: expect exit 21 (not reproduced) and "fine with K of K good partners".
#   slow      the same, the suspect's agent with the test-only pair worker fleet_faults:slow_pair (0.3 s before
#             each call): expect exit 20 and "node nK: slow with K of K good partners: the node (...)".
#
# What one host cannot show: a path between two leaves (that needs two switches), a real node's NIC.
# Environment: FLEET_DIAGNOSE_SIMULATE=1 (rehearse on CPUs: gloo ranks, nothing measured), PYTHON,
# FLEET_DIAGNOSE_BUDGET_S (default 240). Files in OUTDIR: fleet.json, STEP.plan.txt, STEP.pairs.jsonl,
# STEP.log (every agent's output), STEP-diagnosis.jsonl, STEP.txt (the verdicts).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/fleet_diagnose_check.sh OUTDIR [STEP ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac
shift
BUDGET=${FLEET_DIAGNOSE_BUDGET_S:-240}
SIMULATE=${FLEET_DIAGNOSE_SIMULATE:-}
ALLOW_CPU=$SIMULATE
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(healthy slow)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0

NAME=fleet_diagnose_check
. "$ROOT/scripts/device/common.sh"

PY=$(pick_python) || { log "no Python whose torch sees a GPU (tried \$PYTHON, .venv/bin/python, python3)"; exit 2; }
use_checkout "$PY"
export PYTHONPATH=$ROOT/selftests${PYTHONPATH:+:$PYTHONPATH}  # fleet_faults, for the slow step
GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
N=$GPUS
[ -n "$SIMULATE" ] && N=4
[ "$N" -gt 4 ] && N=4
if [ "$N" -lt 3 ]; then log "needs 3 GPUs at least (a suspect, 2 good partners), this host has $GPUS"; exit 2; fi
SUSPECT=n$((N - 1))
log "python $PY, $GPUS GPU(s): $N nodes n0..$SUSPECT, suspect $SUSPECT${SIMULATE:+ (FLEET_DIAGNOSE_SIMULATE: gloo on CPUs)}"

# A fleet report's data with the last node named slow by the pair schedule, the others passed.
"$PY" - "$OUT/fleet.json" "$N" "${SIMULATE:+1}" <<'EOF'
import json, sys
path, n, sim = sys.argv[1], int(sys.argv[2]), bool(sys.argv[3:] and sys.argv[3])
nodes = [{"node": f"n{k}", "ok": k < n - 1, "state": "PASS" if k < n - 1 else "slow in pairs", "path": f"n{k}.jsonl",
          "pairs": [{"check": "pair_node", "outcome": "pass" if k < n - 1 else "fail"}], "outliers": []} for k in range(n)]
json.dump({"directory": None, "simulated": sim, "named": {"slow_links": []}, "nodes": nodes}, open(path, "w"))
EOF
PAIRS=$("$PY" -c "
import json, sys
from wirecheck.fleet.diagnose_plan import make_plan
print(','.join(f'{a}~{b}' for a, b in make_plan(json.load(open('$OUT/fleet.json'))).pairs))")
log "pairs: $PAIRS"

# N agents of `wirecheck fleet multinode` on this host, one GPU each; $1: step name; $2: the suspect's extra option.
agents() {
  local name=$1 slow=$2 t port k pids=() rc=0 r extra
  t=$(allow 150)
  port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  rm -f "$OUT/$name.pairs.jsonl"
  : >"$OUT/$name.log"
  for k in $(seq 0 $((N - 1))); do
    extra=()
    [ "n$k" = "$SUSPECT" ] && [ -n "$slow" ] && extra=(--pair-worker "$slow")
    [ -n "$SIMULATE" ] && extra+=(--simulate)
    (
      export CUDA_VISIBLE_DEVICES=$k NCCL_HOSTID=n$k
      exec timeout "$t" "$PY" -m wirecheck.cli.main fleet multinode --nnodes "$N" --nproc-per-node 1 \
        --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "fleet-diagnose-$name" --join-timeout 60 -- \
        --thresholds "$ROOT/thresholds.yaml" --node-name "n$k" --pair-list "$PAIRS" \
        --wirecheck-json "$OUT/$name.pairs.jsonl" "${extra[@]}"
    ) >"$OUT/$name.agent$k.log" 2>&1 &
    pids+=($!)
  done
  for k in $(seq 0 $((N - 1))); do
    wait "${pids[$k]}"; r=$?
    [ $r -gt $rc ] && rc=$r
    { echo "===== agent n$k (CUDA_VISIBLE_DEVICES=$k)"; cat "$OUT/$name.agent$k.log"; } >>"$OUT/$name.log"
    rm -f "$OUT/$name.agent$k.log"
  done
  grep -hE "^(wirecheck multinode|#|  round)" "$OUT/$name.log" | cut -c1-200 | sed 's/^/  /'
  log "$name: agents exit $rc (0 pass, 1 a pair's verdict failed, 2 bad input, 10 simulation; 124 out of time)"
}

# $1: step; $2: the exit expected of fleet diagnose; $3: the suspect's pair worker (empty: the suite's).
diagnose_step() {
  local name=$1 want=$2 rc
  "$PY" -m wirecheck.cli.main fleet diagnose "$OUT/fleet.json" >"$OUT/$name.plan.txt" 2>&1
  agents "$name" "$3"
  "$PY" -m wirecheck.cli.main fleet diagnose "$OUT/fleet.json" --thresholds "$ROOT/thresholds.yaml" \
    --pairs-record "$OUT/$name.pairs.jsonl" --json "$OUT/$name-diagnosis.jsonl" >"$OUT/$name.txt" 2>&1
  rc=$?
  sed -n '/^pairs measured/,$p' "$OUT/$name.txt" | sed 's/^/  /'
  log "$name: wirecheck fleet diagnose exit $rc (want $want)"
  [ "$rc" = "$want" ]
}

step_healthy() { diagnose_step healthy 21 ""; }
step_slow() { diagnose_step slow 20 fleet_faults:slow_pair; }

run_steps healthy slow -- "${STEPS[@]}"
log "done: status $status (0: every step gave the exit it should)"
exit $status
