#!/usr/bin/env bash
# The PCI bus on a GPU node: wirecheck.node.pci lists the NVIDIA GPUs nvidia-smi lists (the same bus ids, read
# from /sys/bus/pci/devices without NVML), and where NVML cannot read them `wirecheck validate` refuses with
# exit 11 naming them, never a simulation; with NVML answering it chooses the hardware run.
#
#   bash scripts/device/pci_check.sh OUTDIR        (about 10 s on a 1x H200 node)
#
# ALLOW_CPU=1 rehearses it on a CPU machine: no GPU on the bus there, so the refusal shown is the one a
# --profile makes. OUTDIR/pci.log holds the output; the exit code is 0 when every check held.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bash scripts/device/pci_check.sh OUTDIR" >&2; exit 4; }
OUTDIR=$1
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)
BUDGET=60
NAME=pci_check
. "$ROOT/scripts/device/common.sh"
PY=$(pick_python) || { log "no Python whose torch sees a GPU"; exit 2; }
use_checkout "$PY"
"$PY" - <<'PYEOF' 2>&1 | tee "$OUTDIR/pci.log"
import os
import shutil
import subprocess
import sys

from wirecheck.cli.validate import choose_mode
from wirecheck.node import nvml, pci

bus = pci.nvidia_gpus()
print(f"pci: {pci.describe(bus) if bus else 'no NVIDIA GPU on the PCI bus'}")
failed = []
if shutil.which("nvidia-smi"):
    smi = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader"], capture_output=True,
                         text=True, timeout=30).stdout.split()
    # nvidia-smi writes an 8-digit domain (00000000:17:00.0), sysfs a 4-digit one (0000:17:00.0)
    smi = sorted(b.lower()[-12:] for b in smi)
    print(f"nvidia-smi: {', '.join(smi)}")
    if smi != sorted(bus):
        failed.append(f"the bus lists {sorted(bus)}, nvidia-smi {smi}")
elif not os.environ.get("ALLOW_CPU"):
    failed.append("no nvidia-smi on this GPU node")


def nvml_fails():
    raise nvml.NvmlUnavailable("NVML could not start (a stand-in failure of this check)")


args = [] if bus else ["--profile", "h200-sxm-2"]
mode = choose_mode(args, read_topology=nvml_fails)
print(f"NVML failing, validate {' '.join(args)}: {'REFUSED (exit 11)' if mode.refusal else 'simulate ' + str(mode.simulate)}")
print("  " + (mode.refusal or mode.notice or "").replace("\n", "\n  "))
expected = pci.describe(bus) if bus else "--profile h200-sxm-2 names the GPU node this is to be"
if mode.simulate is not None or expected not in (mode.refusal or ""):
    failed.append(f"validate chose {mode} where NVML fails")
if bus:
    real = choose_mode([])
    print(f"NVML answering: {real}")
    if real.gpus != len(bus):
        failed.append(f"with NVML, validate chose {real} (the bus has {len(bus)} GPUs)")
print("pci_check: " + ("FAILED: " + "; ".join(failed) if failed else "every check held"))
sys.exit(1 if failed else 0)
PYEOF
status=${PIPESTATUS[0]}
log "exit $status; output in $OUTDIR/pci.log"
exit "$status"
