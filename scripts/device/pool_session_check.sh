#!/usr/bin/env bash
# On a GPU node: the worker pool in the library (wirecheck.workers.pool) and the plugin's one session object
# give the same checks, figures and times as the tree before them (BEFORE, default .before: e.g.
# `git archive e9b7c0d | tar -x -C .before`), and the burn-in and diagnose run on the pool.
# About 8 minutes on a 1x H200 node (quick ~1 min, health ~3 min, burn ~2.5 min, diagnose ~1.5 min).
#   bash scripts/device/pool_session_check.sh OUTDIR [STEP ...]    STEP: quick health burn diagnose (default: all)
#
#   quick     same_checks.sh --level quick: before and after, every test's outcome and figure side by side
#   health    same_checks.sh -m health: the GPU load's phases on the pool (figures, wall times)
#   burn      burn_in_check.sh burn with BURN_DURATION (default 2min): the rounds on the pool started over the
#             burn-in's GPUs, its steps on the pool's sub-groups
#   diagnose  diagnose_check.sh: the GPU probe's load on diagnose's own pool (or, on one GPU, its own group)
# OUTDIR/<step>/ gets what each script writes; OUTDIR/summary.log their lines. POOL_CHECK_ARGS: more
# arguments for the quick and health validate runs (e.g. --simulate=h200-sxm-2 with ALLOW_CPU=1 for a
# rehearsal on a CPU machine). The environment is passed through untouched (NCCL_NVLS_ENABLE=0 and the rest).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/pool_session_check.sh OUTDIR [STEP ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(quick health burn diagnose)
BUDGET=${POOL_CHECK_BUDGET_S:-600}
NAME=pool_session_check
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0
. "$ROOT/scripts/device/common.sh"
exec > >(tee "$OUT/summary.log") 2>&1
read -r -a EXTRA <<< "${POOL_CHECK_ARGS:-}"

step_quick() {
  SAME_BUDGET_S=$(allow 150) bash "$ROOT/scripts/device/same_checks.sh" "$OUT/quick" --level quick "${EXTRA[@]}" || return 1
  tail -3 "$OUT/quick/compare.txt"
}

step_health() {
  SAME_BUDGET_S=$(allow 260) bash "$ROOT/scripts/device/same_checks.sh" "$OUT/health" -m health "${EXTRA[@]}" || return 1
  tail -3 "$OUT/health/compare.txt"
}

step_burn() {
  BURN_DURATION=${BURN_DURATION:-2min} BURN_BUDGET_S=$(allow 200) bash "$ROOT/scripts/device/burn_in_check.sh" "$OUT/burn" burn
}

step_diagnose() {
  DIAGNOSE_BUDGET_S=$(allow 150) bash "$ROOT/scripts/device/diagnose_check.sh" "$OUT/diagnose"
}

run_steps quick health burn diagnose -- "${STEPS[@]}" || exit $?
log "done: status $status"
exit $status
