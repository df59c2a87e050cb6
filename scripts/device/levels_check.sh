#!/usr/bin/env bash
# The levels, the GPU health checks and the failure screen on a 1-GPU node (about 7 minutes on 1 H200):
#   bash scripts/device/levels_check.sh OUTDIR [STEP ...]     (from the repository root, .whl/ and .before/ beside it)
#   fresh    the README's quick start from a fresh copy, offline with the carried wheels: install.sh, then
#            `wirecheck validate` (acceptance: every check this node can run, the GPU health checks and one
#            GPU alone training included); its record is acceptance.jsonl
#   quick    `wirecheck validate --level quick` on the installed copy: its checks and wall time
#   foreign  a run while another process computes on GPU 0 (gpu_health_check.sh's foreign step): the
#            failure blocks name it
#   same     the checks and figures of the tree before the restructuring beside today's (same_checks.sh)
# Everything lands in OUTDIR as one tarball per step plus console.log. The environment is passed through.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/levels_check.sh OUTDIR [STEP ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
WORK=$(mktemp -d /tmp/levels-check.XXXXXX)
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(fresh quick foreign same)
mkdir -p "$OUT"
exec > >(tee "$OUT/console.log") 2>&1
export PYTHONUNBUFFERED=1
NAME=levels_check
BUDGET=${LEVELS_BUDGET_S:-560}
status=0
. "$ROOT/scripts/device/common.sh"

step_fresh() {
  fits 200 fresh || return 0
  mkdir -p "$WORK/fresh"
  timeout -s INT "$(allow 300)" bash scripts/device/fresh_install.sh --full --wirecheck-json "$WORK/fresh/acceptance.jsonl" \
    -v -rfEs > "$WORK/fresh/fresh.log" 2>&1
  local rc=$?
  grep -E "^== |passed|failed|wirecheck validate:|SIMULATION" "$WORK/fresh/fresh.log" | tail -12
  sed -n '/strategy dial/,/^$/p;/GPU figures/,/memory pattern test/p' "$WORK/fresh/fresh.log" | head -60
  tar czf "$OUT/fresh.tgz" -C "$WORK" fresh
  [ "$rc" -eq 0 ]
}

step_quick() {
  fits 60 quick || return 0
  local venv py t0=$SECONDS rc
  venv=$(newest_fresh_venv)
  py=${venv:+$venv/bin/wirecheck}
  [ -n "$py" ] || { log "quick: no fresh install to run from (run the fresh step first)"; return 1; }
  mkdir -p "$WORK/quick"
  (cd "$(dirname "$venv")" && timeout -s INT "$(allow 120)" "$py" validate --level quick -rfEs \
     --wirecheck-json "$WORK/quick/quick.jsonl" > "$WORK/quick/quick.log" 2>&1)
  rc=$?
  log "wirecheck validate --level quick: exit $rc, wall $((SECONDS - t0)) s"
  grep -E "level|passed|failed|wirecheck validate:" "$WORK/quick/quick.log" | tail -6
  tar czf "$OUT/quick.tgz" -C "$WORK" quick
  [ "$rc" -eq 0 ]
}

step_foreign() {
  fits 90 foreign || return 0
  HEALTH_BUDGET_S=$(allow 150) bash scripts/device/gpu_health_check.sh "$WORK/foreign" foreign > "$WORK/foreign.console" 2>&1
  local rc=$?
  mkdir -p "$WORK/foreign"; mv "$WORK/foreign.console" "$WORK/foreign/console.log"
  tail -6 "$WORK/foreign/console.log"
  # the failure blocks as an operator reads them
  sed -n '/FAILURES/,/short test summary/p' "$WORK/foreign/foreign.log" | head -60
  tar czf "$OUT/foreign.tgz" -C "$WORK" foreign
  [ "$rc" -eq 0 ]
}

step_same() {
  fits 110 same || return 0
  SAME_BUDGET_S=$(allow 200) bash scripts/device/same_checks.sh "$WORK/same" > "$WORK/same.console" 2>&1
  local rc=$?
  mkdir -p "$WORK/same"; mv "$WORK/same.console" "$WORK/same/console.log"
  grep -E "before:|after:|tests in both|^only" "$WORK/same/console.log"
  tar czf "$OUT/same.tgz" -C "$WORK" same
  [ "$rc" -eq 0 ]
}

run_steps fresh quick foreign same -- "${STEPS[@]}" || exit 2
log "done: $([ $status -eq 0 ] && echo 'every step passed' || echo 'some step failed')"
exit $status
