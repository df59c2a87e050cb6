#!/usr/bin/env bash
# The training probe: which strategy settings reach the throughput targets. Run from the repository
# root on a 2x H200 node, with .whl/ beside it (the DeepSpeed wheel and its missing dependencies). About
# 5 minutes; results in OUTDIR.
#   bash scripts/device/training_probe.sh OUTDIR [PROBE-ARGS ...]
# The environment is passed through untouched (NCCL_NVLS_ENABLE=0 and the other multicast
# switches a node sets reach every worker). The arguments after OUTDIR go to training_probe.py
# (--budget SECONDS, --only zero3,fsdp).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/training_probe.sh OUTDIR [PROBE-ARGS ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
mkdir -p "$OUT"
SITE=/tmp/wirecheck-probe-site
# Only what the image lacks (DeepSpeed and its pydantic/hjson dependencies): the image's own
# packaging, pytest, nvidia-ml-py... stay in charge.
wheels=()
for pattern in deepspeed- hjson- pydantic- pydantic_core- annotated_types- typing_inspection- typing_extensions-; do
    for w in .whl/${pattern}*.whl; do [ -e "$w" ] && wheels+=("$w"); done
done
if [ ${#wheels[@]} -gt 0 ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "${wheels[@]}"
fi
export PYTHONPATH="$PWD/src:$SITE${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import torch, deepspeed, accelerate; print("probe:", "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "deepspeed", deepspeed.__version__, "accelerate", accelerate.__version__, "gpus", torch.cuda.device_count())' 2>&1 | grep -v "^\[" || true
nvidia-smi topo -m 2>/dev/null | head -4 || true
python3 scripts/device/training_probe.py --out "$OUT" "$@" 2>&1 | tee "$OUT/probe.log"
