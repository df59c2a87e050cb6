#!/usr/bin/env bash
# What the history rule catches on a GPU node, held to what its verdicts say they catch: three clean runs of
# the GPU figures (HBM copy and read, GEMM bf16 and fp8, each judged by tests/test_history.py) into one history
# folder; then the GPU made about 3 % and then about 1 % slower in GEMM and HBM copy, each run judged against that
# history; then one more clean run. The slowdown is outside the suite: scripts/device/slow_gpu/sitecustomize.py
# on PYTHONPATH makes every bf16 product and timed copy do a known share more work than it is credited for
# (WIRECHECK_SLOW_GEMM, WIRECHECK_SLOW_HBM), clocks and power untouched.
#
#   bash scripts/device/resolution_check.sh OUTDIR          (about 150 s on a 1x H200 node: 6 runs of ~20 s)
#   ALLOW_CPU=1 bash scripts/device/resolution_check.sh OUT  (a rehearsal: the same steps simulated on CPU; the
#                                                             history rule says "simulation" and judges nothing)
#
# For every history verdict it prints the run, the figure, the measured value, the bound, the margin and the loss
# the bound says it catches in 95 % of runs (docs/records.md#sensitivity), then checks it: a clean run must pass;
# a slowed figure whose loss is at or past that stated loss must fail, one well inside its margin must pass (the
# loss between the two: either, as the benchmark's catch rates say). The last line says whether every verdict was
# as predicted (exit 0) or which were not (exit 1). OUTDIR: console.log, every record and log, resolution.tgz.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bash scripts/device/resolution_check.sh OUTDIR" >&2; exit 4; }
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac
mkdir -p "$OUT"
HIST=$OUT/history
mkdir -p "$HIST"
exec > >(tee "$OUT/console.log") 2>&1
export PYTHONUNBUFFERED=1
NAME=resolution_check
BUDGET=${RESOLUTION_BUDGET_S:-420}
status=0
. "$ROOT/scripts/device/common.sh"

PY=$(pick_python) || { log "no Python whose torch sees a GPU (ALLOW_CPU=1 for a rehearsal on CPU)"; exit 2; }
use_checkout "$PY"
SIM=()
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  SIM=(--simulate=h200-sxm-2)
  log "no GPU: a rehearsal in simulation (${SIM[*]}); the history rule judges nothing"
fi
nvidia-smi --query-gpu=index,name,serial,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | sed 's/^/  /'
GEMM_3=0.031 HBM_3=0.031 GEMM_1=0.0101 HBM_1=0.0101  # extra work: the figure reads 1 / (1 + share)

one() {  # one NAME [VAR=VALUE...]: a run of the GPU figures and the history, its exit code
  local name=$1 t0=$SECONDS rc; shift
  fits 40 "$name" || { status=1; return 1; }
  env SLOW_GPU_LOG="$OUT/$name.slowed" "$@" timeout -s INT "$(allow 120)" "$PY" -m pytest tests -m health \
    -p no:cacheprovider -q -rfEs "${SIM[@]}" -k "hbm_bandwidth or gemm_throughput or history" --history="$HIST" \
    --node-lock="$OUT/node.lock" --wirecheck-json="$HIST/$name.jsonl" > "$OUT/$name.log" 2>&1
  rc=$?
  log "$name: exit $rc, $((SECONDS - t0)) s; $(cat "$OUT/$name.slowed" 2>/dev/null | wc -l) module(s) slowed in the workers" \
      "($(sort -u "$OUT/$name.slowed" 2>/dev/null | sed 's/ in pid.*//; s/slow_gpu: //' | sort -u | paste -sd, -));" \
      "$(grep -E '(passed|failed)' "$OUT/$name.log" | tail -1)"
  return 0
}

one clean-1
one clean-2
one clean-3
one slow-3 PYTHONPATH="$ROOT/scripts/device/slow_gpu:${PYTHONPATH:-}" WIRECHECK_SLOW_GEMM=$GEMM_3 WIRECHECK_SLOW_HBM=$HBM_3
one slow-1 PYTHONPATH="$ROOT/scripts/device/slow_gpu:${PYTHONPATH:-}" WIRECHECK_SLOW_GEMM=$GEMM_1 WIRECHECK_SLOW_HBM=$HBM_1
one clean-4

"$PY" - "$HIST" "$GEMM_3" "$HBM_3" "$GEMM_1" "$HBM_1" <<'PY' || status=1
"""Every history verdict of the runs, checked against what it says it catches."""
import json, math, sys
from pathlib import Path

hist = Path(sys.argv[1])
gemm3, hbm3, gemm1, hbm1 = (float(x) for x in sys.argv[2:6])
injected = {"slow-3": {"gemm_bf16": gemm3, "hbm_copy": hbm3}, "slow-1": {"gemm_bf16": gemm1, "hbm_copy": hbm1}}
names = ["clean-1", "clean-2", "clean-3", "slow-3", "slow-1", "clean-4"]
wrong, judged = [], 0
print(f"{'run':8} {'figure':10} {'outcome':7} {'measured':>12} {'bound':>12} {'median':>12} {'margin':>7} "
      f"{'loss':>6} {'catches':>8}  prediction")
for name in names:
    path = hist / f"{name}.jsonl"
    if not path.is_file():
        print(f"{name:8} no record"); wrong.append(f"{name}: no record"); continue
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    figures = [f"{(v.get('inputs') or {}).get('kind') or (v.get('inputs') or {}).get('dtype')} {v.get('measured') or 0:.1f} "
               f"{v.get('unit')} {v.get('outcome')}" for v in lines
               if v.get("type") == "verdict" and v.get("check") in ("hbm_bandwidth", "gemm_throughput")]
    print(f"{name:8} GPU figures: {'; '.join(figures) or 'none'}")
    for v in lines:
        if v.get("type") != "verdict" or v.get("check") not in ("history", "drift"):
            continue
        figure = (v.get("inputs") or {}).get("figure")
        if v["check"] == "drift" or v["outcome"] == "skip":
            print(f"{name:8} {figure or '-':10} {v['check']} {v['outcome']}: {v['message'][:160]}")
            continue
        judged += 1
        d, limit = v.get("details") or {}, (v.get("limit") or {}).get("min")
        share = injected.get(name, {}).get(figure, 0.0)
        loss = 1 - 1 / (1 + share)  # what the extra work takes off the figure
        step = (d.get("resolution") or {}).get("step")
        margin, noise, runs = d.get("margin") or 0, d.get("noise") or 0, d.get("runs") or 1
        sigma = noise * math.sqrt(1 + math.pi / (2 * runs))
        if share == 0:
            expect = "pass"
        elif step is not None and loss >= step:
            expect = "fail"
        elif loss + 2.33 * sigma < margin:
            expect = "pass"
        else:
            expect = "either"
        ok = expect == "either" or v["outcome"] == expect
        note = f"{expect}: {'as predicted' if ok else 'NOT as predicted'}"
        if not ok:
            wrong.append(f"{name} {figure}: {v['outcome']}, predicted {expect} ({v['message'][:300]})")
        print(f"{name:8} {figure:10} {v['outcome']:7} {v['measured']:12.1f} {limit or 0:12.1f} {d.get('median', 0):12.1f} "
              f"{margin * 100:6.2f}% {loss * 100:5.2f}% {(step or 0) * 100:7.2f}%  {note}")
print(f"resolution_check: {judged} history verdict(s) judged; "
      + ("every one as its bound predicted" if not wrong else f"{len(wrong)} not as predicted:"))
for w in wrong:
    print(f"  {w}")
sys.exit(1 if wrong and judged else 0)
PY
(cd "$OUT" && tar czf resolution.tgz history ./*.log ./*.slowed 2>/dev/null)
log "records in $OUT/resolution.tgz; done: $([ $status -eq 0 ] && echo 'as predicted' || echo 'see above')"
exit $status
