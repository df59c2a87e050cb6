#!/usr/bin/env bash
# The 1x H200 node's levels timed three times each, with their verdicts and figures and the spread of each, beside
# the last committed runs of the same script (fixtures/reference/h200-1/level-times-2026-12-02-after) and beside
# what `wirecheck plan` predicts for each record:
#   bash scripts/device/one_gpu_times.sh OUTDIR [N]        (N repeats of each level, default 3)
# About 6 minutes on a 1x H200 node with N=3: the fresh install (35-50 s), quick 3 x ~13 s, acceptance 3 x ~80 s.
# Steps: scripts/device/level_times.sh OUTDIR N (quick, then acceptance; times.tsv, records.tgz, console.log),
# then scripts/device/level_spread.py OUTDIR (walls, outcomes, figures and where the time went, with their
# spread), then scripts/device/same_verdicts.py BEFORE OUTDIR (every test's outcome in every run; each figure's
# median before and after), then `wirecheck plan --record` on each record (predicted beside measured).
# The environment is passed through unchanged (NCCL_NVLS_ENABLE=0 and the rest reach every worker).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
. "$ROOT/scripts/device/common.sh"
outdir "bash scripts/device/one_gpu_times.sh OUTDIR [N]" "${1:-}"
REPEATS=${2:-3}
BEFORE=$ROOT/fixtures/reference/h200-1/level-times-2026-12-02-after

bash "$ROOT/scripts/device/level_times.sh" "$OUT" "$REPEATS" quick acceptance
status=$?
{
  echo "== the runs, each level's spread (min / median / max, spread of the median)"
  python3 "$ROOT/scripts/device/level_spread.py" "$OUT" || status=1
  echo "== before: $BEFORE (2026-12-02, without spare workers), its spread"
  python3 "$ROOT/scripts/device/level_spread.py" "$BEFORE"
  echo "== before beside after: every test's outcome in every run, each figure's median"
  python3 "$ROOT/scripts/device/same_verdicts.py" "$BEFORE" "$OUT" || status=1
  echo "== wirecheck plan --record: the time model's prediction beside each record's own seconds"
  venv=$(newest_fresh_venv)
  mkdir -p "$OUT/records" && tar xzf "$OUT/records.tgz" -C "$OUT/records"
  if [ -n "$venv" ]; then
    "$venv/bin/wirecheck" plan --record "$OUT"/records/runs/*.jsonl || status=1
  else
    echo "no fresh install left to run wirecheck plan with"; status=1
  fi
} 2>&1 | tee "$OUT/spread.log"
exit $status
