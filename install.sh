#!/usr/bin/env bash
# Install wirecheck and its stack into ./.venv. Idempotent: a second run keeps what is there and checks it.
#
#   ./install.sh [--wheels DIR]        (or WIRECHECK_WHEELS=DIR; PYTHON=... picks the interpreter)
#
# - The interpreter PYTHON (default python3) already imports torch (a GPU node's venv, conda
#   env or system Python): .venv is layered over that environment (scripts/layered_venv.py),
#   so its torch, CUDA build and all, is used and never downloaded.
# - A GPU but no torch in PYTHON: stop. A node's CUDA torch is never downloaded here.
# - No GPU, no torch: the CPU build torch==2.13.0 (an unpinned torch pulls a multi-GB CUDA build).
# - --wheels DIR: offline, from that directory of wheels alone (no index, no build isolation).
# Ends by checking that the stack imports, and says how to run the commands.
set -euo pipefail
cd "$(dirname "$0")"
die() { echo "install.sh: $*" >&2; exit 1; }

wheels=${WIRECHECK_WHEELS:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --wheels) [ $# -ge 2 ] || die "--wheels needs a directory of wheels: ./install.sh --wheels DIR"
              wheels=$2; shift 2 ;;
    --wheels=*) wheels=${1#--wheels=}; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (usage: ./install.sh [--wheels DIR])" ;;
  esac
done
pip_from=()
if [ -n "$wheels" ]; then
  [ -d "$wheels" ] || die "--wheels $wheels: no such directory (give the directory that holds the .whl files)"
  wheels=$(cd "$wheels" && pwd)
  pip_from=(--no-index --find-links "$wheels")
fi

PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null 2>&1 \
  || die "PYTHON=$PYTHON: no such interpreter (set PYTHON to a Python 3.10 or newer; on a GPU node, the one whose environment holds the node's torch)"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || die "PYTHON=$PYTHON is Python $("$PYTHON" -c 'import platform; print(platform.python_version())'); wirecheck needs 3.10 or newer"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=1; else gpu=0; fi

# Does PYTHON hold torch? Absent is one thing; present but broken is shown, never papered over.
if "$PYTHON" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)'; then
  base_torch=$("$PYTHON" -c 'import os, torch; print(os.path.realpath(torch.__file__)); print(torch.__version__); print(torch.version.cuda or "")') \
    || die "torch is installed for $PYTHON but does not import (above); fix that environment or set PYTHON to another"
  base_torch_file=$(sed -n 1p <<<"$base_torch")
  if [ "$gpu" = 1 ] && [ -z "$(sed -n 3p <<<"$base_torch")" ]; then
    die "this node has GPUs but the torch of $PYTHON ($(sed -n 2p <<<"$base_torch")) is a CPU build: set PYTHON to the interpreter of the environment that holds the node's CUDA torch"
  fi
  layered=1
elif [ "$gpu" = 1 ]; then
  die "this node has GPUs (nvidia-smi -L) but $(command -v "$PYTHON") has no torch, and a node's CUDA torch is never downloaded here: set PYTHON to the interpreter of the environment that holds it, e.g. PYTHON=/opt/conda/envs/NAME/bin/python ./install.sh"
else
  layered=0
fi

if [ "$layered" = 1 ]; then
  echo "install.sh: .venv layered over the packages of $(command -v "$PYTHON"):" >&2
  "$PYTHON" scripts/layered_venv.py .venv | sed 's/^/  /' >&2
else
  [ -x .venv/bin/python ] || "$PYTHON" -m venv --without-pip .venv
  rm -f .venv/lib/python*/site-packages/wirecheck-base-env.pth  # from an earlier layered install
fi
py=.venv/bin/python
# pip's own warnings about this machine's index settings ("... is ignored") are noise here.
pip_quiet() {
  local out
  if ! out=$("$py" -m pip install -q --disable-pip-version-check ${pip_from[@]+"${pip_from[@]}"} "$@" 2>&1); then
    echo "$out" >&2; return 1
  fi
  if [ -n "$out" ]; then grep -v "is ignored" <<<"$out" >&2 || true; fi
}
pip_install() {  # WHAT PIP-ARGS...
  local what=$1; shift
  pip_quiet "$@" || die "pip could not install $what${wheels:+ from $wheels alone (no index): that directory needs wheels for what pip names above}"
}

# pip: from the environment underneath when it has one, else the venv's own (ensurepip, offline).
if ! "$py" -m pip --version >/dev/null 2>&1; then
  "$py" -m ensurepip >/dev/null 2>&1 || die "$PYTHON has no pip and no ensurepip: install pip for it (Debian: apt-get install python3-venv python3-pip)"
  # ensurepip may bring an old setuptools (65 on Python 3.11) that would shadow a working one underneath.
  if [ "$layered" = 1 ]; then "$py" -m pip uninstall -q -y setuptools >/dev/null 2>&1 || true; fi
fi
# setuptools >= 70.1 (or >= 68 with the wheel package), in the venv or underneath: offline,
# wirecheck is built without build isolation (an isolated build downloads setuptools), and the
# self-tests build its wheel the same way. A venv's bundled setuptools can be older.
setuptools_ok='import sys, importlib.util as u
try:
    import setuptools
    v = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
except Exception:
    sys.exit(1)
sys.exit(not (v >= (70, 1) or (v >= (68, 0) and u.find_spec("wheel"))))'
if ! "$py" -c "$setuptools_ok" 2>/dev/null; then
  pip_quiet "setuptools>=70.1" \
    || die "building wirecheck needs setuptools>=70.1 and pip could not get it${wheels:+ from $wheels}: ${wheels:+add one (pip download setuptools -d $wheels) or }install setuptools in the environment of $PYTHON"
fi
build=()
if [ -n "$wheels" ]; then build=(--no-build-isolation); fi

if [ "$layered" = 0 ]; then pip_install "torch 2.13.0 (CPU build)" torch==2.13.0; fi
pip_install "wirecheck and its dependencies" ${build[@]+"${build[@]}"} -e .

# The stack must import, and torch must be the environment's own (not one pip slipped into .venv).
err=$(mktemp); trap 'rm -f "$err"' EXIT
stack=$("$py" -c 'import os, torch, deepspeed, accelerate, pynvml, yaml, pytest, pytest_benchmark, wirecheck.cli.main
print(os.path.realpath(torch.__file__)); print(torch.__version__)' 2>"$err") \
  || { tail -n 15 "$err" >&2; die "the stack does not import in .venv (above)"; }
torch_file=$(tail -n 2 <<<"$stack" | sed -n 1p)
torch_version=$(tail -n 1 <<<"$stack")
if [ "$layered" = 1 ] && [ "$torch_file" != "$base_torch_file" ]; then
  die "torch in .venv is $torch_file, not the one of $PYTHON ($base_torch_file): remove .venv (rm -rf .venv) and run install.sh again"
fi
# Where this Python cannot keep torch's compiled bytecode (PYTHONDONTWRITEBYTECODE=1 and no .pyc,
# or read-only site-packages), compile it once into wirecheck's cache for the workers (bytecode.py).
"$py" -m wirecheck.workers.bytecode | sed 's/^wirecheck: /install.sh: /' >&2
echo "install.sh: wirecheck installed in .venv (torch $torch_version from ${torch_file%/torch/__init__.py})" >&2
echo "install.sh: run .venv/bin/wirecheck validate (or: source .venv/bin/activate, then wirecheck ... / pytest ...)" >&2
