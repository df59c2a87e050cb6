#!/usr/bin/env bash
# The closing checks on a 2x H200 node: the collective curve against nccl-tests (curve_check.sh build
# suite crosscheck), then the README's quick start on a fresh copy with the whole suite
# (fresh_install.sh --full: the strategies' run and the suite's wall time), stopped before LIMIT_S.
# STEPS="suite" skips the curve (a second whole-suite run). The arguments after OUTDIR go to
# `wirecheck validate` (e.g. --profile h200-sxm-2).
#   bash scripts/device/verify.sh OUTDIR [VALIDATE-ARGS ...]     (from the repository root, .whl/ and .nccl-tests-src/ beside it)
# OUTDIR: curve.tar.gz, run.jsonl, run.log, curve.log. The environment is passed through untouched.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/verify.sh OUTDIR [VALIDATE-ARGS ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
LIMIT_S=${LIMIT_S:-570}
mkdir -p "$OUT"
if [ "${STEPS:-curve suite}" != "suite" ]; then
  mkdir -p "$OUT/curve"
  CURVE_BUDGET_S=${CURVE_BUDGET_S:-240} bash scripts/device/curve_check.sh "$OUT/curve" build suite crosscheck >"$OUT/curve.log" 2>&1
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
