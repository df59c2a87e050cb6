#!/usr/bin/env bash
# Each GPU against its own history on a GPU node (1 GPU or more), one call (about 7 minutes on 1 H200):
#   nights  NIGHTS (default 4) runs of `wirecheck validate -m health` (acceptance) into one history folder,
#           each with --history on it: the first says "first run of serial ...", from the fourth on each
#           figure is held against the GPU's earlier runs and passes
#   slow    one more run with every GPU ~10 % slower in GEMM (bf16 and the sustained load) and HBM copy
#           (selftests/slow_gpu_worker.py with WIRECHECK_SLOW_GEMM and WIRECHECK_SLOW_HBM at 0.11: each product
#           and copy does 11 % more work than it is credited for, so the figures read 0.9 x):
#           tests/test_history.py must fail naming the GPU's serial, the figures and their history
#   run(command="bash scripts/device/history_check.sh", kind="nvidia-h200", timeout_s=600)
# $OUT: console.log, history.tgz (every record: night-N.jsonl, slow.jsonl, their logs). `wirecheck calibrate`
# over these records and the committed ones, and `wirecheck judge --thresholds site.yaml`, then run anywhere.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
OUT=${OUT:-$ROOT/.wirecheck/history-check}
WORK=$(mktemp -d /tmp/history-check.XXXXXX)
HIST=$WORK/history
NIGHTS=${NIGHTS:-4}
mkdir -p "$OUT" "$HIST"
exec > >(tee "$OUT/console.log") 2>&1
export PYTHONUNBUFFERED=1
NAME=history_check
BUDGET=${HISTORY_BUDGET_S:-570}
status=0
. "$ROOT/scripts/device/common.sh"

PY=$(pick_python) || { log "no Python whose torch sees a GPU"; exit 2; }
use_checkout "$PY"
export PYTHONPATH=$ROOT/selftests${PYTHONPATH:+:$PYTHONPATH}  # slow_gpu_worker
nvidia-smi --query-gpu=index,name,pci.bus_id,serial,uuid,clocks.max.sm --format=csv,noheader 2>&1 | sed 's/^/  /'
VALIDATE=("$PY" -m wirecheck.cli.main validate -p no:cacheprovider --node-lock="$WORK/node.lock" -m health -rfEs
          --history="$HIST")

history_lines() {  # the history verdicts of a record: outcome and message
  "$PY" - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "verdict" and r.get("check") == "history":
        print(f"  {r['outcome']:4} {r['message'][:600]}")
PY
}

night() {  # night N [slow]
  local n=$1 name=night-$1 rc t0=$SECONDS
  [ "${2:-}" = slow ] && name=slow
  fits 95 "$name" || return 1
  timeout -s INT "$(allow 150)" "${VALIDATE[@]}" --wirecheck-json="$HIST/$name.jsonl" > "$HIST/$name.log" 2>&1
  rc=$?
  log "$name: exit $rc, wall $((SECONDS - t0)) s; $(grep -E '^=+ .*(passed|failed)' "$HIST/$name.log" | tail -1)"
  history_lines "$HIST/$name.jsonl"
  return $rc
}

for n in $(seq 1 "$NIGHTS"); do
  night "$n" || status=1
done
cat > tests/conftest.py <<'PY'
import pytest


@pytest.fixture
def gpu_health_workers():
    return "slow_gpu_worker"  # every GPU ~10 % slower in GEMM and HBM copy (selftests/slow_gpu_worker.py)
PY
WIRECHECK_SLOW_GEMM=0.11 WIRECHECK_SLOW_HBM=0.11 night slow slow
rc=$?
rm -f tests/conftest.py
if [ $rc -eq 1 ] && grep -q '"check": "history", .*"outcome": "fail"' "$HIST/slow.jsonl"; then
  log "slow: the history check failed it, as it must"
else
  log "slow: expected exit 1 with failed history verdicts, got exit $rc"; status=1
fi
tar czf "$OUT/history.tgz" -C "$WORK" history
log "done: $([ $status -eq 0 ] && echo 'every step as expected' || echo 'some step did not')"
exit $status
