#!/usr/bin/env bash
# The closing checks on a 1-GPU node (about 4 minutes on 1 H200):
#   bash scripts/device/final_check.sh OUTDIR [STEP ...]     (from the repository root, .whl/ beside it)
#   fresh    the README's quick start from a fresh copy, offline with the carried wheels: install.sh, then
#            `wirecheck validate` (acceptance); its record is acceptance.jsonl
#   quick    `wirecheck validate --level quick` on that install: its checks and wall time
#   sigterm  the multi-node job on this node's GPU under real NCCL (`wirecheck fleet multinode`, one node,
#            one rank; the test-only slow collective worker keeps it measuring), sent SIGTERM as Slurm's time
#            limit does: the launcher's exit code and the record's end line
# Everything lands in OUTDIR as one tarball per step plus console.log (fresh and quick: levels_check.sh's, in
# OUTDIR/levels and OUTDIR/levels-quick). The environment is passed through.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/final_check.sh OUTDIR [STEP ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
WORK=$(mktemp -d /tmp/final-check.XXXXXX)
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(fresh quick sigterm)
mkdir -p "$OUT"
exec > >(tee "$OUT/console.log") 2>&1
export PYTHONUNBUFFERED=1
NAME=final_check
BUDGET=${FINAL_BUDGET_S:-560}
status=0
. "$ROOT/scripts/device/common.sh"

# fresh and quick are levels_check.sh's own steps (its records land in OUTDIR/levels)
step_fresh() { fits 200 fresh || return 0; LEVELS_BUDGET_S=$(allow 330) bash scripts/device/levels_check.sh "$OUT/levels" fresh; }
step_quick() { fits 60 quick || return 0; LEVELS_BUDGET_S=$(allow 130) bash scripts/device/levels_check.sh "$OUT/levels-quick" quick; }

step_sigterm() {
  fits 60 sigterm || return 0
  local venv rc record="$WORK/sigterm/network.jsonl" pid waited=0
  venv=$(newest_fresh_venv)
  [ -n "$venv" ] || { log "sigterm: no fresh install to run from (run the fresh step first)"; return 1; }
  mkdir -p "$WORK/sigterm"
  # fleet_faults (selftests/) delays each collective by 0.3 s, so the job is still measuring at the signal
  (cd "$(dirname "$venv")" && PYTHONPATH=$PWD/selftests${PYTHONPATH:+:$PYTHONPATH} exec "$venv/bin/wirecheck" fleet multinode \
     --nnodes 1 --nproc-per-node 1 --rdzv-endpoint 127.0.0.1:29511 --rdzv-id final-check -- --node-name gpu-node \
     --collective-worker fleet_faults:slow_collective --wirecheck-json "$record") > "$WORK/sigterm/run.log" 2>&1 &
  pid=$!
  while [ $waited -lt 120 ] && ! grep -q '"type": "measurement"' "$record" 2>/dev/null; do sleep 1; waited=$((waited + 1)); done
  log "sigterm: first measurement after ${waited} s; SIGTERM to the launcher (pid $pid)"
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  log "sigterm: wirecheck fleet multinode exited $rc"
  grep -E "stopped by|NCCL|nccl|record" "$WORK/sigterm/run.log" | grep -v "^W1" | tail -6
  tail -1 "$record" | cut -c1-400
  tar czf "$OUT/sigterm.tgz" -C "$WORK" sigterm
  [ "$rc" -eq 143 ] && tail -1 "$record" | grep -q '"signal": "SIGTERM"'
}

run_steps fresh quick sigterm -- "${STEPS[@]}" || exit 2
log "done: $([ $status -eq 0 ] && echo 'every step passed' || echo 'some step failed')"
exit $status
