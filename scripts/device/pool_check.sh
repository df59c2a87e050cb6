#!/usr/bin/env bash
# The run's worker pool on a GPU node (one worker per GPU for the run, a sub-group per placement): the
# quick and the acceptance level three times each, so their wall times and verdicts can be set beside
# the same runs of the tree before the pool (about 6 minutes on 1 H200; before: quick ~22 s, acceptance ~93 s).
#   bash scripts/device/pool_check.sh OUTDIR
# OUTDIR gets console.log, times.tsv (level, run, exit status, wall seconds, the pool starts the record's
# size lines show), verdicts-<level>-<n>.tsv (test, check, where, outcome: one line per verdict) and
# records.tgz (every record, with the NCCL logs the pool wrote beside them). The environment is passed
# through untouched (NCCL_NVLS_ENABLE=0 and the other switches a node sets reach every worker).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/pool_check.sh OUTDIR" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
mkdir -p "$OUT/records"
exec > >(tee "$OUT/console.log") 2>&1
export PYTHONUNBUFFERED=1
NAME=pool_check
BUDGET=${POOL_BUDGET_S:-580}
status=0
. "$ROOT/scripts/device/common.sh"

PY=$(pick_python) || { log "no Python whose torch sees a GPU (tried \$PYTHON, .venv/bin/python, python3)"; exit 2; }
use_checkout "$PY"
log "python $PY: $("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)')"
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv,noheader 2>&1 | sed 's/^/  /'
LOCK=$OUT/node.lock  # the runs below take this lock, not the node's default one
printf 'level\trun\texit\twall_s\tpools\n' > "$OUT/times.tsv"

# verdicts RECORD TSV: one line per verdict (test, check, where, outcome), and the pools the run started
# (the distinct pool-<n> folders of its NCCL logs).
verdicts() {
  "$PY" - "$1" "$2" <<'EOF'
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        d = json.loads(line)
        if d.get("type") == "verdict":
            out.write(f"{d.get('test')}\t{d.get('check')}\t{d.get('where')}\t{d['outcome']}\n")
EOF
}

one_run() {
  local level=$1 n=$2 cap=$3 t0 rc record
  fits "$cap" "$level run $n" || { status=1; return; }
  record=$OUT/records/$level-$n.jsonl
  t0=$SECONDS
  timeout -s INT "$(allow $((cap * 2)))" "$PY" -m wirecheck.cli.main validate --level "$level" -p no:cacheprovider \
    --node-lock="$LOCK" --wirecheck-json "$record" -rfEs > "$OUT/records/$level-$n.log" 2>&1
  rc=$?
  local wall=$((SECONDS - t0)) pools
  pools=$(ls -d "${record%.jsonl}".nccl/pool-* 2>/dev/null | wc -l)
  printf '%s\t%s\t%s\t%s\t%s\n' "$level" "$n" "$rc" "$wall" "$pools" >> "$OUT/times.tsv"
  log "validate --level $level (run $n): exit $rc, wall $wall s, $pools pool start(s)"
  grep -E "passed|failed|wirecheck validate:" "$OUT/records/$level-$n.log" | tail -3
  [ -f "$record" ] && verdicts "$record" "$OUT/verdicts-$level-$n.tsv"
  [ "$rc" -eq 0 ] || status=1
}

for n in 1 2 3; do one_run quick "$n" 40; done
for n in 1 2 3; do one_run acceptance "$n" 130; done

# The three runs of a level must agree with one another (the coordinator compares them with the runs before).
for level in quick acceptance; do
  if cmp -s <(sort "$OUT/verdicts-$level-1.tsv" 2>/dev/null) <(sort "$OUT/verdicts-$level-2.tsv" 2>/dev/null) \
     && cmp -s <(sort "$OUT/verdicts-$level-1.tsv" 2>/dev/null) <(sort "$OUT/verdicts-$level-3.tsv" 2>/dev/null); then
    log "$level: the three runs' verdicts agree"
  else
    log "$level: the runs' verdicts differ (diff the verdicts-$level-*.tsv files)"
    status=1
  fi
done
column -t "$OUT/times.tsv"
tar czf "$OUT/records.tgz" -C "$OUT" records && rm -rf "$OUT/records"
log "done: status $status"
exit "$status"
