#!/usr/bin/env bash
# The built wheel on a GPU node, as a fleet installs it: no checkout on any path, nothing editable, offline.
#
#   bash scripts/device/wheel_check.sh OUTDIR     (from the repository root, .whl/ beside it; about a minute on 1 H200)
#
# 1. records the node's environment (`pip freeze`: node-freeze.txt, for `scripts/wheelhouse.py --node-freeze`);
# 2. builds wirecheck's wheel from this tree (pip, offline: setuptools from .whl/ for the isolated build);
# 3. installs it with pip, offline, into a venv layered over the node's own torch environment
#    (scripts/layered_venv.py: the node's torch, CUDA build and all, and its other packages are used as they
#    are, the environment itself is left untouched); what the node lacks (DeepSpeed, ...) comes from .whl/;
# 4. compiles torch's bytecode into wirecheck's cache (what install.sh runs after installing);
# 5. from an empty folder, with PYTHONPATH unset: `wirecheck --version`, where each package is imported from,
#    `wirecheck validate --level quick`, then `wirecheck judge` on its record; each command's output and exit code.
# OUTDIR gets console.log, one log per step, node-freeze.txt and quick.jsonl. Exits 0 when validate and judge
# both exit 0 (10 for both in a rehearsal on a CPU machine: ALLOW_CPU=1), 1 otherwise, 2 when the wheel could
# not be built or installed. PYTHON: the node's interpreter (default: the first whose torch sees a GPU);
# WHEEL_CHECK_VALIDATE_ARGS: validate's arguments (default --level quick).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/wheel_check.sh OUTDIR" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac
mkdir -p "$OUT"
exec > >(tee "$OUT/console.log") 2>&1
export PYTHONUNBUFFERED=1
NAME=wheel_check
BUDGET=${WHEEL_CHECK_BUDGET_S:-240}
. "$ROOT/scripts/device/common.sh"
WORK=$(mktemp -d /tmp/wheel-check.XXXXXX)
WHEELS=$ROOT/.whl
read -r -a VALIDATE_ARGS <<<"${WHEEL_CHECK_VALIDATE_ARGS:---level quick}"
accepted=0
[ -n "${ALLOW_CPU:-}" ] && accepted=10  # a rehearsal without a GPU simulates: 10 is its "nothing failed"

PY=$(pick_python) || { log "no Python whose torch sees a GPU (tried \$PYTHON, .venv/bin/python, python3)"; exit 2; }
[ -d "$WHEELS" ] || { log "no $WHEELS: make it with scripts/wheelhouse.py and carry it beside the checkout"; exit 2; }
unset PYTHONPATH
log "node: $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s); $PY: $("$PY" -c 'import sys, torch; print("Python", sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda)' 2>&1 | tail -1)"
"$PY" -m pip freeze > "$OUT/node-freeze.txt" 2>/dev/null
log "node environment: $(wc -l < "$OUT/node-freeze.txt") packages (node-freeze.txt); wheelhouse: $(ls "$WHEELS"/*.whl 2>/dev/null | wc -l) wheels"

# pip reads only what the command line names: no index, no configured wheel folders
export PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
unset PIP_FIND_LINKS PIP_EXTRA_INDEX_URL PIP_INDEX_URL PIP_CONSTRAINT
timed() {  # NAME LOG COMMAND...: run, log its seconds and exit code; returns the exit code
  local name=$1 logfile=$2 t0=$SECONDS rc
  shift 2
  "$@" > "$logfile" 2>&1
  rc=$?
  log "$name: exit $rc, $((SECONDS - t0)) s"
  return $rc
}

# -- the wheel, built from this tree (a copy: no build/ folder of an earlier build can slip into it) --------
mkdir -p "$WORK/src" "$WORK/dist"
tar -C "$ROOT" --exclude=./.git --exclude=./.venv --exclude=./.whl --exclude=./build --exclude=./dist \
    --exclude='*.egg-info' --exclude=__pycache__ --exclude=./fixtures/reference -cf - . | tar -C "$WORK/src" -xf -
timed "build the wheel" "$OUT/build.log" "$PY" -m pip wheel --no-deps --find-links "$WHEELS" "$WORK/src" -w "$WORK/dist" \
  || { tail -20 "$OUT/build.log"; exit 2; }
wheel=$(ls "$WORK"/dist/wirecheck-*.whl)
log "built $(basename "$wheel")"

# -- installed with its dependencies, offline, over the node's environment --------------------------------
venv=$WORK/venv
"$PY" "$ROOT/scripts/layered_venv.py" "$venv" --without wirecheck > "$OUT/venv.log" 2>&1 \
  || { cat "$OUT/venv.log"; exit 2; }
timed "pip install the wheel" "$OUT/install.log" "$venv/bin/python" -m pip install --find-links "$WHEELS" "$wheel" \
  || { tail -20 "$OUT/install.log"; exit 2; }
grep -E "^Successfully installed" "$OUT/install.log"
timed "bytecode cache" "$OUT/bytecode.log" "$venv/bin/python" -m wirecheck.workers.bytecode
tail -2 "$OUT/bytecode.log"

# -- from an empty folder ------------------------------------------------------------------------------------
run=$WORK/run
mkdir -p "$run" && cd "$run" || exit 2
"$venv/bin/wirecheck" --version
"$venv/bin/python" -c 'import os, sys, torch, deepspeed, wirecheck, pytest_wirecheck
for m in (wirecheck, pytest_wirecheck, torch, deepspeed):
    version = getattr(m, "__version__", "")
    print(f"  {m.__name__:17} {version:14} {os.path.dirname(m.__file__)}")
bad = [p for p in sys.path if p and os.path.realpath(p).startswith(os.path.realpath(sys.argv[1]) + os.sep)]
print("  the checkout on sys.path:", bad or "no")
sys.exit(1 if bad else 0)' "$ROOT" || { log "the checkout is on the path: not the wheel alone"; exit 2; }

log "== wirecheck validate ${VALIDATE_ARGS[*]} (from $run)"
timed "wirecheck validate ${VALIDATE_ARGS[*]}" "$OUT/validate.log" "$venv/bin/wirecheck" validate "${VALIDATE_ARGS[@]}" \
  --wirecheck-json "$OUT/quick.jsonl"
validate_rc=$?
grep -E "passed|failed|^wirecheck" "$OUT/validate.log" | tail -8

log "== wirecheck judge quick.jsonl"
timed "wirecheck judge" "$OUT/judge.log" "$venv/bin/wirecheck" judge "$OUT/quick.jsonl"
judge_rc=$?
tail -4 "$OUT/judge.log"

if [ "$validate_rc" -eq "$accepted" ] && [ "$judge_rc" -eq "$accepted" ]; then
  log "done: the installed wheel ran validate and judge from an empty folder (validate exit $validate_rc, judge exit $judge_rc) in $SECONDS s"
  exit 0
fi
log "done: validate exit $validate_rc, judge exit $judge_rc (expected $accepted both) in $SECONDS s"
exit 1
