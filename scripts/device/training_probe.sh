#!/usr/bin/env bash
# Issue 10's device probe: run from the repository root on the 2x H200 machine, carrying .whl/
# (the DeepSpeed wheel and its missing dependencies). About 5 minutes; results in $OUT.
#   run(command="bash scripts/device/training_probe.sh", carry=[".whl"], kind="nvidia-h200-x2", timeout_s=420)
# The environment is passed through untouched (NCCL_NVLS_ENABLE=0 and the other multicast
# switches of the lent machines reach every worker). Extra arguments go to training_probe.py
# (--budget SECONDS, --only zero3,fsdp).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/probe-out}"
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
