#!/usr/bin/env bash
# `wirecheck diagnose --run` on a GPU node: a run of the GEMM check with every GPU doing twice its work in
# its workers (selftests/slow_gpu_worker.py, WIRECHECK_SLOW_GEMM=1.0), diagnosed with the slowdown still on
# (the GPU is named, slow alone) and with it gone (not reproduced); a clean run (nothing to localize); and
# that clean run's record with a host copy failure added (the copy probe runs: alone, then behind the switch).
#
#   bash scripts/device/diagnose_check.sh OUTDIR
#
# Records, diagnosis records and logs land in OUTDIR, packed into OUTDIR/diagnose.tar.gz.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bash scripts/device/diagnose_check.sh OUTDIR" >&2; exit 2; }
OUTDIR=$1
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)
export PYTHONUNBUFFERED=1
BUDGET=${DIAGNOSE_BUDGET_S:-560}
NAME=diagnose_check
. "$ROOT/scripts/device/common.sh"
PY=$(pick_python) || { log "no Python whose torch sees a GPU"; exit 2; }
use_checkout "$PY"
export PYTHONPATH=$ROOT/selftests:$ROOT${PYTHONPATH:+:$PYTHONPATH}

validate() {  # validate NAME [pytest args]
  local name=$1; shift
  local start=$SECONDS
  "$PY" -m pytest tests -m health -p no:cacheprovider -q --wirecheck-json "$OUTDIR/$name.jsonl" "$@" \
    >"$OUTDIR/$name.log" 2>&1
  log "$name: validate exit $? in $((SECONDS - start)) s"
}

diagnose() {  # diagnose NAME RECORD [options]
  local name=$1 record=$2; shift 2
  local start=$SECONDS
  "$PY" -m wirecheck.cli.main diagnose "$record" --run --json "$OUTDIR/$name.jsonl" "$@" >"$OUTDIR/$name.log" 2>&1
  local code=$?
  log "$name: diagnose exit $code in $((SECONDS - start)) s; $(tail -1 "$OUTDIR/$name.log")"
}

cat >"$ROOT/tests/conftest.py" <<'PYEOF'
import pytest


@pytest.fixture
def gpu_health_workers() -> str:
    return "slow_gpu_worker"
PYEOF
trap 'rm -f "$ROOT/tests/conftest.py"' EXIT
fits 60 "slowed GEMM run" && WIRECHECK_SLOW_GEMM=1.0 validate slowed -k gemm_throughput
fits 60 "clean GEMM run" && validate clean -k gemm_throughput
fits 40 "diagnose, slowdown on" && WIRECHECK_SLOW_GEMM=1.0 diagnose diag-slowed "$OUTDIR/slowed.jsonl" --gpu-workers slow_gpu_worker
fits 40 "diagnose, slowdown gone" && diagnose diag-gone "$OUTDIR/slowed.jsonl" --gpu-workers slow_gpu_worker
fits 20 "diagnose, clean" && diagnose diag-clean "$OUTDIR/clean.jsonl"
# The clean record with one failed host copy verdict on GPU0 added (written through the record writer).
"$PY" - "$OUTDIR/clean.jsonl" "$OUTDIR/copy.jsonl" <<'PYEOF'
import sys
from wirecheck.core.verdict import FAIL, Verdict
from wirecheck.records.file import read_run
from wirecheck.records.run import COMPLETE, RunWriter
run = read_run(sys.argv[1])
w = RunWriter(sys.argv[2])
w.header({k: v for k, v in run.run.items() if k not in ("type", "schema", "host", "started")})
w.verdict(Verdict("host_copy", "host->device copy bandwidth", "GPU0", FAIL, "host->device copy bandwidth on GPU0: "
                  "measured 1 GB/s < floor 40 GB/s (added by diagnose_check.sh)", measured=1.0, unit="GB/s",
                  limit={"min": 40.0}, inputs={"gpu": 0, "direction": "h2d"}), "added")
w.end(COMPLETE, 1)
PYEOF
fits 30 "diagnose, host copy" && diagnose diag-copy "$OUTDIR/copy.jsonl"
for f in "$OUTDIR"/diag-*.log; do echo "== $f"; cat "$f"; done
(cd "$OUTDIR" && tar czf diagnose.tar.gz ./*.jsonl ./*.log)
log "records in $OUTDIR/diagnose.tar.gz"
