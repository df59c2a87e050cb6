#!/usr/bin/env bash
# Two open questions on a 2x H200 node, in one run (docs/measurements.md): the 1-16 MiB curve against
# nccl-tests and what moves it (curve_check.sh build midsizes), then the training probe's noise plan
# (host-bound strategies run after run, with the suite's manual GC and with Python's automatic GC,
# ZeRO-1 overlapped). Its first run (2026-12-01) also tried per-rank CPU binding: see plan_noise.
#   bash scripts/device/investigate.sh OUTDIR     (from the repository root, .whl/ and .nccl-tests-src/ beside it)
# Results: OUTDIR/curve.tar.gz, OUTDIR/probe.tar.gz and the two logs. The environment is passed through.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/investigate.sh OUTDIR" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
mkdir -p "$OUT/curve" "$OUT/probe"
CURVE_BUDGET_S=${CURVE_BUDGET_S:-200} bash scripts/device/curve_check.sh "$OUT/curve" build midsizes 2>&1 | tee "$OUT/curve.log"
bash scripts/device/training_probe.sh "$OUT/probe" --plan noise --budget "${PROBE_BUDGET_S:-300}" >"$OUT/probe.out" 2>&1
tail -45 "$OUT/probe/probe-summary.txt" 2>/dev/null || tail -40 "$OUT/probe.out"
grep -E "^  host:|^[a-z0-9]+\[" "$OUT/probe.out" | cut -c1-230 | tail -40
tar -C "$OUT" -czf "$OUT/curve.tar.gz" curve && tar -C "$OUT" -czf "$OUT/probe.tar.gz" probe probe.out
rm -rf "$OUT/curve" "$OUT/probe" "$OUT/probe.out"
