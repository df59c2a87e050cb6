#!/usr/bin/env bash
# Where a run's first seconds go before any test, on a GPU node, from a fresh install's venv (level_times.sh
# or spare_times.sh made one): the wrapper's NVML read, pytest's start to collection, each twice.
#   bash scripts/device/startup_split.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/device/common.sh"
venv=$(newest_fresh_venv)
[ -n "$venv" ] || { echo "startup_split: no fresh install under /tmp (run spare_times.sh first)" >&2; exit 2; }
cd "$(dirname "$venv")" || exit 2
for i in 1 2; do
  "$venv/bin/python" - <<'PY'
import time
t = time.monotonic()
from wirecheck.node import nvml
t1 = time.monotonic()
topology = nvml.read_topology()
t2 = time.monotonic()
print(f"nvml module import {t1 - t:.2f} s, read_topology {t2 - t1:.2f} s ({topology.n_gpus} GPUs)")
PY
  /usr/bin/time -f "%e s: wirecheck validate --level quick --collect-only" "$venv/bin/wirecheck" validate --level quick --collect-only -q > /dev/null
  /usr/bin/time -f "%e s: pytest --level quick --collect-only" "$venv/bin/python" -m pytest --level quick --collect-only -q > /dev/null
  /usr/bin/time -f "%e s: python -c 'import pytest'" "$venv/bin/python" -c "import pytest"
done
