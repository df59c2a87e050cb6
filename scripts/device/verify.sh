#!/usr/bin/env bash
# The closing checks on the 2x H200 machine, one call: the collective curve against nccl-tests
# (curve_check.sh build suite crosscheck: issue 13), then the README's quick start on a fresh copy
# with the whole suite (fresh_install.sh --full: issue 10's run, the suite's wall time), stopped
# before the call's limit. STEPS="suite" skips the curve (a second whole-suite run). Arguments go
# to `wirecheck validate` (e.g. --profile h200-sxm-2).
#   run(command="bash scripts/device/verify.sh", carry=[".whl", ".nccl-tests-src"], kind="nvidia-h200-x2")
# $OUT: curve.tar.gz, run.jsonl, run.log, curve.log. The environment is passed through untouched.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/.wirecheck/verify}
LIMIT_S=${LIMIT_S:-570}
mkdir -p "$OUT"
if [ "${STEPS:-curve suite}" != "suite" ]; then
  mkdir -p "$OUT/curve"
  OUT="$OUT/curve" CURVE_BUDGET_S=${CURVE_BUDGET_S:-240} bash scripts/device/curve_check.sh build suite crosscheck >"$OUT/curve.log" 2>&1
  grep -E "^\[curve_check|within 5 %|<$" "$OUT/curve.log" | tail -40
  tar -C "$OUT" -czf "$OUT/curve.tar.gz" curve && rm -rf "$OUT/curve"
fi
left=$((LIMIT_S - SECONDS))
echo "== whole suite, fresh install, ${left} s left"
timeout --signal=INT "$left" bash scripts/device/fresh_install.sh --full --wirecheck-json "$OUT/run.jsonl" -rs "$@" \
  >"$OUT/run.log" 2>&1
echo "== exit $?"
grep -E "^== |passed|failed" "$OUT/run.log" | tail -8
sed -n '/strategy dial/,/^$/p' "$OUT/run.log" | head -30
