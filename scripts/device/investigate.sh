#!/usr/bin/env bash
# One device call for the open questions of issues 10 and 13 (2x H200): the 1-16 MiB curve against
# nccl-tests and what moves it (curve_check.sh build midsizes), then the training probe's noise plan
# (host-bound strategies run after run, with the suite's manual GC and with Python's automatic GC,
# ZeRO-1 overlapped). Its first run (2026-12-01) also tried per-rank CPU binding: see plan_noise.
#   run(command="bash scripts/device/investigate.sh", carry=[".whl", ".nccl-tests-src"], kind="nvidia-h200-x2")
# Results: $OUT/curve.tar.gz, $OUT/probe.tar.gz and the two logs. The environment is passed through.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/.wirecheck/investigate}
mkdir -p "$OUT/curve" "$OUT/probe"
OUT="$OUT/curve" CURVE_BUDGET_S=${CURVE_BUDGET_S:-200} bash scripts/device/curve_check.sh build midsizes 2>&1 | tee "$OUT/curve.log"
OUT="$OUT/probe" bash scripts/device/training_probe.sh --plan noise --budget "${PROBE_BUDGET_S:-300}" >"$OUT/probe.out" 2>&1
tail -45 "$OUT/probe/probe-summary.txt" 2>/dev/null || tail -40 "$OUT/probe.out"
grep -E "^  host:|^[a-z0-9]+\[" "$OUT/probe.out" | cut -c1-230 | tail -40
tar -C "$OUT" -czf "$OUT/curve.tar.gz" curve && tar -C "$OUT" -czf "$OUT/probe.tar.gz" probe probe.out
rm -rf "$OUT/curve" "$OUT/probe" "$OUT/probe.out"
