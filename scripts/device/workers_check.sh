#!/usr/bin/env bash
# On a GPU node (2 GPUs or more): workers that never flake.
#
#   bash scripts/device/workers_check.sh OUTDIR [STEP ...]     STEP: kill hang lock allhang suite
#                                                  (default: all five, in that order)
#
#   kill     a rank SIGKILLed mid all_reduce (1 GiB, NCCL) is reported within its deadline + 5 s with
#            rank 1's death as the root cause; then a fresh group on the same GPUs measures all_reduce
#            at 1 GiB correctly, and `pytest tests/test_collectives.py -k "nvswitch and all_reduce"` passes.
#   hang     a 1 MiB all_gather that rank 1 never joins is reported within its deadline (10 s) + 5 s with
#            both ranks' stacks; then a fresh group works.
#   lock     a second GPU run while another holds the node stops with exit 4 naming the holder; with
#            --wait-for-node it waits and runs when the holder lets go; a simulated run takes no lock.
#   allhang  the whole suite (collectives + strategies) on a node where every collective hangs (a
#            fixture override, as the self-tests do): every placement's hang named once, the rest
#            skipped, and the wall time.
#   suite    the whole suite (`pytest --profile h200-sxm-2`), its wall time and outcome, and a count of
#            port failures (EADDRINUSE / "failed to listen") in its output: must be 0.
#
# Environment: PROFILE (default
# h200-sxm-2), PYTHON (default .venv/bin/python, else python3: the first whose torch sees CUDA),
# WORKERS_BUDGET_S (default 560: a step that would not fit in what is left is skipped, with a line saying so).
# The environment is passed through untouched: NCCL_NVLS_ENABLE=0 and the other multicast switches reach
# every worker.
# Files in OUTDIR: <step>.log, *.jsonl records, logs/ (kept logs of the failed groups, on purpose).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/workers_check.sh OUTDIR [STEP ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
PROFILE=${PROFILE:-h200-sxm-2}
BUDGET=${WORKERS_BUDGET_S:-560}
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(kill hang lock allhang suite)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0

NAME=workers_check
. "$ROOT/scripts/device/common.sh"

PY=$(pick_python) || { log "no Python whose torch sees a GPU (tried \$PYTHON, .venv/bin/python, python3)"; exit 2; }
use_checkout "$PY"
for mod in deepspeed accelerate; do
  "$PY" -c "import $mod" 2>/dev/null || log "note: $mod is not importable: the strategy steps of 'allhang'/'suite' will fail"
done
log "python $PY: $("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))')"
log "environment: $(env | grep -E '^(NCCL_|TORCH_NCCL|TORCH_SYMM|NVSHMEM_)' | sort | tr '\n' ' ')"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | sed 's/^/  /'
LOCK=$OUT/node.lock  # the suite runs below take this lock, not the node's default one

run_step() {
  local step=$1 t0=$SECONDS rc
  case $step in
    kill)
      fits 90 kill || return 0
      "$PY" scripts/device/workers_check.py kill --logs "$OUT/logs" 2>&1 | tee "$OUT/kill.log"
      rc=${PIPESTATUS[0]}
      log "the next test on a fresh group:"
      "$PY" -m pytest tests/test_collectives.py -k "nvswitch and all_reduce" -p no:cacheprovider -q \
        --node-lock="$LOCK" --benchmark-disable --wirecheck-json="$OUT/kill-next.jsonl" 2>&1 | tee "$OUT/kill-next.log" | tail -5
      [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
      ;;
    hang)
      fits 60 hang || return 0
      "$PY" scripts/device/workers_check.py hang --logs "$OUT/logs" 2>&1 | tee "$OUT/hang.log"
      rc=${PIPESTATUS[0]}
      ;;
    lock)
      fits 60 lock || return 0
      rc=0
      "$PY" -c "
import sys, time
from wirecheck.workers.node_lock import NodeLock
NodeLock(sys.argv[1]).acquire(0, command=['workers_check.sh', 'lock', '(holder)'])
print('held', flush=True)
time.sleep(float(sys.argv[2]))" "$LOCK" 20 > "$OUT/holder.out" &
      holder=$!
      for _ in $(seq 50); do grep -q held "$OUT/holder.out" 2>/dev/null && break; sleep 0.2; done
      local t=$SECONDS
      "$PY" -m pytest tests/test_inventory.py -k gpus_visible -p no:cacheprovider -q --node-lock="$LOCK" \
        --wait-for-node=3s > "$OUT/lock-busy.log" 2>&1
      local busy_rc=$?
      log "busy run: exit $busy_rc after $((SECONDS - t)) s (expected 4): $(grep -o 'node busy:.*' "$OUT/lock-busy.log" | head -1)"
      [ "$busy_rc" -eq 4 ] && grep -q "pid $holder " "$OUT/lock-busy.log" || rc=1
      t=$SECONDS
      "$PY" -m pytest tests/test_inventory.py -k gpus_visible -p no:cacheprovider -q --node-lock="$LOCK" \
        --wait-for-node=60s > "$OUT/lock-wait.log" 2>&1
      local wait_rc=$?
      log "waiting run: exit $wait_rc after $((SECONDS - t)) s (expected 0, after the holder's 20 s): $(grep -o 'node busy:.*' "$OUT/lock-wait.log" | head -1)"
      [ "$wait_rc" -eq 0 ] || rc=1
      wait "$holder"
      "$PY" -c "
import sys, time
from wirecheck.workers.node_lock import NodeLock
NodeLock(sys.argv[1]).acquire(0); print('held', flush=True); time.sleep(30)" "$LOCK" > "$OUT/holder.out" &
      holder=$!
      for _ in $(seq 50); do grep -q held "$OUT/holder.out" 2>/dev/null && break; sleep 0.2; done
      t=$SECONDS
      "$PY" -m pytest tests/test_topology.py -k full_meshes --simulate=h200-sxm-2 -p no:cacheprovider -q \
        --node-lock="$LOCK" --wait-for-node=0 > "$OUT/lock-sim.log" 2>&1
      local sim_rc=$?
      log "simulated run while held: exit $sim_rc after $((SECONDS - t)) s (expected 0, no wait)"
      [ "$sim_rc" -eq 0 ] || rc=1
      kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
      ;;
    allhang)
      fits 150 allhang || return 0
      local proj=$OUT/allhang-project
      rm -rf "$proj"; mkdir -p "$proj"
      cp conftest.py thresholds.yaml "$proj/"
      cp -r tests "$proj/tests"
      printf '[pytest]\naddopts = --strict-markers\n' > "$proj/pytest.ini"
      cat > "$proj/tests/conftest.py" <<'EOF'
import pytest

@pytest.fixture
def collective_worker():
    return "faulty_workers:measure_hang_every_op"

@pytest.fixture
def strategy_worker():
    return "faulty_workers:train_hang"
EOF
      (cd "$proj" && PYTHONPATH=$ROOT/selftests${PYTHONPATH:+:$PYTHONPATH} "$PY" -m pytest -p no:cacheprovider \
        --profile "$PROFILE" --node-lock="$LOCK" --benchmark-disable -rfs \
        --wirecheck-json="$OUT/allhang.jsonl" > "$OUT/allhang.log" 2>&1)
      local t=$((SECONDS - t0))
      log "every-collective-hangs suite: $t s wall; $(tail -1 "$OUT/allhang.log")"
      grep -E "^FAILED" "$OUT/allhang.log" | sed 's/^/  /'
      grep -oE "did not finish within [0-9.]+s \([^;]*" "$OUT/allhang.log" | sort | uniq -c | sed 's/^/  /'
      grep -cE "hung earlier" "$OUT/allhang.log" | sed 's/^/  skipped as hung earlier: /'
      rc=0
      [ "$t" -le 600 ] || rc=1
      ;;
    suite)
      fits 330 suite || return 0
      "$PY" -m pytest --profile "$PROFILE" -p no:cacheprovider --node-lock="$LOCK" -rfE \
        --wirecheck-json="$OUT/suite.jsonl" > "$OUT/suite.log" 2>&1
      rc=$?
      local ports
      ports=$(grep -ciE "EADDRINUSE|address already in use|failed to listen" "$OUT/suite.log")
      log "whole suite: $((SECONDS - t0)) s wall, exit $rc; $(tail -1 "$OUT/suite.log"); port failures: $ports"
      grep -E "^(FAILED|ERROR)" "$OUT/suite.log" | sed 's/^/  /'
      [ "$ports" -eq 0 ] || rc=1
      ;;
    *) log "unknown step $step (kill hang lock allhang suite)"; return 2 ;;
  esac
  log "STEP $step: $([ "$rc" -eq 0 ] && echo PASS || echo "FAIL (exit $rc)") in $((SECONDS - t0)) s"
  [ "$rc" -eq 0 ] || status=1
}

for step in "${STEPS[@]}"; do
  run_step "$step"
done
log "done: $([ $status -eq 0 ] && echo 'all steps passed' || echo 'some step failed') (logs in $OUT)"
exit $status
