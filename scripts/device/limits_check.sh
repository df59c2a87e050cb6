#!/usr/bin/env bash
# The GPU limits on a GPU node: clean runs of the GPU checks, then the same checks with every GPU made slower
# by a known share in its workers (selftests/slow_gpu_worker.py: extra work the figure is not credited for;
# clocks and power are never touched): 10 % in GEMM, 10 % in HBM copy (11 % more work: the figures read
# 0.90 x), and half its work in both. Every run passes --history OUTDIR, so from the fourth clean run on each
# figure is held against the GPU's own earlier runs, and the slowed runs meet that history too.
#
#   bash scripts/device/limits_check.sh OUTDIR [CLEAN_RUNS] [all|figures]      (default: 6 all)
#
# `all` runs every GPU check (the sustained minute and the memory test too: ~77 s a run on a 1x H200 node);
# `figures` only the HBM and GEMM figures and the history (~17 s a run).
#
# Every run's record lands in OUTDIR (clean-N.jsonl, gemm10.jsonl, hbm10.jsonl, half.jsonl, each with its
# .log) and is packed into OUTDIR/limits.tar.gz. Judge them again anywhere, without GPUs:
#   wirecheck judge OUTDIR/clean-*.jsonl --thresholds site.yaml
# The environment is passed through untouched (NCCL_NVLS_ENABLE=0 and the rest reach every worker).
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bash scripts/device/limits_check.sh OUTDIR [CLEAN_RUNS] [all|figures]" >&2; exit 4; }
OUTDIR=$1
CLEAN=${2:-6}
case ${3:-all} in
  all) select=(); per_run=80 ;;
  figures) select=(-k "hbm_bandwidth or gemm_throughput or history"); per_run=25 ;;
  *) echo "limits_check.sh: the third argument is all or figures, not ${3}" >&2; exit 4 ;;
esac
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)
export PYTHONUNBUFFERED=1
BUDGET=${LIMITS_BUDGET_S:-580}
NAME=limits_check
. "$ROOT/scripts/device/common.sh"
PY=$(pick_python) || { log "no Python whose torch sees a GPU"; exit 2; }
use_checkout "$PY"
export PYTHONPATH=$ROOT/selftests${PYTHONPATH:+:$PYTHONPATH}
history=(--history "$OUTDIR")

one() {  # one NAME [pytest args]: a run of the GPU checks, its exit code and figures in the summary
  local name=$1; shift
  local start=$SECONDS
  "$PY" -m pytest tests -m health -p no:cacheprovider -q "${history[@]}" --wirecheck-json "$OUTDIR/$name.jsonl" "$@" \
    >"$OUTDIR/$name.log" 2>&1
  log "$name: exit $? in $((SECONDS - start)) s; $(grep -E '^wirecheck: record' "$OUTDIR/$name.log" | tail -1)"
}

for i in $(seq 1 "$CLEAN"); do
  fits "$per_run" "clean run $i" && one "clean-$i" "${select[@]}"
done

# A conftest beside the tests swaps the GPU load's workers for the slowed ones (the fixture the self-tests swap).
cat >"$ROOT/tests/conftest.py" <<'EOF'
import pytest


@pytest.fixture
def gpu_health_workers() -> str:
    return "slow_gpu_worker"
EOF
trap 'rm -f "$ROOT/tests/conftest.py"' EXIT
fits 30 "GEMM 10 % slower" && WIRECHECK_SLOW_GEMM=0.11 one gemm10 -k "gemm_throughput or history"
fits 30 "HBM copy 10 % slower" && WIRECHECK_SLOW_HBM=0.11 one hbm10 -k "hbm_bandwidth or history"
fits 30 "half the work" && WIRECHECK_SLOW_GEMM=1.0 WIRECHECK_SLOW_HBM=1.0 one half -k "hbm_bandwidth or gemm_throughput"
(cd "$OUTDIR" && tar czf limits.tar.gz ./*.jsonl ./*.log)
log "records in $OUTDIR/limits.tar.gz"
