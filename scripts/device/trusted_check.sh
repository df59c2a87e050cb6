#!/usr/bin/env bash
# The prolog's trusted path and the quick level's settings on a GPU node (about 3 minutes on a 1x H200 node):
#   bash scripts/device/trusted_check.sh OUTDIR [STEP ...]      (from the repository root; default: every step)
#   pass      `wirecheck validate --level quick`: the pass to trust (records/pass.jsonl); its wall time, its GEMM
#             figures (200 products after 200 of load) and the node snapshot its end line keeps
#   trusted   `validate --level quick --trust-recent`: must exit 0 without running pytest, naming records/pass.jsonl,
#             in about a second; what it checked; no record written
#   foreign   the same while a python process holds a CUDA context on GPU 0: must NOT be trusted ("has a compute
#             process now: pid N"), and the quick run that follows fails naming the process (exit 1)
#   slowgemm  quick with WIRECHECK_SLOW_GEMM=0.5 (selftests/slow_gpu_worker.py: every product does 1.5 x the work,
#             the figure reads 0.67 x): test_gemm_throughput must fail against its floor
#   slowhbm   quick with WIRECHECK_SLOW_HBM=0.5: test_hbm_bandwidth[copy] must fail
#   half      quick with both at 1.0 (a GPU doing half its work): GEMM and HBM copy fail
#   wrong     quick with selftests/faulty_gpu_worker.py on GPU 0 (one bit of one element wrong): test_gemm_matches_reference fails
# Files in OUTDIR: console.log, each step's .log and records/*.jsonl. The environment is passed through untouched.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/trusted_check.sh OUTDIR [STEP ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac
shift
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(pass trusted foreign slowgemm slowhbm half wrong)
REC=$OUT/records
mkdir -p "$REC"
exec > >(tee "$OUT/console.log") 2>&1
export PYTHONUNBUFFERED=1
NAME=trusted_check
BUDGET=${TRUSTED_BUDGET_S:-560}
status=0
. "$ROOT/scripts/device/common.sh"

PY=$(pick_python) || { log "no Python whose torch sees a GPU (tried \$PYTHON, .venv/bin/python, python3)"; exit 2; }
use_checkout "$PY"
export PYTHONPATH=$ROOT/selftests${PYTHONPATH:+:$PYTHONPATH}  # slow_gpu_worker, faulty_gpu_worker
VALIDATE=("$PY" -m wirecheck.cli.main validate -p no:cacheprovider --node-lock="$OUT/node.lock")
nvidia-smi --query-gpu=index,name,serial,driver_version --format=csv,noheader 2>&1 | sed 's/^/  /'

quick() {  # quick NAME [validate args]: one run, its exit code and wall time; returns the exit code
  local name=$1 t0 rc; shift
  t0=$(date +%s.%N)
  timeout -s INT "$(allow 150)" "${VALIDATE[@]}" --level quick -rf --wirecheck-json "$REC/$name.jsonl" "$@" \
    >"$OUT/$name.log" 2>&1
  rc=$?
  log "$name: exit $rc in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"
  grep -E "^FAILED|trusted|not trusting|  - |checked since|not checked|wirecheck validate: .*exit" "$OUT/$name.log" | tail -12
  return "$rc"
}

with_workers() {  # with_workers MODULE: the suite's GPU load uses MODULE's worker functions (a conftest beside the tests)
  printf 'import pytest\n\n\n@pytest.fixture\ndef gpu_health_workers() -> str:\n    return "%s"\n' "$1" >"$ROOT/tests/conftest.py"
}
trap 'rm -f "$ROOT/tests/conftest.py"; [ -n "${HOLDER:-}" ] && kill "$HOLDER" 2>/dev/null' EXIT

step_pass() {
  fits 60 pass || return 0
  quick pass; local rc=$?
  "$PY" - "$REC/pass.jsonl" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for m in (l for l in lines if l.get("type") == "measurement" and l.get("kind") == "gpu_figures"):
    print("  figures:", json.dumps(m.get("details", m))[:400])
end = lines[-1]
snap = end.get("node_snapshot") or {}
print("  end line: status", end.get("status"), "exit", end.get("exit_status"), "wall", end.get("wall_s"), "s")
print("  snapshot:", {k: snap.get(k) for k in ("taken_at", "wirecheck", "driver")}, len(snap.get("gpus") or []), "GPU(s)",
      snap.get("unreadable", ""))
for g in snap.get("gpus") or []:
    print("   ", {k: g.get(k) for k in ("index", "serial", "uuid", "ecc_volatile_uncorrected", "ecc_aggregate_uncorrected",
                                         "remapped_rows", "processes")}, len(g.get("links_up") or []), "links up")
EOF
  [ "$rc" -eq 0 ]
}

step_trusted() {
  fits 20 trusted || return 0
  quick trusted --trust-recent; local rc=$?
  grep -q "trusted the quick pass of $REC/pass.jsonl" "$OUT/trusted.log" || { log "trusted: the pass was not trusted"; return 1; }
  [ ! -e "$REC/trusted.jsonl" ] || { log "trusted: a record was written: pytest ran"; return 1; }
  [ "$rc" -eq 0 ]
}

step_foreign() {
  fits 70 foreign || return 0
  "$PY" -c "import time, torch; x = torch.ones(1, device='cuda:0'); print('holding', flush=True); time.sleep(300)" \
    >"$OUT/holder.log" 2>&1 &
  HOLDER=$!
  for _ in $(seq 120); do grep -q holding "$OUT/holder.log" 2>/dev/null && break; sleep 0.5; done
  log "a python process (pid $HOLDER) holds a CUDA context on GPU 0: $(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader | tr '\n' ' ')"
  quick foreign --trust-recent; local rc=$?
  kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null; HOLDER=
  grep -q "not trusting the latest pass" "$OUT/foreign.log" && grep -q "has a compute process now" "$OUT/foreign.log" \
    || { log "foreign: the pass was trusted beside a foreign process"; return 1; }
  [ "$rc" -eq 1 ]  # the quick run itself then fails on the foreign process
}

expect_fail() {  # expect_fail NAME TEST...: the run failed, and each TEST among its failures
  local name=$1 rc=$2 t; shift 2
  [ "$rc" -eq 1 ] || { log "$name: exit $rc, expected 1 (a failed check)"; return 1; }
  for t in "$@"; do grep -q "^FAILED .*$t" "$OUT/$name.log" || { log "$name: $t did not fail"; return 1; }; done
}

step_slowgemm() {
  fits 50 slowgemm || return 0
  with_workers slow_gpu_worker
  WIRECHECK_SLOW_GEMM=0.5 quick slowgemm; expect_fail slowgemm $? "test_gemm_throughput\[gpu0-bf16\]"
}

step_slowhbm() {
  fits 50 slowhbm || return 0
  with_workers slow_gpu_worker
  WIRECHECK_SLOW_HBM=0.5 quick slowhbm; expect_fail slowhbm $? "test_hbm_bandwidth\[gpu0-copy\]"
}

step_half() {
  fits 50 half || return 0
  with_workers slow_gpu_worker
  WIRECHECK_SLOW_GEMM=1.0 WIRECHECK_SLOW_HBM=1.0 quick half
  expect_fail half $? "test_gemm_throughput\[gpu0-bf16\]" "test_hbm_bandwidth\[gpu0-copy\]"
}

step_wrong() {
  fits 50 wrong || return 0
  with_workers faulty_gpu_worker
  WIRECHECK_WRONG_RANK=0 quick wrong; expect_fail wrong $? "test_gemm_matches_reference\[gpu0\]"
}

run_steps pass trusted foreign slowgemm slowhbm half wrong -- "${STEPS[@]}" || exit 2
rm -f "$ROOT/tests/conftest.py"
log "done: $([ $status -eq 0 ] && echo 'every step passed' || echo 'some step failed')"
exit $status
