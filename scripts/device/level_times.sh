#!/usr/bin/env bash
# The wall time and the verdicts of each level, repeated, on a GPU node (about 7 minutes on a 1x H200 node
# with N=3): the README's quick start once from a fresh copy (offline, .whl/ beside the checkout), then
# `wirecheck validate --level quick` N times and `wirecheck validate` (acceptance) N times from that install.
#   bash scripts/device/level_times.sh OUTDIR [N] [LEVEL ...]      (LEVEL: quick, acceptance; default both)
# OUTDIR gets times.tsv (level, repeat, exit code, wall seconds), one record and one log per run, in
# records.tgz, console.log, start.tsv (`wirecheck --help` and a quick collection, three times each, before the
# runs), and for acceptance runs parts.txt (scripts/device/acceptance_parts.py).
# Compare two such folders' verdicts with
#   python3 scripts/device/same_verdicts.py OUTDIR_BEFORE OUTDIR_AFTER
# LEVEL_TIMES_ARGS: more options for every run (for example --no-spare-workers).
# The environment is passed through unchanged (NCCL_NVLS_ENABLE=0 and the rest reach every worker).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/level_times.sh OUTDIR [N] [LEVEL ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac
shift
REPEATS=${1:-3}; [ $# -gt 0 ] && shift
LEVELS=("$@"); [ ${#LEVELS[@]} -gt 0 ] || LEVELS=(quick acceptance)
case $REPEATS in ''|*[!0-9]*) echo "level_times: N must be a whole number, not '$REPEATS'" >&2; exit 4 ;; esac
WORK=$(mktemp -d /tmp/level-times.XXXXXX)
mkdir -p "$OUT" "$WORK/runs"
exec > >(tee "$OUT/console.log") 2>&1
export PYTHONUNBUFFERED=1
NAME=level_times
BUDGET=${LEVEL_TIMES_BUDGET_S:-570}
. "$ROOT/scripts/device/common.sh"

fresh_venv "$WORK"
# The command's own start, nothing run: where the node's Python keeps no bytecode, this is what wirecheck's cache
# (workers/bytecode.py) saves the command and pytest at every start.
printf 'command\trepeat\texit\twall_s\n' > "$OUT/start.tsv"
for i in 1 2 3; do
  for what in help collect; do
    case $what in
      help) cmd=("$venv/bin/wirecheck" --help) ;;
      collect) cmd=("$venv/bin/wirecheck" validate --level quick --collect-only -q) ;;
    esac
    start=$(date +%s.%N)
    (cd "$WORK" && timeout 60 "${cmd[@]}" > /dev/null 2>&1)
    rc=$?
    wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    printf '%s\t%s\t%s\t%s\n' "$what" "$i" "$rc" "$wall" >> "$OUT/start.tsv"
  done
done
log "the command's start: $(awk 'NR > 1 { printf "%s %s s; ", $1, $4 }' "$OUT/start.tsv")"
printf 'level\trepeat\texit\twall_s\n' > "$OUT/times.tsv"
for level in "${LEVELS[@]}"; do
  case $level in quick) args=(--level quick); need=40 ;; acceptance) args=(); need=130 ;;
    *) log "unknown level $level (quick, acceptance)"; exit 4 ;; esac
  read -r -a more <<< "${LEVEL_TIMES_ARGS:-}"
  args+=("${more[@]}")
  for i in $(seq 1 "$REPEATS"); do
    fits "$need" "$level $i" || continue
    name=$level-$i
    start=$(date +%s.%N)
    (cd "$(dirname "$venv")" && timeout -s INT "$(allow 300)" "$venv/bin/wirecheck" validate "${args[@]}" -rfEs \
       --wirecheck-json "$WORK/runs/$name.jsonl" > "$WORK/runs/$name.log" 2>&1)
    rc=$?
    wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    printf '%s\t%s\t%s\t%s\n' "$level" "$i" "$rc" "$wall" >> "$OUT/times.tsv"
    log "$level run $i: exit $rc, wall $wall s; $(grep -E '^=+ .*(passed|failed)' "$WORK/runs/$name.log" | tail -1)"
  done
done
cp "$WORK/fresh.log" "$WORK/runs/"
tar czf "$OUT/records.tgz" -C "$WORK" runs
# Where each acceptance run's time went (the figures, the sustained load and its aside, the training's phases),
# on a one-GPU node: scripts/device/acceptance_parts.py over the records, so one call brings it back.
if ls "$WORK"/runs/acceptance-*.jsonl > /dev/null 2>&1; then
  python3 "$ROOT/scripts/device/acceptance_parts.py" "$WORK"/runs/acceptance-*.jsonl > "$OUT/parts.txt" 2>&1
fi
cat "$OUT/times.tsv"
