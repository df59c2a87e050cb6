#!/usr/bin/env bash
# The built wheel as a fleet gets the tool: no checkout, no editable install.
#
#   bash scripts/ci/wheel_check.sh [WORKDIR]   (from anywhere; .ci/run calls it; about a minute on 2 quiet cores)
#
# 1. builds the sdist from the tracked files, then the wheel from the sdist (so a file the sdist lacks is
#    missing from the wheel too), and holds the wheel's files to the tree's (selftests/test_install.py's rule);
# 2. installs the wheel (pip --no-deps) into a venv layered over the checkout's .venv for its stack, less the
#    checkout's own editable wirecheck (scripts/layered_venv.py --without wirecheck), and into a venv of
#    PyYAML and matplotlib alone (--only: no torch, no pytest);
# 3. from empty folders, runs every command a fleet uses on its records and checks each exit code: a
#    small simulated validate, judge, report, limits, plan, calibrate, diagnose (the plan), advise, memory,
#    fleet report, node-state; judge and report again without torch.
# Exits 1 naming every command that did not exit as expected (its output is shown, and kept in WORKDIR/logs),
# 2 when the wheel could not be built or installed. WORKDIR (default a new folder in /tmp, removed when all
# went well) gets the copy of the tree, dist/, the venvs, the records and the logs. Nothing is downloaded. PYTHON: the interpreter that
# builds (default the checkout's .venv/bin/python, made by install.sh).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
if [ $# -gt 0 ]; then WORK=$1; else WORK=$(mktemp -d /tmp/wheel-check.XXXXXX); temporary=1; fi
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
LOGS=$WORK/logs
REC=$WORK/records
mkdir -p "$LOGS" "$REC"
start=$SECONDS
say() { echo "wheel_check: $*"; }
die() { say "FAILED: $*"; exit 2; }
# pip: only what the command line names (no index, no configured wheel folders), and quiet about this machine's settings
export PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
unset PIP_FIND_LINKS PIP_EXTRA_INDEX_URL PIP_INDEX_URL PIP_CONSTRAINT PYTHONPATH
export MPLBACKEND=Agg
[ -x "$PY" ] || die "$PY: no such interpreter (run ./install.sh first, or set PYTHON to one with setuptools and the stack)"

# -- 1. sdist, then the wheel from it -------------------------------------------------------------------------
src=$WORK/src
rm -rf "$src" "$WORK/dist" && mkdir -p "$src" "$WORK/dist"
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
  # what a clone holds: tracked files and the untracked ones git does not ignore (no .venv, build/, egg-info)
  (cd "$ROOT" && git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
     [ -e "$f" ] && printf '%s\0' "$f"; done | tar --null -T - -cf -) | tar -C "$src" -xf - || die "cannot copy the tree"
else
  tar -C "$ROOT" --exclude=./.git --exclude=./.venv --exclude=./.whl --exclude=./build --exclude=./dist \
      --exclude='*.egg-info' --exclude=__pycache__ -cf - . | tar -C "$src" -xf - || die "cannot copy the tree"
fi
(cd "$src" && "$PY" -c 'import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))' \
   "$WORK/dist") > "$LOGS/sdist.log" 2>&1 || { tail -20 "$LOGS/sdist.log"; die "the sdist did not build (above)"; }
sdist=$(ls "$WORK"/dist/wirecheck-*.tar.gz)
"$PY" -m pip wheel -q --no-deps --no-build-isolation "$sdist" -w "$WORK/dist" > "$LOGS/wheel.log" 2>&1 \
  || { tail -20 "$LOGS/wheel.log"; die "the wheel did not build from $sdist (above)"; }
wheel=$(ls "$WORK"/dist/wirecheck-*.whl)
say "built $(basename "$sdist") and, from it, $(basename "$wheel") in $((SECONDS - start)) s"
"$PY" - "$wheel" "$ROOT/selftests" <<'PY' || die "the wheel is not the tree (above)"
import sys, zipfile
sys.path.insert(0, sys.argv[2])
from test_install import expected_wheel_files  # the one statement of what the wheel holds
names = {n for n in zipfile.ZipFile(sys.argv[1]).namelist() if ".dist-info/" not in n}
expected = expected_wheel_files()
for what, files in (("missing from the wheel", expected - names), ("in the wheel but not in the tree", names - expected)):
    if files:
        print(f"wheel_check: {what}: {', '.join(sorted(files))}")
sys.exit(names != expected)
PY

# -- 2. two venvs, the wheel in each ---------------------------------------------------------------------------
make_venv() {  # DIR LAYERED_VENV_OPTIONS...
  local dir=$1; shift
  rm -rf "$dir"
  "$PY" "$ROOT/scripts/layered_venv.py" "$dir" "$@" > "$LOGS/$(basename "$dir").log" 2>&1 \
    && "$PY" -m pip --python "$dir/bin/python" install -q --no-deps "$wheel" >> "$LOGS/$(basename "$dir").log" 2>&1 \
    || { tail -20 "$LOGS/$(basename "$dir").log"; die "cannot install the wheel into $dir (above)"; }
}
make_venv "$WORK/venv" --without wirecheck
make_venv "$WORK/venv-notorch" --only pyyaml matplotlib jinja2
# Each venv holds this wheel's wirecheck and no other (no checkout on any path); torch is there or not, as meant.
where='import importlib.metadata as m, importlib.util as u, sys, wirecheck, pytest_wirecheck
found = [d._path for d in m.distributions() if d.metadata["Name"] == "wirecheck"]
inside = all(f.startswith(sys.prefix + "/") for f in (wirecheck.__file__, pytest_wirecheck.__file__))
torch = u.find_spec("torch") is not None
print(f"wirecheck {wirecheck.__file__}, {len(found)} wirecheck distribution(s), torch {torch}")
sys.exit(not (inside and len(found) == 1 and torch == (sys.argv[1] == "torch")))'
mkdir -p "$WORK/empty"
(cd "$WORK/empty" && "$WORK/venv/bin/python" -c "$where" torch) || die "the venv does not hold the wheel alone (above)"
(cd "$WORK/empty" && "$WORK/venv-notorch/bin/python" -c "$where" none) || die "the torch-free venv is not so (above)"
say "installed into two venvs in $((SECONDS - start)) s"

# -- 3. the commands, from empty folders --------------------------------------------------------------------------
HW=$ROOT/fixtures/reference/h200-sxm-2
cp "$HW/wirecheck-2026-12-01b/run1.jsonl" "$REC/2xh200.jsonl"  # a 2x H200 acceptance run, passes
cp "$ROOT/fixtures/reference/h200-1/wirecheck-2026-12-01-after/quick.jsonl" "$REC/1xh200-quick.jsonl"  # passes too
for i in 1 2 3; do cp "$HW/wirecheck-2026-12-01/run$i.jsonl" "$REC/clean$i.jsonl"; done  # three clean runs
cp "$ROOT/fixtures/reference/h200-1/wirecheck-2026-12-01-after/diagnose/slowed.jsonl" "$REC/slowed.jsonl"  # one failure
# each node's own run: its host in the header (one record copied under three names is one run, judged once)
mkdir -p "$REC/fleet" && for n in node01 node02 node03; do
  sed '1s/"host": "[^"]*"/"host": "'"$n"'"/' "$REC/2xh200.jsonl" > "$REC/fleet/$n.jsonl"
done

failed=()
n=0
# expect CODE TEXT VENV COMMAND...: run `VENV/bin/COMMAND...` from an empty folder of its own; its exit code
# must be CODE and its output must hold TEXT ("" for none). Prints one line, and the output when it failed.
expect() {
  local want=$1 text=$2 venv=$3; shift 3
  n=$((n + 1))
  local dir=$WORK/run/$n log=$LOGS/$n-$1-$2.log t0=$SECONDS rc
  mkdir -p "$dir"
  (cd "$dir" && exec "$venv/bin/$@") > "$log" 2>&1
  rc=$?
  local line="exit $rc, $((SECONDS - t0)) s: $(basename "$venv")/bin/$*"
  if [ "$rc" -eq "$want" ] && { [ -z "$text" ] || grep -qF -- "$text" "$log"; }; then
    echo "  ok   $line"
  else
    echo "  FAIL $line (expected exit $want${text:+ and \"$text\"})"
    sed 's/^/       | /' "$log" | tail -25
    failed+=("$(basename "$venv")/bin/$* (exit $rc, expected $want)")
  fi
}
V=$WORK/venv
expect 0 "wirecheck $("$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import wirecheck; print(wirecheck.__version__)' "$ROOT/src") from $V/" \
  "$V" wirecheck --version
expect 10 "no failures, exit 10" "$V" wirecheck validate --simulate=h200-sxm-2 --level quick --placement nvswitch \
  -k "inventory or large_all_reduce" --wirecheck-json "$REC/sim.jsonl"
expect 10 "judged a simulated run" "$V" wirecheck judge "$REC/sim.jsonl"
expect 0 "" "$V" wirecheck report "$REC/sim.jsonl" -o "$WORK/sim.html"
expect 0 "" "$V" wirecheck limits --profile h200-sxm-8
expect 0 "" "$V" wirecheck plan --profile h200-sxm-8 --level quick
# three runs: the floors whose noise would put them more than 10 % under the median are refused, and left out
# by name as selftests/test_calibrate.py does (an operator gives 10 runs or more instead)
expect 0 "" "$V" wirecheck calibrate "$REC"/clean{1,2,3}.jsonl -o "$WORK/site.yaml" \
  --leave-out collectives.floors.forced_pcie.all_reduce.2 --leave-out collectives.floors.pair.all_reduce.2 --leave-out h2d
expect 0 "wirecheck judge: PASSED" "$V" wirecheck judge "$REC/clean1.jsonl" --thresholds "$WORK/site.yaml"
expect 23 "" "$V" wirecheck diagnose "$REC/slowed.jsonl"
expect 0 "" "$V" wirecheck advise --params 7B --gpus 2 --record "$REC/2xh200.jsonl"
expect 0 "" "$V" wirecheck memory --params 7B --gpus 4
expect 0 "PASSED: 0 of 3 node(s) failed" "$V" wirecheck fleet report "$REC/fleet" --expect 3
expect 2 "" "$V" wirecheck node-state --exit-code 10 --record "$REC/sim.jsonl"  # a simulation: unknown, act on nothing
V=$WORK/venv-notorch
expect 0 "wirecheck judge: PASSED" "$V" wirecheck judge "$REC/2xh200.jsonl"
expect 10 "judged a simulated run" "$V" wirecheck judge "$REC/sim.jsonl"
expect 0 "" "$V" wirecheck report "$REC/1xh200-quick.jsonl" -o "$WORK/1xh200.html"  # a GPU run's page (its figures)
for page in "$WORK/sim.html" "$WORK/1xh200.html"; do
  [ "$(stat -c %s "$page" 2>/dev/null || echo 0)" -gt 10000 ] || failed+=("wirecheck report: $page missing or under 10 kB")
done

if [ ${#failed[@]} -gt 0 ]; then
  say "FAILED: ${#failed[@]} command(s) of the installed wheel did not exit as expected (logs in $LOGS):"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
say "the wheel, installed without the checkout: $n commands as expected, in $((SECONDS - start)) s"
[ -z "${temporary:-}" ] || rm -rf "$WORK"
