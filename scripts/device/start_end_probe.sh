#!/usr/bin/env bash
# Where a short run's start and a worker's end go on a GPU node (about 2 minutes on a 1x H200 node), from a
# fresh install (offline, .whl/ beside the checkout):
#   - `wirecheck validate --collect-only` and pytest's own collection, with the node's auto-loaded pytest
#     plugins and with only the suite's (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 and -p for each), N times each;
#   - scripts/device/exit_probe.py: a worker's end three ways, and the trainers' imports after torch.
#   bash scripts/device/start_end_probe.sh OUTDIR [N]
# OUTDIR gets console.log. The environment is passed through unchanged.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
. "$ROOT/scripts/device/common.sh"
outdir "bash scripts/device/start_end_probe.sh OUTDIR [N]" "${1:-}"
REPEATS=${2:-3}
WORK=$(mktemp -d /tmp/start-end.XXXXXX)
exec > >(tee "$OUT/console.log") 2>&1
NAME=start_end_probe
BUDGET=${START_END_BUDGET_S:-400}

fresh_venv "$WORK"
cd "$(dirname "$venv")" || exit 2
own=(-p pytest_wirecheck.options -p pytest_benchmark.plugin)
for i in $(seq 1 "$REPEATS"); do
  /usr/bin/time -f "%e s: wirecheck validate --level quick --collect-only" \
    "$venv/bin/wirecheck" validate --level quick --collect-only -q > /dev/null 2> "$WORK/v.err"; tail -1 "$WORK/v.err"
  /usr/bin/time -f "%e s: pytest --level quick --collect-only (plugins auto-loaded)" \
    "$venv/bin/python" -m pytest tests --level quick --collect-only -q > /dev/null 2> "$WORK/p.err"; tail -1 "$WORK/p.err"
  PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 /usr/bin/time -f "%e s: pytest --level quick --collect-only (the suite's plugins only)" \
    "$venv/bin/python" -m pytest tests "${own[@]}" --level quick --collect-only -q > "$WORK/o.out" 2> "$WORK/o.err"
  tail -1 "$WORK/o.err"; tail -2 "$WORK/o.out"
  /usr/bin/time -f "%e s: wirecheck --help" "$venv/bin/wirecheck" --help > /dev/null 2> "$WORK/h.err"; tail -1 "$WORK/h.err"
done
log "exit probe"
timeout "$(allow 240)" "$venv/bin/python" "$ROOT/scripts/device/exit_probe.py" --repeats "$REPEATS"
log "exit $?"
