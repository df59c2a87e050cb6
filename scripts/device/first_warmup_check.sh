#!/usr/bin/env bash
# What is left of a 1x H200 node's acceptance beyond its 60-s load plus 15 s, measured on a newly started node
# (about 7 minutes), from a fresh install (offline, .whl/ beside the checkout):
#   - scripts/device/warmup_probe.py first, while the node's caches are as a first run finds them: where the
#     first training warm-up's extra 1.5-2.5 s goes (the page cache, the CUDA JIT cache, or neither);
#   - scripts/device/preload_check.py for ZeRO-2 and ZeRO-3 (and ZeRO-1 beside them): what the zygote's
#     preload saves each, which `wirecheck plan` prices at nothing until measured
#     (`python scripts/unit_costs.py --preload-checks LOG ... --write` takes the log);
#   - scripts/device/step_bumps_probe.py: whether the one-GPU training's slow fifth to seventh timed steps are the
#     GPU's clocks after the load, the first run's allocations, or neither (about 100 s).
#   bash scripts/device/first_warmup_check.sh OUTDIR
# OUTDIR gets console.log, warmup.log, preload.log and step-bumps.log; exits non-zero where a step failed. The environment is
# passed through unchanged.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
. "$ROOT/scripts/device/common.sh"
outdir "bash scripts/device/first_warmup_check.sh OUTDIR" "${1:-}"
WORK=$(mktemp -d /tmp/first-warmup.XXXXXX)
exec > >(tee "$OUT/console.log") 2>&1
NAME=first_warmup_check
BUDGET=${FIRST_WARMUP_BUDGET_S:-560}

fresh_venv "$WORK"
log "warm-up probe"
timeout "$(allow 200)" "$venv/bin/python" "$ROOT/scripts/device/warmup_probe.py" --repeats 2 2>&1 | tee "$OUT/warmup.log"
status=${PIPESTATUS[0]}
log "warm-up probe: exit $status"
if fits 200 "preload check"; then
  timeout "$(allow 300)" "$venv/bin/python" "$ROOT/scripts/device/preload_check.py" --repeats 2 \
    --strategies zero2 zero3 zero1 2>&1 | tee "$OUT/preload.log"
  step=${PIPESTATUS[0]}
  log "preload check: exit $step"
  [ "$step" = 0 ] || status=$step
fi
if fits 130 "step bumps probe"; then
  timeout "$(allow 200)" "$venv/bin/python" "$ROOT/scripts/device/step_bumps_probe.py" 2>&1 | tee "$OUT/step-bumps.log"
  step=${PIPESTATUS[0]}
  log "step bumps probe: exit $step"
  [ "$step" = 0 ] || status=$step
fi
exit "$status"
