#!/usr/bin/env bash
# Each level with and without spare workers (wirecheck.workers.spares), alternately, on a GPU node: the
# README's quick start once from a fresh copy (offline, .whl/ beside the checkout), then N rounds of
# quick without, quick with, acceptance without, acceptance with (about 40 s + 3.5 min a round on a 1x H200 node).
#   bash scripts/device/spare_times.sh OUTDIR [N] [LEVEL ...]      (LEVEL: quick, acceptance; default both)
# OUTDIR gets times.tsv (level, spares, repeat, exit code, wall seconds), each run's record and log in
# records.tgz, and console.log. Compare the verdicts with
#   python3 scripts/device/same_verdicts.py OUTDIR/without OUTDIR/with      (after unpacking records.tgz)
# The environment is passed through unchanged (NCCL_NVLS_ENABLE=0 and the rest reach every worker).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/spare_times.sh OUTDIR [N] [LEVEL ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac
shift
REPEATS=${1:-2}; [ $# -gt 0 ] && shift
LEVELS=("$@"); [ ${#LEVELS[@]} -gt 0 ] || LEVELS=(quick acceptance)
case $REPEATS in ''|*[!0-9]*) echo "spare_times: N must be a whole number, not '$REPEATS'" >&2; exit 4 ;; esac
WORK=$(mktemp -d /tmp/spare-times.XXXXXX)
mkdir -p "$OUT" "$WORK/runs/with" "$WORK/runs/without"
exec > >(tee "$OUT/console.log") 2>&1
export PYTHONUNBUFFERED=1
NAME=spare_times
BUDGET=${SPARE_TIMES_BUDGET_S:-570}
. "$ROOT/scripts/device/common.sh"

fresh_venv "$WORK"
printf 'level\tspares\trepeat\texit\twall_s\n' > "$OUT/times.tsv"
for i in $(seq 1 "$REPEATS"); do
  for level in "${LEVELS[@]}"; do
    case $level in quick) args=(--level quick); need=40 ;; acceptance) args=(); need=130 ;;
      *) log "unknown level $level (quick, acceptance)"; exit 4 ;; esac
    for spares in without with; do
      fits "$need" "$level $spares $i" || continue
      more=(); [ "$spares" = without ] && more=(--no-spare-workers)
      name=$spares/$level-$i
      start=$(date +%s.%N)
      (cd "$(dirname "$venv")" && timeout -s INT "$(allow 300)" "$venv/bin/wirecheck" validate "${args[@]}" "${more[@]}" \
         -rfEs --durations=5 --wirecheck-json "$WORK/runs/$name.jsonl" > "$WORK/runs/$name.log" 2>&1)
      rc=$?
      wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
      printf '%s\t%s\t%s\t%s\t%s\n' "$level" "$spares" "$i" "$rc" "$wall" >> "$OUT/times.tsv"
      log "$level $spares spares, run $i: exit $rc, wall $wall s; $(grep -E '^=+ .*(passed|failed)' "$WORK/runs/$name.log" | tail -1)"
    done
  done
done
cp "$WORK/fresh.log" "$WORK/runs/"
tar czf "$OUT/records.tgz" -C "$WORK" runs
cat "$OUT/times.tsv"
