#!/usr/bin/env bash
# Install wirecheck and its stack into ./.venv (idempotent: a second run only checks).
# On a GPU node the venv also sees the system's packages, so the node's CUDA build of torch
# is used; elsewhere torch is pinned to the CPU build 2.13.0 (an unpinned torch pulls a
# multi-GB CUDA build).
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=1; else gpu=0; fi
if [ ! -x .venv/bin/python ]; then
  if [ "$gpu" = 1 ]; then "$PYTHON" -m venv --system-site-packages .venv; else "$PYTHON" -m venv .venv; fi
fi
pip_install() { .venv/bin/python -m pip install -q --disable-pip-version-check "$@" 2>&1 | grep -v "is ignored" || true; }
if [ "$gpu" = 0 ]; then pip_install torch==2.13.0; fi
pip_install -e .
.venv/bin/python -c "import torch, deepspeed, accelerate, pynvml, yaml, pytest, pytest_benchmark" 2>/dev/null \
  || { echo "install.sh: the stack does not import; see the pip output above" >&2; exit 1; }
echo "install.sh: wirecheck installed in .venv (torch $(.venv/bin/python -c 'import torch; print(torch.__version__)' 2>/dev/null))" >&2
