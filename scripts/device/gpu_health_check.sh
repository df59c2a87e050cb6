#!/usr/bin/env bash
# The GPU health checks on a GPU node (1 GPU or more): every GPU under load, and one GPU alone training. About 4 minutes on
# 1 H200 before the training step (one model build and up to 33 steps) was added.
#
#   bash scripts/device/gpu_health_check.sh OUTDIR [STEP ...]     STEP: plain suite training foreign (default: all, in order)
#
#   plain    a plain torch loop of the operations the checks time (4 GiB device copy and sum, bf16 GEMM
#            8192, fp8 e4m3 where the GPU has it), one event pair around each loop: the figures to compare with
#   suite    `wirecheck validate -m health -v`: the per-GPU figures beside the plain loop's (target >= 0.97 x),
#            the sustained-load table second by second (TFLOP/s, SM and memory clock, power, temperature,
#            utilization, clock-event reasons), NVML's throttle time, the memory test's coverage and wall time,
#            the wall time of each phase and of the whole run (what the health checks add to `wirecheck validate`)
#   training `wirecheck validate -k single_gpu`: one GPU alone trains the strategies' model (the dial's
#            baseline): tokens/s, MFU, timed steps, peak memory, against training.single_gpu_throughput_floors
#   foreign  the same figures (and the inventory's foreign-process check) while another process runs a bf16
#            GEMM loop on GPU 0: the run must fail naming that process (its pid) in both
#
# Environment: PYTHON (default
# .venv/bin/python, else python3: the first whose torch sees CUDA), HEALTH_BUDGET_S (default 530: a step
# that would not fit in what is left is skipped, saying so). The environment is passed through untouched.
# Files in OUTDIR: plain.json/.log, health.jsonl/.log, compare.log, training.jsonl/.log, foreign.jsonl/.log, busy.log.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/gpu_health_check.sh OUTDIR [STEP ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
BUDGET=${HEALTH_BUDGET_S:-530}
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(plain suite training foreign)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0

NAME=gpu_health_check
. "$ROOT/scripts/device/common.sh"

PY=$(pick_python) || { log "no Python whose torch sees a GPU (tried \$PYTHON, .venv/bin/python, python3)"; exit 2; }
use_checkout "$PY"
log "python $PY: $("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)')"
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,power.limit,temperature.gpu,clocks.max.sm \
  --format=csv,noheader 2>&1 | sed 's/^/  /' | tee "$OUT/gpus.txt"
LOCK=$OUT/node.lock  # the suite runs below take this lock, not the node's default one
VALIDATE=("$PY" -m wirecheck.cli.main validate -p no:cacheprovider --node-lock="$LOCK")

step_plain() {
  fits 60 plain || return 0
  CUDA_DEVICE_ORDER=PCI_BUS_ID "$PY" scripts/device/gpu_health_probe.py plain "$OUT/plain.json" 2>&1 | tee "$OUT/plain.log"
  return "${PIPESTATUS[0]}"
}

step_suite() {
  fits 150 suite || return 0
  local t0=$SECONDS rc
  timeout -s INT "$(allow 300)" "${VALIDATE[@]}" -m health -v -rfEs --wirecheck-json="$OUT/health.jsonl" \
    > "$OUT/health.log" 2>&1
  rc=$?
  local wall=$((SECONDS - t0))
  sed -n '/wirecheck measurements/,/every measurement and verdict/p' "$OUT/health.log"
  grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/health.log" | tail -20
  log "wirecheck validate -m health: exit $rc, wall ${wall} s (what the health checks add, pytest's start included)"
  "$PY" scripts/device/gpu_health_probe.py compare "$OUT/plain.json" "$OUT/health.jsonl" 2>&1 | tee "$OUT/compare.log"
  local cmp=${PIPESTATUS[0]}
  [ "$cmp" -eq 0 ] || log "a figure of the suite is below 0.97 x the plain loop's (see above)"
  [ "$rc" -eq 0 ] && [ "$cmp" -eq 0 ]
}

step_training() {
  fits 90 training || return 0
  local t0=$SECONDS rc
  timeout -s INT "$(allow 240)" "${VALIDATE[@]}" -k single_gpu -rfEs --wirecheck-json="$OUT/training.jsonl" \
    > "$OUT/training.log" 2>&1
  rc=$?
  grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/training.log" | tail -5
  "$PY" - "$OUT/training.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") == "single_gpu_training":
        d = r["details"]
        r0 = (d.get("ranks") or [{}])[0]
        print(f"  one GPU alone on {r['placement']} ({r0.get('device_name')}): {r0.get('tokens_per_s', 0):,.0f} tokens/s, "
              f"MFU {d['figures'].get('mfu')}, micro-batch {r0.get('micro_batch')} x {r0.get('shape', {}).get('seq_len')}, "
              f"{r0.get('timed_steps')} timed steps ({r0.get('stop_reason')}, +-{r0.get('step_time_ci_halfwidth')}), "
              f"median step {r0.get('step_time_median_s')} s, peak {r0.get('peak_allocated_bytes')} B, phases {r0.get('phase_s')}"
              + (f"; error {d['error']}" if d.get("error") else ""))
    elif r.get("check") == "single_gpu_training":
        print(f"  verdict {r['outcome']}: {r['message']}")
PY
  log "wirecheck validate -k single_gpu: exit $rc, wall $((SECONDS - t0)) s"
  [ "$rc" -eq 0 ]
}

step_foreign() {
  fits 90 foreign || return 0
  "$PY" scripts/device/gpu_health_probe.py busy 240 > "$OUT/busy.log" 2>&1 &
  local busy=$! rc
  for _ in $(seq 120); do grep -q "busy: started" "$OUT/busy.log" 2>/dev/null && break; sleep 0.5; done
  log "a foreign process computes on GPU 0: pid $busy ($(head -1 "$OUT/busy.log"))"
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader > "$OUT/apps.txt" 2>&1
  sed 's/^/  nvidia-smi: /' "$OUT/apps.txt"
  timeout -s INT "$(allow 200)" "${VALIDATE[@]}" -k "no_foreign_processes or hbm_bandwidth or gemm_throughput" \
    -rfE --wirecheck-json="$OUT/foreign.jsonl" > "$OUT/foreign.log" 2>&1
  rc=$?
  kill "$busy" 2>/dev/null; wait "$busy" 2>/dev/null
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/foreign.log" | tail -12
  grep -oE "(is in use by|while other processes computed on the GPU)[^:]*" "$OUT/foreign.log" | sort | uniq -c | sed 's/^/  /'
  # NVML may see the process under another pid (a container's PID namespace): any pid it listed counts
  local pids named_inventory=0 named_health=0 p
  pids=$(printf '%s\n' "$busy" $(cut -d, -f1 "$OUT/apps.txt" 2>/dev/null) | sort -u)
  for p in $pids; do
    named_inventory=$((named_inventory + $(grep -cE "GPU0 is in use by .*\b$p\b" "$OUT/foreign.log")))
    named_health=$((named_health + $(grep -c "pid $p\b" "$OUT/foreign.log")))
  done
  log "foreign-process run: exit $rc (expected 1); pid(s) $(echo $pids) named by the inventory check: $named_inventory line(s), by the GPU figures: $named_health line(s)"
  [ "$rc" -eq 1 ] && [ "$named_inventory" -gt 0 ] && [ "$named_health" -gt 0 ]
}

run_steps plain suite training foreign -- "${STEPS[@]}" || exit 2
log "done: $([ $status -eq 0 ] && echo 'every step passed' || echo 'some step failed') (files in $OUT)"
exit $status
